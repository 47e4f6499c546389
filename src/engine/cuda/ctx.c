/* A CUDA context's device part: its stream, the pass mirrored on the device, the sequences' cell tables, the
 * outputs, and the DeltaNet state copies that forks and truncations need (the whole state of a sequence: with
 * TD_CUDA_DN=chunk the chunked kernel's, all zeros = empty). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/cuda/dev.h"
#include "util/alloc.h"
#include "util/error.h"

td_status td_dev_fail(const char *what) { return td_fail(TD_ERR_DEVICE, "%s: %s", what, td_cu_error()); }

td_status td_eng_dev_probe(td_device device, char *desc, size_t desc_len) {
    (void)device;
    char name[256];
    int64_t bytes = 0;
    if (td_cu_probe(name, sizeof name, &bytes) != 0) {
        if (desc && desc_len) snprintf(desc, desc_len, "none");
        return td_fail(TD_ERR_UNSUPPORTED, "no usable CUDA device: %s", td_cu_error());
    }
    if (desc && desc_len) snprintf(desc, desc_len, "%s, %.0f GiB", name, (double)bytes / (1024.0 * 1024.0 * 1024.0));
    return TD_OK;
}

td_status td_eng_dev_free_bytes(int64_t *free_bytes) {
    *free_bytes = 0;
    td_status st = td_eng_dev_probe(TD_DEVICE_CUDA, NULL, 0);
    if (st != TD_OK) return st;
    if (td_cu_mem_free(free_bytes) != 0) return td_dev_fail("reading the GPU's free memory");
    return TD_OK;
}

void *td_eng_dev_alloc(size_t bytes, int zero) {
    void *p = td_cu_malloc(bytes);
    if (p && zero && (td_cu_zero(p, bytes, NULL) != 0 || td_cu_sync(NULL) != 0)) {
        td_cu_free(p);
        return NULL;
    }
    return p;
}

void td_eng_dev_free(void *p) { td_cu_free(p); }

int64_t td_eng_dev_dn_state_floats(const td_config *c) {
    /* read by each context's plan (td_cu_deltanet reads "old" and "reg" itself) */
    const char *mode = getenv("TD_CUDA_DN");
    if (!mode || strcmp(mode, "chunk") != 0) return 0;
    return td_cu_deltanet_chunk_state_floats(c->lin_n_v_heads, c->lin_k_dim, c->lin_v_dim);
}

int td_eng_dev_kv_bf16(const td_config *c, const td_ctx_params *p) {
    const char *e = getenv("TD_CUDA_KV_BF16");
    return !(e && strcmp(e, "0") == 0) && p->precision == TD_PRECISION_BF16 && !p->kv_f16 &&
           td_cu_attention_tc(c->head_dim);
}

/* The device part's own buffers, besides the plan's: one allocation each, freed by td_eng_dev_close. */
static void *dev_buf(td_status *st, size_t bytes, const char *what) {
    if (*st != TD_OK) return NULL;
    void *p = td_cu_malloc(bytes ? bytes : 1);
    if (!p) *st = td_fail(TD_ERR_NOMEM, "%s on the GPU (%zu bytes): %s", what, bytes, td_cu_error());
    return p;
}

