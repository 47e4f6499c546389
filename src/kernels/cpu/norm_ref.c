/* RMSNorm, scalar reference (td_rmsnorm; norm_avx2.c holds its AVX2 twin): the mean of squares in double, the
 * scaling in fp32. */
#include <math.h>

#include "kernels/cpu/kernels.h"

void td_rmsnorm(float *y, const float *x, const float *w, int64_t n, float eps, int zero_centred) {
    double ss = 0.0; /* double: the mean of squares is then correctly rounded for any realistic n */
    for (int64_t i = 0; i < n; i++) ss += (double)x[i] * (double)x[i];
    float r = (float)(1.0 / sqrt((double)(float)(ss / (double)n) + (double)eps));
    for (int64_t i = 0; i < n; i++) {
        float wi = zero_centred ? 1.0f + w[i] : w[i];
        y[i] = (x[i] * r) * wi;
    }
}
