/* The inline-PTX helpers of the kernels, in one place: the bf16 mma, ldmatrix (plain and .trans), cp.async with its
 * commit / wait_group, wgmma (sm_90a: descriptors of the 128-byte swizzle, fence / commit / wait, the proxy fence),
 * mbarriers (init, arrive, the arrival of landed cp.async, wait), the bulk tensor copy (TMA) with its tensor map,
 * the L2 prefetch, the bf16 pair pack, the multifunction unit's 2^x, the dynamic shared-memory declaration, and the wait of a programmatic dependent
 * launch (every kernel). Nothing else in the kernels is inline assembly, so tests/cuda/emu (a CPU emulator, run by
 * the ctest test_cuda_emu) compiles them with g++ by supplying its own kernels/cuda/ptx.cuh (an
 * -I that comes before src/) that emulates each of these by its PTX semantics. Keep it so: a new asm goes here, with
 * its emulation in tests/cuda/emu/kernels/cuda/ptx.cuh. All force-inlined (the kernels' register counts depend on
 * it). */
#ifndef TD_KERNELS_CUDA_PTX_CUH
#define TD_KERNELS_CUDA_PTX_CUH

#include <cuda.h> /* CUtensorMap and its enums (types only: the encoder is found through the runtime) */
#include <cuda_bf16.h>
#include <stdint.h>

/* The kernel's dynamic shared memory as `T name[]` (TD_DYN_SMEM16: 16-byte aligned). */
#define TD_DYN_SMEM(T, name) extern __shared__ T name[]
#define TD_DYN_SMEM16(T, name) extern __shared__ __align__(16) T name[]

/* D += A B on one m16n8k16 fragment (bf16 A row-major, B col-major, f32 C/D; D and C the same registers). */
__device__ __forceinline__ void td_mma_bf16(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                            uint32_t b0, uint32_t b1) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}
__device__ __forceinline__ void td_mma_bf16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    td_mma_bf16(d, a[0], a[1], a[2], a[3], b0, b1);
}

/* Two floats rounded to bf16 (nearest even), lo in the low half: one A or B register. */
__device__ __forceinline__ uint32_t td_pack_bf16(float lo, float hi) {
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *(uint32_t *)&v;
}

/* 2^x on the multifunction unit (ex2.approx.ftz.f32: ~2 ulp; a subnormal input or result is flushed to +0). */
__device__ __forceinline__ float td_ex2(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
    return y;
}

/* Four 8x8 b16 matrices from shared memory; lane l gives the address of row l % 8 of matrix l / 8 (16-byte aligned).
 * Without .trans lane 4g + q gets row g, columns 2q, 2q + 1 of each; with .trans, rows 2q, 2q + 1 of column g. */
__device__ __forceinline__ void td_ldsm_x4(uint32_t (&r)[4], const void *smem_row) {
    const uint32_t s = (uint32_t)__cvta_generic_to_shared(smem_row);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(s));
}
__device__ __forceinline__ void td_ldsm_x4_t(uint32_t (&r)[4], const void *smem_row) {
    const uint32_t s = (uint32_t)__cvta_generic_to_shared(smem_row);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(s));
}

/* 16 bytes global -> shared, asynchronously (both 16-byte aligned); td_cp_commit closes the thread's group of copies
 * issued since the last one; td_cp_wait<N> waits until at most N of its groups are still in flight. */
