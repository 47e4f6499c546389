/* The context: creation (every buffer allocated once), td_ctx_decode (validate, place tokens in the KV cache, run
 * the forward pass, compute outputs) and the sequence operations. */
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "kernels/cpu/quant.h"
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

void td_ctx_free(td_ctx *ctx) {
    if (!ctx) return;
    td_pool_free(ctx->pool);
    if (ctx->k_cache)
        for (int i = 0; i < ctx->model->cfg.n_layer; i++) {
            free(ctx->k_cache[i]);
            free(ctx->v_cache[i]);
        }
    free(ctx->k_cache);
    free(ctx->v_cache);
    free(ctx->refcount);
    free(ctx->free_list);
    if (ctx->seqs)
        for (int i = 0; i < ctx->p.n_seq_max; i++) free(ctx->seqs[i].cells);
    free(ctx->seqs);
    free(ctx->tok_id);
    free(ctx->tok_seq);
    free(ctx->tok_pos);
    free(ctx->tok_cell);
    free(ctx->out_tok);
    free(ctx->x);
    free(ctx->xb);
    free(ctx->q);
    free(ctx->kx);
    free(ctx->vx);
    free(ctx->att);
    free(ctx->ff_g);
    free(ctx->ff_u);
    free(ctx->scores);
    free(ctx->pre_kv);
    free(ctx->inv_freq);
    free(ctx->rope_cs);
    free(ctx->out_x);
    free(ctx->out);
    free(ctx->head_rows);
    free(ctx->grp_seq);
    free(ctx->grp_off);
    free(ctx->grp_tok);
    free(ctx->dn_off);
    free(ctx->dn_state);
    free(ctx->dn_qkv);
    free(ctx->dn_conv);
    free(ctx->dn_z);
    free(ctx->dn_core);
    free(ctx->dn_b);
    free(ctx->dn_a);
    free(ctx->dn_work);
    free(ctx->xq);
    free(ctx);
}

/* The widest input of any quantised weight (0 when none is quantised): the size of a Q8_0 activation row. */
static int64_t model_max_quant_cols(const td_model *m) {
    int64_t mx = 0;
    const td_mat *all[16];
    for (int i = 0; i < m->cfg.n_layer; i++) {
        const td_layer *l = &m->layers[i];
        int n = 0;
        all[n++] = &l->w_gate, all[n++] = &l->w_up, all[n++] = &l->w_down;
        if (l->kind == TD_LAYER_ATTENTION) all[n++] = &l->attn.wq, all[n++] = &l->attn.wk, all[n++] = &l->attn.wv, all[n++] = &l->attn.wo;
        else all[n++] = &l->dn.in_qkv, all[n++] = &l->dn.in_z, all[n++] = &l->dn.in_b, all[n++] = &l->dn.in_a, all[n++] = &l->dn.out;
        for (int k = 0; k < n; k++)
            if (td_dtype_is_block(all[k]->type) && all[k]->cols > mx) mx = all[k]->cols;
    }
    if (td_dtype_is_block(m->head.type) && m->head.cols > mx) mx = m->head.cols;
    return mx;
}

/* Sizes the Gated DeltaNet state of one sequence and the offsets of each layer's part. */
static int plan_deltanet(td_ctx *ctx) {
    const td_config *c = &ctx->model->cfg;
    ctx->dn_off = malloc((size_t)c->n_layer * sizeof *ctx->dn_off);
    if (!ctx->dn_off) return 0;
    int64_t key_dim = (int64_t)c->lin_n_k_heads * c->lin_k_dim, value_dim = (int64_t)c->lin_n_v_heads * c->lin_v_dim;
    ctx->dn_conv_dim = 2 * key_dim + value_dim;
    int64_t per_layer = (int64_t)(c->lin_conv_kernel - 1) * ctx->dn_conv_dim + (int64_t)c->lin_n_v_heads * c->lin_k_dim * c->lin_v_dim;
    ctx->dn_state_floats = 0;
    for (int i = 0; i < c->n_layer; i++) {
        ctx->dn_off[i] = -1;
        if (ctx->model->layers[i].kind != TD_LAYER_DELTANET) continue;
        ctx->dn_off[i] = ctx->dn_state_floats;
        ctx->dn_state_floats += per_layer;
        ctx->hybrid = 1;
    }
    return 1;
}

