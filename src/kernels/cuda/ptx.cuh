/* The inline-PTX helpers of the kernels, in one place: the bf16 mma, ldmatrix (plain and .trans), cp.async with its
 * commit / wait_group, the L2 prefetch, the bf16 pair pack, the dynamic shared-memory declaration, and the wait of a
 * programmatic dependent launch (every kernel). Nothing else in the kernels is inline assembly, so tests/cuda/emu (a
 * CPU emulator, run by the ctest test_cuda_emu) compiles them with g++ by supplying its own kernels/cuda/ptx.cuh (an
 * -I that comes before src/) that emulates each of these by its PTX semantics. Keep it so: a new asm goes here, with
 * its emulation in tests/cuda/emu/kernels/cuda/ptx.cuh. All force-inlined (the kernels' register counts depend on
 * it). */
#ifndef TD_KERNELS_CUDA_PTX_CUH
#define TD_KERNELS_CUDA_PTX_CUH

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

__device__ __forceinline__ void td_prefetch_l2(const void *p) { asm volatile("prefetch.global.L2 [%0];" ::"l"(p)); }

/* Programmatic dependent launch (sm_90): in a graph whose kernel-to-kernel edges are programmatic (runtime.cu's
 * td_cu_capture_end), a kernel may start as soon as every block of the one before it has started; this waits until
 * that kernel has finished and its writes are visible (at once when there is no such edge). Every kernel calls it
 * before it reads or writes anything a kernel before it may still touch, so each kernel's end still implies the end
 * of all before it; only reads of what no kernel writes (weights) may come first. */
__device__ __forceinline__ void td_pdl_wait(void) { asm volatile("griddepcontrol.wait;\n" ::: "memory"); }

#endif
