/* The recurrent layers' test harness, shared by the CUDA tests of td_cu_conv and td_cu_deltanet: a batch's groups on
 * the device, a Gated DeltaNet case (random inputs on the host and the device), one launch, and the CPU engine's
 * token-by-token recurrence as the reference. Failed CUDA calls count in td_test_failures (cuda_test.h). */
#ifndef TD_TESTS_DN_CASE_H
#define TD_TESTS_DN_CASE_H

#include <stdint.h>

#include "kernels/cuda/cuda.h"

/* Groups on the device (group i: sequence gseq[i], batch rows tok[off[i] .. off[i + 1])); freed by groups_free. */
typedef struct groups {
    td_cu_groups g;
    int32_t *seq_d, *off_d, *tok_d;
} groups;

groups groups_new(const int32_t *gseq, const int32_t *off, const int32_t *tok, int64_t n_groups);
void groups_free(groups *r);

/* A DeltaNet layer's inputs for T token rows and n_seq sequences: u [T, ldu] = q | k | v (Hk dk, Hk dk, Hv dv, then
 * 3 unused), z [T, Hv dv], b and a [T, Hv], a_log and dt_bias [Hv], norm_w [dv], state [n_seq, ss] (ss = Hv dk dv + 5);
 * on the host and (but the state) on the device. */
typedef struct dncase {
    int64_t Hk, Hv, dk, dv, ldu, ss, T, n_seq;
    float eps;
    float *u, *z, *b, *a, *a_log, *dt_bias, *norm_w, *state; /* host inputs */
    float *u_d, *z_d, *b_d, *a_d, *a_log_d, *dt_bias_d, *norm_w_d;
} dncase;

/* Draws u, z, b, a, a_log, dt_bias, norm_w, state from *seed, in that order. */
dncase dn_new(uint64_t *seed, int64_t Hk, int64_t Hv, int64_t dk, int64_t dv, int64_t T, int64_t n_seq);
void dn_free(dncase *c);

/* One td_cu_deltanet launch in test mode `mode` (0 the normal choice, 1 the old kernel: td_cu_deltanet_test_mode) on
 * the device core cd [T, Hv dv] and state sd. */
void dn_launch(const dncase *c, const groups *g, float *cd, float *sd, int mode);

/* td_cu_deltanet in mode `mode` from c->state (or from state_d when given, which is then updated); core [T, Hv dv]
 * (rows of no group stay 0) and the final state of every sequence come back on the host. */
void dn_run(const dncase *c, const groups *g, float *core, float *state, float *state_d, int mode);

/* The CPU engine's recurrence_task (token-by-token form: td_deltanet_step_ref, then td_gated_rmsnorm) over one group:
 * sequence seq's state, batch rows tok[0 .. n). */
void dn_ref_group(const dncase *c, float *core, float *state, int32_t seq, const int32_t *tok, int64_t n);

/* dst [n, width] = rows tok[0 .. n) of src [*, width]: a group's rows out of a batch's. */
void dn_pick(float *dst, const float *src, const int32_t *tok, int64_t n, int64_t width);

#endif
