/* The forward pass on the GPU: forward.c and block_*.c step for step, each step one kernel of src/kernels/cuda/ on
 * the context's stream. The pass's indices go in (td_dev_upload_pass); the outputs come out (act.out) with one word
 * that says whether, and where first, a row went NaN or infinite: the same checks as the CPU's, made on the device
 * and read once at the end of the pass instead of after every block.
 *   x = embed[token]                                        [T, d]
 *   for each layer: x += Mixer(RMSNorm_in(x)); x += MLP(RMSNorm_post(x))   (the last MLP on the output rows only)
 *   logits = head(RMSNorm_final(x))                         only the output rows, only the asked-for head rows
 * The DeltaNet recurrence always runs token by token here (td_ctx_params.deltanet_chunked is a CPU option). */
#include <math.h>

#include "engine/cuda/dev.h"
#include "util/error.h"

/* A kernel launch that failed: the pass stops with the CUDA runtime's words. */
#define LAUNCH(call, what)                                                                                       \
    do {                                                                                                         \
        if ((call) != 0) return td_dev_fail(what);                                                               \
    } while (0)

/* The fault word's step codes: 0 the embedding, then per layer its mixer and its MLP, then the head. */
static uint32_t code_mixer(int il) { return 1u + 2u * (uint32_t)il; }
static uint32_t code_mlp(int il) { return 2u + 2u * (uint32_t)il; }

typedef struct dev_pass {
    td_ctx *ctx;
    const td_config *c;
    const td_dev_weights *w;
    void *s;                /* the stream */
    int64_t T;              /* rows of the activations: tokens, then the output tokens */
    const int32_t *row_tok; /* device: the batch token of each row (NULL: row = token) */
    int bf16;               /* products take bf16-rounded inputs */
} dev_pass;

static int matmul(const dev_pass *p, const td_cu_mat *w, const float *x, int64_t ldx, float *y, int64_t n_out) {
    return td_cu_matmul(y, n_out, x, ldx, p->T, w, NULL, n_out, p->bf16, p->s);
}

/* xb = RMSNorm(x) * w over the rows */
static int norm_in(const dev_pass *p, const float *w) {
    const td_config *c = p->c;
    td_acts *a = &p->ctx->act;
    return td_cu_rmsnorm(a->xb, a->x, w, p->T, 1, c->n_embd, 0, c->n_embd, c->rms_eps, c->zero_centred_norms, p->s);
}

static td_status block_attention(const dev_pass *p, int il, const td_dev_layer *ly) {
    td_ctx *ctx = p->ctx;
    const td_config *c = p->c;
    td_acts *x = &ctx->act;
    const td_dev_ctx *dv = ctx->dev;
    const int gated = c->attn_output_gate, zc = c->zero_centred_norms;
    const int64_t T = p->T, hd = c->head_dim, kv_dim = ctx->kv.dim, q_head = hd * (gated ? 2 : 1);
    const int64_t q_rows = (int64_t)c->n_head * q_head, att_dim = (int64_t)c->n_head * hd, d = c->n_embd;
    const int64_t Hq = c->n_head, Hkv = c->n_head_kv, rot = c->rotary_dim;

    LAUNCH(norm_in(p, ly->attn_norm), "attention: input norm");                   /* xb  [T, d] */
    LAUNCH(matmul(p, &ly->wq, x->xb, d, x->q, q_rows), "attention: q_proj");      /* q   [T, Hq, hd (+ gate)] */
    LAUNCH(matmul(p, &ly->wk, x->xb, d, x->k, kv_dim), "attention: k_proj");      /* k   [T, Hkv, hd] */
    LAUNCH(matmul(p, &ly->wv, x->xb, d, x->v, kv_dim), "attention: v_proj");      /* v   [T, Hkv, hd] */
    LAUNCH(td_cu_rmsnorm(x->q, x->q, ly->q_norm, T * Hq, Hq, q_rows, q_head, hd, c->rms_eps, zc, p->s),
           "attention: q norm");
    LAUNCH(td_cu_rmsnorm(x->k, x->k, ly->k_norm, T * Hkv, Hkv, kv_dim, hd, hd, c->rms_eps, zc, p->s),
           "attention: k norm");
    LAUNCH(td_cu_rope(x->q, dv->rope_cs, T, Hq, q_rows, q_head, rot, p->s), "attention: q RoPE");
    LAUNCH(td_cu_rope(x->k, dv->rope_cs, T, Hkv, kv_dim, hd, rot, p->s), "attention: k RoPE");
    LAUNCH(td_cu_store_rows(ctx->kv.k[il], ctx->kv.f16, x->k, kv_dim, dv->tok_cell, T, kv_dim, p->s),
           "attention: caching keys");                                            /* each token's cell */
    LAUNCH(td_cu_store_rows(ctx->kv.v[il], ctx->kv.f16, x->v, kv_dim, dv->tok_cell, T, kv_dim, p->s),
           "attention: caching values");
    LAUNCH(td_cu_attention(x->att, att_dim, x->q, q_rows, q_head, ctx->kv.k[il], ctx->kv.v[il], ctx->kv.f16, kv_dim,
                           dv->cells, ctx->p.n_ctx, dv->tok_seq, dv->tok_pos, T, Hq, Hkv, hd,
                           (float)(1.0 / sqrt((double)hd)), p->s),
           "attention");                                                          /* att [T, Hq * hd] */
    if (gated)
        LAUNCH(td_cu_sigmoid_gate(x->att, att_dim, x->q + hd, q_rows, q_head, T, Hq, hd, p->s), "attention: gate");
    LAUNCH(matmul(p, &ly->wo, x->att, att_dim, x->xb, d), "attention: o_proj");   /* xb  [T, d] */
    return TD_OK;
}

