/* Gated DeltaNet on the device, the chunked form (td_cu_deltanet_chunk; cuda.h states the state layout and the order of
 * every reduction). Chunks of 64 positions anchored at position 0 of the sequence; a sequence's state is S at its last
 * chunk boundary plus the inputs of the up to 63 tokens after it, and every value below is computed over the whole
 * 64-row chunk in a fixed order in which a row that does not exist yet enters as exact zeros and never reaches an
 * earlier row: a token's output and the state after a completed chunk have the same bits however the sequence's tokens
 * were split into calls.
 *
 * Three kernels a call, fp32 arithmetic (compiled with --fmad=false: every product rounded, then the sum):
 *   dnc_prep_kernel   one block per (chunk, value head), all chunks of the call at once (nothing here needs S): the
 *                     chunk's rows (normalised q, k; v; g; beta) in shared memory, the cumulative gates, A, T = (I +
 *                     A)^-1 by forward substitution, and the chunk's products that do not involve S: W, U, Qg, Kd, P
 *                     (cuda.h), written to the scratch; the last chunk's open rows too (the tail).
 *   dnc_state_kernel  one block per (value head, slice of 16 value columns): walks the call's chunks in order with
 *                     its slice of S in shared memory (a column of S depends on that column of V and U only):
 *                     V' = U - W S0, o = Qg S0 + P V' (pre-norm, into core), and at a completed chunk
 *                     S = S0 gamma_end + Kd^T V'; at the end S and the tail go to the state.
 *   dnc_norm_kernel   the gated RMS norm of every new token's o in place (deltanet_kernel's expression and tree).
 * A one-token call (a decode step) runs dnc_step_kernel instead of the first two: the new row alone, from the open
 * rows' cached rows of T and V' (the state keeps them), with the same expressions and chains.
 * Many sequences (td_cu_deltanet_chunk_multi, a pass's groups) run as one set of these launches: a host-made table
 * maps each block to its group (dnc_bind), so a group's bits are those of its one-sequence call.
 * Plain fp32 on the CUDA cores; the products are the place for mma tiles later (bf16 mode only). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/ptx.cuh"

#define DNC_C 64     /* rows of a chunk: TD_CU_DNC_CHUNK */
#define DNC_NT 256   /* threads of the prep and state kernels */
#define DNC_CW 16    /* value columns of a state block */
#define DNC_NNT 128  /* threads of the norm kernel */
#define DNC_MAXD 128 /* dk and dv */

/* What the three kernels of a call share (plain values: the emulator builds it as the host does). */
struct dnc_args {
    float *core;
    const float *u;
    int64_t ldu;
    const float *z, *b, *a, *a_log, *dt_bias, *norm_w;
    float *state;   /* the sequence's chunk state: Hv heads of dnc_head_floats */
    float *scratch; /* nc * Hv chunk areas */
    float *tail;    /* Hv tail areas */
    const int32_t *tok;
    int Hk, Hv, dk, dv;
    float eps;
    int n, n0, nc; /* new tokens, open rows before them, chunks the call touches */
    /* many sequences (td_cu_deltanet_chunk_multi; NULL: the one above): group g's row gtab[6g ..] = {sequence, first
     * index into tok, n, n0, nc, first chunk}; prep block k's ctab[2k ..] = {group, chunk of the group} */
    const int32_t *gtab, *ctab;
    int64_t seq_stride;
};

/* The state of one value head (cuda.h): S [dk][dv], then the open rows' k [63][dk], v [63][dv], g [63], beta [63],
 * and their rows of T [63][64] and of V' [63][dv] (what a one-token call appends a row to, dnc_step_kernel). */
__host__ __device__ __forceinline__ int64_t dnc_head_floats(int dk, int dv) {
    return (int64_t)dk * dv + (int64_t)(DNC_C - 1) * (dk + 2 * dv + 2 + DNC_C);
}
struct dnc_open { /* the open rows of a head's state */
    float *K, *V, *g, *b, *T, *Vp;
};
__device__ __forceinline__ dnc_open dnc_open_rows(float *hs, int dk, int dv) {
    dnc_open o;
    o.K = hs + (int64_t)dk * dv, o.V = o.K + (DNC_C - 1) * dk, o.g = o.V + (DNC_C - 1) * dv, o.b = o.g + (DNC_C - 1);
    o.T = o.b + (DNC_C - 1), o.Vp = o.T + (DNC_C - 1) * DNC_C;
    return o;
}
/* A chunk area of the scratch: W, Qg, Kd [64][dk] each, U [64][dv], P [64][64], gamma_end (+3 floats of padding). */
__host__ __device__ __forceinline__ int64_t dnc_chunk_floats(int dk, int dv) {
    return (int64_t)DNC_C * (3 * dk + dv + DNC_C) + 4;
}
/* A tail area: k [64][dk], v [64][dv], g [64], beta [64], T [64][64]. */
__host__ __device__ __forceinline__ int64_t dnc_tail_floats(int dk, int dv) {
    return (int64_t)DNC_C * (dk + dv + 2 + DNC_C);
}

/* The arguments of group g of a many-sequence launch as a one-sequence call's (the kernels then read p alone). */
__device__ __forceinline__ dnc_args dnc_bind(const dnc_args &pa, int g) {
    if (!pa.gtab) return pa;
    dnc_args p = pa;
    const int32_t *r = pa.gtab + 6 * (int64_t)g;
    p.state = pa.state + (int64_t)r[0] * pa.seq_stride;
    p.tok = pa.tok + r[1];
    p.n = r[2], p.n0 = r[3], p.nc = r[4];
    p.scratch = pa.scratch + (int64_t)r[5] * pa.Hv * dnc_chunk_floats(pa.dk, pa.dv);
    p.tail = pa.tail + (int64_t)g * pa.Hv * dnc_tail_floats(pa.dk, pa.dv);
    return p;
}

__device__ __forceinline__ float dnc_softplus(float x) { return x > 20.0f ? x : log1pf(expf(x)); }

/* The sum over a warp by the xor butterfly 16, 8, 4, 2, 1: every lane ends with the same bits (each step adds the
 * same two partial sums on both lanes of a pair, and a + b = b + a exactly). */
