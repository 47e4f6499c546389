/* The forward pass on the GPU: the architecture's description (model/arch.h) executed step for step as on the CPU
 * (forward.c), each step one kernel of src/kernels/cuda/ on the context's stream. The pass's indices go in
 * (td_dev_upload_pass); the outputs come out (act.out) with one word that says whether, and where first, a row went
 * NaN or infinite: the same checks as the CPU's, made on the device and read once at the end of the pass instead of
 * after every residual.
 *   x = embed[token]                                        [T, d]
 *   for each layer: the steps of its kind (the last layer's MLP on the output rows only)
 *   logits = head(RMSNorm_final(x))                         only the output rows, only the asked-for head rows
 * The DeltaNet recurrence runs token by token here (td_ctx_params.deltanet_chunked is a CPU option), or with
 * TD_CUDA_DN=chunk in the environment when the context is made, in the chunked form (cuda.h: other bits than token by
 * token, within fp32 rounding; the same bits however a sequence is split into passes). */
#include <math.h>
#include <string.h>

#include "engine/cuda/dev.h"
#include "util/error.h"

/* A kernel launch that failed: the pass stops with the CUDA runtime's words. */
#define LAUNCH(call, what)                                                                                       \
    do {                                                                                                         \
        if ((call) != 0) return td_dev_fail(what);                                                               \
    } while (0)

/* The fault word's step codes: 0 the embedding, then per layer its first and its second residual (the mixer's and
 * the MLP's), then the head. */
static uint32_t code_residual(int il, int r) { return 1u + 2u * (uint32_t)il + (uint32_t)r; }

typedef struct dev_pass {
    td_ctx *ctx;
    const td_config *c;
    const td_dev_weights *w;
    void *s;                /* the stream */
    int64_t T;              /* rows of the activations: tokens, then the output tokens */
    const int32_t *row_tok; /* device: the batch token of each row (NULL: row = token) */
    int bf16;               /* products take bf16-rounded inputs */
    td_cu_parts held;       /* the last product's result as the residual after it takes it (product_held) */
    int held_buf;           /* the buffer it stands for; -1 none */
    td_cu_parts gu[2];      /* the MLP's gate and up as the GLU after them takes them (products) */
    int gu_held;            /* gu holds partials */
    td_cu_parts qkv[3];     /* q, k and v as q/k preparation takes them (products) */
    int qkv_held;           /* qkv holds partials */
    uint16_t *xb;           /* NULL, or where the residual + norm also writes its output in bf16 (norm_xb_fit) */
    int xb_buf;             /* the buffer whose bf16 copy xb holds for the step right after the norm; -1 none */
    uint16_t *att_xb;       /* NULL, or xb for the attention step: its output in bf16 too, for the product after it */
} dev_pass;

static float *buf(const dev_pass *p, int b) { return td_eng_buf(p->ctx, (td_buf)b); }
static int64_t width(const dev_pass *p, int b) { return td_eng_buf_width(p->ctx, (td_buf)b); }

/* Heads of a Q or K row: count, stride between heads. */
/* The KV cache's element format for the kernels (cuda.h's TD_CU_KV_*). */
static int kv_format(const td_ctx *ctx) {
    return ctx->kv.bf16 ? TD_CU_KV_BF16 : ctx->kv.f16 ? TD_CU_KV_F16 : TD_CU_KV_F32;
}

static void heads_of(const dev_pass *p, int b, int64_t *n, int64_t *stride) {
    *n = b == TD_B_Q ? p->c->n_head : p->c->n_head_kv;
    *stride = b == TD_B_Q ? td_eng_q_head_stride(p->ctx) : p->c->head_dim;
}

