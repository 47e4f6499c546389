/* The steps the blocks are made of, split over the pool: matrix products by output rows, attention by (KV head,
 * block of tokens), per-row norms and residuals. Each output element is computed by exactly one thread, with the
 * same arithmetic whatever the split. */
#include <float.h>
#include <math.h>
#include <string.h>

#include "engine/engine.h"
#include "kernels/cpu/quant.h"
#include "util/half.h"

/* ---- the one parallel-for ------------------------------------------------------------------------------------ */

typedef struct for_job {
    td_ctx *ctx;
    td_eng_fn fn;
    const void *arg;
} for_job;

static void for_range(void *job, int64_t b, int64_t e, int thread) {
    const for_job *j = job;
    for (int64_t i = b; i < e; i++) j->fn(j->ctx, i, j->arg, thread);
}

void td_eng_for(td_ctx *ctx, int64_t n, td_eng_fn fn, const void *arg) {
    for_job j = {ctx, fn, arg};
    td_pool_run(ctx->pool, n, 1, for_range, &j);
}

void td_eng_for_dynamic(td_ctx *ctx, int64_t n, td_eng_fn fn, const void *arg) {
    for_job j = {ctx, fn, arg};
    td_pool_run_dynamic(ctx->pool, n, 1, for_range, &j);
}

/* ---- matrix products ----------------------------------------------------------------------------------------- */

/* Up to TD_ENG_MAX_PRODUCTS products of one input as one job: its items are chunks of rows (never crossing from
 * one product into the next), each for one block of tokens, taken by threads as they finish, so a core slowed by
 * its neighbours gets fewer and one pass of the pool serves them all. An item's rows are a product's rows
 * [r0, r1) for its tokens [t0, t1): each output element is computed by one item, and a dot product's result never
 * depends on the tokens or rows computed beside it (kernels.h), so the split changes no bit. */
typedef struct products {
    const float *x;
    const td_qrows *xq;
    int64_t T, ldx, grain;
    int64_t tb, n_tb;                       /* tokens per block, blocks */
    int n;
    td_eng_product p[TD_ENG_MAX_PRODUCTS];
    const int32_t *rows;                    /* row list of product 0 (only ever used alone) */
    int64_t first[TD_ENG_MAX_PRODUCTS + 1]; /* item index where product i starts */
} products;

static void product_chunk(td_ctx *ctx, int64_t c, const void *arg, int thread) {
    (void)thread;
    const products *j = arg;
    int i = 0;
    while (c >= j->first[i + 1]) i++;
    const td_eng_product *p = &j->p[i];
    int64_t item = c - j->first[i], rc = item / j->n_tb, tblk = item % j->n_tb; /* a thread's items: rows first */
    int64_t r0 = rc * j->grain, r1 = r0 + j->grain < p->n_out ? r0 + j->grain : p->n_out;
    int64_t t0 = tblk * j->tb, t1 = t0 + j->tb < j->T ? t0 + j->tb : j->T;
    td_qrows view;
    const void *xq = NULL;
    if (j->xq) view = td_qrows_from(j->xq, t0), xq = &view;
    ctx->k->matmul(p->w, i == 0 ? j->rows : NULL, j->x + t0 * j->ldx, xq, t1 - t0, j->ldx, p->y + t0 * p->ldy, p->ldy,
                   r0, r1);
}

static void quantize_row(td_ctx *ctx, int64_t t, const void *arg, int thread) {
    (void)thread;
    const products *j = arg;
    ctx->k->quantize_rows(j->x, j->ldx, j->xq, t, t + 1);
}

