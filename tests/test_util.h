/* Minimal test harness: CHECK macros that count failures, and helpers shared by the test binaries. */
#ifndef TD_TESTS_TEST_UTIL_H
#define TD_TESTS_TEST_UTIL_H

#include <stdio.h>
#include <stdint.h>
#include <stddef.h>

extern int td_test_failures;

#define CHECK(cond)                                                                                              \
    do {                                                                                                         \
        if (!(cond)) {                                                                                           \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);                            \
            td_test_failures++;                                                                                  \
        }                                                                                                        \
    } while (0)

#define CHECKF(cond, ...)                                                                                        \
    do {                                                                                                         \
        if (!(cond)) {                                                                                           \
            fprintf(stderr, "%s:%d: CHECK failed: %s: ", __FILE__, __LINE__, #cond);                            \
            fprintf(stderr, __VA_ARGS__);                                                                        \
            fputc('\n', stderr);                                                                                 \
            td_test_failures++;                                                                                  \
        }                                                                                                        \
    } while (0)

/* Exit code for main(): prints a summary. */
int td_test_finish(const char *name);

/* Deterministic random numbers for tests. */
uint64_t td_test_rand(uint64_t *state);
float td_test_uniform(uint64_t *state, float lo, float hi);

/* Path under the repository root ($TD_ROOT or "."); returns a static buffer. */
const char *td_test_path(const char *rel);

/* Reads a whole file; returns NULL if missing. */
void *td_test_read(const char *path, size_t *len);

/* max |a - b| / max |b| over n values (NaN counts as the largest difference). */
double td_test_rel_diff(const float *a, const float *b, int64_t n);

/* 1 when running under the sanitizer build (TD_SANITIZED set): slow tests shrink. */
int td_test_sanitized(void);

#endif
