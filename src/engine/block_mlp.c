/* MLP block: x += down(silu(gate(h)) * up(h)), h = RMSNorm_post(x). */
#include "engine/engine.h"
#include <string.h>
#include <stdlib.h>
static void perturb(const char *what, float *x, long n) {
    const char *e = getenv("PERTURB");
    if (!e || strcmp(e, what) != 0) return;
    static unsigned long s = 12345;
    for (long i = 0; i < n; i++) { s = s * 6364136223846793005ul + 1; x[i] *= 1.0f + ((s >> 40) & 1 ? 1e-6f : -1e-6f); }
}


void td_block_mlp(td_ctx *ctx, const td_layer *ly) {
    const td_config *c = &ctx->model->cfg;
    int64_t T = ctx->n_tokens, d = c->n_embd, ff = c->n_ff;
    for (int64_t t = 0; t < T; t++)
        td_rmsnorm(ctx->xb + t * d, ctx->x + t * d, ly->ffn_norm, d, c->rms_eps, c->zero_centred_norms);
    td_eng_matmul(ctx, &ly->w_gate, NULL, ff, ctx->xb, T, d, ctx->ff_g, ff); /* gate [T, ff] */
    td_eng_matmul(ctx, &ly->w_up, NULL, ff, ctx->xb, T, d, ctx->ff_u, ff);   /* up   [T, ff] */
    for (int64_t t = 0; t < T; t++) td_silu_mul(ctx->ff_g + t * ff, ctx->ff_u + t * ff, ff);
    perturb("ff", ctx->ff_g, T*ff);
    td_eng_matmul(ctx, &ly->w_down, NULL, d, ctx->ff_g, T, ff, ctx->xb, d);
    perturb("mlpout", ctx->xb, T*d);
    for (int64_t t = 0; t < T; t++) td_add(ctx->x + t * d, ctx->xb + t * d, d);
}
