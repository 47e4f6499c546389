/* The activation quantiser, AVX2 (td_quantize_rows_avx2; quant_ref.c holds the reference, and the two write the
 * same bytes): each block's amax by a fixed max tree (max is exact, the order does not matter), d and 1/d as the
 * reference computes them, x * (1/d) rounded half away from zero exactly as roundf does, then the layout's
 * stores (plain, x16, x8 Q4_0: td_quantize_q8_0's values; x8: int16); bf16 by the reference's integer rounding,
 * 8 lanes at a time. */
#include <immintrin.h>
#include <string.h>

#include "kernels/cpu/kernels.h"
#include "kernels/cpu/quant.h"

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

/* One level of block b of row r into the interleaved layout: chunk k (elements 4k..4k+3) at k * 64 + lane * 4 (or
 * in column order, r16: td_qrows_x16_at). */
static inline void put_level(int8_t *qi, float *d, int32_t *s, int64_t g, int64_t lane, const __m256i *i32, float scale,
                             int natural) {
    int32_t chunks[TD_QBLOCK / 4];
    _mm256_storeu_si256((__m256i *)(void *)chunks, pack_bytes(i32));
    for (int k = 0; k < TD_QBLOCK / 4; k++) memcpy(qi + td_qrows_x16_at(g, lane, k, natural), &chunks[k], 4);
    d[g * TD_X16_LANES + lane] = scale;
    s[g * TD_X16_LANES + lane] = sum_lanes(i32);
}

/* The x16 layout's two levels, as td_qrows_put computes them: r = x - d1 q1 (a product, then a difference),
 * d2 = max|r| / 127 (r16: d1 / 128), q2 = roundf(r / d2) clamped to +-127. */
static void put_x16(const td_qrows *xq, int64_t r, int64_t b, const __m256 *v, const __m256i *q1, float d1) {
    int64_t g = r * xq->nbg + b / TD_X16_LANES, lane = b % TD_X16_LANES;
    put_level(xq->qi, xq->d, xq->s, g, lane, q1, d1, xq->natural);
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
    float d2 = td_qrows_level2_scale(xq, d1, _mm_cvtss_f32(m4));
    float id2 = d2 != 0.0f ? 1.0f / d2 : 0.0f;
    __m256i q2[4];
    for (int i = 0; i < 4; i++) {
        __m256 q = round_away(_mm256_mul_ps(rest[i], _mm256_set1_ps(id2)));
        q = _mm256_min_ps(_mm256_max_ps(q, _mm256_set1_ps(-127.0f)), _mm256_set1_ps(127.0f));
        q2[i] = _mm256_cvtps_epi32(q);
    }
    put_level(xq->qi2, xq->d2, xq->s2, g, lane, q2, d2, xq->natural);
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
    int64_t g = r * xq->nbg + b / TD_X8_LANES, lane = b % TD_X8_LANES;
    int16_t *qg = xq->qw + g * TD_X8_GROUP;
    for (int k = 0; k < TD_QBLOCK / 2; k++) memcpy(qg + k * TD_X8_CHUNK + lane * 2, &pairs[k], 4);
    xq->d[g * TD_X8_LANES + lane] = d;
}

/* Block b of row r in the x8 Q4_0 layout (td_qrows_put's): the values' chunks of 4 (chunk k, lane b % 8), the
 * scale, and -8 x the sums of the values landing in each 16-bit half of the lane (elements 4k, 4k + 1 and 4k + 2,
 * 4k + 3: lanes {0, 1, 4, 5} and {2, 3, 6, 7} of the four vectors added). */
