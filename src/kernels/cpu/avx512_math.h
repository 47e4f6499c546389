/* Small AVX-512 helpers shared by the *_avx512.c kernels (include only from files compiled with -mavx512f). */
#ifndef TD_KERNELS_CPU_AVX512_MATH_H
#define TD_KERNELS_CPU_AVX512_MATH_H

#include <immintrin.h>
#include <stdint.h>

/* The 16 lanes added as td_qpack_lanes_sum does: i + 8, then + 4, + 2, + 1. */
static inline float td_hsum16(__m512 a) {
    __m256 s8 = _mm256_add_ps(_mm512_castps512_ps256(a), _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(a), 1)));
    __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
    __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
    return _mm_cvtss_f32(_mm_add_ss(s2, _mm_movehdup_ps(s2)));
}

/* exp(x), 16 lanes: td_exp8 (avx2_math.h) widened, the same operations lane for lane. */
static inline __m512 td_exp16(__m512 x) {
    x = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(-87.0f)), _mm512_set1_ps(88.0f));
    __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
    __m512 p = _mm512_set1_ps(1.9875691500e-4f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
    p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
    __m512i e = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23); /* 2^n */
    return _mm512_mul_ps(p, _mm512_castsi512_ps(e));
}

/* The lanes of r16 slab s (rows 16 s .. 16 s + 15) that rows [j0, j1) cover. */
static inline __mmask16 td_r16_mask(int64_t s, int64_t j0, int64_t j1) {
    int64_t lo = j0 > 16 * s ? j0 - 16 * s : 0, hi = j1 < 16 * (s + 1) ? j1 - 16 * s : 16;
    return (__mmask16)(((1u << hi) - 1u) & ~((1u << lo) - 1u));
}

#endif
