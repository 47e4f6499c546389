/* The steps that work row by row (arch.h's td_op): norms, per-head norms, RoPE, caching K and V, the output gate,
 * the gated linear unit and residuals, run as one pass over the rows for a run of them (forward.c), and the biases
 * added after products. Row t of every buffer belongs to token t (or to output token t once the last mixer has run);
 * what a step computes for a row reads that row alone. */
#include <string.h>

#include "engine/engine.h"
#include "model/arch.h"

float *td_eng_buf(td_ctx *ctx, td_buf b) {
    td_acts *a = &ctx->act;
    switch (b) {
    case TD_B_X: return a->x;
    case TD_B_XB: return a->xb;
    case TD_B_Q: return a->q;
    case TD_B_K: return a->k;
    case TD_B_V: return a->v;
    case TD_B_ATT: return a->att;
    case TD_B_FF_G: return a->ff_g;
    case TD_B_FF_U: return a->ff_u;
    case TD_B_DN_QKV: return a->dn_qkv;
    case TD_B_DN_Z: return a->dn_z;
    case TD_B_DN_B: return a->dn_b;
    case TD_B_DN_A: return a->dn_a;
    case TD_B_DN_CORE: return a->dn_core;
    default: return NULL;
    }
}

int64_t td_eng_buf_width(const td_ctx *ctx, td_buf b) {
    const td_config *c = &ctx->model->cfg;
    switch (b) {
    case TD_B_X:
    case TD_B_XB: return c->n_embd;
    case TD_B_Q: return (int64_t)c->n_head * td_eng_q_head_stride(ctx);
    case TD_B_K:
    case TD_B_V: return ctx->kv.dim;
    case TD_B_ATT: return (int64_t)c->n_head * c->head_dim;
    case TD_B_FF_G:
    case TD_B_FF_U: return c->n_ff;
    case TD_B_DN_QKV: return ctx->dn.conv_dim;
    case TD_B_DN_Z:
    case TD_B_DN_CORE: return (int64_t)c->lin_n_v_heads * c->lin_v_dim;
    case TD_B_DN_B:
    case TD_B_DN_A: return c->lin_n_v_heads;
    default: return 0;
    }
}

int64_t td_eng_q_head_stride(const td_ctx *ctx) {
    const td_config *c = &ctx->model->cfg;
    return (int64_t)c->head_dim * (c->attn_output_gate ? 2 : 1); /* per head [query | gate] */
}

int td_eng_row_step(const td_step *s, int last_layer) {
    switch ((td_op)s->op) {
    case TD_OP_NORM:
    case TD_OP_HEAD_NORM:
    case TD_OP_ROPE:
    case TD_OP_STORE_KV:
    case TD_OP_OUT_GATE:
    case TD_OP_GLU:
    case TD_OP_RESIDUAL: return 1;
    case TD_OP_KEEP_OUTPUTS: return !last_layer; /* nothing to do before the last layer */
    default: return 0;
    }
}

typedef struct row_run {
    const td_layer *ly;
    int il;
    const td_step *steps;
    int n;
} row_run;

/* Heads of a Q or K row: count, stride between heads. */
static void heads_of(const td_ctx *ctx, td_buf b, int64_t *n, int64_t *stride) {
    const td_config *c = &ctx->model->cfg;
    *n = b == TD_B_Q ? c->n_head : c->n_head_kv;
    *stride = b == TD_B_Q ? td_eng_q_head_stride(ctx) : c->head_dim;
}

