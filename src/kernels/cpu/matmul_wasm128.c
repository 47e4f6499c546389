/* Matrix products on WebAssembly SIMD128, bit-identical to the scalar references (matmul_ref.c,
 * matmul_quant_ref.c): see kernels_wasm.h for how each keeps the reference's order of operations. */
#include <wasm_simd128.h>

#include "kernels/cpu/kernels_wasm.h"
#include "kernels/cpu/quant.h"
#include "util/half.h"

/* Four consecutive weights of a row as fp32 (F32 or BF16; bf16 is the high half of an fp32). */
static inline v128_t load4(const void *row, td_dtype type, int64_t k) {
    if (type == TD_DTYPE_F32) return wasm_v128_load((const float *)row + k);
    return wasm_i32x4_shl(wasm_u32x4_load16x4((const uint16_t *)row + k), 16);
}
static inline float load1(const void *row, td_dtype type, int64_t k) {
    return type == TD_DTYPE_F32 ? ((const float *)row)[k] : td_bf16_to_f32(((const uint16_t *)row)[k]);
}

/* Up to 4 tokens against 4 weight rows (r[0..3]): lane l of acc[t] is the dot product of row l with token t, each
 * lane summed serially in k, s = s + w * x, as the reference sums it. */
static void rows4(const void *const r[4], td_dtype type, int64_t cols, const float *const xs[4], int nt, v128_t acc[4]) {
    for (int t = 0; t < nt; t++) acc[t] = wasm_f32x4_splat(0.0f);
    int64_t k = 0;
    for (; k + 4 <= cols; k += 4) {
        v128_t a = load4(r[0], type, k), b = load4(r[1], type, k), c = load4(r[2], type, k), d = load4(r[3], type, k);
        v128_t ab0 = wasm_i32x4_shuffle(a, b, 0, 4, 1, 5), ab1 = wasm_i32x4_shuffle(a, b, 2, 6, 3, 7);
        v128_t cd0 = wasm_i32x4_shuffle(c, d, 0, 4, 1, 5), cd1 = wasm_i32x4_shuffle(c, d, 2, 6, 3, 7);
        v128_t k0 = wasm_i32x4_shuffle(ab0, cd0, 0, 1, 4, 5), k1 = wasm_i32x4_shuffle(ab0, cd0, 2, 3, 6, 7);
        v128_t k2 = wasm_i32x4_shuffle(ab1, cd1, 0, 1, 4, 5), k3 = wasm_i32x4_shuffle(ab1, cd1, 2, 3, 6, 7);
        for (int t = 0; t < nt; t++) {
            const float *x = xs[t] + k;
            v128_t s = acc[t];
            s = wasm_f32x4_add(s, wasm_f32x4_mul(k0, wasm_f32x4_splat(x[0])));
            s = wasm_f32x4_add(s, wasm_f32x4_mul(k1, wasm_f32x4_splat(x[1])));
            s = wasm_f32x4_add(s, wasm_f32x4_mul(k2, wasm_f32x4_splat(x[2])));
            s = wasm_f32x4_add(s, wasm_f32x4_mul(k3, wasm_f32x4_splat(x[3])));
            acc[t] = s;
        }
    }
    for (; k < cols; k++) {
        v128_t wk = wasm_f32x4_make(load1(r[0], type, k), load1(r[1], type, k), load1(r[2], type, k),
                                    load1(r[3], type, k));
        for (int t = 0; t < nt; t++) acc[t] = wasm_f32x4_add(acc[t], wasm_f32x4_mul(wk, wasm_f32x4_splat(xs[t][k])));
    }
}

static void matmul_float(const td_mat *w, const int32_t *rows, const float *x, int64_t T, int64_t ldx, float *y,
                         int64_t ldy, int64_t j0, int64_t j1) {
    int64_t j = j0;
    for (; j + 4 <= j1; j += 4) {
        const void *r[4];
        for (int l = 0; l < 4; l++) r[l] = td_mat_row(w, rows ? rows[j + l] : j + l);
        for (int64_t t0 = 0; t0 < T; t0 += 4) {
            int nt = T - t0 < 4 ? (int)(T - t0) : 4;
            const float *xs[4];
            v128_t acc[4];
            for (int t = 0; t < nt; t++) xs[t] = x + (t0 + t) * ldx;
            rows4(r, w->type, w->cols, xs, nt, acc);
            for (int t = 0; t < nt; t++) {
                float out[4];
                wasm_v128_store(out, acc[t]);
                for (int l = 0; l < 4; l++) y[(t0 + t) * ldy + j + l] = out[l];
            }
        }
    }
    if (j < j1) td_matmul_ref(w, rows, x, NULL, T, ldx, y, ldy, j, j1);
}