/* Chunks of weight rows: for decode at most TD_DECODE_ROWS, for a batch of tokens at most TD_PREFILL_ROWS, large
 * enough that a block of weight rows stays in cache for the tokens of an item. A job wants at least TD_ITEMS items
 * a thread, TD_LONG_ITEMS for a batch of at least TD_LONG_BATCH tokens (so that threads finishing early find work,
 * and no thread idles while another runs a product's last chunks). A batch's tokens are cut first, into blocks of at
 * least TD_FIRST_TOKENS (a multiple of the AMX tile's 16 rows): an item keeps its TD_PREFILL_ROWS rows, over which
 * the kernels spread what they do once per token tile (staging the activations); then chunks shrink to
 * TD_MIN_PREFILL_ROWS rows (to TD_MIN_ROWS for decode), then blocks to TD_MIN_TOKENS. A 512-token prefill of
 * qwen3-0.6b at 16 threads: the 1024-row products (o, down) become 8 chunks of 128 rows x 16 blocks of 32 tokens (the
 * rows were cut to 64 before: 27% more time inside the products, bench/results/scaling-probe-xeon16-amx.json); at 2
 * threads 4 x 4 blocks of 128 tokens; a 45-token suffix still splits by rows (8 chunks of 128 at 2 threads).
 * Measured on the AMX host (bench/results/items-ab-xeon16-amx.json, items-ab-2t-xeon16-amx.json): 8 items a thread
 * instead of 4 took prefill 512 from 564 to 667 tokens/s at 4 threads (every round faster), 1664 -> 1868 at 16, 341
 * -> 374 at 2; but decode 5% slower at 4 threads and a 45-token criterion slower at 2 (its rows cut to 64), so
 * decode and short batches keep 4. */
#define TD_DECODE_ROWS 64
#define TD_PREFILL_ROWS 256
#define TD_MIN_ROWS 16
#define TD_MIN_PREFILL_ROWS 64
#define TD_FIRST_TOKENS 32
#define TD_MIN_TOKENS 16
#ifndef TD_ITEMS /* compile-time constants; -D sets others for bench/ab_device.sh's variants */
#define TD_ITEMS 4
#endif
#ifndef TD_LONG_ITEMS
#define TD_LONG_ITEMS 8
#endif
#define TD_LONG_BATCH 128

static int64_t count_chunks(const td_eng_product *p, int n, int64_t grain) {
    int64_t c = 0;
    for (int i = 0; i < n; i++) c += (p[i].n_out + grain - 1) / grain;
    return c;
}

/* Blocks of tokens (at least `least` each, up to as many as make `want` items of `chunks` row chunks). */
static int64_t token_blocks(int64_t T, int64_t chunks, int64_t want, int64_t least) {
    int64_t n = (want + chunks - 1) / chunks, most = T / least > 1 ? T / least : 1;
    return n < most ? n : most;
}

/* The job's shape: row grain, token blocks of a multiple of 16 tokens. Depends on the thread count and the batch's
 * size, never on anything a result depends on. */
static void split(products *j, int threads) {
    const int decode = j->T < 4;
    const int64_t want = (int64_t)(j->T >= TD_LONG_BATCH ? TD_LONG_ITEMS : TD_ITEMS) * threads;
    int64_t grain = decode ? TD_DECODE_ROWS : TD_PREFILL_ROWS, min = decode ? TD_MIN_ROWS : TD_MIN_PREFILL_ROWS;
    int64_t n_tb = decode ? 1 : token_blocks(j->T, count_chunks(j->p, j->n, grain), want, TD_FIRST_TOKENS);
    while (grain / 2 >= min && count_chunks(j->p, j->n, grain) * n_tb < want) grain /= 2;
    int64_t chunks = count_chunks(j->p, j->n, grain);
    if (!decode && chunks * n_tb < want) n_tb = token_blocks(j->T, chunks, want, TD_MIN_TOKENS);
    int64_t tb = (j->T + n_tb - 1) / n_tb;
    if (!decode && tb < j->T) tb = (tb + 15) / 16 * 16;
    j->grain = grain;
    j->tb = tb;
    j->n_tb = (j->T + tb - 1) / tb;
    for (int i = 0; i < j->n; i++) j->first[i + 1] = j->first[i] + (j->p[i].n_out + grain - 1) / grain * j->n_tb;
}

static void run_products(td_ctx *ctx, const int32_t *rows, const float *x, int64_t T, int64_t ldx,
                         const td_eng_product *p, int n) {
    if (T == 0) return; /* no rows of activations (the last MLP of a pass without outputs): nothing to stream */
    products j = {x, NULL, T, ldx, 0, 0, 0, n, {{0}}, rows, {0}};
    for (int i = 0; i < n; i++) j.p[i] = p[i];
    split(&j, td_pool_n_threads(ctx->pool));
    td_qrows xq;
    const td_mat *w = p[0].w;
    int layout = td_kernels_layout(ctx->k, w, ctx->bf16_acts);
    if (layout >= 0) { /* quantised or bf16 activations: the input is converted first, once */
        td_qrows_bind(&xq, ctx->act.xq, T, w->cols, layout);
        j.xq = &xq;
        td_eng_for(ctx, T, quantize_row, &j);
    }
    td_eng_for_dynamic(ctx, j.first[n], product_chunk, &j);
}

