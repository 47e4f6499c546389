// What a decode step's shape costs on this GPU before any of our kernels' own work: a model, not the engine.
// Qwen3-0.6B's step is 28 layers of four weight products (q/k/v 4096 x 1024, o 1024 x 2048, gate/up 6144 x 1024,
// down 1024 x 3072; bf16) and four small row kernels (q/k preparation, attention, two residual + norm), then the head
// (151,936 x 1024). Here each product is a plain bf16 GEMV (a warp a few rows, every weight load issued before
// griddepcontrol.wait, as our products prefetch theirs) and each small kernel one block that reads, reduces and writes
// a 1024-float row. Every schedule is recorded once as a CUDA graph and replayed; each layer reads its own weights
// (1.2 GB a step, far past L2), as the model does. Schedules:
//   full       the step's 8 kernels a layer + the head, programmatic edges, each kernel letting the next launch
//              once all its blocks have begun (the engine's graphs: TD_CUDA_PDL)
//   full_late  the same, the next launching as this one's blocks end
//   full_plain the same with plain edges (a kernel starts when the one before has ended)
//   products   the 4 products a layer + the head alone (as `full`): the step if every small kernel were folded away
//   copy       one kernel reading the same 1.2 GB: the bandwidth floor
//   empty      as many empty kernels as `full` launches (as `full`): the launch chain's floor
// Prints one JSON object: ms per step (median of REPS replays) and tokens/s for each schedule. With a second argument
// "once": `full` recorded and replayed once, untimed (for ncu: each kernel's own duration).
// Build and run (on the device): nvcc -O3 -arch=sm_90a -o /tmp/floor bench/cuda_launch_floor.cu && /tmp/floor [REPS]
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#define CK(e)                                                                                  \
    do {                                                                                       \
        cudaError_t err_ = (e);                                                                \
        if (err_ != cudaSuccess) {                                                             \
            fprintf(stderr, "cuda_launch_floor: %s: %s\n", #e, cudaGetErrorString(err_));      \
            return 1;                                                                          \
        }                                                                                      \
    } while (0)

// early: every kernel lets the next one launch as soon as all its blocks have begun (griddepcontrol.launch_dependents
// at the start: what the engine's graphs do with edges from the launch-completion port); else the next one launches
// as this one's blocks end
__constant__ int c_early;

__device__ __forceinline__ void pdl_wait() {
    if (c_early) asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
    asm volatile("griddepcontrol.wait;\n" ::: "memory");
}

__device__ __forceinline__ uint4 ld_stream(const uint4 *p) {
    uint4 v;
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "l"(p));
    return v;
}

__device__ __forceinline__ float dot8(uint4 w, const float *x) {
    const uint32_t u[4] = {w.x, w.y, w.z, w.w};
    float s = 0.0f;
#pragma unroll
    for (int i = 0; i < 4; i++) {
        s = fmaf(__uint_as_float(u[i] << 16), x[2 * i], s);
        s = fmaf(__uint_as_float(u[i] & 0xffff0000u), x[2 * i + 1], s);
    }
    return s;
}