td_status td_eng_dev_open(td_ctx *ctx) {
    const td_model *m = ctx->model;
    const td_ctx_params *p = &ctx->p;
    td_dev_ctx *dv = td_calloc(1, sizeof *dv);
    if (!dv) return td_fail_nomem("a CUDA context");
    ctx->dev = dv;
    td_status st = td_dev_weights_get(m, &dv->w);
    if (st != TD_OK) return st;
    if (!(dv->stream = td_cu_stream_new())) return td_dev_fail("creating a CUDA stream");
    const char *graphs = getenv("TD_CUDA_GRAPHS");
    dv->graphs = !(graphs && strcmp(graphs, "0") == 0);
    const char *glu = getenv("TD_CUDA_GLU_FUSED"); /* on unless "0" (part 9: +4-6% decide, prefill, decode) */
    dv->glu_fused = !(glu && strcmp(glu, "0") == 0);
    const int64_t B = p->n_batch, cells = (int64_t)p->n_seq_max * p->n_ctx;
    const size_t rope_bytes = (size_t)m->cfg.n_rope * (size_t)B * (size_t)m->cfg.rotary_dim * sizeof(float);
    /* the fault word (2), 8 arrays of n_batch, grp_off's extra one, the attention tiles [n_batch][2], a run list of
     * up to n_batch groups [3], and room for runs of cell tables (all of them, up to 1 Mi ints: a pass whose changed
     * tables exceed it sends the rest run by run) */
    dv->n_ints = TD_DEV_FIXED_INTS(B) + 3 * B + (cells < (1 << 20) ? cells : (1 << 20));
    if (ctx->dn.dev_chunk) dv->n_ints += TD_DEV_DNC_INTS(B); /* the chunked DeltaNet's tables */
    dv->h_ints = td_cu_host_alloc((size_t)dv->n_ints * sizeof(int32_t));
    dv->h_rope = td_cu_host_alloc(rope_bytes ? rope_bytes : 1);
    if (!dv->h_ints || !dv->h_rope) { /* no locked pages to be had: ordinary memory (copies then wait for the host) */
        td_cu_host_free(dv->h_ints);
        td_cu_host_free(dv->h_rope);
        dv->h_pageable = 1;
        dv->h_ints = td_malloc((size_t)dv->n_ints * sizeof(int32_t));
        dv->h_rope = td_malloc(rope_bytes ? rope_bytes : 1);
    }
    dv->cells_on_dev = td_malloc((size_t)cells * sizeof(int32_t));
    dv->head_rows_on_dev = td_malloc((size_t)m->head.rows * sizeof(int32_t));
    dv->n_head_rows_on_dev = -1;
    if (!dv->h_ints || !dv->h_rope || !dv->cells_on_dev || !dv->head_rows_on_dev)
        return td_fail_nomem("a CUDA context's staging buffers");
    memset(dv->cells_on_dev, 0xff, (size_t)cells * sizeof(int32_t));
    dv->ints = dev_buf(&st, (size_t)dv->n_ints * sizeof(int32_t), "the pass's indices");
    dv->fault = (uint64_t *)dv->ints; /* td_cu_malloc blocks are 256-byte aligned */
    dv->head_rows = dev_buf(&st, (size_t)m->head.rows * sizeof(int32_t), "the head's rows");
    dv->rope_cs = dev_buf(&st, rope_bytes, "the RoPE tables");
    dv->cells = dev_buf(&st, (size_t)cells * sizeof(int32_t), "the cell tables");
    dv->out = dev_buf(&st, (size_t)p->n_outputs_max * (size_t)m->head.rows * sizeof(float), "the outputs");
    if (ctx->dn.dev_chunk) { /* TD_CUDA_DN=chunk: the launch sets' scratch and host tables */
        dv->dnc_scratch_floats =
            td_cu_deltanet_chunk_scratch_floats(B, TD_CU_DNC_CHUNK - 1, m->cfg.lin_n_v_heads, m->cfg.lin_k_dim,
                                                m->cfg.lin_v_dim);
        dv->dnc_scratch = dev_buf(&st, (size_t)dv->dnc_scratch_floats * sizeof(float), "the DeltaNet chunk scratch");
        dv->dnc_sets = td_malloc((size_t)B * sizeof *dv->dnc_sets);
        dv->dnc_first = td_malloc((size_t)(B + 1) * sizeof(int32_t));
        dv->dnc_off = td_malloc((size_t)(B + 1) * sizeof(int32_t));
        dv->dnc_pos0 = td_malloc((size_t)B * sizeof(int64_t));
        if (st == TD_OK && (!dv->dnc_sets || !dv->dnc_first || !dv->dnc_off || !dv->dnc_pos0))
            st = td_fail_nomem("a CUDA context's DeltaNet chunk tables");
    }
    return st; /* (the attention split's scratch: attn_scratch_fit, per pass) */
}

/* What attn_scratch_fit gives a pass of n tokens whose rows see up to max_n positions (the chunk states when they are
 * at most 2^26 floats: the split by chunks, below) */
