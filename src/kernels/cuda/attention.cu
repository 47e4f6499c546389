/* Softmax attention over the KV cache (td_cu_attention): tiles of rows that read each key and value once, a split
 * over super-chunks of positions for long rows, and a combine kernel. The order of operations is cuda.h's canonical
 * one (chunks of 64 anchored at position 0, super-chunks of 8 chunks); this file only decides who does it.
 *
 * Shape: one block of 256 threads per (tile, super-chunk, head group): a tile is up to QT tokens of one sequence x GH
 * query heads of one KV head (R = QT * GH <= 16 rows), so a staged key or value is used by R rows. Per chunk of 64
 * positions: the chunk's cells; then per slice of 64 head elements the key slice is staged in shared memory (f32,
 * converted from f16 or bf16 on the way) and thread (position p = tid % 64, row group tid / 64) carries the fmaf
 * chains of rows tid / 64 + 4u across the slices (each key element read once for its rows); the scores go to shared
 * memory; warp w makes rows w and w + 8's max, p's and exp-sum (the fixed tree) and the combine factors; then per
 * slice the value slice is staged and thread (e = tid % 64, rows tid / 64 + 4u) runs each row's chain over that row's
 * positions and folds it into the super-chunk state (R x hd in shared memory). The super-chunk's key and value rows
 * are prefetched into L2 when it starts.
 * At the super-chunk's end a row with n <= 512 writes out = A / L; a longer row writes (M, L, A) to the scratch
 * and td_attn_combine folds its super-chunks in ascending order.
 * Batch invariance: every value a row computes depends on its own q, its own range [lo, n) and the keys/values of
 * those positions; tile composition, launch shape and cell layout only decide which thread does it.
 * --precision bf16 (td_cu_attention_bf16): attention_bf16_64_kernel (tiles of up to 64 rows; head dims 64, 128) or
 * attention_bf16_kernel (16 rows; 256, or TD_CUDA_ATTN_ROWS=16), the same spans, scratch and combine with cuda.h's
 * bf16 order on the tensor cores (below); TD_CUDA_TC_ATTN=0 keeps bf16 mode on the kernel above. */
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/ptx.cuh"

#define AT_NT 256    /* threads per block */
#define AT_C 64      /* positions per chunk (the canonical order's C) */
#define AT_SCC 8     /* chunks per super-chunk */
#define AT_SC (AT_C * AT_SCC)
#define AT_ES 64     /* head elements per staged slice */
#define AT_RMAX 16   /* rows per tile at most */
#define AT_MAXHD 1024 /* TD_MAX_HEAD_DIM */
#define AT_PER (AT_C * AT_ES / AT_NT) /* elements a thread stages per slice: 16 */

static int at_test_mode = 0; /* td_cu_attention_test_mode */

/* Bytes of a cache element in the format kvf (TD_CU_KV_*). */
__host__ __device__ constexpr int kv_size(int kvf) { return kvf == TD_CU_KV_F32 ? 4 : 2; }

/* Element i of a cache in the format KVF, exactly as float (a bf16 is the top half of its float). */
template <int KVF> __device__ __forceinline__ float kv_at(const void *base, int64_t i) {
    if (KVF == TD_CU_KV_F16) return td_dev_f16(((const uint16_t *)base)[i]);
    if (KVF == TD_CU_KV_BF16) return td_dev_bf16(((const uint16_t *)base)[i]);
    return ((const float *)base)[i];
}

/* The combine rule, in one place for the tile kernel and td_attn_combine: (M, L) with (m, l) gives M' and the
 * factors x, y; L' = L * x + l * y (--fmad=false: each product rounded, then the sum). */
__device__ __forceinline__ void at_factors(float M, float m, float *Mn, float *x, float *y) {
    *Mn = fmaxf(M, m);
    *x = expf(M - *Mn);
    *y = expf(m - *Mn);
}
__device__ __forceinline__ float at_mix(float A, float x, float a, float y) { return A * x + a * y; }

/* Rows per tile for a head dimension: the shared memory holds R x hd for q, the state and (test mode 1) the row
 * state. */
static int at_rows(int64_t hd) { return hd <= 256 ? 16 : hd <= 512 ? 8 : 4; }

/* Query heads per tile: the largest divisor of G = Hq / Hkv that fits the rows. */
static int64_t at_heads(int64_t G, int64_t R) {
    int64_t gh = G < R ? G : R;
    while (G % gh) gh--;
    return gh;
}

struct at_args {
    float *out;
    int64_t ldo;
    const float *q;
    int64_t ldq, qhs;
    const void *kc, *vc;
    int64_t kv_dim;
    const int32_t *cells;
    int64_t n_ctx;
    const int32_t *seq, *pos, *tok, *tile;
    int64_t Hq, G, GH, hd, window;
    float scale;
    int R;      /* rows capacity: at_rows(hd) */
    int mode;   /* 0 split, 1 one block per tile over all super-chunks, 2 every row through the scratch */
    int span;   /* positions a block covers in the split: a super-chunk (512) or, for launches of few blocks, one
                   chunk (64); mode 1: 512 */
    float *scratch;
    int64_t nsc; /* spans of the scratch layout */
    int vec;     /* bf16 kernel: kc and vc 16-byte aligned (vector loads, cp.async of a bf16 cache; the same values) */
    uint16_t *outb; /* NULL, or out's bf16 copy [T][ldb] (the plan's out_bf16) */
    int64_t ldb;
};

/* Output element (token t, column col): out, and where the launch asks for it (outb) its bf16 copy for the product
 * after attention, rounded as tc_x_bf16 rounds (td_pack_bf16: that product's activations, bit for bit). at_put2_b: the
 * copy of two adjacent columns (col even) whose out the caller has written. */
__device__ __forceinline__ void at_put(const at_args &a, int64_t t, int64_t col, float v) {
    a.out[t * a.ldo + col] = v;
    if (a.outb) a.outb[t * a.ldb + col] = (uint16_t)(td_pack_bf16(v, 0.0f) & 0xffffu);
}
__device__ __forceinline__ void at_put2_b(const at_args &a, int64_t t, int64_t col, float2 v) {
    if (a.outb) *(uint32_t *)(a.outb + t * a.ldb + col) = td_pack_bf16(v.x, v.y);
}

/* Shared memory floats (ints counted as floats) of the tile kernel. */
static size_t at_smem(int R, int64_t hd, int mode) {
    size_t f = (size_t)(mode == 1 ? 3 : 2) * (size_t)R * (size_t)hd + AT_C * (AT_ES + 1) + AT_C * AT_ES +
               (size_t)R * AT_C + 6 * AT_RMAX + 7 * AT_RMAX + AT_SC;
    return f * sizeof(float);
}