__device__ __forceinline__ float dnc_warp_sum(float v) {
#pragma unroll
    for (int s = 16; s > 0; s >>= 1) v = v + __shfl_xor_sync(0xffffffffu, v, s);
    return v;
}

/* Token row t's normalised q (scaled) and k of key head kh, v, beta and g, by one warp (lane: its lane): q, k into
 * qr, kr, v into vr (dk, dk, dv floats); beta, g returned by lane 0. The one expression of cuda.h's order, shared by
 * the prep and step kernels. */
__device__ __forceinline__ void dnc_token_row(const dnc_args &p, int64_t t, int h, int kh, int lane, float *qr,
                                              float *kr, float *vr, float *beta, float *g) {
    const int dk = p.dk, dv = p.dv;
    const int64_t key_dim = (int64_t)p.Hk * dk;
    const float qscale = (float)(1.0 / sqrt((double)dk)); /* as head_inputs() */
    const float *ut = p.u + t * p.ldu;
    float ssq = 0.0f, ssk = 0.0f;
    for (int i = lane; i < dk; i += 32) {
        const float qv = ut[kh * dk + i], kv = ut[key_dim + kh * dk + i];
        ssq = ssq + qv * qv;
        ssk = ssk + kv * kv;
    }
    ssq = dnc_warp_sum(ssq);
    ssk = dnc_warp_sum(ssk);
    const float rq = 1.0f / sqrtf(ssq + 1e-6f), rk = 1.0f / sqrtf(ssk + 1e-6f);
    for (int i = lane; i < dk; i += 32) {
        qr[i] = (ut[kh * dk + i] * rq) * qscale;
        kr[i] = ut[key_dim + kh * dk + i] * rk;
    }
    for (int e = lane; e < dv; e += 32) vr[e] = ut[2 * key_dim + (int64_t)h * dv + e];
    if (lane == 0) {
        *beta = 1.0f / (1.0f + expf(-p.b[t * p.Hv + h]));
        *g = -expf(p.a_log[h]) * dnc_softplus(p.a[t * p.Hv + h] + p.dt_bias[h]);
    }
}

/* Shared memory of dnc_prep_kernel: Kn, Qn [64][dk + 1], V [64][dv + 1], A, T [64][65], G, gamma, beta, g, dte [64]. */
__host__ __device__ __forceinline__ size_t dnc_prep_smem(int dk, int dv) {
    return sizeof(float) * (size_t)(DNC_C * (2 * (dk + 1) + (dv + 1) + 2 * (DNC_C + 1) + 5));
}

