/* The forward pass, as transformers computes it, in fp32. Qwen3 and Qwen3.5 share the skeleton:
 *   x = embed[token]                                                          [T, d]
 *   for each layer:
 *       x = x + Mixer(RMSNorm_in(x))     Mixer = softmax attention (Qwen3; Qwen3.5 "full_attention" layers,
 *                                                  gated) or Gated DeltaNet (Qwen3.5 "linear_attention")
 *       x = x + MLP(RMSNorm_post(x))     MLP = down(silu(gate(x)) * up(x)); in the last layer only for the
 *                                                  tokens that want an output: no other hidden state is read
 *   logits = head(RMSNorm_final(x))      only for the tokens that want an output, and only the head's rows that
 *                                        td_ctx_set_output_rows asked for
 * Qwen3.5's norms scale by (1 + w) instead of w (config.zero_centred_norms). One token's way from id to logits
 * is this file top to bottom; the blocks are block_*.c. */
#include "engine/engine.h"

static void embed_row(td_ctx *ctx, int64_t t, const void *arg, int thread) {
    (void)arg, (void)thread;
    const td_model *m = ctx->model;
    td_row_to_f32(ctx->act.x + t * m->cfg.n_embd, &m->embed, ctx->pass.tok_id[t]);
}

static void final_norm_row(td_ctx *ctx, int64_t i, const void *arg, int thread) {
    (void)arg, (void)thread;
    const td_model *m = ctx->model;
    int64_t d = m->cfg.n_embd;
    ctx->k->rmsnorm(ctx->act.out_x + i * d, ctx->act.x + i * d, m->final_norm, d, m->cfg.rms_eps,
                    m->cfg.zero_centred_norms);
}

void td_forward(td_ctx *ctx) {
    const td_model *m = ctx->model;
    const int64_t d = m->cfg.n_embd;

    td_eng_for(ctx, ctx->pass.n_rows, embed_row, NULL);                          /* x [T, d] */
    for (int il = 0; il < m->cfg.n_layer; il++) {
        const td_layer *ly = &m->layers[il];
        if (ly->kind == TD_LAYER_ATTENTION) td_block_attention(ctx, il, ly);     /* x += attention */
        else td_block_deltanet(ctx, il, ly);                                     /* x += DeltaNet */
        if (il == m->cfg.n_layer - 1) td_eng_keep_outputs(ctx);                  /* x [n_out, d] */
        td_block_mlp(ctx, ly);                                                   /* x += MLP */
    }
    if (ctx->pass.n_out == 0) return;
    td_eng_for(ctx, ctx->pass.n_out, final_norm_row, NULL);                      /* out_x [n_out, d] */
    int64_t n_rows = ctx->head_rows ? ctx->n_head_rows : m->head.rows;           /* K letters or the vocabulary */
    td_eng_matmul(ctx, &m->head, ctx->head_rows, n_rows, ctx->act.out_x, ctx->pass.n_out, d, ctx->act.out, n_rows);
    ctx->head_macs += (int64_t)ctx->pass.n_out * n_rows * d;                    /* out [n_out, n_rows] */
}
