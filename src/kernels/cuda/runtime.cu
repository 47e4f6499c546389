/* The CUDA runtime behind cuda.h: device probe, memory, streams, copies, and the per-thread error text that every
 * kernel file reports through (td_cu_fail, td_cu_failf, td_cu_launched in common.cuh).
 *
 * Batch invariance: nothing here computes a value. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/ptx.cuh"

static thread_local char td_cu_err[512];

int td_cu_fail(const char *what, cudaError_t e) {
    snprintf(td_cu_err, sizeof td_cu_err, "%s: %s", what, cudaGetErrorString(e));
    (void)cudaGetLastError(); /* a non-sticky error must not be reported again by the next launch check */
    return -1;
}

int td_cu_failf(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(td_cu_err, sizeof td_cu_err, fmt, ap);
    va_end(ap);
    return -1;
}

int td_cu_launched(const char *name) {
    cudaError_t e = cudaGetLastError();
    if (e == cudaSuccess) return 0;
    char what[128];
    snprintf(what, sizeof what, "kernel %s", name);
    return td_cu_fail(what, e);
}

extern "C" const char *td_cu_error(void) { return td_cu_err; }

/* ptx.cuh's tensor-map encoder: the driver's cuTensorMapEncodeTiled, found once through the runtime (no link to
 * libcuda), called per map (host arithmetic only). */
typedef CUresult (*td_encode_tiled_fn)(CUtensorMap *, CUtensorMapDataType, cuuint32_t, void *, const cuuint64_t *,
                                       const cuuint64_t *, const cuuint32_t *, const cuuint32_t *,
                                       CUtensorMapInterleave, CUtensorMapSwizzle, CUtensorMapL2promotion,
                                       CUtensorMapFloatOOBfill);
static td_encode_tiled_fn td_encode_tiled(void) {
    static td_encode_tiled_fn fn = [] {
        void *f = nullptr;
        cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
        if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault, &q) !=
                cudaSuccess ||
            q != cudaDriverEntryPointSuccess)
            f = nullptr, (void)cudaGetLastError();
        return (td_encode_tiled_fn)f;
    }();
    return fn;
}
int td_tma_map(CUtensorMap *m, const void *base, int rank, const uint64_t *dims, const uint64_t *stride,
               const uint32_t *box) {
    const td_encode_tiled_fn enc = td_encode_tiled();
    if (!enc || rank < 2 || rank > 4 || ((uintptr_t)base & 15)) return -1;
    cuuint64_t dim[4], str[3];
    cuuint32_t bx[4], estride[4] = {1, 1, 1, 1};
    for (int i = 0; i < rank; i++) {
        if (dims[i] < 1 || (i > 0 && (stride[i - 1] & 15))) return -1;
        dim[i] = dims[i], bx[i] = box[i];
        if (i > 0) str[i - 1] = stride[i - 1];
    }
    return enc(m, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, (cuuint32_t)rank, (void *)base, dim, str, bx, estride,
               CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
               CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS
               ? 0
               : -1;
}

extern "C" int td_cu_mem_free(int64_t *free_bytes) {
    size_t f = 0, t = 0;
    const cudaError_t e = cudaMemGetInfo(&f, &t);
    if (e != cudaSuccess) return td_cu_fail("cudaMemGetInfo", e);
    *free_bytes = (int64_t)f;
    return 0;
}

extern "C" int td_cu_probe(char *name, size_t name_len, int64_t *total_bytes) {
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) return td_cu_fail("cudaGetDeviceCount", e);
    if (n <= 0) return td_cu_failf("no CUDA-capable device is detected");
    if ((e = cudaSetDevice(0)) != cudaSuccess) return td_cu_fail("cudaSetDevice(0)", e);
    cudaDeviceProp p;
    if ((e = cudaGetDeviceProperties(&p, 0)) != cudaSuccess) return td_cu_fail("cudaGetDeviceProperties(0)", e);
    if (p.major < 9)
        return td_cu_failf("device 0 (%s) has compute capability %d.%d; this build needs 9.0 (sm_90) or newer",
                           p.name, p.major, p.minor);
    if ((e = cudaFree(0)) != cudaSuccess) return td_cu_fail("creating the CUDA context", e);
    /* the kernels' stream-ordered scratch (cudaMallocAsync: the products' partials by slices) stays in the pool up
     * to 256 MB between synchronisations instead of going back to the driver at each one */
    cudaMemPool_t pool;
    if (cudaDeviceGetDefaultMemPool(&pool, 0) == cudaSuccess) {
        uint64_t keep = (uint64_t)256 << 20;
        (void)cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep);
    }
    (void)cudaGetLastError();
    if (name && name_len) snprintf(name, name_len, "%s", p.name);
    if (total_bytes) *total_bytes = (int64_t)p.totalGlobalMem;
    return 0;
}

