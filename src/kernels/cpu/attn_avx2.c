/* Attention of the query rows of one KV group, AVX2 (td_attn_rows_avx2; attn_ref.c holds the reference). Each
 * score is one 8-lane dot product with a fixed horizontal sum; each output element accumulates rows in key order:
 * nothing depends on the batch or on which rows share a call. */
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "kernels/cpu/attn_tiles.h"
#include "kernels/cpu/avx2_math.h"
#include "kernels/cpu/kernels.h"

/* Softmax of x[0..n) in place: 8-lane max and sum (fixed lane trees), the tail element by element. */
static void softmax8(float *x, int64_t n) {
    int64_t n8 = n & ~(int64_t)7;
    __m256 m = _mm256_set1_ps(-INFINITY);
    for (int64_t i = 0; i < n8; i += 8) m = _mm256_max_ps(m, _mm256_loadu_ps(x + i));
    __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
    float mx = _mm_cvtss_f32(m4);
    for (int64_t i = n8; i < n; i++) mx = x[i] > mx ? x[i] : mx;
    __m256 vmx = _mm256_set1_ps(mx), sum = _mm256_setzero_ps();
    for (int64_t i = 0; i < n8; i += 8) {
        __m256 e = td_exp8(_mm256_sub_ps(_mm256_loadu_ps(x + i), vmx));
        _mm256_storeu_ps(x + i, e);
        sum = _mm256_add_ps(sum, e);
    }
    float s = td_hsum8(sum);
    if (n8 < n) { /* the tail through the same polynomial, one lane used */
        float t[8] = {0};
        for (int64_t i = n8; i < n; i++) t[i - n8] = x[i] - mx;
        __m256 e = td_exp8(_mm256_loadu_ps(t));
        _mm256_storeu_ps(t, e);
        for (int64_t i = n8; i < n; i++) s += x[i] = t[i - n8];
    }
    __m256 inv = _mm256_set1_ps(1.0f / s);
    for (int64_t i = 0; i < n8; i += 8) _mm256_storeu_ps(x + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), inv));
    for (int64_t i = n8; i < n; i++) x[i] *= 1.0f / s;
}

/* The horizontal sums of 8 vectors as one vector, lane j = sum of a[j]; every lane by the same tree
 * ((0+1)+(2+3)) + ((4+5)+(6+7)). */
static inline __m256 hsum8(const __m256 *a) {
    __m256 t0 = _mm256_hadd_ps(a[0], a[1]), t1 = _mm256_hadd_ps(a[2], a[3]);
    __m256 t2 = _mm256_hadd_ps(a[4], a[5]), t3 = _mm256_hadd_ps(a[6], a[7]);
    __m256 u0 = _mm256_hadd_ps(t0, t1), u1 = _mm256_hadd_ps(t2, t3);
    return _mm256_add_ps(_mm256_permute2f128_ps(u0, u1, 0x20), _mm256_permute2f128_ps(u0, u1, 0x31));
}

/* Scores of rows (q0, q1) against keys kp[0..3] (td_attn_scores_fn, KT = 4): 8 dot products in 8-lane steps,
 * summed by hsum8, the tail of dim added after, times scale. */
static inline void scores_2x4(const float *q0, const float *q1, const float *const *kp, int64_t dim, float scale,
                              float *s0, float *s1, int c0, int c1) {
    int64_t d8 = dim & ~(int64_t)7;
    __m256 acc[8];
    for (int j = 0; j < 8; j++) acc[j] = _mm256_setzero_ps();
    for (int64_t d = 0; d < d8; d += 8) {
        __m256 a = _mm256_loadu_ps(q0 + d), b = _mm256_loadu_ps(q1 + d);
        for (int j = 0; j < 4; j++) {
            __m256 kv = _mm256_loadu_ps(kp[j] + d);
            acc[j] = _mm256_fmadd_ps(a, kv, acc[j]);
            acc[4 + j] = _mm256_fmadd_ps(b, kv, acc[4 + j]);
        }
    }
    float out[8];
    _mm256_storeu_ps(out, hsum8(acc));
    for (int j = 0; j < 8; j++) {
        const float *qr = j < 4 ? q0 : q1, *kr = kp[j % 4];
        for (int64_t d = d8; d < dim; d++) out[j] += qr[d] * kr[d];
        out[j] *= scale;
    }
    for (int j = 0; j < c0; j++) s0[j] = out[j];
    for (int j = 0; j < c1; j++) s1[j] = out[4 + j];
}

/* out_r[d0 .. d0 + 8W) += sum_i p_r[i] v_i over keys c0 .. c1 of rows r0 (keys below n0) and r1 (below n1; r1 == NULL
 * for none), in key order, starting from zero when c0 == 0 and from the partial sums stored in out_r otherwise (a
 * store and a load of a vector change no bit, so the sum of each element is the same sequence of operations however
 * the keys are split into chunks); the keys both rows use are read once. */
