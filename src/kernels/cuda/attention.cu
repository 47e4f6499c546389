/* Softmax attention over the KV cache (td_cu_attention): online softmax over fixed chunks of positions.
 *
 * Shape: one block of 128 threads per (token, query head); positions 0..pos[t] in chunks of 128, thread i scoring
 * position p0 + i (its key and value rows prefetched into L2 when the chunk starts). A chunk's keys are staged in
 * shared memory 32 elements at a time; each thread carries its score chain acc = fmaf(q[e], k[e], acc), e ascending,
 * across the slices; s = scale * acc. Then the chunk's max and its exp-sum (p = expf(s - M'), M' the running max) by
 * fixed trees; the running sum and the value accumulators are rescaled by alpha = expf(M - M'); thread e (and
 * e + 128, ...) sums p_i * v_i[e] over the chunk's positions in order (fmaf, 32 value loads in flight at a time),
 * then acc[e] = acc[e] * alpha + that. Finally out[e] = acc[e] / L.
 * Batch invariance: a block reads only its own query, its own sequence's cell list up to pos[t], and the cache rows
 * those cells name; the chunking, trees and orders depend on pos[t] (and hd) alone, never on T, on the other tokens
 * of the launch or on where the cells lie. */
#include "kernels/cuda/common.cuh"

#define AT_NT 128                     /* threads; also positions per chunk */
#define AT_E 32                       /* key elements per shared-memory slice */
#define AT_MAXHD 1024                 /* TD_MAX_HEAD_DIM */
#define AT_VB 32                      /* value rows whose loads are in flight together */
#define AT_KPT (AT_NT * AT_E / AT_NT) /* key elements a thread stages per slice (rows tid / 32 + 4u): 32 */

template <int F16> __device__ __forceinline__ float kv_at(const void *base, int64_t i) {
    if (F16) return td_dev_f16(((const uint16_t *)base)[i]);
    return ((const float *)base)[i];
}

__device__ __forceinline__ void prefetch_l2(const void *p) { asm volatile("prefetch.global.L2 [%0];" ::"l"(p)); }

