/* The one driver from a tile's run-time shape to a kernel instance with compile-time rows and columns.
 *
 * A matmul kernel computes R rows x C tokens of dot products per tile, with R and C small (1..8). Its tile body is
 * an always_inline function whose loops over r < R and c < C the compiler unrolls, keeping R * C accumulators in
 * registers; that only happens when R and C are constants at the call. The tile left at a range's edge has fewer
 * rows or tokens, so the kernel needs every (R, C) up to its largest as its own instance: td_tile_call makes each
 * call with literal constants, and because it, the adapter it calls through `fn` and the tile body are all inlined
 * (the pointer is a constant at every call site), each branch becomes a fully unrolled instance, as a hand-written
 * `switch (R * 4 + C) case 4 * 4 + 3: tile(4, 3, ...)` ladder did. max_rows and max_cols (constants at the call
 * site) drop the instances the kernel never uses.
 *
 * The kernel passes its tile arguments in a struct of its own; the adapter unpacks it and calls the tile body:
 *     static inline __attribute__((always_inline)) void tile_at(int R, int C, const void *p) {
 *         const tile_args *a = p;
 *         tile(a->type, R, C, a->wr, ...);
 *     }
 *     td_tile_call(R, C, 4, 3, tile_at, &(tile_args){type, wr, ...});
 * R, C >= 1; a value above the maximum runs the maximum's instance (callers never pass one).
 *
 * Used by matmul_x8_avx2.c and matmul_bf16_avx512.c. matmul_avx2.c, matmul_quant_avx2.c and matmul_x16_avx512.c keep
 * their own switch: through this driver the compiler writes the same unrolled loops (the same vector instructions
 * in each) but allocates registers and inlines around them differently, and bench/kernel_ab.sh measured -5 to -11%
 * for some of their cases (x16 Q4_0 at every T, AVX2 F32 and BF16 products of 256 columns from T = 3 on, unpacked
 * Q8_0 -2%) beside gains for others (bench/results/kernel-ab-five-files-*.json). The two files here: x8 within
 * +-3% everywhere, bf16 decode 4-23% faster (bench/results/kernel-ab-*.json). */
#ifndef TD_KERNELS_CPU_TILE_DRIVER_H
#define TD_KERNELS_CPU_TILE_DRIVER_H

typedef void (*td_tile_fn)(int rows, int cols, const void *args);

/* fn(rows, c, args) with c the constant min(C, max_cols). A switch, not a chain of ifs: one jump where a tile is
 * short (a decode row of 1024 columns is). The guards are true wherever a case is reached; being constant, they keep
 * the compiler from writing instances larger than the kernel's (whose accumulator arrays they would overrun). */
static inline __attribute__((always_inline)) void td_tile_cols(int rows, int C, int max_cols, td_tile_fn fn,
                                                               const void *args) {
    switch (C < max_cols ? C : max_cols) {
    case 8: if (max_cols >= 8) fn(rows, 8, args); break;
    case 7: if (max_cols >= 7) fn(rows, 7, args); break;
    case 6: if (max_cols >= 6) fn(rows, 6, args); break;
    case 5: if (max_cols >= 5) fn(rows, 5, args); break;
    case 4: if (max_cols >= 4) fn(rows, 4, args); break;
    case 3: if (max_cols >= 3) fn(rows, 3, args); break;
    case 2: if (max_cols >= 2) fn(rows, 2, args); break;
    default: fn(rows, 1, args); break;
    }
}

/* fn(r, c, args) with r = min(R, max_rows) and c = min(C, max_cols) as constants (both maxima at most 8). */
static inline __attribute__((always_inline)) void td_tile_call(int R, int C, int max_rows, int max_cols,
                                                               td_tile_fn fn, const void *args) {
    switch (R < max_rows ? R : max_rows) {
    case 8: if (max_rows >= 8) td_tile_cols(8, C, max_cols, fn, args); break;
    case 7: if (max_rows >= 7) td_tile_cols(7, C, max_cols, fn, args); break;
    case 6: if (max_rows >= 6) td_tile_cols(6, C, max_cols, fn, args); break;
    case 5: if (max_rows >= 5) td_tile_cols(5, C, max_cols, fn, args); break;
    case 4: if (max_rows >= 4) td_tile_cols(4, C, max_cols, fn, args); break;
    case 3: if (max_rows >= 3) td_tile_cols(3, C, max_cols, fn, args); break;
    case 2: if (max_rows >= 2) td_tile_cols(2, C, max_cols, fn, args); break;
    default: td_tile_cols(1, C, max_cols, fn, args); break;
    }
}

#endif
