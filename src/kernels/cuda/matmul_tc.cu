/* The bf16 tensor-core product: td_cu_matmul with bf16 inputs over BF16 weights (td_cu_matmul_tc decides), on
 * mma.sync.m16n8k16 (bf16 operands, fp32 accumulators). The weight rows are the A operand (16 outputs per fragment),
 * the activation rows rounded to bf16 (nearest even) the B operand (8 tokens per fragment), so D = W X^T.
 *
 * The order every output element is computed in (cuda.h states it; the batch-invariance contract):
 *   k is cut into slices of TC_KS = 256 (the last one shorter); a slice's partial P_s is one accumulator chain
 *   acc = mma(W[j, k..k+16), x[t, k..k+16), acc) over its 16-wide steps ascending, from +0.0f;
 *   y = P_0, then y = y + P_s for s = 1, 2, ... (fp32 adds, ascending).
 * Four kernels compute exactly that, two for T <= TC_SKINNY_T and two above, so the choice between them (and their
 * tile shapes) never changes a bit; TD_CUDA_TC=old runs the first two, new (the default) the last two:
 *   tc_tile    T > TC_SKINNY_T: 128 outputs x 64 tokens per block (8 warps of 64 x 16), k in steps of 32 through
 *              shared memory (weights by cp.async, activations converted to bf16 on the way), double-buffered; each
 *              warp folds its chain into its total at every slice boundary.
 *   tc_skinny  T <= TC_SKINNY_T (decode, a few streams): 16 outputs per block, 4 or 8 warps each computing one slice's
 *              partial at a time straight from global memory (a slice's 64 weight words per lane in flight), the
 *              partials then added in slice order by the block: the weights stream over many blocks and warps
 *              without splitting any chain differently.
 *   tc_stream  T <= TC_SKINNY_T: tc_skinny's work with the weights staged through shared memory by cp.async, a warp's
 *              whole slice (and its next) in flight before its first mma; 16, 8 or 4 outputs a block (more blocks
 *              for small products).
 *   tc_wide    T > TC_SKINNY_T: 128 outputs x 128 tokens, warps of 64 x 32, k in stages of 64 (weights three
 *              deep), the slice totals in shared memory; or (TD_CUDA_TC_WREG) in registers, the weights four deep.
 * On compute capability 9.0, TD_CUDA_TC_WG (sm_90a; on by default) runs tc_wide's tiles as tc_wg and tc_split's
 * slices on wgmma instead of mma.sync: the same chains and bits (the tensor cores compute m64nNk16 as they compute
 * m16n8k16: test_cuda_matmul_tc on the H100); and tc_wg's tiles by default as tc_ws, its copies by producer warps
 * (the bulk tensor copy, or a warpgroup of cp.async) handed over by mbarriers (TD_CUDA_WG_WS).
 * Whether the mma unit's result for one output depends on other rows or columns of its fragments: it does not (each
 * D element is a function of its A row, B column and C element); tests/cuda/test_cuda_kernels.c checks the bits of a
 * row alone against the same row at other tile positions, T and kernels. */
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/ptx.cuh"
#ifndef TD_CU_EMU
#include <atomic>
#include <cooperative_groups.h>
#endif

#define TC_KS 256       /* k per slice: the fixed unit of the order above */
#define TC_SKINNY_T 64  /* tokens up to which tc_skinny runs (8 fragments of 8): one criterion's 45 tokens too */
#define TC_BM 128       /* tc_tile: outputs per block */
#define TC_BK 32        /* tc_tile: k per shared-memory step (TC_KS is a multiple) */
#define TC_PITCH 40     /* tc_tile: bf16 per shared row (80 bytes: ldmatrix rows land on distinct banks) */

/* Up to TC_MAX_JOBS products of one x in one launch (q, k, v; gate, up): block b belongs to the last job whose
 * first_block <= b. Each job's outputs are computed as they would be alone. */
#define TC_MAX_JOBS 4
struct tc_job {
    const uint16_t *w;
    const int32_t *rows;
    float *y;
    int64_t ldy, row_elems, n_out, first_block;
    uint16_t *yb = nullptr; /* tc_wg's GLU form: act(gate) * up in bf16 instead of y (jobs.j[0]'s, ldy apart) */
    int act = 0;            /* ... and its activation (td_dev_glu's) */
};
struct tc_jobs {
    tc_job j[TC_MAX_JOBS];
    int n;
};

/* A block's share of its job: the job's pointers and sizes, and j0, the first of the block's `per` outputs. */
struct tc_view {
    const uint16_t *__restrict__ w;
    const int32_t *__restrict__ rows;
    float *__restrict__ y;
    int64_t ldy, row_elems, n_out, j0;
};

/* The job of this block (blocks in job order, each job's from its first_block). */
__device__ __forceinline__ int tc_job_of(const tc_jobs &jobs) {
    const int64_t blk = blockIdx.x;
    int i = 0;
#pragma unroll
    for (int u = 1; u < TC_MAX_JOBS; u++)
        if (u < jobs.n && blk >= jobs.j[u].first_block) i = u;
    return i;
}
__device__ __forceinline__ tc_view tc_unpack(const tc_jobs &jobs, int64_t per) {
    const int64_t blk = blockIdx.x;
    const tc_job &j = jobs.j[tc_job_of(jobs)];
    return tc_view{j.w, j.rows, j.y, j.ldy, j.row_elems, j.n_out, (blk - j.first_block) * per};
}

/* The MLP's gate taken into a product's activations (td_cu_matmul_glu): x holds g, and the activations are
 * td_dev_glu(g, u, act), u laid out as x; act 0: x as it is. S > 1: x and u are the gate's and up's S partials
 * (td_cu_parts), slice s step floats after slice 0, added in order first. */
struct tc_glu {
    const float *u;
    int act;
    int64_t S = 1, step = 0;
};

/* Activations at x + off as a product takes them: 4 floats (vec: one 16-byte load each of x and u), gated when
 * gl.act. */
__device__ __forceinline__ float4 tc_x4(const float *x, int64_t off, bool vec, const tc_glu &gl) {
    float4 f = td_dev_parts_sum4(x + off, vec, gl.S, gl.step);
    if (gl.act) {
        const float4 u = td_dev_parts_sum4(gl.u + off, vec, gl.S, gl.step);
        f = make_float4(td_dev_glu(f.x, u.x, gl.act), td_dev_glu(f.y, u.y, gl.act), td_dev_glu(f.z, u.z, gl.act),
                        td_dev_glu(f.w, u.w, gl.act));
    }
    return f;
}

/* The weight row of output j; outputs past n_out repeat the last (computed, never stored). */
__device__ __forceinline__ const uint16_t *tc_wrow(const tc_view &v, int64_t j) {
    if (j >= v.n_out) j = v.n_out - 1;
    return v.w + (v.rows ? (int64_t)v.rows[j] : j) * v.row_elems;
}

/* The slice rule: a chain ends here, its value joins the total (the first one as it is). */
__device__ __forceinline__ void tc_fold(float &total, float &acc, bool first) {
    total = first ? acc : total + acc;
    acc = 0.0f;
}
/* tc_wide's and tc_wg's result for block row r (output j0 + r) and token t: into y, or (part: a launch by slices,
 * tc_wide_parts) the partial of slice blockIdx.z, [slice][token][the launch's block rows] (ng of them). */
__device__ __forceinline__ void tc_wide_put(const tc_view &v, float *part, int64_t T, int64_t ng, int r, int64_t t,
                                            float val) {
    if (t >= T) return;
    if (part) part[((int64_t)blockIdx.z * T + t) * ng + (int64_t)blockIdx.x * TC_BM + r] = val;
    else if (v.j0 + r < v.n_out) v.y[t * v.ldy + v.j0 + r] = val;
}
/* tc_wg's GLU form (td_cu_matmul_mlp): jobs.j[0] the gate, jobs.j[1] up, block row r = 16 a + 8 u + i is output
 * tc_glu_out(r) of job u (0 the gate, 1 up). So a thread's accumulators d[4 j + c] and d[4 j + c + 2] (c < 2, the
 * rows g and g + 8 of its 16-row group) are the gate's and up's values of one output for the same tokens. */
__device__ __forceinline__ int64_t tc_glu_out(int r) { return (int64_t)blockIdx.x * 64 + 8 * (r >> 4) + (r & 7); }
__device__ __forceinline__ const uint16_t *tc_glu_wrow(const tc_jobs &jobs, int r) {
    const tc_job &jb = jobs.j[(r >> 3) & 1];
    return tc_wrow(tc_view{jb.w, jb.rows, jb.y, jb.ldy, jb.row_elems, jb.n_out, 0}, tc_glu_out(r));
}
/* The same where the last slice's total is left in the accumulator (the value to store) instead. */
__device__ __forceinline__ void tc_fold_last(float &total, float &acc, bool first, bool last) {
    const float t = first ? acc : total + acc;
    if (last) acc = t;
    else total = t, acc = 0.0f;
}

/* ---- tc_tile: many tokens -------------------------------------------------------------------------------------- */

/* Block: 256 threads = 8 warps as 2 (outputs) x 4 (tokens); warp tile 64 outputs x BN/4 tokens = 4 x NT fragments. */
template <int BN, bool FOLD>
__global__ void __launch_bounds__(256)
    tc_tile(const tc_jobs jobs, const float *__restrict__ x, int64_t ldx, int64_t T, int64_t K) {
    td_pdl_wait();
    constexpr int NT = BN / 32;     /* n8 fragments per warp */
    constexpr int XV = BN / 32;     /* float4 activation loads per thread per step */
    __shared__ __align__(16) uint16_t As[2][TC_BM][TC_PITCH];
    __shared__ __align__(16) uint16_t Bs[2][BN][TC_PITCH];
    __shared__ const uint16_t *wrow[TC_BM];
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, wm = warp & 1, wn = warp >> 1;
    const tc_view v = tc_unpack(jobs, TC_BM);
    float *__restrict__ y = v.y;
    const int64_t ldy = v.ldy, n_out = v.n_out, j0 = v.j0, t0 = (int64_t)blockIdx.y * BN;
    if (tid < TC_BM) wrow[tid] = tc_wrow(v, j0 + tid);
    const bool xvec = ((uintptr_t)x & 15u) == 0 && (ldx & 3) == 0;
    __syncthreads();

    float acc[4][NT][4], total[4][NT][4];
#pragma unroll
    for (int a = 0; a < 4; a++)
#pragma unroll
        for (int b = 0; b < NT; b++)
#pragma unroll
            for (int c = 0; c < 4; c++) acc[a][b][c] = 0.0f, total[a][b][c] = 0.0f;

    float4 xr[XV];
    /* step k0's weights into As[buf] (cp.async), its activations into registers */
    auto fetch = [&](int buf, int64_t k0, int kn) {
#pragma unroll
        for (int i = 0; i < 2; i++) { /* 128 rows x 4 chunks of 8 bf16 */
            const int c = tid + 256 * i, r = c >> 2, part = c & 3;
            if (part * 8 < kn) td_cp16(&As[buf][r][part * 8], wrow[r] + k0 + part * 8);
        }
        td_cp_commit();
#pragma unroll
        for (int i = 0; i < XV; i++) { /* BN tokens x 8 chunks of 4 floats */
            const int c = tid + 256 * i, tk = c >> 3, part = c & 7;
            const int64_t t = t0 + tk < T ? t0 + tk : T - 1;
            const float *src = x + t * ldx + k0 + part * 4;
            xr[i] = part * 4 >= kn ? make_float4(0.f, 0.f, 0.f, 0.f) : td_ld_pass4(src, xvec);
        }
    };
    auto put = [&](int buf) {
#pragma unroll
        for (int i = 0; i < XV; i++) {
            const int c = tid + 256 * i, tk = c >> 3, part = c & 7;
            uint2 v = make_uint2(td_pack_bf16(xr[i].x, xr[i].y), td_pack_bf16(xr[i].z, xr[i].w));
            *(uint2 *)&Bs[buf][tk][part * 4] = v;
        }
    };

    const int64_t nsteps = (K + TC_BK - 1) / TC_BK;
    fetch(0, 0, K < TC_BK ? (int)K : TC_BK);
    put(0);
    bool first = true;
    for (int64_t st = 0; st < nsteps; st++) {
        const int buf = (int)(st & 1);
        const int64_t k0 = st * TC_BK;
        const int kn = K - k0 < TC_BK ? (int)(K - k0) : TC_BK;
        td_cp_wait<0>();
        __syncthreads();
        const bool more = st + 1 < nsteps;
        if (more) {
            const int64_t k1 = k0 + TC_BK;
            fetch(buf ^ 1, k1, K - k1 < TC_BK ? (int)(K - k1) : TC_BK);
        }
        for (int ks = 0; ks < kn; ks += 16) {
            uint32_t af[4][4], bf[NT][2];
            const int i = lane >> 3, r = lane & 7;
#pragma unroll
            for (int mt = 0; mt < 4; mt++)
                td_ldsm_x4(af[mt], &As[buf][wm * 64 + mt * 16 + r + (i & 1) * 8][ks + (i >> 1) * 8]);
#pragma unroll
            for (int np = 0; np < NT / 2; np++) {
                uint32_t q[4];
                td_ldsm_x4(q, &Bs[buf][wn * (BN / 4) + np * 16 + r + (i >> 1) * 8][ks + (i & 1) * 8]);
                bf[2 * np][0] = q[0], bf[2 * np][1] = q[1], bf[2 * np + 1][0] = q[2], bf[2 * np + 1][1] = q[3];
            }
#pragma unroll
            for (int mt = 0; mt < 4; mt++)
#pragma unroll
                for (int nt = 0; nt < NT; nt++)
                    td_mma_bf16(acc[mt][nt], af[mt][0], af[mt][1], af[mt][2], af[mt][3], bf[nt][0], bf[nt][1]);
        }
        if (FOLD && ((k0 + kn) % TC_KS == 0 || k0 + kn == K)) { /* a slice ends */
#pragma unroll
            for (int a = 0; a < 4; a++)
#pragma unroll
                for (int b = 0; b < NT; b++)
#pragma unroll
                    for (int c = 0; c < 4; c++) tc_fold(total[a][b][c], acc[a][b][c], first);
            first = false;
        }
        if (more) put(buf ^ 1);
    }
    /* D fragment: c0, c1 = (output g, tokens 2q, 2q+1), c2, c3 = output g + 8 */
    const int g = lane >> 2, q = lane & 3;
#pragma unroll
    for (int mt = 0; mt < 4; mt++)
#pragma unroll
        for (int nt = 0; nt < NT; nt++)
#pragma unroll
            for (int c = 0; c < 4; c++) {
                const int64_t j = j0 + wm * 64 + mt * 16 + g + (c >> 1) * 8;
                const int64_t t = t0 + wn * (BN / 4) + nt * 8 + 2 * q + (c & 1);
                if (j < n_out && t < T) y[t * ldy + j] = FOLD ? total[mt][nt][c] : acc[mt][nt][c];
            }
}