template <int KVF> __global__ void __launch_bounds__(AT_NT, 2) attention_tile_kernel(const at_args a) {
    td_pdl_wait();
    TD_DYN_SMEM(float, sm);
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int R = a.R, hd = (int)a.hd;
    float *Qs = sm;                        /* [R][hd] the rows' queries */
    float *As = Qs + R * hd;               /* [R][hd] the super-chunk state's A */
    float *Ks = As + R * hd;               /* [C][ES + 1] a key slice (+1: thread p reads row p, no conflicts) */
    float *Vs = Ks + AT_C * (AT_ES + 1);   /* [C][ES] a value slice */
    float *Ps = Vs + AT_C * AT_ES;         /* [R][C] scores, then p */
    float *Ms = Ps + R * AT_C, *Ls = Ms + AT_RMAX, *Xs = Ls + AT_RMAX, *Ys = Xs + AT_RMAX;
    float *RMs = Ys + AT_RMAX, *RLs = RMs + AT_RMAX; /* the row state (mode 1) */
    int *rt = (int *)(RLs + AT_RMAX);      /* per row: batch token, head, n, lo, super state, chunk action, row state */
    int *rh = rt + AT_RMAX, *rn = rh + AT_RMAX, *rlo = rn + AT_RMAX, *sst = rlo + AT_RMAX, *act = sst + AT_RMAX;
    int *rst = act + AT_RMAX;
    int *cls = rst + AT_RMAX;              /* [512] the super-chunk's cells (-1: no row of the tile sees it) */
    float *RAs = (float *)(cls + AT_SC);   /* [R][hd] the row state's A (mode 1) */

    const int64_t tile = blockIdx.x, hgroups = a.G / a.GH;
    const int64_t kvh = blockIdx.z / hgroups, h0 = kvh * a.G + (blockIdx.z % hgroups) * a.GH;
    const int64_t kvo = kvh * a.hd;
    const int k0 = a.tile[2 * tile];
    int cnt = a.tile[2 * tile + 1];
    if (cnt > R / (int)a.GH) cnt = R / (int)a.GH;
    const int nrows = cnt * (int)a.GH;
    if (tid < nrows) {
        const int t = a.tok[k0 + tid / (int)a.GH];
        const int n = a.pos[t] + 1;
        rt[tid] = t;
        rh[tid] = (int)(h0 + tid % a.GH);
        rn[tid] = n;
        rlo[tid] = a.window > 0 && n > a.window ? n - (int)a.window : 0;
        rst[tid] = 0;
    }
    __syncthreads();
    if (nrows <= 0) return;
    int maxn = 0, minlo = 0x7fffffff;
    for (int r = 0; r < nrows; r++) maxn = max(maxn, rn[r]), minlo = min(minlo, rlo[r]);
    const int span = a.span;
    int j0 = minlo / span, j1 = (maxn - 1) / span + 1; /* the spans some row sees */
    if (a.mode != 1) {
        if ((int)blockIdx.y < j0 || (int)blockIdx.y >= j1) return;
        j0 = blockIdx.y, j1 = j0 + 1;
    }
    const int32_t *cell = a.cells + (int64_t)a.seq[rt[0]] * a.n_ctx;
    for (int i = tid; i < nrows * hd; i += AT_NT) {
        const int r = i / hd, e = i % hd;
        Qs[i] = a.q[(int64_t)rt[r] * a.ldq + rh[r] * a.qhs + e];
    }

    const size_t es = kv_size(KVF);
    for (int j = j0; j < j1; j++) {
        if (tid < nrows) sst[tid] = 0;
        /* the super-chunk's cells, and its key and value rows into L2 now: the chunks' staging loads then wait on
         * L2, not DRAM */
        for (int i = tid; i < span; i += AT_NT) {
            const int pp = j * span + i, c = pp >= minlo && pp < maxn ? cell[pp] : -1;
            cls[i] = c;
            if (c < 0) continue;
            const size_t at = ((size_t)c * (size_t)a.kv_dim + (size_t)kvo) * es;
            for (size_t b = 0; b < (size_t)hd * es; b += 128) {
                td_prefetch_l2((const char *)a.kc + at + b);
                td_prefetch_l2((const char *)a.vc + at + b);
            }
        }
        __syncthreads();
        for (int c0 = j * span; c0 < (j + 1) * span && c0 < maxn; c0 += AT_C) {
            if (c0 + AT_C <= minlo) continue;
            const int *cl = cls + (c0 - j * span); /* the chunk's 64 (the previous chunk ended on a barrier) */
            /* scores: thread (p, rg) carries rows rg + 4u */
            const int p = tid % AT_C, rg = tid / AT_C, nu = rg < nrows ? (nrows - rg + 3) / 4 : 0;
            float dot[AT_RMAX / 4] = {0.0f, 0.0f, 0.0f, 0.0f};
            for (int e0 = 0; e0 < hd; e0 += AT_ES) {
                const int ne = min(AT_ES, hd - e0);
                {
                    const int e = tid % AT_ES, pr0 = tid / AT_ES;
                    float kr[AT_PER];
#pragma unroll
                    for (int u = 0; u < AT_PER; u++) {
                        const int c = cl[pr0 + (AT_NT / AT_ES) * u];
                        kr[u] = c >= 0 && e < ne ? kv_at<KVF>(a.kc, (int64_t)c * a.kv_dim + kvo + e0 + e) : 0.0f;
                    }
#pragma unroll
                    for (int u = 0; u < AT_PER; u++) Ks[(pr0 + (AT_NT / AT_ES) * u) * (AT_ES + 1) + e] = kr[u];
                }
                __syncthreads();
                { /* each staged key element once for the thread's rows (their chains stay e ascending) */
                    const float *kp = Ks + p * (AT_ES + 1), *q0 = Qs + rg * hd + e0;
                    for (int e = 0; e < ne; e++) {
                        const float k = kp[e];
#pragma unroll
                        for (int u = 0; u < AT_RMAX / 4; u++)
                            if (u < nu) dot[u] = fmaf(q0[u * 4 * hd + e], k, dot[u]);
                    }
                }
                __syncthreads();
            }
#pragma unroll
            for (int u = 0; u < AT_RMAX / 4; u++) {
                const int r = rg + 4 * u, pa = c0 + p;
                if (r < nrows) Ps[r * AT_C + p] = pa >= rlo[r] && pa < rn[r] ? a.scale * dot[u] : -INFINITY;
            }
            __syncthreads();
            /* the chunk's m, p and l per row (warp w: rows w, w + 8), and how it joins the super-chunk state */
            for (int r = warp; r < nrows; r += AT_NT / 32) {
                const int lo = max(rlo[r], c0) - c0, hi = min(rn[r], c0 + AT_C) - c0;
                if (lo >= hi) {
                    if (lane == 0) act[r] = 0;
                    continue;
                }
                const bool v0 = lane >= lo && lane < hi, v1 = lane + 32 >= lo && lane + 32 < hi;
                const float s0 = Ps[r * AT_C + lane], s1 = Ps[r * AT_C + lane + 32];
                float m = fmaxf(v0 ? s0 : -INFINITY, v1 ? s1 : -INFINITY);
#pragma unroll
                for (int s = 16; s > 0; s >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, s));
                const float p0 = v0 ? expf(s0 - m) : 0.0f, p1 = v1 ? expf(s1 - m) : 0.0f;
                Ps[r * AT_C + lane] = p0, Ps[r * AT_C + lane + 32] = p1;
                float l = p0 + p1; /* slots i and i + 32, then halving strides 16 .. 1 */
#pragma unroll
                for (int s = 16; s > 0; s >>= 1) l += __shfl_down_sync(0xffffffffu, l, s);
                if (lane == 0) {
                    if (!sst[r]) {
                        Ms[r] = m, Ls[r] = l, act[r] = 1, sst[r] = 1;
                    } else {
                        float Mn, x, y;
                        at_factors(Ms[r], m, &Mn, &x, &y);
                        Ls[r] = at_mix(Ls[r], x, l, y);
                        Ms[r] = Mn, Xs[r] = x, Ys[r] = y, act[r] = 2;
                    }
                }
            }
            __syncthreads();
            /* values: thread (row, e) over the row's visible positions ascending */
            for (int e0 = 0; e0 < hd; e0 += AT_ES) {
                const int ne = min(AT_ES, hd - e0);
                {
                    const int e = tid % AT_ES, pr0 = tid / AT_ES;
                    float vr[AT_PER];
#pragma unroll
                    for (int u = 0; u < AT_PER; u++) {
                        const int c = cl[pr0 + (AT_NT / AT_ES) * u];
                        vr[u] = c >= 0 && e < ne ? kv_at<KVF>(a.vc, (int64_t)c * a.kv_dim + kvo + e0 + e) : 0.0f;
                    }
#pragma unroll
                    for (int u = 0; u < AT_PER; u++) Vs[(pr0 + (AT_NT / AT_ES) * u) * AT_ES + e] = vr[u];
                }
                __syncthreads();
                /* thread (e, rows rg + 4u): each staged value once for its rows; a row's chain runs over its own
                 * positions ascending */
                const int e = tid % AT_ES, rg = tid / AT_ES;
                if (e < ne) {
                    float acc[AT_RMAX / 4];
                    int klo[AT_RMAX / 4], khi[AT_RMAX / 4], kmin = AT_C, kmax = 0;
#pragma unroll
                    for (int u = 0; u < AT_RMAX / 4; u++) {
                        const int r = rg + 4 * u;
                        acc[u] = 0.0f, klo[u] = 0, khi[u] = 0;
                        if (r < nrows && act[r]) {
                            klo[u] = max(rlo[r], c0) - c0, khi[u] = min(rn[r], c0 + AT_C) - c0;
                            kmin = min(kmin, klo[u]), kmax = max(kmax, khi[u]);
                        }
                    }
                    for (int k = kmin; k < kmax; k++) {
                        const float v = Vs[k * AT_ES + e];
#pragma unroll
                        for (int u = 0; u < AT_RMAX / 4; u++)
                            if (k >= klo[u] && k < khi[u]) acc[u] = fmaf(Ps[(rg + 4 * u) * AT_C + k], v, acc[u]);
                    }
#pragma unroll
                    for (int u = 0; u < AT_RMAX / 4; u++) {
                        const int r = rg + 4 * u;
                        if (r < nrows && act[r]) {
                            float *A = As + r * hd + e0 + e;
                            *A = act[r] == 1 ? acc[u] : at_mix(*A, Xs[r], acc[u], Ys[r]);
                        }
                    }
                }
                __syncthreads();
            }
        }
        /* the super-chunk's end: rows that saw a position of it */
        if (a.mode == 1) {
            if (tid < nrows && sst[tid]) {
                if (!rst[tid]) {
                    RMs[tid] = Ms[tid], RLs[tid] = Ls[tid], act[tid] = 1;
                } else {
                    float Mn, x, y;
                    at_factors(RMs[tid], Ms[tid], &Mn, &x, &y);
                    RLs[tid] = at_mix(RLs[tid], x, Ls[tid], y);
                    RMs[tid] = Mn, Xs[tid] = x, Ys[tid] = y, act[tid] = 2;
                }
            } else if (tid < nrows) {
                act[tid] = 0;
            }
            __syncthreads();
            for (int i = tid; i < nrows * hd; i += AT_NT) {
                const int r = i / hd, how = act[r];
                if (how) RAs[i] = how == 1 ? As[i] : at_mix(RAs[i], Xs[r], As[i], Ys[r]);
            }
            __syncthreads();
            if (tid < nrows && sst[tid]) rst[tid] = 1;
            __syncthreads();
        } else {
            for (int i = tid; i < nrows * hd; i += AT_NT) {
                const int r = i / hd, e = i % hd;
                if (!sst[r]) continue;
                if (a.mode == 0 && rn[r] <= span) { /* one span: its state is the row's */
                    at_put(a, rt[r], rh[r] * a.hd + e, As[i] / Ls[r]);
                } else {
                    float *st = a.scratch + (((int64_t)rt[r] * a.Hq + rh[r]) * a.nsc + j) * (a.hd + 2);
                    if (e == 0) st[0] = Ms[r], st[1] = Ls[r];
                    st[2 + e] = As[i];
                }
            }
        }
    }
    if (a.mode == 1)
        for (int i = tid; i < nrows * hd; i += AT_NT) {
            const int r = i / hd, e = i % hd;
            at_put(a, rt[r], rh[r] * a.hd + e, RAs[i] / RLs[r]);
        }
}

/* One (token, head) per block: the row's span states folded into super-chunk states, those into the row's state, each
 * in ascending order, the first of each fold copied (with 512-position spans the first fold is a copy). */
__global__ void __launch_bounds__(128) attention_combine_kernel(const at_args a) {
    td_pdl_wait();
    const int64_t t = blockIdx.x / a.Hq, h = blockIdx.x % a.Hq;
    const int n = a.pos[t] + 1, lo = a.window > 0 && n > a.window ? n - (int)a.window : 0, span = a.span;
    if (a.mode == 0 && n <= span) return;
    const int per = AT_SC / span, c0 = lo / span, c1 = min((n - 1) / span + 1, (int)a.nsc);
    const float *st = a.scratch + (t * a.Hq + h) * a.nsc * (a.hd + 2);
    for (int64_t e = threadIdx.x; e < a.hd; e += 128) {
        float M = 0.0f, L = 0.0f, A = 0.0f;
        for (int j = c0 / per; j <= (c1 - 1) / per; j++) { /* super-chunk j: spans [j * per, j * per + per) */
            float sM = 0.0f, sL = 0.0f, sA = 0.0f;
            for (int c = max(c0, j * per); c < min(c1, j * per + per); c++) {
                const float *s = st + (int64_t)c * (a.hd + 2);
                if (c == max(c0, j * per)) {
                    sM = s[0], sL = s[1], sA = s[2 + e];
                } else {
                    float Mn, x, y;
                    at_factors(sM, s[0], &Mn, &x, &y);
                    sL = at_mix(sL, x, s[1], y);
                    sA = at_mix(sA, x, s[2 + e], y);
                    sM = Mn;
                }
            }
            if (j == c0 / per) {
                M = sM, L = sL, A = sA;
            } else {
                float Mn, x, y;
                at_factors(M, sM, &Mn, &x, &y);
                L = at_mix(L, x, sL, y);
                A = at_mix(A, x, sA, y);
                M = Mn;
            }
        }
        at_put(a, t, h * a.hd + e, A / L);
    }
}

/* ---- --precision bf16: the tensor-core kernel (td_cu_attention_bf16) ------------------------------------------- */

/* The same block, tile and span as attention_tile_kernel (so the same plan, grid, scratch and combine kernel), with
 * cuda.h's bf16 order computed on mma.sync.m16n8k16 (bf16 operands, fp32 accumulators; the fragment conventions of
 * matmul_tc.cu). A tile's rows (up to 16, padded with rows that see nothing) are the A operand's 16 rows. Per chunk
 * of 64 positions:
 *   staging   the chunk's keys and values, rounded to bf16 (a bf16 cache's as they are), into Ks / Vs [64][HD]
 *             (row = position); a slot that no row of the tile sees is staged +0 (never cache bytes: 0 * NaN would
 *             be NaN)
 *   scores    warp w: S[16 rows][positions 16w .. 16w + 16) = Q K^T, one mma chain over HD in k-steps of 16
 *             ascending from +0 (A = Qs by ldmatrix, B = Ks by ldmatrix: the key rows are B's columns); s = scale * d
 *             into Ss, -inf where the row does not see the position
 *   softmax   warp w: rows w, w + 4, w + 8, w + 12 as attention_tile_kernel (lane holds slots lane, lane + 32): m, p
 *             = e^(s - m) (ab_exp) rounded to bf16 into Ps (0 where unseen), l by the fixed tree, the fold factors
 *   values    warp w: a[16 rows][columns w HD/4 .. (w+1) HD/4) = P V, one mma chain over the chunk's 4 k-steps of 16
 *             positions ascending from +0 (A = Ps by ldmatrix, B = Vs by ldmatrix.trans); a joins the super-chunk
 *             state A (registers, the mma D layout: rows g and g + 8 of lane = 4 g + q) by the combine rule
 * Batch invariance: every D element of an mma is a function of its A row, its B column and its C element only, so a
 * row's s, p, l and a depend on its q and the keys / values of its own positions (others' slots enter as p = 0 times
 * a finite value or +0); the tile's other rows and the launch only decide which thread computes them. */
#define AB_NT 128            /* threads per block: 4 warps */
#define AB_PAD 8             /* bf16 of padding per staged row: ldmatrix's 8 row addresses on distinct banks */
#define AB_SP (AT_C + 4)     /* float pitch of Ss */
#define AB_PP (AT_C + AB_PAD) /* bf16 pitch of Ps */

static_assert(AT_RMAX == 16, "the bf16 kernel's tile is one m16 fragment");

/* f rounded to bf16 (nearest even; td_f32_to_bf16), its 16 bits. */
__device__ __forceinline__ uint32_t ab_bf16(float f) { return __float_as_uint(td_dev_round_bf16(f)) >> 16; }
__device__ __forceinline__ uint32_t ab_pack(float lo, float hi) { return ab_bf16(lo) | ab_bf16(hi) << 16; }