static void *alloc_f(int64_t n) { return malloc((size_t)(n > 0 ? n : 1) * sizeof(float)); }
static void *alloc_i(int64_t n) { return malloc((size_t)(n > 0 ? n : 1) * sizeof(int32_t)); }

td_status td_ctx_new(const td_model *model, const td_ctx_params *params, td_ctx **out) {
    if (!model || !out) return td_fail(TD_ERR_INVALID_ARG, "td_ctx_new: NULL argument");
    *out = NULL;
    td_ctx_params p = params ? *params : td_ctx_default_params();
    if (p.n_ctx < 1 || p.n_batch < 1 || p.n_seq_max < 1 || p.n_threads < 1 || p.n_outputs_max < 0)
        return td_fail(TD_ERR_INVALID_ARG, "td_ctx_new: n_ctx, n_batch, n_seq_max and n_threads must be >= 1");
    if (p.n_ctx > (1 << 24) || p.n_seq_max > (1 << 16) || p.n_batch > (1 << 20))
        return td_fail(TD_ERR_INVALID_ARG, "td_ctx_new: sizes are absurdly large");
    if (p.n_outputs_max == 0 || p.n_outputs_max > p.n_batch) p.n_outputs_max = p.n_outputs_max ? p.n_batch : 1;
    const td_config *c = &model->cfg;
    td_ctx *ctx = calloc(1, sizeof *ctx);
    if (!ctx) return td_fail_nomem("a context");
    ctx->model = model;
    ctx->p = p;
    ctx->k = td_kernels_best();
    ctx->kv_dim = c->n_head_kv * c->head_dim;
    ctx->n_out_max = p.n_outputs_max;
    int64_t B = p.n_batch, d = c->n_embd, q_rows = (int64_t)c->n_head * c->head_dim * (c->attn_output_gate ? 2 : 1);
    int64_t kvc = (int64_t)p.n_ctx * ctx->kv_dim;
    int ok = (ctx->pool = td_pool_new(p.n_threads)) != NULL;
    ok = ok && (ctx->k_cache = calloc((size_t)c->n_layer, sizeof(void *))) != NULL;
    ok = ok && (ctx->v_cache = calloc((size_t)c->n_layer, sizeof(void *))) != NULL;
    size_t kv_bytes = (size_t)(kvc > 0 ? kvc : 1) * (p.kv_f16 ? 2 : 4);
    for (int i = 0; ok && i < c->n_layer; i++) {
        if (model->layers[i].kind != TD_LAYER_ATTENTION) continue;
        ok = (ctx->k_cache[i] = malloc(kv_bytes)) && (ctx->v_cache[i] = malloc(kv_bytes));
    }
    ok = ok && (ctx->refcount = calloc((size_t)p.n_ctx, sizeof(int32_t)));
    ok = ok && (ctx->free_list = alloc_i(p.n_ctx));
    ok = ok && (ctx->seqs = calloc((size_t)p.n_seq_max, sizeof *ctx->seqs));
    for (int i = 0; ok && i < p.n_seq_max; i++) ok = (ctx->seqs[i].cells = alloc_i(p.n_ctx)) != NULL;
    ok = ok && (ctx->tok_id = alloc_i(B)) && (ctx->tok_seq = alloc_i(B)) && (ctx->tok_pos = alloc_i(B)) &&
         (ctx->tok_cell = alloc_i(B)) && (ctx->out_tok = alloc_i(B));
    ok = ok && (ctx->x = alloc_f(B * d)) && (ctx->xb = alloc_f(B * d)) && (ctx->q = alloc_f(B * q_rows)) &&
         (ctx->kx = alloc_f(B * ctx->kv_dim)) && (ctx->vx = alloc_f(B * ctx->kv_dim)) &&
         (ctx->att = alloc_f(B * c->n_head * c->head_dim)) && (ctx->ff_g = alloc_f(B * c->n_ff)) &&
         (ctx->ff_u = alloc_f(B * c->n_ff));
    int64_t group = c->n_head / c->n_head_kv;
    ctx->attn_tokens = 256 / group < TD_ATTN_TOKENS ? 256 / group : TD_ATTN_TOKENS;
    ctx->attn_rows_max = ctx->attn_tokens * group;
    ctx->attn_scratch = td_attn_rows_scratch(ctx->attn_rows_max, p.n_ctx, c->head_dim, p.kv_f16);
    ok = ok && (ctx->scores = alloc_f((int64_t)td_pool_n_threads(ctx->pool) * ctx->attn_scratch));
    ok = ok && (ctx->inv_freq = alloc_f(c->rotary_dim / 2)) && (ctx->rope_cs = alloc_f(B * c->rotary_dim));
    ok = ok && (ctx->out_x = alloc_f((int64_t)ctx->n_out_max * d));
    ok = ok && (ctx->out = alloc_f((int64_t)ctx->n_out_max * c->n_vocab));
    ok = ok && (ctx->grp_seq = alloc_i(B)) && (ctx->grp_off = alloc_i(B + 1)) && (ctx->grp_tok = alloc_i(B));
    if (ok && p.n_seq_max > 1) ok = (ctx->pre_kv = alloc_f(2 * (int64_t)p.n_ctx * ctx->kv_dim)) != NULL;
    ok = ok && plan_deltanet(ctx);
    if (ok && ctx->hybrid) {
        int64_t value_dim = (int64_t)c->lin_n_v_heads * c->lin_v_dim;
        ok = (ctx->dn_state = calloc((size_t)p.n_seq_max * (size_t)ctx->dn_state_floats, sizeof(float))) &&
             (ctx->dn_qkv = alloc_f(B * ctx->dn_conv_dim)) && (ctx->dn_conv = alloc_f(B * ctx->dn_conv_dim)) &&
             (ctx->dn_z = alloc_f(B * value_dim)) && (ctx->dn_core = alloc_f(B * value_dim)) &&
             (ctx->dn_b = alloc_f(B * c->lin_n_v_heads)) && (ctx->dn_a = alloc_f(B * c->lin_n_v_heads));
        int64_t C = TD_DELTANET_CHUNK, dk = c->lin_k_dim, dv = c->lin_v_dim;
        ctx->dn_work_floats = 2 * C * dk + 2 * C * dv + 2 * C + td_deltanet_chunk_work(C, dk, dv);
        if (ok && p.deltanet_chunked)
            ok = (ctx->dn_work = alloc_f((int64_t)td_pool_n_threads(ctx->pool) * ctx->dn_work_floats)) != NULL;
    }
    int64_t qcols = model_max_quant_cols(model);
    ctx->xq_max_blocks = qcols / 32;
    if (ok && qcols) ok = (ctx->xq = malloc(td_qrows_bytes(B, ctx->xq_max_blocks))) != NULL;
    if (!ok) {
        td_ctx_free(ctx);
        return td_fail_nomem("the context buffers (reduce n_ctx, n_batch or n_seq_max)");
    }
    for (int32_t i = 0; i < p.n_ctx; i++) ctx->free_list[i] = p.n_ctx - 1 - i;
    ctx->n_free = p.n_ctx;
    td_rope_inv_freq(ctx->inv_freq, c->rotary_dim, c->rope_theta);
    *out = ctx;
    return TD_OK;
}

