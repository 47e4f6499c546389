/* The inverse frequencies of a model's RoPE sets, as transformers computes them (modeling_rope_utils.py), in fp32
 * with its order of operations: the default, linear scaling, and Llama 3.1's smooth blend. */
#include <math.h>

#include "model/model.h"

static void llama3(float *f, int64_t n, const td_rope_params *p) {
    /* the scalars as PyTorch uses them against fp32 tensors: rounded to fp32 first */
    const float factor = (float)p->factor, lo = (float)p->low_freq_factor, old = (float)p->original_ctx;
    const float low_wl = (float)((double)p->original_ctx / p->low_freq_factor);
    const float high_wl = (float)((double)p->original_ctx / p->high_freq_factor);
    const float span = (float)(p->high_freq_factor - p->low_freq_factor), two_pi = (float)(2 * M_PI);
    for (int64_t i = 0; i < n; i++) {
        float wavelen = two_pi / f[i];
        float inv = wavelen > low_wl ? f[i] / factor : f[i]; /* long wavelengths: divided by factor */
        float smooth = (old / wavelen - lo) / span;
        float smoothed = (1.0f - smooth) * inv / factor + smooth * inv;
        int medium = !(wavelen < high_wl) && !(wavelen > low_wl);
        f[i] = medium ? smoothed : inv;
    }
}

void td_model_inv_freq(const td_model *m, int set, float *inv_freq) {
    const td_config *c = &m->cfg;
    const td_rope_params *p = &c->rope[set];
    int64_t n = c->rotary_dim / 2;
    td_rope_inv_freq(inv_freq, c->rotary_dim, p->theta);
    if (set == 0 && m->rope_freqs) { /* a GGUF's factors (llama.cpp's rope_freqs.weight): frequencies divided */
        for (int64_t i = 0; i < n; i++) inv_freq[i] /= m->rope_freqs[i];
        return;
    }
    if (p->type == TD_ROPE_LINEAR)
        for (int64_t i = 0; i < n; i++) inv_freq[i] /= (float)p->factor;
    else if (p->type == TD_ROPE_LLAMA3) llama3(inv_freq, n, p);
}