/* p = e^(s - m) of two slots rounded to bf16 (+0 at an unseen slot), lo | hi << 16: e^x as 2^(x log2 e) on the
 * multifunction unit (td_ex2: 3 instructions where expf takes ~12; relative error below 2^-17 for every x >= -87:
 * the rounding of x log2 e, |x| 2^-24, and the unit's own, far inside the bf16 rounding that follows), then one cvt
 * for both (nearest even, ab_bf16's bits for every value it gives; a NaN, from a NaN score only, comes out as the
 * canonical NaN). */
__device__ __forceinline__ float ab_exp(float x) { return td_ex2(x * 1.44269504088896341f); }
__device__ __forceinline__ uint32_t ab_exp_pair(float s0, float s1, float m, bool v0, bool v1) {
    return td_pack_bf16(v0 ? ab_exp(s0 - m) : 0.0f, v1 ? ab_exp(s1 - m) : 0.0f);
}

/* The bf16 index of element e of row r (of `rows`) in the staged Qs, Ks, Vs: rows HD + AB_PAD apart, or (SW, the
 * wgmma form) wgmma's 128-byte swizzle in HD / 64 column blocks of 64 (td_sw128): K-major for the queries and keys,
 * MN-major for the values (a position's row either way). */
template <int HD, bool SW> __device__ __forceinline__ int ab_at(int rows, int r, int e) {
    return SW ? td_sw128(e / 64, rows, r, e % 64 / 8) / 2 + e % 8 : r * (HD + AB_PAD) + e;
}

/* The tile's queries rounded to bf16 into Qs [R][HD + AB_PAD] (padding rows +0), or (SW) wgmma's K-major 128-byte
 * swizzle (td_sw128: HD / 64 column blocks of R rows): four elements a thread and iteration, float4 loads where q's
 * rows allow them (the same values either way), several iterations' loads in flight together. */
template <int HD, int NT, bool SW = false>
__device__ __forceinline__ void ab_stage_q(uint16_t *Qs, const at_args &a, const int *rt, const int *rh, int nrows,
                                           int R, int tid) {
    const bool v4 = ((uintptr_t)a.q & 15u) == 0 && (a.ldq & 3) == 0 && (a.qhs & 3) == 0;
#pragma unroll 8
    for (int i = tid; i < R * (HD / 4); i += NT) {
        const int r = i / (HD / 4), e = (i % (HD / 4)) * 4;
        float4 f = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        if (r < nrows) {
            const float *q = a.q + (int64_t)rt[r] * a.ldq + rh[r] * a.qhs + e;
            f = v4 ? *(const float4 *)q : make_float4(q[0], q[1], q[2], q[3]);
        }
        *(uint2 *)&Qs[ab_at<HD, SW>(R, r, e)] = make_uint2(ab_pack(f.x, f.y), ab_pack(f.z, f.w));
    }
}

/* 8 cache elements from element i (a multiple of 8), as stored (ab_fetch: the loads, issued for several units before
 * the first use), then as 8 bf16 (ab_cvt: exact to f32, then rounded; a bf16 cache's bits as they are, which is what
 * rounding its values would give). */
template <int KVF> struct ab_raw {
    static constexpr int N = KVF == TD_CU_KV_F32 ? 2 : 1; /* 16-byte words: 8 floats or 8 halves */
    uint4 w[N];
};
template <int KVF> __device__ __forceinline__ void ab_fetch(ab_raw<KVF> &r, const void *base, int64_t i, int vec) {
    if (KVF != TD_CU_KV_F32) {
        const uint16_t *h = (const uint16_t *)base + i;
        if (vec) {
            r.w[0] = *(const uint4 *)h;
        } else {
            r.w[0] = make_uint4((uint32_t)h[0] | (uint32_t)h[1] << 16, (uint32_t)h[2] | (uint32_t)h[3] << 16,
                                (uint32_t)h[4] | (uint32_t)h[5] << 16, (uint32_t)h[6] | (uint32_t)h[7] << 16);
        }
    } else {
        const float *x = (const float *)base + i;
        if (vec) {
            r.w[0] = ((const uint4 *)x)[0];
            r.w[r.N - 1] = ((const uint4 *)x)[1];
        } else {
            r.w[0] = make_uint4(__float_as_uint(x[0]), __float_as_uint(x[1]), __float_as_uint(x[2]),
                                __float_as_uint(x[3]));
            r.w[r.N - 1] = make_uint4(__float_as_uint(x[4]), __float_as_uint(x[5]), __float_as_uint(x[6]),
                                      __float_as_uint(x[7]));
        }
    }
}
template <int KVF> __device__ __forceinline__ uint4 ab_cvt(const ab_raw<KVF> &r) {
    if (KVF == TD_CU_KV_BF16) return r.w[0];
    float f[8];
    if (KVF == TD_CU_KV_F16) {
        const uint32_t u[4] = {r.w[0].x, r.w[0].y, r.w[0].z, r.w[0].w};
#pragma unroll
        for (int k = 0; k < 4; k++) f[2 * k] = td_dev_f16((uint16_t)u[k]), f[2 * k + 1] = td_dev_f16(u[k] >> 16);
    } else {
        const uint4 u = r.w[0], w = r.w[r.N - 1];
        f[0] = __uint_as_float(u.x), f[1] = __uint_as_float(u.y), f[2] = __uint_as_float(u.z);
        f[3] = __uint_as_float(u.w), f[4] = __uint_as_float(w.x), f[5] = __uint_as_float(w.y);
        f[6] = __uint_as_float(w.z), f[7] = __uint_as_float(w.w);
    }
    return make_uint4(ab_pack(f[0], f[1]), ab_pack(f[2], f[3]), ab_pack(f[4], f[5]), ab_pack(f[6], f[7]));
}

/* The tile's rows (tokens tile[2 blockIdx.x] .. x the GH query heads of blockIdx.z's group, at most R rows): thread
 * tid < R writes row tid's batch token, head, n and lo (a padding row: n = lo = 0, it sees no position); returns
 * the number of real rows. */
__device__ __forceinline__ int ab_tile_rows(const at_args &a, int R, int *rt, int *rh, int *rn, int *rlo, int tid) {
    const int64_t tile = blockIdx.x, hgroups = a.G / a.GH;
    const int64_t kvh = blockIdx.z / hgroups, h0 = kvh * a.G + (blockIdx.z % hgroups) * a.GH;
    const int k0 = a.tile[2 * tile];
    int cnt = a.tile[2 * tile + 1];
    if (cnt > R / (int)a.GH) cnt = R / (int)a.GH;
    const int nrows = cnt * (int)a.GH;
    if (tid < R) {
        if (tid < nrows) {
            const int t = a.tok[k0 + tid / (int)a.GH];
            const int n = a.pos[t] + 1;
            rt[tid] = t;
            rh[tid] = (int)(h0 + tid % a.GH);
            rn[tid] = n;
            rlo[tid] = a.window > 0 && n > a.window ? n - (int)a.window : 0;
        } else { /* a padding row: sees no position */
            rt[tid] = 0, rh[tid] = 0, rn[tid] = 0, rlo[tid] = 0;
        }
    }
    return nrows;
}

/* The span's cells into cls: -1 where no row of the tile sees the position (rows 0, step, 2 step .. < nrows stand
 * for all: a token's rows share n and lo), and the seen positions' key and value rows prefetched into L2. The
 * kernels do the first span's before td_pdl_wait: the cell table is the pass's (td_dev_upload_pass), and the rows
 * earlier passes wrote come into L2 while the kernel before finishes; a prefetch of a row this pass writes is
 * harmless (L2 holds the one copy, which the write updates). */
template <int KVF, int HD, int NT = AB_NT>
__device__ __forceinline__ void ab_span_cells(int *cls, const at_args &a, const int32_t *cell, int j, int span,
                                              const int *rlo, const int *rn, int nrows, int step, int64_t kvo,
                                              int tid) {
    const size_t es = kv_size(KVF);
    for (int i = tid; i < span; i += NT) {
        const int pp = j * span + i;
        bool seen = false;
        for (int r = 0; r < nrows; r += step) seen = seen || (pp >= rlo[r] && pp < rn[r]);
        const int c = seen ? cell[pp] : -1;
        cls[i] = c;
        if (c < 0) continue;
        const size_t at = ((size_t)c * (size_t)a.kv_dim + (size_t)kvo) * es;
        for (size_t b = 0; b < (size_t)HD * es; b += 128) {
            td_prefetch_l2((const char *)a.kc + at + b);
            td_prefetch_l2((const char *)a.vc + at + b);
        }
    }
}

/* One chunk's keys and values, rounded to bf16, into Ks / Vs [64][HD + AB_PAD] (+0 at a slot whose cell cl[] is -1):
 * units of 8 elements of one position's key and value, unit tid + 128 i; a batch's loads are all issued before its
 * first conversion (batches one after another: all at once would spill). A bf16 cache's units (16-byte aligned: vec)
 * are already the operands, so they go global -> shared by cp.async: all of the thread's in flight together, no
 * registers held for them (a loop kept rolled: unrolled, its addresses cost registers, and the 16-row kernel at hd 128
 * spilled); it waits for them here, and the caller's __syncthreads then shows every thread's copies to the block.
 * ab_issue is that half alone: the copies issued as one commit group (and +0 stored at the unseen slots), not waited
 * for (the 64-row kernel's double buffering waits for them one chunk later; its K/V pipeline issues the keys (KV 1)
 * and the values (KV 2) as groups of their own, Ks or Vs then unused). */
template <int HD, int NT = AB_NT, int KV = 3, bool SW = false>
__device__ __forceinline__ void ab_issue(uint16_t *Ks, uint16_t *Vs, const int *cl, const at_args &a, int64_t kvo,
                                         int tid) {
    constexpr int AB_ALL = AT_C * (HD / 8); /* units of a chunk */
#pragma unroll 1
    for (int u = tid; u < AB_ALL; u += NT) {
        const int pr = u / (HD / 8), e8 = (u % (HD / 8)) * 8, c = cl[pr];
        if (c >= 0) {
            const int64_t at = (int64_t)c * a.kv_dim + kvo + e8;
            if (KV & 1) td_cp16(&Ks[ab_at<HD, SW>(AT_C, pr, e8)], (const uint16_t *)a.kc + at);
            if (KV & 2) td_cp16(&Vs[ab_at<HD, SW>(AT_C, pr, e8)], (const uint16_t *)a.vc + at);
        } else {
            if (KV & 1) *(uint4 *)&Ks[ab_at<HD, SW>(AT_C, pr, e8)] = make_uint4(0u, 0u, 0u, 0u);
            if (KV & 2) *(uint4 *)&Vs[ab_at<HD, SW>(AT_C, pr, e8)] = make_uint4(0u, 0u, 0u, 0u);
        }
    }
    td_cp_commit();
}