static td_status deltanet(const dev_pass *p, int il, const td_dev_layer *ly) {
    td_ctx *ctx = p->ctx;
    const td_config *c = p->c;
    td_acts *x = &ctx->act;
    const td_dev_ctx *dv = ctx->dev;
    const int64_t Hv = c->lin_n_v_heads, conv_dim = ctx->dn.conv_dim, K = c->lin_conv_kernel;
    float *conv_state = ctx->dn.data + ctx->dn.layer_off[il];
    float *rec_state = conv_state + (K - 1) * conv_dim;
    td_cu_groups g = {dv->grp_seq, dv->grp_off, dv->grp_tok, ctx->pass.n_groups,
                      ctx->pass.grp_off[ctx->pass.n_groups]};
    LAUNCH(td_cu_conv(x->dn_conv, x->dn_qkv, conv_state, ctx->dn.floats, ly->v[TD_W_DN_CONV], K, conv_dim, &g, p->s),
           "DeltaNet: convolution");                                                     /* conv [T, conv_dim] */
    if (ctx->dn.dev_chunk) { /* TD_CUDA_DN=chunk: the chunked form, one set of launches per launch set (ctx.c) */
        for (int s = 0; s < dv->n_dnc_sets; s++)
            LAUNCH(td_cu_deltanet_chunk_multi(x->dn_core, x->dn_conv, conv_dim, x->dn_z, x->dn_b, x->dn_a,
                                              ly->v[TD_W_DN_A_LOG], ly->v[TD_W_DN_DT_BIAS], ly->v[TD_W_DN_NORM],
                                              rec_state, ctx->dn.floats, c->lin_n_k_heads, Hv, c->lin_k_dim,
                                              c->lin_v_dim, c->rms_eps,
                                              dv->grp_tok + ctx->pass.grp_off[dv->dnc_first[s]], &dv->dnc_sets[s],
                                              dv->dnc_scratch, dv->dnc_scratch_floats, p->s),
                   "DeltaNet: recurrence (chunked)");                                    /* core [T, Hv, dv] */
        return TD_OK;
    }
    LAUNCH(td_cu_deltanet(x->dn_core, x->dn_conv, conv_dim, x->dn_z, x->dn_b, x->dn_a, ly->v[TD_W_DN_A_LOG],
                          ly->v[TD_W_DN_DT_BIAS], ly->v[TD_W_DN_NORM], rec_state, ctx->dn.floats, c->lin_n_k_heads,
                          Hv, c->lin_k_dim, c->lin_v_dim, c->rms_eps, &g, p->s),
           "DeltaNet: recurrence");                                                      /* core [T, Hv, dv] */
    return TD_OK;
}

/* Products of one input that follow each other in a layer's steps (q, k, v; gate, up; DeltaNet's four), none with
 * a bias: how many (1 .. 4) start at steps[i]. They run as one launch where the kernels allow it, each output as it would alone. */
static int same_input_products(const td_layer_steps *ls, int i) {
    int n = 1;
    const td_step *a = &ls->steps[i];
    if (a->op != TD_OP_MATMUL || a->bias >= 0) return 1;
    while (n < 4 && i + n < ls->n) {
        const td_step *b = &ls->steps[i + n];
        if (b->op != TD_OP_MATMUL || b->bias >= 0 || b->src != a->src || b->dst == a->src) break;
        n++;
    }
    return n;
}

/* Who takes a set of products next, adding their partials as it reads them (td_cu_matmul_multi_parts): nobody,
 * glu_product (the MLP's gate and up) or qk_prep (q, k and v). */
enum { HOLD_NONE, HOLD_GATE_UP, HOLD_QKV };

/* xb: NULL, or their input in bf16 (the norm's: dev_pass.xb) */
static td_status products(dev_pass *p, const td_dev_layer *ly, const td_step *st, int n, int hold,
                          const uint16_t *xb) {
    td_cu_mm mm[4];
    td_cu_parts out[4];
    for (int i = 0; i < n; i++)
        mm[i] = (td_cu_mm){buf(p, st[i].dst), width(p, st[i].dst), &ly->w[st[i].w], NULL, ly->w[st[i].w].rows};
    if (hold == HOLD_NONE) {
        LAUNCH(td_cu_matmul_multi_xb(NULL, mm, n, buf(p, st[0].src), xb, width(p, st[0].src), p->T, p->bf16, p->s),
               "matrix products");
        return TD_OK;
    }
    LAUNCH(td_cu_matmul_multi_xb(out, mm, n, buf(p, st[0].src), xb, width(p, st[0].src), p->T, p->bf16, p->s),
           hold == HOLD_QKV ? "attention: q, k and v products" : "MLP: gate and up products");
    int held = 0;
    for (int i = 0; i < n; i++) {
        held |= out[i].S > 1;
        if (hold == HOLD_QKV) p->qkv[st[i].dst == TD_B_Q ? 0 : st[i].dst == TD_B_K ? 1 : 2] = out[i];
        else p->gu[st[i].dst == TD_B_FF_U] = out[i];
    }
    if (hold == HOLD_QKV) p->qkv_held = held;
    else p->gu_held = held;
    return TD_OK;
}

/* The model's MLP gate activation as the kernels name it (cuda.h's TD_CU_GLU_*). */
static int glu_act(const td_config *c) { return c->glu_act == TD_GLU_GELU_TANH ? TD_CU_GLU_GELU_TANH : TD_CU_GLU_SILU; }

