/* Gated DeltaNet recurrent step, AVX2 (td_deltanet_step_avx2; deltanet_ref.c holds the reference): two passes over
 * the [dk, dv] state, 8 value dims at a time. Every element follows a fixed order of operations (i ascending),
 * independent of anything outside this head. */
#include <immintrin.h>
#include <math.h>

#include "kernels/cpu/kernels.h"

void td_deltanet_step_avx2(float *S, const float *q, const float *k, const float *v, float g, float beta,
                           int64_t dk, int64_t dv, float *o) {
    float decay = expf(g);
    int64_t dv8 = dv & ~(int64_t)7;
    __m256 vdec = _mm256_set1_ps(decay);
    for (int64_t j = 0; j < dv; j++) o[j] = 0.0f;
    for (int64_t i = 0; i < dk; i++) { /* S *= decay; m = S^T k (in o) */
        float *Si = S + i * dv;
        __m256 ki = _mm256_set1_ps(k[i]);
        for (int64_t j = 0; j < dv8; j += 8) {
            __m256 s = _mm256_mul_ps(_mm256_loadu_ps(Si + j), vdec);
            _mm256_storeu_ps(Si + j, s);
            _mm256_storeu_ps(o + j, _mm256_fmadd_ps(s, ki, _mm256_loadu_ps(o + j)));
        }
        for (int64_t j = dv8; j < dv; j++) {
            Si[j] *= decay;
            o[j] += Si[j] * k[i];
        }
    }
    float d[TD_DELTANET_MAX_DV];
    for (int64_t j = 0; j < dv; j++) d[j] = beta * (v[j] - o[j]);
    for (int64_t j = 0; j < dv; j++) o[j] = 0.0f;
    for (int64_t i = 0; i < dk; i++) { /* S += k d^T; o = S^T q */
        float *Si = S + i * dv;
        __m256 ki = _mm256_set1_ps(k[i]), qi = _mm256_set1_ps(q[i]);
        for (int64_t j = 0; j < dv8; j += 8) {
            __m256 s = _mm256_fmadd_ps(ki, _mm256_loadu_ps(d + j), _mm256_loadu_ps(Si + j));
            _mm256_storeu_ps(Si + j, s);
            _mm256_storeu_ps(o + j, _mm256_fmadd_ps(s, qi, _mm256_loadu_ps(o + j)));
        }
        for (int64_t j = dv8; j < dv; j++) {
            Si[j] += k[i] * d[j];
            o[j] += Si[j] * q[i];
        }
    }
}
