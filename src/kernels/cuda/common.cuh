/* Shared device helpers of the CUDA kernels (private to src/kernels/cuda/): error reporting (runtime.cu keeps the
 * per-thread message), the exact element conversions (f16, bf16, Q8_0 / Q4_0 blocks), and block reductions.
 *
 * Batch invariance: the reductions here are fixed trees over a fixed block size NT (a template parameter, never a
 * run-time value): each thread first folds its own elements i = tid, tid + NT, ... in ascending order, then the NT
 * partial values meet in the same pairs every time (warp shuffles down 16, 8, 4, 2, 1, then the same over the warps'
 * results). The result depends on the values and on n only. */
#ifndef TD_KERNELS_CUDA_COMMON_CUH
#define TD_KERNELS_CUDA_COMMON_CUH

#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda/cuda.h"
#include "kernels/cuda/ptx.cuh"
#include "util/dtype.h"

/* ---- errors (runtime.cu) ---- */

/* Records "what: <CUDA's text>" as this thread's error, clears CUDA's last (non-sticky) error, returns -1. */
int td_cu_fail(const char *what, cudaError_t e);
/* Records a formatted message (an argument the kernels cannot run), returns -1. */
int td_cu_failf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* After a launch: 0, or -1 with "kernel <name>: <CUDA's text>" when the launch failed. */
int td_cu_launched(const char *name);

#define TD_CU_STREAM(s) ((cudaStream_t)(s))

/* The kernels' switches (TD_CUDA_TC_SPLIT, TD_CUDA_PDL, ...): on unless the environment variable is "0". */
static inline int td_cu_env_on(const char *name) {
    const char *e = getenv(name);
    return !(e && strcmp(e, "0") == 0);
}
/* The MLP's gate: act(g) * u, act SiLU (TD_CU_GLU_SILU: td_silu_mul's expression) or PyTorch's tanh GELU in fp32
 * (TD_CU_GLU_GELU_TANH: td_gelu_tanh_mul's order of operations). One function for the element-wise kernels and the
 * products that take act(g) * u as their activations (td_cu_matmul_glu), so both give these bits. */
__host__ __device__ __forceinline__ float td_dev_glu(float g, float u, int act) {
    if (act == TD_CU_GLU_GELU_TANH) {
        const float beta = (float)(1.41421356237309504880 * 1.12837916709551257390 * 0.5), kappa = 0.044715f;
        const float inner = beta * (g + kappa * (g * g * g));
        return (0.5f * g * (1.0f + tanhf(inner))) * u;
    }
    return (g / (1.0f + expf(-g))) * u;
}

/* The switches off by default (TD_CUDA_ATTN_DB): on only when the environment variable is "1". */
static inline int td_cu_env_set(const char *name) {
    const char *e = getenv(name);
    return e && strcmp(e, "1") == 0;
}

/* What the kernels before this one in a pass wrote, read after td_pdl_wait: td_ld_pass, or plain loads through
 * td_pass_ptr (the pointer passed through a mov the compiler cannot see into), never ld.global.nc. In a graph with
 * programmatic edges a kernel runs while the kernels before it are still writing, so their outputs are not read-only
 * over its whole life, which ld.global.nc (the read-only path a const __restrict__ pointer lets the compiler take)
 * requires: the DeltaNet by warps read stale inputs through it (--serial != --batch on qwen3.5-0.8b on the H100,
 * another result each run; NOTES "CUDA backend, part 18"). A plain load after the wait sees them: griddepcontrol.wait
 * makes the prerequisite grids' writes visible to this grid. Through the mov the compiler cannot prove the data
 * read-only; the assumption that the address is global keeps the load ld.global (else a generic ld); it stays a load
 * the compiler schedules and vectorises. On the H100 __ldca / __ldcg (inline loads) cost decode at batch 1 4-6%
 * (NOTES "CUDA backend, part 19"). PTX shows ld.global.nc only for weights and the pass's tables (uploaded before its
 * first kernel). Kernel parameters that carry a pass's data are plain const pointers, not __restrict__ (matmul_tc.cu's
 * keep it: dropping it there changes the PTX, untimed). */
