/* Gated DeltaNet on the device: the causal depthwise convolution with SiLU (td_cu_conv) and the token-by-token
 * recurrence with its gated output norm (td_cu_deltanet).
 *
 * Shapes: the convolution runs one thread per (group, channel), 128 channels a block, the group's tokens in order
 * with the window of K - 1 inputs in registers, shifted as td_conv_step shifts the state; passes of more than 64
 * tokens run every (token, channel) at once and the states after. The recurrence runs one block of 128
 * threads per (group, value head); thread e owns state columns e, e + 128, ... (coalesced over e; 16 rows of a
 * column loaded at a time) and walks the group's tokens in order: per token q and k are l2-normalised (sum of
 * squares: each thread folds its elements ascending, then td_dev_block_sum's fixed tree), then per column
 * td_deltanet_step_ref's order exactly (decay multiply; m = sum_i S[i][e] k[i], i ascending, mul then add;
 * d = beta (v - m); S[i][e] += k[i] d; o = sum_i S[i][e] q[i] ascending), then the gated RMS norm (sum of o^2 in
 * double by the fixed tree). At dk = 128, dv <= 128 deltanet_reg_kernel does the same with thread e's state column
 * in registers for the whole launch (below; TD_CUDA_DN=old keeps deltanet_kernel): the same bits; by default, where dv
 * is a multiple of 32 up to 128, deltanet_warp_kernel spreads those columns over blocks of one warp (below).
 * Batch invariance: a (group, head) reads its own tokens' inputs and its own sequence's state only, in position
 * order; nothing depends on the number of groups, on the other groups, or on how a sequence was split into launches
 * (the state carries over in device memory, bit for bit). */
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda/common.cuh"

#define CV_NT 128
#define DN_NT 128
#define DN_MAXD 1024 /* TD_MAX_HEAD_DIM: dk and dv */
#define DN_B 16      /* state loads in flight together */

/* One output of td_conv_step: the window's K - 1 inputs (oldest first) and the token's own against the channel's K
 * weights, in the CPU's order, then SiLU. Both conv kernels below compute their outputs with it. */
template <int K>
__device__ __forceinline__ float conv_silu(const float (&wc)[K], const float *win, float xc) {
    float s = 0.0f;
#pragma unroll
    for (int j = 0; j < K - 1; j++) s += wc[j] * win[j];
    s += wc[K - 1] * xc;
    return s / (1.0f + expf(-s));
}

/* The causal conv + SiLU of td_conv_step (the CPU's expressions, in its order): one thread per channel, a group's
 * tokens in order; the window of K - 1 inputs in registers, read from the state before the group's first token and
 * written back after its last (a kernel that kept the window in the state's global memory took ~1.5 ms a layer for a
 * 2048-token group on the H100: each token waited on the last one's stores). */
template <int K>
__global__ void __launch_bounds__(CV_NT) conv_kernel(float *__restrict__ out, const float *x,
                                                         float *__restrict__ state, int64_t seq_stride,
                                                         const float *__restrict__ w, int64_t C,
                                                         int64_t blocks_per_group, const int32_t *__restrict__ grp_seq,
                                                         const int32_t *__restrict__ grp_off,
                                                         const int32_t *__restrict__ grp_tok) {
    const int64_t gi = blockIdx.x / blocks_per_group;
    const int64_t c = (blockIdx.x % blocks_per_group) * CV_NT + threadIdx.x;
    float *st = state + (int64_t)grp_seq[gi] * seq_stride;
    float wc[K], win[K > 1 ? K - 1 : 1];
    if (c < C) { /* the weights, and the layer's conv state, which no other kernel of a pass touches */
#pragma unroll
        for (int j = 0; j < K; j++) wc[j] = w[c * K + j];
#pragma unroll
        for (int j = 0; j < K - 1; j++) win[j] = st[j * C + c];
    }
    td_pdl_wait();
    if (c >= C) return;
    const int32_t k1 = grp_off[gi + 1];
#pragma unroll 4
    for (int32_t k = grp_off[gi]; k < k1; k++) {
        const int64_t t = grp_tok[k];
        const float xc = td_ld_pass(x + t * C + c);
        out[t * C + c] = conv_silu<K>(wc, win, xc);
#pragma unroll
        for (int j = 0; j + 1 < K - 1; j++) win[j] = win[j + 1];
        if constexpr (K > 1) win[K - 2] = xc;
    }
#pragma unroll
    for (int j = 0; j < K - 1; j++) st[j * C + c] = win[j];
}

/* conv_kernel's outputs for passes of many tokens: a block per (CV_PT tokens k of grp_tok's order, 128 channels),
 * the first token's group found by bisecting grp_off, its K - 1 inputs before it read from x (or the state's rows
 * before the group's first); then token after token the window shifts as conv_kernel's does (reloaded from the state
 * where a group starts): the same values, expression and order. The state is left for conv_state_kernel. (A block
 * a token bisected and loaded its window for each of its 128 outputs: 500 us a DeltaNet layer for a decide pass of
 * 144 x 45 tokens on the H100, latency of dependent loads.) */
