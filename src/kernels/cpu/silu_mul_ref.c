/* The SwiGLU gate g = silu(g) * u, scalar reference (td_silu_mul; silu_mul_avx2.c holds its AVX2 twin). */
#include <math.h>

#include "kernels/cpu/kernels.h"

void td_silu_mul(float *g, const float *u, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        float v = g[i];
        g[i] = (v / (1.0f + expf(-v))) * u[i];
    }
}
