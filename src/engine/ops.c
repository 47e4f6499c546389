/* Parallel building blocks shared by the forward passes: matrix products split by output rows, attention split
 * by (token, head), and the output head. Each output element is computed by exactly one thread, with the same
 * arithmetic whatever the split. */
#include <math.h>
#include <string.h>

#include "engine/engine.h"
#include "kernels/cpu/quant.h"
#include "util/half.h"

/* Up to TD_ENG_MAX_PRODUCTS products of one input, run as one job: threads take chunks of rows (never crossing
 * from one product into the next) as they finish, so a core slowed by its neighbours gets fewer, and one pass of
 * the pool serves them all. A row's result is the same whichever thread computes it. */
typedef struct matmul_job {
    const td_kernels *k;
    const float *x;
    const void *xq;
    int64_t T, ldx, grain;
    int n;
    td_eng_product p[TD_ENG_MAX_PRODUCTS];
    const int32_t *rows;        /* row list of product 0 (only ever used alone) */
    int64_t first[TD_ENG_MAX_PRODUCTS + 1]; /* chunk index where product i starts */
} matmul_job;

static void matmul_part(void *arg, int64_t c0, int64_t c1, int thread) {
    (void)thread;
    const matmul_job *j = arg;
    for (int64_t c = c0; c < c1; c++) {
        int i = 0;
        while (c >= j->first[i + 1]) i++;
        const td_eng_product *p = &j->p[i];
        int64_t r0 = (c - j->first[i]) * j->grain, r1 = r0 + j->grain < p->n_out ? r0 + j->grain : p->n_out;
        j->k->matmul(p->w, i == 0 ? j->rows : NULL, j->x, j->xq, j->T, j->ldx, p->y, p->ldy, r0, r1);
    }
}

static void quantize_part(void *arg, int64_t r0, int64_t r1, int thread) {
    (void)thread;
    const matmul_job *j = arg;
    j->k->quantize_rows(j->x, j->ldx, j->xq, r0, r1);
}

/* One quantisation of the input serves products whose weights share a type, a packing and a width. */
static int same_input_layout(const td_mat *a, const td_mat *b) {
    int la = a->pack ? a->pack->lanes : 0, lb = b->pack ? b->pack->lanes : 0;
    return a->type == b->type && la == lb && a->cols == b->cols;
}

static void run_products(td_ctx *ctx, const int32_t *rows, const float *x, int64_t T, int64_t ldx,
                         const td_eng_product *p, int n) {
    if (T == 0) return; /* no rows of activations (the last MLP of a pass without outputs): nothing to stream */
    /* decode chunks are small; prefill chunks keep a block of weight rows in cache for all the tokens */
    matmul_job j = {ctx->k, x, NULL, T, ldx, T < 4 ? 64 : 256, n, {{0}}, rows, {0}};
    for (int i = 0; i < n; i++) {
        j.p[i] = p[i];
        j.first[i + 1] = j.first[i] + (p[i].n_out + j.grain - 1) / j.grain;
    }
    td_qrows xq;
    const td_mat *w = p[0].w;
    if (td_dtype_is_block(w->type)) { /* quantised weights: the activations are quantised first, once */
        td_qrows_bind(&xq, ctx->xq, T, w->cols / 32, td_qrows_layout(w->type, w->pack));
        j.xq = &xq;
        td_pool_run(ctx->pool, T, 1, quantize_part, &j);
    }
    td_pool_run_dynamic(ctx->pool, j.first[n], 1, matmul_part, &j);
}

void td_eng_matmul(td_ctx *ctx, const td_mat *w, const int32_t *rows, int64_t n_out, const float *x, int64_t T,
                   int64_t ldx, float *y, int64_t ldy) {
    td_eng_product p = {w, n_out, y, ldy};
    run_products(ctx, rows, x, T, ldx, &p, 1);
}

void td_eng_matmuls(td_ctx *ctx, const float *x, int64_t T, int64_t ldx, const td_eng_product *p, int n) {
    int i = 0;
    while (i < n) { /* runs of products that can share the quantised input */
        int e = i + 1;
        while (e < n && e - i < TD_ENG_MAX_PRODUCTS && same_input_layout(p[i].w, p[e].w)) e++;
        run_products(ctx, NULL, x, T, ldx, p + i, e - i);
        i = e;
    }
}

