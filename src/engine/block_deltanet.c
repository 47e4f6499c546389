/* Gated DeltaNet block (Qwen3.5 "linear_attention" layers): x += out_proj(DeltaNet(RMSNorm_in(x))).
 *   qkv = in_proj_qkv(h) [T, 2Hk*dk + Hv*dv], z = in_proj_z(h) [T, Hv, dv], b, a = in_proj_b/a(h) [T, Hv]
 *   u = silu(causal depthwise conv over each sequence's qkv history)  (state: the last K-1 raw qkv rows)
 *   q, k = l2norm per key head (q also / sqrt(dk)); v per value head (value head h reads key head h / (Hv/Hk))
 *   beta = sigmoid(b), g = -exp(A_log) * softplus(a + dt_bias)
 *   per token: S = e^g S;  S += k (beta (v - S^T k))^T;  o = S^T q            (state S [dk, dv] per head)
 *   y = norm_w * rmsnorm(o) * silu(z)
 * The recurrence runs token by token (the exact form whatever the batch and however a sequence was split into
 * calls: prefix reuse stays bit-exact). Sequences and heads are independent and are split over threads. */
#include <math.h>

#include "engine/engine.h"

typedef struct dn_job {
    td_ctx *ctx;
    const td_layer *ly;
    int il;
} dn_job;

static void conv_part(void *arg, int64_t c0, int64_t c1, int thread) {
    (void)thread;
    const dn_job *j = arg;
    td_ctx *ctx = j->ctx;
    const td_config *c = &ctx->model->cfg;
    int64_t K = c->lin_conv_kernel, conv_dim = ctx->dn_conv_dim;
    for (int32_t gi = 0; gi < ctx->n_groups; gi++) {
        float *state = td_eng_dn_conv_state(ctx, ctx->grp_seq[gi], j->il);
        for (int32_t k = ctx->grp_off[gi]; k < ctx->grp_off[gi + 1]; k++) {
            int64_t t = ctx->grp_tok[k];
            td_conv_step(ctx->dn_conv + t * conv_dim, state, ctx->dn_qkv + t * conv_dim, j->ly->dn.conv_w, K, conv_dim,
                         c0, c1);
        }
    }
}

/* q, k, v, beta and g of token t for value head h (key head kh), as the recurrence consumes them. */
static void head_inputs(td_ctx *ctx, const td_deltanet_weights *w, int64_t t, int64_t h, int64_t kh, float *q,
                        float *k, const float **v, float *beta, float *g) {
    const td_config *c = &ctx->model->cfg;
    int64_t Hv = c->lin_n_v_heads, dk = c->lin_k_dim, dv = c->lin_v_dim;
    int64_t key_dim = (int64_t)c->lin_n_k_heads * dk;
    const float *u = ctx->dn_conv + t * ctx->dn_conv_dim;
    float scale = (float)(1.0 / sqrt((double)dk));
    for (int64_t x = 0; x < dk; x++) q[x] = u[kh * dk + x], k[x] = u[key_dim + kh * dk + x];
    td_l2norm(q, dk, 1e-6f);
    td_l2norm(k, dk, 1e-6f);
    for (int64_t x = 0; x < dk; x++) q[x] *= scale;
    *v = u + 2 * key_dim + h * dv;
    *beta = 1.0f / (1.0f + expf(-ctx->dn_b[t * Hv + h]));
    *g = -expf(w->a_log[h]) * td_softplus(ctx->dn_a[t * Hv + h] + w->dt_bias[h]);
}