static int64_t attn_scratch_need(const td_config *c, int64_t n, int64_t max_n, int64_t n_ctx) {
    int64_t mx = (max_n + 63) / 64 * 64; /* forward.c's grid rounds max_n up so */
    if (mx > n_ctx) mx = n_ctx;
    int64_t need = mx > 512 ? td_cu_attn_scratch_floats(n, c->n_head, mx, c->head_dim) : 0;
    const int64_t chunks = n * c->n_head * ((mx + 63) / 64) * (c->head_dim + 2);
    return chunks > need && chunks <= ((int64_t)1 << 26) ? chunks : need;
}

/* Whether tiles of qt tokens give the pass's attention launch blocks enough (attention.cu, at_prepare): a (tile, KV
 * head) block per super-chunk of 512 positions, 256 of them. Or, for tiles that the row-tile kernel takes
 * (td_cu_attn_tile_tokens: 16 rows of the query heads a KV head serves, as the kernels pack them; fewer past head dim
 * 256) where the scratch holds the chunk states, a block per chunk of 64 positions, 128 of them: a 45-token criterion
 * over a 256-token evidence gets 6 tiles of 8 tokens x 8 KV heads x 5 chunks (28 us a layer on the H100) instead of
 * 45 one-token tiles x 8 KV heads, each walking the 5 chunks with 2 of its 16 rows (53 us). A 256-token evidence
 * keeps 8-token tiles walking their chunks (46 us; 62 with 32-token tiles split by chunks). */
static int attn_tiles_enough(td_ctx *ctx, int64_t qt, int64_t n) {
    const td_config *c = &ctx->model->cfg;
    const td_pass *ps = &ctx->pass;
    const int64_t max_n = ctx->dev->attn.max_n, kv = c->n_head_kv > 0 ? c->n_head_kv : 1;
    int64_t tiles = 0;
    for (int32_t g = 0; g < ps->n_groups; g++) tiles += (ps->grp_off[g + 1] - ps->grp_off[g] + qt - 1) / qt;
    const int64_t per_super = tiles * kv * ((max_n + 511) / 512), chunks = (max_n + 63) / 64;
    if (per_super >= 256) return 1;
    const int split = max_n > 64 &&
                      attn_scratch_need(c, n, max_n, ctx->p.n_ctx) >= n * c->n_head * chunks * (c->head_dim + 2);
    return split && qt <= td_cu_attn_tile_tokens(c->n_head, kv, c->head_dim) && tiles * kv * chunks >= 128;
}

/* The attention split's scratch for this pass (cuda.h): what its rows past one super-chunk need, and what lets a small
 * launch split by chunks when that is at most 2^26 floats. Sized by the pass's own positions, not by n_ctx: a
 * context of many short sequences (a decide pass of 16 evidences x 144 criteria: n_batch ~100k, n_ctx ~110k) would
 * otherwise ask for n_batch x ceil(n_ctx / 512) row states (~190 GB) and fail. Grown, never shrunk, before any of the
 * pass's launches is recorded; a growth drops the recorded graph, which holds the old address. The kernel's paths
 * give the same bits whichever the scratch allows (cuda.h). */
static td_status attn_scratch_fit(td_ctx *ctx, int64_t n) {
    td_dev_ctx *dv = ctx->dev;
    const td_config *c = &ctx->model->cfg;
    if (c->n_head <= 0) return TD_OK;
    const int64_t need = attn_scratch_need(c, n, dv->attn.max_n, ctx->p.n_ctx);
    if (need <= dv->attn.scratch_floats) return TD_OK;
    td_dev_graph_free(ctx);
    td_cu_free(dv->attn.scratch);
    dv->attn.scratch_floats = 0;
    td_status st = TD_OK;
    dv->attn.scratch = dev_buf(&st, (size_t)need * sizeof(float), "the attention scratch");
    if (st == TD_OK) dv->attn.scratch_floats = need;
    return st;
}

