/* The Gated DeltaNet step (TD_OP_DELTANET; Qwen3.5's "linear_attention" layers project, norm and add around it):
 * from qkv [T, 2Hk*dk + Hv*dv], z [T, Hv, dv], b, a [T, Hv] (the in_proj products) to core [T, Hv, dv]:
 *   u = silu(causal depthwise conv over each sequence's qkv history)  (state: the last K-1 raw qkv rows)
 *   q, k = l2norm per key head (q also / sqrt(dk)); v per value head (value head h reads key head h / (Hv/Hk))
 *   beta = sigmoid(b), g = -exp(A_log) * softplus(a + dt_bias)
 *   per token: S = e^g S;  S += k (beta (v - S^T k))^T;  o = S^T q            (state S [dk, dv] per head)
 *   y = norm_w * rmsnorm(o) * silu(z)
 * The recurrence runs token by token (the exact form whatever the batch and however a sequence was split into
 * calls: prefix reuse stays bit-exact). Sequences and heads are independent and are split over threads. */
#include <math.h>

#include "engine/engine.h"

typedef struct dn_layer {
    const td_layer *ly;
    int il;
} dn_layer;

#define TD_CONV_CHANNELS 64 /* channels of the short convolution per task */

/* Channels [64 i, 64 i + 64) of the short convolution, for every token of every sequence, in position order. */
static void conv_task(td_ctx *ctx, int64_t i, const void *arg, int thread) {
    (void)thread;
    const dn_layer *l = arg;
    const td_pass *ps = &ctx->pass;
    int64_t K = ctx->model->cfg.lin_conv_kernel, conv_dim = ctx->dn.conv_dim;
    int64_t c0 = i * TD_CONV_CHANNELS, c1 = c0 + TD_CONV_CHANNELS < conv_dim ? c0 + TD_CONV_CHANNELS : conv_dim;
    for (int32_t gi = 0; gi < ps->n_groups; gi++) {
        float *state = td_eng_dn_conv_state(ctx, ps->grp_seq[gi], l->il);
        for (int32_t k = ps->grp_off[gi]; k < ps->grp_off[gi + 1]; k++) {
            int64_t t = ps->grp_tok[k];
            td_conv_step(ctx->act.dn_conv + t * conv_dim, state, ctx->act.dn_qkv + t * conv_dim, l->ly->v[TD_W_DN_CONV], K,
                         conv_dim, c0, c1);
        }
    }
}

/* q, k, v, beta and g of token t for value head h (key head kh), as the recurrence consumes them. */
static void head_inputs(td_ctx *ctx, const td_layer *w, int64_t t, int64_t h, int64_t kh, float *q,
                        float *k, const float **v, float *beta, float *g) {
    const td_config *c = &ctx->model->cfg;
    int64_t Hv = c->lin_n_v_heads, dk = c->lin_k_dim, dv = c->lin_v_dim;
    int64_t key_dim = (int64_t)c->lin_n_k_heads * dk;
    const float *u = ctx->act.dn_conv + t * ctx->dn.conv_dim;
    float scale = (float)(1.0 / sqrt((double)dk));
    for (int64_t x = 0; x < dk; x++) q[x] = u[kh * dk + x], k[x] = u[key_dim + kh * dk + x];
    td_l2norm(q, dk, 1e-6f);
    td_l2norm(k, dk, 1e-6f);
    for (int64_t x = 0; x < dk; x++) q[x] *= scale;
    *v = u + 2 * key_dim + h * dv;
    *beta = 1.0f / (1.0f + expf(-ctx->act.dn_b[t * Hv + h]));
    *g = -expf(w->v[TD_W_DN_A_LOG][h]) * td_softplus(ctx->act.dn_a[t * Hv + h] + w->v[TD_W_DN_DT_BIAS][h]);
}