#define CV_PT 16
template <int K>
__global__ void __launch_bounds__(CV_NT) conv_par_kernel(float *__restrict__ out, const float *x,
                                                         const float *__restrict__ state, int64_t seq_stride,
                                                         const float *__restrict__ w, int64_t C, int64_t n_groups,
                                                         int64_t n_tok, const int32_t *__restrict__ grp_seq,
                                                         const int32_t *__restrict__ grp_off,
                                                         const int32_t *__restrict__ grp_tok) {
    td_pdl_wait();
    const int64_t kb = (int64_t)blockIdx.x * CV_PT, c = (int64_t)blockIdx.y * CV_NT + threadIdx.x;
    if (c >= C) return;
    const int64_t ke = kb + CV_PT < n_tok ? kb + CV_PT : n_tok;
    int64_t lo = 0, hi = n_groups - 1; /* the last group starting at or before kb */
    while (lo < hi) {
        const int64_t mid = (lo + hi + 1) / 2;
        if (grp_off[mid] <= kb) lo = mid;
        else hi = mid - 1;
    }
    const int64_t k0 = grp_off[lo];
    int64_t kn = grp_off[lo + 1]; /* the next group's first token */
    const float *st = state + (int64_t)grp_seq[lo] * seq_stride;
    float wc[K], win[K - 1];
#pragma unroll
    for (int j = 0; j < K; j++) wc[j] = w[c * K + j];
#pragma unroll
    for (int j = 0; j < K - 1; j++) {
        const int64_t i = kb - (K - 1) + j; /* the input j steps into the window: a token of the group or a state row */
        win[j] = i >= k0 ? td_ld_pass(x + (int64_t)grp_tok[i] * C + c) : st[(i - k0 + K - 1) * C + c];
    }
    for (int64_t k = kb; k < ke; k++) {
        while (k == kn) { /* a group starts at k: its window is its state's rows */
            lo++, kn = grp_off[lo + 1];
            st = state + (int64_t)grp_seq[lo] * seq_stride;
#pragma unroll
            for (int j = 0; j < K - 1; j++) win[j] = st[j * C + c];
        }
        const int64_t t = grp_tok[k];
        const float xc = td_ld_pass(x + t * C + c);
        out[t * C + c] = conv_silu<K>(wc, win, xc);
#pragma unroll
        for (int j = 0; j + 1 < K - 1; j++) win[j] = win[j + 1];
        win[K - 2] = xc;
    }
}

/* After conv_par_kernel: each group's state becomes its last K - 1 inputs (the old rows where the group is shorter),
 * as conv_kernel's shifts leave it. */
template <int K>
__global__ void __launch_bounds__(CV_NT) conv_state_kernel(const float *x, float *__restrict__ state,
                                                           int64_t seq_stride, int64_t C,
                                                           const int32_t *__restrict__ grp_seq,
                                                           const int32_t *__restrict__ grp_off,
                                                           const int32_t *__restrict__ grp_tok) {
    td_pdl_wait();
    const int64_t gi = blockIdx.x, c = (int64_t)blockIdx.y * CV_NT + threadIdx.x;
    if (c >= C) return;
    float *st = state + (int64_t)grp_seq[gi] * seq_stride;
    const int64_t k0 = grp_off[gi], n = grp_off[gi + 1] - k0;
    float nw[K - 1];
#pragma unroll
    for (int j = 0; j < K - 1; j++) {
        const int64_t q = n - (K - 1) + j;
        nw[j] = q >= 0 ? td_ld_pass(x + (int64_t)grp_tok[k0 + q] * C + c) : st[(q + K - 1) * C + c];
    }
#pragma unroll
    for (int j = 0; j < K - 1; j++) st[j * C + c] = nw[j];
}

#ifndef TD_CU_EMU /* tests/cuda/emu compiles the kernels alone */
extern "C" int td_cu_conv(float *out, const float *x, float *state, int64_t seq_stride, const float *w, int64_t K,
                          int64_t C, const td_cu_groups *g, void *stream) {
    if (g->n_groups <= 0 || C <= 0) return 0;
    if (K < 1) return td_cu_failf("td_cu_conv: kernel size %lld", (long long)K);
    int64_t bpg = (C + CV_NT - 1) / CV_NT;
    if (g->n_groups * bpg > 0x7fffffff) return td_cu_failf("td_cu_conv: %lld groups is beyond one launch",
                                                           (long long)g->n_groups);
    if (K > 8) return td_cu_failf("td_cu_conv: kernel size %lld (the GPU's conv takes 1 .. 8)", (long long)K);
    const unsigned grid = (unsigned)(g->n_groups * bpg);
    cudaStream_t s = TD_CU_STREAM(stream);
    if (g->n_tok > 64 && g->n_tok <= 0x7fffffff && K > 1 && bpg <= 65535) {
        const dim3 gt((unsigned)((g->n_tok + CV_PT - 1) / CV_PT), (unsigned)bpg);
        const dim3 gg((unsigned)g->n_groups, (unsigned)bpg);
        switch (K) {
#define CONV_PAR(KK)                                                                                               \
    case KK:                                                                                                       \
        conv_par_kernel<KK><<<gt, CV_NT, 0, s>>>(out, x, state, seq_stride, w, C, g->n_groups, g->n_tok,           \
                                                 g->grp_seq, g->grp_off, g->grp_tok);                              \
        if (td_cu_launched("conv (every token at once)")) return -1;                                               \
        conv_state_kernel<KK><<<gg, CV_NT, 0, s>>>(x, state, seq_stride, C, g->grp_seq, g->grp_off, g->grp_tok);  \
        break;
            CONV_PAR(2) CONV_PAR(3) CONV_PAR(4) CONV_PAR(5) CONV_PAR(6) CONV_PAR(7) CONV_PAR(8)
#undef CONV_PAR
        }
        return td_cu_launched("conv (the states)");
    }
    switch (K) { /* Qwen3.5's is 4 */
#define CONV(KK)                                                                                                   \
    case KK:                                                                                                       \
        conv_kernel<KK><<<grid, CV_NT, 0, s>>>(out, x, state, seq_stride, w, C, bpg, g->grp_seq, g->grp_off,      \
                                               g->grp_tok);                                                        \
        break;
        CONV(1) CONV(2) CONV(3) CONV(4) CONV(5) CONV(6) CONV(7) CONV(8)
#undef CONV
    }
    return td_cu_launched("conv");
}
#endif