/* One step of layer il (r: the residuals already run in this layer). */
static td_status step(dev_pass *p, int il, const td_dev_layer *ly, const td_step *st, int *r) {
    td_ctx *ctx = p->ctx;
    const td_config *c = p->c;
    const td_dev_ctx *dv = ctx->dev;
    td_acts *x = &ctx->act;
    const int64_t T = p->T, d = c->n_embd, hd = c->head_dim, zc = c->zero_centred_norms;
    int64_t n, stride;
    switch ((td_op)st->op) {
    case TD_OP_NORM:
        LAUNCH(td_cu_rmsnorm(buf(p, st->dst), buf(p, st->src), ly->v[st->w], T, 1, d, 0, d, c->rms_eps, (int)zc, p->s),
               "norm");
        break;
    case TD_OP_MATMUL:
        LAUNCH(td_cu_matmul(buf(p, st->dst), width(p, st->dst), buf(p, st->src), width(p, st->src), T, &ly->w[st->w], NULL,
                            ly->w[st->w].rows, p->bf16, p->s),
               "matrix product");
        if (st->bias >= 0 && ly->v[st->bias])
            LAUNCH(td_cu_add_bias(buf(p, st->dst), width(p, st->dst), ly->v[st->bias], T, ly->w[st->w].rows, p->s),
                   "bias");
        break;
    case TD_OP_HEAD_NORM:
        heads_of(p, st->dst, &n, &stride);
        LAUNCH(td_cu_rmsnorm(buf(p, st->dst), buf(p, st->dst), ly->v[st->w], T * n, n, width(p, st->dst), stride, hd,
                             c->rms_eps, (int)zc, p->s),
               "per-head norm");
        break;
    case TD_OP_ROPE:
        heads_of(p, st->dst, &n, &stride);
        LAUNCH(td_cu_rope(buf(p, st->dst), dv->rope_cs + (int64_t)c->layer_rope[il] * ctx->p.n_batch * c->rotary_dim, T, n,
                          width(p, st->dst), stride, c->rotary_dim, p->s),
               "RoPE");
        break;
    case TD_OP_STORE_KV:
        LAUNCH(td_cu_store_rows(ctx->kv.k[il], kv_format(ctx), x->k, ctx->kv.dim, dv->tok_cell, T, ctx->kv.dim, p->s),
               "caching keys");
        LAUNCH(td_cu_store_rows(ctx->kv.v[il], kv_format(ctx), x->v, ctx->kv.dim, dv->tok_cell, T, ctx->kv.dim, p->s),
               "caching values");
        break;
    case TD_OP_ATTENTION: {
        /* bf16 mode: the tensor-core kernel where td_cu_attention_tc(hd) (cuda.h: its own order) */
        td_cu_attn_plan plan = dv->attn;
        plan.out_bf16 = p->att_xb;
        LAUNCH((p->bf16 ? td_cu_attention_bf16 : td_cu_attention)(
                   x->att, width(p, TD_B_ATT), x->q, width(p, TD_B_Q), td_eng_q_head_stride(ctx), ctx->kv.k[il],
                   ctx->kv.v[il], kv_format(ctx), ctx->kv.dim, dv->cells, ctx->p.n_ctx, dv->tok_seq, dv->tok_pos, T,
                   c->n_head, c->n_head_kv, hd, c->attn_scale, c->layer_window[il], &plan, p->s),
               "attention");
        if (p->att_xb) p->xb_buf = TD_B_ATT;
        break;
    }
    case TD_OP_OUT_GATE:
        LAUNCH(td_cu_sigmoid_gate(x->att, width(p, TD_B_ATT), x->q + hd, width(p, TD_B_Q), td_eng_q_head_stride(ctx), T,
                                  c->n_head, hd, p->s),
               "attention: gate");
        break;
    case TD_OP_GLU:
        LAUNCH(td_cu_glu(x->ff_g, x->ff_u, T * c->n_ff, glu_act(c), p->s),
               c->glu_act == TD_GLU_GELU_TANH ? "MLP: GeGLU" : "MLP: SwiGLU");
        break;
    case TD_OP_RESIDUAL:
        LAUNCH(td_cu_add_rows(x->x, buf(p, st->src), T, d, p->row_tok, dv->fault, code_residual(il, (*r)++), p->s),
               "residual");
        break;
    case TD_OP_KEEP_OUTPUTS: /* x [n_out, d], through xb: a gather cannot overlap */
        if (il != c->n_layer - 1) break;
        LAUNCH(td_cu_gather_rows(x->xb, x->x, dv->out_tok, ctx->pass.n_out, d, p->s), "keeping the output rows");
        LAUNCH(td_cu_d2d(x->x, x->xb, (size_t)ctx->pass.n_out * (size_t)d * sizeof(float), p->s),
               "keeping the output rows");
        p->T = ctx->pass.n_out;
        p->row_tok = dv->out_tok;
        ctx->pass.n_rows = ctx->pass.n_out;
        break;
    case TD_OP_DELTANET: return deltanet(p, il, ly);
    }
    return TD_OK;
}

