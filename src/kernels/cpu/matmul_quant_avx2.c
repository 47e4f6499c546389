/* AVX2 matrix product over Q8_0 / Q4_0 weights and Q8_0-quantised activations, and the AVX2 activation quantiser.
 *
 * Each block's 32 products are summed exactly in integers (maddubs of |w| and x * sign(w), then madd to 32-bit
 * lanes), converted to floats and accumulated as acc += (d_w * d_x) * lanes; the 8 lanes are summed once at the
 * end in a fixed order. Tiles (R rows x C tokens) only decide how many dot products share each load, and are sized
 * so the accumulators stay in the 16 ymm registers: a dot product's operations never depend on its neighbours. */
#include <immintrin.h>
#include <math.h>
#include <string.h>

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
    const int64_t nb = w->cols / 32;
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

/* roundf (half away from zero) of 8 floats, exactly: trunc, then one more step when the dropped part is >= 0.5. */
static inline __m256 round_away(__m256 x) {
    __m256 t = _mm256_round_ps(x, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
    __m256 frac = _mm256_sub_ps(x, t); /* exact */
    __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    __m256 up = _mm256_cmp_ps(_mm256_and_ps(frac, absmask), _mm256_set1_ps(0.5f), _CMP_GE_OQ);
    __m256 step = _mm256_or_ps(_mm256_set1_ps(1.0f), _mm256_andnot_ps(absmask, x)); /* copysign(1, x) */
    return _mm256_add_ps(t, _mm256_and_ps(up, step));
}

/* 32 int32 lanes (values in -127..127) as 32 int8 in element order, and their sum. */
static inline __m256i pack_bytes(const __m256i *i32) {
    /* packs interleave 128-bit halves; the permutation restores element order */
    __m256i p16a = _mm256_packs_epi32(i32[0], i32[1]), p16b = _mm256_packs_epi32(i32[2], i32[3]);
    return _mm256_permutevar8x32_epi32(_mm256_packs_epi16(p16a, p16b), _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

static inline int32_t sum_lanes(const __m256i *i32) {
    __m256i s = _mm256_add_epi32(_mm256_add_epi32(i32[0], i32[1]), _mm256_add_epi32(i32[2], i32[3]));
    __m128i h = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
    h = _mm_add_epi32(h, _mm_shuffle_epi32(h, 0x4e));
    h = _mm_add_epi32(h, _mm_shuffle_epi32(h, 0xb1));
    return _mm_cvtsi128_si32(h);
}

/* One level of block b of row r into the interleaved layout: chunk k (elements 4k..4k+3) at k * 64 + lane * 4. */
static inline void put_level(int8_t *qi, float *d, int32_t *s, int64_t g, int64_t lane, const __m256i *i32, float scale) {
    int32_t chunks[8];
    _mm256_storeu_si256((__m256i *)(void *)chunks, pack_bytes(i32));
    for (int k = 0; k < 8; k++) memcpy(qi + g * 512 + k * 64 + lane * 4, &chunks[k], 4);
    d[g * 16 + lane] = scale;
    s[g * 16 + lane] = sum_lanes(i32);
}

/* The x16 layout's two levels, as td_qrows_put computes them: r = x - d1 q1 (a product, then a difference),
 * d2 = max|r| / 127, q2 = roundf(r / d2) clamped to +-127. */
static void put_x16(const td_qrows *xq, int64_t r, int64_t b, const __m256 *v, const __m256i *q1, float d1) {
    int64_t g = r * xq->nbg + b / 16, lane = b % 16;
    put_level(xq->qi, xq->d, xq->s, g, lane, q1, d1);
    if (xq->x16 < 2) return;
    const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    __m256 rest[4], m = _mm256_setzero_ps();
    for (int i = 0; i < 4; i++) {
        rest[i] = _mm256_sub_ps(v[i], _mm256_mul_ps(_mm256_set1_ps(d1), _mm256_cvtepi32_ps(q1[i])));
        m = _mm256_max_ps(m, _mm256_and_ps(rest[i], absmask));
    }
    __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
    float d2 = _mm_cvtss_f32(m4) / 127.0f, id2 = d2 != 0.0f ? 1.0f / d2 : 0.0f;
    __m256i q2[4];
    for (int i = 0; i < 4; i++) {
        __m256 q = round_away(_mm256_mul_ps(rest[i], _mm256_set1_ps(id2)));
        q = _mm256_min_ps(_mm256_max_ps(q, _mm256_set1_ps(-127.0f)), _mm256_set1_ps(127.0f));
        q2[i] = _mm256_cvtps_epi32(q);
    }
    put_level(xq->qi2, xq->d2, xq->s2, g, lane, q2, d2);
}

/* Block b of row r in the x8 layout: d = amax / 32767, q = roundf(x / d) within +-32767, element pairs scattered
 * to their chunks (chunk k, lane b % 8). */
static void put_x8(const td_qrows *xq, int64_t r, int64_t b, const __m256 *v, float amax) {
    float d = amax / 32767.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
    __m256i i32[4];
    for (int i = 0; i < 4; i++) {
        __m256 q = round_away(_mm256_mul_ps(v[i], _mm256_set1_ps(id)));
        q = _mm256_min_ps(_mm256_max_ps(q, _mm256_set1_ps(-32767.0f)), _mm256_set1_ps(32767.0f));
        i32[i] = _mm256_cvtps_epi32(q);
    }
    int32_t pairs[16]; /* elements 2k, 2k + 1 as one 32-bit word */
    _mm256_storeu_si256((__m256i *)(void *)pairs, _mm256_permute4x64_epi64(_mm256_packs_epi32(i32[0], i32[1]), 0xd8));
    _mm256_storeu_si256((__m256i *)(void *)(pairs + 8), _mm256_permute4x64_epi64(_mm256_packs_epi32(i32[2], i32[3]), 0xd8));
    int64_t g = r * xq->nbg + b / 8, lane = b % 8;
    int16_t *qg = xq->qw + g * 256;
    for (int k = 0; k < 16; k++) memcpy(qg + k * 16 + lane * 2, &pairs[k], 4);
    xq->d[g * 8 + lane] = d;
    xq->s[g * 8 + lane] = sum_lanes(i32);
}

void td_quantize_rows_avx2(const float *x, int64_t ldx, const td_qrows *xq, int64_t r0, int64_t r1) {
    const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    for (int64_t r = r0; r < r1; r++) {
        const float *xr = x + r * ldx;
        if (xq->x8) {
            for (int64_t b = 0; b < xq->nb; b++) {
                __m256 v[4], m = _mm256_setzero_ps();
                for (int i = 0; i < 4; i++) {
                    v[i] = _mm256_loadu_ps(xr + b * 32 + 8 * i);
                    m = _mm256_max_ps(m, _mm256_and_ps(v[i], absmask));
                }
                __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
                m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
                m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
                put_x8(xq, r, b, v, _mm_cvtss_f32(m4));
            }
            td_qrows_pad(xq, r);
            continue;
        }
        for (int64_t b = 0; b < xq->nb; b++) {
            const float *xb = xr + b * 32;
            __m256 v[4];
            __m256 m = _mm256_setzero_ps();
            for (int i = 0; i < 4; i++) {
                v[i] = _mm256_loadu_ps(xb + 8 * i);
                m = _mm256_max_ps(m, _mm256_and_ps(v[i], absmask));
            }
            __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
            m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
            m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
            float amax = _mm_cvtss_f32(m4), d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
            uint16_t dh = _cvtss_sh(d, _MM_FROUND_TO_NEAREST_INT);
            __m256i i32[4];
            for (int i = 0; i < 4; i++) i32[i] = _mm256_cvtps_epi32(round_away(_mm256_mul_ps(v[i], _mm256_set1_ps(id))));
            if (xq->x16) {
                put_x16(xq, r, b, v, i32, _cvtsh_ss(dh));
                continue;
            }
            td_block_q8_0 *q = &xq->q[r * xq->nb + b];
            q->d = dh;
            xq->d[r * xq->nb + b] = _cvtsh_ss(dh);
            _mm256_storeu_si256((__m256i *)q->qs, pack_bytes(i32));
        }
        td_qrows_pad(xq, r);
    }
}
