/* The activation quantiser for the x16 and r16 layouts, AVX-512 (td_quantize_rows_avx512; quant_ref.c holds the
 * reference, quant_avx2.c the 8-lane version, and all three write the same bytes): a block's 32 values in two
 * vectors, its amax by a max tree (max is exact, the order does not matter), d and 1/d as the reference computes
 * them, x * (1/d) rounded half away from zero exactly as roundf does, the second level's remainder as a product
 * then a difference, and each level's bytes by a saturating narrowing (the values are within +-127). r16's bytes lie
 * in column order, one 32-byte store a level; x16's are interleaved, 4 bytes a chunk. The other layouts (plain, x8,
 * bf16) take the AVX2 quantiser. */
#include <immintrin.h>
#include <string.h>

#include "kernels/cpu/kernels.h"
#include "kernels/cpu/quant.h"

/* roundf (half away from zero) of 16 floats, exactly: trunc, then one more step when the dropped part is >= 0.5. */
static inline __m512 round_away16(__m512 x) {
    __m512 t = _mm512_roundscale_ps(x, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
    __m512 frac = _mm512_sub_ps(x, t); /* exact */
    __mmask16 up = _mm512_cmp_ps_mask(_mm512_abs_ps(frac), _mm512_set1_ps(0.5f), _CMP_GE_OQ);
    __m512i sign = _mm512_and_si512(_mm512_castps_si512(x), _mm512_set1_epi32((int)0x80000000u));
    __m512 step = _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(_mm512_set1_ps(1.0f)), sign)); /* copysign */
    return _mm512_mask_add_ps(t, up, t, step);
}

/* The largest of 32 values' magnitudes (two vectors). */
static inline float amax32(__m512 a, __m512 b) {
    return _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(a), _mm512_abs_ps(b)));
}

/* The sum of 16 int32 lanes, wrapping as the AVX2 quantiser's does (inputs that are not finite give INT_MIN lanes):
 * SIMD adds only, since _mm512_reduce_add_epi32 adds as C ints, whose overflow is undefined. */
static inline int32_t sum16(__m512i v) {
    __m256i h = _mm256_add_epi32(_mm512_castsi512_si256(v), _mm512_extracti64x4_epi64(v, 1));
    __m128i q = _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
    q = _mm_add_epi32(q, _mm_shuffle_epi32(q, 0x4e));
    q = _mm_add_epi32(q, _mm_shuffle_epi32(q, 0xb1));
    return _mm_cvtsi128_si32(q);
}

/* One level of block b of row r (its 32 integers in two vectors) into xq's arrays (qi, d, s or qi2, d2, s2). */
static inline void put_level(const td_qrows *xq, int8_t *qi, float *d, int32_t *s, int64_t r, int64_t b, __m512i lo,
                             __m512i hi, float scale) {
    int64_t g = r * xq->nbg + b / TD_X16_LANES, lane = b % TD_X16_LANES;
    __m128i blo = _mm512_cvtsepi32_epi8(lo), bhi = _mm512_cvtsepi32_epi8(hi);
    if (xq->natural) {
        int8_t *dst = qi + td_qrows_x16_at(g, lane, 0, 1);
        _mm_storeu_si128((__m128i *)(void *)dst, blo);
        _mm_storeu_si128((__m128i *)(void *)(dst + 16), bhi);
    } else {
        int32_t chunks[TD_QBLOCK / 4];
        _mm_storeu_si128((__m128i *)(void *)chunks, blo);
        _mm_storeu_si128((__m128i *)(void *)(chunks + 4), bhi);
        for (int k = 0; k < TD_QBLOCK / 4; k++) memcpy(qi + td_qrows_x16_at(g, lane, k, 0), &chunks[k], 4);
    }
    d[g * TD_X16_LANES + lane] = scale;
    s[g * TD_X16_LANES + lane] = sum16(_mm512_add_epi32(lo, hi));
}

/* Block b of row r: level 1 as td_quantize_q8_0 (d = amax / 127 rounded to fp16 for the scale, 1 / d unrounded for
 * the values), then for two levels the remainder r = x - d1 q1 and q2 = roundf(r / d2) within +-127, d2 as
 * td_qrows_level2_scale gives it. */
static void quantize_block(const td_qrows *xq, int64_t r, int64_t b, const float *xb) {
    __m512 v0 = _mm512_loadu_ps(xb), v1 = _mm512_loadu_ps(xb + 16);
    float d = amax32(v0, v1) / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
    float d1 = _cvtsh_ss(_cvtss_sh(d, _MM_FROUND_TO_NEAREST_INT));
    __m512 vid = _mm512_set1_ps(id);
    __m512i q0 = _mm512_cvtps_epi32(round_away16(_mm512_mul_ps(v0, vid)));
    __m512i q1 = _mm512_cvtps_epi32(round_away16(_mm512_mul_ps(v1, vid)));
    put_level(xq, xq->qi, xq->d, xq->s, r, b, q0, q1, d1);
    if (xq->x16 < 2) return;
    __m512 vd1 = _mm512_set1_ps(d1);
    __m512 r0 = _mm512_sub_ps(v0, _mm512_mul_ps(vd1, _mm512_cvtepi32_ps(q0)));
    __m512 r1 = _mm512_sub_ps(v1, _mm512_mul_ps(vd1, _mm512_cvtepi32_ps(q1)));
    float d2 = td_qrows_level2_scale(xq, d1, amax32(r0, r1)), id2 = d2 != 0.0f ? 1.0f / d2 : 0.0f;
    const __m512 vid2 = _mm512_set1_ps(id2), lo = _mm512_set1_ps(-127.0f), hi = _mm512_set1_ps(127.0f);
    __m512i p0 = _mm512_cvtps_epi32(_mm512_min_ps(_mm512_max_ps(round_away16(_mm512_mul_ps(r0, vid2)), lo), hi));
    __m512i p1 = _mm512_cvtps_epi32(_mm512_min_ps(_mm512_max_ps(round_away16(_mm512_mul_ps(r1, vid2)), lo), hi));
    put_level(xq, xq->qi2, xq->d2, xq->s2, r, b, p0, p1, d2);
}

void td_quantize_rows_avx512(const float *x, int64_t ldx, const td_qrows *xq, int64_t r0, int64_t r1) {
    if (!xq->x16) {
        td_quantize_rows_avx2(x, ldx, xq, r0, r1);
        return;
    }
    for (int64_t r = r0; r < r1; r++) {
        for (int64_t b = 0; b < xq->nb; b++) quantize_block(xq, r, b, x + r * ldx + b * TD_QBLOCK);
        td_qrows_pad(xq, r);
    }
}