/* Checks the whole batch before anything is written, so that a rejected batch leaves the cache untouched. */
static td_status validate(td_ctx *ctx, const td_batch *b) {
    const td_config *c = &ctx->model->cfg;
    if (b->n > ctx->p.n_batch)
        return td_fail(TD_ERR_RANGE, "batch of %d tokens exceeds the context's n_batch %d", b->n, ctx->p.n_batch);
    if (b->n > ctx->n_free)
        return td_fail(TD_ERR_RANGE, "KV cache full: %d tokens need cells but only %d of %d are free", b->n, ctx->n_free,
                       ctx->p.n_ctx);
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
    if (n_out > ctx->n_out_max)
        return td_fail(TD_ERR_RANGE, "batch asks for %d outputs but the context was created for %d (n_outputs_max)",
                       n_out, ctx->n_out_max);
    /* positions: each sequence grows at its end, in batch order */
    for (int32_t i = 0; i < b->n; i++) {
        int32_t expect = ctx->seqs[b->seq[i]].len;
        for (int32_t j = 0; j < i; j++) expect += b->seq[j] == b->seq[i];
        if (b->pos[i] != expect)
            return td_fail(TD_ERR_INVALID_ARG, "token %d of sequence %d has position %d; the next position is %d", i,
                           b->seq[i], b->pos[i], expect);
        if (expect >= ctx->p.n_ctx)
            return td_fail(TD_ERR_RANGE, "sequence %d would exceed n_ctx %d positions", b->seq[i], ctx->p.n_ctx);
    }
    return TD_OK;
}

