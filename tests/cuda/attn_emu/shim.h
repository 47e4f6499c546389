// tests/cuda/attn_emu: host emulation of what attention.cu's kernels use: one block at a time, a std::thread per CUDA
// thread, std::barrier for __syncthreads and the warp collectives (shuffles, ldmatrix with and without .trans,
// mma.sync m16n8k16 by its PTX fragment layouts; the mma's arithmetic replaced by an fp32 fmaf chain over k, a
// function of its own A row, B column and C element as the hardware's is). It checks where every value goes, not
// the device's arithmetic, timing or races: test_cuda_attn_bf16 on the GPU is the real check.
#pragma once
#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <stdint.h>
#define __device__
#define __global__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __align__(n) __attribute__((aligned(n)))
struct dim3v { unsigned x = 0, y = 0, z = 0; };
extern thread_local dim3v threadIdx, blockIdx;
struct alignas(16) uint4 { uint32_t x, y, z, w; };
inline uint4 make_uint4(uint32_t a, uint32_t b, uint32_t c, uint32_t d) { return uint4{a, b, c, d}; }
inline int min(int a, int b) { return a < b ? a : b; }
inline int max(int a, int b) { return a > b ? a : b; }
inline uint32_t __float_as_uint(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
inline float __uint_as_float(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
inline float td_dev_f16(uint16_t h) { // exact
    const int s = h >> 15, e = (h >> 10) & 31, m = h & 1023;
    float v = e == 0 ? ldexpf((float)m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexpf((float)(m | 1024), e - 25);
    return s ? -v : v;
}
inline float td_dev_bf16(uint16_t h) { return __uint_as_float((uint32_t)h << 16); }
inline float td_dev_round_bf16(float f) {
    uint32_t u = __float_as_uint(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return __uint_as_float(((u >> 16) | 0x40u) << 16);
    u += 0x7fffu + ((u >> 16) & 1u);
    return __uint_as_float((u >> 16) << 16);
}
extern unsigned char *g_dyn_smem;
extern std::barrier<> *g_block_bar;
extern std::barrier<> *g_warp_bar[32];
inline void __syncthreads() { g_block_bar->arrive_and_wait(); }
inline void __syncwarp() { g_warp_bar[threadIdx.x / 32]->arrive_and_wait(); }
struct warp_x { const void *addr[32]; uint32_t a[32][4], b[32][2]; float f[32]; };
extern warp_x g_wx[32];
inline float shfl_(float v, int src_of_lane_xor, int mode) { // mode 0: xor, 1: down
    int lane = threadIdx.x & 31, w = threadIdx.x / 32;
    g_wx[w].f[lane] = v;
    __syncwarp();
    int src = mode == 0 ? lane ^ src_of_lane_xor : (lane + src_of_lane_xor < 32 ? lane + src_of_lane_xor : lane);
    float r = g_wx[w].f[src];
    __syncwarp();
    return r;
}
inline float __shfl_xor_sync(unsigned, float v, int m) { return shfl_(v, m, 0); }
inline float __shfl_down_sync(unsigned, float v, int d) { return shfl_(v, d, 1); }
inline void prefetch_l2(const void *) {}
// ldmatrix x4: lane l gives the address of row l % 8 of matrix l / 8; without .trans lane 4g + q gets row g,
// columns 2q, 2q + 1 of each matrix; with .trans rows 2q, 2q + 1 of column g.
inline void ldsm_(uint32_t (&r)[4], const void *row, bool trans) {
    int lane = threadIdx.x & 31, w = threadIdx.x / 32;
    if (((uintptr_t)row & 15) != 0) { fprintf(stderr, "ldmatrix: row address not 16-byte aligned\n"); abort(); }
    g_wx[w].addr[lane] = row;
    __syncwarp();
    int g = lane / 4, q = lane % 4;
    for (int m = 0; m < 4; m++) {
        uint16_t lo, hi;
        if (!trans) {
            const uint16_t *p = (const uint16_t *)g_wx[w].addr[8 * m + g];
            lo = p[2 * q], hi = p[2 * q + 1];
        } else {
            lo = ((const uint16_t *)g_wx[w].addr[8 * m + 2 * q])[g];
            hi = ((const uint16_t *)g_wx[w].addr[8 * m + 2 * q + 1])[g];
        }
        r[m] = (uint32_t)lo | (uint32_t)hi << 16;
    }
    __syncwarp();
}
inline void ab_ldsm_x4(uint32_t (&r)[4], const void *row) { ldsm_(r, row, false); }
inline void ab_ldsm_x4_t(uint32_t (&r)[4], const void *row) { ldsm_(r, row, true); }
static inline float lo_(uint32_t v) { return td_dev_bf16((uint16_t)(v & 0xffff)); }
static inline float hi_(uint32_t v) { return td_dev_bf16((uint16_t)(v >> 16)); }
// D = A B + C, m16n8k16: A row-major (a0: row g, k 2q..; a1: row g + 8; a2: row g, k 8 + 2q..; a3: row g + 8, k 8 +
// 2q..), B col-major (b0: k 2q, 2q + 1 of column g; b1: k 8 + 2q ..), D: rows g, g + 8, columns 2q, 2q + 1.
inline void ab_mma(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    int lane = threadIdx.x & 31, w = threadIdx.x / 32;
    warp_x &X = g_wx[w];
    for (int i = 0; i < 4; i++) X.a[lane][i] = a[i];
    X.b[lane][0] = b0, X.b[lane][1] = b1;
    __syncwarp();
    auto A = [&](int i, int k) {
        int g = i & 7, hiRow = i >> 3, q = (k & 7) >> 1, hiK = k >> 3;
        uint32_t v = X.a[g * 4 + q][hiRow + 2 * hiK];
        return (k & 1) ? hi_(v) : lo_(v);
    };
    auto B = [&](int k, int j) {
        int q = (k & 7) >> 1, hiK = k >> 3;
        uint32_t v = X.b[j * 4 + q][hiK];
        return (k & 1) ? hi_(v) : lo_(v);
    };
    int g = lane >> 2, q = lane & 3;
    float out[4];
    for (int c = 0; c < 4; c++) {
        int i = g + (c >> 1) * 8, j = 2 * q + (c & 1);
        float acc = d[c];
        for (int k = 0; k < 16; k++) acc = fmaf(A(i, k), B(k, j), acc);
        out[c] = acc;
    }
    __syncwarp();
    for (int c = 0; c < 4; c++) d[c] = out[c];
}
