/* MLP block: x += down(silu(gate(h)) * up(h)), h = RMSNorm_post(x). */
#include "engine/engine.h"

static void silu_mul(td_ctx *ctx, int64_t t, const void *arg) {
    (void)arg;
    int64_t ff = ctx->model->cfg.n_ff;
    ctx->k->silu_mul(ctx->ff_g + t * ff, ctx->ff_u + t * ff, ff);
}

void td_block_mlp(td_ctx *ctx, const td_layer *ly) {
    const td_config *c = &ctx->model->cfg;
    int64_t T = ctx->n_tokens, d = c->n_embd, ff = c->n_ff;
    td_eng_norm_in(ctx, ly->ffn_norm);                                 /* xb   [T, d] */
    td_eng_matmuls(ctx, ctx->xb, T, d, (const td_eng_product[]){
        {&ly->w_gate, ff, ctx->ff_g, ff},  /* gate [T, ff] */
        {&ly->w_up, ff, ctx->ff_u, ff}}, 2); /* up   [T, ff] */
    td_eng_per_token(ctx, silu_mul, NULL);                                     /* gate = silu(gate) * up */
    td_eng_matmul(ctx, &ly->w_down, NULL, d, ctx->ff_g, T, ff, ctx->xb, d);  /* xb   [T, d] */
    td_eng_residual(ctx);                                                      /* x += xb */
}