/* The MLP's gate and the product that takes it (GLU, then MATMUL of FF_G) as one step: td_cu_matmul_glu gates the
 * activations as the product takes them, the bits of the two steps. 0 when steps[i] does not start such a pair. */
static int glu_product_steps(const td_dev_ctx *dv, const td_layer_steps *ls, int i) {
    const td_step *s = ls->steps + i;
    return dv->glu_fused && i + 1 < ls->n && s[0].op == TD_OP_GLU && s[1].op == TD_OP_MATMUL && s[1].src == s[0].dst &&
                   s[0].dst == TD_B_FF_G && s[0].src == TD_B_FF_U
               ? 2
               : 0;
}

/* held: the product's result may stay as partials for the residual after it (product_held). The gate and up may be
 * partials themselves (products, p->gu): the kernels add them as they gate them. */
static td_status glu_product(dev_pass *p, const td_dev_layer *ly, const td_step *s, int held) {
    td_acts *x = &p->ctx->act;
    const td_step *mm = &s[1];
    const td_cu_mat *w = &ly->w[mm->w];
    const int64_t ldg = width(p, TD_B_FF_G);
    const int act = glu_act(p->c);
    td_cu_parts gu[2] = {{x->ff_g, 1, ldg}, {x->ff_u, 1, ldg}};
    if (p->gu_held) gu[0] = p->gu[0], gu[1] = p->gu[1], p->gu_held = 0;
    LAUNCH(td_cu_matmul_glu_parts(held ? &p->held : NULL, buf(p, mm->dst), width(p, mm->dst), x->ff_g, gu, ldg, p->T,
                                  w, act, p->bf16, p->s),
           act == TD_CU_GLU_SILU ? "MLP: SwiGLU and its product" : "MLP: GeGLU and its product");
    if (held) {
        p->held_buf = mm->dst;
        return TD_OK;
    }
    if (mm->bias >= 0 && ly->v[mm->bias])
        LAUNCH(td_cu_add_bias(buf(p, mm->dst), width(p, mm->dst), ly->v[mm->bias], p->T, w->rows, p->s), "bias");
    return TD_OK;
}

/* The MLP's gate and up products (steps[0], steps[1]: hold_for's HOLD_GATE_UP), its gate and the down product after
 * them (steps[2], steps[3]) as one call, act(g) * u computed by the gate/up product (td_cu_matmul_mlp): 1 when it ran,
 * 0 when the steps run one by one (not a pass the call takes), -1 when it failed. xb as products'. */
static int mlp(dev_pass *p, const td_dev_layer *ly, const td_step *s, const uint16_t *xb) {
    const td_step *dn = &s[3], *g = s[0].dst == TD_B_FF_G ? &s[0] : &s[1], *u = g == &s[0] ? &s[1] : &s[0];
    if (!p->bf16 || (dn->bias >= 0 && ly->v[dn->bias])) return 0;
    const int rc = td_cu_matmul_mlp(buf(p, dn->dst), width(p, dn->dst), buf(p, g->src), xb, width(p, g->src), p->T,
                                    &ly->w[g->w], &ly->w[u->w], &ly->w[dn->w], glu_act(p->c), 1, p->s);
    return rc < 0 ? -1 : rc == 0;
}

/* The fault word, read after the pass: the first step (and in it the first token) that went non-finite. */
static td_status fault_status(td_ctx *ctx, uint64_t word) {
    const td_config *c = &ctx->model->cfg;
    uint32_t code = (uint32_t)(word >> 32);
    int32_t t = (int32_t)(word & 0xffffffffu);
    if (code == 0) return td_eng_nonfinite(ctx, -1, "embedding", t);
    if (code >= code_residual(c->n_layer, 0)) return td_eng_nonfinite(ctx, c->n_layer, "output head", t);
    int il = (int)((code - 1) / 2), r = (int)((code - 1) % 2);
    const td_layer_steps *ls = td_arch_layer_steps(c, il);
    const char *block = "layer";
    for (int i = 0, seen = 0; i < ls->n; i++)
        if (ls->steps[i].op == TD_OP_RESIDUAL && seen++ == r) block = ls->steps[i].block;
    return td_eng_nonfinite(ctx, il, block, t);
}

/* Per-head norms of q and k, their rotations and the KV store, as the steps run them one after the other
 * ([HEAD_NORM q, HEAD_NORM k,] ROPE q, ROPE k, STORE_KV): how many steps from steps[i] (5 or 3), or 0. */
