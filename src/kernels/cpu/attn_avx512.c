/* Attention of the query rows of one KV group, AVX-512 (td_attn_rows_avx512; attn_ref.c holds the reference,
 * attn_avx2.c the 8-lane version it widens). Each score is one 16-lane dot product (the tail of dim masked to zero)
 * with a fixed horizontal sum; the softmax runs 16 lanes at a time (the tail masked); each output element
 * accumulates rows in key order: nothing depends on the batch or on which rows share a call. */
#include <immintrin.h>
#include <math.h>

#include "kernels/cpu/attn_tiles.h"
#include "kernels/cpu/avx512_math.h"
#include "kernels/cpu/kernels.h"

/* The first `n` lanes (n < 16), or all when n >= 16. */
static inline __mmask16 lanes(int64_t n) { return n >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << n) - 1u); }

/* Softmax of x[0..n) in place: 16-lane max and sum (fixed lane trees, the tail masked). */
static void softmax16(float *x, int64_t n) {
    __m512 m = _mm512_set1_ps(-INFINITY);
    for (int64_t i = 0; i < n; i += 16)
        m = _mm512_max_ps(m, _mm512_mask_loadu_ps(_mm512_set1_ps(-INFINITY), lanes(n - i), x + i));
    __m512 vmx = _mm512_set1_ps(_mm512_reduce_max_ps(m)), sum = _mm512_setzero_ps();
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 k = lanes(n - i);
        __m512 e = _mm512_maskz_mov_ps(k, td_exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, x + i), vmx)));
        _mm512_mask_storeu_ps(x + i, k, e);
        sum = _mm512_add_ps(sum, e);
    }
    __m512 inv = _mm512_set1_ps(1.0f / td_hsum16(sum));
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 k = lanes(n - i);
        _mm512_mask_storeu_ps(x + i, k, _mm512_mul_ps(_mm512_maskz_loadu_ps(k, x + i), inv));
    }
}

/* Two vectors' halves added, a's in lanes 0-7, b's in 8-15: lane l of each half = x[l] + x[l + 8]. */
static inline __m512 halves(__m512 a, __m512 b) {
    return _mm512_add_ps(_mm512_shuffle_f32x4(a, b, _MM_SHUFFLE(1, 0, 1, 0)),
                         _mm512_shuffle_f32x4(a, b, _MM_SHUFFLE(3, 2, 3, 2)));
}

/* Adjacent lanes added, in each 128-bit lane: [m0 + m1, m2 + m3, n0 + n1, n2 + n3]. */
static inline __m512 pairs(__m512 m, __m512 n) {
    return _mm512_add_ps(_mm512_shuffle_ps(m, n, _MM_SHUFFLE(2, 0, 2, 0)), _mm512_shuffle_ps(m, n, _MM_SHUFFLE(3, 1, 3, 1)));
}

/* The horizontal sums of 16 vectors as one vector, lane j = the sum of a[j], every one by the tree
 * h_l = x[l] + x[l + 8], then ((h0 + h1) + (h2 + h3)) + ((h4 + h5) + (h6 + h7)) (hsum8x16's before): 45 shuffles
 * and adds for 16 sums. The halves are taken in the order that puts the sums in lane order. */
static inline __m512 hsum16(const __m512 *a) {
    __m512 t0 = pairs(halves(a[0], a[4]), halves(a[1], a[5])), t1 = pairs(halves(a[2], a[6]), halves(a[3], a[7]));
    __m512 t2 = pairs(halves(a[8], a[12]), halves(a[9], a[13])), t3 = pairs(halves(a[10], a[14]), halves(a[11], a[15]));
    __m512 u0 = pairs(t0, t1), u1 = pairs(t2, t3);
    return _mm512_add_ps(_mm512_shuffle_f32x4(u0, u1, _MM_SHUFFLE(2, 0, 2, 0)),
                         _mm512_shuffle_f32x4(u0, u1, _MM_SHUFFLE(3, 1, 3, 1)));
}

/* acc[j] += q0 * key j, acc[8 + j] += q1 * key j over 16 lanes of dim from d (the lanes of mask k; 0xffff: all). */
static inline __attribute__((always_inline)) void dots_2x8(__m512 *acc, const float *q0, const float *q1,
                                                           const float *const *kp, int64_t d, __mmask16 k) {
    __m512 a = _mm512_maskz_loadu_ps(k, q0 + d), b = _mm512_maskz_loadu_ps(k, q1 + d);
    _Pragma("GCC unroll 8") for (int j = 0; j < 8; j++) {
        __m512 kv = _mm512_maskz_loadu_ps(k, kp[j] + d);
        acc[j] = _mm512_fmadd_ps(a, kv, acc[j]);
        acc[8 + j] = _mm512_fmadd_ps(b, kv, acc[8 + j]);
    }
}

/* Scores of rows (q0, q1) against keys kp[0..7] (td_attn_scores_fn, KT = 8): 16 dot products in 16-lane steps (the
 * tail of dim masked to zero), summed by hsum16, times scale; lanes 0-7 row 0's, 8-15 row 1's. */