__global__ void __launch_bounds__(DNC_NT, 1) dnc_prep_kernel(dnc_args pa) {
    td_pdl_wait();
    TD_DYN_SMEM16(float, sm);
    const int g = pa.ctab ? pa.ctab[2 * blockIdx.x] : 0;
    const dnc_args p = dnc_bind(pa, g);
    const int ci = pa.ctab ? pa.ctab[2 * blockIdx.x + 1] : (int)blockIdx.x;
    const int h = (int)blockIdx.y, dk = p.dk, dv = p.dv, kh = h / (p.Hv / p.Hk);
    const int lk = dk + 1, lv = dv + 1, la = DNC_C + 1;
    float *Kn = sm, *Qn = Kn + DNC_C * lk, *Vs = Qn + DNC_C * lk, *Am = Vs + DNC_C * lv, *Tm = Am + DNC_C * la;
    float *G = Tm + DNC_C * la, *gam = G + DNC_C, *bet = gam + DNC_C, *gs = bet + DNC_C, *dte = gs + DNC_C;
    const int tid = (int)threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const dnc_open so = dnc_open_rows(p.state + (int64_t)h * dnc_head_floats(dk, dv), dk, dv);
    const float *sK = so.K, *sV = so.V, *sg = so.g, *sb = so.b;

    /* the chunk's rows: warp w takes rows w, w + 8, ...; row r is an open row of the state (r < n0 in chunk 0), new
     * token j = 64 ci + r - n0 of the call, or absent (exact zeros) */
    for (int r = warp; r < DNC_C; r += DNC_NT / 32) {
        const int j = ci * DNC_C + r - p.n0;
        if (j < 0) {
            for (int i = lane; i < dk; i += 32) Kn[r * lk + i] = sK[r * dk + i], Qn[r * lk + i] = 0.0f;
            for (int e = lane; e < dv; e += 32) Vs[r * lv + e] = sV[r * dv + e];
            if (lane == 0) gs[r] = sg[r], bet[r] = sb[r];
        } else if (j < p.n) {
            dnc_token_row(p, p.tok[j], h, kh, lane, Qn + r * lk, Kn + r * lk, Vs + r * lv, &bet[r], &gs[r]);
        } else {
            for (int i = lane; i < dk; i += 32) Kn[r * lk + i] = 0.0f, Qn[r * lk + i] = 0.0f;
            for (int e = lane; e < dv; e += 32) Vs[r * lv + e] = 0.0f;
            if (lane == 0) gs[r] = 0.0f, bet[r] = 0.0f;
        }
    }
    __syncthreads();
    if (tid == 0) { /* G: the cumulative log decay, rows ascending from +0 */
        float acc = 0.0f;
        for (int r = 0; r < DNC_C; r++) G[r] = acc = acc + gs[r];
    }
    __syncthreads();
    if (tid < DNC_C) gam[tid] = expf(G[tid]), dte[tid] = expf(G[DNC_C - 1] - G[tid]);
    __syncthreads();
    float *ch = p.scratch + ((int64_t)ci * p.Hv + h) * dnc_chunk_floats(dk, dv);
    float *W = ch, *Qg = W + DNC_C * dk, *Kd = Qg + DNC_C * dk, *U = Kd + DNC_C * dk, *P = U + DNC_C * dv,
          *ge = P + DNC_C * DNC_C;
    /* 4 x 4 register tiles: thread (ty, tx) = (tid / 16, tid % 16) owns rows ty + 16 a and columns tx + 16 b of a
     * 64-column block (a, b < 4); each output is still one chain over its reduction index, ascending from +0 */
    const int ty = tid / 16, tx = tid % 16;
    /* A[i][j] = ((k_i . k_j) beta_i) expf(G_i - G_j) for j < i, else 0; P[t][s] = (q_t . k_s) expf(G_t - G_s) for
     * s <= t, else 0 (dots over c ascending); T's diagonal and upper part */
    {
        float ak[4][4], aq[4][4];
#pragma unroll
        for (int x = 0; x < 4; x++)
#pragma unroll
            for (int y = 0; y < 4; y++) ak[x][y] = 0.0f, aq[x][y] = 0.0f;
        for (int c = 0; c < dk; c++) {
            float ki[4], qi[4], kj[4];
#pragma unroll
            for (int x = 0; x < 4; x++) {
                ki[x] = Kn[(ty + 16 * x) * lk + c];
                qi[x] = Qn[(ty + 16 * x) * lk + c];
                kj[x] = Kn[(tx + 16 * x) * lk + c];
            }
#pragma unroll
            for (int x = 0; x < 4; x++)
#pragma unroll
                for (int y = 0; y < 4; y++) ak[x][y] = ak[x][y] + ki[x] * kj[y], aq[x][y] = aq[x][y] + qi[x] * kj[y];
        }
#pragma unroll
        for (int x = 0; x < 4; x++)
#pragma unroll
            for (int y = 0; y < 4; y++) {
                const int i = ty + 16 * x, j = tx + 16 * y;
                Am[i * la + j] = j < i ? (ak[x][y] * bet[i]) * expf(G[i] - G[j]) : 0.0f;
                Tm[i * la + j] = i == j ? 1.0f : 0.0f;
                P[i * DNC_C + j] = j <= i ? aq[x][y] * expf(G[i] - G[j]) : 0.0f;
            }
    }
    /* Qg = q_t gamma_t; Kd = k_s expf(G_63 - G_s) */
    for (int x = tid; x < DNC_C * dk; x += DNC_NT) {
        const int t = x / dk, i = x % dk;
        Qg[x] = Qn[t * lk + i] * gam[t];
        Kd[x] = Kn[t * lk + i] * dte[t];
    }
    if (tid == 0) ge[0] = gam[DNC_C - 1];
    /* the open rows after the call: the last chunk's rows [0, m) when it is not complete (dnc_state_kernel stores
     * them into the state once every prep block has read the state) */
    const int m = (p.n0 + p.n) % DNC_C;
    if (ci == p.nc - 1 && m != 0) {
        float *tl = p.tail + (int64_t)h * dnc_tail_floats(dk, dv);
        float *tK = tl, *tV = tK + DNC_C * dk, *tg = tV + DNC_C * dv, *tb = tg + DNC_C;
        for (int x = tid; x < m * dk; x += DNC_NT) tK[x] = Kn[(x / dk) * lk + x % dk];
        for (int x = tid; x < m * dv; x += DNC_NT) tV[x] = Vs[(x / dv) * lv + x % dv];
        if (tid < m) tg[tid] = gs[tid], tb[tid] = bet[tid];
    }
    __syncthreads();
    /* T = (I + A)^-1 row by row: T[i][j] = -(A[i][j] + sum_{m = j+1}^{i-1} A[i][m] T[m][j]), m ascending; warp 0
     * alone (lane l: columns l and l + 32), rows ordered by __syncwarp instead of 63 block barriers. Meanwhile the
     * other warps put the right-hand sides in place (q is done with): Qn <- k_m[i] (beta_m gamma_m),
     * Vs <- v_m[e] beta_m. */
    if (warp == 0) {
        for (int i = 1; i < DNC_C; i++) {
#pragma unroll
            for (int h2 = 0; h2 < 2; h2++) {
                const int j = lane + 32 * h2;
                if (j < i) {
                    float s = Am[i * la + j];
                    for (int mm = j + 1; mm < i; mm++) s = s + Am[i * la + mm] * Tm[mm * la + j];
                    Tm[i * la + j] = -s;
                }
            }
            __syncwarp();
        }
    } else {
        for (int x = tid - 32; x < DNC_C * dk; x += DNC_NT - 32) {
            const int r = x / dk, i = x % dk;
            Qn[r * lk + i] = Kn[r * lk + i] * (bet[r] * gam[r]);
        }
        for (int x = tid - 32; x < DNC_C * dv; x += DNC_NT - 32) {
            const int r = x / dv, e = x % dv;
            Vs[r * lv + e] = Vs[r * lv + e] * bet[r];
        }
    }
    __syncthreads();
    if (ci == p.nc - 1 && m != 0) { /* the open rows' T rows, for dnc_step_kernel */
        float *tT = p.tail + (int64_t)h * dnc_tail_floats(dk, dv) + (int64_t)DNC_C * (dk + dv + 2);
        for (int x = tid; x < m * DNC_C; x += DNC_NT) tT[x] = Tm[(x / DNC_C) * la + x % DNC_C];
    }
    /* W[t][i] = sum_{m <= t} T[t][m] Xk[m][i]; U[t][e] = sum_{m <= t} T[t][m] Xv[m][e] (m ascending from +0) */
    for (int pass = 0; pass < 2; pass++) {
        const float *X = pass ? Vs : Qn;
        float *Y = pass ? U : W;
        const int w = pass ? dv : dk, lx = pass ? lv : lk;
        for (int c0 = 0; c0 < w; c0 += 64) {
            float acc[4][4];
#pragma unroll
            for (int x = 0; x < 4; x++)
#pragma unroll
                for (int y = 0; y < 4; y++) acc[x][y] = 0.0f;
            const int tmax = ty + 48;
            for (int mm = 0; mm <= tmax; mm++) {
                float tv[4], xv[4];
#pragma unroll
                for (int x = 0; x < 4; x++) tv[x] = Tm[(ty + 16 * x) * la + mm];
#pragma unroll
                for (int y = 0; y < 4; y++) {
                    const int col = c0 + tx + 16 * y;
                    xv[y] = col < w ? X[mm * lx + col] : 0.0f;
                }
#pragma unroll
                for (int x = 0; x < 4; x++)
                    if (mm <= ty + 16 * x)
#pragma unroll
                        for (int y = 0; y < 4; y++) acc[x][y] = acc[x][y] + tv[x] * xv[y];
            }
#pragma unroll
            for (int x = 0; x < 4; x++)
#pragma unroll
                for (int y = 0; y < 4; y++) {
                    const int col = c0 + tx + 16 * y;
                    if (col < w) Y[(ty + 16 * x) * w + col] = acc[x][y];
                }
        }
    }
}

