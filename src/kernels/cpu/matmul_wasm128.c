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

/* The quantised products keep the reference's float arithmetic, s += (d_w * d_x) * (float)isum block by block in
 * order, four weight rows in the four lanes of a float accumulator per token; only the integer block dot isum is
 * computed differently (exact in any order):
 *  - the activations of a call are widened once to int16, per block four i16x8 vectors in "parity" order (the even
 *    then the odd elements of 0-15, then of 16-31), with the sum of the block's 32 values;
 *  - a weight block is split the same way without widening instructions: its bytes read as i16x8, the odd byte of
 *    a lane is (lane >> 8) (arithmetic: Q8_0's sign) and the even one (lane << 8) >> 8; a Q4_0 block's nibbles
 *    come as (lane & 15), (lane >> 8) & 15, (lane >> 4) & 15 and lane >> 12 (unsigned q = w + 8), its offset
 *    taken out once: isum = dot(q, x) - 8 * sum(x);
 *  - four i32x4.dot_i16x8_s a block, the four rows' partial sums added as a transpose.
 * The rows' fp16 scales are converted four at a time (f16_to_f32x4: exact, the same values as td_f16_to_f32). */

/* Four fp16 values (in the low halves of the 32-bit lanes) to fp32, exactly: the exponent and mantissa moved into
 * fp32's fields and scaled by 2^112 (exact for normal and subnormal halves, zero stays zero), infinities and NaNs
 * (exponent 31) given fp32's all-ones exponent with their mantissa; then the sign. */
static inline v128_t f16_to_f32x4(v128_t h) {
    v128_t sign = wasm_i32x4_shl(wasm_v128_and(h, wasm_i32x4_splat(0x8000)), 16);
    v128_t em = wasm_i32x4_shl(wasm_v128_and(h, wasm_i32x4_splat(0x7fff)), 13);
    v128_t fin = wasm_f32x4_mul(em, wasm_f32x4_splat(0x1p112f));
    v128_t inf = wasm_v128_or(em, wasm_i32x4_splat(0x70000000));
    v128_t is_inf = wasm_i32x4_ge(em, wasm_i32x4_splat(0x0f800000));
    return wasm_v128_or(wasm_v128_bitselect(inf, fin, is_inf), sign);
}

#define XCHUNK 32 /* blocks of activations widened at a time (4 tokens: 8 kB on the stack) */
#define RSLICE 16 /* groups of 4 rows whose accumulators live across a chunk (1 kB) */

typedef struct xblock {
    v128_t v[4];
    int32_t sum;
    float d;
} xblock;

/* Blocks [b0, b0 + n) of token t's activations in parity order. */
static void widen(const td_qrows *xr, int64_t t, int64_t b0, int64_t n, xblock *out) {
    for (int64_t i = 0; i < n; i++) {
        const td_block_q8_0 *xb = xr->q + t * xr->nb + b0 + i;
        v128_t a = wasm_v128_load(xb->qs), c = wasm_v128_load(xb->qs + 16);
        out[i].v[0] = wasm_i16x8_shr(wasm_i16x8_shl(a, 8), 8), out[i].v[1] = wasm_i16x8_shr(a, 8);
        out[i].v[2] = wasm_i16x8_shr(wasm_i16x8_shl(c, 8), 8), out[i].v[3] = wasm_i16x8_shr(c, 8);
        v128_t s = wasm_i32x4_add(wasm_i32x4_add(wasm_i32x4_extadd_pairwise_i16x8(out[i].v[0]),
                                                 wasm_i32x4_extadd_pairwise_i16x8(out[i].v[1])),
                                  wasm_i32x4_add(wasm_i32x4_extadd_pairwise_i16x8(out[i].v[2]),
                                                 wasm_i32x4_extadd_pairwise_i16x8(out[i].v[3])));
        out[i].sum = hsum_i32(s);
        out[i].d = xr->d[t * xr->nb + b0 + i];
    }
}