__device__ __forceinline__ float softplus(float x) { return x > 20.0f ? x : log1pf(expf(x)); }

/* A token's beta = sigmoid(b) and decay = e^g, g = -e^(a_log) softplus(a + dt_bias) (neg_a = -e^(a_log)), as
 * head_inputs() computes them: every kernel below takes them from here. */
__device__ __forceinline__ void dn_gates(float b, float a, float neg_a, float dtb, float &beta, float &decay) {
    beta = 1.0f / (1.0f + expf(-b));
    const float g = neg_a * softplus(a + dtb);
    decay = expf(g);
}
/* td_gated_rmsnorm's output from the head's scale r (td_dev_rms_scale of its sum of o^2, by the fixed tree). */
__device__ __forceinline__ float dn_norm_out(float w, float o, float r, float z) {
    return (w * (o * r)) * (z / (1.0f + expf(-z)));
}

__global__ void __launch_bounds__(DN_NT)
    deltanet_kernel(float *__restrict__ core, const float *u, int64_t ldu, const float *z,
                    const float *b, const float *a, const float *__restrict__ a_log,
                    const float *__restrict__ dt_bias, const float *__restrict__ norm_w, float *__restrict__ state,
                    int64_t seq_stride, int64_t Hk, int64_t Hv, int64_t dk, int64_t dv, float eps,
                    const int32_t *__restrict__ grp_seq, const int32_t *__restrict__ grp_off,
                    const int32_t *__restrict__ grp_tok) {
    td_pdl_wait();
    __shared__ float qs[DN_MAXD], ks[DN_MAXD], os[DN_MAXD]; /* os[e]: thread e % DN_NT's alone */
    __shared__ float redf[DN_NT / 32 + 1];
    __shared__ double redd[DN_NT / 32 + 1];
    const int tid = threadIdx.x;
    const int64_t gi = blockIdx.x / Hv, h = blockIdx.x % Hv, kh = h / (Hv / Hk);
    float *S = state + (int64_t)grp_seq[gi] * seq_stride + h * dk * dv;
    const float qscale = (float)(1.0 / sqrt((double)dk)); /* as head_inputs() */
    const float neg_a = -expf(a_log[h]), dtb = dt_bias[h];
    const int64_t key_dim = Hk * dk, value_dim = Hv * dv;

    for (int32_t it = grp_off[gi]; it < grp_off[gi + 1]; it++) {
        const int64_t t = grp_tok[it];
        const float *ut = u + t * ldu;
        /* q, k of key head kh: td_l2norm (eps 1e-6), q then * 1/sqrt(dk) */
        float ssq = 0.0f, ssk = 0.0f;
        for (int64_t i = tid; i < dk; i += DN_NT) {
            float qv = td_ld_pass(ut + kh * dk + i), kv = td_ld_pass(ut + key_dim + kh * dk + i);
            qs[i] = qv;
            ks[i] = kv;
            ssq += qv * qv;
            ssk += kv * kv;
        }
        ssq = td_dev_block_sum<DN_NT>(ssq, redf);
        ssk = td_dev_block_sum<DN_NT>(ssk, redf);
        const float rq = 1.0f / sqrtf(ssq + 1e-6f), rk = 1.0f / sqrtf(ssk + 1e-6f);
        for (int64_t i = tid; i < dk; i += DN_NT) {
            qs[i] = (qs[i] * rq) * qscale;
            ks[i] = ks[i] * rk;
        }
        __syncthreads();
        float beta, decay;
        dn_gates(td_ld_pass(b + t * Hv + h), td_ld_pass(a + t * Hv + h), neg_a, dtb, beta, decay);
        const float *vt = ut + 2 * key_dim + h * dv;
        double ss = 0.0;
        for (int64_t e = tid; e < dv; e += DN_NT) {
            /* m = (decay S)^T k; the decayed column is recomputed (same rounding) in the second pass rather than
             * stored twice. DN_B loads of the column are issued together, then the chain runs over them. */
            float *Se = S + e;
            float m = 0.0f;
            int64_t i = 0;
            for (; i + DN_B <= dk; i += DN_B) {
                float sv[DN_B];
#pragma unroll
                for (int b = 0; b < DN_B; b++) sv[b] = Se[(i + b) * dv];
#pragma unroll
                for (int b = 0; b < DN_B; b++) m = m + (sv[b] * decay) * ks[i + b];
            }
            for (; i < dk; i++) m = m + (Se[i * dv] * decay) * ks[i];
            const float d = beta * (td_ld_pass(vt + e) - m);
            float oe = 0.0f;
            for (i = 0; i + DN_B <= dk; i += DN_B) {
                float sv[DN_B];
#pragma unroll
                for (int b = 0; b < DN_B; b++) sv[b] = Se[(i + b) * dv];
#pragma unroll
                for (int b = 0; b < DN_B; b++) {
                    const float s = (sv[b] * decay) + ks[i + b] * d;
                    Se[(i + b) * dv] = s;
                    oe = oe + s * qs[i + b];
                }
            }
            for (; i < dk; i++) {
                const float s = (Se[i * dv] * decay) + ks[i] * d;
                Se[i * dv] = s;
                oe = oe + s * qs[i];
            }
            os[e] = oe;
            ss += (double)oe * (double)oe;
        }
        /* td_gated_rmsnorm(o, z, norm_w, dv, eps) */
        ss = td_dev_block_sum<DN_NT>(ss, redd); /* also: every thread is done with qs, ks of this token */
        const float r = td_dev_rms_scale(ss, dv, eps);
        const float *zt = z + t * value_dim + h * dv;
        float *ct = core + t * value_dim + h * dv;
        for (int64_t e = tid; e < dv; e += DN_NT) {
            float zi = td_ld_pass(zt + e);
            ct[e] = dn_norm_out(norm_w[e], os[e], r, zi);
        }
    }
}