/* Shared memory of dnc_state_kernel: S0 [dk][16], W, Qg, Kd [64][dnc_lk4(dk)], P [64][68], U, V' [64][16]. Rows of
 * W, Qg, Kd and P are 16-byte aligned (float4 loads along them), 4 floats longer than needed (fewer bank conflicts). */
__host__ __device__ __forceinline__ int dnc_lk4(int dk) { return (dk + 3) / 4 * 4 + 4; }
#define DNC_LP 68
__host__ __device__ __forceinline__ size_t dnc_state_smem(int dk) {
    return sizeof(float) *
           (size_t)(dk * DNC_CW + 3 * DNC_C * dnc_lk4(dk) + DNC_C * DNC_LP + 2 * DNC_C * DNC_CW);
}

__global__ void __launch_bounds__(DNC_NT, 1) dnc_state_kernel(dnc_args pa) {
    td_pdl_wait();
    TD_DYN_SMEM16(float, sm);
    const dnc_args p = dnc_bind(pa, (int)blockIdx.z);
    const int h = (int)blockIdx.x, c0 = (int)blockIdx.y * DNC_CW, dk = p.dk, dv = p.dv;
    const int lk = dnc_lk4(dk), dk4 = dk / 4 * 4;
    float *S0 = sm, *W = S0 + dk * DNC_CW, *Qg = W + DNC_C * lk, *Kd = Qg + DNC_C * lk, *P = Kd + DNC_C * lk;
    float *Us = P + DNC_C * DNC_LP, *Vp = Us + DNC_C * DNC_CW;
    const int tid = (int)threadIdx.x, c = tid % DNC_CW, rr = tid / DNC_CW, col = c0 + c;
    const bool live = col < dv;
    float *hs = p.state + (int64_t)h * dnc_head_floats(dk, dv);
    const dnc_open so = dnc_open_rows(hs, dk, dv);
    const int mo = (p.n0 + p.n) % DNC_C; /* open rows after the call */
    for (int x = tid; x < dk * DNC_CW; x += DNC_NT) {
        const int i = x / DNC_CW, cc = c0 + x % DNC_CW;
        S0[x] = cc < dv ? hs[(int64_t)i * dv + cc] : 0.0f;
    }
    const int64_t hv_dv = (int64_t)p.Hv * dv;
    const bool vec = dk % 4 == 0 && dv % 4 == 0;
    bool changed = false;
    for (int ci = 0; ci < p.nc; ci++) {
        const float *ch = p.scratch + ((int64_t)ci * p.Hv + h) * dnc_chunk_floats(dk, dv);
        const float *gW = ch, *gQ = gW + DNC_C * dk, *gK = gQ + DNC_C * dk, *gU = gK + DNC_C * dk,
                    *gP = gU + DNC_C * dv;
        const float gend = gP[DNC_C * DNC_C];
        const bool full = ci * DNC_C + DNC_C - p.n0 <= p.n; /* block-uniform */
        if (vec) { /* 16-byte loads and stores (dk, dv multiples of 4: every row of the chunk area is aligned) */
            for (int x = 4 * tid; x < DNC_C * dk; x += 4 * DNC_NT) {
                const int t = x / dk, i = x % dk;
                *(float4 *)&W[t * lk + i] = *(const float4 *)&gW[x];
                *(float4 *)&Qg[t * lk + i] = *(const float4 *)&gQ[x];
                if (full) *(float4 *)&Kd[t * lk + i] = *(const float4 *)&gK[x];
            }
            for (int x = 4 * tid; x < DNC_C * DNC_C; x += 4 * DNC_NT)
                *(float4 *)&P[(x / DNC_C) * DNC_LP + x % DNC_C] = *(const float4 *)&gP[x];
        } else {
            for (int x = tid; x < DNC_C * dk; x += DNC_NT) {
                const int t = x / dk, i = x % dk;
                W[t * lk + i] = gW[x];
                Qg[t * lk + i] = gQ[x];
                if (full) Kd[t * lk + i] = gK[x];
            }
            for (int x = tid; x < DNC_C * DNC_C; x += DNC_NT) P[(x / DNC_C) * DNC_LP + x % DNC_C] = gP[x];
        }
        for (int x = tid; x < DNC_C * DNC_CW; x += DNC_NT) {
            const int t = x / DNC_CW, cc = c0 + x % DNC_CW;
            Us[x] = cc < dv ? gU[t * dv + cc] : 0.0f;
        }
        __syncthreads();
        /* rows t = rr + 16 k: V'[t] = U[t] - (W S0)[t]; o1 = (Qg S0)[t]; both chains over i ascending from +0 (W and
         * Qg read 4 floats at a time, the chain still one term after another) */
        float acc[4], o1[4];
#pragma unroll
        for (int k = 0; k < 4; k++) acc[k] = 0.0f, o1[k] = 0.0f;
        for (int i = 0; i < dk4; i += 4) {
            float s4[4];
#pragma unroll
            for (int e = 0; e < 4; e++) s4[e] = S0[(i + e) * DNC_CW + c];
#pragma unroll
            for (int k = 0; k < 4; k++) {
                const float4 w = *(const float4 *)&W[(rr + 16 * k) * lk + i];
                const float4 q = *(const float4 *)&Qg[(rr + 16 * k) * lk + i];
                acc[k] = acc[k] + w.x * s4[0], o1[k] = o1[k] + q.x * s4[0];
                acc[k] = acc[k] + w.y * s4[1], o1[k] = o1[k] + q.y * s4[1];
                acc[k] = acc[k] + w.z * s4[2], o1[k] = o1[k] + q.z * s4[2];
                acc[k] = acc[k] + w.w * s4[3], o1[k] = o1[k] + q.w * s4[3];
            }
        }
        for (int i = dk4; i < dk; i++) {
            const float sv = S0[i * DNC_CW + c];
#pragma unroll
            for (int k = 0; k < 4; k++)
                acc[k] = acc[k] + W[(rr + 16 * k) * lk + i] * sv, o1[k] = o1[k] + Qg[(rr + 16 * k) * lk + i] * sv;
        }
#pragma unroll
        for (int k = 0; k < 4; k++) Vp[(rr + 16 * k) * DNC_CW + c] = Us[(rr + 16 * k) * DNC_CW + c] - acc[k];
        if (!full && live) /* the last chunk, open after the call: its rows of V' go to the state (dnc_step_kernel) */
#pragma unroll
            for (int k = 0; k < 4; k++)
                if (rr + 16 * k < mo) so.Vp[(rr + 16 * k) * dv + col] = Vp[(rr + 16 * k) * DNC_CW + c];
        __syncthreads();
        /* o = o1 + sum_{s <= t} P[t][s] V'[s] (s ascending from +0): the pre-norm output of the new tokens */
        {
            float o2[4] = {0.0f, 0.0f, 0.0f, 0.0f};
            for (int s0 = 0; s0 <= rr + 48; s0 += 4) {
                float v4[4];
#pragma unroll
                for (int e = 0; e < 4; e++) v4[e] = Vp[(s0 + e) * DNC_CW + c];
#pragma unroll
                for (int k = 0; k < 4; k++) {
                    const int t = rr + 16 * k;
                    const float4 pv = *(const float4 *)&P[t * DNC_LP + s0];
                    if (s0 <= t) o2[k] = o2[k] + pv.x * v4[0];
                    if (s0 + 1 <= t) o2[k] = o2[k] + pv.y * v4[1];
                    if (s0 + 2 <= t) o2[k] = o2[k] + pv.z * v4[2];
                    if (s0 + 3 <= t) o2[k] = o2[k] + pv.w * v4[3];
                }
            }
#pragma unroll
            for (int k = 0; k < 4; k++) {
                const int t = rr + 16 * k, j = ci * DNC_C + t - p.n0;
                if (live && j >= 0 && j < p.n)
                    p.core[(int64_t)p.tok[j] * hv_dv + (int64_t)h * dv + col] = o1[k] + o2[k];
            }
        }
        /* a completed chunk: S[i] = S0[i] gamma_end + sum_s Kd[s][i] V'[s] (s ascending 0 .. 63 from +0); thread rr
         * owns rows i = i0 + 4 rr + e (e < 4) of each 64-row block i0 */
        if (full) {
            changed = true;
            for (int i0 = 0; i0 < dk; i0 += 64) {
                const int ib = i0 + 4 * rr;
                if (ib >= dk) continue;
                float sn[4] = {0.0f, 0.0f, 0.0f, 0.0f};
                for (int s = 0; s < DNC_C; s++) {
                    const float vp = Vp[s * DNC_CW + c];
                    const float4 kd = *(const float4 *)&Kd[s * lk + ib];
                    sn[0] = sn[0] + kd.x * vp, sn[1] = sn[1] + kd.y * vp;
                    sn[2] = sn[2] + kd.z * vp, sn[3] = sn[3] + kd.w * vp;
                }
#pragma unroll
                for (int e = 0; e < 4; e++)
                    if (ib + e < dk) S0[(ib + e) * DNC_CW + c] = S0[(ib + e) * DNC_CW + c] * gend + sn[e];
            }
        }
        __syncthreads();
    }
    if (changed && live)
        for (int i = rr; i < dk; i += DNC_NT / DNC_CW) hs[(int64_t)i * dv + col] = S0[i * DNC_CW + c];
    /* the open rows after the call, from the tail (rows [lo, m): an open row of chunk 0 before the call is there) */
    const int m = (p.n0 + p.n) % DNC_C;
    if (m != 0) {
        const int lo = p.nc == 1 ? p.n0 : 0;
        const float *tl = p.tail + (int64_t)h * dnc_tail_floats(dk, dv);
        const float *tK = tl, *tV = tK + DNC_C * dk, *tg = tV + DNC_C * dv, *tb = tg + DNC_C, *tT = tb + DNC_C;
        float *sK = so.K, *sV = so.V, *sg = so.g, *sb = so.b;
        for (int x = lo * DNC_CW + tid; x < m * DNC_CW; x += DNC_NT) {
            const int r = x / DNC_CW, cc = c0 + x % DNC_CW;
            if (cc < dv) sV[r * dv + cc] = tV[r * dv + cc];
        }
        if (blockIdx.y == 0) {
            for (int x = lo * dk + tid; x < m * dk; x += DNC_NT) sK[x] = tK[x];
            for (int x = lo * DNC_C + tid; x < m * DNC_C; x += DNC_NT) so.T[x] = tT[x];
            if (tid >= lo && tid < m) sg[tid] = tg[tid], sb[tid] = tb[tid];
        }
    }
}

