/* The context: its memory plan (every buffer, sized once; td_ctx_memory reports the same plan), td_ctx_decode
 * (prepare the pass, run the forward pass) and the sequence operations. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "kernels/cpu/quant.h"
#include "util/alloc.h"
#include "util/error.h"

td_ctx_params td_ctx_default_params(void) {
    td_ctx_params p;
    memset(&p, 0, sizeof p);
    p.n_ctx = 4096;
    p.n_batch = 512;
    p.n_seq_max = 1;
    p.n_threads = 1;
    p.n_outputs_max = 0;
    return p;
}

/* ---- the memory plan ------------------------------------------------------------------------------------------ */

#define TD_PLAN_MAX 40
#define TD_BUF_ALIGN 64 /* every buffer starts on a cache line */

/* Where a buffer lives: always on the host; on the host of a CPU context and on the GPU of a CUDA context (the KV
 * cache, the DeltaNet states, the activations: the field then holds a device pointer, which only the device side
 * reads); or only in a CPU context (scratch of the CPU kernels). */
enum { ON_HOST, ON_DEVICE, CPU_ONLY };

typedef struct plan_buf {
    void **at;     /* the field that receives the buffer */
    size_t bytes;  /* rounded up to TD_BUF_ALIGN; 0: not needed (the field stays NULL) */
    int zero;      /* starts zeroed */
    int where;     /* ON_HOST, ON_DEVICE or CPU_ONLY */
} plan_buf;

typedef struct ctx_plan {
    plan_buf b[TD_PLAN_MAX];
    int n;
    int cuda;     /* the plan of a CUDA context: CPU_ONLY buffers are not made */
    size_t total; /* the buffers, the context struct and the thread pool: all that td_ctx_new allocates */
} ctx_plan;

static void add_at(ctx_plan *pl, int where, void *field, int64_t count, size_t elem, int zero) {
    size_t bytes = count > 0 ? ((size_t)count * elem + TD_BUF_ALIGN - 1) & ~(size_t)(TD_BUF_ALIGN - 1) : 0;
    if (where == CPU_ONLY && pl->cuda) bytes = 0;
    pl->b[pl->n++] = (plan_buf){field, bytes, zero, where};
    pl->total += bytes;
}
static void add(ctx_plan *pl, void *field, int64_t count, size_t elem, int zero) {
    add_at(pl, ON_HOST, field, count, elem, zero);
}
static void add_dev(ctx_plan *pl, void *field, int64_t count, size_t elem, int zero) {
    add_at(pl, ON_DEVICE, field, count, elem, zero);
}
static void add_cpu(ctx_plan *pl, void *field, int64_t count, size_t elem, int zero) {
    add_at(pl, CPU_ONLY, field, count, elem, zero);
}

/* The widest input of any product that takes quantised activations with the model's kernels (0 when none does):
 * the width of the activation buffer's rows. */
static int64_t max_quant_cols(const td_model *m, int bf16) {
    const td_kernels *k = m->kernels ? m->kernels : td_kernels_best();
    int64_t mx = 0;
    for (int i = 0; i < m->cfg.n_layer; i++)
        for (int s = 0; s < TD_W_COUNT; s++) {
            const td_mat *w = &m->layers[i].w[s];
            if (w->data && td_kernels_layout(k, w, bf16) >= 0 && w->cols > mx) mx = w->cols;
        }
    if (td_kernels_layout(k, &m->head, bf16) >= 0 && m->head.cols > mx) mx = m->head.cols;
    return mx;
}

/* bytes of one cached key or value element: f16 and bf16 caches hold 2, an f32 cache 4 */
static int kv_elem_bytes(const td_kv_cache *kv) { return kv->f16 || kv->bf16 ? 2 : 4; }

static int clamp_threads(int32_t n) { return n < 1 ? 1 : n > TD_POOL_MAX_THREADS ? TD_POOL_MAX_THREADS : n; }

/* Every buffer of a context for these parameters (already checked), pointed at ctx's fields; sizes derived once.
 * Also sets the sizes the context keeps (kv.dim, dn offsets, scratch sizes). */