static int qk_prep_steps(const td_layer_steps *ls, int i) {
    const td_step *s = ls->steps + i;
    int n = ls->n - i, norms = n >= 2 && s[0].op == TD_OP_HEAD_NORM && s[0].dst == TD_B_Q &&
                               s[1].op == TD_OP_HEAD_NORM && s[1].dst == TD_B_K ? 2 : 0;
    s += norms, n -= norms;
    if (n < 3 || s[0].op != TD_OP_ROPE || s[0].dst != TD_B_Q || s[1].op != TD_OP_ROPE || s[1].dst != TD_B_K ||
        s[2].op != TD_OP_STORE_KV)
        return 0;
    return norms + 3;
}

static td_status qk_prep(dev_pass *p, int il, const td_dev_layer *ly, const td_step *s, int n) {
    td_ctx *ctx = p->ctx;
    const td_config *c = p->c;
    td_acts *x = &ctx->act;
    const td_dev_ctx *dv = ctx->dev;
    const float *qn = n == 5 ? ly->v[s[0].w] : NULL, *kn = n == 5 ? ly->v[s[1].w] : NULL;
    const td_cu_parts *qkv = p->qkv_held ? p->qkv : NULL; /* the products' partials (products) */
    p->qkv_held = 0;
    LAUNCH(td_cu_qk_prep(x->q, width(p, TD_B_Q), td_eng_q_head_stride(ctx), c->n_head, x->k, width(p, TD_B_K),
                         c->n_head_kv, x->v, width(p, TD_B_V), qkv, qn, kn, c->head_dim, c->rms_eps,
                         c->zero_centred_norms,
                         dv->rope_cs + (int64_t)c->layer_rope[il] * ctx->p.n_batch * c->rotary_dim, c->rotary_dim,
                         ctx->kv.k[il], ctx->kv.v[il], kv_format(ctx), dv->tok_cell, ctx->kv.dim, p->T, p->s),
           "q and k: norms, RoPE, caching");
    return TD_OK;
}

/* The RMSNorm of x that directly follows the residual at steps[i] of layer il (a KEEP_OUTPUTS step between them is
 * nothing before the last layer), in this layer or as the next layer's first step (*next set): the two run as one
 * kernel with the same bits. NULL when none follows. */
static const td_step *norm_after_residual(const td_config *c, int il, const td_layer_steps *ls, int i, int *next) {
    *next = 0;
    int j = i + 1;
    if (j < ls->n && ls->steps[j].op == TD_OP_KEEP_OUTPUTS && il != c->n_layer - 1) j++;
    const td_step *nx = NULL;
    if (j < ls->n) nx = &ls->steps[j];
    else if (il + 1 < c->n_layer) nx = &td_arch_layer_steps(c, il + 1)->steps[0], *next = 1;
    return nx && nx->op == TD_OP_NORM && nx->src == TD_B_X ? nx : NULL;
}

/* Whether the product at steps[i] (its last step, writing dst; no bias) is the one input of the residual + norm
 * right after it: that kernel adds the product's partials itself (td_cu_matmul_multi_xb), one launch fewer. */
static int held_by_residual(const dev_pass *p, int il, const td_dev_layer *ly, const td_layer_steps *ls, int i) {
    const td_step *s = &ls->steps[i];
    int next;
    return s->op == TD_OP_MATMUL && !(s->bias >= 0 && ly->v[s->bias]) && i + 1 < ls->n &&
           ls->steps[i + 1].op == TD_OP_RESIDUAL && ls->steps[i + 1].src == s->dst &&
           norm_after_residual(p->c, il, ls, i + 1, &next);
}

/* Who takes the n products at steps[i] next (products): glu_product the MLP's gate and up, qk_prep q, k and v
 * (nq: qk_prep's steps at steps[i + n], qk_prep_steps). */
static int hold_for(const td_dev_ctx *dv, const td_layer_steps *ls, int i, int n, int nq) {
    const td_step *s = &ls->steps[i];
    if (n == 2 && glu_product_steps(dv, ls, i + 2) && s[0].dst != s[1].dst &&
        (s[0].dst == TD_B_FF_G || s[0].dst == TD_B_FF_U) && (s[1].dst == TD_B_FF_G || s[1].dst == TD_B_FF_U))
        return HOLD_GATE_UP;
    int q = 0, k = 0, v = 0;
    for (int j = 0; j < n; j++) q += s[j].dst == TD_B_Q, k += s[j].dst == TD_B_K, v += s[j].dst == TD_B_V;
    return n == 3 && nq && q == 1 && k == 1 && v == 1 ? HOLD_QKV : HOLD_NONE;
}

/* A product that held_by_residual: its result in p->held (the partials, or its buffer). xb as products'. */
static td_status product_held(dev_pass *p, const td_dev_layer *ly, const td_step *st, const uint16_t *xb) {
    const td_cu_mm mm = {buf(p, st->dst), width(p, st->dst), &ly->w[st->w], NULL, ly->w[st->w].rows};
    LAUNCH(td_cu_matmul_multi_xb(&p->held, &mm, 1, buf(p, st->src), xb, width(p, st->src), p->T, p->bf16, p->s),
           "matrix product");
    p->held_buf = st->dst;
    return TD_OK;
}