/* ---- tc_skinny: a few tokens ----------------------------------------------------------------------------------- */

/* Block: SW warps, 16 outputs, NF fragments of 8 tokens (T <= 8 NF). Round r: warp w computes slice r * SW + w
 * into part[w]; then the block adds the round's partials to the totals in slice order. */
template <int NF, int SW>
__global__ void __launch_bounds__(SW * 32)
    tc_skinny(const tc_jobs jobs, const float *__restrict__ x, int64_t ldx, int64_t T, int64_t K) {
    td_pdl_wait();
    constexpr int NTOK = NF * 8;
    __shared__ float part[SW][16][NTOK + 1];
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, q = lane & 3;
    const tc_view v = tc_unpack(jobs, 16);
    float *__restrict__ y = v.y;
    const int64_t ldy = v.ldy, n_out = v.n_out, j0 = v.j0;
    const uint16_t *wa = tc_wrow(v, j0 + g), *wb = tc_wrow(v, j0 + g + 8); /* this lane's rows: outputs g, g + 8 */
    const float *xt[NF]; /* this lane's token row in each fragment (column g), NULL past T */
#pragma unroll
    for (int f = 0; f < NF; f++) xt[f] = f * 8 + g < T ? x + (int64_t)(f * 8 + g) * ldx : nullptr;

    const int64_t S = (K + TC_KS - 1) / TC_KS;
    constexpr int PER = (NTOK * 16 + SW * 32 - 1) / (SW * 32); /* totals per thread */
    float total[PER];
#pragma unroll
    for (int i = 0; i < PER; i++) total[i] = 0.0f;

    for (int64_t s0 = 0; s0 < S; s0 += SW) {
        const int64_t s = s0 + warp;
        if (s < S) {
            const int64_t k0 = s * TC_KS, k1 = k0 + TC_KS < K ? k0 + TC_KS : K;
            float acc[NF][4];
#pragma unroll
            for (int f = 0; f < NF; f++) acc[f][0] = acc[f][1] = acc[f][2] = acc[f][3] = 0.0f;
            for (int64_t kb = k0; kb < k1; kb += 128) { /* 8 steps' weights in flight, then their products */
                const int steps = k1 - kb < 128 ? (int)((k1 - kb) / 16) : 8;
                uint32_t a[8][4];
#pragma unroll
                for (int u = 0; u < 8; u++)
                    if (u < steps) {
                        const int64_t kk = kb + 16 * u + 2 * q;
                        a[u][0] = *(const uint32_t *)(wa + kk);
                        a[u][1] = *(const uint32_t *)(wb + kk);
                        a[u][2] = *(const uint32_t *)(wa + kk + 8);
                        a[u][3] = *(const uint32_t *)(wb + kk + 8);
                    }
#pragma unroll
                for (int u = 0; u < 8; u++)
                    if (u < steps) {
                        const int64_t kk = kb + 16 * u + 2 * q;
#pragma unroll
                        for (int f = 0; f < NF; f++) {
                            uint32_t b0 = 0, b1 = 0;
                            if (xt[f]) {
                                b0 = td_pack_bf16(td_ld_pass(xt[f] + kk), td_ld_pass(xt[f] + kk + 1));
                                b1 = td_pack_bf16(td_ld_pass(xt[f] + kk + 8), td_ld_pass(xt[f] + kk + 9));
                            }
                            td_mma_bf16(acc[f], a[u][0], a[u][1], a[u][2], a[u][3], b0, b1);
                        }
                    }
            }
#pragma unroll
            for (int f = 0; f < NF; f++) {
                part[warp][g][f * 8 + 2 * q] = acc[f][0];
                part[warp][g][f * 8 + 2 * q + 1] = acc[f][1];
                part[warp][g + 8][f * 8 + 2 * q] = acc[f][2];
                part[warp][g + 8][f * 8 + 2 * q + 1] = acc[f][3];
            }
        }
        __syncthreads();
#pragma unroll
        for (int i = 0; i < PER; i++) { /* element e = tid + i * blockDim: output e % 16, token e / 16 */
            const int e = tid + i * SW * 32, o = e & 15, tk = e >> 4;
            if (tk >= NTOK) break;
            for (int u = 0; u < SW && s0 + u < S; u++) {
                float p = part[u][o][tk];
                tc_fold(total[i], p, s0 + u == 0);
            }
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < PER; i++) {
        const int e = tid + i * SW * 32, o = e & 15, tk = e >> 4;
        const int64_t j = j0 + o;
        if (j < n_out && tk < T) y[(int64_t)tk * ldy + j] = total[i];
    }
}

/* ---- tc_wide: many tokens, 128 x 128 tiles (TD_CUDA_TC=new) --------------------------------------------------- */

#define TW_BN 128   /* tc_wide: tokens per block */
#define TW_BK 64    /* tc_wide: k per stage (TC_KS is a multiple) */
#define TW_PITCH 72 /* tc_wide: bf16 per shared row (144 bytes: ldmatrix rows on distinct banks) */
#define TW_AS 3     /* tc_wide: weight stages in flight (cp.async) with the slice totals in shared memory */
#define TW_AS_REG 4 /* tc_wide: the same with the totals in registers (their 64 KB of shared memory a 4th stage) */

/* tc_wide's dynamic shared memory: AS weight stages, the activations' buffers (XB: AS, copied like the weights; else
 * 2, stored from registers), and unless TREG the slice totals (64 floats x 256 threads). */
template <bool XB, bool TREG, int AS> __host__ __device__ constexpr size_t tw_smem() {
    return (size_t)AS * TC_BM * TW_PITCH * 2 + (size_t)(XB ? AS : 2) * TW_BN * TW_PITCH * 2 +
           (TREG ? 0 : (size_t)64 * 256 * 4);
}

/* tc_tile's order with twice its tokens a block: 128 outputs x 128 tokens, 8 warps as 2 (outputs) x 4 (tokens) of
 * 64 x 32 (4 x 4 fragments: 16 mma for 6 ldmatrix a 16-wide step, tc_tile 8 for 5), k in stages of 64: the weights
 * AS stages deep by cp.async, the activations one stage ahead in registers (loaded before a stage's mma, stored as
 * bf16 after). At a slice end each thread folds its chain into its totals as tc_fold does, and the last fold leaves
 * the result in the accumulators. The totals (64 a thread) live in shared memory ([c][thread]: no bank conflicts),
 * so the accumulators alone take registers; or, TREG, in registers beside them (64 more a thread, within the 255 a
 * thread may have at one block of 256 threads an SM): no 64 shared-memory loads and stores a thread at each slice
 * end, where no mma runs, and that 64 KB free for a deeper weight pipeline. The same expressions in the same order
 * either way: the same bits. */
template <bool FOLD, bool XB, bool TREG, int AS>
__global__ void __launch_bounds__(256, 1)
    tc_wide(const tc_jobs jobs, const float *__restrict__ x, const uint16_t *__restrict__ xb, int64_t ldx, int64_t T,
            int64_t K, float *part) {
    td_pdl_wait();
    constexpr int NT = 4, XV = TW_BN * TW_BK / 4 / 256; /* n8 fragments per warp; float4 loads per thread a stage */
    constexpr int NB = XB ? AS : 2;                     /* activation buffers */
    static_assert(AS == 3 || AS == 4, "3 or 4 weight stages (the prologue below)");
    TD_DYN_SMEM16(unsigned char, tc_smem);
    typedef uint16_t arows[TC_BM][TW_PITCH];
    typedef uint16_t brows[TW_BN][TW_PITCH];
    arows *As = (arows *)tc_smem;                        /* [AS] */
    brows *Bs = (brows *)(tc_smem + sizeof(arows) * AS); /* [NB] */
    float *ts = TREG ? nullptr : (float *)(Bs + NB);     /* [64][256]: the totals, unless TREG */
    __shared__ const uint16_t *wrow[TC_BM];
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, wm = warp & 1, wn = warp >> 1;
    const tc_view v = tc_unpack(jobs, TC_BM);
    const int64_t j0 = v.j0, t0 = (int64_t)blockIdx.y * TW_BN;
    if (tid < TC_BM) wrow[tid] = tc_wrow(v, j0 + tid);
    const bool xvec = ((uintptr_t)x & 15u) == 0 && (ldx & 3) == 0;
    __syncthreads();

    float acc[4][NT][4], totals[4][NT][4]; /* totals: TREG's (else never read: no registers) */
#pragma unroll
    for (int a = 0; a < 4; a++)
#pragma unroll
        for (int b = 0; b < NT; b++)
#pragma unroll
            for (int c = 0; c < 4; c++) acc[a][b][c] = 0.0f, totals[a][b][c] = 0.0f;

    const int64_t nsteps = (K + TW_BK - 1) / TW_BK;
    /* part (tc_wide_parts): this block computes slice blockIdx.z alone and writes its partial P_s there */
    const int64_t st0 = part ? (int64_t)blockIdx.z * (TC_KS / TW_BK) : 0;
    const int64_t st1 = part && st0 + TC_KS / TW_BK < nsteps ? st0 + TC_KS / TW_BK : nsteps;
    auto kn_of = [&](int64_t st) { return K - st * TW_BK < TW_BK ? (int)(K - st * TW_BK) : TW_BK; };
    auto fetch_w = [&](int64_t st) { /* stage st's weights into As[st % AS] (XB: and its activations into
                                         * Bs[st % AS]); one commit group (maybe empty) */
        if (st < st1) {
            const int64_t k0 = st * TW_BK;
            const int kn = kn_of(st), buf = (int)(st % AS);
#pragma unroll
            for (int i = 0; i < TC_BM * TW_BK / 8 / 256; i++) { /* 128 rows x 8 chunks of 8 bf16 */
                const int c = tid + 256 * i, r = c >> 3, part = c & 7;
                if (part * 8 < kn) td_cp16(&As[buf][r][part * 8], wrow[r] + k0 + part * 8);
            }
            if (XB) {
#pragma unroll
                for (int i = 0; i < TW_BN * TW_BK / 8 / 256; i++) { /* 128 tokens x 8 chunks of 8 bf16 */
                    const int c = tid + 256 * i, tk = c >> 3, part = c & 7;
                    const int64_t t = t0 + tk < T ? t0 + tk : T - 1;
                    if (part * 8 < kn) td_cp16(&Bs[buf][tk][part * 8], xb + t * K + k0 + part * 8);
                }
            }
        }
        td_cp_commit();
    };
    float4 xr[XV];
    auto fetch_x = [&](int64_t st) { /* stage st's activations into registers (XB: fetch_w copies them) */
        if (XB || st >= st1) return;
        const int64_t k0 = st * TW_BK;
        const int kn = kn_of(st);
#pragma unroll
        for (int i = 0; i < XV; i++) { /* 128 tokens x 16 chunks of 4 floats */
            const int c = tid + 256 * i, tk = c >> 4, part = c & 15;
            const int64_t t = t0 + tk < T ? t0 + tk : T - 1;
            const float *src = x + t * ldx + k0 + part * 4;
            xr[i] = part * 4 >= kn ? make_float4(0.f, 0.f, 0.f, 0.f) : td_ld_pass4(src, xvec);
        }
    };
    auto put_x = [&](int buf) {
        if constexpr (!XB) {
#pragma unroll
            for (int i = 0; i < XV; i++) {
                const int c = tid + 256 * i, tk = c >> 4, part = c & 15;
                *(uint2 *)&Bs[buf][tk][part * 4] =
                    make_uint2(td_pack_bf16(xr[i].x, xr[i].y), td_pack_bf16(xr[i].z, xr[i].w));
            }
        }
    };

    fetch_w(st0); /* the first AS - 1 stages' weights in flight */
    fetch_w(st0 + 1);
    if (AS > 3) fetch_w(st0 + 2);
    fetch_x(st0);
    put_x((int)(st0 & 1));
    fetch_x(st0 + 1);
    bool first = true;
    const int i8 = lane >> 3, r8 = lane & 7;
    for (int64_t st = st0; st < st1; st++) {
        const int64_t k0 = st * TW_BK;
        const int kn = kn_of(st), abuf = (int)(st % AS), bbuf = XB ? abuf : (int)(st & 1);
        td_cp_wait<AS - 2>(); /* stage st's weights have landed (the AS - 2 after it may not have) */
        __syncthreads(); /* ... for every thread; and every thread is done with stage st - 1's buffers */
        fetch_w(st + AS - 1);
        if (st + 1 < st1) put_x((int)((st + 1) & 1));
        fetch_x(st + 2);
#pragma unroll
        for (int ks = 0; ks < TW_BK; ks += 16) {
            if (ks < kn) {
                uint32_t af[4][4], bf[NT][2];
#pragma unroll
                for (int mt = 0; mt < 4; mt++)
                    td_ldsm_x4(af[mt], &As[abuf][wm * 64 + mt * 16 + r8 + (i8 & 1) * 8][ks + (i8 >> 1) * 8]);
#pragma unroll
                for (int np = 0; np < NT / 2; np++) {
                    uint32_t q[4];
                    td_ldsm_x4(q, &Bs[bbuf][wn * 32 + np * 16 + r8 + (i8 >> 1) * 8][ks + (i8 & 1) * 8]);
                    bf[2 * np][0] = q[0], bf[2 * np][1] = q[1], bf[2 * np + 1][0] = q[2], bf[2 * np + 1][1] = q[3];
                }
#pragma unroll
                for (int mt = 0; mt < 4; mt++)
#pragma unroll
                    for (int nt = 0; nt < NT; nt++)
                        td_mma_bf16(acc[mt][nt], af[mt][0], af[mt][1], af[mt][2], af[mt][3], bf[nt][0], bf[nt][1]);
            }
        }
        const bool last = st == st1 - 1;
        if (FOLD && ((k0 + kn) % TC_KS == 0 || last)) { /* a slice ends: total = P_0, then total + P_s */
#pragma unroll
            for (int a = 0; a < 4; a++)
#pragma unroll
                for (int b = 0; b < NT; b++)
#pragma unroll
                    for (int c = 0; c < 4; c++) {
                        float &tot = TREG ? totals[a][b][c] : ts[((a * NT + b) * 4 + c) * 256 + tid];
                        tc_fold_last(tot, acc[a][b][c], first, last);
                    }
            first = false;
        }
    }
    /* D fragment: c0, c1 = (output g, tokens 2q, 2q+1), c2, c3 = output g + 8 */
    const int g = lane >> 2, q = lane & 3;
    const int64_t ng = (int64_t)gridDim.x * TC_BM;
#pragma unroll
    for (int mt = 0; mt < 4; mt++)
#pragma unroll
        for (int nt = 0; nt < NT; nt++)
#pragma unroll
            for (int c = 0; c < 4; c++)
                tc_wide_put(v, part, T, ng, wm * 64 + mt * 16 + g + (c >> 1) * 8,
                            t0 + wn * 32 + nt * 8 + 2 * q + (c & 1), acc[mt][nt][c]);
}

/* ---- tc_wg: many tokens on wgmma (sm_90a), tc_wide's tiles (TD_CUDA_TC_WG=1) ------------------------------------ */

#define WG_BK 64 /* tc_wg: k per stage, one 128-byte row of 64 bf16 per output and per token (the swizzle's width) */
#define WG_AS 4  /* tc_wg: stages (AS - 2 of them in flight ahead of the one the tensor cores read) */

/* tc_wg's dynamic shared memory: AS stages of 128 weight rows and 128 activation rows, 16 KB each, and 1 KB to align
 * them to the swizzle's 1024 bytes. */
template <int AS> __host__ __device__ constexpr size_t wg_smem() { return (size_t)AS * 2 * 128 * 128 + 1024; }

/* tc_wg's and tc_ws's stage end after their wgmma.wait_group 0: the accumulators back in the compiler's hands, and
 * where a slice ends (fold) the total = P_0, then total + P_s (tc_fold_last: the last one left in acc) */
__device__ __forceinline__ void tc_wg_fold(float (&acc)[64], float (&totals)[64], bool fold, bool &first, bool last) {
#pragma unroll
    for (int i = 0; i < 64; i++) td_wg_reg(acc[i]);
    if (fold) {
#pragma unroll
        for (int i = 0; i < 64; i++) tc_fold_last(totals[i], acc[i], first, last);
        first = false;
    }
}
/* tc_wg's and tc_ws's end: warpgroup h's accumulators (block rows 64 h .., the block's 128 tokens from t0), the
 * value to store (tc_fold_last), written as tc_wide_put says, or (GLU) as act(gate) * up rounded to bf16 (up_first:
 * the block rows 16 a + 8 u + i hold up's values for u 0 and the gate's for u 1, tc_ws's bulk copy of the two). Thread
 * 32 wq + 4 g + q of the warpgroup holds d[4 j + c]: block row 64 h + 16 wq + g + 8 (c >> 1), token
 * 8 j + 2 q + (c & 1). */
template <bool GLU>
__device__ __forceinline__ void tc_wg_put(const tc_jobs &jobs, const tc_view &v, float *part, int64_t T, int64_t t0,
                                          int h, int wq, int lane, const float (&acc)[64], bool up_first = false) {
    const int g = lane >> 2, q = lane & 3;
    if constexpr (GLU) {
        const tc_job &jg = jobs.j[0];
        const int64_t o = tc_glu_out(h * 64 + wq * 16 + g);
#pragma unroll
        for (int j = 0; j < 16; j++)
#pragma unroll
            for (int c = 0; c < 2; c++) {
                const int64_t t = t0 + 8 * j + 2 * q + c;
                if (t < T && o < jg.n_out) {
                    /* constant indices, then a select (an index that depends on up_first would put acc in local
                     * memory: 256 bytes of stack, the gated product 184 against 128 us in part 23's call C) */
                    const float a = acc[4 * j + c], b = acc[4 * j + c + 2];
                    const float hv = td_dev_glu(up_first ? b : a, up_first ? a : b, jg.act);
                    jg.yb[t * jg.ldy + o] = (uint16_t)(td_pack_bf16(hv, 0.0f) & 0xffffu);
                }
            }
        return;
    }
    const int64_t ng = (int64_t)gridDim.x * TC_BM;
#pragma unroll
    for (int j = 0; j < 16; j++)
#pragma unroll
        for (int c = 0; c < 4; c++)
            tc_wide_put(v, part, T, ng, h * 64 + wq * 16 + g + (c >> 1) * 8, t0 + 8 * j + 2 * q + (c & 1),
                        acc[4 * j + c]);
}

/* A stage's copies by N threads (this one p of them): 128 rows x 8 chunks of 8 bf16 of each operand (weights at the
 * stage's A, tokens at A + 16 KB), chunk p + N i (row r, chunk ch) to offset o[i] of the swizzled stage from
 * wp[i] / xp[i] + the stage's k: 8 consecutive threads copy one row's 128 bytes to 8 distinct 16-byte slots (no bank
 * conflicts, coalesced reads). The addresses are worked out once, not at every stage. */
template <int N> struct tc_wg_copies {
    static constexpr int NC = 128 * 8 / N;
    int o[NC];
    const uint16_t *wp[NC], *xp[NC];
    __device__ __forceinline__ tc_wg_copies(int p, const uint16_t *const *wrow, const uint16_t *xb, int64_t t0,
                                            int64_t T, int64_t K) {
#pragma unroll
        for (int i = 0; i < NC; i++) {
            const int c = p + N * i, r = c >> 3, ch = c & 7;
            const int64_t t = t0 + r < T ? t0 + r : T - 1;
            o[i] = td_sw128(0, 128, r, ch), wp[i] = wrow[r] + ch * 8, xp[i] = xb + t * K + ch * 8;
        }
    }
    __device__ __forceinline__ void issue(unsigned char *A, int64_t k0) const {
        unsigned char *const B = A + 16384;
#pragma unroll
        for (int i = 0; i < NC; i++) td_cp16(A + o[i], wp[i] + k0), td_cp16(B + o[i], xp[i] + k0);
    }
};

/* tc_wide's order and tile (128 outputs x 128 tokens, x in bf16 from tc_x_bf16) on wgmma: warpgroup h (threads 128 h
 * ..) computes outputs 64 h .. 64 h + 63 for the 128 tokens, one m64n128k16 per 16-wide k step in the slice's one chain
 * (D = A B + D, as mma.sync's m16n8k16 per output: test_cuda_matmul_tc holds the bits to tc_tile's). The tensor cores
 * read both operands from shared memory (no ldmatrix, no fragments in registers), staged by cp.async in the 128-byte
 * swizzle (tc_wg_copies<256>). Pipeline: a stage's copies go out AS - 2 stages ahead; a stage's wgmma stay in flight
 * while the next stage's are issued (wait_group 1), so the buffers copied into after a barrier are those of two stages
 * before, which every warpgroup has waited for (EARLY: the copies issued after the stage's wgmma, so the tensor cores
 * are not kept waiting for the copies' address arithmetic; the same values either way); at a slice end every wgmma is
 * waited for and the totals fold as tc_wide's (registers). K is a multiple of WG_BK (every stage's four k steps run: no
 * predicate between the wgmma, which would make the compiler serialize them). x and ldx are unused (tc_wide's
 * signature, so the same launchers). GLU (td_cu_matmul_mlp): the rows are the gate's and up's (tc_glu_wrow: 64 outputs
 * of each a block), and the block writes act(gate) * up rounded to bf16 (tc_x_bf16's rounding of td_dev_glu's value:
 * the down product's activations, bit for bit) into jobs.j[0].yb; never by slices. */
template <bool FOLD, int AS, bool EARLY = true, bool GLU = false>
__global__ void __launch_bounds__(256, 1)
    tc_wg(const tc_jobs jobs, const float *__restrict__ x, const uint16_t *__restrict__ xb, int64_t ldx, int64_t T,
          int64_t K, float *part) {
    td_pdl_wait();
    static_assert(AS >= 3, "the copies go AS - 2 stages ahead");
    (void)x, (void)ldx;
    TD_DYN_SMEM16(unsigned char, tc_smem);
    unsigned char *const sm = td_align1k(tc_smem); /* stage s at 32 KB s */
    __shared__ const uint16_t *wrow[TC_BM];
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, h = warp >> 2, wq = warp & 3;
    const tc_view v = tc_unpack(jobs, TC_BM);
    const int64_t j0 = v.j0, t0 = (int64_t)blockIdx.y * TW_BN;
    if (tid < TC_BM) wrow[tid] = GLU ? tc_glu_wrow(jobs, tid) : tc_wrow(v, j0 + tid);
    __syncthreads();

    float acc[64], totals[64];
#pragma unroll
    for (int i = 0; i < 64; i++) acc[i] = 0.0f, totals[i] = 0.0f;

    const int64_t nsteps = (K + WG_BK - 1) / WG_BK;
    /* part (tc_wide_parts): this block computes slice blockIdx.z alone and writes its partial P_s there */
    const int64_t st0 = part ? (int64_t)blockIdx.z * (TC_KS / WG_BK) : 0;
    const int64_t st1 = part && st0 + TC_KS / WG_BK < nsteps ? st0 + TC_KS / WG_BK : nsteps;
    const tc_wg_copies<256> cp(tid, wrow, xb, t0, T, K);
    auto fetch = [&](int64_t st) { /* stage st's weights and activations, swizzled; one commit group (maybe empty) */
        if (st < st1) cp.issue(sm + (st % AS) * 32768, st * WG_BK);
        td_cp_commit();
    };
#pragma unroll
    for (int i = 0; i < AS - 2; i++) fetch(st0 + i);
    bool first = true;
    for (int64_t st = st0; st < st1; st++) {
        td_cp_wait<AS - 3>(); /* this thread's copies of stage st have landed */
        td_fence_async_smem(); /* ... visible to the tensor cores' reads */
        __syncthreads();       /* ... everyone's; and the wgmma of stage st - 2 are done in every warpgroup */
        if (!EARLY) fetch(st + AS - 2); /* into stage st - 2's buffers */
        const unsigned char *const A = sm + (st % AS) * 32768 + h * 64 * 128, *const B = sm + (st % AS) * 32768 + 16384;
        td_wg_fence();
#pragma unroll
        for (int ks = 0; ks < WG_BK / 16; ks++)
            td_wgmma_bf16<128>(acc, td_wg_desc(A + 32 * ks), td_wg_desc(B + 32 * ks));
        td_wg_commit();
        if (EARLY) fetch(st + AS - 2); /* the tensor cores have stage st before the copies are issued */
        const bool last = st == st1 - 1;
        const bool fold = FOLD && ((st + 1) * WG_BK % TC_KS == 0 || last);
        if (!fold && !last) {
            td_wg_wait<1>(); /* stage st - 1's are done */
            continue;
        }
        td_wg_wait<0>();
        tc_wg_fold(acc, totals, fold, first, last);
    }
    tc_wg_put<GLU>(jobs, v, part, T, t0, h, wq, lane, acc);
}

/* ---- tc_ws: tc_wg with its copies in warps of their own (TD_CUDA_WG_WS=tma, 4 or 2) ------------------------- */

#define WS_AS 6  /* tc_ws: stages (192 KB) */
#define WS_TMA 1 /* tc_ws's PW for its bulk-copy form: one producer warp, whose lane 0 issues the tensor copies */
/* tc_ws's threads: the two warpgroups of tc_wg and PW producer warps */
__host__ __device__ constexpr int ws_threads(int PW) { return 256 + 32 * PW; }
/* tc_ws's tensor maps (td_tma_map; its bulk-copy form only): each job's weights in boxes of 64 k x 128 rows (GLU: w[0]
 * the gate's and up's as one 4-d tensor, tc_maps_make), x in bf16 in boxes of 64 k x 128 tokens */
struct tc_maps {
    CUtensorMap w[TC_MAX_JOBS];
    CUtensorMap x;
    int up_first; /* GLU: w[0] reads up's rows as the first of each pair of 8 (up's weights lie before the gate's) */
};

/* tc_wg's order, tile, swizzle and fold (so its bits), warp-specialised: warps 0-7 (the two warpgroups, as tc_wg's)
 * only wait for a stage, issue its wgmma and fold; warps 8 .. 8 + PW - 1 only copy. The hand-off is two mbarriers a
 * stage instead of a block barrier a stage: full[s] completes when stage s's copies have landed, empty[s] when each of
 * the 8 consumer warps has waited for the wgmma that read it (its lane 0 arrives after the wgmma.wait_group that covers
 * it). The producers run up to AS stages ahead, blocked only by empty; a consumer warpgroup waits for a stage's data
 * only, never for the other warpgroup or the copies' issue, so the copies go on across a slice end's drain and fold.
 * The copies: PW 2 or 4, cp.async by every producer thread (tc_wg_copies<32 PW>: 8 of each operand a thread a stage
 * with a warpgroup, 16 with two warps), each thread's arrival once its copies have landed
 * (cp.async.mbarrier.arrive.noinc; full counts 32 PW); WS_TMA, the bulk tensor copy (maps): lane 0 of the producer warp
 * arms full with the stage's 32 KB (one arrival, expect_tx), then one lane issues the box of weights (GLU: one 4-d box,
 * the gate's and up's rows in tc_wg's order or, up_first, up's first) and another the box of tokens; they land swizzled
 * as tc_wg's copies place them, rows past the job's outputs or past T as zeros where tc_wg repeats the last row:
 * outputs and tokens that are never stored either way. With one warp of cp.async (64 copies a thread a stage, NOTES
 * part 22) it was 2.2x slower than tc_wg on the H100: that warp issuing a stage's 2,048 copies and their address
 * arithmetic was the bound; hence these producers. 384 threads leave a thread 168 registers: the consumers' 164 fit.
 * ldx is unused (tc_wide's launchers). */
template <int AS> __host__ __device__ constexpr size_t ws_smem() { return wg_smem<AS>(); }
template <bool FOLD, int AS, bool GLU = false, int PW = 4>
__global__ void __launch_bounds__(ws_threads(PW), 1)
    tc_ws(const tc_jobs jobs, const __grid_constant__ tc_maps maps, const uint16_t *__restrict__ xb, int64_t ldx,
          int64_t T, int64_t K, float *part) {
    td_pdl_wait();
    static_assert(PW == WS_TMA || PW == 2 || PW == 4, "the bulk copy, or 2 or 4 warps of cp.async");
    (void)ldx;
    TD_DYN_SMEM16(unsigned char, tc_smem);
    unsigned char *const sm = td_align1k(tc_smem); /* stage s at 32 KB s: 128 weight rows, then 128 token rows */
    __shared__ const uint16_t *wrow[TC_BM];
    __shared__ __align__(8) uint64_t full[AS], empty[AS];
    /* warp through a shuffle: the compiler then knows it warp-uniform (else it takes the producers' branch as a
     * divergent path around the wgmma and serializes them, ptxas C7518) */
    const int tid = threadIdx.x, lane = tid & 31, warp = __shfl_sync(0xffffffffu, tid >> 5, 0);
    const tc_view v = tc_unpack(jobs, TC_BM);
    const int64_t t0 = (int64_t)blockIdx.y * TW_BN;
    if (PW != WS_TMA && tid < TC_BM) wrow[tid] = GLU ? tc_glu_wrow(jobs, tid) : tc_wrow(v, v.j0 + tid);
    if (tid < AS) td_mbar_init(&full[tid], PW == WS_TMA ? 1 : 32 * PW), td_mbar_init(&empty[tid], 8);
    __syncthreads();
    const int64_t nsteps = (K + WG_BK - 1) / WG_BK;
    /* part (tc_wide_parts): this block computes slice blockIdx.z alone and writes its partial P_s there */
    const int64_t st0 = part ? (int64_t)blockIdx.z * (TC_KS / WG_BK) : 0;
    const int64_t st1 = part && st0 + TC_KS / WG_BK < nsteps ? st0 + TC_KS / WG_BK : nsteps;

    /* the n-th stage of the block (st = st0 + n) goes to buffer b = n % AS, its use r = n / AS of that buffer: the
     * full barrier's phase r (parity ph = r & 1), the empty barrier's r - 1 (the release of the use before) */
    if (warp >= 8) { /* the producers */
        if constexpr (PW == WS_TMA) {
            const CUtensorMap *const wm = &maps.w[GLU ? 0 : tc_job_of(jobs)];
            const int j0 = (int)v.j0;
            int b = 0;
            unsigned ph = 0;
            for (int64_t st = st0; st < st1; st++, b = b + 1 == AS ? 0 : b + 1, ph ^= b == 0) {
                if (st - st0 >= AS) td_mbar_wait(&empty[b], ph ^ 1u);
                unsigned char *const A = sm + b * 32768;
                const int k0 = (int)(st * WG_BK);
                if (lane == 0) td_mbar_expect_tx(&full[b], 32768);
                __syncwarp(); /* the stage's bytes expected before any of its copies is issued */
                /* lane 0 the weights (GLU: the box of 8 groups x {gate, up} x 8 rows from group 8 blockIdx.x: block
                 * row 16 a + 8 u + i is the gate's (u 0) or up's output 8 a + i; up_first the other way), lane 1 the
                 * tokens */
                if (lane == 0 && GLU) td_tma_load_4d(A, wm, k0, 0, 0, 8 * (int)blockIdx.x, &full[b]);
                else if (lane == 0) td_tma_load_2d(A, wm, k0, j0, &full[b]);
                else if (lane == 1) td_tma_load_2d(A + 16384, &maps.x, k0, (int)t0, &full[b]);
            }
        } else {
            const tc_wg_copies<32 * PW> cp(tid - 256, wrow, xb, t0, T, K);
            int b = 0;
            unsigned ph = 0;
            for (int64_t st = st0; st < st1; st++, b = b + 1 == AS ? 0 : b + 1, ph ^= b == 0) {
                if (st - st0 >= AS) td_mbar_wait(&empty[b], ph ^ 1u);
                cp.issue(sm + b * 32768, st * WG_BK);
                td_cp_arrive(&full[b]);
            }
            td_cp_commit(), td_cp_wait<0>(); /* nothing of this thread in flight when it leaves */
        }
        return;
    }

    const int h = warp >> 2, wq = warp & 3;
    float acc[64], totals[64];
#pragma unroll
    for (int e = 0; e < 64; e++) acc[e] = 0.0f, totals[e] = 0.0f;
    int64_t freed = st0; /* the stages before it are released to the producers (by lane 0: 8 arrivals a stage) */
    int fb = 0;          /* freed's buffer */
    auto release = [&](int64_t upto) {
        for (; freed < upto; freed++, fb = fb + 1 == AS ? 0 : fb + 1) td_mbar_arrive(&empty[fb], lane == 0);
    };
    bool first = true;
    int b = 0;
    unsigned ph = 0;
    for (int64_t st = st0; st < st1; st++, b = b + 1 == AS ? 0 : b + 1, ph ^= b == 0) {
        td_mbar_wait(&full[b], ph);
        /* cp.async's writes (generic proxy) before the tensor cores' reads (async proxy); the bulk copies' are the
         * async proxy's own */
        if (PW != WS_TMA) td_fence_async_smem();
        const unsigned char *const A = sm + b * 32768 + h * 64 * 128, *const B = sm + b * 32768 + 16384;
        td_wg_fence();
#pragma unroll
        for (int ks = 0; ks < WG_BK / 16; ks++)
            td_wgmma_bf16<128>(acc, td_wg_desc(A + 32 * ks), td_wg_desc(B + 32 * ks));
        td_wg_commit();
        const bool last = st == st1 - 1;
        const bool fold = FOLD && ((st + 1) * WG_BK % TC_KS == 0 || last);
        if (!fold && !last) {
            td_wg_wait<1>(); /* stage st - 1's are done */
            release(st);
            continue;
        }
        td_wg_wait<0>();
        release(st + 1);
        tc_wg_fold(acc, totals, fold, first, last);
    }
    tc_wg_put<GLU>(jobs, v, part, T, t0, h, wq, lane, acc, PW == WS_TMA && maps.up_first);
}

/* tc_ws's tensor maps for jobs over x in bf16 (xb [T, K]); false where a job has a row list or a map cannot be made
 * (the caller runs another form). GLU (jobs.j[0] the gate, j[1] up, I = n_out rows each of the same pitch): one map
 * of dimensions (k, row i of a group of 8, the lower-addressed weight or the other, group) with strides (a row, the
 * distance between the two, 8 rows), its box 64 x 8 x 2 x 8 landing in tc_wg's GLU row order (up_first where up's
 * weights are the lower-addressed: the epilogue then takes the pairs the other way round). The cp.async forms take
 * none (tc_no_maps). Host code, here for tests/cuda/emu. */
/* A row-major matrix's map: rows of K bf16, `pitch` elements apart, `rows` of them, in boxes of 64 k x 128 rows (a
 * block's outputs, or its tokens). */
static bool tc_map_rows(CUtensorMap *m, const uint16_t *base, int64_t K, int64_t rows, int64_t pitch) {
    static_assert(TC_BM == TW_BN, "one box for the weights' rows and the tokens");
    const uint64_t dims[2] = {(uint64_t)K, (uint64_t)rows}, stride[1] = {(uint64_t)pitch * 2};
    const uint32_t box[2] = {WG_BK, TC_BM};
    return td_tma_map(m, base, 2, dims, stride, box) == 0;
}
static bool tc_maps_make(tc_maps *m, const tc_jobs &jobs, bool glu, const uint16_t *xb, int64_t T, int64_t K) {
    memset((void *)m, 0, sizeof *m);
    for (int i = 0; i < jobs.n; i++)
        if (jobs.j[i].rows || (!glu && !tc_map_rows(&m->w[i], jobs.j[i].w, K, jobs.j[i].n_out, jobs.j[i].row_elems)))
            return false;
    if (glu) {
        const tc_job &g = jobs.j[0], &u = jobs.j[1];
        if (jobs.n != 2 || u.w == g.w || u.row_elems != g.row_elems || u.n_out != g.n_out || g.n_out % 8) return false;
        m->up_first = u.w < g.w;
        const uint16_t *const lo = m->up_first ? u.w : g.w, *const hi = m->up_first ? g.w : u.w;
        const uint64_t rb = (uint64_t)g.row_elems * 2, dims[4] = {(uint64_t)K, 8, 2, (uint64_t)g.n_out / 8},
                       stride[3] = {rb, (uint64_t)((uintptr_t)hi - (uintptr_t)lo), 8 * rb};
        const uint32_t box[4] = {WG_BK, 8, 2, 8};
        if (td_tma_map(&m->w[0], lo, 4, dims, stride, box)) return false;
    }
    return tc_map_rows(&m->x, xb, K, T, K);
}
static const tc_maps tc_no_maps = {};

/* tc_wide_parts' and tc_split's second step: y = P_0, then y = y + P_s for s = 1, 2, ... (the order above) from the
 * slices' partials, a thread per four consecutive (token, block row) of one block (per outputs a block, ng of them
 * in a launch: both multiples of 4, so the four share a job and a partial row, and the float4 loads are aligned):
 * a quarter of the threads and load instructions of one a row, the same adds. Rows past a job's n_out are skipped. */
__host__ __device__ constexpr int64_t tc_fold_threads(int64_t T, int64_t ng) { return T * ng / 4; }
/* Four consecutive outputs of a row, those of them before the row's end (left of them there): four plain stores, so
 * any row pitch. */
__device__ __forceinline__ void tc_put4(float *o, const float4 &y, int64_t left) {
    o[0] = y.x;
    if (left > 1) o[1] = y.y;
    if (left > 2) o[2] = y.z;
    if (left > 3) o[3] = y.w;
}
__global__ void tc_fold_parts(const tc_jobs jobs, const float *__restrict__ part, int64_t T, int64_t S, int64_t ng,
                              int64_t per) {
    td_pdl_wait();
    const int64_t e = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) * 4;
    if (e >= T * ng) return;
    const int64_t t = e / ng, gr = e % ng, b = gr / per;
    int i = 0;
    while (i + 1 < jobs.n && jobs.j[i + 1].first_block <= b) i++;
    const tc_job &jb = jobs.j[i];
    const int64_t j = (b - jb.first_block) * per + gr % per;
    if (j >= jb.n_out) return;
    tc_put4(jb.y + t * jb.ldy + j, td_dev_parts_sum4(&part[t * ng + gr], true, S, T * ng), jb.n_out - j);
}

