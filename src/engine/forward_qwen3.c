/* The Qwen3 forward pass, as transformers' Qwen3ForCausalLM computes it, in fp32:
 *   x = embed[token]
 *   for each layer:  x = x + Attn(RMSNorm_in(x));  x = x + MLP(RMSNorm_post(x))
 *   logits = head(RMSNorm_final(x))        (only for tokens that want an output; see td_eng_outputs)
 * Attn: q/k/v projections, per-head RMSNorm on q and k, NeoX RoPE, GQA softmax attention over the cache, o_proj.
 * MLP:  down(silu(gate(x)) * up(x)). */
#include "engine/engine.h"

static void attention_block(td_ctx *ctx, int il, const td_layer *ly) {
    const td_config *c = &ctx->model->cfg;
    const td_attn_weights *a = &ly->attn;
    int64_t T = ctx->n_tokens, d = c->n_embd, hd = c->head_dim;
    int64_t q_dim = (int64_t)c->n_head * hd, kv_dim = ctx->kv_dim;

    for (int64_t t = 0; t < T; t++) td_rmsnorm(ctx->xb + t * d, ctx->x + t * d, ly->attn_norm, d, c->rms_eps, 0);
    td_eng_matmul(ctx, &a->wq, NULL, q_dim, ctx->xb, T, d, ctx->q, q_dim);   /* q   [T, Hq, hd]  */
    td_eng_matmul(ctx, &a->wk, NULL, kv_dim, ctx->xb, T, d, ctx->kx, kv_dim); /* k   [T, Hkv, hd] */
    td_eng_matmul(ctx, &a->wv, NULL, kv_dim, ctx->xb, T, d, ctx->vx, kv_dim); /* v   [T, Hkv, hd] */

    float *kc = ctx->k_cache[il], *vc = ctx->v_cache[il];
    for (int64_t t = 0; t < T; t++) {
        for (int64_t h = 0; h < c->n_head; h++) {
            float *qh = ctx->q + t * q_dim + h * hd;
            td_rmsnorm(qh, qh, a->q_norm, hd, c->rms_eps, 0);
            td_rope(qh, c->rotary_dim, ctx->inv_freq, ctx->tok_pos[t]);
        }
        float *krow = kc + (int64_t)ctx->tok_cell[t] * kv_dim, *vrow = vc + (int64_t)ctx->tok_cell[t] * kv_dim;
        for (int64_t h = 0; h < c->n_head_kv; h++) {
            td_rmsnorm(krow + h * hd, ctx->kx + t * kv_dim + h * hd, a->k_norm, hd, c->rms_eps, 0);
            td_rope(krow + h * hd, c->rotary_dim, ctx->inv_freq, ctx->tok_pos[t]);
        }
        for (int64_t i = 0; i < kv_dim; i++) vrow[i] = ctx->vx[t * kv_dim + i];
    }

    td_eng_attention(ctx, ctx->q, q_dim, hd, kc, vc);                        /* att [T, Hq * hd] */
    td_eng_matmul(ctx, &a->wo, NULL, d, ctx->att, T, q_dim, ctx->xb, d);      /* o   [T, d]       */
    for (int64_t t = 0; t < T; t++) td_add(ctx->x + t * d, ctx->xb + t * d, d);
}

static void mlp_block(td_ctx *ctx, const td_layer *ly) {
    const td_config *c = &ctx->model->cfg;
    int64_t T = ctx->n_tokens, d = c->n_embd, ff = c->n_ff;
    for (int64_t t = 0; t < T; t++)
        td_rmsnorm(ctx->xb + t * d, ctx->x + t * d, ly->ffn_norm, d, c->rms_eps, c->zero_centred_norms);
    td_eng_matmul(ctx, &ly->w_gate, NULL, ff, ctx->xb, T, d, ctx->ff_g, ff); /* gate [T, ff] */
    td_eng_matmul(ctx, &ly->w_up, NULL, ff, ctx->xb, T, d, ctx->ff_u, ff);   /* up   [T, ff] */
    for (int64_t t = 0; t < T; t++) td_silu_mul(ctx->ff_g + t * ff, ctx->ff_u + t * ff, ff);
    td_eng_matmul(ctx, &ly->w_down, NULL, d, ctx->ff_g, T, ff, ctx->xb, d);  /* down [T, d]  */
    for (int64_t t = 0; t < T; t++) td_add(ctx->x + t * d, ctx->xb + t * d, d);
}

void td_forward_qwen3(td_ctx *ctx) {
    const td_model *m = ctx->model;
    int64_t d = m->cfg.n_embd;
    for (int64_t t = 0; t < ctx->n_tokens; t++) td_row_to_f32(ctx->x + t * d, &m->embed, ctx->tok_id[t]);
    for (int il = 0; il < m->cfg.n_layer; il++) {
        attention_block(ctx, il, &m->layers[il]);
        mlp_block(ctx, &m->layers[il]);
    }
}
