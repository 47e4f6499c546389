/* Gated DeltaNet: the chunked form equals the token-by-token form within fp32 rounding (lengths 1, 63, 64, 65,
 * 200, carrying the state across chunks). The step of every kernel set against the scalar step is a row of the
 * kernel table (test_kernels). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/kernels.h"
#include "test_util.h"

typedef struct inputs {
    int64_t n, dk, dv;
    float *q, *k, *v, *g, *beta;
} inputs;

/* Realistic ranges: unit-norm keys, queries scaled by 1/sqrt(dk), log decays -exp(A_log) softplus(a + dt_bias)
 * with A_log = log U(1, 16), write strengths sigmoid(N(0,1)). */
static inputs make(int64_t n, int64_t dk, int64_t dv, uint64_t *rng) {
    inputs in = {n, dk, dv, NULL, NULL, NULL, NULL, NULL};
    in.q = malloc((size_t)(n * dk) * sizeof(float));
    in.k = malloc((size_t)(n * dk) * sizeof(float));
    in.v = malloc((size_t)(n * dv) * sizeof(float));
    in.g = malloc((size_t)n * sizeof(float));
    in.beta = malloc((size_t)n * sizeof(float));
    float A = logf(td_test_uniform(rng, 1.0f, 16.0f));
    for (int64_t t = 0; t < n; t++) {
        for (int64_t i = 0; i < dk; i++) in.q[t * dk + i] = td_test_uniform(rng, -1, 1), in.k[t * dk + i] = td_test_uniform(rng, -1, 1);
        td_l2norm(in.q + t * dk, dk, 1e-6f);
        td_l2norm(in.k + t * dk, dk, 1e-6f);
        for (int64_t i = 0; i < dk; i++) in.q[t * dk + i] *= 1.0f / sqrtf((float)dk);
        for (int64_t i = 0; i < dv; i++) in.v[t * dv + i] = td_test_uniform(rng, -2, 2);
        in.g[t] = -expf(A) * td_softplus(td_test_uniform(rng, -4.0f, 0.5f));
        in.beta[t] = 1.0f / (1.0f + expf(-td_test_uniform(rng, -2, 2)));
    }
    return in;
}

static void release(inputs *in) {
    free(in->q), free(in->k), free(in->v), free(in->g), free(in->beta);
}


static void test_chunked_vs_recurrent(void) {
    static const int64_t lens[] = {1, 63, 64, 65, 200};
    static const int64_t dims[][2] = {{16, 16}, {128, 128}, {32, 48}};
    uint64_t rng = 11;
    double worst = 0;
    for (size_t di = 0; di < 3; di++)
        for (size_t li = 0; li < 5; li++) {
            int64_t n = lens[li], dk = dims[di][0], dv = dims[di][1];
            inputs in = make(n, dk, dv, &rng);
            float *S1 = calloc((size_t)(dk * dv), sizeof(float)), *S2 = calloc((size_t)(dk * dv), sizeof(float));
            float *o1 = malloc((size_t)(n * dv) * sizeof(float)), *o2 = malloc((size_t)(n * dv) * sizeof(float));
            float *work = malloc((size_t)td_deltanet_chunk_work(TD_DELTANET_CHUNK, dk, dv) * sizeof(float));
            for (int64_t t = 0; t < n; t++)
                td_deltanet_step_ref(S1, in.q + t * dk, in.k + t * dk, in.v + t * dv, in.g[t], in.beta[t], dk, dv, o1 + t * dv);
            for (int64_t t0 = 0; t0 < n; t0 += TD_DELTANET_CHUNK) {
                int64_t m = n - t0 < TD_DELTANET_CHUNK ? n - t0 : TD_DELTANET_CHUNK;
                td_deltanet_chunk_ref(S2, in.q + t0 * dk, in.k + t0 * dk, in.v + t0 * dv, in.g + t0, in.beta + t0, m, dk,
                                      dv, o2 + t0 * dv, work);
            }
            double eo = td_test_rel_diff(o2, o1, n * dv), es = td_test_rel_diff(S2, S1, dk * dv);
            if (eo > worst) worst = eo;
            if (es > worst) worst = es;
            CHECKF(eo <= 1e-5 && es <= 1e-5, "chunked vs recurrent, n %lld dk %lld dv %lld: outputs %.3g, state %.3g",
                   (long long)n, (long long)dk, (long long)dv, eo, es);
            release(&in);
            free(S1), free(S2), free(o1), free(o2), free(work);
        }
    printf("deltanet: worst relative difference chunked vs token-by-token %.3g\n", worst);
}

int main(void) {
    test_chunked_vs_recurrent();
    return td_test_finish("test_deltanet");
}
