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

/* ---- a whole group of 16 blocks at once ----------------------------------------------------------------------
 * The same arithmetic as quantize_block, with what a block does alone done for 16 of them in one vector: the
 * blocks' largest magnitudes and sums come out of one reduction tree (lane j = block j), the scales and their
 * inverses are one division each, and x16's interleaved bytes are one transpose and 8 stores a level instead of 128
 * 4-byte stores. max and wrapping integer adds do not depend on their order, the divisions and conversions are
 * the same IEEE operations lane by lane: the bytes are those of quantize_block (test_kernels against the
 * reference). A decode's quantiser runs serially between the products (NOTES.md). */

/* One step of the reduction tree: a and b each hold partial results of several blocks; the result holds the same
 * blocks' partials combined two by two (imm_lo / imm_hi pick the two halves each block's partials are in). */
#define TREE_F32X4(op, a, b, imm_lo, imm_hi) op(_mm512_shuffle_f32x4(a, b, imm_lo), _mm512_shuffle_f32x4(a, b, imm_hi))
#define TREE_PS(op, a, b, imm_lo, imm_hi) op(_mm512_shuffle_ps(a, b, imm_lo), _mm512_shuffle_ps(a, b, imm_hi))

/* Lane j of the result: op over the 16 lanes of v[j] (op a max or a wrapping add on floats' bits). The tree leaves
 * block 4k + q in lane 4q + k; the last permute puts it in lane 4k + q. */
#define REDUCE16(op, v, out)                                                                                           \
    do {                                                                                                               \
        __m512 m8_[8], m4_[4], m2_[2];                                                                                 \
        for (int i_ = 0; i_ < 8; i_++) m8_[i_] = TREE_F32X4(op, v[2 * i_], v[2 * i_ + 1], 0x44, 0xee);                \
        for (int i_ = 0; i_ < 4; i_++) m4_[i_] = TREE_F32X4(op, m8_[2 * i_], m8_[2 * i_ + 1], 0x88, 0xdd);            \
        for (int i_ = 0; i_ < 2; i_++) m2_[i_] = TREE_PS(op, m4_[2 * i_], m4_[2 * i_ + 1], 0x44, 0xee);               \
        out = _mm512_permutexvar_ps(_mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15),          \
                                    TREE_PS(op, m2_[0], m2_[1], 0x88, 0xdd));                                          \
    } while (0)

static inline __m512 add_bits(__m512 a, __m512 b) {
    return _mm512_castsi512_ps(_mm512_add_epi32(_mm512_castps_si512(a), _mm512_castps_si512(b)));
}

/* x16's interleaved group from the blocks' bytes: z[i] holds block i's 8 words (4 bytes each: chunk k = elements
 * 4k..4k+3) then block i + 8's; chunk k of the group is word k of blocks 0..15. Three steps, each swapping one bit
 * of the register index (block bits 2, 1, 0) with the same bit of the lane (the word's bits 2, 1, 0), leave chunk k
 * in z[k], block j in lane j. Step s pairs z[i] (bit s clear) with z[i | 1 << s]: lane l of the first takes lane
 * l & ~(1 << s), of the second l | 1 << s, from the first register when bit s of l is clear, else from the second
 * (index + 16). */
static const int32_t swap_lo[3][16] = {{0, 16, 2, 18, 4, 20, 6, 22, 8, 24, 10, 26, 12, 28, 14, 30},
                                       {0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29},
                                       {0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27}};
static const int32_t swap_hi[3][16] = {{1, 17, 3, 19, 5, 21, 7, 23, 9, 25, 11, 27, 13, 29, 15, 31},
                                       {2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31},
                                       {4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30, 31}};

static void store_interleaved(int8_t *dst, __m512i z[8]) {
    for (int s = 2; s >= 0; s--) {
        const __m512i ilo = _mm512_loadu_si512(swap_lo[s]), ihi = _mm512_loadu_si512(swap_hi[s]);
        for (int i = 0; i < 8; i++) {
            if (i & 1 << s) continue;
            __m512i a = z[i], b = z[i | 1 << s];
            z[i] = _mm512_permutex2var_epi32(a, ilo, b);
            z[i | 1 << s] = _mm512_permutex2var_epi32(a, ihi, b);
        }
    }
    for (int k = 0; k < 8; k++) _mm512_storeu_si512(dst + k * TD_X16_CHUNK, z[k]);
}

/* One level of a group: block j's integers in q[2j], q[2j + 1]; its bytes, scales d and sums into the level's
 * arrays (qi, d, s) at group g. */