static void put_x8_q4(const td_qrows *xq, int64_t r, int64_t b, const __m256i *i32, float d1) {
    int32_t chunks[TD_QBLOCK / 4], s[8];
    _mm256_storeu_si256((__m256i *)(void *)chunks, pack_bytes(i32));
    _mm256_storeu_si256((__m256i *)(void *)s, _mm256_add_epi32(_mm256_add_epi32(i32[0], i32[1]), _mm256_add_epi32(i32[2], i32[3])));
    int64_t g = r * xq->nbg + b / TD_X8_LANES, lane = b % TD_X8_LANES;
    for (int k = 0; k < TD_QBLOCK / 4; k++) memcpy(xq->qi + g * TD_X8_GROUP + k * TD_X8_QCHUNK + lane * 4, &chunks[k], 4);
    xq->d[g * TD_X8_LANES + lane] = d1;
    xq->c[g * 2 * TD_X8_LANES + 2 * lane] = (int16_t)(-8 * (s[0] + s[1] + s[4] + s[5]));
    xq->c[g * 2 * TD_X8_LANES + 2 * lane + 1] = (int16_t)(-8 * (s[2] + s[3] + s[6] + s[7]));
}

/* td_f32_to_bf16_daz of 8 floats, in the same integer steps: zero exponent -> signed zero, NaN -> quiet NaN, else
 * u + 0x7fff + (bit 16 of u), the top half. Returns the 8 results in the low 16 bits of each lane. */
static inline __m256i bf16_daz8(__m256 v) {
    __m256i u = _mm256_castps_si256(v);
    __m256i expo = _mm256_and_si256(u, _mm256_set1_epi32(0x7f800000));
    __m256i mag = _mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff));
    __m256i rounded = _mm256_add_epi32(u, _mm256_add_epi32(_mm256_set1_epi32(0x7fff),
                                                           _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1))));
    __m256i r = _mm256_srli_epi32(rounded, 16);
    __m256i nan = _mm256_cmpgt_epi32(mag, _mm256_set1_epi32(0x7f800000));
    r = _mm256_blendv_epi8(r, _mm256_or_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(0x40)), nan);
    __m256i zero = _mm256_cmpeq_epi32(expo, _mm256_setzero_si256());
    r = _mm256_blendv_epi8(r, _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(0x8000)), zero);
    return r;
}

/* 16 bf16 results (two bf16_daz8) stored as 16 consecutive uint16. */
static inline void store_bf16x16(uint16_t *dst, __m256i a, __m256i b) {
    __m256i p = _mm256_permute4x64_epi64(_mm256_packus_epi32(a, b), 0xd8);
    _mm256_storeu_si256((__m256i *)(void *)dst, p);
}

/* Row r in the bf16 layout, as the reference's quantize_bf16: h = bf16(x), zero past cols. */
static void quantize_bf16(const float *x, const td_qrows *xq, int64_t r) {
    const int64_t n = xq->nb * TD_QBLOCK, cols = xq->cols;
    uint16_t *h = xq->h + r * n;
    for (int64_t k = 0; k < n; k += 16) {
        float buf[16];
        __m256 v0, v1;
        if (k + 16 <= cols) {
            v0 = _mm256_loadu_ps(x + k), v1 = _mm256_loadu_ps(x + k + 8);
        } else {
            for (int i = 0; i < 16; i++) buf[i] = k + i < cols ? x[k + i] : 0.0f;
            v0 = _mm256_loadu_ps(buf), v1 = _mm256_loadu_ps(buf + 8);
        }
        store_bf16x16(h + k, bf16_daz8(v0), bf16_daz8(v1));
    }
}

void td_quantize_rows_avx2(const float *x, int64_t ldx, const td_qrows *xq, int64_t r0, int64_t r1) {
    const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    for (int64_t r = r0; r < r1; r++) {
        const float *xr = x + r * ldx;
        if (xq->bf16) {
            quantize_bf16(xr, xq, r);
            continue;
        }
        if (xq->x8 == 1) {
            for (int64_t b = 0; b < xq->nb; b++) {
                __m256 v[4], m = _mm256_setzero_ps();
                for (int i = 0; i < 4; i++) {
                    v[i] = _mm256_loadu_ps(xr + b * TD_QBLOCK + 8 * i);
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
            const float *xb = xr + b * TD_QBLOCK;
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
            if (xq->x8) {
                put_x8_q4(xq, r, b, i32, _cvtsh_ss(dh));
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
