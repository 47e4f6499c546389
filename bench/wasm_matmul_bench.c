/* Speed of the WebAssembly products (td_matmul_wasm128) against the scalar reference, one thread, under Node:
 * a Q8_0 / Q4_0 / F32 matrix of qwen3-0.6b's MLP shape (3072 x 1024) at 1, 4 and 32 tokens, GMAC/s (best of 15
 * passes over the matrix in the engine's 64-row chunks). With -DTD_BENCH_OLD it also times
 * td_matmul_wasm128_old, an earlier matmul_wasm128.c renamed, in the same process (A/B on a busy machine).
 * Build and run: bench/wasm_matmul_bench.sh WASM_BUILD_DIR [OLD_COMMIT]. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/cpu/kernels_wasm.h"
#include "kernels/cpu/quant.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static uint64_t rng = 0x9e3779b97f4a7c15u;
static float frand(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (float)(rng >> 40) / (float)(1u << 24) * 2.0f - 1.0f;
}

#ifdef TD_BENCH_OLD
void td_matmul_wasm128_old(const td_mat *w, const int32_t *rows, const float *x, const void *xq, int64_t T,
                           int64_t ldx, float *y, int64_t ldy, int64_t j0, int64_t j1);
#endif

static double run(td_matmul_fn f, const td_mat *w, const float *x, const void *xq, int64_t T, float *y) {
    double best = 1e30;
    for (int rep = 0; rep < 15; rep++) {
        double t0 = now_s();
        for (int64_t j = 0; j < w->rows; j += 64) /* the engine's decode chunks */
            f(w, NULL, x, xq, T, w->cols, y, w->rows, j, j + 64 < w->rows ? j + 64 : w->rows);
        double t = now_s() - t0;
        best = t < best ? t : best;
    }
    return (double)w->rows * (double)w->cols * (double)T / best * 1e-9;
}

int main(int argc, char **argv) {
    int64_t R = 3072, C = 1024, Tmax = 32;
    int with_ref = argc > 1 && strcmp(argv[1], "ref") == 0;
    float *row = malloc(sizeof(float) * (size_t)C), *x = malloc(sizeof(float) * (size_t)(C * Tmax));
    float *y = malloc(sizeof(float) * (size_t)(R * Tmax));
    for (int64_t i = 0; i < C * Tmax; i++) x[i] = frand();
    static const td_dtype types[] = {TD_DTYPE_Q8_0, TD_DTYPE_Q4_0, TD_DTYPE_F32};
    static const char *const names[] = {"q8_0", "q4_0", "f32"};
    static const int64_t Ts[] = {1, 4, 32};
    for (int a = 0; a < 3; a++) {
        td_dtype type = types[a];
        size_t rb = type == TD_DTYPE_F32 ? (size_t)C * 4 : type == TD_DTYPE_Q8_0 ? (size_t)(C / 32) * sizeof(td_block_q8_0)
                                                                                : (size_t)(C / 32) * sizeof(td_block_q4_0);
        unsigned char *wd = malloc(rb * (size_t)R);
        for (int64_t r = 0; r < R; r++) {
            for (int64_t k = 0; k < C; k++) row[k] = frand();
            if (type == TD_DTYPE_F32) memcpy(wd + r * rb, row, rb);
            else if (type == TD_DTYPE_Q8_0) td_quantize_q8_0(row, (td_block_q8_0 *)(void *)(wd + r * rb), C);
            else td_quantize_q4_0(row, (td_block_q4_0 *)(void *)(wd + r * rb), C);
        }
        td_mat w = {type, R, C, rb, wd, NULL};
        void *qbuf = malloc(td_qrows_bytes(Tmax, C) + 64);
        for (int i = 0; i < 3; i++) {
            int64_t T = Ts[i];
            td_qrows xq;
            const void *xqp = NULL;
            if (td_dtype_is_block(type)) {
                td_qrows_bind(&xq, qbuf, T, C, td_qrows_layout(type, NULL));
                td_quantize_rows_ref(x, C, &xq, 0, T);
                xqp = &xq;
            }
            double g = run(td_matmul_wasm128, &w, x, xqp, T, y);
            double gr = with_ref ? run(td_matmul_ref, &w, x, xqp, T, y) : 0;
#ifdef TD_BENCH_OLD
            double go = run(td_matmul_wasm128_old, &w, x, xqp, T, y);
#else
            double go = 0;
#endif
            printf("%-5s T=%-3lld wasm128 %6.2f GMAC/s   old %6.2f   scalar %6.2f\n", names[a], (long long)T, g, go, gr);
        }
        free(wd), free(qbuf);
    }
    free(row), free(x), free(y);
    return 0;
}