/* Task (sequence group gi, value head h): the recurrence over the group's tokens, then the gated output norm. */
static void recurrence_task(td_ctx *ctx, int64_t task, const void *arg, int thread) {
    const dn_layer *l = arg;
    const td_pass *ps = &ctx->pass;
    const td_config *c = &ctx->model->cfg;
    const td_layer *w = l->ly;
    const float *norm_w = w->v[TD_W_DN_NORM];
    td_acts *x = &ctx->act;
    int64_t Hv = c->lin_n_v_heads, dk = c->lin_k_dim, dv = c->lin_v_dim, ratio = c->lin_n_v_heads / c->lin_n_k_heads;
    int64_t value_dim = Hv * dv;
    int32_t gi = (int32_t)(task / Hv);
    int64_t h = task % Hv, kh = h / ratio;
    float *S = td_eng_dn_recurrent_state(ctx, ps->grp_seq[gi], l->il) + h * dk * dv;
    int32_t i0 = ps->grp_off[gi], i1 = ps->grp_off[gi + 1];
    if (ctx->p.deltanet_chunked) { /* the chunked form, chunks of 64 from the first token of this call */
        float *ws = x->dn_work + (int64_t)thread * x->dn_work_floats;
        float *cq = ws, *ck = cq + TD_DELTANET_CHUNK * dk, *cv = ck + TD_DELTANET_CHUNK * dk;
        float *co = cv + TD_DELTANET_CHUNK * dv, *cg = co + TD_DELTANET_CHUNK * dv, *cb = cg + TD_DELTANET_CHUNK;
        float *scratch = cb + TD_DELTANET_CHUNK;
        for (int32_t s0 = i0; s0 < i1; s0 += TD_DELTANET_CHUNK) {
            int32_t n = i1 - s0 < TD_DELTANET_CHUNK ? i1 - s0 : TD_DELTANET_CHUNK;
            for (int32_t r = 0; r < n; r++) {
                const float *v;
                head_inputs(ctx, w, ps->grp_tok[s0 + r], h, kh, cq + r * dk, ck + r * dk, &v, &cb[r], &cg[r]);
                for (int64_t e = 0; e < dv; e++) cv[r * dv + e] = v[e];
            }
            td_deltanet_chunk_ref(S, cq, ck, cv, cg, cb, n, dk, dv, co, scratch);
            for (int32_t r = 0; r < n; r++) {
                int64_t t = ps->grp_tok[s0 + r];
                td_gated_rmsnorm(x->dn_core + t * value_dim + h * dv, co + r * dv, x->dn_z + t * value_dim + h * dv,
                                 norm_w, dv, c->rms_eps);
            }
        }
        return;
    }
    float q[TD_MAX_HEAD_DIM], k[TD_MAX_HEAD_DIM], o[TD_MAX_HEAD_DIM];
    for (int32_t i = i0; i < i1; i++) {
        int64_t t = ps->grp_tok[i];
        const float *v;
        float beta, g;
        head_inputs(ctx, w, t, h, kh, q, k, &v, &beta, &g);
        ctx->k->deltanet_step(S, q, k, v, g, beta, dk, dv, o);
        td_gated_rmsnorm(x->dn_core + t * value_dim + h * dv, o, x->dn_z + t * value_dim + h * dv, norm_w, dv,
                         c->rms_eps);
    }
}

void td_eng_deltanet(td_ctx *ctx, int il, const td_layer *ly) {
    const td_config *c = &ctx->model->cfg;
    int64_t Hv = c->lin_n_v_heads, conv_dim = ctx->dn.conv_dim;
    dn_layer l = {ly, il};
    td_eng_for(ctx, (conv_dim + TD_CONV_CHANNELS - 1) / TD_CONV_CHANNELS, conv_task, &l); /* conv [T, conv_dim] */
    td_eng_for_dynamic(ctx, (int64_t)ctx->pass.n_groups * Hv, recurrence_task, &l);      /* core [T, Hv, dv] */
}