/* Weight block of row r in parity order, and its fp16 scale (returned). */
static inline uint16_t wparity(td_dtype type, const void *row, int64_t b, v128_t w[4]) {
    if (type == TD_DTYPE_Q8_0) {
        const td_block_q8_0 *wb = (const td_block_q8_0 *)row + b;
        v128_t a = wasm_v128_load(wb->qs), c = wasm_v128_load(wb->qs + 16);
        w[0] = wasm_i16x8_shr(wasm_i16x8_shl(a, 8), 8), w[1] = wasm_i16x8_shr(a, 8);
        w[2] = wasm_i16x8_shr(wasm_i16x8_shl(c, 8), 8), w[3] = wasm_i16x8_shr(c, 8);
        return wb->d;
    }
    const td_block_q4_0 *wb = (const td_block_q4_0 *)row + b;
    const v128_t m = wasm_i16x8_splat(15);
    v128_t q = wasm_v128_load(wb->qs);
    w[0] = wasm_v128_and(q, m), w[1] = wasm_v128_and(wasm_u16x8_shr(q, 8), m);
    w[2] = wasm_v128_and(wasm_u16x8_shr(q, 4), m), w[3] = wasm_u16x8_shr(q, 12);
    return wb->d;
}

static inline v128_t pdot(const v128_t w[4], const v128_t x[4]) {
    return wasm_i32x4_add(wasm_i32x4_add(wasm_i32x4_dot_i16x8(w[0], x[0]), wasm_i32x4_dot_i16x8(w[1], x[1])),
                          wasm_i32x4_add(wasm_i32x4_dot_i16x8(w[2], x[2]), wasm_i32x4_dot_i16x8(w[3], x[3])));
}

/* Lane l = the sum of p[l]'s four lanes. */
static inline v128_t transpose_add(v128_t p0, v128_t p1, v128_t p2, v128_t p3) {
    v128_t s01 = wasm_i32x4_add(wasm_i32x4_shuffle(p0, p1, 0, 4, 1, 5), wasm_i32x4_shuffle(p0, p1, 2, 6, 3, 7));
    v128_t s23 = wasm_i32x4_add(wasm_i32x4_shuffle(p2, p3, 0, 4, 1, 5), wasm_i32x4_shuffle(p2, p3, 2, 6, 3, 7));
    return wasm_i32x4_add(wasm_i32x4_shuffle(s01, s23, 0, 1, 4, 5), wasm_i32x4_shuffle(s01, s23, 2, 3, 6, 7));
}

/* Four weight rows r[0..3], blocks [b0, b0 + n), nt tokens of widened activations xs[t] (xs[t][i]: block b0 + i):
 * acc[t] lane l += (d_w * d_x) * isum block by block. */
static void quant_group(td_dtype type, const void *const r[4], int64_t b0, int64_t n, const xblock *const xs[4],
                        int nt, v128_t acc[4]) {
    const int q4 = type == TD_DTYPE_Q4_0;
    for (int64_t i = 0; i < n; i++) {
        int64_t b = b0 + i;
        v128_t w0[4], w1[4], w2[4], w3[4];
        uint16_t h0 = wparity(type, r[0], b, w0), h1 = wparity(type, r[1], b, w1);
        uint16_t h2 = wparity(type, r[2], b, w2), h3 = wparity(type, r[3], b, w3);
        v128_t dw = f16_to_f32x4(wasm_u32x4_make(h0, h1, h2, h3));
        for (int t = 0; t < nt; t++) {
            const xblock *xb = &xs[t][i];
            v128_t isum = transpose_add(pdot(w0, xb->v), pdot(w1, xb->v), pdot(w2, xb->v), pdot(w3, xb->v));
            if (q4) isum = wasm_i32x4_sub(isum, wasm_i32x4_splat(8 * xb->sum));
            v128_t scale = wasm_f32x4_mul(dw, wasm_f32x4_splat(xb->d));
            acc[t] = wasm_f32x4_add(acc[t], wasm_f32x4_mul(scale, wasm_f32x4_convert_i32x4(isum)));
        }
    }
}