void td_eng_matmul(td_ctx *ctx, const td_mat *w, const int32_t *rows, int64_t n_out, const float *x, int64_t T,
                   int64_t ldx, float *y, int64_t ldy) {
    td_eng_product p = {w, n_out, y, ldy};
    run_products(ctx, rows, x, T, ldx, &p, 1);
}

/* One quantisation of the input serves products whose weights share a type, a packing and a width. */
static int same_input_layout(const td_mat *a, const td_mat *b) {
    int la = a->pack ? a->pack->lanes : 0, lb = b->pack ? b->pack->lanes : 0;
    return a->type == b->type && la == lb && a->cols == b->cols;
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

/* ---- per row ------------------------------------------------------------------------------------------------- */

/* 1 when every value of the row is finite (|x| <= FLT_MAX is false for NaN and infinity). Blocks of 64 let the
 * compiler test several values an instruction: a decode's check of the vocabulary's logits was a serial 0.1-0.2 ms
 * a token as a sum in double precision (a dependent chain of adds). */
int td_eng_row_finite(const float *x, int64_t n) {
    int bad = 0;
    int64_t i = 0;
    for (; i + 64 <= n; i += 64)
        for (int k = 0; k < 64; k++) bad |= !(fabsf(x[i + k]) <= FLT_MAX);
    for (; i < n; i++) bad |= !(fabsf(x[i]) <= FLT_MAX);
    return !bad;
}

void td_eng_store_kv(const td_ctx *ctx, void *cache, int32_t cell, const float *row) {
    int64_t n = ctx->kv.dim;
    if (ctx->kv.f16) {
        uint16_t *dst = (uint16_t *)cache + (int64_t)cell * n;
        for (int64_t i = 0; i < n; i++) dst[i] = td_f32_to_f16(row[i]);
    } else {
        memcpy((float *)cache + (int64_t)cell * n, row, (size_t)n * sizeof *row);
    }
}

void td_eng_keep_outputs(td_ctx *ctx) {
    td_pass *ps = &ctx->pass;
    int64_t d = ctx->model->cfg.n_embd;
    for (int32_t i = 0; i < ps->n_out; i++) { /* out_tok ascends, so row i never overwrites a row still to move */
        int32_t t = ps->out_tok[i];
        if (t != i) memcpy(ctx->act.x + i * d, ctx->act.x + (int64_t)t * d, (size_t)d * sizeof *ctx->act.x);
    }
    ps->n_rows = ps->n_out;
}

/* ---- attention ----------------------------------------------------------------------------------------------- */

typedef struct attn_args {
    const float *q;
    const void *kc, *vc;
    int64_t ldq, q_head_stride;
    int64_t n_blocks; /* tasks per KV head: blocks of `tokens` tokens of one sequence, over all groups */
    int64_t tokens;   /* tokens per task: ctx->attn_tokens, or 1 in a sliding-window layer */
    int64_t window;   /* a sliding window (positions pos - window + 1 .. pos), or 0 */
} attn_args;

static int64_t group_blocks(const td_ctx *ctx, int32_t g, int64_t tokens) {
    const td_pass *ps = &ctx->pass;
    return (ps->grp_off[g + 1] - ps->grp_off[g] + tokens - 1) / tokens;
}

/* Task i: KV head i / n_blocks, token block i % n_blocks (blocks of ctx->attn_tokens tokens, counted over the
 * sequence groups in order). The query heads of that KV head for the block's tokens read each key and value row
 * once. */
static void attn_task(td_ctx *ctx, int64_t task, const void *arg, int thread) {
    const attn_args *a = arg;
    const td_pass *ps = &ctx->pass;
    const td_config *c = &ctx->model->cfg;
    int64_t hd = c->head_dim, group = c->n_head / c->n_head_kv;
    float scale = c->attn_scale;
    float *scratch = ctx->act.attn_scratch + (int64_t)thread * ctx->act.attn_floats;
    const float *qr[TD_ATTN_MAX_ROWS];
    float *out[TD_ATTN_MAX_ROWS];
    int64_t n[TD_ATTN_MAX_ROWS];
    int64_t kvh = task / a->n_blocks, blk = task % a->n_blocks;
    int32_t g = 0;
    while (blk >= group_blocks(ctx, g, a->tokens)) blk -= group_blocks(ctx, g, a->tokens), g++;
    int32_t k0 = ps->grp_off[g] + (int32_t)blk * (int32_t)a->tokens, k1 = k0 + (int32_t)a->tokens;
    if (k1 > ps->grp_off[g + 1]) k1 = ps->grp_off[g + 1];
    int64_t R = 0, lo = 0;
    for (int32_t k = k0; k < k1; k++) {
        int64_t t = ps->grp_tok[k], n_t = (int64_t)ps->tok_pos[t] + 1; /* causal: positions 0..pos */
        if (a->window && n_t > a->window) lo = n_t - a->window;      /* the window: its last `window` positions */
        for (int64_t h = kvh * group; h < (kvh + 1) * group; h++, R++) {
            qr[R] = a->q + t * a->ldq + h * a->q_head_stride;
            out[R] = ctx->act.att + t * c->n_head * hd + h * hd;
            n[R] = n_t - lo;
        }
    }
    /* In a sliding-window layer a task is one token, and its keys start at the window's first position: each row's
     * keys (and so the kernels' order of operations over them) are its own whatever else the pass holds. */
    const td_seq *s = &ctx->kv.seqs[ps->grp_seq[g]];
    int64_t es = ctx->kv.f16 ? 2 : 4, pre = a->window ? 0 : ps->n_pre, kv_dim = ctx->kv.dim;
    const float *pre_k = a->window ? NULL : ctx->act.pre_kv, *pre_v = pre_k ? pre_k + (int64_t)ctx->p.n_ctx * kv_dim : NULL;
    td_attn_keys keys = {(const char *)a->kc + kvh * hd * es, (const char *)a->vc + kvh * hd * es,
                         ctx->kv.f16, s->cells + lo, kv_dim,
                         pre_k ? pre_k + kvh * pre * hd : NULL, pre_v ? pre_v + kvh * pre * hd : NULL, pre};
    ctx->k->attn_rows(qr, out, n, R, &keys, hd, scale, scratch);
}

/* KV head h's rows of the shared prefix, keys then values, as fp32 rows of head_dim (converted from f16). */
static void gather_prefix(td_ctx *ctx, int64_t h, const void *arg, int thread) {
    (void)thread;
    const attn_args *a = arg;
    const td_pass *ps = &ctx->pass;
    int64_t hd = ctx->model->cfg.head_dim, pre = ps->n_pre, kv_dim = ctx->kv.dim;
    const int32_t *cells = ctx->kv.seqs[ps->grp_seq[0]].cells;
    for (int which = 0; which < 2; which++) {
        const void *cache = which ? a->vc : a->kc;
        float *dst = ctx->act.pre_kv + which * (int64_t)ctx->p.n_ctx * kv_dim + h * pre * hd;
        for (int64_t i = 0; i < pre; i++) {
            int64_t at = (int64_t)cells[i] * kv_dim + h * hd;
            if (ctx->kv.f16)
                for (int64_t e = 0; e < hd; e++) dst[i * hd + e] = td_f16_to_f32(((const uint16_t *)cache)[at + e]);
            else
                memcpy(dst + i * hd, (const float *)cache + at, (size_t)hd * sizeof *dst);
        }
    }
}

/* The keys every task reads (td_pass.n_pre) are gathered once per layer as fp32 rows: a cache's rows of one head lie
 * a whole KV row apart, so the kernels would otherwise copy them per task. A copy changes no bit. */
void td_eng_attention(td_ctx *ctx, int il, const float *q, int64_t ldq, int64_t q_head_stride) {
    int64_t window = ctx->model->cfg.layer_window[il], tokens = window ? 1 : ctx->attn_tokens, blocks = 0;
    for (int32_t g = 0; g < ctx->pass.n_groups; g++) blocks += group_blocks(ctx, g, tokens);
    attn_args a = {q, ctx->kv.k[il], ctx->kv.v[il], ldq, q_head_stride, blocks, tokens, window};
    if (ctx->pass.n_pre && !window) td_eng_for(ctx, ctx->model->cfg.n_head_kv, gather_prefix, &a);
    td_eng_for_dynamic(ctx, blocks * ctx->model->cfg.n_head_kv, attn_task, &a);
}