void td_eng_store_kv(const td_ctx *ctx, void *cache, int32_t cell, const float *row) {
    int64_t n = ctx->kv_dim;
    if (ctx->p.kv_f16) {
        uint16_t *dst = (uint16_t *)cache + (int64_t)cell * n;
        for (int64_t i = 0; i < n; i++) dst[i] = td_f32_to_f16(row[i]);
    } else {
        memcpy((float *)cache + (int64_t)cell * n, row, (size_t)n * sizeof *row);
    }
}

typedef struct token_job {
    td_ctx *ctx;
    td_token_fn fn;
    const void *arg;
} token_job;

static void token_part(void *arg, int64_t t0, int64_t t1, int thread) {
    (void)thread;
    const token_job *j = arg;
    for (int64_t t = t0; t < t1; t++) j->fn(j->ctx, t, j->arg);
}

void td_eng_per_token(td_ctx *ctx, td_token_fn fn, const void *arg) {
    token_job j = {ctx, fn, arg};
    td_pool_run(ctx->pool, ctx->n_tokens, 1, token_part, &j);
}

static void residual(td_ctx *ctx, int64_t t, const void *arg) {
    (void)arg;
    int64_t d = ctx->model->cfg.n_embd;
    td_add(ctx->x + t * d, ctx->xb + t * d, d);
}

void td_eng_residual(td_ctx *ctx) { td_eng_per_token(ctx, residual, NULL); }

static void norm_in(td_ctx *ctx, int64_t t, const void *w) {
    const td_config *c = &ctx->model->cfg;
    ctx->k->rmsnorm(ctx->xb + t * c->n_embd, ctx->x + t * c->n_embd, w, c->n_embd, c->rms_eps, c->zero_centred_norms);
}

void td_eng_norm_in(td_ctx *ctx, const float *w) { td_eng_per_token(ctx, norm_in, w); }

typedef struct attn_job {
    td_ctx *ctx;
    const float *q;
    const void *kc, *vc;
    int64_t ldq, q_head_stride;
    int64_t n_blocks; /* tasks per KV head: blocks of ctx->attn_tokens tokens of one sequence, over all groups */
} attn_job;

/* Task i: KV head i / n_blocks, token block i % n_blocks (blocks of ctx->attn_tokens tokens, counted over the
 * sequence groups in order). The query heads of that KV head for the block's tokens read each key and value row
 * once. */
static void attn_part(void *arg, int64_t b, int64_t e, int thread) {
    const attn_job *j = arg;
    td_ctx *ctx = j->ctx;
    const td_config *c = &ctx->model->cfg;
    int64_t hd = c->head_dim, group = c->n_head / c->n_head_kv;
    float scale = (float)(1.0 / sqrt((double)hd));
    float *scratch = ctx->scores + (int64_t)thread * ctx->attn_scratch;
    const float *qr[256];
    float *out[256];
    int64_t n[256];
    for (int64_t task = b; task < e; task++) {
        int64_t kvh = task / j->n_blocks, blk = task % j->n_blocks, g = 0;
        while (blk >= (ctx->grp_off[g + 1] - ctx->grp_off[g] + ctx->attn_tokens - 1) / ctx->attn_tokens)
            blk -= (ctx->grp_off[g + 1] - ctx->grp_off[g] + ctx->attn_tokens - 1) / ctx->attn_tokens, g++;
        int32_t k0 = ctx->grp_off[g] + (int32_t)blk * ctx->attn_tokens, k1 = k0 + ctx->attn_tokens;
        if (k1 > ctx->grp_off[g + 1]) k1 = ctx->grp_off[g + 1];
        int64_t R = 0;
        for (int32_t k = k0; k < k1; k++) {
            int64_t t = ctx->grp_tok[k];
            for (int64_t h = kvh * group; h < (kvh + 1) * group; h++, R++) {
                qr[R] = j->q + t * j->ldq + h * j->q_head_stride;
                out[R] = ctx->att + t * c->n_head * hd + h * hd;
                n[R] = (int64_t)ctx->tok_pos[t] + 1; /* causal: positions 0..pos of this token's sequence */
            }
        }
        const td_seq *s = &ctx->seqs[ctx->grp_seq[g]];
        int64_t es = ctx->p.kv_f16 ? 2 : 4, pre = ctx->n_pre;
        td_attn_keys keys = {(const char *)j->kc + kvh * hd * es, (const char *)j->vc + kvh * hd * es,
                             ctx->p.kv_f16, s->cells, ctx->kv_dim,
                             ctx->pre_kv + kvh * pre * hd, ctx->pre_kv + ctx->p.n_ctx * ctx->kv_dim + kvh * pre * hd, pre};
        ctx->k->attn_rows(qr, out, n, R, &keys, hd, scale, scratch);
    }
}