/* Shared memory of dnc_step_kernel: K, V [64][dk + 1], [64][dv + 1]; V' [64][dv]; q, W [dk]; U [dv]; A, P, T, G,
 * gamma, beta, g [64]. */
__host__ __device__ __forceinline__ size_t dnc_step_smem(int dk, int dv) {
    return sizeof(float) * (size_t)(DNC_C * ((dk + 1) + (dv + 1) + dv + 7) + 2 * dk + dv);
}

/* One token (n = 1) appended to the open chunk of its sequence at row t = n0, one block per value head: the new row's
 * values only, from the open rows' k, v, g, beta and their cached rows of T and V' (each a function of rows <= its
 * own, so cached = recomputed, bit for bit). Every value has the prep and state kernels' expression and chain order
 * (cuda.h), so a sequence fed one token at a time has the bits of one fed all at once; at t = 63 the chunk completes
 * and S is updated as there. O(t dk + dk dv) work instead of the whole 64-row chunk. */
__global__ void __launch_bounds__(DNC_NT, 1) dnc_step_kernel(dnc_args pa) {
    td_pdl_wait();
    TD_DYN_SMEM16(float, sm);
    const dnc_args p = dnc_bind(pa, (int)blockIdx.z);
    const int h = (int)blockIdx.x, dk = p.dk, dv = p.dv, kh = h / (p.Hv / p.Hk), t = p.n0;
    const int lk = dk + 1, lv = dv + 1;
    float *Ks = sm, *Vs = Ks + DNC_C * lk, *Vps = Vs + DNC_C * lv, *qn = Vps + DNC_C * dv, *Wr = qn + dk, *Ur = Wr + dk;
    float *Ar = Ur + dv, *Pr = Ar + DNC_C, *Tr = Pr + DNC_C, *G = Tr + DNC_C, *gam = G + DNC_C, *bet = gam + DNC_C,
          *gs = bet + DNC_C;
    const int tid = (int)threadIdx.x, lane = tid & 31, warp = tid >> 5;
    float *hs = p.state + (int64_t)h * dnc_head_floats(dk, dv);
    const dnc_open so = dnc_open_rows(hs, dk, dv);
    /* the open rows r < t from the state; the new row t by warp 0 */
    if (warp == 0) dnc_token_row(p, p.tok[0], h, kh, lane, qn, Ks + t * lk, Vs + t * lv, &bet[t], &gs[t]);
    for (int x = tid; x < t * dk; x += DNC_NT) Ks[(x / dk) * lk + x % dk] = so.K[x];
    for (int x = tid; x < t * dv; x += DNC_NT) Vs[(x / dv) * lv + x % dv] = so.V[x], Vps[x] = so.Vp[x];
    if (tid < t) gs[tid] = so.g[tid], bet[tid] = so.b[tid];
    __syncthreads();
    if (tid == 0) { /* G over rows 0 .. t, ascending from +0 */
        float acc = 0.0f;
        for (int r = 0; r <= t; r++) G[r] = acc = acc + gs[r];
    }
    __syncthreads();
    if (tid <= t) gam[tid] = expf(G[tid]);
    /* A row t (j < t) and P row t (s <= t): dots over c ascending */
    if (tid < t) {
        float dot = 0.0f;
        for (int c = 0; c < dk; c++) dot = dot + Ks[t * lk + c] * Ks[tid * lk + c];
        Ar[tid] = (dot * bet[t]) * expf(G[t] - G[tid]);
    } else if (tid >= DNC_C && tid - DNC_C <= t) {
        const int s2 = tid - DNC_C;
        float dot = 0.0f;
        for (int c = 0; c < dk; c++) dot = dot + qn[c] * Ks[s2 * lk + c];
        Pr[s2] = dot * expf(G[t] - G[s2]);
    }
    __syncthreads();
    /* T row t: T[t][j] = -(A[t][j] + sum_{m = j+1}^{t-1} A[t][m] T[m][j]), T[m][j] from the state's cached rows */
    if (tid < t) {
        float s2 = Ar[tid];
        for (int mm = tid + 1; mm < t; mm++) s2 = s2 + Ar[mm] * so.T[mm * DNC_C + tid];
        Tr[tid] = -s2;
    } else if (tid == t) {
        Tr[t] = 1.0f;
    }
    __syncthreads();
    /* W row t, U row t (chains over m <= t), q gamma_t in place */
    for (int i = tid; i < dk; i += DNC_NT) {
        float acc = 0.0f;
        for (int mm = 0; mm <= t; mm++) acc = acc + Tr[mm] * (Ks[mm * lk + i] * (bet[mm] * gam[mm]));
        Wr[i] = acc;
    }
    for (int e = tid; e < dv; e += DNC_NT) {
        float acc = 0.0f;
        for (int mm = 0; mm <= t; mm++) acc = acc + Tr[mm] * (Vs[mm * lv + e] * bet[mm]);
        Ur[e] = acc;
    }
    __syncthreads();
    for (int i = tid; i < dk; i += DNC_NT) qn[i] = qn[i] * gam[t];
    __syncthreads();
    /* per value column e: V'[t][e], o1, o2, o (thread e owns its column of V') */
    for (int e = tid; e < dv; e += DNC_NT) {
        float acc = 0.0f, o1 = 0.0f;
        for (int i = 0; i < dk; i++) {
            const float sv = hs[(int64_t)i * dv + e];
            acc = acc + Wr[i] * sv;
            o1 = o1 + qn[i] * sv;
        }
        const float vp = Ur[e] - acc;
        Vps[t * dv + e] = vp;
        float o2 = 0.0f;
        for (int s2 = 0; s2 <= t; s2++) o2 = o2 + Pr[s2] * Vps[s2 * dv + e];
        p.core[(int64_t)p.tok[0] * p.Hv * dv + (int64_t)h * dv + e] = o1 + o2;
        if (t < DNC_C - 1) so.Vp[t * dv + e] = vp;
    }
    if (t < DNC_C - 1) { /* the new open row */
        for (int i = tid; i < dk; i += DNC_NT) so.K[t * dk + i] = Ks[t * lk + i];
        for (int e = tid; e < dv; e += DNC_NT) so.V[t * dv + e] = Vs[t * lv + e];
        for (int j = tid; j < DNC_C; j += DNC_NT) so.T[t * DNC_C + j] = j <= t ? Tr[j] : 0.0f;
        if (tid == 0) so.g[t] = gs[t], so.b[t] = bet[t];
        return;
    }
    /* t = 63: the chunk completes: S[i][e] = (S0[i][e] gamma[63]) + sum_s (k_s[i] dte[s]) V'[s][e] (dte in Ar) */
    if (tid < DNC_C) Ar[tid] = expf(G[DNC_C - 1] - G[tid]);
    __syncthreads();
    for (int x = tid; x < dk * dv; x += DNC_NT) {
        const int i = x / dv, e = x % dv;
        float sn = 0.0f;
        for (int s2 = 0; s2 < DNC_C; s2++) sn = sn + (Ks[s2 * lk + i] * Ar[s2]) * Vps[s2 * dv + e];
        hs[x] = hs[x] * gam[DNC_C - 1] + sn;
    }
}

