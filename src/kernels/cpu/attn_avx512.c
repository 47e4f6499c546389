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

/* The horizontal sums of 8 vectors as 8 floats, out[j] = sum of a[j]: each halved to 8 lanes (low + high), then
 * every lane by the same tree ((0+1)+(2+3)) + ((4+5)+(6+7)). */
static inline void hsum8x16(const __m512 *a, float *out) {
    __m256 h[8];
    for (int j = 0; j < 8; j++)
        h[j] = _mm256_add_ps(_mm512_castps512_ps256(a[j]),
                             _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(a[j]), 1)));
    __m256 t0 = _mm256_hadd_ps(h[0], h[1]), t1 = _mm256_hadd_ps(h[2], h[3]);
    __m256 t2 = _mm256_hadd_ps(h[4], h[5]), t3 = _mm256_hadd_ps(h[6], h[7]);
    __m256 u0 = _mm256_hadd_ps(t0, t1), u1 = _mm256_hadd_ps(t2, t3);
    _mm256_storeu_ps(out, _mm256_add_ps(_mm256_permute2f128_ps(u0, u1, 0x20), _mm256_permute2f128_ps(u0, u1, 0x31)));
}

/* Scores of rows (q0, q1) against keys kp[0..3] (all valid): 8 dot products in 16-lane steps (the tail of dim
 * masked to zero), summed by hsum8x16, times scale. out[c * 4 + j] = row c, key j. */
static inline void scores_2x4(const float *q0, const float *q1, const float *const *kp, int64_t dim, float scale,
                              float *out) {
    __m512 acc[8];
    for (int j = 0; j < 8; j++) acc[j] = _mm512_setzero_ps();
    for (int64_t d = 0; d < dim; d += 16) {
        __mmask16 k = lanes(dim - d);
        __m512 a = _mm512_maskz_loadu_ps(k, q0 + d), b = _mm512_maskz_loadu_ps(k, q1 + d);
        for (int j = 0; j < 4; j++) {
            __m512 kv = _mm512_maskz_loadu_ps(k, kp[j] + d);
            acc[j] = _mm512_fmadd_ps(a, kv, acc[j]);
            acc[4 + j] = _mm512_fmadd_ps(b, kv, acc[4 + j]);
        }
    }
    hsum8x16(acc, out);
    for (int j = 0; j < 8; j++) out[j] *= scale;
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
    td_attn_tiles(scores_2x4, softmax16, values_cols, q, out, n, R, keys, dim, scale, scratch);
}