template <int F16>
__global__ void __launch_bounds__(AT_NT)
    attention_kernel(float *__restrict__ out, int64_t ldo, const float *__restrict__ q, int64_t ldq,
                     int64_t q_head_stride, const void *__restrict__ kc, const void *__restrict__ vc, int64_t kv_dim,
                     const int32_t *__restrict__ cells, int64_t n_ctx, const int32_t *__restrict__ seq,
                     const int32_t *__restrict__ pos, int64_t Hq, int64_t group, int64_t hd, float scale,
                     int64_t window) {
    __shared__ float qs[AT_MAXHD], acc[AT_MAXHD]; /* acc[e]: thread e % AT_NT's alone */
    __shared__ float ks[AT_NT][AT_E + 1]; /* +1: thread i reads row i, conflict-free */
    __shared__ float ps[AT_NT];
    __shared__ int32_t cl[AT_NT];
    __shared__ float red[AT_NT / 32 + 1];
    const int tid = threadIdx.x;
    const int64_t t = blockIdx.x / Hq, h = blockIdx.x % Hq, kvo = (h / group) * hd;
    const int64_t n = (int64_t)pos[t] + 1, lo = window > 0 && n > window ? n - window : 0; /* the window's first */
    const int32_t *cell = cells + (int64_t)seq[t] * n_ctx;
    const float *qh = q + t * ldq + h * q_head_stride;
    for (int64_t e = tid; e < hd; e += AT_NT) qs[e] = qh[e], acc[e] = 0.0f;

    float M = -INFINITY, L = 0.0f;

    for (int64_t p0 = lo; p0 < n; p0 += AT_NT) { /* chunks from the row's own first position: its order alone */
        const int nc = n - p0 < AT_NT ? (int)(n - p0) : AT_NT;
        if (tid < nc) {
            const int32_t c = cell[p0 + tid];
            cl[tid] = c;
            /* this position's key and value rows into L2 now: the slices below then wait on L2, not DRAM */
            const size_t es = F16 ? 2 : 4, at = ((size_t)c * (size_t)kv_dim + (size_t)kvo) * es;
            for (size_t b = 0; b < (size_t)hd * es; b += 128) {
                prefetch_l2((const char *)kc + at + b);
                prefetch_l2((const char *)vc + at + b);
            }
        }
        __syncthreads();
        /* scores */
        float dot = 0.0f;
        for (int64_t e0 = 0; e0 < hd; e0 += AT_E) {
            const int ne = hd - e0 < AT_E ? (int)(hd - e0) : AT_E;
            { /* element e = tid % 32 of rows tid / 32 + 4u: all loads in flight, then the stores */
                const int e = tid % AT_E, r0 = tid / AT_E;
                float kr[AT_KPT];
#pragma unroll
                for (int u = 0; u < AT_KPT; u++) {
                    const int r = r0 + (AT_NT / AT_E) * u;
                    kr[u] = r < nc && e < ne ? kv_at<F16>(kc, (int64_t)cl[r] * kv_dim + kvo + e0 + e) : 0.0f;
                }
#pragma unroll
                for (int u = 0; u < AT_KPT; u++) ks[r0 + (AT_NT / AT_E) * u][e] = kr[u];
            }
            __syncthreads();
            if (tid < nc)
                for (int e = 0; e < ne; e++) dot = fmaf(qs[e0 + e], ks[tid][e], dot);
            __syncthreads();
        }
        const float s = tid < nc ? scale * dot : -INFINITY;
        /* the chunk's max and exp-sum, fixed trees */
        const float Mn = fmaxf(M, td_dev_block_max<AT_NT>(s, red));
        const float p = tid < nc ? expf(s - Mn) : 0.0f;
        ps[tid] = p;
        const float lc = td_dev_block_sum<AT_NT>(p, red); /* its barriers also publish ps */
        const float alpha = expf(M - Mn);                  /* 0 for the first chunk (M = -inf), 1 when M = Mn */
        L = L * alpha + lc;
        /* values: thread owns e = tid, tid + AT_NT, ... */
        for (int64_t e = tid; e < hd; e += AT_NT) {
            const int64_t off = kvo + e;
            float part = 0.0f;
            for (int i0 = 0; i0 < nc; i0 += AT_VB) { /* AT_VB loads in flight, then the chain, i ascending */
                float vr[AT_VB];
#pragma unroll
                for (int u = 0; u < AT_VB; u++)
                    vr[u] = i0 + u < nc ? kv_at<F16>(vc, (int64_t)cl[i0 + u] * kv_dim + off) : 0.0f;
#pragma unroll
                for (int u = 0; u < AT_VB; u++)
                    if (i0 + u < nc) part = fmaf(ps[i0 + u], vr[u], part);
            }
            acc[e] = acc[e] * alpha + part;
        }
        M = Mn;
        __syncthreads(); /* cl and ps are rewritten by the next chunk */
    }
    float *oh = out + t * ldo + h * hd;
    for (int64_t e = tid; e < hd; e += AT_NT) oh[e] = acc[e] / L;
}

extern "C" int td_cu_attention(float *out, int64_t ldo, const float *q, int64_t ldq, int64_t q_head_stride,
                               const void *kc, const void *vc, int f16, int64_t kv_dim, const int32_t *cells,
                               int64_t n_ctx, const int32_t *seq, const int32_t *pos, int64_t T, int64_t Hq,
                               int64_t Hkv, int64_t hd, float scale, int64_t window, void *stream) {
    if (T <= 0 || Hq <= 0) return 0;
    if (Hkv <= 0 || Hq % Hkv)
        return td_cu_failf("td_cu_attention: %lld query heads over %lld KV heads", (long long)Hq, (long long)Hkv);
    if (hd <= 0 || hd > AT_MAXHD)
        return td_cu_failf("td_cu_attention: head dim %lld (1 .. %d)", (long long)hd, AT_MAXHD);
    if (T * Hq > 0x7fffffff)
        return td_cu_failf("td_cu_attention: %lld tokens x %lld heads is beyond one launch", (long long)T,
                           (long long)Hq);
    unsigned grid = (unsigned)(T * Hq);
    cudaStream_t s = TD_CU_STREAM(stream);
    if (f16)
        attention_kernel<1><<<grid, AT_NT, 0, s>>>(out, ldo, q, ldq, q_head_stride, kc, vc, kv_dim, cells, n_ctx, seq,
                                                   pos, Hq, Hq / Hkv, hd, scale, window);
    else
        attention_kernel<0><<<grid, AT_NT, 0, s>>>(out, ldo, q, ldq, q_head_stride, kc, vc, kv_dim, cells, n_ctx, seq,
                                                   pos, Hq, Hq / Hkv, hd, scale, window);
    return td_cu_launched("attention");
}
