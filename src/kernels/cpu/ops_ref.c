/* Scalar element-wise and row operations that have no SIMD twin (a vanishing share of the work): rotary embedding,
 * softmax, the DeltaNet l2 and gated RMS norms, the sigmoid gate, the causal conv step, softplus, add. */
#include <math.h>

#include "kernels/cpu/kernels.h"

void td_rope_inv_freq(float *inv_freq, int64_t rot, double theta) {
    /* transformers: 1.0 / (base ** (arange(0, dim, 2).float() / dim)), all in fp32 */
    for (int64_t i = 0; i < rot / 2; i++) {
        float e = (float)(2 * i) / (float)rot;
        inv_freq[i] = 1.0f / powf((float)theta, e);
    }
}

void td_rope_table(float *cs, int64_t rot, const float *inv_freq, int32_t pos) {
    int64_t h = rot / 2;
    for (int64_t i = 0; i < h; i++) {
        float angle = (float)pos * inv_freq[i]; /* fp32 product, as transformers' position @ inv_freq */
        cs[i] = (float)cos((double)angle);
        cs[h + i] = (float)sin((double)angle);
    }
}

void td_rope(float *x, int64_t rot, const float *cs) {
    int64_t h = rot / 2;
    for (int64_t i = 0; i < h; i++) {
        float c = cs[i], s = cs[h + i];
        float a = x[i], b = x[i + h];
        x[i] = a * c - b * s;
        x[i + h] = b * c + a * s;
    }
}

void td_add(float *y, const float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] += x[i];
}

void td_softmax(float *x, int64_t n) {
    if (n <= 0) return;
    float mx = x[0];
    for (int64_t i = 1; i < n; i++) mx = x[i] > mx ? x[i] : mx;
    float sum = 0.0f;
    for (int64_t i = 0; i < n; i++) {
        x[i] = expf(x[i] - mx);
        sum += x[i];
    }
    float inv = 1.0f / sum;
    for (int64_t i = 0; i < n; i++) x[i] *= inv;
}

void td_l2norm(float *x, int64_t n, float eps) {
    float ss = 0.0f;
    for (int64_t i = 0; i < n; i++) ss += x[i] * x[i];
    float r = 1.0f / sqrtf(ss + eps);
    for (int64_t i = 0; i < n; i++) x[i] *= r;
}

void td_gated_rmsnorm(float *y, const float *x, const float *z, const float *w, int64_t n, float eps) {
    double ss = 0.0;
    for (int64_t i = 0; i < n; i++) ss += (double)x[i] * (double)x[i];
    float r = (float)(1.0 / sqrt((double)(float)(ss / (double)n) + (double)eps));
    for (int64_t i = 0; i < n; i++) {
        float zi = z[i];
        y[i] = (w[i] * (x[i] * r)) * (zi / (1.0f + expf(-zi)));
    }
}

void td_sigmoid_gate(float *x, const float *gate, int64_t n) {
    for (int64_t i = 0; i < n; i++) x[i] *= 1.0f / (1.0f + expf(-gate[i]));
}

void td_conv_step(float *out, float *state, const float *x, const float *w, int64_t K, int64_t ld, int64_t c0,
                  int64_t c1) {
    for (int64_t c = c0; c < c1; c++) {
        const float *wc = w + c * K;
        float s = 0.0f;
        for (int64_t j = 0; j < K - 1; j++) s += wc[j] * state[j * ld + c];
        s += wc[K - 1] * x[c];
        out[c] = s / (1.0f + expf(-s));
        for (int64_t j = 0; j + 1 < K - 1; j++) state[j * ld + c] = state[(j + 1) * ld + c];
        if (K > 1) state[(K - 2) * ld + c] = x[c];
    }
}

float td_softplus(float x) { return x > 20.0f ? x : log1pf(expf(x)); }

void td_gelu_tanh_mul(float *g, const float *u, int64_t n) {
    const float beta = (float)(M_SQRT2 * M_2_SQRTPI * 0.5), kappa = 0.044715f; /* sqrt(2 / pi) */
    for (int64_t i = 0; i < n; i++) {
        float x = g[i], inner = beta * (x + kappa * (x * x * x));
        g[i] = (0.5f * x * (1.0f + tanhf(inner))) * u[i];
    }
}