__device__ __forceinline__ void td_cp16(void *smem, const void *g) {
    const uint32_t a = (uint32_t)__cvta_generic_to_shared(smem);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(a), "l"(g));
}
__device__ __forceinline__ void td_cp_commit(void) { asm volatile("cp.async.commit_group;\n" ::); }
template <int N> __device__ __forceinline__ void td_cp_wait(void) {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

/* ---- wgmma (sm_90a: compiled where __CUDA_ARCH_FEAT_SM90_ALL is defined; the host runs it on compute capability
 * 9.0 only) ---- */

/* The shared-space address of a shared-memory pointer (what descriptors and the 128-byte swizzle see). */
__device__ __forceinline__ uint32_t td_smem_addr(const void *p) { return (uint32_t)__cvta_generic_to_shared(p); }

/* The descriptor of a K-major bf16 operand in the 128-byte swizzle: rows of 64 elements (128 bytes) at `p` + 128 r,
 * 16-byte chunk c of row r stored at chunk c ^ (r % 8), groups of 8 rows 1024 bytes apart (SBO), the tile 1024-byte
 * aligned; `p` may start 32 k bytes into the rows (the k-th 16-element step). */
__device__ __forceinline__ uint64_t td_wg_desc(const void *p) {
    const uint64_t a = td_smem_addr(p);
    return ((a & 0x3ffffu) >> 4) | (uint64_t)(16 >> 4) << 16 | (uint64_t)(1024 >> 4) << 32 | (uint64_t)1 << 62;
}

/* The descriptor of an MN-major bf16 operand (B read transposed: imm-trans-b) in the 128-byte swizzle: row k holds
 * 64 consecutive n (128 bytes) at `p` + 128 k, 16-byte chunk c of row k stored at chunk c ^ (k % 8), groups of 8 k
 * rows 1024 bytes apart (SBO), blocks of 64 n `lbo` bytes apart (LBO); the tile 1024-byte aligned. */
__device__ __forceinline__ uint64_t td_wg_desc_mn(const void *p, uint32_t lbo) {
    const uint64_t a = td_smem_addr(p);
    return ((a & 0x3ffffu) >> 4) | (uint64_t)((lbo >> 4) & 0x3fffu) << 16 | (uint64_t)(1024 >> 4) << 32 |
           (uint64_t)1 << 62;
}

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define TD_WG_ASM(...) asm volatile(__VA_ARGS__)
#else
#define TD_WG_ASM(...) __trap() /* the host never launches a wgmma kernel here */
#endif
/* wgmma.fence orders the warpgroup's register accesses before the wgmma that follow (needed before the first and
 * after the accumulators were touched by other instructions); commit closes a group of wgmma, wait<N> waits until at
 * most N groups are pending. */
__device__ __forceinline__ void td_wg_fence(void) { TD_WG_ASM("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void td_wg_commit(void) { TD_WG_ASM("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N> __device__ __forceinline__ void td_wg_wait(void) {
    TD_WG_ASM("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
/* Writes of the generic proxy (st.shared, cp.async) to shared memory made visible to the async proxy (wgmma's reads)
 * of the threads that pass a barrier after it. */
__device__ __forceinline__ void td_fence_async_smem(void) {
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}
/* The compiler keeps r in its register and orders it around this point (the accumulators of an async wgmma). */
__device__ __forceinline__ void td_wg_reg(float &r) { asm volatile("" : "+f"(r)::"memory"); }

/* D += A B on m64nNk16 for the warpgroup (4 warps): A [64 rows][16 k] and B [N columns][16 k] K-major in shared
 * memory by their descriptors (td_wg_desc), bf16, f32 D (N / 2 floats a thread). Thread 32 w + 4 g + q holds
 * d[4 j + c] = D[16 w + g + 8 (c >> 1)][8 j + 2 q + (c & 1)]: each warp's rows as an m16n8 fragment's D, for the N / 8
 * n8 blocks j. Asynchronous: d is D's only after td_wg_commit and a td_wg_wait that covers it. N: 8, 16, 32, 64,
 * 128. */
template <int N> __device__ __forceinline__ void td_wgmma_bf16(float (&d)[N / 2], uint64_t da, uint64_t db);
template <> __device__ __forceinline__ void td_wgmma_bf16<8>(float (&d)[4], uint64_t da, uint64_t db) {
    TD_WG_ASM("{\n.reg .pred p;\nsetp.ne.b32 p, %6, 0;\n"
              "wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16 {"
              "%0, %1, %2, %3"
              "}, %4, %5, p, 1, 1, 0, 0;\n}\n"
              : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
              : "l"(da), "l"(db), "r"(1)
              : "memory");
}
template <> __device__ __forceinline__ void td_wgmma_bf16<16>(float (&d)[8], uint64_t da, uint64_t db) {
    TD_WG_ASM("{\n.reg .pred p;\nsetp.ne.b32 p, %10, 0;\n"
              "wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16 {"
              "%0, %1, %2, %3, %4, %5, %6, %7"
              "}, %8, %9, p, 1, 1, 0, 0;\n}\n"
              : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
              : "l"(da), "l"(db), "r"(1)
              : "memory");
}
template <> __device__ __forceinline__ void td_wgmma_bf16<32>(float (&d)[16], uint64_t da, uint64_t db) {
    TD_WG_ASM("{\n.reg .pred p;\nsetp.ne.b32 p, %18, 0;\n"
              "wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 {"
              "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15"
              "}, %16, %17, p, 1, 1, 0, 0;\n}\n"
              : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
                "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
              : "l"(da), "l"(db), "r"(1)
              : "memory");
}
template <> __device__ __forceinline__ void td_wgmma_bf16<64>(float (&d)[32], uint64_t da, uint64_t db) {
    TD_WG_ASM("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
              "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {"
              "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, "
              "%21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
              "}, %32, %33, p, 1, 1, 0, 0;\n}\n"
              : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
                "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]),
                "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]),
                "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]),
                "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
              : "l"(da), "l"(db), "r"(1)
              : "memory");
}
template <> __device__ __forceinline__ void td_wgmma_bf16<128>(float (&d)[64], uint64_t da, uint64_t db) {
    TD_WG_ASM("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
              "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {"
              "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, "
              "%21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, "
              "%40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, "
              "%59, %60, %61, %62, %63"
              "}, %64, %65, p, 1, 1, 0, 0;\n}\n"
              : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
                "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]),
                "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]),
                "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]),
                "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]),
                "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]),
                "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]),
                "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]),
                "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
              : "l"(da), "l"(db), "r"(1)
              : "memory");
}

/* D += A B on m64n64k16 for the warpgroup with A [64 rows][16 k] in registers and B MN-major in shared memory
 * (td_wg_desc_mn; B element (k, n) at row k, column n): a thread's a[0 .. 3] are mma.m16n8k16's A fragment of its
 * warp's 16 rows (lane 4 g + q: a[0] row g, k 2q and 2q + 1; a[1] row g + 8; a[2] row g, k 8 + 2q ..; a[3] row g + 8,
 * k 8 + 2q ..); d as td_wgmma_bf16<64>'s. Asynchronous as it: a must stay unchanged until the wait. */
__device__ __forceinline__ void td_wgmma_bf16_rt64(float (&d)[32], const uint32_t (&a)[4], uint64_t db) {
    TD_WG_ASM("{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
              "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {"
              "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, "
              "%21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
              "}, {%32, %33, %34, %35}, %36, p, 1, 1, 1;\n}\n"
              : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
                "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]),
                "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]),
                "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]),
                "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
              : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(1)
              : "memory");
}

/* ---- mbarriers (a stage handed from a producer warp to the consumers and back) ----
 * td_mbar_init: a barrier whose phase completes after `count` arrivals (then the next phase needs as many);
 * td_mbar_arrive: one arrival where pred holds (release: this thread's accesses before it are seen by the threads
 * its phase frees);
 * td_cp_arrive: one arrival of this thread once every cp.async it issued before has landed (cp.async.mbarrier.arrive
 * with .noinc: counted among the `count` arrivals); td_mbar_wait: until the phase of this parity has completed
 * (acquire). A barrier's phases alternate parity 0, 1, 0, ...: the r-th use of a barrier waits for parity r & 1. */
__device__ __forceinline__ void td_mbar_init(uint64_t *b, unsigned count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(td_smem_addr(b)), "r"(count) : "memory");
}
__device__ __forceinline__ void td_mbar_arrive(uint64_t *b, bool pred) { /* pred false: no arrival (predicated, so
                                                                            no branch a wgmma in flight would cross) */
    asm volatile("{\n.reg .pred p;\n.reg .b64 st;\nsetp.ne.b32 p, %1, 0;\n"
                 "@p mbarrier.arrive.shared::cta.b64 st, [%0];\n}\n" ::"r"(td_smem_addr(b)),
                 "r"((int)pred)
                 : "memory");
}
__device__ __forceinline__ void td_cp_arrive(uint64_t *b) {
    asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(td_smem_addr(b)) : "memory");
}
__device__ __forceinline__ void td_mbar_wait(uint64_t *b, unsigned parity) {
    asm volatile("{\n.reg .pred done;\nWAIT:\n"
                 "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
                 "@!done bra WAIT;\n}\n" ::"r"(td_smem_addr(b)),
                 "r"(parity)
                 : "memory");
}

/* ---- the bulk tensor copy (TMA) ----
 * td_tma_map (host): the tensor map of a bf16 tensor of rank 2 .. 4 at base: dims[0] elements along the contiguous
 * dimension, dims[i] along dimension i, stride[i - 1] bytes apart (multiples of 16, as base), read in boxes of box[i]
 * along each (box[0] 64: 128 bytes, the swizzle's width); a box lands dense, dimension 0 fastest, in the 128-byte
 * swizzle (each 128-byte row's 16-byte chunk c at 16 (c ^ (row & 7)) of a 1024-byte aligned box: tc_sw's layout,
 * td_wg_desc's operand); elements outside the tensor land as zeros. 0, or -1 where the driver's encoder is missing
 * or refuses (the caller then copies another way).
 * td_mbar_expect_tx: one arrival on b that also makes its phase wait for `bytes` more of bulk copies;
 * td_tma_load_2d / _4d: the box at coordinates (c0, c1[, c2, c3]) of the map (a __grid_constant__ kernel parameter)
 * into shared memory at dst (1024-byte aligned), its bytes counted on b as they land. */
int td_tma_map(CUtensorMap *m, const void *base, int rank, const uint64_t *dims, const uint64_t *stride,
               const uint32_t *box);
__device__ __forceinline__ void td_mbar_expect_tx(uint64_t *b, unsigned bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(td_smem_addr(b)), "r"(bytes)
                 : "memory");
}
__device__ __forceinline__ void td_tma_load_2d(void *dst, const CUtensorMap *m, int c0, int c1, uint64_t *b) {
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, "
                 "%3}], [%4];\n" ::"r"(td_smem_addr(dst)),
                 "l"((uint64_t)(uintptr_t)m), "r"(c0), "r"(c1), "r"(td_smem_addr(b))
                 : "memory");
}
__device__ __forceinline__ void td_tma_load_4d(void *dst, const CUtensorMap *m, int c0, int c1, int c2, int c3,
                                               uint64_t *b) {
    asm volatile("cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, "
                 "%3, %4, %5}], [%6];\n" ::"r"(td_smem_addr(dst)),
                 "l"((uint64_t)(uintptr_t)m), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(td_smem_addr(b))
                 : "memory");
}

__device__ __forceinline__ void td_prefetch_l2(const void *p) { asm volatile("prefetch.global.L2 [%0];" ::"l"(p)); }

/* Programmatic dependent launch (sm_90): in a graph whose kernel-to-kernel edges are programmatic (runtime.cu's
 * td_cu_capture_end), a kernel may start as soon as every block of the one before it has started; this waits until
 * that kernel has finished and its writes are visible (at once when there is no such edge). Every kernel calls it
 * before it reads or writes anything a kernel before it may still touch, so each kernel's end still implies the end
 * of all before it; only reads of what no kernel of a pass writes may come first: weights, and the pass's tables and
 * RoPE rows (td_dev_upload_pass copies them before the pass's first kernel). A block may leave before waiting (a tile
 * with no rows) only where some other block of the launch always waits, or that implication breaks. */
__device__ __forceinline__ void td_pdl_wait(void) { asm volatile("griddepcontrol.wait;\n" ::: "memory"); }

#endif