/* Groups the batch's tokens by sequence, keeping batch (= position) order inside each group. */
static void group_by_sequence(td_ctx *ctx) {
    int32_t n = ctx->n_tokens;
    ctx->n_groups = 0;
    for (int32_t i = 0; i < n; i++) {
        int known = 0;
        for (int32_t g = 0; g < ctx->n_groups && !known; g++) known = ctx->grp_seq[g] == ctx->tok_seq[i];
        if (!known) ctx->grp_seq[ctx->n_groups++] = ctx->tok_seq[i];
    }
    int32_t k = 0;
    for (int32_t g = 0; g < ctx->n_groups; g++) {
        ctx->grp_off[g] = k;
        for (int32_t i = 0; i < n; i++)
            if (ctx->tok_seq[i] == ctx->grp_seq[g]) ctx->grp_tok[k++] = i;
    }
    ctx->grp_off[ctx->n_groups] = k;
    /* the prefix all groups share: the same cells at the same positions, all written before this batch */
    ctx->n_pre = 0;
    if (ctx->n_groups < 2 || !ctx->pre_kv) return;
    const td_seq *s0 = &ctx->seqs[ctx->grp_seq[0]];
    int32_t pre = ctx->tok_pos[ctx->grp_tok[0]];
    for (int32_t g = 1; g < ctx->n_groups && pre > 0; g++) {
        const td_seq *s = &ctx->seqs[ctx->grp_seq[g]];
        int32_t first = ctx->tok_pos[ctx->grp_tok[ctx->grp_off[g]]], i = 0;
        int32_t lim = first < pre ? first : pre;
        while (i < lim && s->cells[i] == s0->cells[i]) i++;
        pre = i;
    }
    ctx->n_pre = pre >= TD_PRE_MIN ? pre : 0;
}

td_status td_ctx_decode(td_ctx *ctx, const td_batch *b) {
    if (!ctx || !b) return td_fail(TD_ERR_INVALID_ARG, "td_ctx_decode: NULL argument");
    td_status st = validate(ctx, b);
    if (st != TD_OK) return st;
    ctx->n_tokens = b->n;
    ctx->n_out = 0;
    for (int32_t i = 0; i < b->n; i++) {
        td_seq *s = &ctx->seqs[b->seq[i]];
        int32_t cell = ctx->free_list[--ctx->n_free];
        ctx->refcount[cell] = 1;
        s->cells[s->len++] = cell;
        ctx->tok_id[i] = b->token[i];
        ctx->tok_seq[i] = b->seq[i];
        ctx->tok_pos[i] = b->pos[i];
        ctx->tok_cell[i] = cell;
        if (b->want[i]) ctx->out_tok[ctx->n_out++] = i;
    }
    if (b->n == 0) return TD_OK;
    group_by_sequence(ctx);
    for (int32_t i = 0; i < b->n; i++) /* for every layer's queries and keys */
        td_rope_table(ctx->rope_cs + (int64_t)i * ctx->model->cfg.rotary_dim, ctx->model->cfg.rotary_dim, ctx->inv_freq,
                      ctx->tok_pos[i]);
    td_forward(ctx);
    td_eng_outputs(ctx);
    return TD_OK;
}