extern "C" void *td_cu_malloc(size_t bytes) {
    void *p = NULL;
    cudaError_t e = cudaMalloc(&p, bytes ? bytes : 1);
    if (e != cudaSuccess) {
        char what[64];
        snprintf(what, sizeof what, "cudaMalloc(%zu bytes)", bytes);
        td_cu_fail(what, e);
        return NULL;
    }
    return p;
}

extern "C" void td_cu_free(void *p) {
    if (p) (void)cudaFree(p);
}

extern "C" void *td_cu_stream_new(void) {
    cudaStream_t s = NULL;
    /* a blocking stream: it orders with the legacy default stream, so work on NULL and on s never races */
    cudaError_t e = cudaStreamCreate(&s);
    if (e != cudaSuccess) {
        td_cu_fail("cudaStreamCreate", e);
        return NULL;
    }
    return (void *)s;
}

extern "C" void td_cu_stream_free(void *stream) {
    if (stream) (void)cudaStreamDestroy(TD_CU_STREAM(stream));
}

static int copy(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind, const char *name, void *stream) {
    if (!bytes) return 0;
    cudaError_t e = cudaMemcpyAsync(dst, src, bytes, kind, TD_CU_STREAM(stream));
    if (e != cudaSuccess) {
        char what[96];
        snprintf(what, sizeof what, "%s(%zu bytes)", name, bytes);
        return td_cu_fail(what, e);
    }
    return 0;
}

extern "C" int td_cu_h2d(void *dst, const void *src, size_t bytes, void *stream) {
    return copy(dst, src, bytes, cudaMemcpyHostToDevice, "cudaMemcpyAsync host to device", stream);
}

extern "C" int td_cu_d2h(void *dst, const void *src, size_t bytes, void *stream) {
    if (copy(dst, src, bytes, cudaMemcpyDeviceToHost, "cudaMemcpyAsync device to host", stream)) return -1;
    return td_cu_sync(stream);
}

extern "C" int td_cu_d2d(void *dst, const void *src, size_t bytes, void *stream) {
    return copy(dst, src, bytes, cudaMemcpyDeviceToDevice, "cudaMemcpyAsync device to device", stream);
}

extern "C" int td_cu_zero(void *dst, size_t bytes, void *stream) {
    if (!bytes) return 0;
    cudaError_t e = cudaMemsetAsync(dst, 0, bytes, TD_CU_STREAM(stream));
    if (e != cudaSuccess) {
        char what[64];
        snprintf(what, sizeof what, "cudaMemsetAsync(%zu bytes)", bytes);
        return td_cu_fail(what, e);
    }
    return 0;
}

extern "C" int td_cu_sync(void *stream) {
    cudaError_t e = cudaStreamSynchronize(TD_CU_STREAM(stream));
    return e == cudaSuccess ? 0 : td_cu_fail("cudaStreamSynchronize", e);
}

/* ---- graphs ---- */

extern "C" int td_cu_capture_begin(void *stream) {
    cudaError_t e = cudaStreamBeginCapture(TD_CU_STREAM(stream), cudaStreamCaptureModeThreadLocal);
    return e == cudaSuccess ? 0 : td_cu_fail("cudaStreamBeginCapture", e);
}

/* Every edge of g from a kernel to a kernel made programmatic from the upstream kernel's launch (`on`: the port
 * "all blocks have begun", cudaGraphKernelNodePortLaunchCompletion) or back to plain (its end): with it a kernel's
 * blocks are resident, and its weights in flight, while the kernel before it finishes (td_pdl_wait in every kernel
 * keeps the order of every read and write). Returns the edges changed; -1 when the graph refused a change (those
 * changed before it stay so: undo with on = 0); -2 when it also refused that edge back (the graph is unusable). */