template <int KVF, int HD, int NT = AB_NT>
__device__ __forceinline__ void ab_stage(uint16_t *Ks, uint16_t *Vs, const int *cl, const at_args &a, int64_t kvo,
                                         int tid) {
    constexpr int P = HD + AB_PAD;
    /* staging units (8 elements of K and V) a thread: HD / 16 at 128 threads; at 192 (96-row tiles) some threads
     * have one fewer (u past the chunk's units: none) */
    constexpr int AB_ALL = AT_C * (HD / 8), AB_UNITS = (AB_ALL + NT - 1) / NT;
    constexpr int AB_BATCH0 = KVF == TD_CU_KV_F32 ? 2 : 4;
    constexpr int AB_BATCH = AB_BATCH0 < AB_UNITS ? AB_BATCH0 : AB_UNITS; /* units whose loads fly together */
    constexpr bool WHOLE = AB_ALL % NT == 0 && AB_UNITS % AB_BATCH == 0; /* no unit past the chunk's */
    if (KVF == TD_CU_KV_BF16 && a.vec) {
        ab_issue<HD, NT>(Ks, Vs, cl, a, kvo, tid);
        td_cp_wait<0>();
        return;
    }
#pragma unroll 1
    for (int u0 = 0; u0 < AB_UNITS; u0 += AB_BATCH) {
        ab_raw<KVF> kr[AB_BATCH], vr[AB_BATCH];
        int cc[AB_BATCH];
#pragma unroll
        for (int b = 0; b < AB_BATCH; b++) {
            const int u = tid + (u0 + b) * NT, pr = u / (HD / 8), e8 = (u % (HD / 8)) * 8;
            cc[b] = WHOLE || u < AB_ALL ? cl[pr] : -1;
#pragma unroll
            for (int w = 0; w < ab_raw<KVF>::N; w++) kr[b].w[w] = vr[b].w[w] = make_uint4(0u, 0u, 0u, 0u);
            if (cc[b] >= 0) {
                const int64_t at = (int64_t)cc[b] * a.kv_dim + kvo + e8;
                ab_fetch<KVF>(kr[b], a.kc, at, a.vec);
                ab_fetch<KVF>(vr[b], a.vc, at, a.vec);
            }
        }
#pragma unroll
        for (int b = 0; b < AB_BATCH; b++) {
            const int u = tid + (u0 + b) * NT, pr = u / (HD / 8), e8 = (u % (HD / 8)) * 8;
            if (!WHOLE && u >= AB_ALL) continue;
            const uint4 z = make_uint4(0u, 0u, 0u, 0u);
            *(uint4 *)&Ks[pr * P + e8] = cc[b] >= 0 ? ab_cvt<KVF>(kr[b]) : z;
            *(uint4 *)&Vs[pr * P + e8] = cc[b] >= 0 ? ab_cvt<KVF>(vr[b]) : z;
        }
    }
}

/* Shared memory bytes of attention_bf16_kernel<.., HD>. */
static size_t ab_smem(int64_t hd) {
    const size_t P = (size_t)hd + AB_PAD;
    return (16 + 2 * AT_C) * P * 2 + 16 * AB_PP * 2 + 16 * AB_SP * 4 + 6 * AT_RMAX * 4 + 8 * AT_RMAX * 4 + AT_SC * 4;
}

template <int KVF, int HD> __global__ void __launch_bounds__(AB_NT) attention_bf16_kernel(const at_args a) {
    constexpr int P = HD + AB_PAD; /* bf16 pitch of Qs, Ks, Vs */
    constexpr int NF = HD / 32;    /* n8 fragments of the output a warp owns: HD / 4 columns */
    static_assert(HD % 64 == 0 && HD <= 256, "HD: a multiple of 64, at most 256");
    TD_DYN_SMEM16(unsigned char, ab_sm);
    uint16_t *Qs = (uint16_t *)ab_sm;  /* [16][P] the rows' queries (padding rows 0) */
    uint16_t *Ks = Qs + 16 * P;        /* [64][P] the chunk's keys */
    uint16_t *Vs = Ks + AT_C * P;      /* [64][P] the chunk's values */
    uint16_t *Ps = Vs + AT_C * P;      /* [16][AB_PP] p as bf16 */
    float *Ss = (float *)(Ps + 16 * AB_PP); /* [16][AB_SP] scores */
    float *Ms = Ss + 16 * AB_SP, *Ls = Ms + AT_RMAX, *Xs = Ls + AT_RMAX, *Ys = Xs + AT_RMAX;
    float *RMs = Ys + AT_RMAX, *RLs = RMs + AT_RMAX; /* the row state (mode 1) */
    int *rt = (int *)(RLs + AT_RMAX);  /* per row: batch token, head, n, lo, super state, chunk action, row state */
    int *rh = rt + AT_RMAX, *rn = rh + AT_RMAX, *rlo = rn + AT_RMAX, *sst = rlo + AT_RMAX, *act = sst + AT_RMAX;
    int *rst = act + AT_RMAX, *ract = rst + AT_RMAX;
    int *cls = ract + AT_RMAX;         /* [512] the span's cells (-1: no row of the tile sees the position) */

    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, qd = lane & 3;
    const int li = lane >> 3, lr = lane & 7; /* ldmatrix: this lane's matrix and row */
    const int64_t kvo = (int64_t)(blockIdx.z / (a.G / a.GH)) * HD; /* the KV head's offset in a cache row */
    const int nrows = ab_tile_rows(a, AT_RMAX, rt, rh, rn, rlo, tid);
    if (tid < AT_RMAX) rst[tid] = 0, sst[tid] = 0;
    __syncthreads();
    if (nrows <= 0) return;
    int maxn = 0, minlo = 0x7fffffff;
    for (int r = 0; r < nrows; r++) maxn = max(maxn, rn[r]), minlo = min(minlo, rlo[r]);
    const int span = a.span;
    int j0 = minlo / span, j1 = (maxn - 1) / span + 1;
    if (a.mode != 1) {
        if ((int)blockIdx.y < j0 || (int)blockIdx.y >= j1) return;
        j0 = blockIdx.y, j1 = j0 + 1;
    }
    const int32_t *cell = a.cells + (int64_t)a.seq[rt[0]] * a.n_ctx;
    ab_span_cells<KVF, HD>(cls, a, cell, j0, span, rlo, rn, nrows, 1, kvo, tid); /* the first span's, before */
    td_pdl_wait(); /* the tile's rows above read the pass's tables alone (written before its first kernel) */
    ab_stage_q<HD, AB_NT>(Qs, a, rt, rh, nrows, 16, tid);

    float A[NF][4], RA[NF][4]; /* the super-chunk state's and the row state's A: rows g, g + 8 (mma D layout) */
#pragma unroll
    for (int f = 0; f < NF; f++)
#pragma unroll
        for (int c = 0; c < 4; c++) A[f][c] = 0.0f, RA[f][c] = 0.0f;

    for (int j = j0; j < j1; j++) {
        if (tid < AT_RMAX) sst[tid] = 0;
        if (j > j0) ab_span_cells<KVF, HD>(cls, a, cell, j, span, rlo, rn, nrows, 1, kvo, tid);
        __syncthreads();
        for (int c0 = j * span; c0 < (j + 1) * span && c0 < maxn; c0 += AT_C) {
            if (c0 + AT_C <= minlo) continue;
            const int *cl = cls + (c0 - j * span);
            ab_stage<KVF, HD>(Ks, Vs, cl, a, kvo, tid);
            __syncthreads();
            /* scores: warp w, positions 16w .. 16w + 16 (two n8 fragments) */
            {
                float s[2][4] = {{0.0f, 0.0f, 0.0f, 0.0f}, {0.0f, 0.0f, 0.0f, 0.0f}};
#pragma unroll
                for (int ks = 0; ks < HD; ks += 16) {
                    uint32_t af[4], bq[4];
                    td_ldsm_x4(af, &Qs[(lr + (li & 1) * 8) * P + ks + (li >> 1) * 8]);
                    td_ldsm_x4(bq, &Ks[(warp * 16 + lr + (li >> 1) * 8) * P + ks + (li & 1) * 8]);
                    td_mma_bf16(s[0], af, bq[0], bq[1]);
                    td_mma_bf16(s[1], af, bq[2], bq[3]);
                }
#pragma unroll
                for (int f = 0; f < 2; f++)
#pragma unroll
                    for (int c = 0; c < 4; c++) {
                        const int r = g + (c >> 1) * 8, slot = warp * 16 + f * 8 + 2 * qd + (c & 1), pa = c0 + slot;
                        Ss[r * AB_SP + slot] = pa >= rlo[r] && pa < rn[r] ? a.scale * s[f][c] : -INFINITY;
                    }
            }
            __syncthreads();
            /* softmax: warp w, rows w + 4i */
            for (int r = warp; r < 16; r += AB_NT / 32) {
                const int lo = max(rlo[r], c0) - c0, hi = min(rn[r], c0 + AT_C) - c0;
                const bool v0 = lane >= lo && lane < hi, v1 = lane + 32 >= lo && lane + 32 < hi;
                const float s0 = Ss[r * AB_SP + lane], s1 = Ss[r * AB_SP + lane + 32];
                float m = fmaxf(v0 ? s0 : -INFINITY, v1 ? s1 : -INFINITY);
#pragma unroll
                for (int sh = 16; sh > 0; sh >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, sh));
                const uint32_t pp = ab_exp_pair(s0, s1, m, v0, v1), b0 = pp & 0xffffu, b1 = pp >> 16;
                Ps[r * AB_PP + lane] = (uint16_t)b0, Ps[r * AB_PP + lane + 32] = (uint16_t)b1;
                if (lo >= hi) {
                    if (lane == 0) act[r] = 0;
                    continue;
                }
                float l = td_dev_bf16((uint16_t)b0) + td_dev_bf16((uint16_t)b1); /* slots i, i + 32; then 16 .. 1 */
#pragma unroll
                for (int sh = 16; sh > 0; sh >>= 1) l += __shfl_down_sync(0xffffffffu, l, sh);
                if (lane == 0) {
                    if (!sst[r]) {
                        Ms[r] = m, Ls[r] = l, act[r] = 1, sst[r] = 1;
                    } else {
                        float Mn, x, y;
                        at_factors(Ms[r], m, &Mn, &x, &y);
                        Ls[r] = at_mix(Ls[r], x, l, y);
                        Ms[r] = Mn, Xs[r] = x, Ys[r] = y, act[r] = 2;
                    }
                }
            }
            __syncthreads();
            /* values: warp w, columns w HD/4 .. (w + 1) HD/4 */
            {
                float pv[NF][4];
#pragma unroll
                for (int f = 0; f < NF; f++) pv[f][0] = pv[f][1] = pv[f][2] = pv[f][3] = 0.0f;
#pragma unroll
                for (int kk = 0; kk < AT_C / 16; kk++) {
                    uint32_t af[4];
                    td_ldsm_x4(af, &Ps[(lr + (li & 1) * 8) * AB_PP + kk * 16 + (li >> 1) * 8]);
#pragma unroll
                    for (int np = 0; np < NF / 2; np++) {
                        uint32_t bq[4];
                        const int e0 = warp * (HD / 4) + np * 16;
                        td_ldsm_x4_t(bq, &Vs[(kk * 16 + (li & 1) * 8 + lr) * P + e0 + (li >> 1) * 8]);
                        td_mma_bf16(pv[2 * np], af, bq[0], bq[1]);
                        td_mma_bf16(pv[2 * np + 1], af, bq[2], bq[3]);
                    }
                }
#pragma unroll
                for (int c = 0; c < 4; c++) {
                    const int r = g + (c >> 1) * 8, how = act[r];
                    const float x = Xs[r], y = Ys[r];
#pragma unroll
                    for (int f = 0; f < NF; f++)
                        if (how == 1) A[f][c] = pv[f][c];
                        else if (how == 2) A[f][c] = at_mix(A[f][c], x, pv[f][c], y);
                }
            }
            __syncthreads(); /* Ks, Vs, Ps, act free for the next chunk */
        }
        /* the span's end: rows that saw a position of it */
        if (a.mode == 1) {
            if (tid < AT_RMAX) {
                if (tid < nrows && sst[tid]) {
                    if (!rst[tid]) {
                        RMs[tid] = Ms[tid], RLs[tid] = Ls[tid], ract[tid] = 1;
                    } else {
                        float Mn, x, y;
                        at_factors(RMs[tid], Ms[tid], &Mn, &x, &y);
                        RLs[tid] = at_mix(RLs[tid], x, Ls[tid], y);
                        RMs[tid] = Mn, Xs[tid] = x, Ys[tid] = y, ract[tid] = 2;
                    }
                    rst[tid] = 1;
                } else {
                    ract[tid] = 0;
                }
            }
            __syncthreads();
#pragma unroll
            for (int c = 0; c < 4; c++) {
                const int r = g + (c >> 1) * 8, how = ract[r];
                const float x = Xs[r], y = Ys[r];
#pragma unroll
                for (int f = 0; f < NF; f++)
                    if (how == 1) RA[f][c] = A[f][c];
                    else if (how == 2) RA[f][c] = at_mix(RA[f][c], x, A[f][c], y);
            }
        } else {
#pragma unroll
            for (int c = 0; c < 4; c++) {
                const int r = g + (c >> 1) * 8;
                if (r >= nrows || !sst[r]) continue;
                const bool direct = a.mode == 0 && rn[r] <= span; /* one span: its state is the row's */
                float *st = a.scratch + (((int64_t)rt[r] * a.Hq + rh[r]) * a.nsc + j) * (HD + 2);
                if (!direct && warp == 0 && qd == 0 && c % 2 == 0) st[0] = Ms[r], st[1] = Ls[r];
#pragma unroll
                for (int f = 0; f < NF; f++) {
                    const int e = warp * (HD / 4) + f * 8 + 2 * qd + (c & 1);
                    if (direct) at_put(a, rt[r], rh[r] * HD + e, A[f][c] / Ls[r]);
                    else st[2 + e] = A[f][c];
                }
            }
        }
        __syncthreads(); /* sst, Xs, Ys, cls free for the next span */
    }
    if (a.mode == 1)
