/* The WebAssembly SIMD128 kernel set's products (matmul_wasm128.c), beside the scalar references they reproduce
 * bit for bit. Compiled only by the WebAssembly build (web/CMakeLists.txt, -msimd128), chosen in dispatch_wasm.c. */
#ifndef TD_KERNELS_WASM_H
#define TD_KERNELS_WASM_H

#include "kernels/cpu/kernels.h"

/* td_matmul_ref's contract and bits for unpacked weights: F32 / BF16 outputs are each one fp32 dot product summed
 * in order of k (four output rows ride in the four lanes, each lane a serial sum: the same additions in the same
 * order); Q8_0 / Q4_0 outputs add (d_w * d_x) * (exact integer block dot) over the blocks in order, four rows in
 * the lanes as well, up to four tokens a weight load; the integer dot (i32x4.dot_i16x8_s over bytes split by parity,
 * a Q4_0 offset taken out as 8 * sum(x)) is exact in any order, the fp16 scales converted four at a time exactly.
 * The activations of a call are widened once per chunk of 32 blocks for a slice of 64 rows. F16 weights and bf16
 * activations take the reference itself. */
void td_matmul_wasm128(const td_mat *w, const int32_t *rows, const float *x, const void *xq, int64_t T, int64_t ldx,
                       float *y, int64_t ldy, int64_t j0, int64_t j1);
/* td_attn_rows_ref's contract and bits with fp32 keys and values (f16 ones take the reference): four keys' scores
 * in the lanes (each a serial sum over the dimensions, as the reference sums it), the values accumulated with the
 * dimensions in the lanes, keys in order. */
void td_attn_rows_wasm128(const float *const *q, float *const *out, const int64_t *n, int64_t R,
                          const td_attn_keys *keys, int64_t dim, float scale, float *scratch);


/* The relaxed SIMD set ("wasm128r"): td_matmul_wasm128's contract and bits, the Q4_0 block dots on
 * i32x4.relaxed_dot_i8x16_i7x16_add_s (matmul_wasm_relaxed.c, a module of its own built by clang-19, which
 * relaxed_wasm.c instantiates on each thread that runs it); everything else, and every row past the last whole group
 * of four, is td_matmul_wasm128's. td_wasm_relaxed_available: 1 where the engine validates the module (Chromium 114
 * and later; Node 20 with --experimental-wasm-relaxed-simd, Node 22 and later), 0 where it does not or the build
 * has no clang-19 (then the set is not offered). */
void td_matmul_wasm_relaxed(const td_mat *w, const int32_t *rows, const float *x, const void *xq, int64_t T,
                            int64_t ldx, float *y, int64_t ldy, int64_t j0, int64_t j1);
int td_wasm_relaxed_available(void);
/* Every Q8_0 / Q4_0 product through the relaxed module, whichever is faster (the tests and benches: the set itself
 * sends Q8_0 to td_matmul_wasm128, relaxed_wasm.c says why). */
void td_matmul_wasm_relaxed_module(const td_mat *w, const int32_t *rows, const float *x, const void *xq, int64_t T,
                                   int64_t ldx, float *y, int64_t ldy, int64_t j0, int64_t j1);

/* What the relaxed module's tdr_matmul_quant writes besides the output (the caller's, on its stack: the module has
 * no memory of its own): the float accumulators of a slice of TD_WASM_RELAXED_SLICE groups of four rows by four
 * tokens, and Q4_0's activation sums of a chunk of TD_WASM_RELAXED_CHUNK blocks by four tokens. */
#define TD_WASM_RELAXED_SLICE 16
#define TD_WASM_RELAXED_CHUNK 32
typedef struct td_wasm_relaxed_scratch {
    _Alignas(16) float acc[TD_WASM_RELAXED_SLICE * 4 * 4];
    int32_t sum[4][TD_WASM_RELAXED_CHUNK];
} td_wasm_relaxed_scratch;
/* void tdr_matmul_quant(const td_mat *w, const int32_t *rows, const td_qrows *xr, int64_t T, float *y, int64_t ldy,
 *                       int64_t j0, int64_t j1, td_wasm_relaxed_scratch *s): rows [j0, j0 + (j1 - j0) / 4 * 4). */

#endif
