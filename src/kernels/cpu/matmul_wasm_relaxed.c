/* The quantised products (Q8_0, Q4_0) on WebAssembly relaxed SIMD, bit-identical to the scalar reference
 * (matmul_quant_ref.c) and to the SIMD128 set (matmul_wasm128.c): the same float arithmetic, s += (d_w * d_x) * isum
 * block by block in order, four weight rows in the lanes, up to four tokens a weight load; only the exact integer
 * block dot isum is computed with i32x4.relaxed_dot_i8x16_i7x16_add_s (one instruction on a CPU with VNNI).
 *
 * That instruction's result is defined on every engine only when its second operand's bytes are in 0..127 (top bit
 * clear; the first may be any signed byte: the spec's tests check -128 x 127 exactly; past that an engine may read
 * the byte as signed or unsigned, or saturate its 16-bit pair sums). So the weights are the second operand:
 *  - Q4_0: the nibbles q = w + 8 (0..15) as they are; isum = dot(x, q) - 8 * sum(x);
 *  - Q8_0: w = (w & 127) - 128 * (w < 0), both parts in 0..1 / 0..127; isum = dot(x, w & 127) - 128 * dot(x, w >> 7),
 *    which holds for every byte, -128 included;
 * and the activations, any signed byte, the first. Every sum is of integers and exact in any order.
 *
 * Built apart from the rest: Debian 12's emscripten 3.1.6 compiles with clang 14, which has no relaxed SIMD, and its
 * binaryen 108 (run on every link) rewrites the final relaxed opcodes into others. web/build.sh compiles this file
 * with Debian's clang-19 and links it with wasm-ld-19 into a module of its own that imports the engine's memory and
 * exports tdr_matmul_quant; its bytes are embedded in the engine, which instantiates it on each thread when the
 * engine runs it (WebAssembly.validate says whether it can) and calls it through its function table
 * (relaxed_wasm.c). The module has no stack, data or libc of its own: everything it writes goes through the caller's
 * pointers (the accumulators and sums of tdr_scratch). */
#include <wasm_simd128.h>

#include "kernels/cpu/kernels_wasm.h"
#include "kernels/cpu/quant.h"

/* Four fp16 values (in the low halves of the 32-bit lanes) to fp32, exactly (matmul_wasm128.c's f16_to_f32x4). */
static inline v128_t f16_to_f32x4(v128_t h) {
    v128_t sign = wasm_i32x4_shl(wasm_v128_and(h, wasm_i32x4_splat(0x8000)), 16);
    v128_t em = wasm_i32x4_shl(wasm_v128_and(h, wasm_i32x4_splat(0x7fff)), 13);
    v128_t fin = wasm_f32x4_mul(em, wasm_f32x4_splat(0x1p112f));
    v128_t inf = wasm_v128_or(em, wasm_i32x4_splat(0x70000000));
    v128_t is_inf = wasm_i32x4_ge(em, wasm_i32x4_splat(0x0f800000));
    return wasm_v128_or(wasm_v128_bitselect(inf, fin, is_inf), sign);
}

/* Lane l = the sum of p[l]'s four lanes. */
static inline v128_t transpose_add(v128_t p0, v128_t p1, v128_t p2, v128_t p3) {
    v128_t s01 = wasm_i32x4_add(wasm_i32x4_shuffle(p0, p1, 0, 4, 1, 5), wasm_i32x4_shuffle(p0, p1, 2, 6, 3, 7));
    v128_t s23 = wasm_i32x4_add(wasm_i32x4_shuffle(p2, p3, 0, 4, 1, 5), wasm_i32x4_shuffle(p2, p3, 2, 6, 3, 7));
    return wasm_i32x4_add(wasm_i32x4_shuffle(s01, s23, 0, 1, 4, 5), wasm_i32x4_shuffle(s01, s23, 2, 3, 6, 7));
}

static inline v128_t rdot(v128_t x, v128_t w7, v128_t acc) { return wasm_i32x4_relaxed_dot_i8x16_i7x16_add(x, w7, acc); }