int32_t td_ctx_n_outputs(const td_ctx *ctx) { return ctx ? ctx->n_out : 0; }

const float *td_ctx_output(const td_ctx *ctx, int32_t i) {
    if (!ctx || i < 0 || i >= ctx->n_out) return NULL;
    int64_t w = ctx->head_rows ? ctx->n_head_rows : ctx->model->head.rows;
    return ctx->out + (int64_t)i * w;
}

td_status td_ctx_set_output_rows(td_ctx *ctx, const int32_t *rows, int32_t n) {
    if (!ctx || n < 0 || (n > 0 && !rows)) return td_fail(TD_ERR_INVALID_ARG, "td_ctx_set_output_rows: bad argument");
    const td_model *m = ctx->model;
    int32_t *mapped = n ? malloc((size_t)n * sizeof *mapped) : NULL;
    if (n && !mapped) return td_fail_nomem("output rows");
    for (int32_t i = 0; i < n; i++) {
        if (rows[i] < 0 || rows[i] >= m->cfg.n_vocab) {
            free(mapped);
            return td_fail(TD_ERR_RANGE, "output row %d is outside the vocabulary 0..%d", rows[i], m->cfg.n_vocab - 1);
        }
        mapped[i] = rows[i];
        if (m->pruned) { /* a pruned head holds only the slot map's tokens: token id -> head row */
            mapped[i] = -1;
            for (int32_t k = 0; k < m->n_keep; k++)
                if (m->keep[k] == rows[i]) mapped[i] = k;
            if (mapped[i] < 0) {
                free(mapped);
                return td_fail(TD_ERR_RANGE, "token %d is not one of the %d rows the pruned head kept", rows[i], m->n_keep);
            }
        }
    }
    free(ctx->head_rows);
    ctx->head_rows = mapped;
    ctx->n_head_rows = n;
    return TD_OK;
}

int32_t td_ctx_seq_len(const td_ctx *ctx, int32_t seq) {
    if (!ctx || seq < 0 || seq >= ctx->p.n_seq_max) return 0;
    return ctx->seqs[seq].len;
}

int32_t td_ctx_n_free_rows(const td_ctx *ctx) { return ctx ? ctx->n_free : 0; }

int64_t td_ctx_head_macs(const td_ctx *ctx) { return ctx ? ctx->head_macs : 0; }

