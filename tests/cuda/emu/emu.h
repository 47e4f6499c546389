// tests/cuda/emu: the kernels of src/kernels/cuda/matmul_tc.cu, attention.cu, deltanet*.cu and rows.cu run on the
// CPU, compiled by g++ from the .cu files themselves (no CUDA toolkit, no Python): this header stands in for the CUDA
// headers
// (cuda_runtime.h, cuda_fp16.h and cuda_bf16.h here include it) and kernels/cuda/ptx.cuh here for the kernels' inline
// PTX, both found before src/ by the -I order; -DTD_CU_EMU leaves the .cu files' host side out.
//
// What is emulated: one block at a time, a fiber (ucontext, all on one OS thread, switched only at barriers) per CUDA
// thread; a barrier for __syncthreads and one per warp for __syncwarp and every warp collective (shuffles; ldmatrix
// with and without .trans and mma.sync m16n8k16 by their PTX fragment layouts, the mma's arithmetic an fp32 fmaf chain
// over k, a function of its own A row, B column and C element as the hardware's is); cp.async as late as PTX allows (a
// thread's copies wait in their commit group until a wait_group lets at most n groups stay pending, so a stage read
// before its wait reads stale data, and copies never waited for are counted as failures); wgmma m64nNk16 likewise
// (it reads shared memory through its descriptors, 128-byte swizzle, at the wait_group that covers it; a cp.async
// into the lines of a pending wgmma is counted as a hazard); __shared__ variables are
// function statics (one block at a time), the dynamic shared memory a buffer poisoned before each block;
// griddepcontrol.wait with the inputs the kernels before write (as a test names them) poisoned in each block until
// every thread is at the wait (td_emu_pdl_inputs below). What it cannot
// see: the device's arithmetic (the mma's own rounding), timing, races between threads of a block (the barriers order
// everything), bank conflicts, registers: it checks where every value is routed. test_cuda_matmul_tc and
// test_cuda_attn_bf16 on the GPU are the real checks.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <memory>
#include <stdint.h>
#include <vector>

#define __host__
#define __device__
#define __global__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static
#define __align__(n) __attribute__((aligned(n)))
#define __grid_constant__

// The driver's tensor map (cuda.h): 128 opaque bytes; the emulated td_tma_map keeps its own fields there.
struct alignas(128) CUtensorMap {
    uint64_t opaque[16];
};

typedef int cudaError_t;
typedef struct td_emu_stream *cudaStream_t;

struct dim3v {
    unsigned x = 0, y = 0, z = 0;
};
extern dim3v threadIdx, blockIdx; // the running fiber's
extern dim3v gridDim, blockDim;   // the launch's

