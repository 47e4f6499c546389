/* Attention of the query rows of one KV group, scalar reference (td_attn_rows_ref; attn_avx2.c holds its AVX2
 * twin), and the scratch size both need. Each row: scores in key order, td_softmax, values accumulated in key
 * order; a key's values come from the gathered prefix rows or the cache (f16 converted exactly to fp32). */
#include "kernels/cpu/kernels.h"
#include "util/half.h"

int64_t td_attn_rows_scratch(int64_t R, int64_t max_n, int64_t dim, int kv_f16) {
    /* scores, then (AVX2) two arrays of row pointers and the rows copied (converted from f16) to f32 */
    (void)kv_f16;
    return R * max_n + 2 + 4 * max_n + 2 * max_n * dim + 16;
}

/* Element d of key (which = 0) or value (1) row i. */
static float key_value(const td_attn_keys *ks, int which, int64_t i, int64_t d, int64_t dim) {
    if (i < ks->n_pre) return (which ? ks->pre_v : ks->pre_k)[i * dim + d];
    int64_t at = (int64_t)ks->idx[i] * ks->stride + d;
    const void *base = which ? ks->v : ks->k;
    return ks->kv_f16 ? td_f16_to_f32(((const uint16_t *)base)[at]) : ((const float *)base)[at];
}

void td_attn_rows_ref(const float *const *q, float *const *out, const int64_t *n, int64_t R, const td_attn_keys *keys,
                      int64_t dim, float scale, float *scratch) {
    for (int64_t r = 0; r < R; r++) {
        float *s = scratch;
        for (int64_t i = 0; i < n[r]; i++) {
            float acc = 0.0f;
            for (int64_t d = 0; d < dim; d++) acc += q[r][d] * key_value(keys, 0, i, d, dim);
            s[i] = acc * scale;
        }
        td_softmax(s, n[r]);
        for (int64_t d = 0; d < dim; d++) out[r][d] = 0.0f;
        for (int64_t i = 0; i < n[r]; i++)
            for (int64_t d = 0; d < dim; d++) out[r][d] += s[i] * key_value(keys, 1, i, d, dim);
    }
}