td_status td_ctx_memory(const td_model *model, const td_ctx_params *params, int64_t *bytes) {
    if (!model || !params || !bytes) return td_fail(TD_ERR_INVALID_ARG, "td_ctx_memory: NULL argument");
    const td_config *c = &model->cfg;
    const td_ctx_params *p = params;
    int64_t B = p->n_batch, d = c->n_embd, n_out = p->n_outputs_max < 1 ? 1 : p->n_outputs_max;
    int64_t q_rows = (int64_t)c->n_head * c->head_dim * (c->attn_output_gate ? 2 : 1);
    int64_t kv_dim = (int64_t)c->n_head_kv * c->head_dim, n_attn = 0, n_dn = 0;
    for (int i = 0; i < c->n_layer; i++) {
        if (model->layers[i].kind == TD_LAYER_ATTENTION) n_attn++;
        else n_dn++;
    }
    int64_t f = 2 * n_attn * p->n_ctx * kv_dim / (p->kv_f16 ? 2 : 1);                 /* KV cache */
    f += B * (2 * d + q_rows + 2 * kv_dim + (int64_t)c->n_head * c->head_dim + 2 * c->n_ff); /* activations */
    f += (int64_t)p->n_threads *
         td_attn_rows_scratch(TD_ATTN_TOKENS * (c->n_head / c->n_head_kv), p->n_ctx, c->head_dim, p->kv_f16); /* scores */
    f += n_out * (d + c->n_vocab);                                                      /* outputs */
    if (p->n_seq_max > 1) f += 2 * p->n_ctx * kv_dim;                                  /* shared prefix rows */
    int64_t ints = 2 * (int64_t)p->n_ctx + (int64_t)p->n_seq_max * p->n_ctx + 8 * B;    /* cells, tables */
    if (n_dn) {
        int64_t key_dim = (int64_t)c->lin_n_k_heads * c->lin_k_dim, value_dim = (int64_t)c->lin_n_v_heads * c->lin_v_dim;
        int64_t conv_dim = 2 * key_dim + value_dim;
        int64_t per_layer = (int64_t)(c->lin_conv_kernel - 1) * conv_dim + (int64_t)c->lin_n_v_heads * c->lin_k_dim * c->lin_v_dim;
        f += (int64_t)p->n_seq_max * n_dn * per_layer;                                  /* DeltaNet states */
        f += B * (2 * conv_dim + 2 * value_dim + 2 * c->lin_n_v_heads);
    }
    *bytes = 4 * (f + ints);
    return TD_OK;
}

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
    if (src == dst) return td_fail(TD_ERR_INVALID_ARG, "td_ctx_seq_fork: source and destination are both %d", src);
    if (ctx->seqs[dst].len != 0)
        return td_fail(TD_ERR_STATE, "td_ctx_seq_fork: destination sequence %d is not empty", dst);
    if (n_pos < 0 || n_pos > ctx->seqs[src].len)
        return td_fail(TD_ERR_RANGE, "td_ctx_seq_fork: sequence %d has %d positions, cannot share %d", src,
                       ctx->seqs[src].len, n_pos);
    if (ctx->hybrid && n_pos != ctx->seqs[src].len)
        return td_fail(TD_ERR_STATE,
                       "td_ctx_seq_fork: sequence %d is at position %d; a hybrid (DeltaNet) model can only fork at a "
                       "sequence's end (keep a snapshot by forking into a spare sequence at position %d)",
                       src, ctx->seqs[src].len, n_pos);
    if (ctx->hybrid) /* the recurrent state is constant-size: copied, not shared */
        memcpy(ctx->dn_state + (int64_t)dst * ctx->dn_state_floats, ctx->dn_state + (int64_t)src * ctx->dn_state_floats,
               (size_t)ctx->dn_state_floats * sizeof(float));
    for (int32_t i = 0; i < n_pos; i++) {
        int32_t cell = ctx->seqs[src].cells[i];
        ctx->seqs[dst].cells[i] = cell;
        ctx->refcount[cell]++;
    }
    ctx->seqs[dst].len = n_pos;
    return TD_OK;
}

td_status td_ctx_seq_truncate(td_ctx *ctx, int32_t seq, int32_t n_pos) {
    td_status st = check_seq(ctx, seq, "td_ctx_seq_truncate");
    if (st != TD_OK) return st;
    td_seq *s = &ctx->seqs[seq];
    if (n_pos < 0 || n_pos > s->len)
        return td_fail(TD_ERR_RANGE, "td_ctx_seq_truncate: sequence %d has %d positions, cannot keep %d", seq, s->len,
                       n_pos);
    if (ctx->hybrid && n_pos != 0 && n_pos != s->len)
        return td_fail(TD_ERR_STATE,
                       "td_ctx_seq_truncate: DeltaNet state cannot be rolled back to position %d of sequence %d; "
                       "keep a snapshot (a fork at that position) instead",
                       n_pos, seq);
    if (ctx->hybrid && n_pos == 0)
        memset(ctx->dn_state + (int64_t)seq * ctx->dn_state_floats, 0, (size_t)ctx->dn_state_floats * sizeof(float));
    for (int32_t i = n_pos; i < s->len; i++) {
        int32_t cell = s->cells[i];
        if (--ctx->refcount[cell] == 0) ctx->free_list[ctx->n_free++] = cell;
    }
    s->len = n_pos;
    return TD_OK;
}