/* ---- the recurrence with the state in registers (dk = DK = 128, dv <= 128): deltanet_reg_kernel ----
 * The same block per (group, value head) and the same 128 threads as deltanet_kernel, but thread e holds its state
 * column e (DK floats) in registers for the whole launch: loaded once at the start, stored once at the end (the
 * same [dk, dv] layout in global memory, so snapshots and forks copy it as before) instead of read and written in
 * global memory for every token. Every value has deltanet_kernel's expression and order, so its bits: the q, k
 * l2 norms (the same loads, td_dev_block_sum<128> tree), beta and the decay (the same expressions), per column the
 * chains m = m + (S[i] * decay) * k[i] and o = o + s * q[i] with s = (S[i] * decay) + k[i] * d, i ascending, and
 * the gated RMS norm (the same double tree). One difference of schedule only: the chain for m of token j + 1 runs
 * in the same loop as token j's update and o (it needs token j's updated S[i] and nothing else of token j), so the
 * two serial chains of a token overlap; the q, k of two tokens are staged in shared memory (double buffered), and a
 * token's inputs are loaded from global memory during the token two before it (dn_load), so the block waits on no
 * load between tokens. */
struct dn_tok {
    float beta, decay, v, z;
};

/* A token's inputs as this thread reads them (row t of u, b, a, z): its elements of q and k of key head kh, b, a, and
 * its column's v and z; loaded a token ahead of their use, so that the loads' latency overlaps the token before. */
template <int DK> struct dn_raw {
    static constexpr int PT = (DK + DN_NT - 1) / DN_NT; /* elements of q and k a thread loads */
    float q[PT], k[PT], b, a, v, z;
};
template <int DK>
__device__ __forceinline__ dn_raw<DK> dn_load(const float *u, int64_t ldu, const float *b, const float *a,
                                              const float *z, int64_t t, int h, int kh, int Hk, int Hv, int dv,
                                              bool live) {
    const int tid = threadIdx.x, key_dim = Hk * DK;
    const float *ut = u + t * ldu;
    dn_raw<DK> r;
#pragma unroll
    for (int j = 0; j < dn_raw<DK>::PT; j++) {
        const int i = tid + j * DN_NT;
        r.q[j] = i < DK ? td_ld_pass(ut + kh * DK + i) : 0.0f;
        r.k[j] = i < DK ? td_ld_pass(ut + key_dim + kh * DK + i) : 0.0f;
    }
    r.b = td_ld_pass(b + t * Hv + h), r.a = td_ld_pass(a + t * Hv + h);
    r.v = live ? td_ld_pass(ut + 2 * key_dim + h * dv + tid) : 0.0f;
    r.z = live ? td_ld_pass(z + t * (int64_t)Hv * dv + h * dv + tid) : 0.0f;
    return r;
}

/* This thread's share of a loaded token's sums of squares of q and k (deltanet_kernel's order: from +0). */
template <int DK> __device__ __forceinline__ void dn_squares(const dn_raw<DK> &raw, float &ssq, float &ssk) {
    ssq = 0.0f, ssk = 0.0f;
#pragma unroll
    for (int j = 0; j < dn_raw<DK>::PT; j++)
        if (threadIdx.x + j * DN_NT < DK) {
            ssq += raw.q[j] * raw.q[j];
            ssk += raw.k[j] * raw.k[j];
        }
}

/* A loaded token with its block sums ssq, ssk: qs, ks <- the normalised q, k (deltanet_kernel's code), and this
 * thread's beta, decay, v and z. The caller synchronises the block before qs, ks are read. */
