/* Where the AMX kernel's time goes: td_matmul_r16_amx and variants of it with parts taken out (bench/amx_probe.sh
 * makes them from src/kernels/cpu/matmul_r16_amx.c, each renamed td_matmul_r16_amx_<name>), timed on one product
 * of random Q8_0 weights and activations at one thread. The variants' results are wrong by design; only "full" is
 * the kernel, and its output is checked against td_matmul_r16_ref. Not part of the engine.
 *
 *   amx_probe [--rows R] [--cols C] [--tokens T] [--reps N]
 *
 * Prints one JSON line per variant: GMAC/s (best of N) and ns per block of a slab pair (16 rows x 2 slabs x up to 16
 * tokens x 32 columns). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "probe_product.h"

typedef void (*product_fn)(const td_mat *w, const int32_t *rows, const void *xq, int64_t T, float *y, int64_t ldy,
                           int64_t j0, int64_t j1);
#define DECLARE(name) \
    void td_matmul_r16_amx_##name(const td_mat *w, const int32_t *rows, const void *xq, int64_t T, float *y, \
                                  int64_t ldy, int64_t j0, int64_t j1);
AMX_PROBE_VARIANTS(DECLARE)
#define ENTRY(name) {#name, td_matmul_r16_amx_##name},
static const struct {
    const char *name;
    product_fn fn;
} variants[] = {AMX_PROBE_VARIANTS(ENTRY)};

int main(int argc, char **argv) {
    int64_t rows = 3072, cols = 1024, T = 256;
    int reps = 5;
    for (int i = 1; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(argv[i], "--rows") && v) rows = atoll(v), i++;
        else if (!strcmp(argv[i], "--cols") && v) cols = atoll(v), i++;
        else if (!strcmp(argv[i], "--tokens") && v) T = atoll(v), i++;
        else if (!strcmp(argv[i], "--reps") && v) reps = atoi(v), i++;
        else {
            fprintf(stderr, "usage: amx_probe [--rows R] [--cols C] [--tokens T] [--reps N]\n");
            return 2;
        }
    }
    if (rows < 16 || rows % 16 || cols < 32 || cols % 32 || T < 16 || reps < 1) {
        fprintf(stderr, "amx_probe: rows a multiple of 16, cols of 32, tokens >= 16, reps >= 1\n");
        return 2;
    }
    if (!td_cpu_has_amx()) {
        fprintf(stderr, "amx_probe: this CPU (or its OS) offers no AMX tiles\n");
        return 1;
    }
    probe_product pp;
    probe_product_new(&pp, TD_DTYPE_Q8_0, rows, cols, T, TD_R16_LANES);
    const td_mat w = pp.w;
    const td_qrows xq = pp.xq;
    float *y = pp.y, *yr = pp.yr;
    td_matmul_r16_ref(&w, NULL, &xq, T, yr, rows, 0, rows);
    double iters = (double)(rows / 32) * (double)(cols / 32) * (double)((T + 15) / 16);
    for (size_t v = 0; v < sizeof variants / sizeof variants[0]; v++) {
        double best = 1e30;
        for (int r = 0; r < reps; r++) {
            double t0 = now();
            variants[v].fn(&w, NULL, &xq, T, y, rows, 0, rows);
            double dt = now() - t0;
            best = dt < best ? dt : best;
        }
        int exact = memcmp(y, yr, (size_t)T * rows * sizeof *y) == 0;
        printf("{\"variant\": \"%s\", \"rows\": %lld, \"cols\": %lld, \"tokens\": %lld, \"best_s\": %.6f, "
               "\"gmac_s\": %.2f, \"ns_per_block_pair\": %.2f, \"matches_reference\": %s}\n",
               variants[v].name, (long long)rows, (long long)cols, (long long)T, best,
               (double)rows * cols * T / best / 1e9, best / iters * 1e9, exact ? "true" : "false");
    }
    probe_product_free(&pp);
    return 0;
}
