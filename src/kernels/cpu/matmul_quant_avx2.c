/* Quantised matrix product over unpacked Q8_0 / Q4_0 weights and plain (Q8_0) activations, AVX2
 * (td_matmul_quant_avx2; matmul_quant_ref.c holds the reference).
 *
 * Each block's 32 products are summed exactly in integers (maddubs of |w| and x * sign(w), then madd to 32-bit
 * lanes), converted to floats and accumulated as acc += (d_w * d_x) * lanes; the 8 lanes are summed once at the
 * end in a fixed order. Tiles (R rows x C tokens) only decide how many dot products share each load, and are sized
 * so the accumulators stay in the 16 ymm registers: a dot product's operations never depend on its neighbours. */
#include <immintrin.h>

#include "kernels/cpu/avx2_math.h"
#include "kernels/cpu/kernels.h"
#include "kernels/cpu/quant.h"

#define TB 256 /* tokens per block: their quantised activations (~280 KB for 1024 columns) stay in L2 while the
                  weight rows stream past */

/* 32 signed weights of a block as int8 lanes. */
static inline __attribute__((always_inline)) __m256i weights(td_dtype type, const void *row, int64_t b) {
    if (type == TD_DTYPE_Q8_0) return _mm256_loadu_si256((const __m256i *)((const td_block_q8_0 *)row)[b].qs);
    __m128i q = _mm_loadu_si128((const __m128i *)((const td_block_q4_0 *)row)[b].qs);
    __m256i both = _mm256_set_m128i(_mm_srli_epi16(q, 4), q); /* low nibbles: elements 0-15, high: 16-31 */
    return _mm256_sub_epi8(_mm256_and_si256(both, _mm256_set1_epi8(15)), _mm256_set1_epi8(8));
}

static inline __attribute__((always_inline)) float wscale(td_dtype type, const void *row, int64_t b) {
    return type == TD_DTYPE_Q8_0 ? _cvtsh_ss(((const td_block_q8_0 *)row)[b].d)
                                 : _cvtsh_ss(((const td_block_q4_0 *)row)[b].d);
}

static inline __attribute__((always_inline)) void tile(td_dtype type, int R, int C, const void *const *wr,
                                                       const td_block_q8_0 *xq, const float *xd, int64_t nb, float *y,
                                                       int64_t ldy) {
    __m256 acc[8][2];
    const __m256i ones = _mm256_set1_epi16(1);
    for (int r = 0; r < R; r++)
        for (int c = 0; c < C; c++) acc[r][c] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        __m256i xv[2];
        __m256 dx[2];
        for (int c = 0; c < C; c++) {
            xv[c] = _mm256_loadu_si256((const __m256i *)xq[c * nb + b].qs);
            dx[c] = _mm256_broadcast_ss(&xd[c * nb + b]); /* a load, not a shuffle */
        }
        for (int r = 0; r < R; r++) {
            __m256i wv = weights(type, wr[r], b), aw = _mm256_sign_epi8(wv, wv);
            __m256 dw = _mm256_set1_ps(wscale(type, wr[r], b));
            for (int c = 0; c < C; c++) {
                __m256i p = _mm256_madd_epi16(_mm256_maddubs_epi16(aw, _mm256_sign_epi8(xv[c], wv)), ones);
                acc[r][c] = _mm256_fmadd_ps(_mm256_mul_ps(dw, dx[c]), _mm256_cvtepi32_ps(p), acc[r][c]);
            }
        }
    }
    for (int r = 0; r < R; r++)
        for (int c = 0; c < C; c++) y[c * ldy + r] = td_hsum8(acc[r][c]);
}

static inline __attribute__((always_inline)) void matmul_typed(td_dtype type, const td_mat *w, const int32_t *rows,
                                                               const td_qrows *xr, int64_t T, float *y, int64_t ldy,
                                                               int64_t j0, int64_t j1) {
    const int64_t nb = w->cols / TD_QBLOCK;
    const void *wr[8];
    if (T < 2) { /* decode: 8 rows per token keep 8 independent accumulation chains in flight */
        for (int64_t j = j0; j < j1; j += 8) {
            int R = j1 - j < 8 ? (int)(j1 - j) : 8;
            for (int r = 0; r < R; r++) wr[r] = td_mat_row(w, rows ? rows[j + r] : j + r);
            for (int64_t t = 0; t < T; t++) {
                const td_block_q8_0 *xt = xr->q + t * xr->nb;
                const float *dt = xr->d + t * xr->nb;
                float *yt = y + t * ldy + j;
                switch (R) {
                case 8: tile(type, 8, 1, wr, xt, dt, nb, yt, ldy); break;
                case 7: tile(type, 7, 1, wr, xt, dt, nb, yt, ldy); break;
                case 6: tile(type, 6, 1, wr, xt, dt, nb, yt, ldy); break;
                case 5: tile(type, 5, 1, wr, xt, dt, nb, yt, ldy); break;
                case 4: tile(type, 4, 1, wr, xt, dt, nb, yt, ldy); break;
                case 3: tile(type, 3, 1, wr, xt, dt, nb, yt, ldy); break;
                case 2: tile(type, 2, 1, wr, xt, dt, nb, yt, ldy); break;
                default: tile(type, 1, 1, wr, xt, dt, nb, yt, ldy); break;
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
            for (int64_t t = t0; t < t1; t += 2) {
                int C = t1 - t < 2 ? 1 : 2;
                const td_block_q8_0 *xt = xr->q + t * xr->nb;
                const float *dt = xr->d + t * xr->nb;
                float *yt = y + t * ldy + j;
                switch (R * 4 + C) {
                case 4 * 4 + 2: tile(type, 4, 2, wr, xt, dt, nb, yt, ldy); break;
                case 4 * 4 + 1: tile(type, 4, 1, wr, xt, dt, nb, yt, ldy); break;
                case 3 * 4 + 2: tile(type, 3, 2, wr, xt, dt, nb, yt, ldy); break;
                case 3 * 4 + 1: tile(type, 3, 1, wr, xt, dt, nb, yt, ldy); break;
                case 2 * 4 + 2: tile(type, 2, 2, wr, xt, dt, nb, yt, ldy); break;
                case 2 * 4 + 1: tile(type, 2, 1, wr, xt, dt, nb, yt, ldy); break;
                case 1 * 4 + 2: tile(type, 1, 2, wr, xt, dt, nb, yt, ldy); break;
                default: tile(type, 1, 1, wr, xt, dt, nb, yt, ldy); break;
                }
            }
        }
    }
}

void td_matmul_quant_avx2(const td_mat *w, const int32_t *rows, const void *xq, int64_t T, float *y, int64_t ldy,
                          int64_t j0, int64_t j1) {
    if (w->type == TD_DTYPE_Q8_0) matmul_typed(TD_DTYPE_Q8_0, w, rows, xq, T, y, ldy, j0, j1);
    else if (w->type == TD_DTYPE_Q4_0) matmul_typed(TD_DTYPE_Q4_0, w, rows, xq, T, y, ldy, j0, j1);
}