static void put_group_level(const td_qrows *xq, int8_t *qi, float *d, int32_t *s, int64_t g, const __m512i q[32],
                            __m512 scale) {
    __m512 sums[16];
    __m256i bytes[16];
    for (int j = 0; j < 16; j++) {
        bytes[j] = _mm256_set_m128i(_mm512_cvtsepi32_epi8(q[2 * j + 1]), _mm512_cvtsepi32_epi8(q[2 * j]));
        sums[j] = _mm512_castsi512_ps(_mm512_add_epi32(q[2 * j], q[2 * j + 1]));
    }
    int8_t *dst = qi + g * TD_X16_GROUP;
    if (xq->natural) {
        for (int j = 0; j < 16; j++) _mm256_storeu_si256((__m256i *)(void *)(dst + j * TD_QBLOCK), bytes[j]);
    } else {
        __m512i z[8];
        for (int i = 0; i < 8; i++) z[i] = _mm512_inserti64x4(_mm512_castsi256_si512(bytes[i]), bytes[i + 8], 1);
        store_interleaved(dst, z);
    }
    __m512 sum;
    REDUCE16(add_bits, sums, sum);
    _mm512_storeu_ps(d + g * TD_X16_LANES, scale);
    _mm512_storeu_si512(s + g * TD_X16_LANES, _mm512_castps_si512(sum));
}

/* 1 / v where v != 0 (NaN included, as `d != 0.0f ? 1.0f / d : 0.0f`), else 0. */
static inline __m512 inverse_or_zero(__m512 v) {
    return _mm512_maskz_div_ps(_mm512_cmp_ps_mask(v, _mm512_setzero_ps(), _CMP_NEQ_UQ), _mm512_set1_ps(1.0f), v);
}

/* Group g (blocks 16 g .. 16 g + 15) of row r, xb its 512 values: quantize_block's arithmetic, 16 blocks a vector. */
static void quantize_group(const td_qrows *xq, int64_t r, int64_t g, const float *xb) {
    __m512 v[32], a[16], amax;
    __m512i q[32];
    for (int i = 0; i < 32; i++) v[i] = _mm512_loadu_ps(xb + 16 * i);
    for (int j = 0; j < 16; j++) a[j] = _mm512_max_ps(_mm512_abs_ps(v[2 * j]), _mm512_abs_ps(v[2 * j + 1]));
    REDUCE16(_mm512_max_ps, a, amax);
    __m512 d = _mm512_div_ps(amax, _mm512_set1_ps(127.0f)), id = inverse_or_zero(d);
    __m512 d1 = _mm512_cvtph_ps(_mm512_cvtps_ph(d, _MM_FROUND_TO_NEAREST_INT));
    float idj[16], d1j[16];
    _mm512_storeu_ps(idj, id);
    _mm512_storeu_ps(d1j, d1);
    for (int i = 0; i < 32; i++) q[i] = _mm512_cvtps_epi32(round_away16(_mm512_mul_ps(v[i], _mm512_set1_ps(idj[i / 2]))));
    const int64_t gr = r * xq->nbg + g;
    put_group_level(xq, xq->qi, xq->d, xq->s, gr, q, d1);
    if (xq->x16 < 2) return;
    for (int i = 0; i < 32; i++) /* the remainders, in v */
        v[i] = _mm512_sub_ps(v[i], _mm512_mul_ps(_mm512_set1_ps(d1j[i / 2]), _mm512_cvtepi32_ps(q[i])));
    __m512 d2;
    if (xq->natural) {
        d2 = _mm512_div_ps(d1, _mm512_set1_ps((float)(1 << TD_R16_SHIFT))); /* td_qrows_level2_scale */
    } else {
        for (int j = 0; j < 16; j++) a[j] = _mm512_max_ps(_mm512_abs_ps(v[2 * j]), _mm512_abs_ps(v[2 * j + 1]));
        REDUCE16(_mm512_max_ps, a, amax);
        d2 = _mm512_div_ps(amax, _mm512_set1_ps(127.0f));
    }
    float id2j[16];
    _mm512_storeu_ps(id2j, inverse_or_zero(d2));
    const __m512 lo = _mm512_set1_ps(-127.0f), hi = _mm512_set1_ps(127.0f);
    for (int i = 0; i < 32; i++)
        q[i] = _mm512_cvtps_epi32(
            _mm512_min_ps(_mm512_max_ps(round_away16(_mm512_mul_ps(v[i], _mm512_set1_ps(id2j[i / 2]))), lo), hi));
    put_group_level(xq, xq->qi2, xq->d2, xq->s2, gr, q, d2);
}

void td_quantize_rows_avx512(const float *x, int64_t ldx, const td_qrows *xq, int64_t r0, int64_t r1) {
    if (!xq->x16) {
        td_quantize_rows_avx2(x, ldx, xq, r0, r1);
        return;
    }
    const int64_t full = xq->nb / TD_X16_LANES; /* whole groups; the last blocks one at a time */
    for (int64_t r = r0; r < r1; r++) {
        for (int64_t g = 0; g < full; g++) quantize_group(xq, r, g, x + r * ldx + g * TD_X16_GROUP);
        for (int64_t b = full * TD_X16_LANES; b < xq->nb; b++) quantize_block(xq, r, b, x + r * ldx + b * TD_QBLOCK);
        td_qrows_pad(xq, r);
    }
}