/* x [T, ldx] (gated when gl.act) rounded to bf16 (nearest even, td_pack_bf16: the rounding every kernel here applies
 * on its own) into xb [T, K], four elements a thread: tc_wide<.., true> then copies its activations as it copies its
 * weights. */
__global__ void tc_x_bf16(const float *__restrict__ x, int64_t ldx, int64_t T, int64_t K, uint16_t *__restrict__ xb,
                          const tc_glu gl) {
    td_pdl_wait();
    const int64_t e = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) * 4, t = e / K, k = e % K;
    if (t >= T) return;
    const float4 f = tc_x4(x, t * ldx + k, false, gl); /* K is a multiple of 16: the four stay in the row */
    *(uint2 *)(xb + t * K + k) = make_uint2(td_pack_bf16(f.x, f.y), td_pack_bf16(f.z, f.w));
}

/* ---- tc_stream: a few tokens, the weights streamed through shared memory (TD_CUDA_TC=new) --------------------- */

#define TC_SP 264 /* tc_stream: bf16 per staged weight row: a slice + 8 (528 bytes: ldmatrix rows on distinct banks) */

/* tc_skinny's work and order, with the weights' loads all issued before a slice's first mma. Block: SW warps, R
 * outputs (16; or 8 / 4, the mma's rows past R repeating the block's rows, their results dropped: more blocks when a
 * launch has few outputs; or 32, two A fragments a step sharing each B fragment: fewer reads of x when T is larger),
 * NF fragments of 8 tokens. Round r: warp w computes slice s = r * SW + w; its R x 256
 * weights come to the warp's own shared buffer by cp.async, 16 bytes a lane (a row's 512 bytes by the 32 lanes), the
 * whole slice in flight at once and, with nbuf = 2 (several rounds), the warp's next slice behind it; then the chain
 * of ldmatrix + mma over the slice's 16-wide steps (the A fragments as tc_tile's, the B fragments as tc_skinny's);
 * then the block adds the round's partials to the totals in slice order, as tc_skinny. */
