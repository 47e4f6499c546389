/* The host's text work of a decide pass: 144 criteria suffixes of 4 options (as td_decide renders them) tokenized by
 * td_tokenize, then through the decider's suffix cache (first: tokenized and kept; then: found), median of ROUNDS.
 * Usage: bench/suffix_tokens.sh [MODEL_DIR] (one JSON line). */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "decide/decide_internal.h"
#include "util/alloc.h"

#define N 144
#define ROUNDS 9

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return 1e3 * (double)t.tv_sec + 1e-6 * (double)t.tv_nsec;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    const char *dir = argc > 1 ? argv[1] : "models/demo-qwen3";
    td_model *m = NULL;
    td_decider *d = NULL;
    if (td_model_load(dir, NULL, &m) != TD_OK || td_decider_new(m, NULL, &d) != TD_OK) {
        fprintf(stderr, "suffix_tokens: %s\n", td_last_error());
        return 1;
    }
    static char text[N][300];
    for (int i = 0; i < N; i++)
        snprintf(text[i], sizeof text[i], "\nCriterion: Does ticket %d mention a problem with the customer's invoice or "
                 "billing address?\nOptions:\nA. Yes, clearly\nB. Only indirectly\nC. No\nD. Cannot tell from the "
                 "text\nAnswer:", i);
    double tok[ROUNDS], found[ROUNDS], first = 0;
    for (int r = 0; r < ROUNDS; r++) {
        for (int pass = 0; pass < 2; pass++) {
            double t0 = now_ms();
            for (int i = 0; i < N; i++) {
                int32_t *ids = NULL;
                size_t n = 0;
                td_status st = pass ? td_suffix_tokens(d, text[i], strlen(text[i]), &ids, &n)
                                    : td_tokenize(td_model_tokenizer(m), text[i], strlen(text[i]), 0, &ids, &n);
                if (st != TD_OK) return 1;
                td_free(ids);
            }
            double ms = now_ms() - t0;
            if (pass && r == 0) first = ms;
            (pass ? found : tok)[r] = ms;
        }
    }
    qsort(tok, ROUNDS, sizeof *tok, cmp);
    qsort(found + 1, ROUNDS - 1, sizeof *found, cmp);
    printf("{\"bench\": \"suffix_tokens\", \"model\": \"%s\", \"suffixes\": %d, \"td_tokenize_ms\": %.3f, "
           "\"cache_first_ms\": %.3f, \"cache_found_ms\": %.3f}\n",
           dir, N, tok[ROUNDS / 2], first, found[1 + (ROUNDS - 1) / 2]);
    td_decider_free(d);
    td_model_free(m);
    return 0;
}