#ifdef TD_CU_EMU
template <typename T> __device__ __forceinline__ const T *td_pass_ptr(const T *p) { return p; }
#else
template <typename T> __device__ __forceinline__ const T *td_pass_ptr(const T *p) {
    const T *q;
    asm("mov.b64 %0, %1;" : "=l"(q) : "l"(p));
    __builtin_assume(__isGlobal(q));
    return q;
}
#endif
template <typename T> __device__ __forceinline__ T td_ld_pass(const T *p) { return *td_pass_ptr(p); }
/* The 4 floats at q: one 16-byte load (vec: q aligned to it), else four. */
__device__ __forceinline__ float4 td_ld4(const float *q, bool vec) {
    return vec ? *(const float4 *)q : make_float4(q[0], q[1], q[2], q[3]);
}
/* The 4 values at p by td_ld_pass. */
__device__ __forceinline__ float4 td_ld_pass4(const float *p, bool vec) { return td_ld4(td_pass_ptr(p), vec); }

/* td_cu_matmul's tensor-core path (matmul_tc.cu): n (1 .. 4) products of x, every weight one td_cu_matmul_tc
 * accepts, all of the same cols; T >= 1, every n_out >= 1. xb: NULL, or x rounded to bf16 (td_cu_matmul_multi_xb).
 * defer: NULL, or (td_cu_matmul_multi_parts) where the products' partials may stay in the scratch instead of being
 * added: defer[0 .. n) describe them then, and are left as they were otherwise (the caller set them to the ys). */
int td_cu_matmul_tc_launch(const td_cu_mm *mm, int n, const float *x, const uint16_t *xb, int64_t ldx, int64_t T,
                           td_cu_parts *defer, cudaStream_t s);
/* td_cu_matmul_glu's tensor-core path: y = (act(g) * u) W^T for one product (mm[0]) with the bits of td_cu_glu then
 * td_cu_matmul_tc_launch (defer as there), g and u as gu[0] and gu[1] (td_cu_matmul_glu_parts: plain, or one
 * launch's partials), left as they were; 1 when the kernels that would run cannot gate their activations (nothing
 * launched). */
int td_cu_matmul_tc_glu(const td_cu_mm *mm, const td_cu_parts *gu, int act, int64_t T, td_cu_parts *defer,
                        cudaStream_t s);
/* td_cu_matmul_mlp's tensor-core path: down->y = (act(x wg^T) * (x wu^T)) down->w^T (xb as td_cu_matmul_tc_launch's;
 * down->n_out = down->w->rows); 1 where another path would run (nothing launched). */
int td_cu_matmul_mlp_tc(const td_cu_mm *down, const float *x, const uint16_t *xb, int64_t ldx, int64_t T,
                        const td_cu_mat *wg, const td_cu_mat *wu, int act, cudaStream_t s);

/* Blocks for a grid-stride element-wise kernel over n elements (element-wise: no reduction, so the grid's shape does
 * not matter to any value). */
static inline unsigned td_cu_grid(int64_t n, int nt) {
    int64_t b = (n + nt - 1) / nt;
    return (unsigned)(b < (1 << 20) ? b : (1 << 20));
}

/* ---- element conversions (exact towards f32; round to nearest even back, as util/half.h) ---- */

__device__ __forceinline__ float td_dev_f16(uint16_t h) { return __half2float(__ushort_as_half(h)); }

__device__ __forceinline__ float td_dev_bf16(uint16_t h) { return __uint_as_float((uint32_t)h << 16); }