#pragma unroll
        for (int c = 0; c < 4; c++) {
            const int r = g + (c >> 1) * 8;
            if (r >= nrows) continue;
#pragma unroll
            for (int f = 0; f < NF; f++) {
                const int e = warp * (HD / 4) + f * 8 + 2 * qd + (c & 1);
                at_put(a, rt[r], rh[r] * HD + e, RA[f][c] / RLs[r]);
            }
        }
}

/* ---- --precision bf16, tiles of 64 or 128 rows (attention_bf16_64_kernel) --------------------------------------- */

/* The same order, spans, scratch and combine as attention_bf16_kernel (so the same bits: cuda.h), in the
 * FlashAttention-2 layout: a tile of up to R = 16 NW rows (tokens of one sequence x query heads of one KV head; NW 4
 * warps, or 8 with TD_CUDA_ATTN_ROWS=128), warp w owning rows 16w .. 16w + 16 over the whole chunk, the chunk's keys
 * and values staged once in shared memory for the NW warps (each staged key is used by R rows instead of 16). Per
 * chunk of 64 positions:
 *   staging   as attention_bf16_kernel (Ks / Vs [64][HD] bf16, +0 at a slot no row of the tile sees)
 *   scores    warp w: S[its 16 rows][64 positions] = Q K^T, 8 n8 fragments, each one mma chain over HD in k-steps
 *             of 16 ascending from +0 (the same chain per element as attention_bf16_kernel); s = scale * d, -inf
 *             where the row does not see the position. Lane 4g + q holds rows g and g + 8, slots 8f + 2q + {0, 1}.
 *   softmax   in registers (ab64_softmax; a chunk that every row of the warp sees whole skips the slot checks):
 *             m = max over the row's slots (the lane's 16, then the quad's shuffles: max is exact);
 *             p = bf16(e^(s - m)) (ab_exp; 0 where unseen); l = the canonical tree: slot i + slot i + 32 is fragment f
 *             + fragment f + 4 in the lane, stride 16 is f + f + 2, stride 8 is f = 0 + f = 1, strides 4 and 2 are
 *             the quad's lanes q + q ^ 2 and q + q ^ 1 (xor: every lane of the quad gets the sum, a + b = b + a),
 *             stride 1 is the lane's slot pair; then the fold factors, per row in the quad's registers.
 *   values    the S fragments are the A operand of P V (the mma's D layout is its A layout): per 16 output columns
 *             (np), one mma chain over the chunk's 4 k-steps of 16 slots ascending from +0 (B = Vs by
 *             ldmatrix.trans), folded into the super-chunk state A (registers, HD / 2 floats a thread) by the
 *             combine rule.
 * A warp whose 16 rows see no position of a chunk skips its products (nothing of theirs changes). Test mode 1's row
 * state lives in shared memory (the thread's own slots), not registers. */
/* head dims it runs (the others keep attention_bf16_kernel): 64 and 128. At 256 the 16 x 256 output state is 128
 * floats a thread and sm_90 spills (ptxas: 255 registers, 344 bytes of spill stores, 924 of loads): AB64_HD256 0
 * keeps 256 on the 16-row kernel */
#define AB64_HD256 0
#define AB64_HD_OK(hd) ((hd) == 64 || (hd) == 128 || (AB64_HD256 && (hd) == 256))

/* Shared memory bytes of attention_bf16_64_kernel<.., HD, .., R / 16> (mode 1: the row state too; db: a second Ks /
 * Vs; wg: the AB_WG form's unpadded operands from a 1024-byte boundary). */
static size_t ab64_smem(int64_t hd, int mode, int db, int R = 64, bool wg = false) {
    const size_t P = wg ? (size_t)hd : (size_t)hd + AB_PAD;
    return (wg ? 1024 : 0) + ((size_t)R + (db ? 4 : 2) * (size_t)AT_C) * P * 2 + 4 * (size_t)R * 4 + AT_SC * 4 +
           (mode == 1 ? (size_t)R * (size_t)hd * 4 : 0);
}

/* attention_bf16_64_kernel's softmax of a lane's row h (row g + 8 h of the warp; the quad's 4 lanes hold its 64
 * slots, slot 8 f + 2 q + b in s[f][2 h + b]) over its seen slots [vlo, vhi): the row max into m, each slot's p
 * rounded to bf16 into pk[f][h] (+0 where unseen), and l, the rounded p's sum by the canonical tree (the kernel's
 * comment). FULL: every slot seen (vlo 0, vhi 64), the checks left out; the caller knows it for the whole warp (the
 * shuffles). */
template <bool FULL>
__device__ __forceinline__ float ab64_softmax(const float (&s)[8][4], uint32_t (&pk)[8][2], int h, int vlo, int vhi,
                                              int qd, float scale, float &m) {
    float sc[8][2];
    m = -INFINITY;
#pragma unroll
    for (int f = 0; f < 8; f++)
#pragma unroll
        for (int b = 0; b < 2; b++) {
            const int slot = f * 8 + 2 * qd + b;
            sc[f][b] = FULL || (slot >= vlo && slot < vhi) ? scale * s[f][2 * h + b] : -INFINITY;
            m = fmaxf(m, sc[f][b]);
        }
    m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 1));
    m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 2));
    float p[8][2];
#pragma unroll
    for (int f = 0; f < 8; f++) {
        const int slot = f * 8 + 2 * qd;
        const bool v0 = FULL || (slot >= vlo && slot < vhi), v1 = FULL || (slot + 1 >= vlo && slot + 1 < vhi);
        const uint32_t w = ab_exp_pair(sc[f][0], sc[f][1], m, v0, v1);
        pk[f][h] = w, p[f][0] = __uint_as_float(w << 16), p[f][1] = __uint_as_float(w & 0xffff0000u);
    }
    float t1[4][2], t2[2][2], t3[2];
#pragma unroll
    for (int b = 0; b < 2; b++) {
#pragma unroll
        for (int f = 0; f < 4; f++) t1[f][b] = p[f][b] + p[f + 4][b]; /* i + i + 32 */
#pragma unroll
        for (int f = 0; f < 2; f++) t2[f][b] = t1[f][b] + t1[f + 2][b]; /* stride 16 */
        t3[b] = t2[0][b] + t2[1][b];                                     /* stride 8 */
        t3[b] += __shfl_xor_sync(0xffffffffu, t3[b], 2);                 /* stride 4 */
        t3[b] += __shfl_xor_sync(0xffffffffu, t3[b], 1);                 /* stride 2 */
    }
    return t3[0] + t3[1]; /* stride 1 */
}

/* How the 64-row kernel stages a span's chunks: AB_STAGED each chunk's keys and values copied and waited for before
 * its products; AB_DB (a bf16 cache) double-buffered, the next chunk's copies in flight during this one's products
 * (a second Ks / Vs); AB_PIPE (a bf16 cache) the keys and values as copies of their own in the one Ks / Vs: the
 * chunk's values in flight during its scores and softmax, the next chunk's keys during its values' products.
 * AB_WG (a bf16 cache, 4 warps: one warpgroup; compute capability 9.0) stages as AB_STAGED, in wgmma's 128-byte
 * swizzle, and runs the products on wgmma: the scores as m64n64k16 over HD / 16 k-steps (queries and keys from shared
 * memory), the values' as m64n64k16 over the chunk's 4 k-steps per 64 columns with p from registers (the mma's A
 * fragments the softmax leaves) and the values read MN-major. The same chains, so the same bits (cuda.h). */
enum { AB_STAGED = 0, AB_DB = 1, AB_PIPE = 2, AB_WG = 3 };

