/* The matmul kernels of two trees, one thread, on the same data: "old" (a base revision's matmul_avx2.c,
 * matmul_quant_avx2.c, matmul_x8_avx2.c, matmul_x16_avx512.c, matmul_bf16_avx512.c, their symbols renamed old_*) and
 * "new" (the working tree's). A 3072 x 1024 matrix (qwen3-0.6b's MLP; argv[2], argv[3]: other rows and columns, multiples
 * of 32) at 1, 2, 3, 5, 32 and 67 tokens, in chunks of
 * 62 rows (a remainder tile in both paths: 62 = 7 x 8 + 6 = 15 x 4 + 2), every kernel path that a tile shape reaches.
 * Best of N passes (argv[1], default 60), old and new alternating pass by pass (a busy machine slows both alike; the
 * best pass is the least disturbed). One JSON line per kernel and T. Built and run by bench/kernel_ab.sh. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "kernels/cpu/kernels.h"
#include "kernels/cpu/quant.h"
#include "util/half.h"
#define DECL(n) void n(const td_mat *w, const int32_t *rows, const void *xq, int64_t T, float *y, int64_t ldy, int64_t j0, int64_t j1);
DECL(old_td_matmul_quant_avx2) DECL(old_td_matmul_x8_avx2) DECL(old_td_matmul_x16_avx512) DECL(old_td_matmul_bf16_avx512)
void old_td_matmul_avx2(const td_mat *w, const int32_t *rows, const float *x, const void *xq, int64_t T, int64_t ldx, float *y, int64_t ldy, int64_t j0, int64_t j1);
typedef void (*qfn)(const td_mat *, const int32_t *, const void *, int64_t, float *, int64_t, int64_t, int64_t);
static double now_s(void) { struct timespec ts; clock_gettime(CLOCK_MONOTONIC, &ts); return ts.tv_sec + ts.tv_nsec * 1e-9; }
static uint64_t rng = 0x9e3779b97f4a7c15u;
static float frand(void) { rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17; return (float)(rng >> 40) / (float)(1u << 24) * 2.0f - 1.0f; }
enum { CH = 62 };
static const td_mat *W; static const float *X; static const void *XQ; static float *Y; static int64_t TT;
static double pass_f(int old) {
    double t0 = now_s();
    for (int64_t j = 0; j < W->rows; j += CH) {
        int64_t j1 = j + CH < W->rows ? j + CH : W->rows;
        (old ? old_td_matmul_avx2 : td_matmul_avx2)(W, NULL, X, NULL, TT, W->cols, Y, W->rows, j, j1);
    }
    return now_s() - t0;
}
static qfn QO, QN;
static double pass_q(int old) {
    double t0 = now_s();
    for (int64_t j = 0; j < W->rows; j += CH) {
        int64_t j1 = j + CH < W->rows ? j + CH : W->rows;
        (old ? QO : QN)(W, NULL, XQ, TT, Y, W->rows, j, j1);
    }
    return now_s() - t0;
}
static void run(const char *name, double (*pass)(int), int64_t T, int reps) {
    double b[2] = {1e30, 1e30};
    for (int r = 0; r < reps; r++)
        for (int k = 0; k < 2; k++) { int o = (r & 1) ? 1 - k : k; double t = pass(o); if (t < b[o]) b[o] = t; }
    double macs = (double)W->rows * W->cols * T * 1e-9;
    printf("{\"kernel\": \"%s\", \"rows\": %d, \"cols\": %d, \"T\": %d, \"old_gmac_s\": %.3f, \"new_gmac_s\": %.3f, \"new_over_old\": %.3f}\n", name, (int)W->rows, (int)W->cols, (int)T, macs / b[1], macs / b[0], b[1] / b[0]);
    fflush(stdout);
}
int main(int argc, char **argv) {
    int reps = argc > 1 ? atoi(argv[1]) : 60;
    const int64_t R = argc > 3 ? atoll(argv[2]) : 3072, C = argc > 3 ? atoll(argv[3]) : 1024, Tmax = 67;
    if (R < 1 || R > 65536 || C < 32 || C > 65536 || C % 32) {
        fprintf(stderr, "kernel_ab: rows 1..65536 and columns a multiple of 32 up to 65536\n");
        return 1;
    }
    static const int64_t Ts[] = {1, 2, 3, 5, 32, 67};
    float *wf = malloc(sizeof(float) * R * C), *x = malloc(sizeof(float) * C * Tmax), *y = malloc(sizeof(float) * R * Tmax);
    for (int64_t i = 0; i < R * C; i++) wf[i] = frand();
    for (int64_t i = 0; i < C * Tmax; i++) x[i] = frand();
    X = x, Y = y;
    /* F32, BF16 weights through td_matmul_avx2 */
    uint16_t *wb = malloc((size_t)R * (size_t)C * 2);
    for (int64_t i = 0; i < R * C; i++) wb[i] = td_f32_to_bf16_daz(wf[i]);
    td_mat mf = {TD_DTYPE_F32, R, C, C * 4, wf, NULL}, mb = {TD_DTYPE_BF16, R, C, C * 2, wb, NULL};
    for (int i = 0; i < 6; i++) { W = &mf, TT = Ts[i]; run("avx2 f32", pass_f, TT, reps); }
    for (int i = 0; i < 6; i++) { W = &mb, TT = Ts[i]; run("avx2 bf16", pass_f, TT, reps); }
    /* bf16 x bf16 (AVX-512 BF16) */
    void *qbuf = aligned_alloc(64, td_qrows_bytes(Tmax, C) + 64);
    QO = old_td_matmul_bf16_avx512, QN = td_matmul_bf16_avx512;
    for (int i = 0; i < 6; i++) {
        td_qrows xq; TT = Ts[i];
        td_qrows_bind(&xq, qbuf, TT, C, TD_QROWS_BF16); td_quantize_rows_ref(x, C, &xq, 0, TT);
        W = &mb, XQ = &xq; run("bf16_avx512", pass_q, TT, reps);
    }
    /* Q8_0 / Q4_0: unpacked (quant_avx2), x8, x16 */
    for (int q = 0; q < 2; q++) {
        td_dtype type = q ? TD_DTYPE_Q4_0 : TD_DTYPE_Q8_0;
        size_t rb = q ? (C / 32) * sizeof(td_block_q4_0) : (C / 32) * sizeof(td_block_q8_0);
        unsigned char *wd = malloc(rb * R);
        for (int64_t r = 0; r < R; r++) {
            if (q) td_quantize_q4_0(wf + r * C, (td_block_q4_0 *)(void *)(wd + r * rb), C);
            else td_quantize_q8_0(wf + r * C, (td_block_q8_0 *)(void *)(wd + r * rb), C);
        }
        td_qpack *p8 = td_qpack_new(type, R, C, wd, rb, TD_X8_LANES), *p16 = td_qpack_new(type, R, C, wd, rb, TD_X16_LANES);
        td_mat mu = {type, R, C, rb, wd, NULL}, m8 = {type, R, C, rb, wd, p8}, m16 = {type, R, C, rb, wd, p16};
        struct { const char *n; td_mat *m; qfn o, nw; } k[3] = {
            {q ? "quant_avx2 q4_0" : "quant_avx2 q8_0", &mu, old_td_matmul_quant_avx2, td_matmul_quant_avx2},
            {q ? "x8_avx2 q4_0" : "x8_avx2 q8_0", &m8, old_td_matmul_x8_avx2, td_matmul_x8_avx2},
            {q ? "x16_avx512 q4_0" : "x16_avx512 q8_0", &m16, old_td_matmul_x16_avx512, td_matmul_x16_avx512}};
        for (int a = 0; a < 3; a++)
            for (int i = 0; i < 6; i++) {
                td_qrows xq; TT = Ts[i];
                td_qrows_bind(&xq, qbuf, TT, C, td_qrows_layout(type, k[a].m->pack)); td_quantize_rows_ref(x, C, &xq, 0, TT);
                W = k[a].m, XQ = &xq, QO = k[a].o, QN = k[a].nw; run(k[a].n, pass_q, TT, reps);
            }
    }
    return 0;
}
