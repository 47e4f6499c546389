/* The recurrent layers' test harness (dn_case.h). */
#include "cuda/dn_case.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/cuda_test.h"
#include "kernels/cpu/kernels.h"

groups groups_new(const int32_t *gseq, const int32_t *off, const int32_t *tok, int64_t n_groups) {
    groups r;
    r.seq_d = cu_up(gseq, (size_t)n_groups * 4);
    r.off_d = cu_up(off, (size_t)(n_groups + 1) * 4);
    r.tok_d = cu_up(tok, (size_t)(off[n_groups] > 0 ? off[n_groups] : 1) * 4);
    r.g = (td_cu_groups){r.seq_d, r.off_d, r.tok_d, n_groups, off[n_groups]};
    return r;
}

void groups_free(groups *r) { td_cu_free(r->seq_d), td_cu_free(r->off_d), td_cu_free(r->tok_d); }

dncase dn_new(uint64_t *seed, int64_t Hk, int64_t Hv, int64_t dk, int64_t dv, int64_t T, int64_t n_seq) {
    dncase c = {.Hk = Hk, .Hv = Hv, .dk = dk, .dv = dv, .ldu = 2 * Hk * dk + Hv * dv + 3, .ss = Hv * dk * dv + 5,
                .T = T, .n_seq = n_seq, .eps = 1e-6f};
    c.u = cu_rnd(seed, T * c.ldu, -1.0f, 1.0f), c.z = cu_rnd(seed, T * Hv * dv, -3.0f, 3.0f);
    c.b = cu_rnd(seed, T * Hv, -3.0f, 3.0f), c.a = cu_rnd(seed, T * Hv, -4.0f, 4.0f);
    c.a_log = cu_rnd(seed, Hv, -2.0f, 1.0f), c.dt_bias = cu_rnd(seed, Hv, -1.0f, 1.0f);
    c.norm_w = cu_rnd(seed, dv, 0.5f, 1.5f);
    c.state = cu_rnd(seed, n_seq * c.ss, -0.2f, 0.2f);
    c.u_d = cu_up(c.u, (size_t)(T * c.ldu) * 4), c.z_d = cu_up(c.z, (size_t)(T * Hv * dv) * 4);
    c.b_d = cu_up(c.b, (size_t)(T * Hv) * 4), c.a_d = cu_up(c.a, (size_t)(T * Hv) * 4);
    c.a_log_d = cu_up(c.a_log, (size_t)Hv * 4), c.dt_bias_d = cu_up(c.dt_bias, (size_t)Hv * 4);
    c.norm_w_d = cu_up(c.norm_w, (size_t)dv * 4);
    return c;
}

void dn_free(dncase *c) {
    free(c->u), free(c->z), free(c->b), free(c->a), free(c->a_log), free(c->dt_bias), free(c->norm_w), free(c->state);
    td_cu_free(c->u_d), td_cu_free(c->z_d), td_cu_free(c->b_d), td_cu_free(c->a_d), td_cu_free(c->a_log_d);
    td_cu_free(c->dt_bias_d), td_cu_free(c->norm_w_d);
}

void dn_launch(const dncase *c, const groups *g, float *cd, float *sd, int mode) {
    td_cu_deltanet_test_mode(mode);
    CU(td_cu_deltanet(cd, c->u_d, c->ldu, c->z_d, c->b_d, c->a_d, c->a_log_d, c->dt_bias_d, c->norm_w_d, sd, c->ss,
                      c->Hk, c->Hv, c->dk, c->dv, c->eps, &g->g, NULL));
    td_cu_deltanet_test_mode(0);
}

void dn_run(const dncase *c, const groups *g, float *core, float *state, float *state_d, int mode) {
    size_t sb = (size_t)(c->n_seq * c->ss) * 4, cb = (size_t)(c->T * c->Hv * c->dv) * 4;
    float *sd = state_d ? state_d : cu_up(c->state, sb), *cd = cu_up(NULL, cb);
    dn_launch(c, g, cd, sd, mode);
    cu_down(core, cd, cb);
    cu_down(state, sd, sb);
    if (!state_d) td_cu_free(sd);
    td_cu_free(cd);
}

void dn_ref_group(const dncase *c, float *core, float *state, int32_t seq, const int32_t *tok, int64_t n) {
    float q[1024], k[1024], o[1024];
    float scale = (float)(1.0 / sqrt((double)c->dk));
    for (int64_t h = 0; h < c->Hv; h++) {
        int64_t kh = h / (c->Hv / c->Hk);
        float *S = state + seq * c->ss + h * c->dk * c->dv;
        for (int64_t i = 0; i < n; i++) {
            int64_t t = tok[i];
            const float *u = c->u + t * c->ldu;
            for (int64_t x = 0; x < c->dk; x++) q[x] = u[kh * c->dk + x], k[x] = u[c->Hk * c->dk + kh * c->dk + x];
            td_l2norm(q, c->dk, 1e-6f);
            td_l2norm(k, c->dk, 1e-6f);
            for (int64_t x = 0; x < c->dk; x++) q[x] *= scale;
            const float *v = u + 2 * c->Hk * c->dk + h * c->dv;
            float beta = 1.0f / (1.0f + expf(-c->b[t * c->Hv + h]));
            float g = -expf(c->a_log[h]) * td_softplus(c->a[t * c->Hv + h] + c->dt_bias[h]);
            td_deltanet_step_ref(S, q, k, v, g, beta, c->dk, c->dv, o);
            td_gated_rmsnorm(core + t * c->Hv * c->dv + h * c->dv, o, c->z + t * c->Hv * c->dv + h * c->dv, c->norm_w,
                             c->dv, c->eps);
        }
    }
}

void dn_pick(float *dst, const float *src, const int32_t *tok, int64_t n, int64_t width) {
    for (int64_t i = 0; i < n; i++) memcpy(dst + i * width, src + tok[i] * width, (size_t)width * sizeof *dst);
}