/* x rounded to bf16 and back (td_f32_to_bf16: NaN stays a quiet NaN). */
__device__ __forceinline__ float td_dev_round_bf16(float f) {
    uint32_t u = __float_as_uint(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return __uint_as_float(((u >> 16) | 0x40u) << 16);
    u += 0x7fffu + ((u >> 16) & 1u);
    return __uint_as_float((u >> 16) << 16);
}

/* td_f32_to_f16, bit for bit (NaN -> sign | 0x7e00). */
__device__ __forceinline__ uint16_t td_dev_to_f16(float f) {
    uint32_t u = __float_as_uint(f);
    uint32_t sign = (u >> 16) & 0x8000u;
    uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00u);
    if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u);
    if (a < 0x38800000u) {
        if (a < 0x33000000u) return (uint16_t)sign;
        uint32_t man = (a & 0x7fffffu) | 0x800000u;
        int shift = 126 - (int)(a >> 23);
        uint32_t r = man >> shift;
        uint32_t rem = man & ((1u << shift) - 1);
        uint32_t half = 1u << (shift - 1);
        if (rem > half || (rem == half && (r & 1u))) r++;
        return (uint16_t)(sign | r);
    }
    uint32_t r = a + 0xfffu + ((a >> 13) & 1u);
    r -= 0x38000000u;
    return (uint16_t)(sign | (r >> 13));
}

/* f as a bf16 cache stores it: td_dev_round_bf16's top half, so exactly what the bf16 attention kernels make of the
 * same value read from an f32 cache. */
__device__ __forceinline__ uint16_t td_dev_to_bf16(float f) {
    return (uint16_t)(__float_as_uint(td_dev_round_bf16(f)) >> 16);
}

/* Element at of a KV cache in the format kvf (TD_CU_KV_*) set to v. */
__device__ __forceinline__ void td_dev_kv_put(void *cache, int kvf, int64_t at, float v) {
    if (kvf == TD_CU_KV_F32) ((float *)cache)[at] = v;
    else ((uint16_t *)cache)[at] = kvf == TD_CU_KV_F16 ? td_dev_to_f16(v) : td_dev_to_bf16(v);
}

/* Element k of a weight row (`row` = its first byte) as float, the header's dequantisation: F16 / BF16 exactly,
 * Q8_0 (float)q * d, Q4_0 (float)(nib - 8) * d. In two steps, so a kernel can issue its loads early and convert
 * later (the first use of a loaded value is where a warp waits for it): td_dev_weight_raw loads the element's bits
 * (for Q8_0 / Q4_0: the byte holding q, and the block's fp16 scale in the high half), td_dev_weight_cvt makes the
 * float. Block scales are read byte by byte: a Q8_0 / Q4_0 row is only 2-byte aligned (34 and 18 bytes a block).
 * F16 / BF16 rows must be 2-byte aligned, F32 rows 4-byte aligned. */
template <int TYPE> __device__ __forceinline__ uint32_t td_dev_weight_raw(const unsigned char *row, int64_t k) {
    if (TYPE == TD_DTYPE_F32) return __float_as_uint(((const float *)row)[k]);
    if (TYPE == TD_DTYPE_F16 || TYPE == TD_DTYPE_BF16) return ((const uint16_t *)row)[k];
    const int e = (int)(k % TD_QBLOCK);
    if (TYPE == TD_DTYPE_Q8_0) {
        const unsigned char *blk = row + (k / TD_QBLOCK) * TD_Q8_0_BLOCK_BYTES;
        return (uint32_t)blk[2 + e] | (uint32_t)blk[0] << 16 | (uint32_t)blk[1] << 24;
    }
    /* TD_DTYPE_Q4_0: low nibbles are elements 0-15, high nibbles 16-31 */
    const unsigned char *blk = row + (k / TD_QBLOCK) * TD_Q4_0_BLOCK_BYTES;
    return (uint32_t)blk[2 + e % (TD_QBLOCK / 2)] | (uint32_t)blk[0] << 16 | (uint32_t)blk[1] << 24;
}

template <int TYPE> __device__ __forceinline__ float td_dev_weight_cvt(uint32_t raw, int64_t k) {
    if (TYPE == TD_DTYPE_F32) return __uint_as_float(raw);
    if (TYPE == TD_DTYPE_F16) return td_dev_f16((uint16_t)raw);
    if (TYPE == TD_DTYPE_BF16) return td_dev_bf16((uint16_t)raw);
    const float d = td_dev_f16((uint16_t)(raw >> 16));
    if (TYPE == TD_DTYPE_Q8_0) return (float)(signed char)(raw & 0xffu) * d;
    const uint32_t byte = raw & 0xffu;
    const int q = (int)(k % TD_QBLOCK < TD_QBLOCK / 2 ? byte & 15u : byte >> 4);
    return (float)(q - 8) * d;
}