static void plan_ctx(const td_model *m, const td_ctx_params *p, td_ctx *ctx, ctx_plan *pl) {
    const td_config *c = &m->cfg;
    memset(pl, 0, sizeof *pl);
    pl->cuda = p->device == TD_DEVICE_CUDA;
    const int64_t B = p->n_batch, d = c->n_embd, n_ctx = p->n_ctx, n_out = p->n_outputs_max;
    const int64_t kv_dim = (int64_t)c->n_head_kv * c->head_dim, att_dim = (int64_t)c->n_head * c->head_dim;
    const int64_t q_rows = att_dim * (c->attn_output_gate ? 2 : 1), threads = clamp_threads(p->n_threads);
    const int64_t group = c->n_head / c->n_head_kv;
    int64_t n_attn = 0;
    for (int i = 0; i < c->n_layer; i++) n_attn += m->layers[i].kind == TD_LAYER_ATTENTION;

    /* KV cache: one block of keys and one of values for all attention layers */
    ctx->kv.dim = (int32_t)kv_dim;
    ctx->kv.f16 = p->kv_f16 != 0;
    ctx->kv.bf16 = pl->cuda && td_eng_dev_kv_bf16(c, p);
    const int kv_es = kv_elem_bytes(&ctx->kv);
    add_dev(pl, &ctx->kv.k_block, n_attn * n_ctx * kv_dim, kv_es, 0);
    add_dev(pl, &ctx->kv.v_block, n_attn * n_ctx * kv_dim, kv_es, 0);
    add(pl, &ctx->kv.refcount, n_ctx, sizeof(int32_t), 1);
    add(pl, &ctx->kv.free_list, n_ctx, sizeof(int32_t), 0);
    add(pl, &ctx->kv.seqs, p->n_seq_max, sizeof(td_seq), 1);
    add(pl, &ctx->kv.cells, (int64_t)p->n_seq_max * n_ctx, sizeof(int32_t), 0);

    /* DeltaNet state: per sequence, per DeltaNet layer, conv rows then S */
    int64_t key_dim = (int64_t)c->lin_n_k_heads * c->lin_k_dim, value_dim = (int64_t)c->lin_n_v_heads * c->lin_v_dim;
    ctx->dn.conv_dim = 2 * key_dim + value_dim;
    int64_t rec = (int64_t)c->lin_n_v_heads * c->lin_k_dim * c->lin_v_dim; /* S, unless the device keeps its own */
    int64_t dev_rec = pl->cuda && c->lin_n_v_heads > 0 ? td_eng_dev_dn_state_floats(c) : 0;
    ctx->dn.dev_chunk = dev_rec > 0;
    int64_t per_layer = (int64_t)(c->lin_conv_kernel - 1) * ctx->dn.conv_dim + (dev_rec > 0 ? dev_rec : rec);
    ctx->dn.floats = 0;
    ctx->hybrid = 0;
    for (int i = 0; i < c->n_layer; i++) {
        ctx->dn.layer_off[i] = -1;
        if (m->layers[i].kind != TD_LAYER_DELTANET) continue;
        ctx->dn.layer_off[i] = ctx->dn.floats;
        ctx->dn.floats += per_layer;
        ctx->hybrid = 1;
    }
    add_dev(pl, &ctx->dn.data, (int64_t)p->n_seq_max * ctx->dn.floats, sizeof(float), 1);

    /* the pass */
    add(pl, &ctx->pass.tok_id, B, sizeof(int32_t), 0);
    add(pl, &ctx->pass.tok_seq, B, sizeof(int32_t), 0);
    add(pl, &ctx->pass.tok_pos, B, sizeof(int32_t), 0);
    add(pl, &ctx->pass.tok_cell, B, sizeof(int32_t), 0);
    add(pl, &ctx->pass.out_tok, B, sizeof(int32_t), 0);
    add(pl, &ctx->pass.grp_seq, B, sizeof(int32_t), 0);
    add(pl, &ctx->pass.grp_off, B + 1, sizeof(int32_t), 0);
    add(pl, &ctx->pass.grp_tok, B, sizeof(int32_t), 0);
    add(pl, &ctx->pass.rope_cs, (int64_t)c->n_rope * B * c->rotary_dim, sizeof(float), 0);
    add(pl, &ctx->pass.row_bad, B, 1, 0);
    add(pl, &ctx->pass.seq_tmp, p->n_seq_max, sizeof(int32_t), 0);
    add(pl, &ctx->pass.pos_tmp, n_ctx, sizeof(int32_t), 0);

    /* activations */
    td_acts *a = &ctx->act;
    add_dev(pl, &a->x, B * d, sizeof(float), 0);
    add_dev(pl, &a->xb, B * d, sizeof(float), 0);
    add_dev(pl, &a->q, B * q_rows, sizeof(float), 0);
    add_dev(pl, &a->k, B * kv_dim, sizeof(float), 0);
    add_dev(pl, &a->v, B * kv_dim, sizeof(float), 0);
    add_dev(pl, &a->att, B * att_dim, sizeof(float), 0);
    add_dev(pl, &a->ff_g, B * c->n_ff, sizeof(float), 0);
    add_dev(pl, &a->ff_u, B * c->n_ff, sizeof(float), 0);
    int64_t dn_b = ctx->hybrid ? B : 0;
    add_dev(pl, &a->dn_qkv, dn_b * ctx->dn.conv_dim, sizeof(float), 0);
    add_dev(pl, &a->dn_conv, dn_b * ctx->dn.conv_dim, sizeof(float), 0);
    add_dev(pl, &a->dn_z, dn_b * value_dim, sizeof(float), 0);
    add_dev(pl, &a->dn_core, dn_b * value_dim, sizeof(float), 0);
    add_dev(pl, &a->dn_b, dn_b * c->lin_n_v_heads, sizeof(float), 0);
    add_dev(pl, &a->dn_a, dn_b * c->lin_n_v_heads, sizeof(float), 0);
    a->xq_cols = max_quant_cols(m, p->precision == TD_PRECISION_BF16);
    add_cpu(pl, &a->xq, a->xq_cols ? (int64_t)td_qrows_bytes(B, a->xq_cols) : 0, 1, 0);
    add_dev(pl, &a->out_x, n_out * d, sizeof(float), 0);
    add(pl, &a->out, n_out * m->head.rows, sizeof(float), 0);
    ctx->attn_tokens = TD_ATTN_MAX_ROWS / group < TD_ATTN_TOKENS ? TD_ATTN_MAX_ROWS / group : TD_ATTN_TOKENS;
    a->attn_floats = td_attn_rows_scratch(ctx->attn_tokens * group, n_ctx, c->head_dim, p->kv_f16);
    add_cpu(pl, &a->attn_scratch, threads * a->attn_floats, sizeof(float), 0);
    int64_t C = TD_DELTANET_CHUNK, dk = c->lin_k_dim, dv = c->lin_v_dim;
    a->dn_work_floats = ctx->hybrid ? 2 * C * dk + 2 * C * dv + 2 * C + td_deltanet_chunk_work(C, dk, dv) : 0;
    add_cpu(pl, &a->dn_work, p->deltanet_chunked ? threads * a->dn_work_floats : 0, sizeof(float), 0);
    add_cpu(pl, &a->pre_kv, kv_dim ? 2 * n_ctx * kv_dim : 0, sizeof(float), 0);
    add(pl, &ctx->inv_freq, (int64_t)c->n_rope * (c->rotary_dim / 2), sizeof(float), 0);

    pl->total += sizeof(td_ctx) + td_pool_bytes(pl->cuda ? 1 : (int)threads); /* the GPU needs no worker threads */
}

