/* MLP block: x += down(silu(gate(h)) * up(h)), h = RMSNorm_post(x). */
#include "engine/engine.h"

void td_block_mlp(td_ctx *ctx, const td_layer *ly) {
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