struct alignas(8) float2 {
    float x, y;
};
struct alignas(16) float4 {
    float x, y, z, w;
};
struct alignas(8) uint2 {
    uint32_t x, y;
};
struct alignas(16) uint4 {
    uint32_t x, y, z, w;
};
inline float2 make_float2(float a, float b) { return float2{a, b}; }
inline float4 make_float4(float a, float b, float c, float d) { return float4{a, b, c, d}; }
inline uint2 make_uint2(uint32_t a, uint32_t b) { return uint2{a, b}; }
inline uint4 make_uint4(uint32_t a, uint32_t b, uint32_t c, uint32_t d) { return uint4{a, b, c, d}; }
inline int min(int a, int b) { return a < b ? a : b; }
inline int max(int a, int b) { return a > b ? a : b; }
inline uint32_t __float_as_uint(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}
inline float __uint_as_float(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}
struct __half {
    uint16_t x;
};
inline __half __ushort_as_half(uint16_t h) { return __half{h}; }
inline float __half2float(__half h) { // exact
    const int s = h.x >> 15, e = (h.x >> 10) & 31, m = h.x & 1023;
    float v = e == 0 ? ldexpf((float)m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexpf((float)(m | 1024), e - 25);
    return s ? -v : v;
}

// ---- the block being run (emu.cpp) ----
extern unsigned char *td_emu_smem;      // the dynamic shared memory
extern unsigned char *td_emu_smem_origin; // address 0 of the shared window (1024-byte aligned)
struct td_emu_bar { // a barrier of `need` fibers
    int need, arrived;
    unsigned gen;
};
void td_emu_wait(td_emu_bar &b);        // arrive, run the other fibers until all `need` have arrived
extern td_emu_bar td_emu_block_bar;      // __syncthreads
extern td_emu_bar td_emu_warp_bar[32];   // __syncwarp and the warp collectives
struct td_emu_warp { // a warp's exchange area for its collectives
    const void *addr[32];
    uint32_t a[32][4], b[32][2];
    double v[32];
};
extern td_emu_warp td_emu_wx[32];
inline void __syncthreads() { td_emu_wait(td_emu_block_bar); }
// the block's OR of p (a third barrier: no thread clears the OR before every thread has read it)
inline int __syncthreads_or(int p) {
    static int any;
    if (p) any = 1;
    __syncthreads();
    const int r = any;
    __syncthreads();
    if (threadIdx.x == 0) any = 0;
    __syncthreads();
    return r;
}
// one OS thread: atomic by construction
inline unsigned long long atomicMin(unsigned long long *a, unsigned long long v) {
    const unsigned long long old = *a;
    if (v < old) *a = v;
    return old;
}
inline void __syncwarp(unsigned = 0xffffffffu) { td_emu_wait(td_emu_warp_bar[threadIdx.x / 32]); }

// Programmatic dependent launch: on the GPU a kernel runs up to its griddepcontrol.wait (td_pdl_wait) while the
// kernels before it still run, so what it reads before the wait must be something no kernel of a pass writes. A
// test names the buffers the kernels before a launch write (a td_emu_pdl_inputs in scope); then each block of the
// launch starts with them poisoned (0xff bytes: NaN floats and bf16, -1 ints; their contents kept aside) and gets
// their contents back once every thread of the block has reached its td_pdl_wait or ended. A read before the wait of
// one of them sees the poison, and the outputs differ. (A block whose threads all leave before waiting gets them
// back at its end.)
struct td_emu_buf {
    void *p;
    size_t bytes;
};
extern std::vector<td_emu_buf> td_emu_produced;
void td_emu_pdl_wait(); // the emulated griddepcontrol.wait (kernels/cuda/ptx.cuh)
struct td_emu_pdl_inputs {
    explicit td_emu_pdl_inputs(std::vector<td_emu_buf> b) { td_emu_produced = std::move(b); }
    ~td_emu_pdl_inputs() { td_emu_produced.clear(); }
    td_emu_pdl_inputs(const td_emu_pdl_inputs &) = delete;
    td_emu_pdl_inputs &operator=(const td_emu_pdl_inputs &) = delete;
};
// A test's buffer as such an input (const too: its contents are back before any read after the wait).
template <typename T> td_emu_buf td_emu_in(const std::vector<T> &v) {
    return td_emu_buf{(void *)v.data(), v.size() * sizeof(T)};
}

// The selftest's mutations (emu.cpp): td_emu_mutation names one, and it applies while td_emu_active is set (main
// sets it around the launches of the new kernels only, so old and new must then differ).
enum { TD_EMU_MUT_NONE, TD_EMU_MUT_LDSM, TD_EMU_MUT_MMA, TD_EMU_MUT_WAIT, TD_EMU_MUT_SHFL, TD_EMU_MUT_PDL };
extern int td_emu_mutation;
extern bool td_emu_active;
inline bool td_emu_mut(int m) { return td_emu_active && td_emu_mutation == m; }

// shuffles (mutation SHFL: an xor partner one lane off)
template <typename T> inline T td_emu_shfl(T v, int src) {
    const int lane = threadIdx.x & 31, w = threadIdx.x / 32;
    static_assert(sizeof(T) <= sizeof(double), "shuffle of a scalar");
    memcpy(&td_emu_wx[w].v[lane], &v, sizeof(T));
    __syncwarp();
    T r;
    memcpy(&r, &td_emu_wx[w].v[src], sizeof(T));
    __syncwarp();
    return r;
}
template <typename T> inline T __shfl_xor_sync(unsigned, T v, int m) {
    if (td_emu_mut(TD_EMU_MUT_SHFL)) m ^= 1;
    return td_emu_shfl(v, (int)(threadIdx.x & 31) ^ (m & 31));
}
template <typename T> inline T __shfl_sync(unsigned, T v, int src) { // (mutation SHFL: the next lane's)
    if (td_emu_mut(TD_EMU_MUT_SHFL)) src += 1;
    return td_emu_shfl(v, src & 31);
}
template <typename T> inline T __shfl_down_sync(unsigned, T v, int d) {
    const int lane = threadIdx.x & 31;
    return td_emu_shfl(v, lane + d < 32 ? lane + d : lane);
}

// cp.async copies (and wgmma) a thread issued and never waited for (a failure; emu.cpp counts them at a thread's end)
struct td_emu_cp {
    void *dst;
    const void *src;
};
// a wgmma issued and not yet executed: the thread's accumulators and the operands' descriptors
struct td_emu_wg {
    float *d;
    uint64_t da, db;
    int n;       // N of m64nNk16
    uint64_t id; // the op's number (the pending lines it reads are kept by it)
    bool rt;     // A from registers (ar: the thread's rows g, g + 8 over the 16 k) and B MN-major (td_wgmma_bf16_rt64)
    uint16_t ar[2][16];
};
struct td_emu_cps {
    std::vector<td_emu_cp> open;               // not yet committed
    std::deque<std::vector<td_emu_cp>> groups; // committed, oldest first
    std::vector<td_emu_wg> wg_open;            // wgmma, as the cp.async copies
    std::deque<std::vector<td_emu_wg>> wg_groups;
};
extern td_emu_cps *td_emu_cpq; // the running fiber's

// mbarriers (kernels/cuda/ptx.cuh): a fiber that waits for a phase gives the scheduler its turn (td_emu_yield) until
// the phase completes; phases completed count as the scheduler's progress (a pass with none is a deadlock). The
// copies of a cp.async.mbarrier.arrive land, and then arrive, only when some fiber waits on that barrier and its
// phase is not complete otherwise (as late as PTX allows); so do the bulk tensor copies (land: the copy, counting
// tx bytes on the barrier instead of an arrival); those never landed by a block's end are counted as copies never
// waited for.
void td_emu_yield();
extern unsigned td_emu_progress;
struct td_emu_deferred {
    uint64_t *bar;
    std::vector<td_emu_cp> cps;
    std::function<void()> land; // a bulk tensor copy (cps empty)
    unsigned tx = 0;            // ... and its bytes
};
extern std::vector<td_emu_deferred> td_emu_mbar_deferred;

// bf16 for the tests (round to nearest even; NaN stays a quiet NaN)
inline uint16_t td_emu_f2bf(float f) {
    uint32_t u = __float_as_uint(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}
inline float td_emu_bf2f(uint16_t h) { return __uint_as_float((uint32_t)h << 16); }

// Runs body() as a gx x gy x gz grid of blocks of nt threads, one block at a time, the dynamic shared memory (dyn
// bytes, 16-byte aligned) filled with `poison` before each block. Returns the cp.async copies never waited for.
int64_t td_emu_launch(unsigned gx, unsigned gy, unsigned gz, int nt, size_t dyn, int poison, void (*body)(void *),
                      void *arg);
template <typename F>
int64_t td_emu_run(unsigned gx, unsigned gy, unsigned gz, int nt, size_t dyn, int poison, bool is_new, F body) {
    td_emu_active = is_new;
    const int64_t left = td_emu_launch(gx, gy, gz, nt, dyn, poison, [](void *f) { (*(F *)f)(); }, &body);
    td_emu_active = false;
    return left;
}