/* The parameters as the context will use them, or an error naming what is wrong. */
static td_status normalise(const td_ctx_params *params, td_ctx_params *p) {
    *p = params ? *params : td_ctx_default_params();
    if (p->n_ctx < 1 || p->n_batch < 1 || p->n_seq_max < 1 || p->n_threads < 1 || p->n_outputs_max < 0)
        return td_fail(TD_ERR_INVALID_ARG, "td_ctx_new: n_ctx, n_batch, n_seq_max and n_threads must be >= 1");
    if (p->n_ctx > (1 << 24) || p->n_seq_max > (1 << 16) || p->n_batch > (1 << 20))
        return td_fail(TD_ERR_INVALID_ARG, "td_ctx_new: sizes are absurdly large");
    if (p->n_outputs_max == 0 || p->n_outputs_max > p->n_batch) p->n_outputs_max = p->n_outputs_max ? p->n_batch : 1;
    if (p->device != TD_DEVICE_CPU && p->device != TD_DEVICE_CUDA)
        return td_fail(TD_ERR_INVALID_ARG, "td_ctx_new: device %d is neither TD_DEVICE_CPU nor TD_DEVICE_CUDA",
                       p->device);
    if (p->precision != TD_PRECISION_FP32 && p->precision != TD_PRECISION_BF16)
        return td_fail(TD_ERR_INVALID_ARG,
                       "td_ctx_new: precision %d is neither TD_PRECISION_FP32 nor TD_PRECISION_BF16", p->precision);
    return TD_OK;
}