static inline void scores_2x8(const float *q0, const float *q1, const float *const *kp, int64_t dim, float scale,
                              float *s0, float *s1, int c0, int c1) {
    __m512 acc[16];
    _Pragma("GCC unroll 16") for (int j = 0; j < 16; j++) acc[j] = _mm512_setzero_ps();
    int64_t d = 0;
    for (; d + 16 <= dim; d += 16) dots_2x8(acc, q0, q1, kp, d, 0xffff);
    if (d < dim) dots_2x8(acc, q0, q1, kp, d, lanes(dim - d));
    __m512 s = _mm512_mul_ps(hsum16(acc), _mm512_set1_ps(scale));
    _mm512_mask_storeu_ps(s0, (__mmask16)((1u << c0) - 1u), s);
    if (c1)
        _mm256_mask_storeu_ps(s1, (__mmask8)((1u << c1) - 1u),
                              _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(s), 1)));
}

/* out_r[d0 .. d0 + 16W) (the last vector masked to `tail` lanes) += sum_i p_r[i] v_i over keys c0 .. c1 of rows
 * r0 (keys below n0) and r1 (below n1; p1 == NULL for none), in key order, starting from zero when c0 == 0 and from
 * the partial sums stored in out_r otherwise; the keys both rows use are read once. */
static inline __attribute__((always_inline)) void values_rows(int W, __mmask16 tail, const float *p0, const float *p1,
                                                              int64_t n0, int64_t n1, int64_t c0, int64_t c1,
                                                              const float *const *vp, int64_t d0, float *o0,
                                                              float *o1) {
    __m512 a[4], b[4];
    __mmask16 k[4];
    for (int w = 0; w < W; w++) {
        k[w] = w == W - 1 ? tail : (__mmask16)0xffff;
        a[w] = c0 ? _mm512_maskz_loadu_ps(k[w], o0 + d0 + 16 * w) : _mm512_setzero_ps();
        b[w] = c0 && p1 ? _mm512_maskz_loadu_ps(k[w], o1 + d0 + 16 * w) : _mm512_setzero_ps();
    }
    int64_t e0 = n0 < c1 ? n0 : c1, e1 = p1 ? (n1 < c1 ? n1 : c1) : c0;
    int64_t both = p1 ? (e0 < e1 ? e0 : e1) : c0, i = c0;
    for (; i < both; i++) {
        __m512 x = _mm512_set1_ps(p0[i]), y = _mm512_set1_ps(p1[i]);
        for (int w = 0; w < W; w++) {
            __m512 v = _mm512_maskz_loadu_ps(k[w], vp[i] + d0 + 16 * w);
            a[w] = _mm512_fmadd_ps(x, v, a[w]);
            b[w] = _mm512_fmadd_ps(y, v, b[w]);
        }
    }
    for (int64_t j = i; j < e0; j++) {
        __m512 x = _mm512_set1_ps(p0[j]);
        for (int w = 0; w < W; w++) a[w] = _mm512_fmadd_ps(x, _mm512_maskz_loadu_ps(k[w], vp[j] + d0 + 16 * w), a[w]);
    }
    for (int64_t j = i; p1 && j < e1; j++) {
        __m512 y = _mm512_set1_ps(p1[j]);
        for (int w = 0; w < W; w++) b[w] = _mm512_fmadd_ps(y, _mm512_maskz_loadu_ps(k[w], vp[j] + d0 + 16 * w), b[w]);
    }
    for (int w = 0; w < W; w++) {
        _mm512_mask_storeu_ps(o0 + d0 + 16 * w, k[w], a[w]);
        if (p1) _mm512_mask_storeu_ps(o1 + d0 + 16 * w, k[w], b[w]);
    }
}

/* Every column of a pair of rows' value sums over keys c0 .. c1 (td_attn_values_fn): 64 columns at a time, then
 * 16, the last vector masked to dim's tail. */
static void values_cols(const float *p0, const float *p1, int64_t n0, int64_t n1, int64_t c0, int64_t c1,
                        const float *const *vp, int64_t dim, float *o0, float *o1) {
    const __mmask16 tail = lanes(dim % 16 ? dim % 16 : 16);
    int64_t d = 0;
    for (; d + 64 <= dim; d += 64) values_rows(4, 0xffff, p0, p1, n0, n1, c0, c1, vp, d, o0, o1);
    for (; d + 16 < dim; d += 16) values_rows(1, 0xffff, p0, p1, n0, n1, c0, c1, vp, d, o0, o1);
    if (d < dim) values_rows(1, tail, p0, p1, n0, n1, c0, c1, vp, d, o0, o1);
}

void td_attn_rows_avx512(const float *const *q, float *const *out, const int64_t *n, int64_t R,
                         const td_attn_keys *keys, int64_t dim, float scale, float *scratch) {
    td_attn_tiles(8, scores_2x8, softmax16, values_cols, q, out, n, R, keys, dim, scale, scratch);
}
