/* AVX2 attention of one query head over gathered key/value rows. Each score is one 8-lane dot product with a
 * fixed horizontal sum; each output element accumulates rows in index order: nothing depends on the batch. */
#include <immintrin.h>
#include <math.h>

#include "kernels/cpu/kernels.h"

static inline float hsum(__m256 a) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

void td_attn_avx2(const float *q, const float *k, const float *v, const int32_t *idx, int64_t n, int64_t stride,
                  int64_t dim, float scale, float *out, float *scratch) {
    int64_t d8 = dim & ~(int64_t)7;
    for (int64_t i = 0; i < n; i++) {
        const float *ki = k + (int64_t)idx[i] * stride;
        __m256 acc = _mm256_setzero_ps();
        for (int64_t d = 0; d < d8; d += 8) acc = _mm256_fmadd_ps(_mm256_loadu_ps(q + d), _mm256_loadu_ps(ki + d), acc);
        float s = hsum(acc);
        for (int64_t d = d8; d < dim; d++) s += q[d] * ki[d];
        scratch[i] = s * scale;
    }
    td_softmax(scratch, n);
    for (int64_t d = 0; d < dim; d++) out[d] = 0.0f;
    for (int64_t i = 0; i < n; i++) {
        const float *vi = v + (int64_t)idx[i] * stride;
        __m256 p = _mm256_set1_ps(scratch[i]);
        for (int64_t d = 0; d < d8; d += 8)
            _mm256_storeu_ps(out + d, _mm256_fmadd_ps(p, _mm256_loadu_ps(vi + d), _mm256_loadu_ps(out + d)));
        for (int64_t d = d8; d < dim; d++) out[d] += scratch[i] * vi[d];
    }
}

/* One key or value row as floats: f32 rows are used in place, f16 rows converted into buf. */
static inline const float *row_f32(const void *base, int kv_f16, int64_t at, int64_t dim, float *buf) {
    if (!kv_f16) return (const float *)base + at;
    const uint16_t *h = (const uint16_t *)base + at;
    int64_t d8 = dim & ~(int64_t)7;
    for (int64_t d = 0; d < d8; d += 8) _mm256_storeu_ps(buf + d, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(h + d))));
    for (int64_t d = d8; d < dim; d++) buf[d] = _cvtsh_ss(h[d]);
    return buf;
}

void td_attn_rows_avx2(const float *const *q, float *const *out, const int64_t *n, int64_t R, const void *k,
                       const void *v, int kv_f16, const int32_t *idx, int64_t stride, int64_t dim, float scale,
                       float *scratch) {
    int64_t d8 = dim & ~(int64_t)7, max_n = 0;
    float buf[1024];
    for (int64_t r = 0; r < R; r++) max_n = n[r] > max_n ? n[r] : max_n;
    for (int64_t i = 0; i < max_n; i++) { /* scores: each key row is read once for every row that needs it */
        const float *ki = row_f32(k, kv_f16, (int64_t)idx[i] * stride, dim, buf);
        for (int64_t r = 0; r < R; r++) {
            if (i >= n[r]) continue;
            const float *qr = q[r];
            __m256 acc = _mm256_setzero_ps();
            for (int64_t d = 0; d < d8; d += 8) acc = _mm256_fmadd_ps(_mm256_loadu_ps(qr + d), _mm256_loadu_ps(ki + d), acc);
            float s = hsum(acc);
            for (int64_t d = d8; d < dim; d++) s += qr[d] * ki[d];
            scratch[r * max_n + i] = s * scale;
        }
    }
    for (int64_t r = 0; r < R; r++) {
        td_softmax(scratch + r * max_n, n[r]);
        for (int64_t d = 0; d < dim; d++) out[r][d] = 0.0f;
    }
    for (int64_t i = 0; i < max_n; i++) { /* values, in key order for every row */
        const float *vi = row_f32(v, kv_f16, (int64_t)idx[i] * stride, dim, buf);
        for (int64_t r = 0; r < R; r++) {
            if (i >= n[r]) continue;
            float *o = out[r], p = scratch[r * max_n + i];
            __m256 pv = _mm256_set1_ps(p);
            for (int64_t d = 0; d < d8; d += 8)
                _mm256_storeu_ps(o + d, _mm256_fmadd_ps(pv, _mm256_loadu_ps(vi + d), _mm256_loadu_ps(o + d)));
            for (int64_t d = d8; d < dim; d++) o[d] += p * vi[d];
        }
    }
}