static void matmul_quant(const td_mat *w, const int32_t *rows, const td_qrows *xr, int64_t T, float *y, int64_t ldy,
                         int64_t j0, int64_t j1) {
    int64_t nb = w->cols / TD_QBLOCK, full = j0 + (j1 - j0) / 4 * 4;
    xblock xbuf[4][XCHUNK];
    const xblock *xs[4] = {xbuf[0], xbuf[1], xbuf[2], xbuf[3]};
    v128_t acc[RSLICE][4];
    for (int64_t s0 = j0; s0 < full; s0 += 4 * RSLICE) { /* a slice of up to RSLICE groups of 4 rows */
        int64_t ng = (full - s0) / 4 < RSLICE ? (full - s0) / 4 : RSLICE;
        for (int64_t t0 = 0; t0 < T; t0 += 4) {
            int nt = T - t0 < 4 ? (int)(T - t0) : 4;
            for (int64_t g = 0; g < ng; g++)
                for (int t = 0; t < nt; t++) acc[g][t] = wasm_f32x4_splat(0.0f);
            for (int64_t b0 = 0; b0 < nb; b0 += XCHUNK) { /* each chunk widened once for the slice's rows */
                int64_t n = nb - b0 < XCHUNK ? nb - b0 : XCHUNK;
                for (int t = 0; t < nt; t++) widen(xr, t0 + t, b0, n, xbuf[t]);
                for (int64_t g = 0; g < ng; g++) {
                    const void *r[4];
                    for (int l = 0; l < 4; l++) {
                        int64_t j = s0 + 4 * g + l;
                        r[l] = td_mat_row(w, rows ? rows[j] : j);
                    }
                    quant_group(w->type, r, b0, n, xs, nt, acc[g]);
                }
            }
            for (int64_t g = 0; g < ng; g++)
                for (int t = 0; t < nt; t++) {
                    float out[4];
                    wasm_v128_store(out, acc[g][t]);
                    for (int l = 0; l < 4; l++) y[(t0 + t) * ldy + s0 + 4 * g + l] = out[l];
                }
        }
    }
    for (int64_t j = full; j < j1; j++) {
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

/* Attention (td_attn_rows_ref's bits, fp32 KV; f16 KV takes the reference): the scores of four keys at a time ride
 * in the lanes, each lane a serial sum over the dimensions, acc = acc + q[d] * k[d] (rows4: the keys as weight
 * rows, up to four query rows as tokens), then * scale; td_softmax; the values accumulated with the dimensions in
 * the lanes, out[d] = out[d] + p_i * v_i[d] for the keys in order: the reference's operations, element by element. */
static inline const float *attn_row(const td_attn_keys *ks, int which, int64_t i, int64_t dim) {
    if (i < ks->n_pre) return (which ? ks->pre_v : ks->pre_k) + i * dim;
    return (const float *)(which ? ks->v : ks->k) + (int64_t)ks->idx[i] * ks->stride;
}

void td_attn_rows_wasm128(const float *const *q, float *const *out, const int64_t *n, int64_t R,
                          const td_attn_keys *keys, int64_t dim, float scale, float *scratch) {
    if (keys->kv_f16) {
        td_attn_rows_ref(q, out, n, R, keys, dim, scale, scratch);
        return;
    }
    int64_t max_n = 0;
    for (int64_t r = 0; r < R; r++) max_n = n[r] > max_n ? n[r] : max_n;
    for (int64_t r0 = 0; r0 < R; r0 += 4) { /* scores of up to four query rows, row r's at scratch + r * max_n */
        int nr = R - r0 < 4 ? (int)(R - r0) : 4;
        int64_t most = 0;
        for (int t = 0; t < nr; t++) most = n[r0 + t] > most ? n[r0 + t] : most;
        int64_t i = 0;
        for (; i + 4 <= most; i += 4) {
            const void *kr[4];
            v128_t acc[4];
            for (int l = 0; l < 4; l++) kr[l] = attn_row(keys, 0, i + l, dim);
            rows4(kr, TD_DTYPE_F32, dim, q + r0, nr, acc);
            for (int t = 0; t < nr; t++) {
                float s4[4];
                wasm_v128_store(s4, wasm_f32x4_mul(acc[t], wasm_f32x4_splat(scale)));
                for (int l = 0; l < 4; l++) scratch[(r0 + t) * max_n + i + l] = s4[l];
            }
        }
        for (; i < most; i++) {
            const float *k = attn_row(keys, 0, i, dim);
            for (int t = 0; t < nr; t++) {
                float acc = 0.0f;
                for (int64_t d = 0; d < dim; d++) acc += q[r0 + t][d] * k[d];
                scratch[(r0 + t) * max_n + i] = acc * scale;
            }
        }
    }
    for (int64_t r = 0; r < R; r++) {
        float *s = scratch + r * max_n, *o = out[r];
        td_softmax(s, n[r]);
        for (int64_t d = 0; d < dim; d++) o[d] = 0.0f;
        for (int64_t i = 0; i < n[r]; i++) {
            const float *v = attn_row(keys, 1, i, dim);
            v128_t p = wasm_f32x4_splat(s[i]);
            int64_t d = 0;
            for (; d + 4 <= dim; d += 4)
                wasm_v128_store(o + d, wasm_f32x4_add(wasm_v128_load(o + d), wasm_f32x4_mul(p, wasm_v128_load(v + d))));
            for (; d < dim; d++) o[d] += s[i] * v[d];
        }
    }
}