static void recurrence_part(void *arg, int64_t b, int64_t e, int thread) {
    const dn_job *j = arg;
    td_ctx *ctx = j->ctx;
    const td_config *c = &ctx->model->cfg;
    const td_deltanet_weights *w = &j->ly->dn;
    int64_t Hv = c->lin_n_v_heads, dk = c->lin_k_dim, dv = c->lin_v_dim, ratio = c->lin_n_v_heads / c->lin_n_k_heads;
    int64_t value_dim = Hv * dv;
    float q[1024], k[1024], o[1024];
    for (int64_t task = b; task < e; task++) {
        int32_t gi = (int32_t)(task / Hv);
        int64_t h = task % Hv, kh = h / ratio;
        float *S = td_eng_dn_recurrent_state(ctx, ctx->grp_seq[gi], j->il) + h * dk * dv;
        int32_t i0 = ctx->grp_off[gi], i1 = ctx->grp_off[gi + 1];
        if (ctx->p.deltanet_chunked) { /* the chunked form, chunks of 64 from the first token of this call */
            float *ws = ctx->dn_work + (int64_t)thread * ctx->dn_work_floats;
            float *cq = ws, *ck = cq + TD_DELTANET_CHUNK * dk, *cv = ck + TD_DELTANET_CHUNK * dk;
            float *co = cv + TD_DELTANET_CHUNK * dv, *cg = co + TD_DELTANET_CHUNK * dv, *cb = cg + TD_DELTANET_CHUNK;
            float *scratch = cb + TD_DELTANET_CHUNK;
            for (int32_t s0 = i0; s0 < i1; s0 += TD_DELTANET_CHUNK) {
                int32_t n = i1 - s0 < TD_DELTANET_CHUNK ? i1 - s0 : TD_DELTANET_CHUNK;
                for (int32_t r = 0; r < n; r++) {
                    const float *v;
                    head_inputs(ctx, w, ctx->grp_tok[s0 + r], h, kh, cq + r * dk, ck + r * dk, &v, &cb[r], &cg[r]);
                    for (int64_t x = 0; x < dv; x++) cv[r * dv + x] = v[x];
                }
                td_deltanet_chunk_ref(S, cq, ck, cv, cg, cb, n, dk, dv, co, scratch);
                for (int32_t r = 0; r < n; r++) {
                    int64_t t = ctx->grp_tok[s0 + r];
                    td_gated_rmsnorm(ctx->dn_core + t * value_dim + h * dv, co + r * dv, ctx->dn_z + t * value_dim + h * dv,
                                     w->norm_w, dv, c->rms_eps);
                }
            }
            continue;
        }
        for (int32_t i = i0; i < i1; i++) {
            int64_t t = ctx->grp_tok[i];
            const float *v;
            float beta, g;
            head_inputs(ctx, w, t, h, kh, q, k, &v, &beta, &g);
            ctx->k->deltanet_step(S, q, k, v, g, beta, dk, dv, o);
            td_gated_rmsnorm(ctx->dn_core + t * value_dim + h * dv, o, ctx->dn_z + t * value_dim + h * dv, w->norm_w, dv,
                             c->rms_eps);
        }
    }
}

void td_block_deltanet(td_ctx *ctx, int il, const td_layer *ly) {
    const td_config *c = &ctx->model->cfg;
    const td_deltanet_weights *w = &ly->dn;
    int64_t T = ctx->n_tokens, d = c->n_embd, Hv = c->lin_n_v_heads, conv_dim = ctx->dn_conv_dim;
    int64_t value_dim = Hv * c->lin_v_dim;

    td_eng_norm_in(ctx, ly->attn_norm);
    td_eng_matmuls(ctx, ctx->xb, T, d, (const td_eng_product[]){
        {&w->in_qkv, conv_dim, ctx->dn_qkv, conv_dim}, /* qkv [T, conv_dim] */
        {&w->in_z, value_dim, ctx->dn_z, value_dim},   /* z   [T, Hv, dv]   */
        {&w->in_b, Hv, ctx->dn_b, Hv},                 /* b   [T, Hv]       */
        {&w->in_a, Hv, ctx->dn_a, Hv}}, 4);            /* a   [T, Hv]       */

    dn_job job = {ctx, ly, il};
    td_pool_run(ctx->pool, conv_dim, 64, conv_part, &job);
    td_pool_run_dynamic(ctx->pool, (int64_t)ctx->n_groups * Hv, 1, recurrence_part, &job); /* core [T, Hv, dv] */

    td_eng_matmul(ctx, &w->out, NULL, d, ctx->dn_core, T, value_dim, ctx->xb, d);
    td_eng_residual(ctx);
}
