/* Small AVX2 helpers shared by the *_avx2.c kernels (include only from files compiled with -mavx2 -mfma). */
#ifndef TD_KERNELS_CPU_AVX2_MATH_H
#define TD_KERNELS_CPU_AVX2_MATH_H

#include <immintrin.h>

/* The 8 lanes added in one fixed order: (a0+a4, a1+a5, a2+a6, a3+a7) -> ((.0+.2), (.1+.3)) -> .0+.1. */
static inline float td_hsum8(__m256 a) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* exp(x), 8 lanes: x = n ln2 + r, |r| <= ln2 / 2, e^r by a degree-6 polynomial (Cephes' expf coefficients),
 * scaled by 2^n through the exponent bits; about 1 ulp. Inputs are clamped to [-87, 88] (below -87 the result is
 * e^-87 = 1.6e-38, which no softmax or sigmoid can tell from zero). */
static inline __m256 td_exp8(__m256 x) {
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
    __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23); /* 2^n */
    return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}

#endif