/* One weight block in the operands' form: Q8_0's low seven bits (lo[0..1]) and signs (hi[0..1], 0 or 1) of bytes
 * 0-15 and 16-31; Q4_0's nibbles of bytes 0-15 (lo[0]) and 16-31 (lo[1]); returns the fp16 scale. */
static inline uint16_t operands(int q4, const void *row, int64_t b, v128_t lo[2], v128_t hi[2]) {
    if (q4) {
        const td_block_q4_0 *wb = (const td_block_q4_0 *)row + b;
        v128_t q = wasm_v128_load(wb->qs);
        lo[0] = wasm_v128_and(q, wasm_i8x16_splat(15)), lo[1] = wasm_u8x16_shr(q, 4);
        return wb->d;
    }
    const td_block_q8_0 *wb = (const td_block_q8_0 *)row + b;
    v128_t a = wasm_v128_load(wb->qs), c = wasm_v128_load(wb->qs + 16);
    lo[0] = wasm_v128_and(a, wasm_i8x16_splat(127)), hi[0] = wasm_u8x16_shr(a, 7);
    lo[1] = wasm_v128_and(c, wasm_i8x16_splat(127)), hi[1] = wasm_u8x16_shr(c, 7);
    return wb->d;
}

/* The exact integer dot of one weight block (operands' form) with the activations x0 (bytes 0-15), x1 (16-31):
 * four partial sums; a Q4_0 block's offset is taken out by the caller (8 * sum(x)). */
static inline v128_t block_dot(int q4, const v128_t lo[2], const v128_t hi[2], v128_t x0, v128_t x1) {
    const v128_t zero = wasm_i32x4_splat(0);
    v128_t p = rdot(x1, lo[1], rdot(x0, lo[0], zero));
    if (q4) return p;
    v128_t s = rdot(x1, hi[1], rdot(x0, hi[0], zero));
    return wasm_i32x4_sub(p, wasm_i32x4_shl(s, 7));
}

/* Rows r0..r3 (weight rows j..j+3), blocks [b0, b0 + n), tokens t0.. t0 + nt - 1: acc[t] lane l += (d_w * d_x) * isum
 * block by block, from +0 when b0 is 0 (the reference's s = 0; s += ...: the same bits, and no memset, which this
 * module does not have). */
static inline __attribute__((always_inline)) void quant_group(const int q4, const void *r0, const void *r1, const void *r2, const void *r3, const td_qrows *xr,
                        int64_t t0, int nt, int64_t b0, int64_t n, const int32_t (*sum)[TD_WASM_RELAXED_CHUNK],
                        v128_t acc[4]) {
    if (b0 == 0)
        for (int t = 0; t < 4; t++) acc[t] = wasm_f32x4_splat(0.0f);
    for (int64_t i = 0; i < n; i++) {
        int64_t b = b0 + i;
        v128_t lo[4][2], hi[4][2] = {{0}};
        uint16_t h0 = operands(q4, r0, b, lo[0], hi[0]), h1 = operands(q4, r1, b, lo[1], hi[1]);
        uint16_t h2 = operands(q4, r2, b, lo[2], hi[2]), h3 = operands(q4, r3, b, lo[3], hi[3]);
        v128_t dw = f16_to_f32x4(wasm_u32x4_make(h0, h1, h2, h3));
        for (int t = 0; t < nt; t++) {
            const td_block_q8_0 *xb = xr->q + (t0 + t) * xr->nb + b;
            v128_t x0 = wasm_v128_load(xb->qs), x1 = wasm_v128_load(xb->qs + 16);
            v128_t isum = transpose_add(block_dot(q4, lo[0], hi[0], x0, x1), block_dot(q4, lo[1], hi[1], x0, x1),
                                        block_dot(q4, lo[2], hi[2], x0, x1), block_dot(q4, lo[3], hi[3], x0, x1));
            if (q4) isum = wasm_i32x4_sub(isum, wasm_i32x4_splat(8 * sum[t][i]));
            v128_t scale = wasm_f32x4_mul(dw, wasm_f32x4_splat(xr->d[(t0 + t) * xr->nb + b]));
            acc[t] = wasm_f32x4_add(acc[t], wasm_f32x4_mul(scale, wasm_f32x4_convert_i32x4(isum)));
        }
    }
}