td_status td_device_probe(td_device device, char *desc, size_t desc_len) {
    if (device == TD_DEVICE_CUDA) return td_eng_dev_probe(device, desc, desc_len);
    if (device != TD_DEVICE_CPU) return td_fail(TD_ERR_INVALID_ARG, "td_device_probe: unknown device %d", (int)device);
    if (desc && desc_len) snprintf(desc, desc_len, "CPU (%s kernels)", td_kernels_best()->name);
    return TD_OK;
}

td_status td_device_free_bytes(td_device device, int64_t *free_bytes) {
    if (!free_bytes) return td_fail(TD_ERR_INVALID_ARG, "td_device_free_bytes: NULL argument");
    *free_bytes = 0;
    if (device == TD_DEVICE_CUDA) return td_eng_dev_free_bytes(free_bytes);
    if (device != TD_DEVICE_CPU)
        return td_fail(TD_ERR_INVALID_ARG, "td_device_free_bytes: unknown device %d", (int)device);
    return td_fail(TD_ERR_UNSUPPORTED, "the CPU's free memory is not tracked: budgets there are the caller's");
}

int td_precision_parse(const char *name) {
    if (!name) return -1;
    if (strcmp(name, "fp32") == 0) return TD_PRECISION_FP32;
    if (strcmp(name, "bf16") == 0) return TD_PRECISION_BF16;
    return -1;
}

int td_device_parse(const char *name) {
    if (!name) return -1;
    if (strcmp(name, "cpu") == 0) return TD_DEVICE_CPU;
    if (strcmp(name, "cuda") == 0) return TD_DEVICE_CUDA;
    return -1;
}

td_status td_ctx_memory(const td_model *model, const td_ctx_params *params, int64_t *bytes) {
    if (!model || !params || !bytes) return td_fail(TD_ERR_INVALID_ARG, "td_ctx_memory: NULL argument");
    td_ctx_params p;
    td_status st = normalise(params, &p);
    if (st != TD_OK) return st;
    td_ctx shape; /* only its fields' addresses receive anything: the plan without the buffers */
    ctx_plan pl;
    plan_ctx(model, &p, &shape, &pl);
    *bytes = (int64_t)pl.total;
    return TD_OK;
}

void td_ctx_free(td_ctx *ctx) {
    if (!ctx) return;
    td_pool_free(ctx->pool);
    ctx_plan pl;
    plan_ctx(ctx->model, &ctx->p, ctx, &pl);
    if (ctx->dev) td_eng_dev_close(ctx);
    for (int i = 0; i < pl.n; i++) {
        if (pl.cuda && pl.b[i].where == ON_DEVICE) td_eng_dev_free(*pl.b[i].at);
        else td_free(*pl.b[i].at);
    }
    td_free(ctx->head_rows);
    td_free(ctx);
}