/* Whether the attention step at steps[i] writes its output in bf16 too (dev_pass.att_xb): where the product right
 * after it reads that output whole (no gate between: Qwen3.5's output gate changes it) and rounds it for the wide
 * tiles (p->xb: bf16, above 64 tokens); TD_CUDA_ATT_XB=0: never. */
static uint16_t *attention_xb(const dev_pass *p, const td_layer_steps *ls, int i) {
    const td_step *s = &ls->steps[i];
    return p->xb && s->op == TD_OP_ATTENTION && i + 1 < ls->n && s[1].op == TD_OP_MATMUL && s[1].src == TD_B_ATT &&
                   width(p, TD_B_ATT) == p->c->n_head * p->c->head_dim && td_cu_attention_xb()
               ? p->xb
               : NULL;
}

/* The pass's kernels, from the embedding to the head's check: device work only (no copy to or from the host), so a
 * graph can record it. */
static td_status kernels(dev_pass *p, int64_t n_rows) {
    td_ctx *ctx = p->ctx;
    const td_model *m = ctx->model;
    td_dev_ctx *dv = ctx->dev;
    td_acts *x = &ctx->act;
    td_pass *ps = &ctx->pass;
    const int64_t d = m->cfg.n_embd;
    td_status st;
    LAUNCH(td_cu_embed(x->x, &p->w->embed, dv->tok_id, p->T, p->s), "embedding");              /* x [T, d] */
    if (m->cfg.embed_scale != 0.0f) LAUNCH(td_cu_scale(x->x, m->cfg.embed_scale, p->T * d, p->s), "embedding scale");
    LAUNCH(td_cu_check_rows(x->x, p->T, d, d, NULL, dv->fault, 0, p->s), "embedding: check");
    int first = 0; /* the layer's first step already ran (its norm, fused with the residual before it) */
    for (int il = 0; il < m->cfg.n_layer; il++) {                                              /* x = layer(x) */
        const td_layer_steps *ls = td_arch_layer_steps(&m->cfg, il);
        const td_dev_layer *ly = &p->w->layers[il];
        int r = 0;
        for (int i = first; i < ls->n; i++) {
            const td_step *nx = NULL;
            int n = same_input_products(ls, i), next = 0;
            const int xb_buf = p->xb_buf; /* the norm's bf16 copy holds for the step right after it only */
            p->xb_buf = -1;
            if (ls->steps[i].op == TD_OP_RESIDUAL && (nx = norm_after_residual(&m->cfg, il, ls, i, &next))) {
                const td_dev_layer *nl = &p->w->layers[il + next];
                const int src = ls->steps[i].src;
                td_cu_parts y = p->held_buf == src ? p->held : (td_cu_parts){buf(p, src), 1, d};
                p->held_buf = -1;
                LAUNCH(td_cu_add_rows_norm(x->x, &y, p->T, d, p->row_tok, dv->fault, code_residual(il, r++),
                                           buf(p, nx->dst), p->xb, nl->v[nx->w], m->cfg.rms_eps,
                                           m->cfg.zero_centred_norms, p->s),
                       "residual and norm");                                  /* x += xb; xb = RMSNorm(x) */
                if (p->xb) p->xb_buf = nx->dst;
                if (next) break;
                i = (int)(nx - ls->steps);
                continue;
            }
            const int kv_rows = width(p, TD_B_K) == ctx->kv.dim && width(p, TD_B_V) == ctx->kv.dim;
            int nq = kv_rows ? qk_prep_steps(ls, i) : 0;
            if (nq) st = qk_prep(p, il, ly, &ls->steps[i], nq), i += nq - 1;
            else if (glu_product_steps(dv, ls, i))
                st = glu_product(p, ly, &ls->steps[i], held_by_residual(p, il, ly, ls, i + 1)), i++;
            else if (n > 1) {
                const int hold = hold_for(dv, ls, i, n, kv_rows ? qk_prep_steps(ls, i + n) : 0);
                const uint16_t *xb = xb_buf == ls->steps[i].src ? p->xb : NULL;
                const int whole = hold == HOLD_GATE_UP ? mlp(p, ly, &ls->steps[i], xb) : 0; /* gate, up, GLU, down */
                if (whole < 0) return td_dev_fail("MLP: its three products");
                st = whole ? TD_OK : products(p, ly, &ls->steps[i], n, hold, xb);
                i += whole ? 3 : n - 1;
            }
            else if (held_by_residual(p, il, ly, ls, i))
                st = product_held(p, ly, &ls->steps[i], xb_buf == ls->steps[i].src ? p->xb : NULL);
            else {
                p->att_xb = attention_xb(p, ls, i);
                st = step(p, il, &p->w->layers[il], &ls->steps[i], &r);
            }
            if (st != TD_OK) return st;
        }
        int next = 0;
        first = ls->n > 0 && ls->steps[ls->n - 1].op == TD_OP_RESIDUAL &&
                norm_after_residual(&m->cfg, il, ls, ls->n - 1, &next) && next;
    }
    if (ps->n_out > 0) {
        LAUNCH(td_cu_rmsnorm(x->out_x, x->x, p->w->final_norm, ps->n_out, 1, d, 0, d,
                             m->cfg.rms_eps, m->cfg.zero_centred_norms, p->s),
               "final norm");                                                                  /* out_x [n_out, d] */
        LAUNCH(td_cu_matmul(dv->out, n_rows, x->out_x, d, ps->n_out, &p->w->head, ctx->head_rows ? dv->head_rows : NULL,
                            n_rows, p->bf16, p->s),
               "output head");                                                                 /* out [n_out, n_rows] */
        LAUNCH(td_cu_check_rows(dv->out, ps->n_out, n_rows, n_rows, dv->out_tok, dv->fault,
                                code_residual(m->cfg.n_layer, 0), p->s),
               "output head: check");
    }
    return TD_OK;
}

