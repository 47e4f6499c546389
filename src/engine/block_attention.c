/* Softmax attention block: x += o_proj(Attention(RMSNorm_in(x))).
 * q/k/v projections; per-head RMSNorm on q and k; NeoX RoPE on the first rotary_dim dims; GQA attention over the
 * sequence's cached positions 0..pos. Qwen3.5 ("gated"): q_proj also yields, per head, a gate g and the output is
 * attention * sigmoid(g); its norms scale by (1 + w). */
#include "engine/engine.h"
#include <string.h>
#include <stdlib.h>
static void perturb(const char *what, float *x, long n) {
    const char *e = getenv("PERTURB");
    if (!e || strcmp(e, what) != 0) return;
    static unsigned long s = 12345;
    for (long i = 0; i < n; i++) { s = s * 6364136223846793005ul + 1; x[i] *= 1.0f + ((s >> 40) & 1 ? 1e-6f : -1e-6f); }
}


void td_block_attention(td_ctx *ctx, int il, const td_layer *ly) {
    const td_config *c = &ctx->model->cfg;
    const td_attn_weights *a = &ly->attn;
    const int zc = c->zero_centred_norms, gated = c->attn_output_gate;
    int64_t T = ctx->n_tokens, d = c->n_embd, hd = c->head_dim, kv_dim = ctx->kv_dim;
    int64_t q_head = hd * (gated ? 2 : 1);      /* per head in q_proj's output: [query | gate] */
    int64_t q_rows = (int64_t)c->n_head * q_head, att_dim = (int64_t)c->n_head * hd;

    for (int64_t t = 0; t < T; t++) td_rmsnorm(ctx->xb + t * d, ctx->x + t * d, ly->attn_norm, d, c->rms_eps, zc);
    td_eng_matmul(ctx, &a->wq, NULL, q_rows, ctx->xb, T, d, ctx->q, q_rows);   /* q   [T, Hq, hd (+ gate hd)] */
    td_eng_matmul(ctx, &a->wk, NULL, kv_dim, ctx->xb, T, d, ctx->kx, kv_dim);  /* k   [T, Hkv, hd] */
    td_eng_matmul(ctx, &a->wv, NULL, kv_dim, ctx->xb, T, d, ctx->vx, kv_dim);  /* v   [T, Hkv, hd] */

    void *kc = ctx->k_cache[il], *vc = ctx->v_cache[il];
    for (int64_t t = 0; t < T; t++) {
        for (int64_t h = 0; h < c->n_head; h++) {
            float *qh = ctx->q + t * q_rows + h * q_head;
            td_rmsnorm(qh, qh, a->q_norm, hd, c->rms_eps, zc);
            td_rope(qh, c->rotary_dim, ctx->inv_freq, ctx->tok_pos[t]);
        }
        for (int64_t h = 0; h < c->n_head_kv; h++) {
            float *kh = ctx->kx + t * kv_dim + h * hd;
            td_rmsnorm(kh, kh, a->k_norm, hd, c->rms_eps, zc);
            td_rope(kh, c->rotary_dim, ctx->inv_freq, ctx->tok_pos[t]);
        }
        td_eng_store_kv(ctx, kc, ctx->tok_cell[t], ctx->kx + t * kv_dim); /* into this token's cache cell */
        td_eng_store_kv(ctx, vc, ctx->tok_cell[t], ctx->vx + t * kv_dim);
    }

    td_eng_attention(ctx, ctx->q, q_rows, q_head, kc, vc);                     /* att [T, Hq * hd] */
    perturb("att", ctx->att, T * att_dim);
    if (gated)
        for (int64_t t = 0; t < T; t++)
            for (int64_t h = 0; h < c->n_head; h++)
                td_sigmoid_gate(ctx->att + t * att_dim + h * hd, ctx->q + t * q_rows + h * q_head + hd, hd);
    td_eng_matmul(ctx, &a->wo, NULL, d, ctx->att, T, att_dim, ctx->xb, d);     /* o   [T, d] */
    for (int64_t t = 0; t < T; t++) td_add(ctx->x + t * d, ctx->xb + t * d, d);
}