td_status td_ctx_new(const td_model *model, const td_ctx_params *params, td_ctx **out) {
    if (!model || !out) return td_fail(TD_ERR_INVALID_ARG, "td_ctx_new: NULL argument");
    *out = NULL;
    td_ctx_params p;
    td_status st = normalise(params, &p);
    if (st != TD_OK) return st;
    if (p.device == TD_DEVICE_CUDA && (st = td_eng_dev_probe(TD_DEVICE_CUDA, NULL, 0)) != TD_OK) return st;
    td_ctx *ctx = td_calloc(1, sizeof *ctx);
    if (!ctx) return td_fail_nomem("a context");
    ctx->model = model;
    ctx->p = p;
    ctx->k = model->kernels ? model->kernels : td_kernels_best(); /* the set the model was packed for */
    ctx->bf16_acts = p.precision == TD_PRECISION_BF16 && ctx->k->bf16;
    ctx_plan pl;
    plan_ctx(model, &p, ctx, &pl);
    int ok = 1, dev_ok = 1;
    for (int i = 0; ok && dev_ok && i < pl.n; i++) {
        if (!pl.b[i].bytes) continue;
        if (pl.cuda && pl.b[i].where == ON_DEVICE) {
            dev_ok = (*pl.b[i].at = td_eng_dev_alloc(pl.b[i].bytes, pl.b[i].zero)) != NULL;
            continue;
        }
        ok = (*pl.b[i].at = td_aligned_alloc(TD_BUF_ALIGN, pl.b[i].bytes)) != NULL;
        if (ok && pl.b[i].zero) memset(*pl.b[i].at, 0, pl.b[i].bytes);
    }
    ok = ok && dev_ok && (ctx->pool = td_pool_new(pl.cuda ? 1 : p.n_threads)) != NULL;
    if (!ok) {
        td_ctx_free(ctx);
        return dev_ok ? td_fail_nomem("the context buffers (reduce n_ctx, n_batch or n_seq_max)")
                      : td_fail(TD_ERR_NOMEM, "the context's GPU buffers (%.1f MB): reduce n_ctx, n_batch or n_seq_max",
                                (double)pl.total / 1e6);
    }
    const td_config *c = &model->cfg;
    size_t es = (size_t)kv_elem_bytes(&ctx->kv), layer_bytes = (size_t)p.n_ctx * (size_t)ctx->kv.dim * es;
    for (int il = 0, a = 0; il < c->n_layer; il++) { /* each attention layer's part of the two blocks */
        if (model->layers[il].kind != TD_LAYER_ATTENTION) continue;
        ctx->kv.k[il] = (char *)ctx->kv.k_block + (size_t)a * layer_bytes;
        ctx->kv.v[il] = (char *)ctx->kv.v_block + (size_t)a * layer_bytes;
        a++;
    }
    for (int32_t i = 0; i < p.n_seq_max; i++) ctx->kv.seqs[i].cells = ctx->kv.cells + (int64_t)i * p.n_ctx;
    for (int32_t i = 0; i < p.n_ctx; i++) ctx->kv.free_list[i] = p.n_ctx - 1 - i;
    ctx->kv.n_free = p.n_ctx;
    for (int set = 0; set < c->n_rope; set++) td_model_inv_freq(model, set, ctx->inv_freq + set * (c->rotary_dim / 2));
    if (pl.cuda && (st = td_eng_dev_open(ctx)) != TD_OK) {
        td_ctx_free(ctx);
        return st;
    }
    *out = ctx;
    return TD_OK;
}

/* ---- preparing a pass ------------------------------------------------------------------------------------------ */

/* Checks the whole batch before anything is written, so that a rejected batch leaves the cache untouched. */
static td_status validate(const td_ctx *ctx, const td_batch *b) {
    const td_config *c = &ctx->model->cfg;
    if (b->n > ctx->p.n_batch)
        return td_fail(TD_ERR_RANGE, "batch of %d tokens exceeds the context's n_batch %d", b->n, ctx->p.n_batch);
    if (b->n > ctx->kv.n_free)
        return td_fail(TD_ERR_RANGE, "KV cache full: %d tokens need cells but only %d of %d are free", b->n,
                       ctx->kv.n_free, ctx->p.n_ctx);
    int32_t n_out = 0;
    for (int32_t i = 0; i < b->n; i++) {
        if (b->token[i] < 0 || b->token[i] >= c->n_vocab)
            return td_fail(TD_ERR_RANGE, "token id %d (batch index %d) is outside the vocabulary 0..%d", b->token[i], i,
                           c->n_vocab - 1);
        if (b->seq[i] < 0 || b->seq[i] >= ctx->p.n_seq_max)
            return td_fail(TD_ERR_RANGE, "sequence id %d (batch index %d) is outside 0..%d", b->seq[i], i,
                           ctx->p.n_seq_max - 1);
        n_out += b->want[i];
    }
    if (n_out > ctx->p.n_outputs_max)
        return td_fail(TD_ERR_RANGE, "batch asks for %d outputs but the context was created for %d (n_outputs_max)",
                       n_out, ctx->p.n_outputs_max);
    /* positions: each sequence grows at its end, in batch order (seen[s]: its tokens before this one) */
    int32_t *seen = ctx->pass.seq_tmp;
    for (int32_t i = 0; i < b->n; i++) seen[b->seq[i]] = 0;
    for (int32_t i = 0; i < b->n; i++) {
        int32_t expect = ctx->kv.seqs[b->seq[i]].len + seen[b->seq[i]]++;
        if (b->pos[i] != expect)
            return td_fail(TD_ERR_INVALID_ARG, "token %d of sequence %d has position %d; the next position is %d", i,
                           b->seq[i], b->pos[i], expect);
        if (expect >= ctx->p.n_ctx)
            return td_fail(TD_ERR_RANGE, "sequence %d would exceed n_ctx %d positions", b->seq[i], ctx->p.n_ctx);
    }
    return TD_OK;
}