template <int NF, int SW, int R>
__global__ void __launch_bounds__(SW * 32, 1)
    tc_stream(const tc_jobs jobs, const float *__restrict__ x, int64_t ldx, int64_t T, int64_t K, int nbuf) {
    static_assert(R == 32 || R == 16 || R == 8 || R == 4, "32, 16, 8 or 4 outputs a block");
    constexpr int MT = R == 32 ? 2 : 1; /* A fragments (16 rows) a step, each B fragment used for all */
    constexpr int NTOK = NF * 8;
    constexpr int PER = (NTOK * R + SW * 32 - 1) / (SW * 32); /* totals per thread */
    TD_DYN_SMEM16(unsigned char, tc_smem);
    typedef uint16_t wbuf[R][TC_SP];
    typedef float pbuf[R][NTOK + 1];
    wbuf *ws = (wbuf *)tc_smem;                                          /* [SW * nbuf] */
    pbuf *part = (pbuf *)(tc_smem + (size_t)SW * nbuf * sizeof(wbuf)); /* [SW] */
    __shared__ const uint16_t *wrow[R];
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, q = lane & 3;
    const tc_view v = tc_unpack(jobs, R);
    if (tid < R) wrow[tid] = tc_wrow(v, v.j0 + tid);
    const bool x2 = ((uintptr_t)x & 7u) == 0 && (ldx & 1) == 0;
    /* this lane's token in fragment f (column g): row f * 8 + g of x, when below T; read as td_ld_pass */
    const float *xg = td_pass_ptr(x) + (int64_t)g * ldx;
    const int64_t xf = 8 * ldx;
    float total[PER];
#pragma unroll
    for (int i = 0; i < PER; i++) total[i] = 0.0f;
    const int64_t S = (K + TC_KS - 1) / TC_KS, rounds = (S + SW - 1) / SW;
    /* ldmatrix.x4: lanes 8i .. 8i + 7 address matrix i's rows (a0: rows 0-7, k 0-7; a1: rows 8-15, k 0-7; a2, a3:
     * k 8-15); with R < 16 the rows wrap onto the block's R rows */
    const int r8 = lane & 7, i4 = lane >> 3;
    const int arow = R >= 16 ? r8 + (i4 & 1) * 8 : r8 & (R - 1), acol = (i4 >> 1) * 8;
    __syncthreads();

    auto issue = [&](int64_t sl, int b) { /* slice sl's weights into this warp's buffer b; one commit group */
        const int64_t k = sl * TC_KS + lane * 8;
        if (sl < S && k < K)
#pragma unroll
            for (int r = 0; r < R; r++) td_cp16(&ws[warp * nbuf + b][r][lane * 8], wrow[r] + k);
        td_cp_commit();
    };

    issue(warp, 0);
    td_pdl_wait(); /* the first slice's weights are in flight while the kernel before finishes; x and y are its */
    for (int64_t rd = 0; rd < rounds; rd++) {
        const int64_t s = rd * SW + warp;
        const int b = nbuf == 2 ? (int)(rd & 1) : 0;
        if (nbuf == 2) {
            issue(s + SW, b ^ 1); /* its buffer was last read in round rd - 1, before the block's barriers */
            td_cp_wait<1>();
        } else {
            if (rd > 0) issue(s, 0);
            td_cp_wait<0>();
        }
        __syncwarp(); /* every lane's copies of this slice are visible to the warp */
        if (s < S) {
            const int64_t k0 = s * TC_KS;
            const int n16 = (int)(((k0 + TC_KS < K ? k0 + TC_KS : K) - k0) / 16);
            const uint16_t *abase = &ws[warp * nbuf + b][arow][acol];
            float acc[MT][NF][4];
#pragma unroll
            for (int m = 0; m < MT; m++)
#pragma unroll
                for (int f = 0; f < NF; f++) acc[m][f][0] = acc[m][f][1] = acc[m][f][2] = acc[m][f][3] = 0.0f;
#pragma unroll(NF * MT >= 8 ? 2 : 4)
            for (int st = 0; st < n16; st++) {
                uint32_t a[MT][4];
#pragma unroll
                for (int m = 0; m < MT; m++) td_ldsm_x4(a[m], abase + m * 16 * TC_SP + st * 16);
                const int64_t kk = k0 + st * 16 + 2 * q;
#pragma unroll
                for (int f = 0; f < NF; f++) {
                    uint32_t b0 = 0, b1 = 0;
                    if (f * 8 + g < T) {
                        const float *xp = xg + f * xf + kk;
                        if (x2) {
                            const float2 lo = *(const float2 *)xp, hi = *(const float2 *)(xp + 8);
                            b0 = td_pack_bf16(lo.x, lo.y), b1 = td_pack_bf16(hi.x, hi.y);
                        } else {
                            b0 = td_pack_bf16(xp[0], xp[1]);
                            b1 = td_pack_bf16(xp[8], xp[9]);
                        }
                    }
#pragma unroll
                    for (int m = 0; m < MT; m++) td_mma_bf16(acc[m][f], a[m][0], a[m][1], a[m][2], a[m][3], b0, b1);
                }
            }
#pragma unroll
            for (int m = 0; m < MT; m++)
#pragma unroll
                for (int f = 0; f < NF; f++) { /* D: c0, c1 = (row g, tokens 2q, 2q + 1), c2, c3 = row g + 8 */
                    const int r0 = m * 16 + g, r1 = (m * 16 + g + 8) & (R - 1);
                    if (g < R) {
                        part[warp][r0][f * 8 + 2 * q] = acc[m][f][0];
                        part[warp][r0][f * 8 + 2 * q + 1] = acc[m][f][1];
                    }
                    if (R >= 16) {
                        part[warp][r1][f * 8 + 2 * q] = acc[m][f][2];
                        part[warp][r1][f * 8 + 2 * q + 1] = acc[m][f][3];
                    }
                }
        }
        __syncthreads();
#pragma unroll
        for (int i = 0; i < PER; i++) { /* element e = tid + i * blockDim: output e % R, token e / R */
            const int e = tid + i * SW * 32, o = e % R, tk = e / R;
            if (tk >= NTOK) break;
            for (int u = 0; u < SW && rd * SW + u < S; u++) {
                float p = part[u][o][tk];
                tc_fold(total[i], p, rd * SW + u == 0);
            }
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < PER; i++) {
        const int e = tid + i * SW * 32, o = e % R, tk = e / R;
        const int64_t j = v.j0 + o;
        if (tk < NTOK && j < v.n_out && tk < T) v.y[(int64_t)tk * v.ldy + j] = total[i];
    }
}

/* ---- tc_split: a few tokens, each k slice in a block of its own (TD_CUDA_TC=new) -------------------------------- */

#define SP_R 64 /* tc_split: outputs a block (4 warps of 16) */

/* tc_split's staged activation rows (ldmatrix.x4 reads two fragments: 16 at least) and its dynamic shared memory
 * (WG: rows of the slice without padding, in the 128-byte swizzle, and 1 KB to align them) */
template <int NF> __host__ __device__ constexpr int tc_split_xrows() { return NF * 8 < 16 ? 16 : NF * 8; }
template <int NF, bool WG = false> __host__ __device__ constexpr size_t tc_split_smem() {
    return WG ? (size_t)(SP_R + tc_split_xrows<NF>()) * TC_KS * 2 + 1024
              : (size_t)(SP_R + tc_split_xrows<NF>()) * TC_SP * 2;
}

/* The order above for T <= 64, parallel over slices instead of over outputs alone: block (x, y) computes the partial
 * P_y of slice y for SP_R outputs x all T tokens, one chain a fragment (warp w: outputs 16w .. 16w + 15, every token
 * fragment), its weights (SP_R x 256 bf16) all in flight at once by cp.async, its activations rounded to bf16 once
 * into shared memory (rows past T zero: their columns are dropped; gated first when gl.act). With one slice
 * (K <= 256) the partial is y; else it goes to part [slice][token][the launch's block rows] and tc_fold_parts adds the
 * slices in order. tc_stream and tc_skinny spread a launch over outputs only: 16 to 64 blocks for the 1024 outputs of
 * o and down, each reading all of x; here 4 to 12 times as many blocks, each reading T x 256 of x. WG (TD_CUDA_TC_WG
 * 2 or 3; every slice whole, k a multiple of 256): the 4 warps as one warpgroup run the slice as 16 wgmma
 * m64n(8 NF)k16, the operands staged in the 128-byte swizzle (tc_sw), the same chain per output as the mma.sync form
 * if the tensor cores compute both alike (test_cuda_matmul_tc's test_wg). */
template <int NF, bool CL, bool WG = false>
__global__ void __launch_bounds__(128)
    tc_split(const tc_jobs jobs, const float *__restrict__ x, int64_t ldx, int64_t T, int64_t K, float *part,
             const tc_glu gl) {
    constexpr int XR = tc_split_xrows<NF>();
    TD_DYN_SMEM16(unsigned char, tc_smem);
    /* WG (wgmma, the 4 warps as one warpgroup; every slice whole): the operands swizzled from a 1024-byte boundary */
    unsigned char *const sm = WG ? td_align1k(tc_smem) : tc_smem;
    typedef uint16_t srow[TC_SP];
    srow *Ws = (srow *)sm;                         /* [SP_R] */
    srow *Xs = (srow *)(sm + SP_R * sizeof(srow)); /* [XR] */
    unsigned char *const WA = sm, *const XA = sm + SP_R * TC_KS * 2; /* WG: [4 column blocks][rows][128 bytes] */
    __shared__ const uint16_t *wrow[SP_R];
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const tc_view v = tc_unpack(jobs, SP_R);
    if (tid < SP_R) wrow[tid] = tc_wrow(v, v.j0 + tid);
    const int64_t k0 = (int64_t)blockIdx.y * TC_KS;
    const int kn = K - k0 < TC_KS ? (int)(K - k0) : TC_KS; /* a multiple of 16 (td_cu_matmul_tc) */
    __syncthreads();
#pragma unroll
    for (int i = 0; i < SP_R * (TC_KS / 8) / 128; i++) { /* SP_R rows x 32 chunks of 8 bf16 */
        const int c = tid + 128 * i, r = c >> 5, p8 = c & 31;
        if (p8 * 8 >= kn) continue;
        if (WG) td_cp16(WA + td_sw128(p8 >> 3, SP_R, r, p8 & 7), wrow[r] + k0 + p8 * 8);
        else td_cp16(&Ws[r][p8 * 8], wrow[r] + k0 + p8 * 8);
    }
    td_cp_commit();
    td_pdl_wait(); /* the weights are in flight while the kernel before finishes; x and y are its */
    const bool xvec = ((uintptr_t)x & 15u) == 0 && (ldx & 3) == 0 && (!gl.act || ((uintptr_t)gl.u & 15u) == 0);
#pragma unroll 4
    for (int i = 0; i < XR * (TC_KS / 4) / 128; i++) { /* XR rows x 64 chunks of 4 floats */
        const int c = tid + 128 * i, tk = c >> 6, p4 = c & 63;
        float4 f = make_float4(0.f, 0.f, 0.f, 0.f);
        if (tk < T && p4 * 4 < kn) f = tc_x4(x, (int64_t)tk * ldx + k0 + p4 * 4, xvec, gl);
        const uint2 b = make_uint2(td_pack_bf16(f.x, f.y), td_pack_bf16(f.z, f.w));
        if (WG) *(uint2 *)(XA + td_sw128(p4 >> 4, XR, tk, (p4 & 15) >> 1) + (p4 & 1) * 8) = b;
        else *(uint2 *)&Xs[tk][p4 * 4] = b;
    }
    td_cp_wait<0>();
    if (WG) td_fence_async_smem(); /* the staged operands visible to the tensor cores' reads */
    __syncthreads();

    float acc[NF][4];
#pragma unroll
    for (int f = 0; f < NF; f++) acc[f][0] = acc[f][1] = acc[f][2] = acc[f][3] = 0.0f;
    const int i8 = lane >> 3, r8 = lane & 7;
    const int n16 = WG ? 0 : kn / 16;
    if constexpr (WG) { /* the slice's 16 steps as one m64n(8 NF)k16 chain; d[4 f + c] is acc[f][c] */
        float d[4 * NF];
#pragma unroll
        for (int i = 0; i < 4 * NF; i++) d[i] = 0.0f;
        td_wg_fence();
#pragma unroll
        for (int st = 0; st < TC_KS / 16; st++)
            td_wgmma_bf16<8 * NF>(d, td_wg_desc(WA + (st >> 2) * SP_R * 128 + (st & 3) * 32),
                                  td_wg_desc(XA + (st >> 2) * XR * 128 + (st & 3) * 32));
        td_wg_commit();
        td_wg_wait<0>();
#pragma unroll
        for (int i = 0; i < 4 * NF; i++) td_wg_reg(d[i]), acc[i >> 2][i & 3] = d[i];
    }
#pragma unroll 4
    for (int st = 0; st < n16; st++) {
        uint32_t a[4];
        td_ldsm_x4(a, &Ws[warp * 16 + r8 + (i8 & 1) * 8][st * 16 + (i8 >> 1) * 8]);
#pragma unroll
        for (int np = 0; np < (NF + 1) / 2; np++) {
            uint32_t q[4];
            td_ldsm_x4(q, &Xs[np * 16 + r8 + (i8 >> 1) * 8][st * 16 + (i8 & 1) * 8]);
            td_mma_bf16(acc[2 * np], a, q[0], q[1]);
            if (2 * np + 1 < NF) td_mma_bf16(acc[2 * np + 1], a, q[2], q[3]);
        }
    }
    /* D fragment: c0, c1 = (output g, tokens 2q, 2q+1), c2, c3 = output g + 8 */
    const int g = lane >> 2, q = lane & 3;
    if constexpr (CL) {
#ifndef TD_CU_EMU
        /* the cluster's blocks are the slices of these 64 outputs: each leaves its partial in its own shared memory
         * (over its weights, once every warp is done with them), then they share the folds, each output's
         * y = P_0, then y + P_s for s = 1, 2, ... read from the slices' blocks in order; a thread folds four
         * consecutive outputs of one token (float4 reads, four slices' in flight at once, stores along the row) */
        namespace cg = cooperative_groups;
        cg::cluster_group cl = cg::this_cluster();
        constexpr int PP = SP_R + 4; /* the partial's pitch: [NF * 8 tokens][PP], rows 16-byte aligned, the
                                        fragments' stores on distinct banks */
        float *P = (float *)sm;
        __syncthreads();
#pragma unroll
        for (int f = 0; f < NF; f++)
#pragma unroll
            for (int c = 0; c < 4; c++) P[(f * 8 + 2 * q + (c & 1)) * PP + warp * 16 + g + (c >> 1) * 8] = acc[f][c];
        cl.sync();
        const int S = (int)cl.num_blocks(), rank = (int)cl.block_rank();
        for (int e = rank * 128 + tid; e < NF * 8 * (SP_R / 4); e += S * 128) {
            const int t = e / (SP_R / 4), r = (e % (SP_R / 4)) * 4;
            const int64_t j = v.j0 + r;
            if (t >= T || j >= v.n_out) continue;
            const float4 *src = (const float4 *)(P + t * PP + r);
            float4 y = *cl.map_shared_rank(src, 0);
            for (int u0 = 1; u0 < S; u0 += 4) {
                float4 p[4];
#pragma unroll
                for (int i = 0; i < 4; i++)
                    if (u0 + i < S) p[i] = *cl.map_shared_rank(src, u0 + i);
#pragma unroll
                for (int i = 0; i < 4; i++)
                    if (u0 + i < S) y.x = y.x + p[i].x, y.y = y.y + p[i].y, y.z = y.z + p[i].z, y.w = y.w + p[i].w;
            }
            tc_put4(v.y + t * v.ldy + j, y, v.n_out - j);
        }
        cl.sync(); /* no block leaves while another reads its partial */
#endif
    } else {
        const int64_t ng = (int64_t)gridDim.x * SP_R;
#pragma unroll
        for (int f = 0; f < NF; f++)
#pragma unroll
            for (int c = 0; c < 4; c++) {
                const int r = warp * 16 + g + (c >> 1) * 8;
                const int64_t t = f * 8 + 2 * q + (c & 1), j = v.j0 + r;
                if (t >= T) continue;
                if (part) part[((int64_t)blockIdx.y * T + t) * ng + (int64_t)blockIdx.x * SP_R + r] = acc[f][c];
                else if (j < v.n_out) v.y[t * v.ldy + j] = acc[f][c];
            }
    }
}

#ifndef TD_CU_EMU /* tests/cuda/emu compiles the kernels above alone */

/* ---- dispatch -------------------------------------------------------------------------------------------------- */

extern "C" int td_cu_matmul_tc(const td_cu_mat *w, int bf16_in) {
    return bf16_in && w->type == TD_DTYPE_BF16 && w->cols % 16 == 0 && w->row_bytes % 16 == 0 &&
           ((uintptr_t)w->data & 15u) == 0;
}

/* Which kernels: TD_CUDA_TC (old: tc_skinny and tc_tile; new, the default: tc_stream and tc_wide), read once;
 * td_cu_matmul_tc_test_mode overrides it. Every choice computes the same order, so the same bits. */
static int tc_test = 0;
extern "C" void td_cu_matmul_tc_test_mode(int mode) { tc_test = mode; }

static int tc_env(void) { /* 1 old, 2 new, -1 neither */
    const char *e = getenv("TD_CUDA_TC");
    if (!e || !*e || !strcmp(e, "new")) return 2;
    return !strcmp(e, "old") ? 1 : -1;
}

/* An attribute of the current device, or `otherwise` where it cannot be read (no error left behind for a later
 * launch); a query, not stream work: in relaxed mode while a graph records. */
static int tc_dev_attr(cudaDeviceAttr attr, int otherwise) {
    int dev = 0, v = 0;
    cudaStreamCaptureMode m = cudaStreamCaptureModeRelaxed;
    cudaThreadExchangeStreamCaptureMode(&m);
    if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&v, attr, dev) != cudaSuccess)
        v = otherwise, cudaGetLastError();
    cudaThreadExchangeStreamCaptureMode(&m);
    return v;
}