/* Small passes (a decode step, a few streams) are bound by launches, not by the GPU: their kernels are recorded once
 * as a CUDA graph and replayed while the pass keeps its shape. A replay is exact only if every launch argument is the
 * same, so the key holds everything the host computes a launch argument from: the pass's counts (tokens, outputs,
 * sequences, head rows), the attention plan's tiles and its grid (cuda.h: ceil(max_n / 64), max_n rounded up to 64
 * for that); everything else a kernel reads of the pass (indices, positions, cell tables, RoPE tables, head rows) is
 * device memory that td_dev_upload_pass rewrites before the replay, at offsets the counts fix. The chunked DeltaNet
 * (TD_CUDA_DN=chunk) adds its launch arguments: a pass of one launch set keys its prefill groups and chunks (the
 * one-token groups are the rest of the groups, its table follows the tiles); a pass of several sets is not recorded. */
#define GRAPH_MAX_TOKENS 64

static int graph_key(td_ctx *ctx, int64_t n_rows, int64_t key[8]) {
    const td_pass *ps = &ctx->pass;
    td_dev_ctx *dv = ctx->dev;
    if (!dv->graphs || ps->n_tokens > GRAPH_MAX_TOKENS) return 0;
    if (ctx->dn.dev_chunk && dv->n_dnc_sets > 1) return 0;
    int64_t dnc = 1; /* the chunked DeltaNet's counts (1: none) */
    if (ctx->dn.dev_chunk && dv->n_dnc_sets == 1)
        dnc = 2 + 4 * (dv->dnc_sets[0].n_pre + (int64_t)65536 * dv->dnc_sets[0].n_chunks);
    int64_t max_n = (dv->attn.max_n + 63) / 64 * 64;
    dv->attn.max_n = max_n < ctx->p.n_ctx ? max_n : ctx->p.n_ctx; /* the same grid for 64 positions */
    /* tile_tokens too: with it, bf16 attention picks its 16- or 64-row kernel (attention.cu), so equal tile counts
     * cut at another size could otherwise replay a kernel recorded for smaller tiles */
    int64_t k[8] = {ps->n_tokens,     ps->n_out,
                    ps->n_groups,     n_rows,
                    (ctx->head_rows != NULL) + 2 * dv->attn.tile_tokens,
                    dv->attn.n_tiles, (dv->attn.max_n + 63) / 64,
                    dnc};
    memcpy(key, k, sizeof k);
    return 1;
}

/* The kernels through a graph: replayed when the key matches the recorded one, else recorded (replacing it) and run. */
static td_status kernels_graph(dev_pass *p, int64_t n_rows, const int64_t key[8]) {
    td_dev_ctx *dv = p->ctx->dev;
    if (dv->graph && memcmp(key, dv->graph_key, sizeof dv->graph_key) == 0) {
        if (td_cu_graph_launch(dv->graph, p->s) != 0) return td_dev_fail("replaying a pass's kernels");
        p->ctx->pass.n_rows = dv->graph_rows; /* the host side of the recorded steps (KEEP_OUTPUTS) */
        return TD_OK;
    }
    td_cu_graph_free(dv->graph);
    dv->graph = NULL;
    if (td_cu_capture_begin(p->s) != 0) return td_dev_fail("recording a pass's kernels");
    td_status st = kernels(p, n_rows);
    void *exec = NULL;
    if (td_cu_capture_end(p->s, st == TD_OK, &exec) != 0) return td_dev_fail("recording a pass's kernels");
    if (st != TD_OK) return st;
    dv->graph = exec;
    dv->graph_rows = p->ctx->pass.n_rows;
    memcpy(dv->graph_key, key, sizeof dv->graph_key);
    if (td_cu_graph_launch(dv->graph, p->s) != 0) return td_dev_fail("running a pass's kernels");
    return TD_OK;
}