template <int DK>
__device__ __forceinline__ dn_tok dn_finish(float *qs, float *ks, const dn_raw<DK> &raw, float ssq, float ssk,
                                            float qscale, float neg_a, float dtb) {
    const int tid = threadIdx.x;
    const float rq = 1.0f / sqrtf(ssq + 1e-6f), rk = 1.0f / sqrtf(ssk + 1e-6f);
#pragma unroll
    for (int j = 0; j < dn_raw<DK>::PT; j++) {
        const int i = tid + j * DN_NT;
        if (i < DK) {
            qs[i] = (raw.q[j] * rq) * qscale;
            ks[i] = raw.k[j] * rk;
        }
    }
    dn_tok r;
    dn_gates(raw.b, raw.a, neg_a, dtb, r.beta, r.decay);
    r.v = raw.v, r.z = raw.z;
    return r;
}

/* Stages a loaded token on its own: its sums (one reduction; its double unused), dn_finish, and a barrier (qs, ks
 * ready). */
template <int DK>
__device__ __forceinline__ dn_tok dn_stage(float *qs, float *ks, double *redd, float *redf, const dn_raw<DK> &raw,
                                           float qscale, float neg_a, float dtb) {
    float ssq, ssk;
    double none = 0.0;
    dn_squares<DK>(raw, ssq, ssk);
    td_dev_block_sum3<DN_NT>(none, ssq, ssk, redd, redf); /* each by td_dev_block_sum's tree */
    const dn_tok r = dn_finish<DK>(qs, ks, raw, ssq, ssk, qscale, neg_a, dtb);
    __syncthreads();
    return r;
}

/* m = (S decay)^T k of a state column in registers (deltanet_kernel's chain, i ascending): a group's first token's. */
template <int DK> __device__ __forceinline__ float dn_column_m(const float (&S)[DK], float decay, const float *k) {
    float m = 0.0f;
#pragma unroll
    for (int i = 0; i < DK; i++) m = m + (S[i] * decay) * k[i];
    return m;
}

/* One token of a state column in registers (deltanet_kernel's expressions and order, i ascending): S = S decay + k d,
 * and o = S^T q returned; with `next`, also m <- (S' decay') ^T k' of the next token in the same loop (that chain
 * needs this token's updated S only), so the two serial chains of a token overlap. */
template <int DK>
__device__ __forceinline__ float dn_column_token(float (&S)[DK], const float *qc, const float *kc, float decay, float d,
                                                 bool next, const float *kn, float next_decay, float &m) {
    float o = 0.0f;
    if (next) {
        float mn = 0.0f;
#pragma unroll
        for (int i = 0; i < DK; i++) {
            const float s = (S[i] * decay) + kc[i] * d;
            S[i] = s;
            o = o + s * qc[i];
            mn = mn + (s * next_decay) * kn[i];
        }
        m = mn;
    } else {
#pragma unroll
        for (int i = 0; i < DK; i++) {
            const float s = (S[i] * decay) + kc[i] * d;
            S[i] = s;
            o = o + s * qc[i];
        }
    }
    return o;
}

template <int DK>
__global__ void __launch_bounds__(DN_NT, 1)
    deltanet_reg_kernel(float *__restrict__ core, const float *u, int64_t ldu, const float *z, const float *b,
                        const float *a, const float *__restrict__ a_log, const float *__restrict__ dt_bias,
                        const float *__restrict__ norm_w, float *__restrict__ state, int64_t seq_stride, int64_t Hk,
                        int64_t Hv, int64_t dv, float eps, const int32_t *__restrict__ grp_seq,
                        const int32_t *__restrict__ grp_off, const int32_t *__restrict__ grp_tok) {
    td_pdl_wait();
    /* head counts and dims fit an int here (td_cu_deltanet checks them) */
    __shared__ __align__(16) float qs[2][DK];
    __shared__ __align__(16) float ks[2][DK];
    __shared__ float redf[2 * (DN_NT / 32 + 1)]; /* td_dev_block_sum3's two float sums */
    __shared__ double redd[DN_NT / 32 + 1];
    const int tid = threadIdx.x;
    const int hv = (int)Hv, hk = (int)Hk, ndv = (int)dv;
    const int gi = (int)(blockIdx.x / (unsigned)hv), h = (int)(blockIdx.x % (unsigned)hv), kh = h / (hv / hk);
    const int32_t i0 = grp_off[gi], i1 = grp_off[gi + 1];
    if (i0 >= i1) return; /* the whole block: no token, state untouched */
    const bool live = tid < ndv;
    float *Se = state + (int64_t)grp_seq[gi] * seq_stride + (int64_t)h * DK * ndv + (live ? tid : 0);
    const float qscale = (float)(1.0 / sqrt((double)DK)); /* as head_inputs() */
    const float neg_a = -expf(a_log[h]), dtb = dt_bias[h];
    const int value_dim = hv * ndv;

    float S[DK];
#pragma unroll
    for (int i = 0; i < DK; i++) S[i] = live ? Se[i * ndv] : 0.0f;

    /* the first two tokens staged on their own; from then on token it + 2 is staged at the end of token it, its sums
     * in the same reduction as token it's norm */
    dn_tok cur = dn_stage<DK>(qs[0], ks[0], redd, redf,
                              dn_load<DK>(u, ldu, b, a, z, grp_tok[i0], h, kh, hk, hv, ndv, live), qscale, neg_a, dtb);
    dn_tok nxt = cur;
    if (i0 + 1 < i1)
        nxt = dn_stage<DK>(qs[1], ks[1], redd, redf,
                           dn_load<DK>(u, ldu, b, a, z, grp_tok[i0 + 1], h, kh, hk, hv, ndv, live), qscale, neg_a, dtb);
    float m = dn_column_m<DK>(S, cur.decay, ks[0]);

    for (int32_t it = i0; it < i1; it++) {
        const int buf = (it - i0) & 1;
        const int64_t t = grp_tok[it];
        const float *qc = qs[buf], *kc = ks[buf], *kn = ks[buf ^ 1];
        const float d = cur.beta * (cur.v - m);
        const float zc = cur.z;
        const bool more2 = it + 2 < i1; /* block-uniform, as it + 1 < i1 */
        dn_raw<DK> after; /* token it + 2's inputs, in flight while this token runs */
        if (more2) after = dn_load<DK>(u, ldu, b, a, z, grp_tok[it + 2], h, kh, hk, hv, ndv, live);
        const float o = dn_column_token<DK>(S, qc, kc, cur.decay, d, it + 1 < i1, kn, nxt.decay, m);
        if (it + 1 < i1) cur = nxt;
        /* td_gated_rmsnorm(o, z, norm_w, dv, eps), deltanet_kernel's code for dv <= DN_NT; its sum in one reduction
         * with token it + 2's sums of squares */
        double ss = 0.0;
        if (live) ss += (double)o * (double)o;
        float ssq = 0.0f, ssk = 0.0f;
        if (more2) dn_squares<DK>(after, ssq, ssk);
        td_dev_block_sum3<DN_NT>(ss, ssq, ssk, redd, redf); /* also: every thread is done with qs[buf], ks[buf] */
        const float r = td_dev_rms_scale(ss, ndv, eps);
        if (live) core[t * value_dim + h * ndv + tid] = dn_norm_out(norm_w[tid], o, r, zc);
        if (more2) { /* token it + 2 into this token's buffers */
            nxt = dn_finish<DK>(qs[buf], ks[buf], after, ssq, ssk, qscale, neg_a, dtb);
            __syncthreads();
        }
    }
    if (live) {
#pragma unroll
        for (int i = 0; i < DK; i++) Se[i * ndv] = S[i];
    }
}

