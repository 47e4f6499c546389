/* Gated DeltaNet recurrence, scalar reference: the token-by-token form (td_deltanet_step_ref; deltanet_avx2.c holds
 * its AVX2 twin) and the chunked form (the same function, reorganised so a chunk's work is small matrix products;
 * transformers' torch_chunk_gated_delta_rule; no SIMD twin). */
#include <math.h>
#include <string.h>

#include "kernels/cpu/kernels.h"

void td_deltanet_step_ref(float *S, const float *q, const float *k, const float *v, float g, float beta, int64_t dk,
                          int64_t dv, float *o) {
    float decay = expf(g);
    for (int64_t j = 0; j < dv; j++) o[j] = 0.0f; /* o doubles as m = S^T k first */
    for (int64_t i = 0; i < dk; i++) {
        float *Si = S + i * dv;
        for (int64_t j = 0; j < dv; j++) {
            Si[j] *= decay;
            o[j] += Si[j] * k[i];
        }
    }
    float d[TD_DELTANET_MAX_DV];
    for (int64_t j = 0; j < dv; j++) d[j] = beta * (v[j] - o[j]);
    for (int64_t j = 0; j < dv; j++) o[j] = 0.0f;
    for (int64_t i = 0; i < dk; i++) {
        float *Si = S + i * dv;
        for (int64_t j = 0; j < dv; j++) {
            Si[j] += k[i] * d[j];
            o[j] += Si[j] * q[i];
        }
    }
}

int64_t td_deltanet_chunk_work(int64_t n, int64_t dk, int64_t dv) {
    return n /* G */ + 2 * n * n /* T, A */ + n * dv /* U */ + n * dk /* W */ + n * dv /* vnew */;
}

void td_deltanet_chunk_ref(float *S, const float *q, const float *k, const float *v, const float *g,
                           const float *beta, int64_t n, int64_t dk, int64_t dv, float *o, float *work) {
    float *G = work, *T = G + n, *A = T + n * n, *U = A + n * n, *W = U + n * dv, *vn = W + n * dk;
    /* G = cumulative log decay inside the chunk */
    float acc = 0.0f;
    for (int64_t t = 0; t < n; t++) G[t] = acc += g[t];
    /* T = (I + strictly-lower(beta_i k_i . k_j e^{G_i - G_j}))^{-1}, by forward substitution row by row */
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < n; j++) {
            float a = 0.0f;
            if (j < i) {
                float dot = 0.0f;
                for (int64_t c = 0; c < dk; c++) dot += (k[i * dk + c] * beta[i]) * k[j * dk + c];
                a = -(dot * expf(G[i] - G[j]));
            }
            T[i * n + j] = a;
        }
    for (int64_t i = 1; i < n; i++) {
        float row[TD_DELTANET_CHUNK];
        for (int64_t j = 0; j < i; j++) row[j] = T[i * n + j];
        for (int64_t j = 0; j < i; j++) {
            float s = 0.0f;
            for (int64_t m = 0; m < i; m++) s += row[m] * T[m * n + j];
            T[i * n + j] = row[j] + s;
        }
    }
    for (int64_t i = 0; i < n; i++) T[i * n + i] = 1.0f;
    /* U = T (beta v),  W = T (beta k e^{G}) */
    for (int64_t i = 0; i < n; i++) {
        for (int64_t c = 0; c < dv; c++) {
            float s = 0.0f;
            for (int64_t m = 0; m < n; m++) s += T[i * n + m] * (v[m * dv + c] * beta[m]);
            U[i * dv + c] = s;
        }
        for (int64_t c = 0; c < dk; c++) {
            float s = 0.0f;
            for (int64_t m = 0; m < n; m++) s += T[i * n + m] * ((k[m * dk + c] * beta[m]) * expf(G[m]));
            W[i * dk + c] = s;
        }
    }
    /* v_new = U - W S;  A = causal (q_i . k_j) e^{G_i - G_j} */
    for (int64_t i = 0; i < n; i++)
        for (int64_t c = 0; c < dv; c++) {
            float s = 0.0f;
            for (int64_t m = 0; m < dk; m++) s += W[i * dk + m] * S[m * dv + c];
            vn[i * dv + c] = U[i * dv + c] - s;
        }
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < n; j++) {
            float a = 0.0f;
            if (j <= i) {
                float dot = 0.0f;
                for (int64_t c = 0; c < dk; c++) dot += q[i * dk + c] * k[j * dk + c];
                a = dot * expf(G[i] - G[j]);
            }
            A[i * n + j] = a;
        }
    /* o = (q e^{G}) S + A v_new */
    for (int64_t i = 0; i < n; i++)
        for (int64_t c = 0; c < dv; c++) {
            float s = 0.0f, e = expf(G[i]);
            for (int64_t m = 0; m < dk; m++) s += (q[i * dk + m] * e) * S[m * dv + c];
            float s2 = 0.0f;
            for (int64_t j = 0; j < n; j++) s2 += A[i * n + j] * vn[j * dv + c];
            o[i * dv + c] = s + s2;
        }
    /* S = e^{G_last} S + sum_t (k_t e^{G_last - G_t}) v_new_t^T */
    float last = G[n - 1], el = expf(last);
    for (int64_t m = 0; m < dk; m++)
        for (int64_t c = 0; c < dv; c++) {
            float s = 0.0f;
            for (int64_t t = 0; t < n; t++) s += (k[t * dk + m] * expf(last - G[t])) * vn[t * dv + c];
            S[m * dv + c] = S[m * dv + c] * el + s;
        }
}