static void row_step(td_ctx *ctx, const row_run *r, const td_step *s, int64_t t) {
    const td_config *c = &ctx->model->cfg;
    const int64_t hd = c->head_dim;
    float *dst = td_eng_buf(ctx, (td_buf)s->dst) + t * td_eng_buf_width(ctx, (td_buf)s->dst);
    const float *src = td_eng_buf(ctx, (td_buf)s->src) + t * td_eng_buf_width(ctx, (td_buf)s->src);
    int64_t n, stride;
    switch ((td_op)s->op) {
    case TD_OP_NORM: /* dst = RMSNorm(src) * w (or (1 + w)) */
        ctx->k->rmsnorm(dst, src, r->ly->v[s->w], c->n_embd, c->rms_eps, c->zero_centred_norms);
        break;
    case TD_OP_HEAD_NORM: /* each head over head_dim, in place */
        heads_of(ctx, (td_buf)s->dst, &n, &stride);
        for (int64_t h = 0; h < n; h++)
            ctx->k->rmsnorm(dst + h * stride, dst + h * stride, r->ly->v[s->w], hd, c->rms_eps, c->zero_centred_norms);
        break;
    case TD_OP_ROPE: /* the first rotary_dim dims of each head, with this token's position */
        heads_of(ctx, (td_buf)s->dst, &n, &stride);
        for (int64_t h = 0; h < n; h++)
            td_rope(dst + h * stride, c->rotary_dim,
                    ctx->pass.rope_cs + ((int64_t)c->layer_rope[r->il] * ctx->p.n_batch + t) * c->rotary_dim);
        break;
    case TD_OP_STORE_KV: /* this layer's cache, the token's cell */
        td_eng_store_kv(ctx, ctx->kv.k[r->il], ctx->pass.tok_cell[t], ctx->act.k + t * ctx->kv.dim);
        td_eng_store_kv(ctx, ctx->kv.v[r->il], ctx->pass.tok_cell[t], ctx->act.v + t * ctx->kv.dim);
        break;
    case TD_OP_OUT_GATE: /* att *= sigmoid(gate): the gate is the second half of each query head */
        stride = td_eng_q_head_stride(ctx);
        for (int64_t h = 0; h < c->n_head; h++) td_sigmoid_gate(dst + h * hd, src + h * stride + hd, hd);
        break;
    case TD_OP_GLU: /* gate = act(gate) * up: silu (SwiGLU), or gelu_tanh (Gemma) */
        if (c->glu_act == TD_GLU_GELU_TANH) td_gelu_tanh_mul(dst, src, c->n_ff);
        else ctx->k->silu_mul(dst, src, c->n_ff);
        break;
    case TD_OP_RESIDUAL: /* x += src; a row that is no longer finite is marked */
        td_add(dst, src, c->n_embd);
        ctx->pass.row_bad[t] = !td_eng_row_finite(dst, c->n_embd);
        break;
    default: break; /* KEEP_OUTPUTS before the last layer */
    }
}

static void row_steps_task(td_ctx *ctx, int64_t t, const void *arg, int thread) {
    (void)thread;
    const row_run *r = arg;
    for (int i = 0; i < r->n; i++) row_step(ctx, r, &r->steps[i], t);
}

void td_eng_row_steps(td_ctx *ctx, int il, const td_layer *ly, const td_step *steps, int n) {
    row_run r = {ly, il, steps, n};
    td_eng_for(ctx, ctx->pass.n_rows, row_steps_task, &r);
}

typedef struct bias_run {
    const td_layer *ly;
    const td_step *steps;
    int n;
} bias_run;

/* y[t, j] = (x W^T)[t, j] + b[j]: the product's sum first, then the bias, as one rounding more. */
static void bias_task(td_ctx *ctx, int64_t t, const void *arg, int thread) {
    (void)thread;
    const bias_run *b = arg;
    for (int i = 0; i < b->n; i++) {
        const td_step *s = &b->steps[i];
        const float *bias = s->bias >= 0 ? b->ly->v[s->bias] : NULL;
        if (bias) td_add(td_eng_buf(ctx, (td_buf)s->dst) + t * td_eng_buf_width(ctx, (td_buf)s->dst), bias,
                         b->ly->w[s->w].rows);
    }
}

void td_eng_add_biases(td_ctx *ctx, const td_layer *ly, const td_step *steps, int n) {
    bias_run b = {ly, steps, n};
    td_eng_for(ctx, ctx->pass.n_rows, bias_task, &b);
}