/* ---- the recurrence by warps (the default where dk = 128, dv = 32, 64, 96 or 128): deltanet_warp_kernel, then
 * dn_norm_kernel ----
 * Every column of S evolves on its own (its decay, its m = S^T k, its update and its o = S^T q read q, k, beta and
 * the decay of the token, and nothing of the other columns), so deltanet_reg_kernel's columns can be spread over
 * blocks: here a block is one warp owning 32 columns of one (group, value head), four blocks a head at dv = 128,
 * with no block barrier in the token loop. Each lane keeps its column in registers and computes deltanet_reg_kernel's
 * chains exactly (the same expressions, i ascending, m of token j + 1 in token j's loop). q and k's sums of squares
 * take td_dev_block_sum<128>'s tree over the 128 elements (lane l holds elements l, l + 32, l + 64, l + 96: the four
 * warps' trees as four shuffle trees, then (w0 + w2) + (w1 + w3), the tree warp 0 runs over [w0 w1 w2 w3 0 ...]),
 * so the same normalised q and k. The output's gated RMS norm needs the whole head's o, so the recurrence writes o
 * (before the norm) and dn_norm_kernel, a block of DN_NT threads per (token, head), applies it with
 * deltanet_reg_kernel's code and tree: the same bits, one more launch. On the H100 (qwen3.5-0.8b, bf16, against the
 * register kernel in the same call): prefill 2048 +29%, decide +6.5%, one criterion 3.97 -> 3.55 ms, decode +4.7%. */
#define DW_C 32 /* columns a block */

/* The four-warp tree of td_dev_block_sum<128> (float) over elements lane + 32 j (v[j]), every lane gets it. */
__device__ __forceinline__ float dw_sum128(const float (&v)[4]) {
    float w[4];
#pragma unroll
    for (int j = 0; j < 4; j++) w[j] = td_dev_warp_reduce(v[j], td_dev_add());
    const int lane = threadIdx.x & 31;
    float x = 0.0f; /* warp 0's second round: lane j < 4 holds w[j] (lane 0's), the others 0 */
#pragma unroll
    for (int j = 0; j < 4; j++) {
        const float wj = __shfl_sync(0xffffffffu, w[j], 0);
        if (lane == j) x = wj;
    }
    x = td_dev_warp_reduce(x, td_dev_add());
    return __shfl_sync(0xffffffffu, x, 0);
}

/* A token's inputs as a lane reads them: q and k elements lane + 32 j of key head kh, b, a, and the lane's column's
 * v (e: the column). */
struct dw_raw {
    float q[4], k[4], b, a, v;
};
__device__ __forceinline__ dw_raw dw_load(const float *u, int64_t ldu, const float *b, const float *a, int64_t t,
                                          int h, int kh, int Hk, int Hv, int dv, int e) {
    const int lane = threadIdx.x & 31, key_dim = Hk * 128;
    const float *ut = u + t * ldu;
    dw_raw r;
#pragma unroll
    for (int j = 0; j < 4; j++) {
        r.q[j] = td_ld_pass(ut + kh * 128 + lane + 32 * j);
        r.k[j] = td_ld_pass(ut + key_dim + kh * 128 + lane + 32 * j);
    }
    r.b = td_ld_pass(b + t * Hv + h), r.a = td_ld_pass(a + t * Hv + h);
    r.v = td_ld_pass(ut + 2 * key_dim + h * dv + e);
    return r;
}

