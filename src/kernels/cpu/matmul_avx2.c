/* Matrix product over F32 / F16 / BF16 weights, AVX2/FMA with fp32 accumulation (matmul_ref.c holds the
 * reference). td_matmul_avx2 is also the AVX2 kernel set's matmul slot: quantised weights go to
 * td_matmul_quant_avx2 (unpacked) or td_matmul_x8_avx2 (packed x8).
 *
 * Every output element is one dot product computed the same way whatever the tile it falls in: one 8-lane
 * accumulator over k in steps of 8 (fused multiply-add), a fixed horizontal sum, then the k % 8 tail added in
 * order. Tiles only decide how many of these independent dot products share each load (R rows x C tokens), so
 * results never depend on the batch size, the row range or the thread count. */
#include <immintrin.h>

#include "kernels/cpu/avx2_math.h"
#include "kernels/cpu/kernels.h"
#include "kernels/cpu/quant.h"
#include "util/half.h"

#define TB 64 /* tokens per block: a block of activations stays in L2 while the rows stream past */

static inline __attribute__((always_inline)) __m256 load8(td_dtype type, const void *row, int64_t k) {
    if (type == TD_DTYPE_F32) return _mm256_loadu_ps((const float *)row + k);
    __m128i h = _mm_loadu_si128((const __m128i *)((const uint16_t *)row + k));
    if (type == TD_DTYPE_F16) return _mm256_cvtph_ps(h);
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

static inline __attribute__((always_inline)) float load1(td_dtype type, const void *row, int64_t k) {
    if (type == TD_DTYPE_F32) return ((const float *)row)[k];
    if (type == TD_DTYPE_F16) return td_f16_to_f32(((const uint16_t *)row)[k]);
    return td_bf16_to_f32(((const uint16_t *)row)[k]);
}

/* R rows x C tokens of dot products of length n. */
static inline __attribute__((always_inline)) void tile(td_dtype type, int R, int C, const void *const *wr,
                                                       const float *x, int64_t ldx, int64_t n, float *y,
                                                       int64_t ldy) {
    __m256 acc[8][3];
    for (int r = 0; r < R; r++)
        for (int c = 0; c < C; c++) acc[r][c] = _mm256_setzero_ps();
    int64_t n8 = n & ~(int64_t)7;
    for (int64_t k = 0; k < n8; k += 8) {
        __m256 xv[3];
        for (int c = 0; c < C; c++) xv[c] = _mm256_loadu_ps(x + c * ldx + k);
        for (int r = 0; r < R; r++) {
            __m256 wv = load8(type, wr[r], k);
            for (int c = 0; c < C; c++) acc[r][c] = _mm256_fmadd_ps(wv, xv[c], acc[r][c]);
        }
    }
    for (int r = 0; r < R; r++)
        for (int c = 0; c < C; c++) {
            float s = td_hsum8(acc[r][c]);
            for (int64_t k = n8; k < n; k++) s += load1(type, wr[r], k) * x[c * ldx + k];
            y[c * ldy + r] = s;
        }
}

static inline __attribute__((always_inline)) void matmul_typed(td_dtype type, const td_mat *w,
                                                               const int32_t *rows, const float *x, int64_t T,
                                                               int64_t ldx, float *y, int64_t ldy, int64_t j0,
                                                               int64_t j1) {
    const int64_t n = w->cols;
    const void *wr[8];
    if (T < 3) { /* decode: 8 rows at a time keep enough independent FMA chains in flight */
        for (int64_t j = j0; j < j1; j += 8) {
            int R = j1 - j < 8 ? (int)(j1 - j) : 8;
            for (int r = 0; r < R; r++) wr[r] = td_mat_row(w, rows ? rows[j + r] : j + r);
            for (int64_t t = 0; t < T; t++) {
                const float *xt = x + t * ldx;
                float *yt = y + t * ldy + j;
                switch (R) {
                case 8: tile(type, 8, 1, wr, xt, ldx, n, yt, ldy); break;
                case 7: tile(type, 7, 1, wr, xt, ldx, n, yt, ldy); break;
                case 6: tile(type, 6, 1, wr, xt, ldx, n, yt, ldy); break;
                case 5: tile(type, 5, 1, wr, xt, ldx, n, yt, ldy); break;
                case 4: tile(type, 4, 1, wr, xt, ldx, n, yt, ldy); break;
                case 3: tile(type, 3, 1, wr, xt, ldx, n, yt, ldy); break;
                case 2: tile(type, 2, 1, wr, xt, ldx, n, yt, ldy); break;
                default: tile(type, 1, 1, wr, xt, ldx, n, yt, ldy); break;
                }
            }
        }
        return;
    }
    for (int64_t t0 = 0; t0 < T; t0 += TB) {
        int64_t t1 = T - t0 < TB ? T : t0 + TB;
        for (int64_t j = j0; j < j1; j += 4) {
            int R = j1 - j < 4 ? (int)(j1 - j) : 4;
            for (int r = 0; r < R; r++) wr[r] = td_mat_row(w, rows ? rows[j + r] : j + r);
            for (int64_t t = t0; t < t1; t += 3) {
                int C = t1 - t < 3 ? (int)(t1 - t) : 3;
                const float *xt = x + t * ldx;
                float *yt = y + t * ldy + j;
                switch (R * 4 + C) {
                case 4 * 4 + 3: tile(type, 4, 3, wr, xt, ldx, n, yt, ldy); break;
                case 4 * 4 + 2: tile(type, 4, 2, wr, xt, ldx, n, yt, ldy); break;
                case 4 * 4 + 1: tile(type, 4, 1, wr, xt, ldx, n, yt, ldy); break;
                case 3 * 4 + 3: tile(type, 3, 3, wr, xt, ldx, n, yt, ldy); break;
                case 3 * 4 + 2: tile(type, 3, 2, wr, xt, ldx, n, yt, ldy); break;
                case 3 * 4 + 1: tile(type, 3, 1, wr, xt, ldx, n, yt, ldy); break;
                case 2 * 4 + 3: tile(type, 2, 3, wr, xt, ldx, n, yt, ldy); break;
                case 2 * 4 + 2: tile(type, 2, 2, wr, xt, ldx, n, yt, ldy); break;
                case 2 * 4 + 1: tile(type, 2, 1, wr, xt, ldx, n, yt, ldy); break;
                case 1 * 4 + 3: tile(type, 1, 3, wr, xt, ldx, n, yt, ldy); break;
                case 1 * 4 + 2: tile(type, 1, 2, wr, xt, ldx, n, yt, ldy); break;
                default: tile(type, 1, 1, wr, xt, ldx, n, yt, ldy); break;
                }
            }
        }
    }
}

void td_matmul_avx2(const td_mat *w, const int32_t *rows, const float *x, const void *xq, int64_t T, int64_t ldx,
                    float *y, int64_t ldy, int64_t j0, int64_t j1) {
    if (w->pack && w->pack->lanes == TD_X8_LANES) {
        td_matmul_x8_avx2(w, rows, xq, T, y, ldy, j0, j1);
        return;
    }
    if (w->pack) { /* packed for other kernels: the reference gives the same bits */
        td_matmul_ref(w, rows, x, xq, T, ldx, y, ldy, j0, j1);
        return;
    }
    if (w->type == TD_DTYPE_BF16 && xq) { /* activations rounded to bf16 for other kernels: likewise */
        td_matmul_bf16_ref(w, rows, xq, T, y, ldy, j0, j1);
        return;
    }
    switch (w->type) {
    case TD_DTYPE_Q8_0:
    case TD_DTYPE_Q4_0: td_matmul_quant_avx2(w, rows, xq, T, y, ldy, j0, j1); break;
    case TD_DTYPE_F32: matmul_typed(TD_DTYPE_F32, w, rows, x, T, ldx, y, ldy, j0, j1); break;
    case TD_DTYPE_F16: matmul_typed(TD_DTYPE_F16, w, rows, x, T, ldx, y, ldy, j0, j1); break;
    case TD_DTYPE_BF16: matmul_typed(TD_DTYPE_BF16, w, rows, x, T, ldx, y, ldy, j0, j1); break;
    default: break;
    }
}