static inline __attribute__((always_inline)) void values_rows(int W, const float *p0, const float *p1, int64_t n0,
                                                              int64_t n1, int64_t c0, int64_t c1,
                                                              const float *const *vp, int64_t d0, float *o0,
                                                              float *o1) {
    __m256 a[4], b[4];
    for (int w = 0; w < W; w++) {
        a[w] = c0 ? _mm256_loadu_ps(o0 + d0 + 8 * w) : _mm256_setzero_ps();
        b[w] = c0 && p1 ? _mm256_loadu_ps(o1 + d0 + 8 * w) : _mm256_setzero_ps();
    }
    int64_t e0 = n0 < c1 ? n0 : c1, e1 = p1 ? (n1 < c1 ? n1 : c1) : c0;
    int64_t both = p1 ? (e0 < e1 ? e0 : e1) : c0, i = c0;
    for (; i < both; i++) {
        __m256 x = _mm256_set1_ps(p0[i]), y = _mm256_set1_ps(p1[i]);
        for (int w = 0; w < W; w++) {
            __m256 v = _mm256_loadu_ps(vp[i] + d0 + 8 * w);
            a[w] = _mm256_fmadd_ps(x, v, a[w]);
            b[w] = _mm256_fmadd_ps(y, v, b[w]);
        }
    }
    for (int64_t j = i; j < e0; j++) {
        __m256 x = _mm256_set1_ps(p0[j]);
        for (int w = 0; w < W; w++) a[w] = _mm256_fmadd_ps(x, _mm256_loadu_ps(vp[j] + d0 + 8 * w), a[w]);
    }
    for (int64_t j = i; p1 && j < e1; j++) {
        __m256 y = _mm256_set1_ps(p1[j]);
        for (int w = 0; w < W; w++) b[w] = _mm256_fmadd_ps(y, _mm256_loadu_ps(vp[j] + d0 + 8 * w), b[w]);
    }
    for (int w = 0; w < W; w++) {
        _mm256_storeu_ps(o0 + d0 + 8 * w, a[w]);
        if (p1) _mm256_storeu_ps(o1 + d0 + 8 * w, b[w]);
    }
}

void td_attn_gather_avx2(const td_attn_keys *keys, int64_t R, int64_t max_n, int64_t dim, float *scratch,
                         const float ***kp_out, const float ***vp_out) {
    const void *k = keys->k, *v = keys->v;
    const int kv_f16 = keys->kv_f16;
    const int32_t *idx = keys->idx;
    const int64_t stride = keys->stride;
    const float **kp = (const float **)(void *)(scratch + ((R * max_n + 1) & ~(int64_t)1));
    const float **vp = kp + max_n;
    float *conv = (float *)(void *)(vp + max_n);
    /* The rows as floats, read once: in place for a row or two, else copied (or converted from f16) into
     * contiguous blocks, since a cache's rows of one head lie a whole KV row apart (4 KB strides alias in L1). */
    int copy = kv_f16 || R > 2;
    for (int64_t i = 0; i < max_n && i < keys->n_pre; i++) { /* already gathered for the whole pass */
        kp[i] = keys->pre_k + i * dim;
        vp[i] = keys->pre_v + i * dim;
    }
    for (int64_t i = keys->n_pre; i < max_n; i++) {
        int64_t at = (int64_t)idx[i] * stride;
        if (!copy) {
            kp[i] = (const float *)k + at;
            vp[i] = (const float *)v + at;
            continue;
        }
        float *kc = conv + i * dim, *vc = conv + (max_n + i) * dim;
        int64_t d = 0;
        if (kv_f16) {
            const uint16_t *kh = (const uint16_t *)k + at, *vh = (const uint16_t *)v + at;
            for (; d + 8 <= dim; d += 8) {
                _mm256_storeu_ps(kc + d, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(kh + d))));
                _mm256_storeu_ps(vc + d, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(vh + d))));
            }
            for (; d < dim; d++) kc[d] = _cvtsh_ss(kh[d]), vc[d] = _cvtsh_ss(vh[d]);
        } else {
            memcpy(kc, (const float *)k + at, (size_t)dim * sizeof *kc);
            memcpy(vc, (const float *)v + at, (size_t)dim * sizeof *vc);
        }
        kp[i] = kc;
        vp[i] = vc;
    }
    *kp_out = kp;
    *vp_out = vp;
}

/* Every column of a pair of rows' value sums over keys c0 .. c1 (td_attn_values_fn): 32 columns at a time, then 8,
 * then the last dim % 8 one at a time, each in key order. */
static void values_cols(const float *p0, const float *p1, int64_t n0, int64_t n1, int64_t c0, int64_t c1,
                        const float *const *vp, int64_t dim, float *o0, float *o1) {
    int64_t d = 0;
    for (; d + 32 <= dim; d += 32) values_rows(4, p0, p1, n0, n1, c0, c1, vp, d, o0, o1);
    for (; d + 8 <= dim; d += 8) values_rows(1, p0, p1, n0, n1, c0, c1, vp, d, o0, o1);
    for (; d < dim; d++) {
        float a = c0 ? o0[d] : 0.0f, b = c0 && p1 ? o1[d] : 0.0f;
        for (int64_t i = c0; i < n0 && i < c1; i++) a += p0[i] * vp[i][d];
        for (int64_t i = c0; p1 && i < n1 && i < c1; i++) b += p1[i] * vp[i][d];
        o0[d] = a;
        if (p1) o1[d] = b;
    }
}

void td_attn_rows_avx2(const float *const *q, float *const *out, const int64_t *n, int64_t R,
                       const td_attn_keys *keys, int64_t dim, float scale, float *scratch) {
    td_attn_tiles(4, scores_2x4, softmax8, values_cols, q, out, n, R, keys, dim, scale, scratch);
}