/* Groups the pass's tokens by sequence, keeping batch (= position) order inside each group, and finds the keys every
 * attention task reads (gathered once per layer, td_eng_attention): the prefix that all groups share (the same cells
 * at the same positions, all written before this pass), or, for one sequence whose tokens make several tasks (a
 * prefill), all of its keys. */
static void group_by_sequence(td_ctx *ctx) {
    td_pass *ps = &ctx->pass;
    int32_t n = ps->n_tokens, *group = ps->seq_tmp; /* group[s]: sequence s's group, -1 before its first token */
    ps->n_groups = 0;
    for (int32_t i = 0; i < n; i++) group[ps->tok_seq[i]] = -1;
    for (int32_t i = 0; i < n; i++) /* groups in the order of their first token; grp_off counts, then offsets */
        if (group[ps->tok_seq[i]] < 0) {
            group[ps->tok_seq[i]] = ps->n_groups;
            ps->grp_seq[ps->n_groups] = ps->tok_seq[i];
            ps->grp_off[ps->n_groups++] = 0;
        }
    for (int32_t i = 0; i < n; i++) ps->grp_off[group[ps->tok_seq[i]]]++;
    int32_t k = 0;
    for (int32_t g = 0; g <= ps->n_groups; g++) {
        int32_t c = g < ps->n_groups ? ps->grp_off[g] : 0;
        ps->grp_off[g] = k;
        k += c;
    }
    for (int32_t i = 0; i < n; i++) { /* batch order inside each group; grp_off[g] advances, then steps back */
        int32_t g = group[ps->tok_seq[i]];
        ps->grp_tok[ps->grp_off[g]++] = i;
    }
    for (int32_t g = ps->n_groups; g > 0; g--) ps->grp_off[g] = ps->grp_off[g - 1];
    ps->grp_off[0] = 0;
    ps->n_pre = 0;
    if (!ctx->act.pre_kv) return;
    if (ps->n_groups == 1) {
        if (k > ctx->attn_tokens) ps->n_pre = ps->tok_pos[ps->grp_tok[k - 1]] + 1;
        return;
    }
    const td_seq *s0 = &ctx->kv.seqs[ps->grp_seq[0]];
    int32_t pre = ps->tok_pos[ps->grp_tok[0]];
    for (int32_t g = 1; g < ps->n_groups && pre > 0; g++) {
        const td_seq *s = &ctx->kv.seqs[ps->grp_seq[g]];
        int32_t first = ps->tok_pos[ps->grp_tok[ps->grp_off[g]]], i = 0;
        int32_t lim = first < pre ? first : pre;
        while (i < lim && s->cells[i] == s0->cells[i]) i++;
        pre = i;
    }
    ps->n_pre = pre >= TD_PRE_MIN ? pre : 0;
}

/* Everything the forward pass needs to know about the batch: each token gets a KV cell at the end of its
 * sequence, the tokens are grouped by sequence, and their RoPE tables are made (once for every layer). */
static td_status prepare_pass(td_ctx *ctx, const td_batch *b) {
    td_status st = validate(ctx, b);
    if (st != TD_OK) return st;
    td_pass *ps = &ctx->pass;
    ps->n_tokens = ps->n_rows = b->n;
    ps->n_out = 0;
    for (int32_t i = 0; i < b->n; i++) {
        td_seq *s = &ctx->kv.seqs[b->seq[i]];
        int32_t cell = ctx->kv.free_list[--ctx->kv.n_free];
        ctx->kv.refcount[cell] = 1;
        s->cells[s->len++] = cell;
        ps->tok_id[i] = b->token[i];
        ps->tok_seq[i] = b->seq[i];
        ps->tok_pos[i] = b->pos[i];
        ps->tok_cell[i] = cell;
        if (b->want[i]) ps->out_tok[ps->n_out++] = i;
    }
    group_by_sequence(ctx);
    int64_t rot = ctx->model->cfg.rotary_dim;
    int32_t *first = ps->pos_tmp; /* a table depends on the position alone: made once per position of the pass */
    for (int32_t i = 0; i < b->n; i++) first[ps->tok_pos[i]] = -1;
    for (int32_t i = 0; i < b->n; i++) {
        int32_t f = first[ps->tok_pos[i]];
        if (f < 0) first[ps->tok_pos[i]] = i;
        for (int set = 0; set < ctx->model->cfg.n_rope; set++) { /* each set's tables, n_batch rows apart */
            float *row = ps->rope_cs + ((int64_t)set * ctx->p.n_batch + i) * rot;
            if (f < 0) td_rope_table(row, rot, ctx->inv_freq + set * (rot / 2), ps->tok_pos[i]);
            else memcpy(row, ps->rope_cs + ((int64_t)set * ctx->p.n_batch + f) * rot, (size_t)rot * sizeof *row);
        }
    }
    return TD_OK;
}