static int tc_sms(void) {
    static const int n = [] {
        const int v = tc_dev_attr(cudaDevAttrMultiProcessorCount, 132); /* only a size hint */
        return v > 0 ? v : 132;
    }();
    return n;
}

/* The opt-in to more than 48 KB of dynamic shared memory, once per kernel. The first launch may come while the
 * stream records a graph (runtime.cu captures in thread-local mode): the call runs in relaxed mode, then the mode
 * is restored. */
template <typename F> static cudaError_t tc_smem_opt(F *kernel, size_t bytes) {
    cudaStreamCaptureMode m = cudaStreamCaptureModeRelaxed;
    cudaThreadExchangeStreamCaptureMode(&m);
    const cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes);
    cudaThreadExchangeStreamCaptureMode(&m);
    return e;
}

/* The launch's jobs with `per` outputs a block: each product's first block, the launch's blocks returned. */
static int64_t tc_make_jobs(const td_cu_mm *mm, int n, int64_t per, tc_jobs *jobs) {
    int64_t blocks = 0;
    jobs->n = n;
    for (int i = 0; i < n; i++) {
        const td_cu_mat *w = mm[i].w;
        jobs->j[i] = tc_job{(const uint16_t *)w->data, mm[i].rows, mm[i].y, mm[i].ldy, (int64_t)(w->row_bytes / 2),
                            mm[i].n_out, blocks};
        blocks += (mm[i].n_out + per - 1) / per;
    }
    return blocks;
}

