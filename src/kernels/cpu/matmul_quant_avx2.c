/* AVX2 matrix product over Q8_0 / Q4_0 weights and Q8_0-quantised activations. Each block's 32 products are
 * summed exactly in integers (maddubs on |w| and x * sign(w), then madd to 32-bit lanes), converted to floats
 * and accumulated as acc += (d_w * d_x) * lanes; the 8 lanes are summed once at the end in a fixed order.
 * Tiles (R rows x C tokens) only share loads: a dot product's operations never depend on its neighbours. */
#include <immintrin.h>

#include "kernels/cpu/kernels.h"
#include "kernels/cpu/quant.h"
#include "util/half.h"

#define TB 64

static inline float hsum(__m256 a) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* 32 signed weights of a block as int8 lanes. */
static inline __attribute__((always_inline)) __m256i weights(td_dtype type, const void *row, int64_t b) {
    if (type == TD_DTYPE_Q8_0) return _mm256_loadu_si256((const __m256i *)((const td_block_q8_0 *)row)[b].qs);
    __m128i q = _mm_loadu_si128((const __m128i *)((const td_block_q4_0 *)row)[b].qs);
    __m256i both = _mm256_set_m128i(_mm_srli_epi16(q, 4), q); /* low nibbles: 0-15, high: 16-31 */
    return _mm256_sub_epi8(_mm256_and_si256(both, _mm256_set1_epi8(15)), _mm256_set1_epi8(8));
}

static inline __attribute__((always_inline)) float wscale(td_dtype type, const void *row, int64_t b) {
    return type == TD_DTYPE_Q8_0 ? _cvtsh_ss(((const td_block_q8_0 *)row)[b].d)
                                 : _cvtsh_ss(((const td_block_q4_0 *)row)[b].d);
}

/* 8 int32 lanes holding the exact dot product of 32 int8 pairs. */
static inline __m256 block_dot(__m256i w, __m256i x) {
    __m256i aw = _mm256_sign_epi8(w, w), sx = _mm256_sign_epi8(x, w);
    __m256i p16 = _mm256_maddubs_epi16(aw, sx);
    return _mm256_cvtepi32_ps(_mm256_madd_epi16(p16, _mm256_set1_epi16(1)));
}

static inline __attribute__((always_inline)) void tile(td_dtype type, int R, int C, const void *const *wr,
                                                       const td_block_q8_0 *xq, int64_t nb, float *y, int64_t ldy) {
    __m256 acc[4][4];
    for (int r = 0; r < R; r++)
        for (int c = 0; c < C; c++) acc[r][c] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        __m256i xv[4];
        float dx[4];
        for (int c = 0; c < C; c++) {
            xv[c] = _mm256_loadu_si256((const __m256i *)xq[c * nb + b].qs);
            dx[c] = _cvtsh_ss(xq[c * nb + b].d);
        }
        for (int r = 0; r < R; r++) {
            __m256i wv = weights(type, wr[r], b);
            float dw = wscale(type, wr[r], b);
            for (int c = 0; c < C; c++)
                acc[r][c] = _mm256_fmadd_ps(_mm256_set1_ps(dw * dx[c]), block_dot(wv, xv[c]), acc[r][c]);
        }
    }
    for (int r = 0; r < R; r++)
        for (int c = 0; c < C; c++) y[c * ldy + r] = hsum(acc[r][c]);
}

static inline __attribute__((always_inline)) void matmul_typed(td_dtype type, const td_mat *w, const int32_t *rows,
                                                               const void *xqv, int64_t T, float *y, int64_t ldy,
                                                               int64_t j0, int64_t j1) {
    const td_block_q8_0 *xq = xqv;
    const int64_t nb = w->cols / 32;
    const void *wr[4];
    for (int64_t t0 = 0; t0 < T; t0 += TB) {
        int64_t t1 = T - t0 < TB ? T : t0 + TB;
        for (int64_t j = j0; j < j1; j += 4) {
            int R = j1 - j < 4 ? (int)(j1 - j) : 4;
            for (int r = 0; r < R; r++) wr[r] = td_mat_row(w, rows ? rows[j + r] : j + r);
            for (int64_t t = t0; t < t1; t += 4) {
                int C = t1 - t < 4 ? (int)(t1 - t) : 4;
                const td_block_q8_0 *xt = xq + t * nb;
                float *yt = y + t * ldy + j;
                switch (R * 8 + C) { /* constant R, C: the compiler keeps the accumulators in registers */
                case 4 * 8 + 4: tile(type, 4, 4, wr, xt, nb, yt, ldy); break;
                case 4 * 8 + 3: tile(type, 4, 3, wr, xt, nb, yt, ldy); break;
                case 4 * 8 + 2: tile(type, 4, 2, wr, xt, nb, yt, ldy); break;
                case 4 * 8 + 1: tile(type, 4, 1, wr, xt, nb, yt, ldy); break;
                case 3 * 8 + 4: tile(type, 3, 4, wr, xt, nb, yt, ldy); break;
                case 3 * 8 + 3: tile(type, 3, 3, wr, xt, nb, yt, ldy); break;
                case 3 * 8 + 2: tile(type, 3, 2, wr, xt, nb, yt, ldy); break;
                case 3 * 8 + 1: tile(type, 3, 1, wr, xt, nb, yt, ldy); break;
                case 2 * 8 + 4: tile(type, 2, 4, wr, xt, nb, yt, ldy); break;
                case 2 * 8 + 3: tile(type, 2, 3, wr, xt, nb, yt, ldy); break;
                case 2 * 8 + 2: tile(type, 2, 2, wr, xt, nb, yt, ldy); break;
                case 2 * 8 + 1: tile(type, 2, 1, wr, xt, nb, yt, ldy); break;
                case 1 * 8 + 4: tile(type, 1, 4, wr, xt, nb, yt, ldy); break;
                case 1 * 8 + 3: tile(type, 1, 3, wr, xt, nb, yt, ldy); break;
                case 1 * 8 + 2: tile(type, 1, 2, wr, xt, nb, yt, ldy); break;
                default: tile(type, 1, 1, wr, xt, nb, yt, ldy); break;
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