template <int KVF, int HD, int ST = AB_STAGED, int NW = 4, int MB = 1>
__global__ void __launch_bounds__(32 * NW, MB) attention_bf16_64_kernel(const at_args a) {
    constexpr int R = 16 * NW, NT = 32 * NW; /* rows per tile (16 a warp), threads */
    constexpr int P = HD + AB_PAD;  /* bf16 pitch of Qs, Ks, Vs */
    constexpr int NF = HD / 8;      /* n8 fragments of a warp's output: all HD columns */
    static_assert(HD % 64 == 0 && HD <= 256, "HD: a multiple of 64, at most 256");
    TD_DYN_SMEM16(unsigned char, ab_sm);
    static_assert(ST == AB_STAGED || KVF == TD_CU_KV_BF16, "AB_DB, AB_PIPE, AB_WG copy a bf16 cache as it is");
    static_assert(ST != AB_WG || NW == 4, "AB_WG: the 4 warps are wgmma's warpgroup");
    constexpr bool db = ST == AB_DB, pipe = ST == AB_PIPE, wg = ST == AB_WG; /* the host checked a.vec */
    /* wg: the operands from a 1024-byte boundary (the swizzle's address bits), [HD / 64][rows][64] each */
    uint16_t *Qs = (uint16_t *)(wg ? td_align1k(ab_sm) : ab_sm); /* [R][P] the rows' queries (padding rows 0) */
    uint16_t *Ks = Qs + (wg ? R * HD : R * P);                    /* [64][P] the chunk's keys */
    uint16_t *Vs = Ks + (wg ? AT_C * HD : AT_C * P);              /* [64][P] the chunk's values */
    /* db: the odd chunks' keys and values 2 AT_C P further (after Vs) */
    int *rt = (int *)(Vs + (wg ? AT_C * HD : (db ? 3 : 1) * AT_C * P)); /* per row: batch token, head, n, lo */
    int *rh = rt + R, *rn = rh + R, *rlo = rn + R;
    int *cls = rlo + R;                  /* [512] the span's cells (-1: no row of the tile sees the position) */
    float *RAs = (float *)(cls + AT_SC); /* mode 1: [NW warps][NF][4][32 lanes] the row state's A */

    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, qd = lane & 3;
    const int li = lane >> 3, lr = lane & 7;
    const int64_t kvo = (int64_t)(blockIdx.z / (a.G / a.GH)) * HD; /* the KV head's offset in a cache row */
    const int nrows = ab_tile_rows(a, R, rt, rh, rn, rlo, tid);
    __syncthreads();
    if (nrows <= 0) return;
    int maxn = 0, minlo = 0x7fffffff;
    const int gh = (int)a.GH; /* a token's GH rows have its n and lo: one of them stands for all */
    for (int r = 0; r < nrows; r += gh) maxn = max(maxn, rn[r]), minlo = min(minlo, rlo[r]);
    const int span = a.span;
    int j0 = minlo / span, j1 = (maxn - 1) / span + 1;
    if (a.mode != 1) {
        if ((int)blockIdx.y < j0 || (int)blockIdx.y >= j1) return;
        j0 = blockIdx.y, j1 = j0 + 1;
    }
    const int32_t *cell = a.cells + (int64_t)a.seq[rt[0]] * a.n_ctx;
    ab_span_cells<KVF, HD, NT>(cls, a, cell, j0, span, rlo, rn, nrows, gh, kvo, tid); /* the first span's, before */
    td_pdl_wait(); /* the tile's rows above read the pass's tables alone (written before its first kernel) */
    ab_stage_q<HD, NT, wg>(Qs, a, rt, rh, nrows, R, tid);
    /* this lane's rows: row[h] = 16 warp + g + 8h (h = c >> 1 of a D fragment's element c) */
    int row[2], lo_[2], n_[2];
#pragma unroll
    for (int h = 0; h < 2; h++) row[h] = warp * 16 + g + 8 * h, lo_[h] = rlo[row[h]], n_[h] = rn[row[h]];
    int wlo = 0x7fffffff, whi = 0;   /* the positions some row of the warp sees */
    int wfrom = 0, wto = 0x7fffffff; /* the positions every row of the warp sees (a padding row: none) */
    for (int r = warp * 16; r < warp * 16 + 16; r++) {
        if (rn[r] > rlo[r]) wlo = min(wlo, rlo[r]), whi = max(whi, rn[r]);
        wfrom = max(wfrom, rlo[r]), wto = min(wto, rn[r]);
    }

    float A[NF][4]; /* the super-chunk state's A: rows g, g + 8 of the warp, columns 8f + 2q + {0, 1} */
#pragma unroll
    for (int f = 0; f < NF; f++)
#pragma unroll
        for (int c = 0; c < 4; c++) A[f][c] = 0.0f;
    float M[2] = {0.0f, 0.0f}, L[2] = {0.0f, 0.0f}, RM[2] = {0.0f, 0.0f}, RL[2] = {0.0f, 0.0f};
    int sst[2] = {0, 0}, rst[2] = {0, 0};
    float *RA = RAs + warp * (NF * 4 * 32) + lane; /* mode 1: element (f, c) at RA[(4 f + c) * 32] */

    for (int j = j0; j < j1; j++) {
        sst[0] = sst[1] = 0;
        if (j > j0) ab_span_cells<KVF, HD, NT>(cls, a, cell, j, span, rlo, rn, nrows, gh, kvo, tid);
        __syncthreads();
        bool issued = false; /* db: the span's first chunk's copies are in flight */
        const int cend = min((j + 1) * span, maxn); /* the span's chunks: c0 from its first that a row sees to cend */
        if (pipe) { /* the span's first seen chunk's keys */
            const int cf = max(j * span, minlo / AT_C * AT_C);
            if (cf < cend) ab_issue<HD, NT, 1>(Ks, Vs, cls + (cf - j * span), a, kvo, tid);
        }
        for (int c0 = j * span; c0 < (j + 1) * span && c0 < maxn; c0 += AT_C) {
            if (c0 + AT_C <= minlo) continue;
            const int *cl = cls + (c0 - j * span);
            /* db: chunk c0 in the buffer of its parity, its copies issued one chunk earlier (the span's first: here);
             * the next chunk's go into the other buffer, free since the barrier that ended the chunk before */
            const int off = db && ((c0 / AT_C) & 1) ? 2 * AT_C * P : 0;
            uint16_t *const K = Ks + off, *const V = Vs + off;
            if (db) {
                if (!issued) ab_issue<HD, NT>(K, V, cl, a, kvo, tid), issued = true;
                if (c0 + AT_C < (j + 1) * span && c0 + AT_C < maxn)
                    ab_issue<HD, NT>(Ks + (2 * AT_C * P - off), Vs + (2 * AT_C * P - off), cl + AT_C, a, kvo, tid);
                else td_cp_commit(); /* an empty group: the wait below is then chunk c0's either way */
                td_cp_wait<1>();
            } else if (wg) {
                ab_issue<HD, NT, 3, true>(K, V, cl, a, kvo, tid);
                td_cp_wait<0>();
                td_fence_async_smem(); /* the copies and stores (the queries' too) seen by wgmma's proxy */
            } else if (!pipe) {
                ab_stage<KVF, HD, NT>(K, V, cl, a, kvo, tid);
            }
            if (pipe) td_cp_wait<0>(); /* the chunk's keys (issued a chunk earlier, or above for the span's first) */
            __syncthreads(); /* pipe: every warp also past the chunk before's values: Vs free */
            if (pipe) ab_issue<HD, NT, 2>(Ks, Vs, cl, a, kvo, tid);
            /* some row of the warp sees a position of the chunk (wg: every warp, wgmma is the warpgroup's) */
            const bool wact = wg || (wlo < c0 + AT_C && whi > c0);
            /* p as bf16 pairs: fragment f, rows g (0) and g + 8 (1); each row's fold of the chunk (act: 0 none, 1 a
             * copy, 2 a combine by the factors x, y) */
            uint32_t pk[8][2];
            int act[2];
            float x[2] = {0.0f, 0.0f}, y[2] = {0.0f, 0.0f};
            if (wact) { /* warp-uniform */
                /* scores: S[16 rows][64 slots], fragment f = slots 8f .. 8f + 8 */
                float s[8][4];
#pragma unroll
                for (int f = 0; f < 8; f++) s[f][0] = s[f][1] = s[f][2] = s[f][3] = 0.0f;
                if constexpr (wg) { /* the same chain on wgmma: k-step ks at 32 bytes into its column block */
                    float(&sd)[32] = *reinterpret_cast<float(*)[32]>(&s[0][0]);
                    td_wg_fence();
#pragma unroll
                    for (int ks = 0; ks < HD / 16; ks++) {
                        const int o = (ks >> 2) * 64 * 128 + (ks & 3) * 32;
                        td_wgmma_bf16<64>(sd, td_wg_desc((const unsigned char *)Qs + o),
                                          td_wg_desc((const unsigned char *)K + o));
                    }
                    td_wg_commit();
                    td_wg_wait<0>();
#pragma unroll
                    for (int i = 0; i < 32; i++) td_wg_reg(sd[i]);
                } else
#pragma unroll
                for (int ks = 0; ks < HD; ks += 16) {
                    uint32_t af[4];
                    td_ldsm_x4(af, &Qs[(warp * 16 + lr + (li & 1) * 8) * P + ks + (li >> 1) * 8]);
#pragma unroll
                    for (int np = 0; np < 4; np++) {
                        uint32_t bq[4];
                        td_ldsm_x4(bq, &K[(np * 16 + lr + (li >> 1) * 8) * P + ks + (li & 1) * 8]);
                        td_mma_bf16(s[2 * np], af, bq[0], bq[1]);
                        td_mma_bf16(s[2 * np + 1], af, bq[2], bq[3]);
                    }
                }
                /* softmax per row h (the quad's 4 lanes hold its 64 slots) */
                const bool full = wfrom <= c0 && c0 + AT_C <= wto; /* every row of the warp sees the whole chunk */
#pragma unroll
                for (int h = 0; h < 2; h++) {
                    const int vlo = max(lo_[h], c0) - c0, vhi = min(n_[h], c0 + AT_C) - c0; /* seen slots */
                    float m;
                    const float l = full ? ab64_softmax<true>(s, pk, h, vlo, vhi, qd, a.scale, m)
                                         : ab64_softmax<false>(s, pk, h, vlo, vhi, qd, a.scale, m);
                    if (vlo >= vhi) {
                        act[h] = 0;
                    } else if (!sst[h]) {
                        M[h] = m, L[h] = l, act[h] = 1, sst[h] = 1;
                    } else {
                        float Mn;
                        at_factors(M[h], m, &Mn, &x[h], &y[h]);
                        L[h] = at_mix(L[h], x[h], l, y[h]);
                        M[h] = Mn, act[h] = 2;
                    }
                }
            }
            if (pipe) { /* the values landed, every warp past the keys: the next chunk's keys into Ks */
                td_cp_wait<0>();
                __syncthreads();
                if (c0 + AT_C < cend) ab_issue<HD, NT, 1>(Ks, Vs, cl + AT_C, a, kvo, tid);
            }
            if (wact) {
                /* a value product's element joins the state by the row's fold */
                auto fold = [&](float &Ae, int h, float v) {
                    if (act[h] == 1) Ae = v;
                    else if (act[h] == 2) Ae = at_mix(Ae, x[h], v, y[h]);
                };
                if constexpr (wg) { /* per 64 columns, the chain over the chunk's 4 k-steps on wgmma; A = p */
#pragma unroll
                    for (int cb = 0; cb < HD / 64; cb++) {
                        float pv[32];
#pragma unroll
                        for (int i = 0; i < 32; i++) pv[i] = 0.0f;
                        td_wg_fence();
#pragma unroll
                        for (int kk = 0; kk < AT_C / 16; kk++) {
                            const uint32_t af[4] = {pk[2 * kk][0], pk[2 * kk][1], pk[2 * kk + 1][0], pk[2 * kk + 1][1]};
                            td_wgmma_bf16_rt64(pv, af,
                                               td_wg_desc_mn((const unsigned char *)V + (cb * AT_C + kk * 16) * 128,
                                                             AT_C * 128));
                        }
                        td_wg_commit();
                        td_wg_wait<0>();
#pragma unroll
                        for (int i = 0; i < 32; i++) td_wg_reg(pv[i]);
#pragma unroll
                        for (int j = 0; j < 8; j++)
#pragma unroll
                            for (int c = 0; c < 4; c++) fold(A[8 * cb + j][c], c >> 1, pv[4 * j + c]);
                    }
                } else
                /* values: per 16 columns, the chain over the chunk's 4 k-steps; A operand = p (D layout = A layout) */
#pragma unroll
                for (int np = 0; np < NF / 2; np++) {
                    float pv[2][4] = {{0.0f, 0.0f, 0.0f, 0.0f}, {0.0f, 0.0f, 0.0f, 0.0f}};
#pragma unroll
                    for (int kk = 0; kk < AT_C / 16; kk++) {
                        const uint32_t af[4] = {pk[2 * kk][0], pk[2 * kk][1], pk[2 * kk + 1][0], pk[2 * kk + 1][1]};
                        uint32_t bq[4];
                        td_ldsm_x4_t(bq, &V[(kk * 16 + (li & 1) * 8 + lr) * P + np * 16 + (li >> 1) * 8]);
                        td_mma_bf16(pv[0], af, bq[0], bq[1]);
                        td_mma_bf16(pv[1], af, bq[2], bq[3]);
                    }
#pragma unroll
                    for (int u = 0; u < 2; u++)
#pragma unroll
                        for (int c = 0; c < 4; c++) fold(A[2 * np + u][c], c >> 1, pv[u][c]);
                }
            }
            if (!pipe) __syncthreads(); /* Ks, Vs free for the next chunk (pipe: the next chunk's first barrier) */
        }
        /* the span's end: rows that saw a position of it */
        if (a.mode == 1) {
#pragma unroll
            for (int h = 0; h < 2; h++) {
                int how = 0;
                float x = 0.0f, y = 0.0f;
                if (sst[h]) {
                    if (!rst[h]) {
                        RM[h] = M[h], RL[h] = L[h], how = 1;
                    } else {
                        float Mn;
                        at_factors(RM[h], M[h], &Mn, &x, &y);
                        RL[h] = at_mix(RL[h], x, L[h], y);
                        RM[h] = Mn, how = 2;
                    }
                    rst[h] = 1;
                }
#pragma unroll
                for (int f = 0; f < NF; f++)
#pragma unroll
                    for (int b = 0; b < 2; b++) {
                        float *ra = RA + (4 * f + 2 * h + b) * 32;
                        if (how == 1) *ra = A[f][2 * h + b];
                        else if (how == 2) *ra = at_mix(*ra, x, A[f][2 * h + b], y);
                    }
            }
        } else {
#pragma unroll
            for (int h = 0; h < 2; h++) {
                const int r = row[h];
                if (r >= nrows || !sst[h]) continue;
                const bool direct = a.mode == 0 && n_[h] <= span; /* one span: its state is the row's */
                float *st = a.scratch + (((int64_t)rt[r] * a.Hq + rh[r]) * a.nsc + j) * (HD + 2);
                if (!direct && qd == 0) st[0] = M[h], st[1] = L[h];
                /* the lane's two columns of a fragment as one 8-byte store where the row allows it */
                float *const o = direct ? a.out + (int64_t)rt[r] * a.ldo + rh[r] * HD : st + 2;
                const bool o2 = ((uintptr_t)o & 7u) == 0;
#pragma unroll
                for (int f = 0; f < NF; f++) {
                    const int e = f * 8 + 2 * qd;
                    const float2 w = direct ? make_float2(A[f][2 * h] / L[h], A[f][2 * h + 1] / L[h])
                                            : make_float2(A[f][2 * h], A[f][2 * h + 1]);
                    if (o2) *(float2 *)(o + e) = w;
                    else o[e] = w.x, o[e + 1] = w.y;
                    if (direct) at_put2_b(a, rt[r], rh[r] * HD + e, w);
                }
            }
        }
        __syncthreads(); /* cls free for the next span */
    }
    if (a.mode == 1)
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const int r = row[h];
            if (r >= nrows) continue;
#pragma unroll
            for (int f = 0; f < NF; f++)
#pragma unroll
                for (int b = 0; b < 2; b++) {
                    const int e = f * 8 + 2 * qd + b;
                    at_put(a, rt[r], rh[r] * HD + e, RA[(4 * f + 2 * h + b) * 32] / RL[h]);
                }
        }
}