template <int NF, int SW, int R>
static int tc_stream_go(int64_t blocks, const tc_jobs &jobs, const float *x, int64_t ldx, int64_t T, int64_t K,
                        cudaStream_t s) {
    typedef uint16_t wbuf[R][TC_SP];
    typedef float pbuf[R][NF * 8 + 1];
    /* a second buffer per warp when it has several slices, except at 8 warps of 32 outputs (over 227 KB): then each
     * round's loads are issued at the round's start */
    constexpr int NBUF = SW == 8 && R == 32 ? 1 : 2;
    static_assert(SW * NBUF * sizeof(wbuf) + SW * sizeof(pbuf) + R * sizeof(void *) <= 227 * 1024, "shared memory");
    const int64_t S = (K + TC_KS - 1) / TC_KS;
    const int nbuf = S > SW ? NBUF : 1;
    const size_t smem = (size_t)SW * nbuf * sizeof(wbuf) + SW * sizeof(pbuf);
    static const cudaError_t opt = tc_smem_opt(tc_stream<NF, SW, R>, SW * NBUF * sizeof(wbuf) + SW * sizeof(pbuf));
    if (opt != cudaSuccess) return td_cu_fail("matmul (tensor cores): shared memory of tc_stream", opt);
    tc_stream<NF, SW, R><<<(unsigned)blocks, SW * 32, smem, s>>>(jobs, x, ldx, T, K, nbuf);
    return td_cu_launched("matmul (tensor cores, few tokens, streamed)");
}

template <int NF, int SW>
static int tc_stream_r(int R, const int64_t *blocks, const tc_jobs *jobs, const float *x, int64_t ldx, int64_t T,
                       int64_t K, cudaStream_t s) {
    if (R == 32) return tc_stream_go<NF, SW, 32>(blocks[3], jobs[3], x, ldx, T, K, s);
    if (R == 16) return tc_stream_go<NF, SW, 16>(blocks[0], jobs[0], x, ldx, T, K, s);
    if (R == 8) return tc_stream_go<NF, SW, 8>(blocks[1], jobs[1], x, ldx, T, K, s);
    return tc_stream_go<NF, SW, 4>(blocks[2], jobs[2], x, ldx, T, K, s);
}

/* tc_wide with each slice in a block of its own (grid z = the slices), its partial P_s written to a stream-ordered
 * scratch, then tc_fold_parts adds them in slice order: the same order and bits as one pass, for launches whose tiles
 * alone would leave most SMs idle (65 to a few hundred tokens over a few thousand outputs: 8 tiles for 1024 x 3072 at
 * T 65). TD_CUDA_TC_PARTS=0 turns it off. 1 when the scratch cannot be had (the caller then runs one pass). */
static int tc_parts = td_cu_env_on("TD_CUDA_TC_PARTS"); /* 0 off, 1 where tiles leave SMs idle, 2 always (test) */
extern "C" void td_cu_matmul_tc_parts_test(int on) {
    tc_parts = on < 0 ? td_cu_env_on("TD_CUDA_TC_PARTS") : on ? 2 : 0;
}

/* tc_fold_parts over a launch's partials ([S][T][ng], per outputs a block) */
static int tc_fold_launch(const tc_jobs &jobs, const float *part, int64_t T, int64_t S, int64_t ng, int64_t per,
                          cudaStream_t s) {
    if (ng % 4 || per % 4) return td_cu_failf("matmul (tensor cores): %lld outputs a launch, %lld a block (the slices' "
                                              "sum takes multiples of 4)", (long long)ng, (long long)per);
    tc_fold_parts<<<(unsigned)((tc_fold_threads(T, ng) + 255) / 256), 256, 0, s>>>(jobs, part, T, S, ng, per);
    return td_cu_launched("matmul (tensor cores, the slices' sum)");
}

/* A kernel of tc_wide's launch shape (tc_wide, tc_wg or tc_ws: grid (blocks of 128 outputs, tiles of 128 tokens[,
 * slices]), 256 threads (tc_ws: ws_threads), tc_wide's arguments (tc_ws: its tensor maps for x, X the type of that
 * argument) and its dynamic shared memory, opted in once per kernel (at its first launch). */
template <auto KF> static cudaError_t tc_wide_opt(size_t bytes) {
    static const cudaError_t e = tc_smem_opt(KF, bytes);
    return e;
}

template <auto PF, int NT = 256, typename X>
static int tc_wide_parts(size_t smem, const tc_jobs &jobs, const X &x, const uint16_t *xb, int64_t ldx, int64_t T,
                         int64_t K, int64_t blocks, int64_t ty, int64_t S, int64_t ng, cudaStream_t s) {
    const size_t bytes = (size_t)S * (size_t)T * (size_t)ng * sizeof(float);
    if (S > 65535 || bytes > ((size_t)1 << 30)) return 1;
    const cudaError_t opt = tc_wide_opt<PF>(smem);
    if (opt != cudaSuccess) return td_cu_fail("matmul (tensor cores): shared memory of tc_wide", opt);
    float *part = nullptr;
    if (cudaMallocAsync((void **)&part, bytes, s) != cudaSuccess) {
        cudaGetLastError();
        return 1;
    }
    PF<<<dim3((unsigned)blocks, (unsigned)ty, (unsigned)S), NT, smem, s>>>(jobs, x, xb, ldx, T, K, part);
    int rc = td_cu_launched("matmul (tensor cores, wide, by slices)");
    if (rc == 0) rc = tc_fold_launch(jobs, part, T, S, ng, TC_BM, s);
    cudaFreeAsync(part, s);
    return rc;
}

/* tc_split for launches of up to 64 tokens over several slices whose outputs are few enough (at most 8 x SMs blocks
 * of 64: the head's 151,936 rows stay on tc_stream, which streams them at the copy bandwidth): TD_CUDA_TC_SPLIT=0
 * turns it off. The partials (slices x T x outputs floats) go to the thread's bound scratch, or else to a
 * stream-ordered allocation, and tc_fold_parts adds them; 1 when the launch has too many outputs or no scratch can be
 * had (the caller then runs tc_stream). Test mode 7 forces it (`forced`) on every T <= 64 launch, one slice too. */
static int tc_split_on = td_cu_env_on("TD_CUDA_TC_SPLIT");
extern "C" void td_cu_matmul_tc_split_test(int on) {
    tc_split_on = on < 0 ? td_cu_env_on("TD_CUDA_TC_SPLIT") : on ? 1 : 0;
}

template <int NF, bool WG>
static int tc_split_go(const tc_jobs &jobs, const float *x, int64_t ldx, int64_t T, int64_t K, int64_t blocks,
                       int64_t S, float *part, const tc_glu &gl, cudaStream_t s) {
    constexpr size_t smem = tc_split_smem<NF, WG>();
    static const cudaError_t opt = tc_smem_opt(tc_split<NF, false, WG>, smem);
    if (opt != cudaSuccess) return td_cu_fail("matmul (tensor cores): shared memory of tc_split", opt);
    tc_split<NF, false, WG><<<dim3((unsigned)blocks, (unsigned)S), 128, smem, s>>>(jobs, x, ldx, T, K, part, gl);
    return td_cu_launched("matmul (tensor cores, few tokens, by slices)");
}

/* The scratch the caller bound to this thread (td_cu_scratch_bind). A CUDA graph records a stream-ordered
 * allocation as a node of its own, which its programmatic edges (runtime.cu) cannot cross: the products of a
 * recorded pass take their partials from here. */
static thread_local float *tc_scr = nullptr;
static thread_local int64_t tc_scr_floats = 0, tc_scr_wanted = 0;
extern "C" void td_cu_scratch_bind(float *p, int64_t floats) {
    tc_scr = p;
    tc_scr_floats = p ? floats : 0;
}
extern "C" int64_t td_cu_scratch_wanted(void) {
    const int64_t w = tc_scr_wanted;
    tc_scr_wanted = 0;
    return w;
}
/* floats of the bound scratch from float `skip` on, or NULL (the most asked for recorded) */
static float *tc_scratch_take(int64_t floats, int64_t skip) {
    if (tc_scr && skip + floats <= tc_scr_floats) return tc_scr + skip;
    if (skip + floats > tc_scr_wanted) tc_scr_wanted = skip + floats;
    return nullptr;
}
/* Where the partials a launch gates (gl.S > 1: the gate's and up's, left in the bound scratch by the launch before)
 * end in the scratch, rounded up to 64 floats; 0 when it reads none there. Its own partials go after them: its blocks
 * would otherwise overwrite what other blocks still stage. */
static int64_t tc_scratch_after(const float *x, const tc_glu &gl) {
    if (gl.S <= 1 || !tc_scr) return 0;
    const float *end = (x > gl.u ? x : gl.u) + gl.S * gl.step;
    if (end <= tc_scr || end > tc_scr + tc_scr_floats) return 0;
    return ((int64_t)(end - tc_scr) + 63) / 64 * 64;
}

/* tc_split with its S slice blocks as one thread-block cluster (sm_90) that adds the partials through distributed
 * shared memory: no scratch, no second kernel; for launches of up to 16 tokens. 1 when the GPU cannot hold such a
 * cluster (asked once per NF and S, the caller then folds through the scratch); TD_CUDA_TC_CLUSTER=0 turns it off,
 * td_cu_matmul_tc_cluster_test(1) forces it on every tc_split launch (2 here). */
static int tc_cluster_on = td_cu_env_on("TD_CUDA_TC_CLUSTER");
extern "C" void td_cu_matmul_tc_cluster_test(int on) {
    tc_cluster_on = on < 0 ? td_cu_env_on("TD_CUDA_TC_CLUSTER") : on ? 2 : 0;
}

template <int NF, bool WG>
static int tc_split_cluster(const tc_jobs &jobs, const float *x, int64_t ldx, int64_t T, int64_t K, int64_t blocks,
                            int64_t S, const tc_glu &gl, cudaStream_t s) {
    constexpr size_t smem = tc_split_smem<NF, WG>();
    static signed char fits[17]; /* 0 not asked, 1 yes, -1 no; per cluster size (host only, any thread: benign) */
    if (S < 2 || S > 16 || blocks > 65535) return 1;
    cudaLaunchConfig_t cfg = {};
    cudaLaunchAttribute at[1];
    at[0].id = cudaLaunchAttributeClusterDimension;
    at[0].val.clusterDim.x = 1, at[0].val.clusterDim.y = (unsigned)S, at[0].val.clusterDim.z = 1;
    cfg.gridDim = dim3((unsigned)blocks, (unsigned)S), cfg.blockDim = dim3(128), cfg.dynamicSmemBytes = smem;
    cfg.stream = s, cfg.attrs = at, cfg.numAttrs = 1;
    if (!fits[S]) { /* queries, not stream work: in relaxed mode while a graph records */
        cudaStreamCaptureMode m = cudaStreamCaptureModeRelaxed;
        cudaThreadExchangeStreamCaptureMode(&m);
        int n = 0;
        bool ok = cudaFuncSetAttribute(tc_split<NF, true, WG>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       (int)smem) == cudaSuccess &&
                  (S <= 8 || cudaFuncSetAttribute(tc_split<NF, true, WG>,
                                                  cudaFuncAttributeNonPortableClusterSizeAllowed, 1) == cudaSuccess) &&
                  cudaOccupancyMaxActiveClusters(&n, tc_split<NF, true, WG>, &cfg) == cudaSuccess && n >= 1;
        cudaGetLastError();
        cudaThreadExchangeStreamCaptureMode(&m);
        fits[S] = ok ? 1 : -1;
    }
    if (fits[S] < 0) return 1;
    const cudaError_t e = cudaLaunchKernelEx(&cfg, tc_split<NF, true, WG>, jobs, x, ldx, T, K, (float *)nullptr, gl);
    if (e != cudaSuccess) return td_cu_fail("matmul (tensor cores, few tokens, a cluster of slices)", e);
    return 0;
}

template <bool WG>
static int tc_split_pick(const tc_jobs &jobs, const float *x, int64_t ldx, int64_t T, int64_t K, int64_t blocks,
                         int64_t S, float *part, const tc_glu &gl, cudaStream_t s, int nf, bool cluster) {
    if (cluster)
        return nf == 1   ? tc_split_cluster<1, WG>(jobs, x, ldx, T, K, blocks, S, gl, s)
               : nf == 2 ? tc_split_cluster<2, WG>(jobs, x, ldx, T, K, blocks, S, gl, s)
               : nf <= 4 ? tc_split_cluster<4, WG>(jobs, x, ldx, T, K, blocks, S, gl, s)
                         : tc_split_cluster<8, WG>(jobs, x, ldx, T, K, blocks, S, gl, s);
    return nf == 1   ? tc_split_go<1, WG>(jobs, x, ldx, T, K, blocks, S, part, gl, s)
           : nf == 2 ? tc_split_go<2, WG>(jobs, x, ldx, T, K, blocks, S, part, gl, s)
           : nf <= 4 ? tc_split_go<4, WG>(jobs, x, ldx, T, K, blocks, S, part, gl, s)
                     : tc_split_go<8, WG>(jobs, x, ldx, T, K, blocks, S, part, gl, s);
}

static bool tc_wg_split(int64_t K);

/* TD_CUDA_TC_DEFER (cuda.h, td_cu_matmul_multi_parts): 0 never (unset: measured slower on the H100), 1 tc_split's
 * launches through the scratch, 2 also those of up to 16 tokens (instead of the cluster) */
static int tc_defer_env(void) {
    const char *e = getenv("TD_CUDA_TC_DEFER");
    return e && (e[0] == '1' || e[0] == '2') && !e[1] ? e[0] - '0' : 0;
}
static int tc_defer = tc_defer_env();
extern "C" void td_cu_matmul_defer_test(int mode) { tc_defer = mode < 0 ? tc_defer_env() : mode; }