void td_eng_dev_close(td_ctx *ctx) {
    td_dev_ctx *dv = ctx->dev;
    if (!dv) return;
    if (dv->stream) td_cu_sync(dv->stream);
    td_dev_graph_free(ctx);
    td_cu_free(dv->ints);
    td_cu_free(dv->head_rows);
    td_cu_free(dv->rope_cs);
    td_cu_free(dv->cells);
    td_cu_free(dv->out);
    td_cu_free(dv->attn.scratch);
    td_cu_free(dv->dnc_scratch);
    td_cu_free(dv->mm_scratch);
    td_cu_free(dv->norm_xb);
    td_free(dv->dnc_sets);
    td_free(dv->dnc_first);
    td_free(dv->dnc_off);
    td_free(dv->dnc_pos0);
    if (dv->stream) td_cu_stream_free(dv->stream);
    if (dv->h_pageable) {
        td_free(dv->h_ints);
        td_free(dv->h_rope);
    } else {
        td_cu_host_free(dv->h_ints);
        td_cu_host_free(dv->h_rope);
    }
    td_free(dv->cells_on_dev);
    td_free(dv->head_rows_on_dev);
    td_free(dv);
    ctx->dev = NULL;
}

/* Lays n int32 of src at *at in the staging block and points *dev at the same offset of the device block. */
static void stage(td_dev_ctx *dv, int64_t *at, const int32_t *src, int64_t n, int32_t **dev) {
    if (n > 0) memcpy(dv->h_ints + *at, src, (size_t)n * sizeof(int32_t));
    *dev = dv->ints + *at;
    *at += n;
}

/* The chunked DeltaNet's launch sets (TD_CUDA_DN=chunk): the pass's groups cut into runs whose scratch fits the
 * context's (a one-token group needs none: a decode pass is one set), each run's plan made on the host and its table
 * staged at *at. Returns 0, or -1 when a table would not fit the block (it always does: TD_DEV_DNC_INTS). */
static int stage_dnc(td_ctx *ctx, int64_t *at) {
    td_dev_ctx *dv = ctx->dev;
    const td_pass *ps = &ctx->pass;
    const td_config *c = &ctx->model->cfg;
    const int64_t Hv = c->lin_n_v_heads, dk = c->lin_k_dim, dvd = c->lin_v_dim;
    dv->n_dnc_sets = 0;
    dv->dnc_first[0] = 0;
    for (int32_t g0 = 0; g0 < ps->n_groups;) {
        int32_t g1 = g0;
        int64_t need = 0;
        for (; g1 < ps->n_groups; g1++) { /* the groups that fit beside the run's first */
            int32_t n = ps->grp_off[g1 + 1] - ps->grp_off[g1];
            int64_t pos0 = ps->tok_pos[ps->grp_tok[ps->grp_off[g1]]];
            int64_t more = n > 1 ? td_cu_deltanet_chunk_scratch_floats(n, pos0, Hv, dk, dvd) : 0;
            if (g1 > g0 && need + more > dv->dnc_scratch_floats) break;
            need += more;
        }
        for (int32_t g = g0; g <= g1; g++) dv->dnc_off[g - g0] = ps->grp_off[g] - ps->grp_off[g0];
        for (int32_t g = g0; g < g1; g++) dv->dnc_pos0[g - g0] = ps->tok_pos[ps->grp_tok[ps->grp_off[g]]];
        td_cu_dnc_plan *pl = &dv->dnc_sets[dv->n_dnc_sets];
        td_cu_deltanet_chunk_plan(NULL, pl, dv->dnc_off, ps->grp_seq + g0, dv->dnc_pos0, g1 - g0, Hv, dk, dvd);
        if (*at + pl->n_ints > dv->n_ints) return -1;
        td_cu_deltanet_chunk_plan(dv->h_ints + *at, pl, dv->dnc_off, ps->grp_seq + g0, dv->dnc_pos0, g1 - g0, Hv, dk,
                                  dvd);
        pl->tab = dv->ints + *at;
        *at += pl->n_ints;
        dv->dnc_first[++dv->n_dnc_sets] = g1;
        g0 = g1;
    }
    return 0;
}

/* The changed tail of each of the pass's sequences' cell tables, packed at *at as runs (list, then data) for one
 * scatter on the device; a run that does not fit the block (or whose offset would not fit an int32) is sent alone.
 * Returns the runs packed, -1 on a failed copy. */
