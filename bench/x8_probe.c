/* The AVX2 x8 kernel alone: td_matmul_x8_avx2 of the library it is linked with (bench/x8_probe.sh links it with the
 * working tree's and with PREV's, packing and quantisers included, and runs the two in alternation), one thread,
 * on random Q8_0 or Q4_0 weights and activations, its output checked against td_matmul_x8_ref. Not part of the
 * engine.
 *
 *   x8_probe [--type q8_0|q4_0] [--rows R] [--cols C] [--tokens T] [--reps N] [--name NAME]
 *
 * Prints one JSON line: GMAC/s (best and median of N) and whether the kernel matches the reference. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "probe_product.h"

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    int64_t rows = 3072, cols = 1024, T = 512;
    int reps = 9;
    td_dtype type = TD_DTYPE_Q4_0;
    const char *name = "x8";
    for (int i = 1; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(argv[i], "--rows") && v) rows = atoll(v), i++;
        else if (!strcmp(argv[i], "--cols") && v) cols = atoll(v), i++;
        else if (!strcmp(argv[i], "--tokens") && v) T = atoll(v), i++;
        else if (!strcmp(argv[i], "--reps") && v) reps = atoi(v), i++;
        else if (!strcmp(argv[i], "--name") && v) name = v, i++;
        else if (!strcmp(argv[i], "--type") && v && (!strcmp(v, "q8_0") || !strcmp(v, "q4_0")))
            type = !strcmp(v, "q8_0") ? TD_DTYPE_Q8_0 : TD_DTYPE_Q4_0, i++;
        else {
            fprintf(stderr, "usage: x8_probe [--type q8_0|q4_0] [--rows R] [--cols C] [--tokens T] [--reps N] [--name NAME]\n");
            return 2;
        }
    }
    if (rows < 1 || cols < 256 || cols % 256 || T < 1 || reps < 1 || reps > 99) {
        fprintf(stderr, "x8_probe: rows >= 1, cols a multiple of 256, tokens >= 1, reps 1..99\n");
        return 2;
    }
    probe_product pp;
    probe_product_new(&pp, type, rows, cols, T, TD_X8_LANES);
    const td_mat w = pp.w;
    const td_qrows xq = pp.xq;
    float *y = pp.y, *yr = pp.yr;
    td_matmul_x8_ref(&w, NULL, &xq, T, yr, rows, 0, rows);
    double times[99];
    memset(y, 0, (size_t)T * rows * sizeof *y);
    td_matmul_x8_avx2(&w, NULL, &xq, T, y, rows, 0, rows); /* warm-up, and the check */
    int exact = memcmp(y, yr, (size_t)T * rows * sizeof *y) == 0;
    for (int r = 0; r < reps; r++) {
        double t0 = now();
        td_matmul_x8_avx2(&w, NULL, &xq, T, y, rows, 0, rows);
        times[r] = now() - t0;
    }
    qsort(times, (size_t)reps, sizeof(double), cmp_double);
    double macs = (double)rows * cols * T;
    printf("{\"variant\": \"%s\", \"type\": \"%s\", \"rows\": %lld, \"cols\": %lld, \"tokens\": %lld, "
           "\"gmac_s_best\": %.2f, \"gmac_s_median\": %.2f, \"matches_reference\": %s}\n",
           name, type == TD_DTYPE_Q8_0 ? "q8_0" : "q4_0", (long long)rows, (long long)cols, (long long)T,
           macs / times[0] / 1e9, macs / times[reps / 2] / 1e9, exact ? "true" : "false");
    probe_product_free(&pp);
    return 0;
}
