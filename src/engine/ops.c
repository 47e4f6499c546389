/* Parallel building blocks shared by the forward passes: matrix products split by output rows, attention split
 * by (token, head), and the output head. Each output element is computed by exactly one thread, with the same
 * arithmetic whatever the split. */
#include <math.h>
#include <string.h>

#include "engine/engine.h"
#include "kernels/cpu/quant.h"

typedef struct matmul_job {
    const td_kernels *k;
    const td_mat *w;
    const int32_t *rows;
    const float *x;
    const void *xq;
    int64_t T, ldx, ldy;
    float *y;
} matmul_job;

static void matmul_part(void *arg, int64_t j0, int64_t j1, int thread) {
    (void)thread;
    const matmul_job *j = arg;
    j->k->matmul(j->w, j->rows, j->x, j->xq, j->T, j->ldx, j->y, j->ldy, j0, j1);
}

static void quantize_part(void *arg, int64_t r0, int64_t r1, int thread) {
    (void)thread;
    const matmul_job *j = arg;
    td_quantize_rows_q8_0(j->x, j->ldx, j->w->cols, (td_block_q8_0 *)j->xq, r0, r1);
}

void td_eng_matmul(td_ctx *ctx, const td_mat *w, const int32_t *rows, int64_t n_out, const float *x, int64_t T,
                   int64_t ldx, float *y, int64_t ldy) {
    matmul_job j = {ctx->k, w, rows, x, NULL, T, ldx, ldy, y};
    if (td_dtype_is_block(w->type)) { /* quantised weights: the activations become Q8_0 rows first */
        j.xq = ctx->xq;
        td_pool_run(ctx->pool, T, 1, quantize_part, &j);
    }
    td_pool_run(ctx->pool, n_out, 16, matmul_part, &j);
}

typedef struct attn_job {
    td_ctx *ctx;
    const float *q, *kc, *vc;
    int64_t ldq, q_head_stride;
} attn_job;

static void attn_part(void *arg, int64_t b, int64_t e, int thread) {
    const attn_job *j = arg;
    td_ctx *ctx = j->ctx;
    const td_config *c = &ctx->model->cfg;
    int64_t hd = c->head_dim, group = c->n_head / c->n_head_kv;
    float scale = (float)(1.0 / sqrt((double)hd));
    float *scratch = ctx->scores + (int64_t)thread * ctx->p.n_ctx;
    for (int64_t i = b; i < e; i++) {
        int64_t t = i / c->n_head, h = i % c->n_head, kvh = h / group;
        const td_seq *s = &ctx->seqs[ctx->tok_seq[t]];
        int64_t n = (int64_t)ctx->tok_pos[t] + 1; /* causal: positions 0..pos of this token's sequence */
        ctx->k->attn(j->q + t * j->ldq + h * j->q_head_stride, j->kc + kvh * hd, j->vc + kvh * hd, s->cells, n,
                     ctx->kv_dim, hd, scale, ctx->att + t * c->n_head * hd + h * hd, scratch);
    }
}

void td_eng_attention(td_ctx *ctx, const float *q, int64_t ldq, int64_t q_head_stride, const float *kc,
                      const float *vc) {
    attn_job j = {ctx, q, kc, vc, ldq, q_head_stride};
    td_pool_run_dynamic(ctx->pool, (int64_t)ctx->n_tokens * ctx->model->cfg.n_head, 1, attn_part, &j);
}

void td_eng_outputs(td_ctx *ctx) {
    const td_model *m = ctx->model;
    const td_config *c = &m->cfg;
    int64_t d = c->n_embd;
    if (ctx->n_out == 0) return;
    for (int32_t i = 0; i < ctx->n_out; i++)
        td_rmsnorm(ctx->out_x + i * d, ctx->x + (int64_t)ctx->out_tok[i] * d, m->final_norm, d, c->rms_eps,
                   c->zero_centred_norms);
    int64_t n_rows = ctx->head_rows ? ctx->n_head_rows : m->head.rows;
    td_eng_matmul(ctx, &m->head, ctx->head_rows, n_rows, ctx->out_x, ctx->n_out, d, ctx->out, n_rows);
    ctx->head_macs += (int64_t)ctx->n_out * n_rows * d;
}