// y[rows] = W x, W [rows][256 STEPS] bf16: warp w takes rows R w .. R w + R - 1, lane l the 16-byte pieces
// l + 32 s of each row.
template <int STEPS, int R>
__global__ void __launch_bounds__(256) gemv(const uint4 *__restrict__ w, const float *__restrict__ x,
                                            float *__restrict__ y, int rows) {
    const int lane = threadIdx.x & 31, r0 = (blockIdx.x * 8 + (threadIdx.x >> 5)) * R;
    uint4 wr[R][STEPS];
#pragma unroll
    for (int r = 0; r < R; r++)
#pragma unroll
        for (int s = 0; s < STEPS; s++)
            wr[r][s] = r0 + r < rows ? ld_stream(w + (size_t)(r0 + r) * (STEPS * 32) + s * 32 + lane)
                                     : make_uint4(0, 0, 0, 0);
    pdl_wait();
    float acc[R];
#pragma unroll
    for (int r = 0; r < R; r++) acc[r] = 0.0f;
#pragma unroll
    for (int s = 0; s < STEPS; s++) {
        const float4 a = ((const float4 *)x)[(s * 32 + lane) * 2], b = ((const float4 *)x)[(s * 32 + lane) * 2 + 1];
        const float xs[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
#pragma unroll
        for (int r = 0; r < R; r++) acc[r] += dot8(wr[r][s], xs);
    }
#pragma unroll
    for (int r = 0; r < R; r++) {
        float v = acc[r];
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
        if (lane == 0 && r0 + r < rows) y[r0 + r] = v;
    }
}

// A row kernel's shape: one block reads n floats, sums their squares, writes the row scaled.
__global__ void __launch_bounds__(256) row_small(const float *__restrict__ x, float *__restrict__ y, int n) {
    pdl_wait();
    __shared__ float part[8];
    float s = 0.0f;
    for (int i = threadIdx.x; i < n; i += 256) s += x[i] * x[i];
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = s;
    __syncthreads();
    float t = 0.0f;
    for (int i = 0; i < 8; i++) t += part[i];
    for (int i = threadIdx.x; i < n; i += 256) y[i] = x[i] * rsqrtf(t / n + 1e-6f);
}

__global__ void __launch_bounds__(256) empty_kernel(void) { pdl_wait(); }

// Reads n 16-byte pieces, a grid-stride loop; a sum no one reads but the compiler must keep.
__global__ void __launch_bounds__(256) copy_read(const uint4 *__restrict__ w, size_t n, float *sink) {
    pdl_wait();
    uint32_t a = 0;
    for (size_t i = (size_t)blockIdx.x * 256 + threadIdx.x; i < n; i += (size_t)gridDim.x * 256) {
        const uint4 v = ld_stream(w + i);
        a ^= v.x ^ v.y ^ v.z ^ v.w;
    }
    if (a == 0x12345678u) sink[0] = 1.0f;
}

struct launch {
    cudaStream_t s;
    bool pdl;
    template <typename... A, typename... B> cudaError_t operator()(void (*k)(A...), unsigned grid, B... args) const {
        cudaLaunchConfig_t cfg = {};
        cudaLaunchAttribute at[1];
        at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
        at[0].val.programmaticStreamSerializationAllowed = pdl ? 1 : 0;
        cfg.gridDim = dim3(grid), cfg.blockDim = dim3(256), cfg.stream = s, cfg.attrs = at, cfg.numAttrs = 1;
        return cudaLaunchKernelEx(&cfg, k, args...);
    }
};

struct mat {
    int rows, cols;
    const uint4 *w;
};

template <int STEPS, int R> static cudaError_t gemv_go(const launch &L, const mat &m, const float *x, float *y) {
    return L(gemv<STEPS, R>, (unsigned)((m.rows + 8 * R - 1) / (8 * R)), m.w, x, y, m.rows); // 8 warps x R rows
}

static cudaError_t product(const launch &L, const mat &m, const float *x, float *y) {
    switch (m.cols) {
    case 1024: return gemv_go<4, 4>(L, m, x, y);
    case 2048: return gemv_go<8, 2>(L, m, x, y);
    default: return gemv_go<12, 1>(L, m, x, y);
    }
}

enum { FULL, PRODUCTS, COPY, EMPTY };

int main(int argc, char **argv) {
    const int layers = 28, reps = argc > 1 ? atoi(argv[1]) : 30;
    const int shapes[4][2] = {{4096, 1024}, {1024, 2048}, {6144, 1024}, {1024, 3072}};
    size_t per_layer = 0;
    for (auto &sh : shapes) per_layer += (size_t)sh[0] * sh[1] * 2;
    const size_t head = (size_t)151936 * 1024 * 2, total = per_layer * layers + head;
    char *wbuf = nullptr;
    float *act = nullptr;
    CK(cudaMalloc(&wbuf, total));
    CK(cudaMemset(wbuf, 0x3c, total)); // 0x3c3c: a small bf16, finite sums
    CK(cudaMalloc(&act, (size_t)(151936 + 8 * 8192) * sizeof(float)));
    CK(cudaMemset(act, 0, (size_t)(151936 + 8 * 8192) * sizeof(float)));
    std::vector<mat> mats;
    size_t off = 0;
    for (int l = 0; l < layers; l++)
        for (auto &sh : shapes) {
            mats.push_back({sh[0], sh[1], (const uint4 *)(wbuf + off)});
            off += (size_t)sh[0] * sh[1] * 2;
        }
    const mat hm = {151936, 1024, (const uint4 *)(wbuf + off)};
    float *x = act, *big = act + 8192, *ff = act + 2 * 8192, *logits = act + 8 * 8192; // x [1024], big / ff [<= 6144]
    cudaStream_t s;
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));

    auto record = [&](int kind, bool pdl, cudaGraphExec_t *ex, int *kernels) -> cudaError_t {
        const launch L{s, pdl};
        cudaError_t e = cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal);
        int n = 0;
        if (kind == COPY) {
            e = L(copy_read, (unsigned)(prop.multiProcessorCount * 8), (const uint4 *)wbuf, total / 16, logits), n++;
        } else {
            for (int l = 0; l < layers && e == cudaSuccess; l++) {
                const mat *m = &mats[4 * l];
                const bool small = kind == FULL;
                auto put = [&](cudaError_t r) { if (e == cudaSuccess) e = r; n++; };
                if (kind == EMPTY) {
                    for (int i = 0; i < 8; i++) put(L(empty_kernel, 1u));
                    continue;
                }
                put(product(L, m[0], x, big));                     // q/k/v
                if (small) put(L(row_small, 3u, big, big + 4096, 1024)); // q/k preparation
                if (small) put(L(row_small, 8u, big + 4096, big, 1024)); // attention
                put(product(L, m[1], big, x));                     // o
                if (small) put(L(row_small, 1u, x, big, 1024));    // residual + norm
                put(product(L, m[2], big, ff));                    // gate / up
                put(product(L, m[3], ff, x));                      // down (gated)
                if (small) put(L(row_small, 1u, x, big, 1024));    // residual + norm
            }
            if (e == cudaSuccess) e = kind == EMPTY ? L(empty_kernel, 1u) : product(L, hm, x, logits);
            n++;
        }
        cudaGraph_t g = nullptr;
        const cudaError_t e2 = cudaStreamEndCapture(s, &g);
        if (e == cudaSuccess) e = e2;
        if (e == cudaSuccess) e = cudaGraphInstantiate(ex, g, 0);
        if (g) cudaGraphDestroy(g);
        *kernels = n;
        return e;
    };

    struct row {
        const char *name;
        int kind;
        bool pdl, early;
    } rows[] = {{"full", FULL, true, true},      {"full_late", FULL, true, false}, {"full_plain", FULL, false, false},
                {"products", PRODUCTS, true, true}, {"copy", COPY, true, true}, {"empty", EMPTY, true, true}};
    if (argc > 2 && !strcmp(argv[2], "once")) {
        cudaGraphExec_t ex = nullptr;
        int kernels = 0, one = 1;
        CK(cudaMemcpyToSymbol(c_early, &one, sizeof one));
        CK(record(FULL, true, &ex, &kernels));
        CK(cudaGraphLaunch(ex, s));
        CK(cudaStreamSynchronize(s));
        printf("{\"once\": %d}\n", kernels);
        return 0;
    }
    printf("{\"device\": \"%s\", \"sms\": %d, \"bytes_per_step\": %zu, \"reps\": %d", prop.name,
           prop.multiProcessorCount, total, reps);
    cudaEvent_t a, b;
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    for (const row &r : rows) {
        cudaGraphExec_t ex = nullptr;
        int kernels = 0;
        const int early = r.early ? 1 : 0;
        CK(cudaMemcpyToSymbol(c_early, &early, sizeof early));
        CK(record(r.kind, r.pdl, &ex, &kernels));
        std::vector<float> ms;
        for (int i = 0; i < reps + 3; i++) {
            CK(cudaEventRecord(a, s));
            CK(cudaGraphLaunch(ex, s));
            CK(cudaEventRecord(b, s));
            CK(cudaEventSynchronize(b));
            float t = 0.0f;
            CK(cudaEventElapsedTime(&t, a, b));
            if (i >= 3) ms.push_back(t);
        }
        std::sort(ms.begin(), ms.end());
        const double med = ms[ms.size() / 2];
        printf(", \"%s\": {\"kernels\": %d, \"ms\": %.4f, \"min_ms\": %.4f, \"tokens_per_s\": %.1f, "
               "\"us_per_kernel\": %.3f, \"tb_per_s\": %.3f}",
               r.name, kernels, med, ms[0], 1000.0 / med, med * 1000.0 / kernels,
               r.kind == EMPTY ? 0.0 : total / (med * 1e-3) / 1e12);
        cudaGraphExecDestroy(ex);
    }
    printf("}\n");
    return 0;
}
