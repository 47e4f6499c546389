/* The forward pass, as transformers computes it, in fp32. Qwen3 and Qwen3.5 share the skeleton:
 *   x = embed[token]                                                          [T, d]
 *   for each layer:
 *       x = x + Mixer(RMSNorm_in(x))     Mixer = softmax attention (Qwen3; Qwen3.5 "full_attention" layers,
 *                                                  gated) or Gated DeltaNet (Qwen3.5 "linear_attention")
 *       x = x + MLP(RMSNorm_post(x))     MLP = down(silu(gate(x)) * up(x)); in the last layer only for the
 *                                                  tokens that want an output: no other hidden state is read
 *   logits = head(RMSNorm_final(x))      only for tokens that want an output (td_eng_outputs)
 * Qwen3.5's norms scale by (1 + w) instead of w (config.zero_centred_norms). */
#include "engine/engine.h"

void td_forward(td_ctx *ctx) {
    const td_model *m = ctx->model;
    int64_t d = m->cfg.n_embd;
    for (int64_t t = 0; t < ctx->n_tokens; t++) td_row_to_f32(ctx->x + t * d, &m->embed, ctx->tok_id[t]);
    for (int il = 0; il < m->cfg.n_layer; il++) {
        const td_layer *ly = &m->layers[il];
        if (ly->kind == TD_LAYER_ATTENTION) td_block_attention(ctx, il, ly);
        else td_block_deltanet(ctx, il, ly);
        if (il == m->cfg.n_layer - 1) td_eng_keep_outputs(ctx); /* the last MLP only where logits are read */
        td_block_mlp(ctx, ly);
    }
}