static int64_t graph_edges_programmatic(cudaGraph_t g, int on) {
    size_t n = 0;
    if (cudaGraphGetEdges(g, NULL, NULL, NULL, &n) != cudaSuccess) return -1;
    if (n == 0) return 0;
    cudaGraphNode_t *from = (cudaGraphNode_t *)malloc(n * sizeof *from);
    cudaGraphNode_t *to = (cudaGraphNode_t *)malloc(n * sizeof *to);
    cudaGraphEdgeData *ed = (cudaGraphEdgeData *)calloc(n, sizeof *ed);
    int64_t changed = from && to && ed ? 0 : -1;
    if (changed == 0 && cudaGraphGetEdges(g, from, to, ed, &n) != cudaSuccess) changed = -1;
    for (size_t i = 0; changed >= 0 && i < n; i++) {
        cudaGraphNodeType a, b;
        if (cudaGraphNodeGetType(from[i], &a) != cudaSuccess || cudaGraphNodeGetType(to[i], &b) != cudaSuccess) {
            changed = -1;
            break;
        }
        if (a != cudaGraphNodeTypeKernel || b != cudaGraphNodeTypeKernel) continue;
        if ((ed[i].type == cudaGraphDependencyTypeProgrammatic) == (on != 0)) continue;
        cudaGraphEdgeData nd = {};
        if (on) {
            nd.from_port = cudaGraphKernelNodePortLaunchCompletion;
            nd.type = cudaGraphDependencyTypeProgrammatic;
        }
        if (cudaGraphRemoveDependencies(g, &from[i], &to[i], &ed[i], 1) != cudaSuccess) {
            changed = -1;
            break;
        }
        if (cudaGraphAddDependencies(g, &from[i], &to[i], &nd, 1) != cudaSuccess) {
            /* the edge back as it was: a graph with an edge lost would run kernels out of order */
            changed = cudaGraphAddDependencies(g, &from[i], &to[i], &ed[i], 1) == cudaSuccess ? -1 : -2;
            break;
        }
        changed++;
    }
    free(from);
    free(to);
    free(ed);
    (void)cudaGetLastError();
    return changed;
}

extern "C" int td_cu_capture_end(void *stream, int keep, void **exec) {
    cudaGraph_t g = NULL;
    cudaError_t e = cudaStreamEndCapture(TD_CU_STREAM(stream), &g);
    *exec = NULL;
    if (e != cudaSuccess || !keep) {
        if (g) (void)cudaGraphDestroy(g);
        (void)cudaGetLastError();
        return e == cudaSuccess || !keep ? 0 : td_cu_fail("cudaStreamEndCapture", e);
    }
    cudaGraphExec_t x = NULL;
    /* TD_CUDA_PDL=0: plain edges (each kernel starts when the one before has ended) */
    const int64_t pdl = td_cu_env_on("TD_CUDA_PDL") ? graph_edges_programmatic(g, 1) : 0;
    if (pdl == -2) {
        (void)cudaGraphDestroy(g);
        return td_cu_failf("recording a pass: the graph lost an edge it refused to make programmatic");
    }
    e = cudaGraphInstantiate(&x, g, 0);
    if (e != cudaSuccess && pdl != 0 && graph_edges_programmatic(g, 0) >= 0) { /* a driver that refuses them */
        (void)cudaGetLastError();
        e = cudaGraphInstantiate(&x, g, 0);
    }
    (void)cudaGraphDestroy(g);
    if (e != cudaSuccess) return td_cu_fail("cudaGraphInstantiate", e);
    *exec = (void *)x;
    return 0;
}

extern "C" int td_cu_graph_launch(void *exec, void *stream) {
    cudaError_t e = cudaGraphLaunch((cudaGraphExec_t)exec, TD_CU_STREAM(stream));
    return e == cudaSuccess ? 0 : td_cu_fail("cudaGraphLaunch", e);
}

extern "C" void td_cu_graph_free(void *exec) {
    if (exec) (void)cudaGraphExecDestroy((cudaGraphExec_t)exec);
}

extern "C" void *td_cu_host_alloc(size_t bytes) {
    void *p = NULL;
    cudaError_t e = cudaMallocHost(&p, bytes ? bytes : 1);
    if (e != cudaSuccess) {
        td_cu_fail("cudaMallocHost", e);
        return NULL;
    }
    return p;
}

extern "C" void td_cu_host_free(void *p) {
    if (p) (void)cudaFreeHost(p);
}