/* A loaded token staged: qs, ks <- the normalised q, k (dn_finish's expressions, the sums by dw_sum128), and its
 * beta, decay and v; a __syncwarp before qs, ks are read. */
__device__ __forceinline__ dn_tok dw_stage(float *qs, float *ks, const dw_raw &raw, float qscale, float neg_a,
                                           float dtb) {
    const int lane = threadIdx.x & 31;
    float sq[4], sk[4];
#pragma unroll
    for (int j = 0; j < 4; j++) sq[j] = 0.0f + raw.q[j] * raw.q[j], sk[j] = 0.0f + raw.k[j] * raw.k[j];
    const float ssq = dw_sum128(sq), ssk = dw_sum128(sk);
    const float rq = 1.0f / sqrtf(ssq + 1e-6f), rk = 1.0f / sqrtf(ssk + 1e-6f);
#pragma unroll
    for (int j = 0; j < 4; j++) qs[lane + 32 * j] = (raw.q[j] * rq) * qscale, ks[lane + 32 * j] = raw.k[j] * rk;
    dn_tok r;
    dn_gates(raw.b, raw.a, neg_a, dtb, r.beta, r.decay);
    r.v = raw.v, r.z = 0.0f;
    __syncwarp();
    return r;
}

__global__ void __launch_bounds__(DW_C)
    deltanet_warp_kernel(float *__restrict__ core, const float *u, int64_t ldu,
                         const float *b, const float *a, const float *__restrict__ a_log,
                         const float *__restrict__ dt_bias, float *__restrict__ state, int64_t seq_stride, int Hk,
                         int Hv, int dv, const int32_t *__restrict__ grp_seq, const int32_t *__restrict__ grp_off,
                         const int32_t *__restrict__ grp_tok) {
    constexpr int DK = 128;
    __shared__ __align__(16) float qs[2][DK];
    __shared__ __align__(16) float ks[2][DK];
    const int nc = dv / DW_C; /* blocks a head */
    const int gi = (int)(blockIdx.x / (unsigned)(Hv * nc)), rest = (int)(blockIdx.x % (unsigned)(Hv * nc));
    const int h = rest / nc, e = (rest % nc) * DW_C + (int)(threadIdx.x & 31), kh = h / (Hv / Hk);
    const int32_t i0 = grp_off[gi], i1 = grp_off[gi + 1];
    if (i0 >= i1) return;
    float *Se = state + (int64_t)grp_seq[gi] * seq_stride + (int64_t)h * DK * dv + e;
    const float qscale = (float)(1.0 / sqrt((double)DK)); /* as head_inputs() */
    const float neg_a = -expf(a_log[h]), dtb = dt_bias[h];
    float S[DK]; /* the sequence's state of this layer: no other kernel of a pass touches it */
#pragma unroll
    for (int i = 0; i < DK; i++) S[i] = Se[(int64_t)i * dv];
    td_pdl_wait(); /* above: the pass's tables, the layer's weights and its state alone */
    const int64_t value_dim = (int64_t)Hv * dv;

    dn_tok cur = dw_stage(qs[0], ks[0], dw_load(u, ldu, b, a, grp_tok[i0], h, kh, Hk, Hv, dv, e), qscale, neg_a, dtb);
    dn_tok nxt = cur;
    if (i0 + 1 < i1)
        nxt = dw_stage(qs[1], ks[1], dw_load(u, ldu, b, a, grp_tok[i0 + 1], h, kh, Hk, Hv, dv, e), qscale, neg_a,
                       dtb);
    float m = dn_column_m<DK>(S, cur.decay, ks[0]);

    for (int32_t it = i0; it < i1; it++) {
        const int buf = (it - i0) & 1;
        const int64_t t = grp_tok[it];
        const float *qc = qs[buf], *kc = ks[buf], *kn = ks[buf ^ 1];
        const float d = cur.beta * (cur.v - m);
        const bool more2 = it + 2 < i1;
        dw_raw after; /* token it + 2's inputs, in flight while this token runs */
        if (more2) after = dw_load(u, ldu, b, a, grp_tok[it + 2], h, kh, Hk, Hv, dv, e);
        const float o = dn_column_token<DK>(S, qc, kc, cur.decay, d, it + 1 < i1, kn, nxt.decay, m);
        if (it + 1 < i1) cur = nxt;
        core[t * value_dim + h * dv + e] = o; /* before the norm: dn_norm_kernel */
        if (more2) {
            __syncwarp(); /* every lane is done with qs[buf], ks[buf] */
            nxt = dw_stage(qs[buf], ks[buf], after, qscale, neg_a, dtb);
        }
    }
#pragma unroll
    for (int i = 0; i < DK; i++) Se[(int64_t)i * dv] = S[i];
}

/* td_gated_rmsnorm over core's o of every token of the groups (blockIdx.x: the token's index in grp_tok, blockIdx.y:
 * the value head), in place: deltanet_reg_kernel's expressions and double tree (td_dev_block_sum<DN_NT>, the tree
 * its td_dev_block_sum3 gives the double). */