static int64_t stage_cells(td_ctx *ctx, int64_t *at, int32_t **runs_dev) {
    td_dev_ctx *dv = ctx->dev;
    const td_pass *ps = &ctx->pass;
    const int64_t n_ctx = ctx->p.n_ctx;
    int32_t *runs = dv->h_ints + *at;
    int64_t n_runs = 0, data = *at + 3 * (int64_t)ps->n_groups;
    *runs_dev = dv->ints + *at;
    for (int32_t g = 0; g < ps->n_groups; g++) { /* each sequence's table, from its first changed position */
        int32_t seq = ps->grp_seq[g], len = ctx->kv.seqs[seq].len;
        const int32_t *cells = ctx->kv.seqs[seq].cells;
        int32_t *known = dv->cells_on_dev + (int64_t)seq * n_ctx, i = 0;
        while (i < len && known[i] == cells[i]) i++;
        if (i == len) continue;
        int64_t to = (int64_t)seq * n_ctx + i, count = len - i;
        if (data + count <= dv->n_ints && to + count <= INT32_MAX) {
            memcpy(dv->h_ints + data, cells + i, (size_t)count * sizeof(int32_t));
            runs[3 * n_runs] = (int32_t)to, runs[3 * n_runs + 1] = (int32_t)data, runs[3 * n_runs + 2] = (int32_t)count;
            n_runs++;
            data += count;
        } else if (td_cu_h2d(dv->cells + to, cells + i, (size_t)count * sizeof(int32_t), dv->stream) != 0) {
            return -1;
        }
        memcpy(known + i, cells + i, (size_t)count * sizeof(int32_t));
    }
    *at = data;
    return n_runs;
}