#ifndef TD_CU_EMU /* tests/cuda/emu compiles the kernels above alone */

extern "C" void td_cu_attention_test_mode(int mode) { at_test_mode = mode; }

extern "C" int64_t td_cu_attn_tile_tokens(int64_t Hq, int64_t Hkv, int64_t hd) {
    if (Hq <= 0 || Hkv <= 0 || Hq % Hkv || hd <= 0) return 1;
    const int R = at_rows(hd);
    return R / at_heads(Hq / Hkv, R);
}

extern "C" int64_t td_cu_attn_tiles(int32_t *tile, const int32_t *grp_off, int64_t n_groups, int64_t qt) {
    int64_t n = 0;
    if (qt < 1) qt = 1;
    for (int64_t g = 0; g < n_groups; g++)
        for (int64_t k = grp_off[g]; k < grp_off[g + 1]; k += qt) {
            tile[2 * n] = (int32_t)k;
            tile[2 * n + 1] = (int32_t)(grp_off[g + 1] - k < qt ? grp_off[g + 1] - k : qt);
            n++;
        }
    return n;
}

extern "C" int64_t td_cu_attn_scratch_floats(int64_t T, int64_t Hq, int64_t max_n, int64_t hd) {
    return T * Hq * ((max_n + AT_SC - 1) / AT_SC) * (hd + 2);
}

/* The launch's arguments, grid and whether the combine runs; -1 (td_cu_failf) for arguments it cannot run. */
static int at_prepare(at_args *ap, dim3 *gridp, bool *splitp, float *out, int64_t ldo, const float *q, int64_t ldq,
                      int64_t q_head_stride, const void *kc, const void *vc, int kvf, int64_t kv_dim,
                      const int32_t *cells, int64_t n_ctx, const int32_t *seq, const int32_t *pos, int64_t T,
                      int64_t Hq, int64_t Hkv, int64_t hd, float scale, int64_t window, const td_cu_attn_plan *tl,
                      int R) {
    if (kvf != TD_CU_KV_F32 && kvf != TD_CU_KV_F16 && kvf != TD_CU_KV_BF16)
        return td_cu_failf("td_cu_attention: KV cache format %d (0 f32, 1 f16, 2 bf16)", kvf);
    if (!tl || tl->n_tiles <= 0) return td_cu_failf("td_cu_attention: %lld tokens and no tiles", (long long)T);
    if (Hkv <= 0 || Hq % Hkv)
        return td_cu_failf("td_cu_attention: %lld query heads over %lld KV heads", (long long)Hq, (long long)Hkv);
    if (hd <= 0 || hd > AT_MAXHD)
        return td_cu_failf("td_cu_attention: head dim %lld (1 .. %d)", (long long)hd, AT_MAXHD);
    if (tl->max_n < 1 || tl->max_n > n_ctx)
        return td_cu_failf("td_cu_attention: max_n %lld outside 1 .. n_ctx %lld", (long long)tl->max_n,
                           (long long)n_ctx);
    if (tl->n_tiles > 0x7fffffff || T * Hq > 0x7fffffff)
        return td_cu_failf("td_cu_attention: %lld tiles, %lld tokens x %lld heads: beyond one launch",
                           (long long)tl->n_tiles, (long long)T, (long long)Hq);
    at_args a;
    a.out = out, a.ldo = ldo, a.q = q, a.ldq = ldq, a.qhs = q_head_stride, a.kc = kc, a.vc = vc, a.kv_dim = kv_dim;
    a.cells = cells, a.n_ctx = n_ctx, a.seq = seq, a.pos = pos, a.tok = tl->tok, a.tile = tl->tile;
    a.Hq = Hq, a.G = Hq / Hkv, a.hd = hd, a.window = window, a.scale = scale;
    a.R = R, a.GH = at_heads(a.G, a.R), a.mode = at_test_mode == 3 ? 0 : at_test_mode;
    if (tl->tile_tokens > a.R / a.GH)
        return td_cu_failf("td_cu_attention: tiles of %lld tokens, this kernel takes %lld (%lld rows of %lld heads)",
                           (long long)tl->tile_tokens, (long long)(a.R / a.GH), (long long)a.R, (long long)a.GH);
    a.scratch = tl->scratch, a.vec = 0, a.outb = tl->out_bf16, a.ldb = Hq * hd;
    /* the span: one chunk when the super-chunk split would leave the GPU mostly idle and the scratch holds the chunk
     * states (test mode 3 forces it); the bits are the same either way */
    const int64_t zdim = Hkv * (a.G / a.GH), chunks = (tl->max_n + AT_C - 1) / AT_C;
    const int64_t supers = (tl->max_n + AT_SC - 1) / AT_SC, chunk_need = T * Hq * chunks * (hd + 2);
    a.span = AT_SC;
    if (at_test_mode == 3 ||
        (a.mode == 0 && tl->max_n > AT_C && tl->n_tiles * zdim * supers < 256 && tl->scratch_floats >= chunk_need))
        a.span = AT_C;
    a.nsc = (tl->max_n + a.span - 1) / a.span;
    const bool split = a.mode == 2 || (a.mode == 0 && tl->max_n > a.span);
    const int64_t need = T * Hq * a.nsc * (hd + 2);
    if (split && tl->scratch_floats < need)
        return td_cu_failf("td_cu_attention: scratch of %lld floats, %lld needed (%lld tokens, %lld heads, n %lld)",
                           (long long)tl->scratch_floats, (long long)need, (long long)T, (long long)Hq,
                           (long long)tl->max_n);
    *gridp = dim3((unsigned)tl->n_tiles, a.mode == 1 ? 1u : (unsigned)a.nsc, (unsigned)zdim);
    *ap = a;
    *splitp = split;
    return 0;
}

template <int KVF> static int at_launch(const at_args &a, dim3 grid, size_t smem, cudaStream_t s) {
    static size_t allowed = 48 * 1024; /* raised once per instantiation as needed (the same for every device 0) */
    if (smem > allowed) {
        cudaError_t e = cudaFuncSetAttribute(attention_tile_kernel<KVF>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                             (int)smem);
        if (e != cudaSuccess) return td_cu_fail("attention: shared memory", e);
        allowed = smem;
    }
    attention_tile_kernel<KVF><<<grid, AT_NT, smem, s>>>(a);
    return td_cu_launched("attention");
}

extern "C" int td_cu_attention(float *out, int64_t ldo, const float *q, int64_t ldq, int64_t q_head_stride,
                               const void *kc, const void *vc, int kvf, int64_t kv_dim, const int32_t *cells,
                               int64_t n_ctx, const int32_t *seq, const int32_t *pos, int64_t T, int64_t Hq,
                               int64_t Hkv, int64_t hd, float scale, int64_t window, const td_cu_attn_plan *tl,
                               void *stream) {
    if (T <= 0 || Hq <= 0) return 0;
    at_args a;
    dim3 grid;
    bool split = false;
    if (at_prepare(&a, &grid, &split, out, ldo, q, ldq, q_head_stride, kc, vc, kvf, kv_dim, cells, n_ctx, seq, pos, T,
                   Hq, Hkv, hd, scale, window, tl, at_rows(hd)) != 0)
        return -1;
    const size_t smem = at_smem(a.R, hd, a.mode);
    cudaStream_t s = TD_CU_STREAM(stream);
    int rc = kvf == TD_CU_KV_BF16  ? at_launch<TD_CU_KV_BF16>(a, grid, smem, s)
             : kvf == TD_CU_KV_F16 ? at_launch<TD_CU_KV_F16>(a, grid, smem, s)
                                   : at_launch<TD_CU_KV_F32>(a, grid, smem, s);
    if (rc != 0 || !split) return rc;
    attention_combine_kernel<<<(unsigned)(T * Hq), 128, 0, s>>>(a);
    return td_cu_launched("attention: combine");
}

/* TD_CUDA_TC_ATTN=0 in the environment (read once per process) keeps bf16 mode on attention_tile_kernel. */
static bool ab_enabled(void) {
    static const bool on = td_cu_env_on("TD_CUDA_TC_ATTN");
    return on;
}

extern "C" int td_cu_attention_tc(int64_t hd) { return ab_enabled() && (hd == 64 || hd == 128 || hd == 256); }

/* TD_CUDA_ATT_XB=0: the caller gives no out_bf16 (td_cu_attention_xb); read once. */
static const int at_xb_on = td_cu_env_on("TD_CUDA_ATT_XB");
extern "C" int td_cu_attention_xb(void) { return at_xb_on; }

/* kern (attention_bf16_kernel<KVF, HD> for ROWS 16, attention_bf16_64_kernel<KVF, HD, ST, ROWS / 16> for 64, 96 and
 * 128: a warp per 16 rows) on the grid. */
template <int KVF, int HD, int ROWS, int ST = AB_STAGED, int MB = 1>
static int ab_launch(void (*kern)(at_args), const at_args &a, dim3 grid, size_t smem, cudaStream_t s) {
    static size_t allowed = 48 * 1024; /* raised once per instantiation as needed */
    if (smem > allowed) {
        cudaError_t e = cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
        if (e != cudaSuccess) return td_cu_fail("attention (tensor cores): shared memory", e);
        allowed = smem;
    }
    kern<<<grid, ROWS == 16 ? AB_NT : 2 * ROWS, smem, s>>>(a);
    return td_cu_launched(ROWS == 64    ? "attention (tensor cores, 64 rows)"
                          : ROWS == 96  ? "attention (tensor cores, 96 rows)"
                          : ROWS == 128 ? "attention (tensor cores, 128 rows)"
                                        : "attention (tensor cores)");
}

/* The bf16 kernel's rows per tile for hd: 64 (attention_bf16_64_kernel, 4 warps) unless TD_CUDA_ATTN_ROWS (or the
 * test override) says 16 (attention_bf16_kernel), 96 (6 warps) or 128 (8 warps: each staged chunk used by twice the
 * rows; measured slower on the H100, part 9: decide -7%, prefill -12%); -1 for another value of the variable. */