static inline int32_t hsum_i32(v128_t v) {
    return wasm_i32x4_extract_lane(v, 0) + wasm_i32x4_extract_lane(v, 1) + wasm_i32x4_extract_lane(v, 2) +
           wasm_i32x4_extract_lane(v, 3);
}
/* The exact integer dot of 16 signed bytes a with 16 signed bytes b, as 4 partial sums. */
static inline v128_t dot16(v128_t a, v128_t b) {
    return wasm_i32x4_add(wasm_i32x4_dot_i16x8(wasm_i16x8_extend_low_i8x16(a), wasm_i16x8_extend_low_i8x16(b)),
                          wasm_i32x4_dot_i16x8(wasm_i16x8_extend_high_i8x16(a), wasm_i16x8_extend_high_i8x16(b)));
}

static float dot_quant(td_dtype type, const void *row, const td_block_q8_0 *xq, const float *xd, int64_t nb) {
    float s = 0.0f;
    const v128_t eight = wasm_i8x16_splat(8), low = wasm_i8x16_splat(15);
    for (int64_t b = 0; b < nb; b++) {
        v128_t x0 = wasm_v128_load(xq[b].qs), x1 = wasm_v128_load(xq[b].qs + 16), p;
        float dw;
        if (type == TD_DTYPE_Q8_0) {
            const td_block_q8_0 *wb = (const td_block_q8_0 *)row + b;
            p = wasm_i32x4_add(dot16(wasm_v128_load(wb->qs), x0), dot16(wasm_v128_load(wb->qs + 16), x1));
            dw = td_f16_to_f32(wb->d);
        } else {
            const td_block_q4_0 *wb = (const td_block_q4_0 *)row + b;
            v128_t q = wasm_v128_load(wb->qs);
            v128_t lo = wasm_i8x16_sub(wasm_v128_and(q, low), eight), hi = wasm_i8x16_sub(wasm_u8x16_shr(q, 4), eight);
            p = wasm_i32x4_add(dot16(lo, x0), dot16(hi, x1));
            dw = td_f16_to_f32(wb->d);
        }
        s += (dw * xd[b]) * (float)hsum_i32(p);
    }
    return s;
}

/* Block b of a weight row as four i16x8 vectors (elements 0-7, 8-15, 16-23, 24-31) and its scale. */
static inline float wblock(td_dtype type, const void *row, int64_t b, v128_t w[4]) {
    if (type == TD_DTYPE_Q8_0) {
        const td_block_q8_0 *wb = (const td_block_q8_0 *)row + b;
        v128_t a = wasm_v128_load(wb->qs), c = wasm_v128_load(wb->qs + 16);
        w[0] = wasm_i16x8_extend_low_i8x16(a), w[1] = wasm_i16x8_extend_high_i8x16(a);
        w[2] = wasm_i16x8_extend_low_i8x16(c), w[3] = wasm_i16x8_extend_high_i8x16(c);
        return td_f16_to_f32(wb->d);
    }
    const td_block_q4_0 *wb = (const td_block_q4_0 *)row + b;
    const v128_t eight = wasm_i8x16_splat(8), low = wasm_i8x16_splat(15);
    v128_t q = wasm_v128_load(wb->qs);
    v128_t lo = wasm_i8x16_sub(wasm_v128_and(q, low), eight), hi = wasm_i8x16_sub(wasm_u8x16_shr(q, 4), eight);
    w[0] = wasm_i16x8_extend_low_i8x16(lo), w[1] = wasm_i16x8_extend_high_i8x16(lo);
    w[2] = wasm_i16x8_extend_low_i8x16(hi), w[3] = wasm_i16x8_extend_high_i8x16(hi);
    return td_f16_to_f32(wb->d);
}

static inline v128_t dot4(const v128_t w[4], const v128_t x[4]) {
    return wasm_i32x4_add(wasm_i32x4_add(wasm_i32x4_dot_i16x8(w[0], x[0]), wasm_i32x4_dot_i16x8(w[1], x[1])),
                          wasm_i32x4_add(wasm_i32x4_dot_i16x8(w[2], x[2]), wasm_i32x4_dot_i16x8(w[3], x[3])));
}

