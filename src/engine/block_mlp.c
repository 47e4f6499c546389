/* MLP block: x += down(silu(gate(h)) * up(h)), h = RMSNorm_post(x). */
#include "engine/engine.h"

static void silu_mul_row(td_ctx *ctx, int64_t t, const void *arg, int thread) {
    (void)arg, (void)thread;
    int64_t ff = ctx->model->cfg.n_ff;
    ctx->k->silu_mul(ctx->act.ff_g + t * ff, ctx->act.ff_u + t * ff, ff);
}

void td_block_mlp(td_ctx *ctx, const td_layer *ly) {
    const td_config *c = &ctx->model->cfg;
    td_acts *x = &ctx->act;
    int64_t T = ctx->pass.n_rows, d = c->n_embd, ff = c->n_ff;
    td_eng_norm_in(ctx, ly->ffn_norm);                                 /* xb   [T, d] */
    td_eng_matmuls(ctx, x->xb, T, d, (const td_eng_product[]){
        {&ly->w_gate, ff, x->ff_g, ff},  /* gate [T, ff] */
        {&ly->w_up, ff, x->ff_u, ff}}, 2); /* up   [T, ff] */
    td_eng_for(ctx, T, silu_mul_row, NULL);                            /* gate = silu(gate) * up */
    td_eng_matmul(ctx, &ly->w_down, NULL, d, x->ff_g, T, ff, x->xb, d); /* xb   [T, d] */
    td_eng_residual(ctx);                                              /* x += xb */
}