static int tc_split_launch(const td_cu_mm *mm, int n, const float *x, int64_t ldx, int64_t T, int64_t K, bool forced,
                           const tc_glu &gl, td_cu_parts *defer, cudaStream_t s) {
    const bool wg = tc_wg_split(K);
    tc_jobs jobs;
    const int64_t blocks = tc_make_jobs(mm, n, SP_R, &jobs);
    const int64_t S = (K + TC_KS - 1) / TC_KS, ng = blocks * SP_R;
    if (blocks > 0x7fffffff || S > 65535 || (!forced && blocks > 8 * (int64_t)tc_sms())) return 1;
    const int nf = (int)((T + 7) / 8);
    /* products whose partials may stay for the kernels that take them (td_cu_matmul_multi_parts): their rows in order,
     * every block's 64 outputs one product's, so P_s[t, j] of product i is at part[(s * T + t) * ng + o_i + j], o_i
     * the outputs of the products before it */
    bool keep = defer && tc_defer && S > 1;
    for (int i = 0; i < n && keep; i++) keep = !mm[i].rows && mm[i].n_out % SP_R == 0;
    /* the cluster up to 16 tokens: on the H100 it took a decode step's products from 11-14 us to 7-9 (no second
     * kernel); at 45 tokens its first fold (an output a thread) ran gate/up 26.5 us in clusters of 4 against 16.6
     * through the scratch, and the fold by float4s (TD_CUDA_TC_CLUSTER=2) timed one criterion within noise of it */
    if (tc_cluster_on && S > 1 && (nf <= 2 || tc_cluster_on == 2) && !(keep && tc_defer == 2)) {
        int rc = wg ? tc_split_pick<true>(jobs, x, ldx, T, K, blocks, S, nullptr, gl, s, nf, true)
                    : tc_split_pick<false>(jobs, x, ldx, T, K, blocks, S, nullptr, gl, s, nf, true);
        if (rc <= 0) return rc; /* else the scratch and tc_fold_parts */
    }
    /* the partials: in the bound scratch, else in a stream-ordered allocation (x in bf16 once per launch, as tc_wide
     * takes it, measured no faster here: 2.34 vs 2.31 ms a criterion on the H100) */
    float *part = S > 1 ? tc_scratch_take(S * T * ng, tc_scratch_after(x, gl)) : nullptr;
    const bool own = S > 1 && !part;
    if (own && cudaMallocAsync((void **)&part, (size_t)(S * T * ng) * sizeof(float), s) != cudaSuccess) {
        cudaGetLastError();
        return 1;
    }
    int rc = wg ? tc_split_pick<true>(jobs, x, ldx, T, K, blocks, S, part, gl, s, nf, false)
                : tc_split_pick<false>(jobs, x, ldx, T, K, blocks, S, part, gl, s, nf, false);
    if (rc == 0 && keep && !own) { /* the bound scratch outlives the launch: the consumers add them */
        for (int i = 0, o = 0; i < n; o += (int)mm[i].n_out, i++) defer[i] = td_cu_parts{part + o, S, ng};
        return 0;
    }
    if (rc == 0 && part) rc = tc_fold_launch(jobs, part, T, S, ng, SP_R, s);
    if (own) cudaFreeAsync(part, s);
    return rc < 0 ? rc : 0;
}

/* TD_CUDA_TC_XB=0: tc_wide rounds x to bf16 in every block (as before) instead of once per launch. */
static int tc_xb_on = td_cu_env_on("TD_CUDA_TC_XB");
extern "C" void td_cu_matmul_tc_xb_test(int on) {
    tc_xb_on = on < 0 ? td_cu_env_on("TD_CUDA_TC_XB") : on ? 1 : 0;
}

/* TD_CUDA_TC_WREG: tc_wide's slice totals in registers instead of shared memory, the 64 KB that frees holding a 4th
 * weight stage (the default: unset, 1 or any value but 0 and 3), or left unused (3: the registers alone, to time each
 * change apart); 0: in shared memory, three stages (the form before; 4-8% slower on the H200's products). The same
 * bits either way. */
static int tc_wreg_env(void) { /* 0 off, else the weight stages (3 or 4) */
    const char *e = getenv("TD_CUDA_TC_WREG");
    if (e && !strcmp(e, "0")) return 0;
    return e && !strcmp(e, "3") ? 3 : 4;
}
static int tc_wreg = tc_wreg_env();
extern "C" void td_cu_matmul_tc_wreg_test(int stages) {
    tc_wreg = stages < 0 ? tc_wreg_env() : stages == 0 ? 0 : stages == 3 ? 3 : 4;
}

/* TD_CUDA_TC_WG: wgmma on a GPU of compute capability 9.0 (this build's sm_90a code), a bit mask: 1 tc_wg instead of
 * tc_wide where x is in bf16 (tc_x_bf16) and K is a multiple of 64; 2 tc_split's WG form where K is a multiple of 256;
 * 3 both, the default (unset or any other value); 0 the mma.sync kernels alone. The same bits either way (on the H100,
 * part 9: every shape of test_cuda_matmul_tc; decide +29%, prefill +14%, decode +8%, one criterion -8% time).
 * td_cu_matmul_tc_wg_test(mask) sets it, -1 back to the environment's. */
static int tc_wg_env(void) {
    const char *e = getenv("TD_CUDA_TC_WG");
    return e && e[0] >= '0' && e[0] <= '3' && !e[1] ? e[0] - '0' : 3;
}
static int tc_wg_on = tc_wg_env();
extern "C" void td_cu_matmul_tc_wg_test(int on) { tc_wg_on = on < 0 ? tc_wg_env() : on & 3; }
static bool tc_wg_here(void) {
    static const bool ok = tc_dev_attr(cudaDevAttrComputeCapabilityMajor, 0) == 9 &&
                           tc_dev_attr(cudaDevAttrComputeCapabilityMinor, -1) == 0;
    return ok;
}
extern "C" int td_cu_matmul_tc_wg_here(void) { return tc_wg_here() ? 1 : 0; }
static bool tc_wg_split(int64_t K) { return (tc_wg_on & 2) && K % TC_KS == 0 && tc_wg_here(); }

/* A tc_wide-shaped kernel (KF; PF its instance that writes partials) over all slices in one pass, or by slices where
 * its tiles fill at most half the SMs and the partials stay small (at T 2048, down and o: 128 tiles, the split cost
 * prefill 52,005 vs 57,486 tokens/s on the H200). */
template <auto KF, auto PF, int NT = 256, typename X>
static int tc_wide_go(size_t smem, bool fold, const tc_jobs &jobs, const X &x, const uint16_t *xb, int64_t ldx,
                      int64_t T, int64_t K, int64_t blocks, int64_t ty, int64_t S, int64_t ng, cudaStream_t s) {
    if (fold && S > 1 && (tc_parts == 2 || (tc_parts == 1 && T <= 512 && 2 * blocks * ty <= tc_sms()))) {
        int rc = tc_wide_parts<PF, NT>(smem, jobs, x, xb, ldx, T, K, blocks, ty, S, ng, s);
        if (rc <= 0) return rc; /* else no scratch to be had: the one-pass launch below */
    }
    const cudaError_t opt = tc_wide_opt<KF>(smem);
    if (opt != cudaSuccess) return td_cu_fail("matmul (tensor cores): shared memory of tc_wide", opt);
    KF<<<dim3((unsigned)blocks, (unsigned)ty), NT, smem, s>>>(jobs, x, xb, ldx, T, K, nullptr);
    return td_cu_launched("matmul (tensor cores, wide)");
}

/* TD_CUDA_WG_EARLY=0: tc_wg issues a stage's copies before its wgmma (the order before), not after them. */
static const int tc_wg_early = td_cu_env_on("TD_CUDA_WG_EARLY");
/* TD_CUDA_WG_WS: where tc_wg would run, which tc_ws runs instead (the same bits): unset (or another value) "tma", the
 * default: the bulk tensor copy for all products, the gated gate/up by one 4-d box (H100, session 2026-12-08 call A:
 * qwen3-0.6b decide 4,014-4,046 vs the mix's 3,954-3,995 vs tc_wg's 3,662-3,832 criteria/s, qwen3.5-0.8b 2,488-2,513
 * vs 2,474-2,486, prefill within its spread); "mix" the bulk copy for the plain products and the producer warpgroup
 * for the gated one (the default of part 23); "4" a producer warpgroup of cp.async, "2" two producer warps; "0" none:
 * tc_wg. Where the bulk copy's maps cannot be made (a row list; the driver refuses) tc_wg runs instead, the warpgroup
 * for the gated product. Test only: td_cu_matmul_tc_ws_test(0 / 1 / 2 / 4: tc_wg / the bulk copy / producer warps,
 * for both), -1 back to the environment's. */
static int tc_ws_env(bool glu) {
    const char *e = getenv("TD_CUDA_WG_WS");
    if (e && !strcmp(e, "mix")) return glu ? 4 : WS_TMA;
    if (e && (!strcmp(e, "0") || !strcmp(e, "2") || !strcmp(e, "4"))) return e[0] - '0';
    return WS_TMA;
}
static int tc_ws_pw = tc_ws_env(false), tc_ws_gpw = tc_ws_env(true); /* the plain products', the gated one's */
extern "C" void td_cu_matmul_tc_ws_test(int pw) {
    const int v = pw == WS_TMA || pw == 2 || pw == 4 ? pw : 0;
    tc_ws_pw = pw < 0 ? tc_ws_env(false) : v, tc_ws_gpw = pw < 0 ? tc_ws_env(true) : v;
}
static std::atomic<int64_t> tc_tma_runs{0};
extern "C" int64_t td_cu_matmul_tc_tma_launches(void) { return tc_tma_runs.load(); }
/* tc_wide_go with the kernel TD_CUDA_TC_WG picks (x in bf16), else tc_wide with its totals where TD_CUDA_TC_WREG puts
 * them */
template <bool FOLD, bool XB>
static int tc_wide_pick(const tc_jobs &jobs, const float *x, const uint16_t *xb, int64_t ldx, int64_t T, int64_t K,
                        int64_t blocks, int64_t ty, int64_t S, int64_t ng, cudaStream_t s) {
    if (XB && (tc_wg_on & 1) && K % WG_BK == 0 && tc_wg_here()) {
        tc_maps m;
        if (tc_ws_pw == WS_TMA && tc_maps_make(&m, jobs, false, xb, T, K)) {
            tc_tma_runs++;
            return tc_wide_go<tc_ws<FOLD, WS_AS, false, WS_TMA>, tc_ws<true, WS_AS, false, WS_TMA>, ws_threads(WS_TMA)>(
                ws_smem<WS_AS>(), FOLD, jobs, m, xb, ldx, T, K, blocks, ty, S, ng, s);
        }
        if (tc_ws_pw == 4)
            return tc_wide_go<tc_ws<FOLD, WS_AS>, tc_ws<true, WS_AS>, ws_threads(4)>(
                ws_smem<WS_AS>(), FOLD, jobs, tc_no_maps, xb, ldx, T, K, blocks, ty, S, ng, s);
        if (tc_ws_pw == 2)
            return tc_wide_go<tc_ws<FOLD, WS_AS, false, 2>, tc_ws<true, WS_AS, false, 2>, ws_threads(2)>(
                ws_smem<WS_AS>(), FOLD, jobs, tc_no_maps, xb, ldx, T, K, blocks, ty, S, ng, s);
        if (!tc_wg_early)
            return tc_wide_go<tc_wg<FOLD, WG_AS, false>, tc_wg<true, WG_AS, false>>(wg_smem<WG_AS>(), FOLD, jobs, x, xb,
                                                                                ldx, T, K, blocks, ty, S, ng, s);
        return tc_wide_go<tc_wg<FOLD, WG_AS>, tc_wg<true, WG_AS>>(wg_smem<WG_AS>(), FOLD, jobs, x, xb, ldx, T, K,
                                                                  blocks, ty, S, ng, s);
    }
    if (tc_wreg == 4)
        return tc_wide_go<tc_wide<FOLD, XB, true, TW_AS_REG>, tc_wide<true, XB, true, TW_AS_REG>>(
            tw_smem<XB, true, TW_AS_REG>(), FOLD, jobs, x, xb, ldx, T, K, blocks, ty, S, ng, s);
    if (tc_wreg == 3)
        return tc_wide_go<tc_wide<FOLD, XB, true, TW_AS>, tc_wide<true, XB, true, TW_AS>>(
            tw_smem<XB, true, TW_AS>(), FOLD, jobs, x, xb, ldx, T, K, blocks, ty, S, ng, s);
    return tc_wide_go<tc_wide<FOLD, XB, false, TW_AS>, tc_wide<true, XB, false, TW_AS>>(
        tw_smem<XB, false, TW_AS>(), FOLD, jobs, x, xb, ldx, T, K, blocks, ty, S, ng, s);
}

/* The kernels' mode: td_cu_matmul_tc_test_mode's, else the environment's TD_CUDA_TC (read once; -1 neither). */
static int tc_mode(void) {
    static const int env = tc_env();
    return tc_test ? tc_test : env;
}
/* Whether a launch of T <= 64 tokens over K columns runs tc_split (every slice a block of its own). */
static bool tc_split_wanted(int mode, int64_t K) { return mode == 7 || (mode == 2 && tc_split_on && K > TC_KS); }

#ifdef TD_CUDA_BATCH_VARIANT
static constexpr bool TC_FOLD = false; /* not batch-invariant: one chain over all k, so T <= 64 and above differ */
#else
static constexpr bool TC_FOLD = true;
#endif

/* tc_x_bf16 over x [T, ldx] (gated when gl.act) into xb [T, K] */
static int tc_x_bf16_launch(const float *x, int64_t ldx, int64_t T, int64_t K, uint16_t *xb, const tc_glu &gl,
                            cudaStream_t s) {
    tc_x_bf16<<<(unsigned)((T * K / 4 + 255) / 256), 256, 0, s>>>(x, ldx, T, K, xb, gl);
    return td_cu_launched("matmul (tensor cores, x to bf16)");
}

/* tc_wide over x (gated when gl.act) rounded to bf16 once by tc_x_bf16 into a stream-ordered scratch; 1 when that
 * scratch cannot be had (nothing launched). */
static int tc_wide_xb(const tc_jobs &jobs, const float *x, int64_t ldx, int64_t T, int64_t K, int64_t blocks,
                      const tc_glu &gl, cudaStream_t s) {
    const int64_t ty = (T + TW_BN - 1) / TW_BN, S = (K + TC_KS - 1) / TC_KS, ng = blocks * TC_BM;
    uint16_t *xb = nullptr;
    if (cudaMallocAsync((void **)&xb, (size_t)T * (size_t)K * 2, s) != cudaSuccess) {
        cudaGetLastError();
        return 1;
    }
    int rc = tc_x_bf16_launch(x, ldx, T, K, xb, gl, s);
    if (rc == 0) rc = tc_wide_pick<TC_FOLD, true>(jobs, x, xb, ldx, T, K, blocks, ty, S, ng, s);
    cudaFreeAsync(xb, s);
    return rc < 0 ? rc : 0;
}

