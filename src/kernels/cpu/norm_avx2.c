/* RMSNorm, AVX2 (td_rmsnorm_avx2; norm_ref.c holds the reference). Each output depends only on its own row, in a
 * fixed order, so results do not depend on the batch or the threads. */
#include <immintrin.h>
#include <math.h>

#include "kernels/cpu/kernels.h"

/* The mean of squares in double, as the scalar version (4 lanes, then a fixed tree), the scaling in fp32. */
void td_rmsnorm_avx2(float *y, const float *x, const float *w, int64_t n, float eps, int zero_centred) {
    __m256d a0 = _mm256_setzero_pd(), a1 = _mm256_setzero_pd();
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_loadu_ps(x + i);
        __m256d lo = _mm256_cvtps_pd(_mm256_castps256_ps128(v)), hi = _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1));
        a0 = _mm256_fmadd_pd(lo, lo, a0);
        a1 = _mm256_fmadd_pd(hi, hi, a1);
    }
    __m256d a = _mm256_add_pd(a0, a1);
    __m128d h = _mm_add_pd(_mm256_castpd256_pd128(a), _mm256_extractf128_pd(a, 1));
    double ss = _mm_cvtsd_f64(_mm_add_sd(h, _mm_unpackhi_pd(h, h)));
    for (; i < n; i++) ss += (double)x[i] * (double)x[i];
    float r = (float)(1.0 / sqrt((double)(float)(ss / (double)n) + (double)eps));
    __m256 vr = _mm256_set1_ps(r), one = _mm256_set1_ps(1.0f);
    for (i = 0; i + 8 <= n; i += 8) {
        __m256 wi = _mm256_loadu_ps(w + i);
        if (zero_centred) wi = _mm256_add_ps(one, wi);
        _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(x + i), vr), wi));
    }
    for (; i < n; i++) y[i] = (x[i] * r) * (zero_centred ? 1.0f + w[i] : w[i]);
}