static int ab_rows_test = 0; /* td_cu_attention_rows_test */
static const char *ab_rows_env(void) {
    static const char *e = getenv("TD_CUDA_ATTN_ROWS");
    return e;
}
static int ab_rows(int64_t hd) {
    int rows = ab_rows_test;
    if (!rows) {
        const char *e = ab_rows_env();
        rows = !e || !*e || strcmp(e, "64") == 0 ? 64
               : strcmp(e, "16") == 0            ? 16
               : strcmp(e, "96") == 0            ? 96
               : strcmp(e, "128") == 0           ? 128
                                                 : -1;
    }
    if (rows >= 64 && !AB64_HD_OK(hd)) rows = 16;
    return rows;
}

extern "C" void td_cu_attention_rows_test(int rows) {
    ab_rows_test = rows == 16 || rows == 64 || rows == 96 || rows == 128 ? rows : 0;
}

extern "C" int64_t td_cu_attn_tile_tokens_bf16(int64_t Hq, int64_t Hkv, int64_t hd) {
    if (Hq <= 0 || Hkv <= 0 || Hq % Hkv || !td_cu_attention_tc(hd)) return td_cu_attn_tile_tokens(Hq, Hkv, hd);
    const int rows = ab_rows(hd);
    if (rows < 64) return td_cu_attn_tile_tokens(Hq, Hkv, hd);
    return rows / at_heads(Hq / Hkv, rows);
}

/* TD_CUDA_ATTN_WG=1: the 64-row kernel's products on wgmma (AB_WG) for a 16-byte aligned bf16 cache on compute
 * capability 9.0, and no 96-row tiles (td_cu_attn_whole_tokens_bf16 0: wgmma's warpgroup is 64 rows);
 * td_cu_attention_wg_test overrides it. The same bits. */
static int ab_wg_on = td_cu_env_set("TD_CUDA_ATTN_WG");
extern "C" void td_cu_attention_wg_test(int on) { ab_wg_on = on < 0 ? td_cu_env_set("TD_CUDA_ATTN_WG") : on != 0; }

/* TD_CUDA_ATTN_96=0: no 96-row tiles (attention_bf16_64_kernel with 6 warps, two blocks an SM). Otherwise, with the
 * 64-row default, the engine may cut a pass whose every group fits one 96-row tile, and some group no 64-row tile, into
 * such tiles (td_cu_attn_whole_tokens_bf16): a decide pass's 45-token criteria of a model whose KV heads each serve 2
 * query heads are then one tile each (90 rows) instead of two of 32 and 13 tokens, their keys read once. */
static const int ab_96_on = td_cu_env_on("TD_CUDA_ATTN_96");
extern "C" int64_t td_cu_attn_whole_tokens_bf16(int64_t Hq, int64_t Hkv, int64_t hd) {
    if (!ab_96_on || ab_wg_on || Hq <= 0 || Hkv <= 0 || Hq % Hkv || !td_cu_attention_tc(hd) || ab_rows(hd) != 64)
        return 0;
    return 96 / at_heads(Hq / Hkv, 96);
}

/* TD_CUDA_ATTN_DB=1: the 64-row kernel double-buffers a span's chunks of a bf16 cache (attention_bf16_64_kernel<..,
 * AB_DB>) instead of staging each chunk and waiting for it; read once; td_cu_attention_db_test overrides it. The same
 * bits. Off by default: the second buffer doubles the kernel's shared memory, and with fewer blocks an SM it timed
 * slower on the H200 (prefill 66,013-69,704 vs 73,827-74,740 tokens/s; NOTES "CUDA backend, part 7"). */
static int ab_db_on = td_cu_env_set("TD_CUDA_ATTN_DB");
extern "C" void td_cu_attention_db_test(int on) { ab_db_on = on < 0 ? td_cu_env_set("TD_CUDA_ATTN_DB") : on != 0; }
/* TD_CUDA_ATTN_PIPE=1: the 64-row kernel pipelines a bf16 cache's keys and values (AB_PIPE) in the one buffer;
 * td_cu_attention_pipe_test overrides it. The same bits. TD_CUDA_ATTN_DB=1 and (64 rows) TD_CUDA_ATTN_WG=1 win. */
static int ab_pipe_on = td_cu_env_set("TD_CUDA_ATTN_PIPE");
extern "C" void td_cu_attention_pipe_test(int on) {
    ab_pipe_on = on < 0 ? td_cu_env_set("TD_CUDA_ATTN_PIPE") : on != 0;
}
/* The 64-row kernel on a bf16 cache (bf16 mode's default) is compiled for three blocks an SM (at most 168 registers,
 * 120 bytes spilled at hd 128); TD_CUDA_ATTN_3B=0 runs the instance that takes as many registers as ptxas likes (243
 * at hd 128: two blocks). The same code, so the same bits; three blocks timed faster on the H100 (NOTES "CUDA
 * backend, part 10"). */
static const int ab_minb3 = td_cu_env_on("TD_CUDA_ATTN_3B");

extern "C" int td_cu_attention_bf16(float *out, int64_t ldo, const float *q, int64_t ldq, int64_t q_head_stride,
                                    const void *kc, const void *vc, int kvf, int64_t kv_dim, const int32_t *cells,
                                    int64_t n_ctx, const int32_t *seq, const int32_t *pos, int64_t T, int64_t Hq,
                                    int64_t Hkv, int64_t hd, float scale, int64_t window, const td_cu_attn_plan *tl,
                                    void *stream) {
    if (!td_cu_attention_tc(hd))
        return td_cu_attention(out, ldo, q, ldq, q_head_stride, kc, vc, kvf, kv_dim, cells, n_ctx, seq, pos, T, Hq,
                               Hkv, hd, scale, window, tl, stream);
    if (T <= 0 || Hq <= 0) return 0;
    int rows = ab_rows(hd);
    if (rows < 0) return td_cu_failf("TD_CUDA_ATTN_ROWS=%s: 16, 64 or 128 rows per attention tile", ab_rows_env());
    /* tiles that 16 rows hold (decode; a short pass cut into small tiles for more blocks) run the 16-row kernel,
     * unless a test or TD_CUDA_ATTN_ROWS chose: the same bits (cuda.h), and on the H200 the 64-row kernel's idle warps
     * cost decode 461 vs 500 tokens/s and one criterion 6.32 vs 5.93 ms */
    const char *re = ab_rows_env();
    if (rows >= 64 && !ab_rows_test && (!re || !*re || !strcmp(re, "128")) && tl && tl->tile_tokens > 0 && Hkv > 0 &&
        Hq % Hkv == 0 && tl->tile_tokens <= 16 / at_heads(Hq / Hkv, 16))
        rows = 16;
    /* tiles cut for 96 rows (td_cu_attn_whole_tokens_bf16) */
    if (rows == 64 && tl && Hkv > 0 && Hq % Hkv == 0 && tl->tile_tokens > 64 / at_heads(Hq / Hkv, 64)) rows = 96;
    at_args a;
    dim3 grid;
    bool split = false;
    if (at_prepare(&a, &grid, &split, out, ldo, q, ldq, q_head_stride, kc, vc, kvf, kv_dim, cells, n_ctx, seq, pos, T,
                   Hq, Hkv, hd, scale, window, tl, rows) != 0)
        return -1;
    a.vec = ((uintptr_t)kc & 15u) == 0 && ((uintptr_t)vc & 15u) == 0 && kv_dim % 8 == 0;
    cudaStream_t s = TD_CU_STREAM(stream);
    int rc;
    /* an instance per cache format and head dim: the format fixes the staging's loads and conversion at compile time */
#define AB_KVF(GO, H)                                                                                                  \
    (kvf == TD_CU_KV_BF16 ? GO(TD_CU_KV_BF16, H) : kvf == TD_CU_KV_F16 ? GO(TD_CU_KV_F16, H) : GO(TD_CU_KV_F32, H))
    /* the forms that copy a 16-byte aligned bf16 cache as it is (bfv), in this precedence: double buffering (AB_DB,
     * 64 rows), wgmma (AB_WG, 64 rows), the keys and values pipelined (AB_PIPE, 64 and 96 rows) */
    const bool bfv = kvf == TD_CU_KV_BF16 && a.vec;
    const bool pipe = bfv && ab_pipe_on && !ab_db_on;
    if (rows == 96) {
        const size_t smem = ab64_smem(hd, a.mode, 0, 96);
#define AB96_GO(F, H) ab_launch<F, H, 96>(attention_bf16_64_kernel<F, H, AB_STAGED, 6, 2>, a, grid, smem, s)
#define AB96_PIPE(H)                                                                                                   \
    ab_launch<TD_CU_KV_BF16, H, 96, AB_PIPE>(attention_bf16_64_kernel<TD_CU_KV_BF16, H, AB_PIPE, 6, 2>, a, grid,    \
                                             smem, s)
        if (hd == 64) rc = pipe ? AB96_PIPE(64) : AB_KVF(AB96_GO, 64);
        else if (hd == 128) rc = pipe ? AB96_PIPE(128) : AB_KVF(AB96_GO, 128);
        else rc = td_cu_failf("attention (tensor cores, 96 rows): head dim %lld", (long long)hd);
    } else if (rows == 128) {
        const size_t smem = ab64_smem(hd, a.mode, 0, 128);
#define AB128_GO(F, H) ab_launch<F, H, 128>(attention_bf16_64_kernel<F, H, AB_STAGED, 8>, a, grid, smem, s)
        if (hd == 64) rc = AB_KVF(AB128_GO, 64);
        else if (hd == 128) rc = AB_KVF(AB128_GO, 128);
        else rc = td_cu_failf("attention (tensor cores, 128 rows): head dim %lld", (long long)hd);
    } else if (rows == 64) {
        const bool db = bfv && ab_db_on;
        const bool wg = bfv && !db && ab_wg_on && td_cu_matmul_tc_wg_here();
        const size_t smem = ab64_smem(hd, a.mode, db, 64, wg);
#define AB64_GO(F, H) ab_launch<F, H, 64>(attention_bf16_64_kernel<F, H>, a, grid, smem, s)
#define AB64_BF(H, ST, MB)                                                                                             \
    ab_launch<TD_CU_KV_BF16, H, 64, ST, MB>(attention_bf16_64_kernel<TD_CU_KV_BF16, H, ST, 4, MB>, a, grid, smem, s)
#define AB64_DB(H) AB64_BF(H, AB_DB, 1)
#define AB64_MB3(H) (pipe ? AB64_BF(H, AB_PIPE, 3) : AB64_BF(H, AB_STAGED, 3))
#define AB64_PIPE(H) AB64_BF(H, AB_PIPE, 1)
#define AB64_WG(H) (ab_minb3 ? AB64_BF(H, AB_WG, 3) : AB64_BF(H, AB_WG, 1))
        const bool mb3 = !db && kvf == TD_CU_KV_BF16 && ab_minb3;
        if (wg && (hd == 64 || hd == 128)) rc = hd == 64 ? AB64_WG(64) : AB64_WG(128);
        else if (hd == 64) rc = db ? AB64_DB(64) : mb3 ? AB64_MB3(64) : pipe ? AB64_PIPE(64) : AB_KVF(AB64_GO, 64);
        else if (hd == 128) rc = db ? AB64_DB(128) : mb3 ? AB64_MB3(128) : pipe ? AB64_PIPE(128) : AB_KVF(AB64_GO, 128);
#if AB64_HD256
        else rc = db ? AB64_DB(256) : AB_KVF(AB64_GO, 256);
#else
        else rc = td_cu_failf("attention (tensor cores, 64 rows): head dim %lld", (long long)hd);
#endif
    } else {
        const size_t smem = ab_smem(hd);
#define AB16_GO(F, H) ab_launch<F, H, 16>(attention_bf16_kernel<F, H>, a, grid, smem, s)
        if (hd == 64) rc = AB_KVF(AB16_GO, 64);
        else if (hd == 128) rc = AB_KVF(AB16_GO, 128);
        else rc = AB_KVF(AB16_GO, 256);
    }
    if (rc != 0 || !split) return rc;
    attention_combine_kernel<<<(unsigned)(T * Hq), 128, 0, s>>>(a);
    return td_cu_launched("attention (tensor cores): combine");
}

#endif /* TD_CU_EMU */