__global__ void __launch_bounds__(DN_NT)
    dn_norm_kernel(float *__restrict__ core, const float *z, const float *__restrict__ norm_w, int Hv,
                   int dv, float eps, const int32_t *__restrict__ grp_tok) {
    __shared__ double redd[DN_NT / 32 + 1];
    const int tid = threadIdx.x, h = (int)blockIdx.y;
    const bool live = tid < dv;
    const int64_t t = grp_tok[blockIdx.x], off = t * (int64_t)Hv * dv + (int64_t)h * dv + (live ? tid : 0);
    const float w = live ? norm_w[tid] : 0.0f;
    td_pdl_wait(); /* above: the pass's table and the norm's weights alone, which no kernel of a pass writes */
    const float o = live ? core[off] : 0.0f, zc = live ? td_ld_pass(z + off) : 0.0f;
    double ss = 0.0;
    if (live) ss += (double)o * (double)o;
    ss = td_dev_block_sum<DN_NT>(ss, redd);
    if (live) core[off] = dn_norm_out(w, o, td_dev_rms_scale(ss, dv, eps), zc);
}

#ifndef TD_CU_EMU

/* TD_CUDA_DN in the environment (read once per process): old keeps every shape on deltanet_kernel, reg on
 * deltanet_reg_kernel where it takes the shape (else the old); otherwise deltanet_warp_kernel where it takes the shape,
 * else those. td_cu_deltanet_test_mode: 1 as old, 2 the warps where they can, 3 as reg. */
static int dn_test_mode = 0;
static bool dn_env_is(const char *v) {
    const char *e = getenv("TD_CUDA_DN");
    return e && strcmp(e, v) == 0;
}
static bool dn_reg_enabled(void) {
    static const bool on = !dn_env_is("old");
    return dn_test_mode == 0 ? on : dn_test_mode != 1;
}
static bool dn_warp_enabled(void) {
    static const bool on = !dn_env_is("old") && !dn_env_is("reg");
    return dn_test_mode == 0 ? on : dn_test_mode == 2;
}

extern "C" void td_cu_deltanet_test_mode(int mode) { dn_test_mode = mode; }

extern "C" int td_cu_deltanet_regs(int64_t dk, int64_t dv) {
    return dn_reg_enabled() && dk == 128 && dv >= 1 && dv <= DN_NT;
}

extern "C" int td_cu_deltanet(float *core, const float *u, int64_t ldu, const float *z, const float *b, const float *a,
                              const float *a_log, const float *dt_bias, const float *norm_w, float *state,
                              int64_t seq_stride, int64_t Hk, int64_t Hv, int64_t dk, int64_t dv, float eps,
                              const td_cu_groups *g, void *stream) {
    if (g->n_groups <= 0 || Hv <= 0) return 0;
    if (Hk <= 0 || Hv % Hk)
        return td_cu_failf("td_cu_deltanet: %lld value heads over %lld key heads", (long long)Hv, (long long)Hk);
    if (dk <= 0 || dk > DN_MAXD || dv <= 0 || dv > DN_MAXD)
        return td_cu_failf("td_cu_deltanet: head dims %lld, %lld (1 .. %d)", (long long)dk, (long long)dv, DN_MAXD);
    if (g->n_groups * Hv > 0x7fffffff)
        return td_cu_failf("td_cu_deltanet: %lld groups x %lld heads is beyond one launch", (long long)g->n_groups,
                           (long long)Hv);
    /* the warps: dv a multiple of their 32 columns and at most dn_norm_kernel's DN_NT (the register kernel's norm) */
    if (dn_warp_enabled() && dk == 128 && dv % DW_C == 0 && dv <= DN_NT && g->n_tok > 0 && g->n_tok <= 0x7fffffff &&
        Hv <= 65535 && g->n_groups * Hv * (dv / DW_C) <= 0x7fffffff) {
        cudaStream_t s = TD_CU_STREAM(stream);
        deltanet_warp_kernel<<<(unsigned)(g->n_groups * Hv * (dv / DW_C)), DW_C, 0, s>>>(
            core, u, ldu, b, a, a_log, dt_bias, state, seq_stride, (int)Hk, (int)Hv, (int)dv, g->grp_seq, g->grp_off,
            g->grp_tok);
        if (td_cu_launched("deltanet (by warps)")) return -1;
        dn_norm_kernel<<<dim3((unsigned)g->n_tok, (unsigned)Hv), DN_NT, 0, s>>>(core, z, norm_w, (int)Hv, (int)dv, eps,
                                                                                 g->grp_tok);
        return td_cu_launched("deltanet (the gated norm)");
    }
    if (td_cu_deltanet_regs(dk, dv) && Hv <= 65536) { /* the kernel keeps head offsets in an int */
        deltanet_reg_kernel<128><<<(unsigned)(g->n_groups * Hv), DN_NT, 0, TD_CU_STREAM(stream)>>>(
            core, u, ldu, z, b, a, a_log, dt_bias, norm_w, state, seq_stride, Hk, Hv, dv, eps, g->grp_seq, g->grp_off,
            g->grp_tok);
        return td_cu_launched("deltanet (state in registers)");
    }
    deltanet_kernel<<<(unsigned)(g->n_groups * Hv), DN_NT, 0, TD_CU_STREAM(stream)>>>(
        core, u, ldu, z, b, a, a_log, dt_bias, norm_w, state, seq_stride, Hk, Hv, dk, dv, eps, g->grp_seq, g->grp_off,
        g->grp_tok);
    return td_cu_launched("deltanet");
}

#endif /* TD_CU_EMU */