/* Takes the batch's positions back (a pass that failed): its tokens were appended at their sequences' ends in batch
 * order, so popping them in reverse restores every table and reference count. */
static void take_back(td_ctx *ctx) {
    td_kv_cache *kv = &ctx->kv;
    for (int32_t i = ctx->pass.n_tokens - 1; i >= 0; i--) {
        td_seq *s = &kv->seqs[ctx->pass.tok_seq[i]];
        int32_t cell = s->cells[--s->len];
        if (--kv->refcount[cell] == 0) kv->free_list[kv->n_free++] = cell;
    }
    ctx->pass.n_out = 0;
}

td_status td_ctx_decode(td_ctx *ctx, const td_batch *b) {
    if (!ctx || !b) return td_fail(TD_ERR_INVALID_ARG, "td_ctx_decode: NULL argument");
    ctx->fault.set = 0;
    td_status st = prepare_pass(ctx, b);
    if (st != TD_OK || b->n == 0) return st;
    st = ctx->dev ? td_forward_dev(ctx) : td_forward(ctx);
    if (st != TD_OK) take_back(ctx);
    return st;
}

int td_ctx_nonfinite(const td_ctx *ctx, int32_t *seq, int32_t *pos, int32_t *layer) {
    if (!ctx || !ctx->fault.set) return -1;
    if (seq) *seq = ctx->fault.seq;
    if (pos) *pos = ctx->fault.pos;
    if (layer) *layer = ctx->fault.layer;
    return 0;
}

/* ---- outputs --------------------------------------------------------------------------------------------------- */

int32_t td_ctx_n_outputs(const td_ctx *ctx) { return ctx ? ctx->pass.n_out : 0; }

const float *td_ctx_output(const td_ctx *ctx, int32_t i) {
    if (!ctx || i < 0 || i >= ctx->pass.n_out) return NULL;
    int64_t w = ctx->head_rows ? ctx->n_head_rows : ctx->model->head.rows;
    return ctx->act.out + (int64_t)i * w;
}

td_status td_ctx_set_output_rows(td_ctx *ctx, const int32_t *rows, int32_t n) {
    if (!ctx || n < 0 || (n > 0 && !rows)) return td_fail(TD_ERR_INVALID_ARG, "td_ctx_set_output_rows: bad argument");
    const td_model *m = ctx->model;
    if (n > m->head.rows)
        return td_fail(TD_ERR_RANGE, "td_ctx_set_output_rows: %d rows, but the head has %lld", n, (long long)m->head.rows);
    int32_t *mapped = n ? td_malloc((size_t)n * sizeof *mapped) : NULL;
    if (n && !mapped) return td_fail_nomem("output rows");
    for (int32_t i = 0; i < n; i++) {
        if (rows[i] < 0 || rows[i] >= m->cfg.n_vocab) {
            td_free(mapped);
            return td_fail(TD_ERR_RANGE, "output row %d is outside the vocabulary 0..%d", rows[i], m->cfg.n_vocab - 1);
        }
        mapped[i] = rows[i];
        if (m->pruned) { /* a pruned head holds only the slot map's tokens: token id -> head row */
            mapped[i] = -1;
            for (int32_t k = 0; k < m->n_keep; k++)
                if (m->keep[k] == rows[i]) mapped[i] = k;
            if (mapped[i] < 0) {
                td_free(mapped);
                return td_fail(TD_ERR_RANGE, "token %d is not one of the %d rows the pruned head kept", rows[i], m->n_keep);
            }
        }
    }
    td_free(ctx->head_rows);
    ctx->head_rows = mapped;
    ctx->n_head_rows = n;
    return TD_OK;
}

int64_t td_ctx_head_macs(const td_ctx *ctx) { return ctx ? ctx->head_macs : 0; }

int64_t td_ctx_pool_jobs(const td_ctx *ctx) { return ctx ? td_pool_jobs(ctx->pool) : 0; }

/* ---- sequences ------------------------------------------------------------------------------------------------- */