/* The products' scratch grown to what a launch of the pass wanted (td_cu_scratch_wanted), after the pass (the stream
 * is done with the old one): the recorded graph, which holds the old address and the allocation it fell back to, is
 * dropped; the next pass records one without. A scratch the GPU cannot give is not an error: the products keep
 * taking stream-ordered allocations (slower in a graph, the same bits). */
static td_status mm_scratch_fit(td_ctx *ctx) {
    td_dev_ctx *dv = ctx->dev;
    const int64_t want = td_cu_scratch_wanted();
    if (want <= dv->mm_scratch_floats) return TD_OK;
    if (td_cu_sync(dv->stream) != 0) return td_dev_fail("finishing a pass");
    td_dev_graph_free(ctx);
    td_cu_free(dv->mm_scratch);
    dv->mm_scratch = td_cu_malloc((size_t)want * sizeof(float));
    dv->mm_scratch_floats = dv->mm_scratch ? want : 0;
    return TD_OK;
}

/* dev_pass.xb for a pass: where the residual + norm writes its output in bf16 too, so the products after it skip
 * rounding it again (td_cu_matmul_multi_xb: bf16 products above 64 tokens, TD_CUDA_NORM_XB); NULL where not wanted
 * or the GPU cannot give the room (then the products round x themselves: the same bits). Grown before the pass: the
 * stream is done with the old one (every pass ends reading its fault word). */
static uint16_t *norm_xb_fit(td_ctx *ctx, int bf16) {
    td_dev_ctx *dv = ctx->dev;
    const int64_t att = td_eng_buf_width(ctx, TD_B_ATT), d = ctx->model->cfg.n_embd; /* attention's copy too */
    const int64_t want = ctx->pass.n_tokens * (att > d ? att : d);
    if (!bf16 || ctx->pass.n_tokens <= 64 || !td_cu_matmul_norm_xb()) return NULL; /* the wide tiles: above 64 */
    if (want > dv->norm_xb_elems) {
        td_cu_free(dv->norm_xb);
        dv->norm_xb = td_cu_malloc((size_t)want * sizeof(uint16_t));
        dv->norm_xb_elems = dv->norm_xb ? want : 0;
    }
    return dv->norm_xb;
}

void td_dev_graph_free(td_ctx *ctx) {
    if (!ctx->dev) return;
    td_cu_graph_free(ctx->dev->graph);
    ctx->dev->graph = NULL;
}

td_status td_forward_dev(td_ctx *ctx) {
    const td_model *m = ctx->model;
    td_dev_ctx *dv = ctx->dev;
    td_acts *x = &ctx->act;
    td_pass *ps = &ctx->pass;
    dev_pass p = {.ctx = ctx, .c = &m->cfg, .w = dv->w, .s = dv->stream, .T = ps->n_tokens,
                  .bf16 = ctx->p.precision == TD_PRECISION_BF16, .held_buf = -1, .xb_buf = -1};
    td_status st;
    p.xb = norm_xb_fit(ctx, p.bf16);

    if ((st = td_dev_upload_pass(ctx)) != TD_OK) return st;
    int64_t n_rows = ctx->head_rows ? ctx->n_head_rows : m->head.rows; /* K letters or the vocabulary */
    int64_t key[8];
    td_cu_scratch_bind(dv->mm_scratch, dv->mm_scratch_floats);
    st = graph_key(ctx, n_rows, key) ? kernels_graph(&p, n_rows, key) : kernels(&p, n_rows);
    td_cu_scratch_bind(NULL, 0);
    if (st != TD_OK) return st;
    if (ps->n_out > 0) ctx->head_macs += (int64_t)ps->n_out * n_rows * m->cfg.n_embd;
    uint64_t fault = 0;
    LAUNCH(td_cu_d2h(&fault, dv->fault, sizeof fault, p.s), "reading the pass's fault word");
    if (ps->n_out > 0)
        LAUNCH(td_cu_d2h(x->out, dv->out, (size_t)ps->n_out * (size_t)n_rows * sizeof(float), p.s), "reading the outputs");
    if (fault != UINT64_MAX) return fault_status(ctx, fault);
    return mm_scratch_fit(ctx);
}