template <int TYPE> __device__ __forceinline__ float td_dev_weight(const unsigned char *row, int64_t k) {
    return td_dev_weight_cvt<TYPE>(td_dev_weight_raw<TYPE>(row, k), k);
}

/* RMSNorm's scale from a row's sum of squares ss (double) over n elements, 1 / sqrt(mean + eps) as the CPU computes
 * it: one expression for every kernel that norms a row or a head (rows.cu, the DeltaNet's gated norms), so all give
 * its bits. */
__device__ __forceinline__ float td_dev_rms_scale(double ss, int64_t n, float eps) {
    return (float)(1.0 / sqrt((double)(float)(ss / (double)n) + (double)eps));
}

/* ---- the wgmma operands' 128-byte swizzle (td_wg_desc, td_wg_desc_mn) ---- */

/* The byte offset of 16-byte chunk ch (0 .. 7) of row r in column block cb (64 bf16 each, every block its own tile
 * of `rows` rows of 128 bytes), and the dynamic shared memory from its first 1024-byte boundary (the swizzle's
 * address bits; the kernels ask 1 KB more for it). A K-major operand's row is an output or a token (64 k a block);
 * an MN-major one's row is a k (64 n a block). */
__device__ __forceinline__ int td_sw128(int cb, int rows, int r, int ch) {
    return cb * rows * 128 + r * 128 + ((ch ^ (r & 7)) << 4);
}
__device__ __forceinline__ unsigned char *td_align1k(unsigned char *p) {
    return p + ((1024u - (td_smem_addr(p) & 1023u)) & 1023u);
}

/* ---- a product's slice partials (td_cu_parts) ---- */

/* The product's value at p from its S slice partials, stride floats apart: P_0, then + P_s in slice order.
 * tc_fold_parts and every kernel that takes the partials instead of the folded product (the residual + norm, q/k
 * preparation, the MLP's gate, a product's staging) add them with these, so each gets the folded product's bits. */
__device__ __forceinline__ float td_dev_parts_sum(const float *p, int64_t S, int64_t stride) {
    const float *q = td_pass_ptr(p);
    float y = q[0];
#pragma unroll 4
    for (int64_t s = 1; s < S; s++) y = y + q[s * stride];
    return y;
}
/* The same for the 4 consecutive values at p (vec: 16-byte loads, p aligned to them). Four slices' loads are in
 * flight at once, then added in slice order (the sum's order unchanged): a thread that waited on each in turn spent
 * S memory latencies (tc_fold_parts: 7 us a launch for the 12 slices of a 45-token down product on the H100). */
__device__ __forceinline__ float4 td_dev_parts_sum4(const float *p, bool vec, int64_t S, int64_t stride) {
    const float *q = td_pass_ptr(p);
    float4 y = td_ld4(q, vec);
    for (int64_t s0 = 1; s0 < S; s0 += 4) {
        float4 e[4];
#pragma unroll
        for (int i = 0; i < 4; i++)
            if (s0 + i < S) e[i] = td_ld4(q + (s0 + i) * stride, vec);
#pragma unroll
        for (int i = 0; i < 4; i++)
            if (s0 + i < S) y = make_float4(y.x + e[i].x, y.y + e[i].y, y.z + e[i].z, y.w + e[i].w);
    }
    return y;
}

/* td_dev_parts_sum at the values p[STEP u], u < min(n, N) (v[u] past n untouched), all in flight at once, two
 * slices at a time: a thread that summed them one value at a time waited each value's loads in turn, and when it
 * stored each sum before the next value's loads (x += y, where the compiler cannot rule out that x is y) a memory
 * round trip more each. */
