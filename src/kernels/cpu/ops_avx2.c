/* AVX2 versions of the row operations that run once per token and layer: RMSNorm and the SwiGLU gate. Each
 * output depends only on its own row, in a fixed order, so results do not depend on the batch or the threads;
 * they agree with the scalar versions (ops_ref.c) to a few ulp (test_kernels). */
#include <immintrin.h>
#include <math.h>

#include "kernels/cpu/kernels.h"

/* exp(x), 8 lanes, for |x| <= 88: x = n ln2 + r, |r| <= ln2 / 2, e^r by a degree-6 polynomial (Cephes' expf
 * coefficients), scaled by 2^n through the exponent bits; about 1 ulp. Inputs are clamped to [-87, 88]. */
static inline __m256 exp8(__m256 x) {
    x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.0f)), _mm256_set1_ps(88.0f));
    __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 p = _mm256_set1_ps(1.9875691500e-4f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
    p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23); /* 2^n, n in [-126, 127] */
    return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}

void td_silu_mul_avx2(float *g, const float *u, int64_t n) {
    int64_t i = 0;
    const __m256 one = _mm256_set1_ps(1.0f);
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_loadu_ps(g + i);
        __m256 s = _mm256_div_ps(v, _mm256_add_ps(one, exp8(_mm256_sub_ps(_mm256_setzero_ps(), v))));
        _mm256_storeu_ps(g + i, _mm256_mul_ps(s, _mm256_loadu_ps(u + i)));
    }
    for (; i < n; i++) g[i] = (g[i] / (1.0f + expf(-g[i]))) * u[i];
}

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