/* td_gated_rmsnorm of the new tokens' o in place: deltanet_kernel's expression (sum of o^2 in double, each thread
 * folding e = tid, tid + 128, ... ascending, then td_dev_block_sum<128>'s tree). */
__global__ void __launch_bounds__(DNC_NNT) dnc_norm_kernel(dnc_args p) {
    td_pdl_wait();
    __shared__ double redd[DNC_NNT / 32 + 1];
    const int j = (int)blockIdx.x, h = (int)blockIdx.y, tid = (int)threadIdx.x, dv = p.dv;
    const int64_t t = p.tok[j], off = t * p.Hv * (int64_t)dv + (int64_t)h * dv;
    float *ct = p.core + off;
    const float *zt = p.z + off;
    double ss = 0.0;
    for (int e = tid; e < dv; e += DNC_NNT) ss += (double)ct[e] * (double)ct[e];
    ss = td_dev_block_sum<DNC_NNT>(ss, redd); /* also: every thread has read its o */
    const float r = td_dev_rms_scale(ss, dv, p.eps);
    for (int e = tid; e < dv; e += DNC_NNT) {
        const float zi = zt[e];
        ct[e] = (p.norm_w[e] * (ct[e] * r)) * (zi / (1.0f + expf(-zi)));
    }
}