/* Four weight rows in the lanes, up to four tokens: lane l of acc[t] adds, block by block in order,
 * (d_w * d_x) * (float)(exact integer dot), the reference's float operations for row l and token t. */
static void quant_rows4(td_dtype type, const void *const r[4], const td_qrows *xr, int64_t t0, int nt, int64_t nb,
                        v128_t acc[4]) {
    for (int t = 0; t < nt; t++) acc[t] = wasm_f32x4_splat(0.0f);
    for (int64_t b = 0; b < nb; b++) {
        v128_t w[4][4];
        float dw[4];
        for (int l = 0; l < 4; l++) dw[l] = wblock(type, r[l], b, w[l]);
        v128_t dwv = wasm_f32x4_make(dw[0], dw[1], dw[2], dw[3]);
        for (int t = 0; t < nt; t++) {
            const td_block_q8_0 *xb = xr->q + (t0 + t) * xr->nb + b;
            v128_t x0 = wasm_v128_load(xb->qs), x1 = wasm_v128_load(xb->qs + 16), xv[4];
            xv[0] = wasm_i16x8_extend_low_i8x16(x0), xv[1] = wasm_i16x8_extend_high_i8x16(x0);
            xv[2] = wasm_i16x8_extend_low_i8x16(x1), xv[3] = wasm_i16x8_extend_high_i8x16(x1);
            v128_t p0 = dot4(w[0], xv), p1 = dot4(w[1], xv), p2 = dot4(w[2], xv), p3 = dot4(w[3], xv);
            /* lane l = the sum of p_l's four lanes (integers: exact in any order) */
            v128_t s01 = wasm_i32x4_add(wasm_i32x4_shuffle(p0, p1, 0, 4, 1, 5), wasm_i32x4_shuffle(p0, p1, 2, 6, 3, 7));
            v128_t s23 = wasm_i32x4_add(wasm_i32x4_shuffle(p2, p3, 0, 4, 1, 5), wasm_i32x4_shuffle(p2, p3, 2, 6, 3, 7));
            v128_t isum = wasm_i32x4_add(wasm_i32x4_shuffle(s01, s23, 0, 1, 4, 5), wasm_i32x4_shuffle(s01, s23, 2, 3, 6, 7));
            v128_t scale = wasm_f32x4_mul(dwv, wasm_f32x4_splat(xr->d[(t0 + t) * xr->nb + b]));
            acc[t] = wasm_f32x4_add(acc[t], wasm_f32x4_mul(scale, wasm_f32x4_convert_i32x4(isum)));
        }
    }
}

static void matmul_quant(const td_mat *w, const int32_t *rows, const td_qrows *xr, int64_t T, float *y, int64_t ldy,
                         int64_t j0, int64_t j1) {
    int64_t nb = w->cols / TD_QBLOCK, j = j0;
    for (; j + 4 <= j1; j += 4) {
        const void *r[4];
        for (int l = 0; l < 4; l++) r[l] = td_mat_row(w, rows ? rows[j + l] : j + l);
        for (int64_t t0 = 0; t0 < T; t0 += 4) {
            int nt = T - t0 < 4 ? (int)(T - t0) : 4;
            v128_t acc[4];
            quant_rows4(w->type, r, xr, t0, nt, nb, acc);
            for (int t = 0; t < nt; t++) {
                float out[4];
                wasm_v128_store(out, acc[t]);
                for (int l = 0; l < 4; l++) y[(t0 + t) * ldy + j + l] = out[l];
            }
        }
    }
    for (; j < j1; j++) {
        const void *row = td_mat_row(w, rows ? rows[j] : j);
        for (int64_t t = 0; t < T; t++)
            y[t * ldy + j] = dot_quant(w->type, row, xr->q + t * xr->nb, xr->d + t * xr->nb, nb);
    }
}

void td_matmul_wasm128(const td_mat *w, const int32_t *rows, const float *x, const void *xq, int64_t T, int64_t ldx,
                       float *y, int64_t ldy, int64_t j0, int64_t j1) {
    if (!w->pack && td_dtype_is_block(w->type)) {
        matmul_quant(w, rows, xq, T, y, ldy, j0, j1);
        return;
    }
    if (!w->pack && !xq && (w->type == TD_DTYPE_F32 || w->type == TD_DTYPE_BF16)) {
        matmul_float(w, rows, x, T, ldx, y, ldy, j0, j1);
        return;
    }
    td_matmul_ref(w, rows, x, xq, T, ldx, y, ldy, j0, j1);
}