/* KV head h's rows of the shared prefix, keys then values, as fp32 rows of head_dim (converted from f16). */
static void gather_prefix(void *arg, int64_t h0, int64_t h1, int thread) {
    (void)thread;
    const attn_job *j = arg;
    const td_ctx *ctx = j->ctx;
    int64_t hd = ctx->model->cfg.head_dim, pre = ctx->n_pre;
    const int32_t *cells = ctx->seqs[ctx->grp_seq[0]].cells;
    for (int64_t h = h0; h < h1; h++)
        for (int which = 0; which < 2; which++) {
            const void *cache = which ? j->vc : j->kc;
            float *dst = ctx->pre_kv + which * ctx->p.n_ctx * ctx->kv_dim + h * pre * hd;
            for (int64_t i = 0; i < pre; i++) {
                int64_t at = (int64_t)cells[i] * ctx->kv_dim + h * hd;
                if (ctx->p.kv_f16)
                    for (int64_t d = 0; d < hd; d++) dst[i * hd + d] = td_f16_to_f32(((const uint16_t *)cache)[at + d]);
                else
                    memcpy(dst + i * hd, (const float *)cache + at, (size_t)hd * sizeof *dst);
            }
        }
}

void td_eng_attention(td_ctx *ctx, const float *q, int64_t ldq, int64_t q_head_stride, const void *kc,
                      const void *vc) {
    int64_t blocks = 0;
    for (int32_t g = 0; g < ctx->n_groups; g++)
        blocks += (ctx->grp_off[g + 1] - ctx->grp_off[g] + ctx->attn_tokens - 1) / ctx->attn_tokens;
    attn_job j = {ctx, q, kc, vc, ldq, q_head_stride, blocks};
    if (ctx->n_pre) /* the prefix every sequence of the batch shares: read from the cache once, for all of them */
        td_pool_run(ctx->pool, ctx->model->cfg.n_head_kv, 1, gather_prefix, &j);
    td_pool_run_dynamic(ctx->pool, blocks * ctx->model->cfg.n_head_kv, 1, attn_part, &j);
}

void td_eng_keep_outputs(td_ctx *ctx) {
    int64_t d = ctx->model->cfg.n_embd;
    if (ctx->n_out == ctx->n_tokens) return;
    for (int32_t i = 0; i < ctx->n_out; i++) { /* out_tok ascends, so row i never overwrites a row still to move */
        int32_t t = ctx->out_tok[i];
        if (t != i) {
            memcpy(ctx->x + i * d, ctx->x + (int64_t)t * d, (size_t)d * sizeof *ctx->x);
            ctx->tok_id[i] = ctx->tok_id[t], ctx->tok_seq[i] = ctx->tok_seq[t];
            ctx->tok_pos[i] = ctx->tok_pos[t], ctx->tok_cell[i] = ctx->tok_cell[t];
        }
        ctx->out_tok[i] = i;
    }
    ctx->n_tokens = ctx->n_out;
    ctx->n_groups = 0; /* the grouping by sequence (for mixers) no longer describes the rows */
    ctx->n_pre = 0;
}

void td_eng_outputs(td_ctx *ctx) {
    const td_model *m = ctx->model;
    const td_config *c = &m->cfg;
    int64_t d = c->n_embd;
    if (ctx->n_out == 0) return;
    for (int32_t i = 0; i < ctx->n_out; i++)
        ctx->k->rmsnorm(ctx->out_x + i * d, ctx->x + (int64_t)ctx->out_tok[i] * d, m->final_norm, d, c->rms_eps,
                   c->zero_centred_norms);
    int64_t n_rows = ctx->head_rows ? ctx->n_head_rows : m->head.rows;
    td_eng_matmul(ctx, &m->head, ctx->head_rows, n_rows, ctx->out_x, ctx->n_out, d, ctx->out, n_rows);
    ctx->head_macs += (int64_t)ctx->n_out * n_rows * d;
}
