/* The SwiGLU gate g = silu(g) * u, AVX2 (td_silu_mul_avx2; silu_mul_ref.c holds the reference): 8 lanes with
 * td_exp8 in place of expf, the tail as the reference. Each element depends only on its own inputs. */
#include <immintrin.h>
#include <math.h>

#include "kernels/cpu/avx2_math.h"
#include "kernels/cpu/kernels.h"

void td_silu_mul_avx2(float *g, const float *u, int64_t n) {
    int64_t i = 0;
    const __m256 one = _mm256_set1_ps(1.0f);
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_loadu_ps(g + i);
        __m256 s = _mm256_div_ps(v, _mm256_add_ps(one, td_exp8(_mm256_sub_ps(_mm256_setzero_ps(), v))));
        _mm256_storeu_ps(g + i, _mm256_mul_ps(s, _mm256_loadu_ps(u + i)));
    }
    for (; i < n; i++) g[i] = (g[i] / (1.0f + expf(-g[i]))) * u[i];
}