td_status td_dev_upload_pass(td_ctx *ctx) {
    td_dev_ctx *dv = ctx->dev;
    const td_pass *ps = &ctx->pass;
    int64_t n = ps->n_tokens, at = 2;
    /* the staging is rewritten below: the copies of the previous pass out of it must have run (a pass ends with a
     * read that waits for its stream, but one that failed part-way may have left them queued) */
    if (td_cu_sync(dv->stream) != 0) return td_dev_fail("finishing the previous pass");
    dv->h_ints[0] = dv->h_ints[1] = -1; /* the fault word: UINT64_MAX, none */
    stage(dv, &at, ps->tok_id, n, &dv->tok_id);
    stage(dv, &at, ps->tok_seq, n, &dv->tok_seq);
    stage(dv, &at, ps->tok_pos, n, &dv->tok_pos);
    stage(dv, &at, ps->tok_cell, n, &dv->tok_cell);
    stage(dv, &at, ps->out_tok, ps->n_out, &dv->out_tok);
    stage(dv, &at, ps->grp_seq, ps->n_groups, &dv->grp_seq);
    stage(dv, &at, ps->grp_tok, n, &dv->grp_tok);
    stage(dv, &at, ps->grp_off, ps->n_groups + 1, &dv->grp_off);
    dv->attn.max_n = 1;
    for (int64_t t = 0; t < n; t++)
        if (ps->tok_pos[t] + 1 > dv->attn.max_n) dv->attn.max_n = ps->tok_pos[t] + 1;
    /* attention tiles: a group's tokens cut every qt; fewer tokens per tile while the launch would have too few
     * blocks (a small pass: more blocks beat more rows per staged key; no bit depends on the tiles) */
    const td_config *c = &ctx->model->cfg;
    const int bf16 = ctx->p.precision == TD_PRECISION_BF16; /* td_cu_attention_bf16's tiles (64 rows where it can) */
    int64_t qt = c->n_head <= 0 ? 1
                 : bf16    ? td_cu_attn_tile_tokens_bf16(c->n_head, c->n_head_kv, c->head_dim)
                           : td_cu_attn_tile_tokens(c->n_head, c->n_head_kv, c->head_dim);
    /* a pass of short groups (a decide pass's criteria) that 96-row tiles hold whole where 64-row ones cut them */
    const int64_t qw = bf16 && c->n_head > 0 ? td_cu_attn_whole_tokens_bf16(c->n_head, c->n_head_kv, c->head_dim) : 0;
    if (qw > qt) {
        int32_t longest = 0;
        for (int32_t g = 0; g < ps->n_groups; g++)
            if (ps->grp_off[g + 1] - ps->grp_off[g] > longest) longest = ps->grp_off[g + 1] - ps->grp_off[g];
        if (longest > qt && longest <= qw && attn_tiles_enough(ctx, qw, n)) qt = qw;
    }
    while (qt > 1 && !attn_tiles_enough(ctx, qt, n)) qt = (qt + 1) / 2;
    dv->attn.tok = dv->grp_tok;
    dv->attn.tile = dv->ints + at;
    dv->attn.n_tiles = td_cu_attn_tiles(dv->h_ints + at, ps->grp_off, ps->n_groups, qt);
    dv->attn.tile_tokens = qt;
    at += 2 * dv->attn.n_tiles;
    td_status sst = attn_scratch_fit(ctx, n);
    if (sst != TD_OK) return sst;
    if (ctx->dn.dev_chunk && stage_dnc(ctx, &at) != 0)
        return td_fail(TD_ERR_DEVICE, "the chunked DeltaNet's tables exceed the pass's block");
    int32_t *runs = NULL;
    int64_t n_runs = stage_cells(ctx, &at, &runs);
    if (n_runs < 0) return td_dev_fail("sending a cell table to the GPU");
    if (td_cu_h2d(dv->ints, dv->h_ints, (size_t)at * sizeof(int32_t), dv->stream) != 0)
        return td_dev_fail("sending a pass to the GPU");
    if (td_cu_scatter_ints(dv->cells, dv->ints, runs, n_runs, dv->stream) != 0)
        return td_dev_fail("placing the cell tables on the GPU");
    const int64_t rot = ctx->model->cfg.rotary_dim, set_floats = (int64_t)ctx->p.n_batch * rot;
    const size_t set_bytes = (size_t)n * (size_t)rot * sizeof(float);
    for (int set = 0; set < ctx->model->cfg.n_rope; set++) { /* each RoPE set's tables, n_batch rows apart */
        memcpy(dv->h_rope + set * set_floats, ps->rope_cs + set * set_floats, set_bytes);
        if (td_cu_h2d(dv->rope_cs + set * set_floats, dv->h_rope + set * set_floats, set_bytes, dv->stream) != 0)
            return td_dev_fail("sending a pass to the GPU");
    }
    if (ctx->head_rows && (dv->n_head_rows_on_dev != ctx->n_head_rows ||
                           memcmp(dv->head_rows_on_dev, ctx->head_rows, (size_t)ctx->n_head_rows * sizeof(int32_t)))) {
        dv->n_head_rows_on_dev = -1; /* unknown until the copy is queued */
        if (td_cu_h2d(dv->head_rows, ctx->head_rows, (size_t)ctx->n_head_rows * sizeof(int32_t), dv->stream) != 0)
            return td_dev_fail("sending the head's rows to the GPU");
        memcpy(dv->head_rows_on_dev, ctx->head_rows, (size_t)ctx->n_head_rows * sizeof(int32_t));
        dv->n_head_rows_on_dev = ctx->n_head_rows;
    }
    return TD_OK;
}

td_status td_eng_dev_state_copy(td_ctx *ctx, int32_t dst, int32_t src) {
    size_t bytes = (size_t)ctx->dn.floats * sizeof(float);
    if (td_cu_d2d(ctx->dn.data + (int64_t)dst * ctx->dn.floats, ctx->dn.data + (int64_t)src * ctx->dn.floats, bytes,
                  ctx->dev->stream) != 0)
        return td_dev_fail("copying a DeltaNet state on the GPU");
    return TD_OK;
}

td_status td_eng_dev_state_zero(td_ctx *ctx, int32_t seq) {
    if (td_cu_zero(ctx->dn.data + (int64_t)seq * ctx->dn.floats, (size_t)ctx->dn.floats * sizeof(float),
                   ctx->dev->stream) != 0)
        return td_dev_fail("clearing a DeltaNet state on the GPU");
    return TD_OK;
}