/* The call's chunk count and the grids' sizes, host arithmetic shared with tests/cuda/emu. */
static inline int dnc_chunks(int64_t n, int64_t pos0) {
    const int64_t n0 = pos0 % DNC_C;
    return (int)((n0 + n + DNC_C - 1) / DNC_C);
}

extern "C" int64_t td_cu_deltanet_chunk_state_floats(int64_t Hv, int64_t dk, int64_t dv) {
    if (Hv <= 0 || dk <= 0 || dv <= 0 || dk > DNC_MAXD || dv > DNC_MAXD) return 0;
    return Hv * dnc_head_floats((int)dk, (int)dv);
}

extern "C" int64_t td_cu_deltanet_chunk_scratch_floats(int64_t n, int64_t pos0, int64_t Hv, int64_t dk, int64_t dv) {
    if (n <= 0 || pos0 < 0 || Hv <= 0 || dk <= 0 || dv <= 0 || dk > DNC_MAXD || dv > DNC_MAXD) return 0;
    return Hv * ((int64_t)dnc_chunks(n, pos0) * dnc_chunk_floats((int)dk, (int)dv) + dnc_tail_floats((int)dk, (int)dv));
}

static int dnc_stages = 3;      /* td_cu_deltanet_chunk_test_stages */
static bool dnc_step_on = true; /* td_cu_deltanet_chunk_test_step */
extern "C" void td_cu_deltanet_chunk_test_step(int on) { dnc_step_on = on != 0; }

/* A group goes to the step kernel when it has one token (and the step kernel is on). */
static inline bool dnc_is_step(int64_t n) { return n == 1 && dnc_step_on; }

extern "C" int64_t td_cu_deltanet_chunk_plan(int32_t *tab, td_cu_dnc_plan *plan, const int32_t *grp_off,
                                             const int32_t *grp_seq, const int64_t *pos0, int64_t n_groups,
                                             int64_t Hv, int64_t dk, int64_t dv) {
    int64_t n_pre = 0, n_step = 0, n_chunks = 0;
    for (int64_t g = 0; g < n_groups; g++) {
        const int64_t n = grp_off[g + 1] - grp_off[g];
        if (n <= 0) continue;
        if (dnc_is_step(n)) n_step++;
        else n_pre++, n_chunks += dnc_chunks(n, pos0[g]);
    }
    plan->n_pre = n_pre, plan->n_step = n_step, plan->n_chunks = n_chunks;
    plan->n_tokens = n_groups > 0 ? grp_off[n_groups] : 0;
    plan->n_ints = 6 * (n_pre + n_step) + 2 * n_chunks;
    plan->tab = NULL;
    if (tab) {
        int64_t gi = 0, si = n_pre, k = 0;
        for (int64_t pass = 0; pass < 2; pass++) /* the prefill groups first, then the one-token groups */
            for (int64_t g = 0; g < n_groups; g++) {
                const int64_t n = grp_off[g + 1] - grp_off[g];
                if (n <= 0 || dnc_is_step(n) != (pass == 1)) continue;
                const int64_t row = pass ? si++ : gi++, nc = pass ? 1 : dnc_chunks(n, pos0[g]);
                int32_t *r = tab + 6 * row;
                r[0] = grp_seq[g], r[1] = grp_off[g], r[2] = (int32_t)n, r[3] = (int32_t)(pos0[g] % DNC_C);
                r[4] = (int32_t)nc, r[5] = (int32_t)(pass ? 0 : k);
                for (int64_t c = 0; !pass && c < nc; c++) {
                    tab[6 * (n_pre + n_step) + 2 * (k + c)] = (int32_t)row;
                    tab[6 * (n_pre + n_step) + 2 * (k + c) + 1] = (int32_t)c;
                }
                if (!pass) k += nc;
            }
    }
    if (Hv <= 0 || dk <= 0 || dv <= 0 || dk > DNC_MAXD || dv > DNC_MAXD) return 0;
    return Hv * (n_chunks * dnc_chunk_floats((int)dk, (int)dv) + n_pre * dnc_tail_floats((int)dk, (int)dv));
}

#ifndef TD_CU_EMU /* tests/cuda/emu compiles the kernels above alone */
extern "C" void td_cu_deltanet_chunk_test_stages(int stages) {
    dnc_stages = stages >= 1 && stages <= 3 ? stages : 3;
}

/* The arguments a launch set cannot run: -1 (td_cu_failf) naming them, else 0. */
static int dnc_check(int64_t Hk, int64_t Hv, int64_t dk, int64_t dv, int64_t n, int64_t pos0, const float *scratch,
                     int64_t scratch_floats, int64_t need) {
    if (Hk <= 0 || Hv <= 0 || Hv % Hk || Hv > 65535)
        return td_cu_failf("td_cu_deltanet_chunk: %lld value heads over %lld key heads", (long long)Hv,
                           (long long)Hk);
    if (dk <= 0 || dk > DNC_MAXD || dv <= 0 || dv > DNC_MAXD)
        return td_cu_failf("td_cu_deltanet_chunk: head dims %lld, %lld (1 .. %d)", (long long)dk, (long long)dv,
                           DNC_MAXD);
    if (pos0 < 0 || n > 0x7fffffff - DNC_C)
        return td_cu_failf("td_cu_deltanet_chunk: %lld tokens from position %lld", (long long)n, (long long)pos0);
    if ((uintptr_t)scratch % 16)
        return td_cu_failf("td_cu_deltanet_chunk: scratch at %p is not 16-byte aligned", (const void *)scratch);
    if (!scratch || scratch_floats < need)
        return td_cu_failf("td_cu_deltanet_chunk: scratch of %lld floats, %lld needed", (long long)scratch_floats,
                           (long long)need);
    return 0;
}

