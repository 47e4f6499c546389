/* What the CUDA kernel tests share: device copies, random inputs, and the verdicts they print one line each for. A
 * failed CUDA call or check counts in td_test_failures (test_util.h). */
#ifndef TD_TESTS_CUDA_TEST_H
#define TD_TESTS_CUDA_TEST_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/cuda/cuda.h"
#include "test_util.h"

/* A CUDA call that must return 0: else the runtime's words are printed with the line, and the test fails. */
#define CU(call) cu_test_ok((call) == 0, #call, __FILE__, __LINE__)
int cu_test_ok(int ok, const char *what, const char *file, int line);

/* The device a test runs on: prints "device: NAME, N GiB" and returns 1; without a usable one prints "TEST: skipped:
 * why" and returns 0 (main then exits 77, a skip). */
int cu_test_device(const char *test);

void *cu_up(const void *h, size_t bytes);           /* a device copy of h, or zeros when h is NULL; exits if out */
void cu_down(void *h, const void *d, size_t bytes); /* device to host, waited for */

float *cu_rnd(uint64_t *seed, int64_t n, float lo, float hi); /* n uniform floats (malloc) */
void cu_shuffle(uint64_t *seed, int32_t *a, int64_t n);
/* Distance in units in the last place (NaN against NaN: 0; NaN against a number: huge). */
int64_t cu_ulps(float a, float b);

/* Verdicts: a and b (n floats) equal bit for bit; within tol ulps; within tol relative (td_test_rel_diff). */
void cu_bits(const char *name, const float *a, const float *b, int64_t n);
void cu_within_ulps(const char *name, const float *a, const float *b, int64_t n, int64_t tol);
void cu_within_rel(const char *name, const float *a, const float *b, int64_t n, double tol);

#endif