template <int N, int STEP>
__device__ __forceinline__ void td_dev_parts_sums(float (&v)[N], const float *p, int64_t S, int64_t stride, int n) {
    const float *q = td_pass_ptr(p);
#pragma unroll
    for (int u = 0; u < N; u++)
        if (u < n) v[u] = q[u * STEP];
    for (int64_t s0 = 1; s0 < S; s0 += 2) {
        float e[2][N];
#pragma unroll
        for (int j = 0; j < 2; j++)
#pragma unroll
            for (int u = 0; u < N; u++)
                if (s0 + j < S && u < n) e[j][u] = q[(s0 + j) * stride + u * STEP];
#pragma unroll
        for (int j = 0; j < 2; j++)
#pragma unroll
            for (int u = 0; u < N; u++)
                if (s0 + j < S && u < n) v[u] = v[u] + e[j][u];
    }
}

/* ---- fixed-tree block reductions ---- */

struct td_dev_add {
    template <typename T> __device__ __forceinline__ T operator()(T a, T b) const { return a + b; }
};
struct td_dev_max {
    __device__ __forceinline__ float operator()(float a, float b) const { return fmaxf(a, b); }
};

/* op over the warp's 32 values by halving strides 16, 8, 4, 2, 1: lane 0 holds the result. */
template <typename T, typename Op> __device__ __forceinline__ T td_dev_warp_reduce(T v, Op op) {
#pragma unroll
    for (int s = 16; s > 0; s >>= 1) v = op(v, __shfl_down_sync(0xffffffffu, v, s));
    return v;
}

/* op over the NT threads of the block, the same fixed tree for every call (each warp, then warp 0 over the warps'
 * results, `identity` filling the lanes beyond NT / 32); every thread gets it. sh holds NT / 32 + 1 values; all
 * threads must call (it synchronises the block, also before returning, so sh can be reused). */
template <int NT, typename T, typename Op>
__device__ __forceinline__ T td_dev_block_reduce(T v, T *sh, T identity, Op op) {
    static_assert(NT % 32 == 0 && NT <= 1024, "block of whole warps");
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    v = td_dev_warp_reduce(v, op);
    if (lane == 0) sh[warp] = v;
    __syncthreads();
    if (warp == 0) {
        v = lane < NT / 32 ? sh[lane] : identity;
        v = td_dev_warp_reduce(v, op);
        if (lane == 0) sh[NT / 32] = v;
    }
    __syncthreads();
    T r = sh[NT / 32];
    __syncthreads();
    return r;
}

/* A double and two float sums over the block at once, each by td_dev_block_sum's tree (so its bits), one set of
 * barriers for the three. shd holds NT / 32 + 1 doubles, shf 2 (NT / 32 + 1) floats. */
template <int NT>
__device__ __forceinline__ void td_dev_block_sum3(double &d, float &a, float &b, double *shd, float *shf) {
    constexpr int W = NT / 32;
    static_assert(NT % 32 == 0 && NT <= 1024, "block of whole warps");
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    d = td_dev_warp_reduce(d, td_dev_add());
    a = td_dev_warp_reduce(a, td_dev_add());
    b = td_dev_warp_reduce(b, td_dev_add());
    if (lane == 0) shd[warp] = d, shf[warp] = a, shf[W + 1 + warp] = b;
    __syncthreads();
    if (warp == 0) {
        double e = lane < W ? shd[lane] : 0.0;
        float x = lane < W ? shf[lane] : 0.0f, y = lane < W ? shf[W + 1 + lane] : 0.0f;
        e = td_dev_warp_reduce(e, td_dev_add());
        x = td_dev_warp_reduce(x, td_dev_add());
        y = td_dev_warp_reduce(y, td_dev_add());
        if (lane == 0) shd[W] = e, shf[W] = x, shf[2 * W + 1] = y;
    }
    __syncthreads();
    d = shd[W], a = shf[W], b = shf[2 * W + 1];
    __syncthreads();
}

/* The sum over the block (float or double), and the maximum (exact in any order), by td_dev_block_reduce's tree. */
template <int NT, typename T> __device__ __forceinline__ T td_dev_block_sum(T v, T *sh) {
    return td_dev_block_reduce<NT>(v, sh, (T)0, td_dev_add());
}
template <int NT> __device__ __forceinline__ float td_dev_block_max(float v, float *sh) {
    return td_dev_block_reduce<NT>(v, sh, -INFINITY, td_dev_max());
}

#endif