/* The product of act(g) * u (td_cu_matmul_glu) by the kernels td_cu_matmul_tc_launch picks for it, gating the
 * activations as they take them: tc_split as it stages them (T <= 64), tc_x_bf16 before tc_wide (above). 1 when
 * another kernel would run (nothing launched: the caller gates g itself, then runs the product). */
int td_cu_matmul_tc_glu(const td_cu_mm *mm, const td_cu_parts *gu, int act, int64_t T, td_cu_parts *defer,
                        cudaStream_t s) {
    const int mode = tc_mode();
    const int64_t K = mm->w->cols, ldx = gu[0].ld;
    if (gu[0].S != gu[1].S || gu[0].ld != gu[1].ld) return 1; /* not one launch's partials */
    const tc_glu gl{gu[1].p, act, gu[0].S, T * ldx};
    const float *g = gu[0].p;
    if (T <= TC_SKINNY_T) {
        if (!tc_split_wanted(mode, K)) return 1;
        /* above 16 tokens every block of a column of outputs gates its slice again (16 blocks for the down product's
         * 1024 outputs): one criterion (45 tokens) took 2.77 ms fused against 2.57 with the gate's own kernel on the
         * H100 (part 9), so from 17 tokens the gate runs apart, unless a test forces tc_split (mode 7) */
        if (T > 16 && mode != 7) return 1;
        return tc_split_launch(mm, 1, g, ldx, T, K, mode == 7, gl, defer, s);
    }
    if (mode < 2 || !tc_xb_on) return 1;
    tc_jobs jobs;
    const int64_t blocks = tc_make_jobs(mm, 1, TC_BM, &jobs);
    if (blocks > 0x7fffffff) return 1;
    return tc_wide_xb(jobs, g, ldx, T, K, blocks, gl, s);
}

/* x in bf16 as its producer wrote it (td_cu_matmul_multi_xb) taken instead of tc_x_bf16's (TD_CUDA_NORM_XB=0: not,
 * the products round x again). */
static int tc_norm_xb = td_cu_env_on("TD_CUDA_NORM_XB");
extern "C" void td_cu_matmul_norm_xb_test(int on) {
    tc_norm_xb = on < 0 ? td_cu_env_on("TD_CUDA_NORM_XB") : on ? 1 : 0;
}
extern "C" int td_cu_matmul_norm_xb(void) { return tc_norm_xb; }

/* act(g) * u computed by the gate/up product itself (td_cu_matmul_mlp; TD_CUDA_GLU_EPI=0: not). */
static int tc_glu_epi = td_cu_env_on("TD_CUDA_GLU_EPI");
extern "C" void td_cu_matmul_glu_epi_test(int on) {
    tc_glu_epi = on < 0 ? td_cu_env_on("TD_CUDA_GLU_EPI") : on ? 1 : 0;
}

/* tc_wg's GLU form (KF) over the gate and up jobs gj, x in bf16 (xb [T, K]), I outputs of each (tc_ws: x its
 * tensor maps) */
template <auto KF, int NT = 256, typename X = const float *>
static int tc_glu_go(const tc_jobs &gj, const uint16_t *xb, int64_t T, int64_t K, int64_t I, size_t smem,
                     cudaStream_t s, const X &x = nullptr) {
    const cudaError_t opt = tc_wide_opt<KF>(smem);
    if (opt != cudaSuccess) return td_cu_fail("matmul (tensor cores): shared memory of tc_wg", opt);
    KF<<<dim3((unsigned)((I + 63) / 64), (unsigned)((T + TW_BN - 1) / TW_BN)), NT, smem, s>>>(gj, x, xb, K, T, K,
                                                                                             nullptr);
    return td_cu_launched("matmul (tensor cores, gate and up with the gate)");
}

/* The gate/up product in tc_wg's GLU form into a stream-ordered bf16 scratch h [T, I], then the down product over
 * it as tc_wide_pick runs a product over x in bf16 (x itself rounded by tc_x_bf16 into the same scratch unless xb
 * holds it). 1 where another path would run (nothing launched). */
int td_cu_matmul_mlp_tc(const td_cu_mm *down, const float *x, const uint16_t *xb, int64_t ldx, int64_t T,
                        const td_cu_mat *wg, const td_cu_mat *wu, int act, cudaStream_t s) {
    const int64_t K = wg->cols, I = wg->rows;
    if (!tc_glu_epi || tc_mode() < 2 || !tc_xb_on || T <= TC_SKINNY_T || !(tc_wg_on & 1) || !tc_wg_here() ||
        K % WG_BK || I % WG_BK || wu->rows != I || wu->cols != K || down->w->cols != I || down->rows ||
        (I + 63) / 64 > 0x7fffffff)
        return 1;
    tc_jobs dj;
    const int64_t blocks = tc_make_jobs(down, 1, TC_BM, &dj);
    if (blocks > 0x7fffffff) return 1;
    const bool own_x = !(xb && tc_norm_xb && ldx == K);
    uint16_t *h = nullptr;
    if (cudaMallocAsync((void **)&h, (size_t)T * (size_t)(I + (own_x ? K : 0)) * 2, s) != cudaSuccess) {
        cudaGetLastError();
        return 1;
    }
    int rc = 0;
    if (own_x) {
        rc = tc_x_bf16_launch(x, ldx, T, K, h + T * I, tc_glu{nullptr, 0}, s);
        xb = h + T * I;
    }
    const int64_t ty = (T + TW_BN - 1) / TW_BN;
    if (rc == 0) {
        const td_cu_mm gu[2] = {{nullptr, I, wg, nullptr, I}, {nullptr, I, wu, nullptr, I}};
        tc_jobs gj; /* the jobs' blocks are tc_wg's GLU form's own: their first_block goes unused */
        tc_make_jobs(gu, 2, 64, &gj);
        gj.j[0].yb = h, gj.j[0].act = act;
        tc_maps m;
        const size_t ws = ws_smem<WS_AS>();
        /* the bulk copy where its map can be made, else the warpgroup */
        const int pw = tc_ws_gpw != WS_TMA ? tc_ws_gpw : tc_maps_make(&m, gj, true, xb, T, K) ? WS_TMA : 4;
        tc_tma_runs += pw == WS_TMA;
        rc = pw == WS_TMA
                 ? tc_glu_go<tc_ws<TC_FOLD, WS_AS, true, WS_TMA>, ws_threads(WS_TMA)>(gj, xb, T, K, I, ws, s, m)
             : pw == 4    ? tc_glu_go<tc_ws<TC_FOLD, WS_AS, true>, ws_threads(4)>(gj, xb, T, K, I, ws, s, tc_no_maps)
             : pw == 2    ? tc_glu_go<tc_ws<TC_FOLD, WS_AS, true, 2>, ws_threads(2)>(gj, xb, T, K, I, ws, s, tc_no_maps)
             : tc_wg_early ? tc_glu_go<tc_wg<TC_FOLD, WG_AS, true, true>>(gj, xb, T, K, I, wg_smem<WG_AS>(), s)
                           : tc_glu_go<tc_wg<TC_FOLD, WG_AS, false, true>>(gj, xb, T, K, I, wg_smem<WG_AS>(), s);
    }
    if (rc == 0)
        rc = tc_wide_pick<TC_FOLD, true>(dj, nullptr, h, I, T, I, blocks, ty, (I + TC_KS - 1) / TC_KS,
                                         blocks * TC_BM, s);
    cudaFreeAsync(h, s);
    return rc < 0 ? rc : 0;
}

/* n products of one x (every weight accepted by td_cu_matmul_tc, all of x's width), in one launch. */
int td_cu_matmul_tc_launch(const td_cu_mm *mm, int n, const float *x, const uint16_t *xb, int64_t ldx, int64_t T,
                           td_cu_parts *defer, cudaStream_t s) {
    if (n < 1 || n > TC_MAX_JOBS) return td_cu_failf("matmul (tensor cores): %d products in one launch", n);
    const int mode = tc_mode();
    if (mode < 0)
        return td_cu_failf("matmul (tensor cores): TD_CUDA_TC=%s (expected old or new)", getenv("TD_CUDA_TC"));
    const bool skinny = T <= TC_SKINNY_T;
    const int64_t K = mm[0].w->cols;
    if (skinny && tc_split_wanted(mode, K)) {
        int rc = tc_split_launch(mm, n, x, ldx, T, K, mode == 7, tc_glu{nullptr, 0}, defer, s);
        if (rc <= 0) return rc; /* else too many outputs (a head) or no scratch to be had: tc_stream below */
    }
    bool stream = skinny && mode >= 2;
    if (stream && (mode == 2 || mode == 7) && T > 16) {
        /* above 16 tokens tc_stream takes 32 outputs a block; with fewer than two such blocks an SM it lost to
         * tc_skinny on the H200 (1024 x 3072 at T 45 / 64: 47.2 / 60.7 us against 37.4 / 43.8 us; the 151936 x 1024
         * head at T 45 / 64: 486 / 601 us against 702 / 871 us): then tc_skinny, the same bits */
        int64_t b32 = 0;
        for (int i = 0; i < n; i++) b32 += (mm[i].n_out + 31) / 32;
        stream = b32 >= 2 * tc_sms();
    }
    if (stream) {
        /* outputs a block: for up to 16 tokens, 16 when that gives at least two blocks an SM, else 8 if that does,
         * else 4; above, 32 (each block reads all of x: with 32 outputs x's bytes weigh 2T / 32 of the weights') */
        static const int per[4] = {16, 8, 4, 32};
        tc_jobs jobs[4];
        int64_t blocks[4] = {0, 0, 0, 0};
        for (int r = 0; r < 4; r++) blocks[r] = tc_make_jobs(mm, n, per[r], &jobs[r]);
        if (blocks[2] > 0x7fffffff) return td_cu_failf("matmul (tensor cores): %lld blocks", (long long)blocks[2]);
        int R = mode == 3 ? 16 : mode == 4 ? 8 : mode == 5 ? 4 : mode == 6 ? 32 : 0;
        if (!R && T > 16) R = 32;
        if (!R) R = blocks[0] >= 2 * tc_sms() ? 16 : blocks[1] >= 2 * tc_sms() ? 8 : 4;
        const int nf = (int)((T + 7) / 8), wide = (K + TC_KS - 1) / TC_KS >= 8;
        if (wide) {
            if (nf == 1) return tc_stream_r<1, 8>(R, blocks, jobs, x, ldx, T, K, s);
            if (nf == 2) return tc_stream_r<2, 8>(R, blocks, jobs, x, ldx, T, K, s);
            if (nf <= 4) return tc_stream_r<4, 8>(R, blocks, jobs, x, ldx, T, K, s);
            return tc_stream_r<8, 8>(R, blocks, jobs, x, ldx, T, K, s);
        }
        if (nf == 1) return tc_stream_r<1, 4>(R, blocks, jobs, x, ldx, T, K, s);
        if (nf == 2) return tc_stream_r<2, 4>(R, blocks, jobs, x, ldx, T, K, s);
        if (nf <= 4) return tc_stream_r<4, 4>(R, blocks, jobs, x, ldx, T, K, s);
        return tc_stream_r<8, 4>(R, blocks, jobs, x, ldx, T, K, s);
    }
    tc_jobs jobs;
    const int64_t blocks = tc_make_jobs(mm, n, skinny ? 16 : TC_BM, &jobs); /* 16 or 128 outputs a block */
    if (blocks > 0x7fffffff) return td_cu_failf("matmul (tensor cores): %lld blocks", (long long)blocks);
    if (skinny) {
        /* as many warps as slices, up to 8: a long k streams through more warps at once */
        const int nf = (int)((T + 7) / 8), wide = (K + TC_KS - 1) / TC_KS >= 8;
        if (wide) {
            if (nf == 1) tc_skinny<1, 8><<<(unsigned)blocks, 256, 0, s>>>(jobs, x, ldx, T, K);
            else if (nf == 2) tc_skinny<2, 8><<<(unsigned)blocks, 256, 0, s>>>(jobs, x, ldx, T, K);
            else if (nf <= 4) tc_skinny<4, 8><<<(unsigned)blocks, 256, 0, s>>>(jobs, x, ldx, T, K);
            else tc_skinny<8, 8><<<(unsigned)blocks, 256, 0, s>>>(jobs, x, ldx, T, K);
        } else {
            if (nf == 1) tc_skinny<1, 4><<<(unsigned)blocks, 128, 0, s>>>(jobs, x, ldx, T, K);
            else if (nf == 2) tc_skinny<2, 4><<<(unsigned)blocks, 128, 0, s>>>(jobs, x, ldx, T, K);
            else if (nf <= 4) tc_skinny<4, 4><<<(unsigned)blocks, 128, 0, s>>>(jobs, x, ldx, T, K);
            else tc_skinny<8, 4><<<(unsigned)blocks, 128, 0, s>>>(jobs, x, ldx, T, K);
        }
        return td_cu_launched("matmul (tensor cores, few tokens)");
    }
    if (mode >= 2) {
        const int64_t ty = (T + TW_BN - 1) / TW_BN, S = (K + TC_KS - 1) / TC_KS, ng = blocks * TC_BM;
        if (xb && tc_norm_xb && ldx == K) /* x in bf16 already, as tc_x_bf16 would round it */
            return tc_wide_pick<TC_FOLD, true>(jobs, x, xb, ldx, T, K, blocks, ty, S, ng, s);
        /* x rounded to bf16 once (tc_x_bf16) instead of by every block of a column of tiles (TD_CUDA_TC_XB=0: not) */
        if (tc_xb_on) {
            int rc = tc_wide_xb(jobs, x, ldx, T, K, blocks, tc_glu{nullptr, 0}, s);
            if (rc <= 0) return rc; /* else no scratch for it: rounded in the blocks */
        }
        return tc_wide_pick<TC_FOLD, false>(jobs, x, nullptr, ldx, T, K, blocks, ty, S, ng, s);
    }
#ifdef TD_CUDA_BATCH_VARIANT
    /* Not batch-invariant, to measure what invariance costs: one chain over all k (no slices) in tiles of 128 tokens,
     * so a row's bits differ between T <= TC_SKINNY_T (tc_skinny's slices) and above. */
    tc_tile<128, false><<<dim3((unsigned)blocks, (unsigned)((T + 127) / 128)), 256, 0, s>>>(jobs, x, ldx, T, K);
#else
    /* 64 tokens a block: at 128 the accumulators and totals (128 registers) spill */
    tc_tile<64, true><<<dim3((unsigned)blocks, (unsigned)((T + 63) / 64)), 256, 0, s>>>(jobs, x, ldx, T, K);
#endif
    return td_cu_launched("matmul (tensor cores)");
}

#endif /* TD_CU_EMU */