static td_status block_deltanet(const dev_pass *p, int il, const td_dev_layer *ly) {
    td_ctx *ctx = p->ctx;
    const td_config *c = p->c;
    td_acts *x = &ctx->act;
    const td_dev_ctx *dv = ctx->dev;
    const int64_t d = c->n_embd, Hv = c->lin_n_v_heads, conv_dim = ctx->dn.conv_dim, K = c->lin_conv_kernel;
    const int64_t value_dim = Hv * c->lin_v_dim;
    float *conv_state = ctx->dn.data + ctx->dn.layer_off[il];
    float *rec_state = conv_state + (K - 1) * conv_dim;
    td_cu_groups g = {dv->grp_seq, dv->grp_off, dv->grp_tok, ctx->pass.n_groups};

    LAUNCH(norm_in(p, ly->attn_norm), "DeltaNet: input norm");                        /* xb   [T, d] */
    LAUNCH(matmul(p, &ly->in_qkv, x->xb, d, x->dn_qkv, conv_dim), "DeltaNet: in_proj_qkv"); /* [T, conv_dim] */
    LAUNCH(matmul(p, &ly->in_z, x->xb, d, x->dn_z, value_dim), "DeltaNet: in_proj_z");  /* z [T, Hv, dv] */
    LAUNCH(matmul(p, &ly->in_b, x->xb, d, x->dn_b, Hv), "DeltaNet: in_proj_b");         /* b [T, Hv] */
    LAUNCH(matmul(p, &ly->in_a, x->xb, d, x->dn_a, Hv), "DeltaNet: in_proj_a");         /* a [T, Hv] */
    LAUNCH(td_cu_conv(x->dn_conv, x->dn_qkv, conv_state, ctx->dn.floats, ly->conv_w, K, conv_dim, &g, p->s),
           "DeltaNet: convolution");                                                     /* conv [T, conv_dim] */
    LAUNCH(td_cu_deltanet(x->dn_core, x->dn_conv, conv_dim, x->dn_z, x->dn_b, x->dn_a, ly->a_log, ly->dt_bias,
                          ly->norm_w, rec_state, ctx->dn.floats, c->lin_n_k_heads, Hv, c->lin_k_dim, c->lin_v_dim,
                          c->rms_eps, &g, p->s),
           "DeltaNet: recurrence");                                                      /* core [T, Hv, dv] */
    LAUNCH(matmul(p, &ly->out, x->dn_core, value_dim, x->xb, d), "DeltaNet: out_proj"); /* xb   [T, d] */
    return TD_OK;
}

static td_status block_mlp(const dev_pass *p, const td_dev_layer *ly) {
    const td_config *c = p->c;
    td_acts *x = &p->ctx->act;
    const int64_t d = c->n_embd, ff = c->n_ff;
    LAUNCH(td_cu_rmsnorm(x->xb, x->x, ly->ffn_norm, p->T, 1, d, 0, d, c->rms_eps, c->zero_centred_norms, p->s),
           "MLP: input norm");                                                    /* xb   [T, d] */
    LAUNCH(matmul(p, &ly->gate, x->xb, d, x->ff_g, ff), "MLP: gate_proj");        /* gate [T, ff] */
    LAUNCH(matmul(p, &ly->up, x->xb, d, x->ff_u, ff), "MLP: up_proj");            /* up   [T, ff] */
    LAUNCH(td_cu_silu_mul(x->ff_g, x->ff_u, p->T * ff, p->s), "MLP: SwiGLU");     /* gate = silu(gate) * up */
    LAUNCH(matmul(p, &ly->down, x->ff_g, ff, x->xb, d), "MLP: down_proj");        /* xb   [T, d] */
    return TD_OK;
}

