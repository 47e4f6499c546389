// tests/cuda/tc_emu: host emulation of the few CUDA features matmul_tc.cu's kernels use: one block at a time, a
// std::thread per CUDA thread, std::barrier for __syncthreads / __syncwarp, and the warp-collective ldmatrix / mma.sync
// by the PTX fragment layouts (the mma itself replaced by a fixed fp32 fma chain: any function of its own A row, B
// column and C element serves to check that old and new kernels route the same data to the same places).
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
#define __shared__ static
#define __align__(n) __attribute__((aligned(n)))
struct dim3v {
    unsigned x = 0, y = 0, z = 0;
};
extern thread_local dim3v threadIdx, blockIdx;
struct float2 {
    float x, y;
};
struct alignas(16) float4 {
    float x, y, z, w;
};
struct uint2 {
    uint32_t x, y;
};
inline float4 make_float4(float a, float b, float c, float d) { return float4{a, b, c, d}; }
inline uint2 make_uint2(uint32_t a, uint32_t b) { return uint2{a, b}; }
extern unsigned char *g_dyn_smem;
extern std::barrier<> *g_block_bar;
extern std::barrier<> *g_warp_bar[32];
inline void __syncthreads() { g_block_bar->arrive_and_wait(); }
inline void __syncwarp() { g_warp_bar[threadIdx.x / 32]->arrive_and_wait(); }
// warp exchange areas
struct warp_x {
    const void *addr[32];
    uint32_t a[32][4], b[32][2];
    float c[32][4];
};
extern warp_x g_wx[32];
static inline uint16_t f2bf(float f) { // round to nearest even (no NaN in tests)
    uint32_t u;
    memcpy(&u, &f, 4);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}
static inline float bf2f(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}
inline uint32_t tc_pack(float lo, float hi) { return (uint32_t)f2bf(lo) | (uint32_t)f2bf(hi) << 16; }
// cp.async as late as the PTX allows: a thread's copies wait in their commit group until a wait_group lets at most
// n groups stay pending, so a kernel that reads a buffer before waiting for it reads the emulator's stale poison.
#include <deque>
#include <vector>
struct cp_op {
    void *dst;
    const void *src;
};
extern thread_local std::vector<cp_op> cp_open;               // not yet committed
extern thread_local std::deque<std::vector<cp_op>> cp_groups; // committed, oldest first
inline void tc_cp16(void *smem, const void *g) {
    if (((uintptr_t)smem & 15) || ((uintptr_t)g & 15)) {
        fprintf(stderr, "cp.async: address not 16-byte aligned\n");
        abort();
    }
    cp_open.push_back(cp_op{smem, g});
}
inline void tc_cp_commit(void) { cp_groups.push_back(cp_open), cp_open.clear(); }
inline void tc_cp_wait_n(int n) {
    while ((int)cp_groups.size() > n) {
        for (const cp_op &o : cp_groups.front())
            memcpy(o.dst, o.src, 16);
        cp_groups.pop_front();
    }
}
inline void tc_cp_wait_all(void) { tc_cp_wait_n(0); }
inline void tc_cp_wait_one(void) { tc_cp_wait_n(1); }
inline void tc_ldmatrix_x4(uint32_t (&r)[4], const void *row) {
    int lane = threadIdx.x & 31, w = threadIdx.x / 32;
    if (((uintptr_t)row & 15) != 0) {
        fprintf(stderr, "ldmatrix: row address not 16-byte aligned\n");
        abort();
    }
    g_wx[w].addr[lane] = row;
    __syncwarp();
    for (int m = 0; m < 4; m++) {
        const unsigned char *p = (const unsigned char *)g_wx[w].addr[8 * m + lane / 4];
        memcpy(&r[m], p + 4 * (lane % 4), 4);
    }
    __syncwarp();
}
static inline float lo_(uint32_t v) { return bf2f((uint16_t)(v & 0xffff)); }
static inline float hi_(uint32_t v) { return bf2f((uint16_t)(v >> 16)); }
// A[i][k]: i 0..15, k 0..15 from lanes' a regs; B[k][j]: j 0..7
inline void tc_mma(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0, uint32_t b1) {
    int lane = threadIdx.x & 31, w = threadIdx.x / 32;
    warp_x &X = g_wx[w];
    X.a[lane][0] = a0, X.a[lane][1] = a1, X.a[lane][2] = a2, X.a[lane][3] = a3, X.b[lane][0] = b0, X.b[lane][1] = b1;
    __syncwarp();
    auto A = [&](int i, int k) { // row i, col k
        int g = i & 7, hiRow = i >> 3, q = (k & 7) >> 1, hiK = k >> 3, ln = g * 4 + q;
        uint32_t v = X.a[ln][hiRow + 2 * hiK];
        return (k & 1) ? hi_(v) : lo_(v);
    };
    auto B = [&](int k, int j) { // k row, col j
        int q = (k & 7) >> 1, hiK = k >> 3, ln = j * 4 + q;
        uint32_t v = X.b[ln][hiK];
        return (k & 1) ? hi_(v) : lo_(v);
    };
    int g = lane >> 2, q = lane & 3;
    float out[4];
    for (int c = 0; c < 4; c++) {
        int i = g + (c >> 1) * 8, j = 2 * q + (c & 1);
        float acc = d[c];
        for (int k = 0; k < 16; k++)
            acc = fmaf(A(i, k), B(k, j), acc);
        out[c] = acc;
    }
    __syncwarp();
    for (int c = 0; c < 4; c++)
        d[c] = out[c];
}