int32_t td_ctx_seq_len(const td_ctx *ctx, int32_t seq) {
    if (!ctx || seq < 0 || seq >= ctx->p.n_seq_max) return 0;
    return ctx->kv.seqs[seq].len;
}

int32_t td_ctx_n_free_rows(const td_ctx *ctx) { return ctx ? ctx->kv.n_free : 0; }

static td_status check_seq(const td_ctx *ctx, int32_t seq, const char *what) {
    if (!ctx) return td_fail(TD_ERR_INVALID_ARG, "%s: NULL context", what);
    if (seq < 0 || seq >= ctx->p.n_seq_max)
        return td_fail(TD_ERR_RANGE, "%s: sequence id %d is outside 0..%d", what, seq, ctx->p.n_seq_max - 1);
    return TD_OK;
}

td_status td_ctx_seq_fork(td_ctx *ctx, int32_t src, int32_t dst, int32_t n_pos) {
    td_status st;
    if ((st = check_seq(ctx, src, "td_ctx_seq_fork")) != TD_OK || (st = check_seq(ctx, dst, "td_ctx_seq_fork")) != TD_OK)
        return st;
    td_kv_cache *kv = &ctx->kv;
    if (src == dst) return td_fail(TD_ERR_INVALID_ARG, "td_ctx_seq_fork: source and destination are both %d", src);
    if (kv->seqs[dst].len != 0)
        return td_fail(TD_ERR_STATE, "td_ctx_seq_fork: destination sequence %d is not empty", dst);
    if (n_pos < 0 || n_pos > kv->seqs[src].len)
        return td_fail(TD_ERR_RANGE, "td_ctx_seq_fork: sequence %d has %d positions, cannot share %d", src,
                       kv->seqs[src].len, n_pos);
    if (ctx->hybrid && n_pos != kv->seqs[src].len)
        return td_fail(TD_ERR_STATE,
                       "td_ctx_seq_fork: sequence %d is at position %d; a hybrid (DeltaNet) model can only fork at a "
                       "sequence's end (keep a snapshot by forking into a spare sequence at position %d)",
                       src, kv->seqs[src].len, n_pos);
    if (ctx->hybrid) { /* the recurrent state is constant-size: copied, not shared */
        if (ctx->dev) {
            if ((st = td_eng_dev_state_copy(ctx, dst, src)) != TD_OK) return st;
        } else {
            memcpy(ctx->dn.data + (int64_t)dst * ctx->dn.floats, ctx->dn.data + (int64_t)src * ctx->dn.floats,
                   (size_t)ctx->dn.floats * sizeof(float));
        }
    }
    for (int32_t i = 0; i < n_pos; i++) {
        int32_t cell = kv->seqs[src].cells[i];
        kv->seqs[dst].cells[i] = cell;
        kv->refcount[cell]++;
    }
    kv->seqs[dst].len = n_pos;
    return TD_OK;
}

td_status td_ctx_seq_truncate(td_ctx *ctx, int32_t seq, int32_t n_pos) {
    td_status st = check_seq(ctx, seq, "td_ctx_seq_truncate");
    if (st != TD_OK) return st;
    td_kv_cache *kv = &ctx->kv;
    td_seq *s = &kv->seqs[seq];
    if (n_pos < 0 || n_pos > s->len)
        return td_fail(TD_ERR_RANGE, "td_ctx_seq_truncate: sequence %d has %d positions, cannot keep %d", seq, s->len,
                       n_pos);
    if (ctx->hybrid && n_pos != 0 && n_pos != s->len)
        return td_fail(TD_ERR_STATE,
                       "td_ctx_seq_truncate: DeltaNet state cannot be rolled back to position %d of sequence %d; "
                       "keep a snapshot (a fork at that position) instead",
                       n_pos, seq);
    if (ctx->hybrid && n_pos == 0) {
        if (ctx->dev) {
            if ((st = td_eng_dev_state_zero(ctx, seq)) != TD_OK) return st;
        } else {
            memset(ctx->dn.data + (int64_t)seq * ctx->dn.floats, 0, (size_t)ctx->dn.floats * sizeof(float));
        }
    }
    for (int32_t i = n_pos; i < s->len; i++) {
        int32_t cell = s->cells[i];
        if (--kv->refcount[cell] == 0) kv->free_list[kv->n_free++] = cell;
    }
    s->len = n_pos;
    return TD_OK;
}
