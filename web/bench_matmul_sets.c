/* The quantised products of the SIMD128 set (td_matmul_wasm128) against the relaxed SIMD module
 * (td_matmul_wasm_relaxed_module: both formats through it; the set wasm128r takes it for Q4_0 only), one thread:
 * Q8_0 and Q4_0 matrices of qwen3-0.6b's MLP shape (3072 x 1024) at 1, 2, 3, 4 and 32 tokens, GMAC/s, best of 25
 * passes over the matrix in the engine's 64-row chunks after 8 of warm-up, the two alternating pass by pass (a busy
 * machine slows both alike; the best pass is the one least disturbed). Built and run in headless Chromium by
 * web/bench_matmul_browser.mjs (relaxed SIMD runs there, not in Node 20); prints one JSON line. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/cpu/kernels_wasm.h"
#include "kernels/cpu/quant.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static uint64_t rng = 0x9e3779b97f4a7c15u;
static float frand(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (float)(rng >> 40) / (float)(1u << 24) * 2.0f - 1.0f;
}

static double pass(td_matmul_fn f, const td_mat *w, const float *x, const void *xq, int64_t T, float *y) {
    double t0 = now_s();
    for (int64_t j = 0; j < w->rows; j += 64)
        f(w, NULL, x, xq, T, w->cols, y, w->rows, j, j + 64 < w->rows ? j + 64 : w->rows);
    return now_s() - t0;
}

int main(void) {
    const int64_t R = 3072, C = 1024, Tmax = 32;
    if (!td_wasm_relaxed_available()) {
        printf("{\"error\": \"this engine does not run the relaxed SIMD set\"}\n");
        return 1;
    }
    float *row = malloc(sizeof(float) * (size_t)C), *x = malloc(sizeof(float) * (size_t)(C * Tmax));
    float *y = malloc(sizeof(float) * (size_t)(R * Tmax));
    for (int64_t i = 0; i < C * Tmax; i++) x[i] = frand();
    static const td_dtype types[] = {TD_DTYPE_Q8_0, TD_DTYPE_Q4_0};
    static const char *const names[] = {"q8_0", "q4_0"};
    static const int64_t Ts[] = {1, 2, 3, 4, 32};
    printf("{");
    for (int a = 0; a < 2; a++) {
        td_dtype type = types[a];
        size_t rb = type == TD_DTYPE_Q8_0 ? (size_t)(C / 32) * sizeof(td_block_q8_0)
                                          : (size_t)(C / 32) * sizeof(td_block_q4_0);
        unsigned char *wd = malloc(rb * (size_t)R);
        for (int64_t r = 0; r < R; r++) {
            for (int64_t k = 0; k < C; k++) row[k] = frand();
            if (type == TD_DTYPE_Q8_0) td_quantize_q8_0(row, (td_block_q8_0 *)(void *)(wd + r * rb), C);
            else td_quantize_q4_0(row, (td_block_q4_0 *)(void *)(wd + r * rb), C);
        }
        td_mat w = {type, R, C, rb, wd, NULL};
        void *qbuf = malloc(td_qrows_bytes(Tmax, C) + 64);
        for (int i = 0; i < 5; i++) {
            int64_t T = Ts[i];
            td_qrows xq;
            td_qrows_bind(&xq, qbuf, T, C, td_qrows_layout(type, NULL));
            td_quantize_rows_ref(x, C, &xq, 0, T);
            for (int rep = 0; rep < 8; rep++) /* warm-up: V8 tiers the code up (Liftoff, then TurboFan) */
                pass(td_matmul_wasm128, &w, x, &xq, T, y), pass(td_matmul_wasm_relaxed_module, &w, x, &xq, T, y);
            double b128 = 1e30, brel = 1e30;
            for (int rep = 0; rep < 25; rep++) {
                double t = pass(td_matmul_wasm128, &w, x, &xq, T, y);
                b128 = t < b128 ? t : b128;
                t = pass(td_matmul_wasm_relaxed_module, &w, x, &xq, T, y);
                brel = t < brel ? t : brel;
            }
            double macs = (double)R * (double)C * (double)T * 1e-9;
            printf("%s\"%s_t%d\": {\"wasm128_gmac_s\": %.3f, \"wasm128r_gmac_s\": %.3f, \"speedup\": %.3f}",
                   a || i ? ", " : "", names[a], (int)T, macs / b128, macs / brel, b128 / brel);
        }
        free(wd), free(qbuf);
    }
    printf("}\n");
    free(row), free(x), free(y);
    return 0;
}
