/* Softmax attention block: x += o_proj(Attention(RMSNorm_in(x))).
 * q/k/v projections; per-head RMSNorm on q and k; NeoX RoPE on the first rotary_dim dims; GQA attention over the
 * sequence's cached positions 0..pos. Qwen3.5 ("gated"): q_proj also yields, per head, a gate g and the output is
 * attention * sigmoid(g); its norms scale by (1 + w). */
#include "engine/engine.h"

typedef struct attn_layer {
    const td_layer *ly;
    int il;
} attn_layer;

/* Token t's query and key heads: RMSNorm, RoPE; then its key and value rows into its cache cell. */
static void norm_rope_store(td_ctx *ctx, int64_t t, const void *arg, int thread) {
    (void)thread;
    const attn_layer *al = arg;
    const td_attn_weights *a = &al->ly->attn;
    const td_config *c = &ctx->model->cfg;
    const int zc = c->zero_centred_norms;
    int64_t hd = c->head_dim, kv_dim = ctx->kv.dim, q_head = hd * (c->attn_output_gate ? 2 : 1);
    int64_t q_rows = (int64_t)c->n_head * q_head;
    const float *cs = ctx->pass.rope_cs + t * c->rotary_dim;
    for (int64_t h = 0; h < c->n_head; h++) {
        float *qh = ctx->act.q + t * q_rows + h * q_head;
        ctx->k->rmsnorm(qh, qh, a->q_norm, hd, c->rms_eps, zc);
        td_rope(qh, c->rotary_dim, cs);
    }
    for (int64_t h = 0; h < c->n_head_kv; h++) {
        float *kh = ctx->act.k + t * kv_dim + h * hd;
        ctx->k->rmsnorm(kh, kh, a->k_norm, hd, c->rms_eps, zc);
        td_rope(kh, c->rotary_dim, cs);
    }
    td_eng_store_kv(ctx, ctx->kv.k[al->il], ctx->pass.tok_cell[t], ctx->act.k + t * kv_dim);
    td_eng_store_kv(ctx, ctx->kv.v[al->il], ctx->pass.tok_cell[t], ctx->act.v + t * kv_dim);
}

/* Qwen3.5's output gate: att = att * sigmoid(gate), per head. */
static void output_gate(td_ctx *ctx, int64_t t, const void *arg, int thread) {
    (void)arg, (void)thread;
    const td_config *c = &ctx->model->cfg;
    int64_t hd = c->head_dim, q_head = 2 * hd, q_rows = (int64_t)c->n_head * q_head, att_dim = (int64_t)c->n_head * hd;
    for (int64_t h = 0; h < c->n_head; h++)
        td_sigmoid_gate(ctx->act.att + t * att_dim + h * hd, ctx->act.q + t * q_rows + h * q_head + hd, hd);
}

void td_block_attention(td_ctx *ctx, int il, const td_layer *ly) {
    const td_config *c = &ctx->model->cfg;
    const td_attn_weights *a = &ly->attn;
    const int gated = c->attn_output_gate;
    td_acts *x = &ctx->act;
    int64_t T = ctx->pass.n_rows, d = c->n_embd, hd = c->head_dim, kv_dim = ctx->kv.dim;
    int64_t q_head = hd * (gated ? 2 : 1);      /* per head in q_proj's output: [query | gate] */
    int64_t q_rows = (int64_t)c->n_head * q_head, att_dim = (int64_t)c->n_head * hd;
    attn_layer al = {ly, il};

    td_eng_norm_in(ctx, ly->attn_norm);                                        /* xb  [T, d] */
    td_eng_matmuls(ctx, x->xb, T, d, (const td_eng_product[]){
        {&a->wq, q_rows, x->q, q_rows},    /* q   [T, Hq, hd (+ gate hd)] */
        {&a->wk, kv_dim, x->k, kv_dim},    /* k   [T, Hkv, hd] */
        {&a->wv, kv_dim, x->v, kv_dim}}, 3); /* v   [T, Hkv, hd] */
    td_eng_for(ctx, T, norm_rope_store, &al);                                  /* q, k normed and rotated; cached */
    td_eng_attention(ctx, il, x->q, q_rows, q_head);                           /* att [T, Hq * hd] */
    if (gated) td_eng_for(ctx, T, output_gate, NULL);
    td_eng_matmul(ctx, &a->wo, NULL, d, x->att, T, att_dim, x->xb, d);         /* o   [T, d] */
    td_eng_residual(ctx);                                                      /* x += o */
}