/* The fault word, read after the pass: the first step (and in it the first token) that went non-finite. */
static td_status fault_status(td_ctx *ctx, uint64_t word) {
    int n_layer = ctx->model->cfg.n_layer;
    uint32_t code = (uint32_t)(word >> 32);
    int32_t t = (int32_t)(word & 0xffffffffu);
    if (code == 0) return td_eng_nonfinite(ctx, -1, "embedding", t);
    if (code >= code_mixer(n_layer)) return td_eng_nonfinite(ctx, n_layer, "output head", t);
    int il = (int)((code - 1) / 2);
    if ((code - 1) % 2) return td_eng_nonfinite(ctx, il, "MLP", t);
    return td_eng_nonfinite(ctx, il, ctx->model->layers[il].kind == TD_LAYER_ATTENTION ? "attention" : "DeltaNet", t);
}

td_status td_forward_dev(td_ctx *ctx) {
    const td_model *m = ctx->model;
    td_dev_ctx *dv = ctx->dev;
    td_acts *x = &ctx->act;
    td_pass *ps = &ctx->pass;
    const int64_t d = m->cfg.n_embd;
    dev_pass p = {ctx, &m->cfg, dv->w, dv->stream, ps->n_tokens, NULL, ctx->p.precision == TD_PRECISION_BF16};
    td_status st;

    if ((st = td_dev_upload_pass(ctx)) != TD_OK) return st;
    LAUNCH(td_cu_embed(x->x, &p.w->embed, dv->tok_id, p.T, p.s), "embedding");              /* x [T, d] */
    LAUNCH(td_cu_check_rows(x->x, p.T, d, d, NULL, dv->fault, 0, p.s), "embedding: check");
    for (int il = 0; il < m->cfg.n_layer; il++) {
        const td_dev_layer *ly = &p.w->layers[il];
        st = m->layers[il].kind == TD_LAYER_ATTENTION ? block_attention(&p, il, ly) : block_deltanet(&p, il, ly);
        if (st != TD_OK) return st;
        LAUNCH(td_cu_add_rows(x->x, x->xb, p.T, d, p.row_tok, dv->fault, code_mixer(il), p.s), "mixer residual");
        if (il == m->cfg.n_layer - 1) { /* keep the output rows: x [n_out, d] (through xb: gather cannot overlap) */
            LAUNCH(td_cu_gather_rows(x->xb, x->x, dv->out_tok, ps->n_out, d, p.s), "keeping the output rows");
            LAUNCH(td_cu_d2d(x->x, x->xb, (size_t)ps->n_out * (size_t)d * sizeof(float), p.s), "keeping the output rows");
            p.T = ps->n_out;
            p.row_tok = dv->out_tok;
            ps->n_rows = ps->n_out;
        }
        if ((st = block_mlp(&p, ly)) != TD_OK) return st;
        LAUNCH(td_cu_add_rows(x->x, x->xb, p.T, d, p.row_tok, dv->fault, code_mlp(il), p.s), "MLP residual");
    }
    int64_t n_rows = ctx->head_rows ? ctx->n_head_rows : m->head.rows; /* K letters or the vocabulary */
    if (ps->n_out > 0) {
        LAUNCH(td_cu_rmsnorm(x->out_x, x->x, p.w->final_norm, ps->n_out, 1, d, 0, d,
                             m->cfg.rms_eps, m->cfg.zero_centred_norms, p.s),
               "final norm");                                                                  /* out_x [n_out, d] */
        LAUNCH(td_cu_matmul(dv->out, n_rows, x->out_x, d, ps->n_out, &p.w->head, ctx->head_rows ? dv->head_rows : NULL,
                            n_rows, p.bf16, p.s),
               "output head");                                                                 /* out [n_out, n_rows] */
        LAUNCH(td_cu_check_rows(dv->out, ps->n_out, n_rows, n_rows, dv->out_tok, dv->fault, code_mixer(m->cfg.n_layer),
                                p.s),
               "output head: check");
        ctx->head_macs += (int64_t)ps->n_out * n_rows * d;
    }
    uint64_t fault = 0;
    LAUNCH(td_cu_d2h(&fault, dv->fault, sizeof fault, p.s), "reading the pass's fault word");
    if (ps->n_out > 0)
        LAUNCH(td_cu_d2h(x->out, dv->out, (size_t)ps->n_out * (size_t)n_rows * sizeof(float), p.s), "reading the outputs");
    if (fault != UINT64_MAX) return fault_status(ctx, fault);
    return TD_OK;
}
