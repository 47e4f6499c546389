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

/* The lanes of r16 slab s (rows 16 s .. 16 s + 15) that rows [j0, j1) cover. */
static inline __mmask16 td_r16_mask(int64_t s, int64_t j0, int64_t j1) {
    int64_t lo = j0 > 16 * s ? j0 - 16 * s : 0, hi = j1 < 16 * (s + 1) ? j1 - 16 * s : 16;
    return (__mmask16)(((1u << hi) - 1u) & ~((1u << lo) - 1u));
}

#endif