/* Sums of the 32 activations of blocks [b0, b0 + n) of token t (Q4_0's offset). */
static void block_sums(const td_qrows *xr, int64_t t, int64_t b0, int64_t n, int32_t *out) {
    const v128_t one = wasm_i8x16_splat(1), zero = wasm_i32x4_splat(0);
    for (int64_t i = 0; i < n; i++) {
        const td_block_q8_0 *xb = xr->q + t * xr->nb + b0 + i;
        v128_t s = rdot(wasm_v128_load(xb->qs + 16), one, rdot(wasm_v128_load(xb->qs), one, zero));
        out[i] = wasm_i32x4_extract_lane(s, 0) + wasm_i32x4_extract_lane(s, 1) + wasm_i32x4_extract_lane(s, 2) +
                 wasm_i32x4_extract_lane(s, 3);
    }
}

__attribute__((export_name("tdr_matmul_quant"))) void tdr_matmul_quant(const td_mat *w, const int32_t *rows,
                                                                        const td_qrows *xr, int64_t T, float *y,
                                                                        int64_t ldy, int64_t j0, int64_t j1,
                                                                        td_wasm_relaxed_scratch *s) {
    const int q4 = w->type == TD_DTYPE_Q4_0;
    int64_t nb = w->cols / TD_QBLOCK, full = j0 + (j1 - j0) / 4 * 4;
    for (int64_t s0 = j0; s0 < full; s0 += 4 * TD_WASM_RELAXED_SLICE) { /* a slice of up to SLICE groups of 4 rows */
        int64_t ng = (full - s0) / 4 < TD_WASM_RELAXED_SLICE ? (full - s0) / 4 : TD_WASM_RELAXED_SLICE;
        for (int64_t t0 = 0; t0 < T; t0 += 4) {
            int nt = T - t0 < 4 ? (int)(T - t0) : 4;
            v128_t(*acc)[4] = (v128_t(*)[4])s->acc; /* acc[g][t]: group g's four rows, token t */
            for (int64_t b0 = 0; b0 < nb; b0 += TD_WASM_RELAXED_CHUNK) {
                int64_t n = nb - b0 < TD_WASM_RELAXED_CHUNK ? nb - b0 : TD_WASM_RELAXED_CHUNK;
                if (q4)
                    for (int t = 0; t < nt; t++) block_sums(xr, t0 + t, b0, n, s->sum[t]);
                for (int64_t g = 0; g < ng; g++) {
                    int64_t j = s0 + 4 * g;
                    const void *r0 = td_mat_row(w, rows ? rows[j] : j), *r1 = td_mat_row(w, rows ? rows[j + 1] : j + 1);
                    const void *r2 = td_mat_row(w, rows ? rows[j + 2] : j + 2);
                    const void *r3 = td_mat_row(w, rows ? rows[j + 3] : j + 3);
                    if (q4) quant_group(1, r0, r1, r2, r3, xr, t0, nt, b0, n, s->sum, acc[g]); /* two loops, each */
                    else quant_group(0, r0, r1, r2, r3, xr, t0, nt, b0, n, s->sum, acc[g]);    /* with its format */
                }
            }
            for (int64_t g = 0; g < ng; g++)
                for (int t = 0; t < nt; t++) {
                    float *o = y + (t0 + t) * ldy + s0 + 4 * g;
                    o[0] = wasm_f32x4_extract_lane(acc[g][t], 0), o[1] = wasm_f32x4_extract_lane(acc[g][t], 1);
                    o[2] = wasm_f32x4_extract_lane(acc[g][t], 2), o[3] = wasm_f32x4_extract_lane(acc[g][t], 3);
                }
        }
    }
}
