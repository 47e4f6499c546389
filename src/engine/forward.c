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
#include "util/error.h"

static void embed_row(td_ctx *ctx, int64_t t, const void *arg, int thread) {
    (void)arg, (void)thread;
    const td_model *m = ctx->model;
    float *x = ctx->act.x + t * m->cfg.n_embd;
    td_row_to_f32(x, &m->embed, ctx->pass.tok_id[t]);
    ctx->pass.row_bad[t] = !td_eng_row_finite(x, m->cfg.n_embd);
}

static void final_norm_row(td_ctx *ctx, int64_t i, const void *arg, int thread) {
    (void)arg, (void)thread;
    const td_model *m = ctx->model;
    int64_t d = m->cfg.n_embd;
    ctx->k->rmsnorm(ctx->act.out_x + i * d, ctx->act.x + i * d, m->final_norm, d, m->cfg.rms_eps,
                    m->cfg.zero_centred_norms);
}

td_status td_eng_nonfinite(td_ctx *ctx, int32_t layer, const char *block, int32_t t) {
    const td_pass *ps = &ctx->pass;
    ctx->fault = (td_fault){1, layer, block, ps->tok_seq[t], ps->tok_pos[t]};
    if (layer < 0)
        return td_fail(TD_ERR_NONFINITE, "the input embedding of token %d (position %d of sequence %d) is not finite",
                       ps->tok_id[t], ps->tok_pos[t], ps->tok_seq[t]);
    if (layer == ctx->model->cfg.n_layer)
        return td_fail(TD_ERR_NONFINITE,
                       "the final norm and output head gave NaN or infinity at position %d of sequence %d: a weight "
                       "of the head or the final norm holds one, or the logits overflowed",
                       ps->tok_pos[t], ps->tok_seq[t]);
    return td_fail(TD_ERR_NONFINITE,
                   "layer %d (%s) gave NaN or infinity at position %d of sequence %d: a weight or adapter of that "
                   "layer holds one, or the activations overflowed",
                   layer, block, ps->tok_pos[t], ps->tok_seq[t]);
}

/* TD_ERR_NONFINITE when a row of the residual stream went NaN or infinite in the step just run (`layer`, `block`);
 * rows are tokens, or the output tokens once the last mixer has run. */
static td_status check_rows(td_ctx *ctx, int32_t layer, const char *block) {
    const td_pass *ps = &ctx->pass;
    for (int32_t r = 0; r < ps->n_rows; r++)
        if (ps->row_bad[r]) return td_eng_nonfinite(ctx, layer, block, ps->n_rows == ps->n_tokens ? r : ps->out_tok[r]);
    return TD_OK;
}

td_status td_forward(td_ctx *ctx) {
    const td_model *m = ctx->model;
    const int64_t d = m->cfg.n_embd;
    td_status st;

    td_eng_for(ctx, ctx->pass.n_rows, embed_row, NULL);                          /* x [T, d] */
    if ((st = check_rows(ctx, -1, "embedding")) != TD_OK) return st;
    for (int il = 0; il < m->cfg.n_layer; il++) {
        const td_layer *ly = &m->layers[il];
        if (ly->kind == TD_LAYER_ATTENTION) td_block_attention(ctx, il, ly);     /* x += attention */
        else td_block_deltanet(ctx, il, ly);                                     /* x += DeltaNet */
        if ((st = check_rows(ctx, il, ly->kind == TD_LAYER_ATTENTION ? "attention" : "DeltaNet")) != TD_OK) return st;
        if (il == m->cfg.n_layer - 1) td_eng_keep_outputs(ctx);                  /* x [n_out, d] */
        td_block_mlp(ctx, ly);                                                   /* x += MLP */
        if ((st = check_rows(ctx, il, "MLP")) != TD_OK) return st;
    }
    if (ctx->pass.n_out == 0) return TD_OK;
    td_eng_for(ctx, ctx->pass.n_out, final_norm_row, NULL);                      /* out_x [n_out, d] */
    int64_t n_rows = ctx->head_rows ? ctx->n_head_rows : m->head.rows;           /* K letters or the vocabulary */
    td_eng_matmul(ctx, &m->head, ctx->head_rows, n_rows, ctx->act.out_x, ctx->pass.n_out, d, ctx->act.out, n_rows);
    ctx->head_macs += (int64_t)ctx->pass.n_out * n_rows * d;                    /* out [n_out, n_rows] */
    for (int32_t i = 0; i < ctx->pass.n_out; i++) /* the final norm and the head's own weights */
        if (!td_eng_row_finite(ctx->act.out + i * n_rows, n_rows))
            return td_eng_nonfinite(ctx, m->cfg.n_layer, "output head", ctx->pass.out_tok[i]);
    return TD_OK;
}