/* The launches: the prep kernel over n_chunks chunks and the state kernel over n_pre groups (the prefill groups, rows
 * [0, n_pre) of p.gtab), the step kernel over n_step one-token groups (the rows after them), the norm over n_tokens. */
static int dnc_launch(dnc_args p, int n_chunks, int n_pre, int n_step, int64_t n_tokens, cudaStream_t s) {
    const size_t s1 = dnc_prep_smem(p.dk, p.dv), s2 = dnc_state_smem(p.dk), s3 = dnc_step_smem(p.dk, p.dv);
    cudaError_t e = cudaFuncSetAttribute(dnc_prep_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)s1);
    if (e != cudaSuccess) return td_cu_fail("deltanet chunk: shared memory of the prep kernel", e);
    e = cudaFuncSetAttribute(dnc_state_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)s2);
    if (e != cudaSuccess) return td_cu_fail("deltanet chunk: shared memory of the state kernel", e);
    e = cudaFuncSetAttribute(dnc_step_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)s3);
    if (e != cudaSuccess) return td_cu_fail("deltanet chunk: shared memory of the step kernel", e);
    const unsigned Hv = (unsigned)p.Hv, slices = (unsigned)((p.dv + DNC_CW - 1) / DNC_CW);
    if (n_step > 0) { /* one token each: appended to the open chunk */
        dnc_args q = p;
        if (q.gtab) q.gtab += 6 * n_pre;
        dnc_step_kernel<<<dim3(Hv, 1, (unsigned)n_step), DNC_NT, s3, s>>>(q);
        if (td_cu_launched("deltanet chunk (step)")) return -1;
    }
    if (n_pre > 0) {
        dnc_prep_kernel<<<dim3((unsigned)n_chunks, Hv), DNC_NT, s1, s>>>(p);
        if (td_cu_launched("deltanet chunk (prep)")) return -1;
        if (dnc_stages >= 2) {
            dnc_state_kernel<<<dim3(Hv, slices, (unsigned)n_pre), DNC_NT, s2, s>>>(p);
            if (td_cu_launched("deltanet chunk (state)")) return -1;
        }
    }
    if (dnc_stages < 3) return 0;
    dnc_norm_kernel<<<dim3((unsigned)n_tokens, Hv), DNC_NNT, 0, s>>>(p);
    return td_cu_launched("deltanet chunk (norm)");
}

extern "C" int td_cu_deltanet_chunk(float *core, const float *u, int64_t ldu, const float *z, const float *b,
                                    const float *a, const float *a_log, const float *dt_bias, const float *norm_w,
                                    float *state, int64_t Hk, int64_t Hv, int64_t dk, int64_t dv, float eps,
                                    const int32_t *tok, int64_t n, int64_t pos0, float *scratch,
                                    int64_t scratch_floats, void *stream) {
    if (n <= 0) return 0;
    int rc = dnc_check(Hk, Hv, dk, dv, n, pos0, scratch, scratch_floats,
                       td_cu_deltanet_chunk_scratch_floats(n, pos0, Hv, dk, dv));
    if (rc) return rc;
    dnc_args p;
    p.core = core, p.u = u, p.ldu = ldu, p.z = z, p.b = b, p.a = a, p.a_log = a_log, p.dt_bias = dt_bias;
    p.norm_w = norm_w, p.state = state, p.scratch = scratch, p.tok = tok;
    p.Hk = (int)Hk, p.Hv = (int)Hv, p.dk = (int)dk, p.dv = (int)dv, p.eps = eps;
    p.n = (int)n, p.n0 = (int)(pos0 % DNC_C), p.nc = dnc_chunks(n, pos0);
    p.tail = scratch + (int64_t)p.nc * Hv * dnc_chunk_floats(p.dk, p.dv);
    p.gtab = p.ctab = NULL, p.seq_stride = 0;
    const bool step = dnc_is_step(n);
    return dnc_launch(p, step ? 0 : p.nc, step ? 0 : 1, step ? 1 : 0, n, TD_CU_STREAM(stream));
}

extern "C" int td_cu_deltanet_chunk_multi(float *core, const float *u, int64_t ldu, const float *z, const float *b,
                                          const float *a, const float *a_log, const float *dt_bias,
                                          const float *norm_w, float *state, int64_t seq_stride, int64_t Hk,
                                          int64_t Hv, int64_t dk, int64_t dv, float eps, const int32_t *grp_tok,
                                          const td_cu_dnc_plan *plan, float *scratch, int64_t scratch_floats,
                                          void *stream) {
    if (plan->n_tokens <= 0) return 0;
    int rc = dnc_check(Hk, Hv, dk, dv, plan->n_tokens, 0, scratch, scratch_floats,
                       Hv * (plan->n_chunks * dnc_chunk_floats((int)dk, (int)dv) +
                             plan->n_pre * dnc_tail_floats((int)dk, (int)dv)));
    if (rc) return rc;
    if (!plan->tab || plan->n_pre > 65535 || plan->n_step > 65535 || plan->n_chunks > 0x7fffffff)
        return td_cu_failf("td_cu_deltanet_chunk_multi: a plan of %lld + %lld groups, %lld chunks, table %p",
                           (long long)plan->n_pre, (long long)plan->n_step, (long long)plan->n_chunks,
                           (const void *)plan->tab);
    dnc_args p;
    p.core = core, p.u = u, p.ldu = ldu, p.z = z, p.b = b, p.a = a, p.a_log = a_log, p.dt_bias = dt_bias;
    p.norm_w = norm_w, p.state = state, p.scratch = scratch, p.tok = grp_tok;
    p.Hk = (int)Hk, p.Hv = (int)Hv, p.dk = (int)dk, p.dv = (int)dv, p.eps = eps;
    p.n = 0, p.n0 = 0, p.nc = 0, p.seq_stride = seq_stride;
    p.tail = scratch + plan->n_chunks * Hv * dnc_chunk_floats(p.dk, p.dv);
    p.gtab = plan->tab, p.ctab = plan->tab + 6 * (plan->n_pre + plan->n_step);
    return dnc_launch(p, (int)plan->n_chunks, (int)plan->n_pre, (int)plan->n_step, plan->n_tokens,
                      TD_CU_STREAM(stream));
}

#endif /* TD_CU_EMU */
