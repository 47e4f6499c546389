/* The kernel table: every slot of the dispatch table (td_kernels), in every kernel set this CPU runs, against the
 * scalar set (the reference) on random inputs of odd sizes, each slot held to the contract the table states for
 * it: bit-exact (memcmp) or within a stated tolerance, with the reason. On top of its contract every slot keeps
 * the determinism contract of kernels.h, bit for bit: a result does not depend on the row range, the row order,
 * the tokens processed with it or the rows that share a call. The table prints one line per slot and kernel set
 * with the worst error measured.
 * Then the references themselves: the Q8_0 / Q4_0 block formats, the packed products' distance from the exact
 * product, and the half-float conversions. */
#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/kernels.h"
#include "kernels/cpu/quant.h"
#include "test_util.h"
#include "util/half.h"

/* ---- the table's machinery ---- */

typedef struct slot_case slot_case;

/* One row of the table run on one kernel set. */
typedef struct run {
    const slot_case *c;
    const td_kernels *ks, *ref;
    double tol;   /* 0: bit-exact */
    double worst; /* the largest error seen, in the row's metric */
    long failed;
} run;

struct slot_case {
    const char *slot;   /* the td_kernels field, and which of its cases */
    int arg;            /* the case: a weight type, a td_qrows layout, flags */
    int packed;         /* 1: Q8_0 / Q4_0 weights packed as the kernel set packs them (its td_kernels.pack); 2: BF16
                           weights with activations rounded to bf16 (sets with td_kernels.bf16) */
    double tol;         /* 0: bit-exact; else the largest error allowed, in `metric` */
    const char *metric; /* what an error is */
    const char *why;    /* why the slot is bit-exact, or why it is not and why the tolerance holds */
    void (*fn)(run *r);
};

/* One compared value: its error in the row's metric, and whether its bits equal the reference's. */
__attribute__((format(printf, 4, 5))) static void judge(run *r, double err, int same, const char *fmt, ...) {
    if (!(err <= r->worst)) r->worst = err; /* NaN sticks */
    if (r->tol == 0 ? same : err <= r->tol) return;
    if (r->failed++ < 5) {
        va_list ap;
        va_start(ap, fmt);
        fprintf(stderr, "%s: %s on %s: ", __FILE__, r->c->slot, r->ks->name);
        if (r->tol == 0) fprintf(stderr, "not bit-exact (error %g): ", err);
        else fprintf(stderr, "error %g > %g: ", err, r->tol);
        vfprintf(stderr, fmt, ap);
        fputc('\n', stderr);
        va_end(ap);
    }
    td_test_failures++;
}

/* A determinism check: the kernel set gives the same bits another way. */
__attribute__((format(printf, 5, 6))) static void same_bits(run *r, const void *a, const void *b, size_t bytes,
                                                             const char *fmt, ...) {
    if (memcmp(a, b, bytes) == 0) return;
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: %s on %s is not deterministic: ", __FILE__, r->c->slot, r->ks->name);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    td_test_failures++;
}

static int same_float(float a, float b) { return memcmp(&a, &b, sizeof a) == 0; }

static float *floats(int64_t n) { return malloc((size_t)(n > 0 ? n : 1) * sizeof(float)); }

/* ---- matmul ---- */

static void *make_weights(td_dtype t, int64_t rows, int64_t cols, uint64_t *rng, td_mat *w) {
    size_t es = td_dtype_size(t);
    uint8_t *data = malloc((size_t)(rows * cols) * es + 1); /* +1: odd row starts are fine for scalar loads */
    memset(w, 0, sizeof *w); /* no packed copy */
    for (int64_t i = 0; i < rows * cols; i++) {
        float v = td_test_uniform(rng, -1.0f, 1.0f);
        if (t == TD_DTYPE_F32) memcpy(data + 4 * i, &v, 4);
        else {
            uint16_t h = t == TD_DTYPE_F16 ? td_f32_to_f16(v) : td_f32_to_bf16(v);
            memcpy(data + 2 * i, &h, 2);
        }
    }
    w->type = t;
    w->rows = rows;
    w->cols = cols;
    w->row_bytes = (size_t)cols * es;
    w->data = data;
    return data;
}

/* The determinism contract of a matmul slot: ya [T, rows], the whole product in one call, again bit for bit
 * (1) in three row ranges written into a wider output (ldy > rows), (2) through a reversed row list in two ranges,
 * (3) each row alone through a one-entry row list, (4) one token at a time (token t's activations: x + t * ldx,
 * or one[t] when quantised). */
static void matmul_splits(run *r, const td_mat *w, const float *x, int64_t ldx, const td_qrows *xq,
                          const td_qrows *one, int64_t T, const float *ya) {
    const int64_t rows = w->rows, ldy = rows + 3;
    float *y = floats(T * ldy), *y1 = floats(rows);
    int32_t *rev = malloc((size_t)rows * sizeof *rev);
    int64_t cut[4] = {0, rows / 3, 2 * rows / 3 + 1 < rows ? 2 * rows / 3 + 1 : rows, rows};
    memset(y, 0xff, (size_t)(T * ldy) * sizeof *y); /* NaN where nothing was written */
    for (int i = 0; i < 3; i++) r->ks->matmul(w, NULL, x, xq, T, ldx, y, ldy, cut[i], cut[i + 1]);
    for (int64_t t = 0; t < T; t++)
        same_bits(r, y + t * ldy, ya + t * rows, (size_t)rows * sizeof *y, "row ranges, token %lld of %lld (cols %lld)",
                  (long long)t, (long long)T, (long long)w->cols);
    for (int64_t j = 0; j < rows; j++) rev[j] = (int32_t)(rows - 1 - j);
    r->ks->matmul(w, rev, x, xq, T, ldx, y, ldy, 0, cut[1]);
    r->ks->matmul(w, rev, x, xq, T, ldx, y, ldy, cut[1], rows);
    for (int64_t t = 0; t < T; t++)
        for (int64_t j = 0; j < rows; j++)
            same_bits(r, &y[t * ldy + j], &ya[t * rows + rows - 1 - j], sizeof *y,
                      "reversed row list, token %lld row %lld (cols %lld, T %lld)", (long long)t, (long long)j,
                      (long long)w->cols, (long long)T);
    for (int64_t j = 0; j < rows; j++) {
        int32_t idx[1] = {(int32_t)j};
        r->ks->matmul(w, idx, x, xq, T, ldx, y, 1, 0, 1);
        for (int64_t t = 0; t < T; t++)
            same_bits(r, &y[t], &ya[t * rows + j], sizeof *y, "row %lld alone, token %lld (cols %lld, T %lld)",
                      (long long)j, (long long)t, (long long)w->cols, (long long)T);
    }
    for (int64_t t = 0; t < T; t++) {
        r->ks->matmul(w, NULL, x + t * ldx, one ? &one[t] : NULL, 1, ldx, y1, rows, 0, rows);
        same_bits(r, y1, ya + t * rows, (size_t)rows * sizeof *y1, "token %lld alone of %lld (cols %lld rows %lld)",
                  (long long)t, (long long)T, (long long)w->cols, (long long)rows);
    }
    free(y), free(y1), free(rev);
}

/* F32 / F16 / BF16 weights (arg: the type). Error relative to the magnitude of the terms, sum_k |w_k x_k|. */
static void case_matmul_float(run *r) {
    static const int64_t cols_list[] = {1, 7, 8, 33, 4097};
    static const int64_t rows_list[] = {1, 7, 33};
    static const int64_t T_list[] = {1, 2, 3, 5, 67};
    const td_dtype type = (td_dtype)r->c->arg;
    uint64_t rng = 42;
    for (size_t ci = 0; ci < 5; ci++)
        for (size_t ri = 0; ri < 3; ri++)
            for (size_t Ti = 0; Ti < 5; Ti++) {
                int64_t cols = cols_list[ci], rows = rows_list[ri], T = T_list[Ti];
                if (cols == 4097 && T == 67 && td_test_sanitized()) continue;
                td_mat w;
                void *data = make_weights(type, rows, cols, &rng, &w);
                float *x = floats(T * cols), *wf = floats(rows * cols), *yr = floats(T * rows), *ya = floats(T * rows);
                for (int64_t i = 0; i < T * cols; i++) x[i] = td_test_uniform(&rng, -2.0f, 2.0f);
                for (int64_t j = 0; j < rows; j++) td_row_to_f32(wf + j * cols, &w, j);
                r->ref->matmul(&w, NULL, x, NULL, T, cols, yr, rows, 0, rows);
                r->ks->matmul(&w, NULL, x, NULL, T, cols, ya, rows, 0, rows);
                for (int64_t t = 0; t < T; t++)
                    for (int64_t j = 0; j < rows; j++) {
                        double mag = 0;
                        for (int64_t k = 0; k < cols; k++) mag += fabs((double)wf[j * cols + k] * x[t * cols + k]);
                        float a = yr[t * rows + j], b = ya[t * rows + j];
                        judge(r, fabs((double)a - b) / (mag + 1e-30), same_float(a, b),
                              "cols %lld rows %lld T %lld, token %lld row %lld: ref %.9g, got %.9g", (long long)cols,
                              (long long)rows, (long long)T, (long long)t, (long long)j, a, b);
                    }
                matmul_splits(r, &w, x, cols, NULL, NULL, T, ya);
                free(data), free(x), free(wf), free(yr), free(ya);
            }
}

/* Random Q8_0 / Q4_0 operands: weights *wf [rows, cols] in [-1, 1], quantised into the returned rows (one int8 at
 * -128, legal in a GGUF file), and activations *xf [T, cols] in [-2, 2] with a zero element and, when T > 2, a
 * zero block. */
static uint8_t *quant_operands(td_dtype type, int64_t rows, int64_t cols, int64_t T, uint64_t *rng, float **wf,
                               float **xf) {
    size_t rb = td_dtype_row_bytes(type, cols);
    float *w = floats(rows * cols), *x = floats(T * cols);
    uint8_t *wq = malloc((size_t)rows * rb);
    for (int64_t i = 0; i < rows * cols; i++) w[i] = td_test_uniform(rng, -1, 1);
    for (int64_t i = 0; i < T * cols; i++) x[i] = td_test_uniform(rng, -2, 2);
    if (T > 2) x[cols + 3] = 0.0f, memset(x + 2 * cols, 0, TD_QBLOCK * sizeof *x); /* a zero block */
    for (int64_t j = 0; j < rows; j++) {
        if (type == TD_DTYPE_Q8_0) td_quantize_q8_0(w + j * cols, (td_block_q8_0 *)(void *)(wq + j * rb), cols);
        else td_quantize_q4_0(w + j * cols, (td_block_q4_0 *)(void *)(wq + j * rb), cols);
    }
    if (type == TD_DTYPE_Q8_0) ((td_block_q8_0 *)(void *)wq)->qs[5] = -128;
    /* the extremes of x8's 16-bit Q4_0 sums (tile_q4): a token whose values are all -127, rows whose q are all 0
     * (w = -8: each half of a lane sums to 8 x 16 x 127, the most) and all 15 */
    if (T > 3)
        for (int64_t k = 0; k < cols; k++) x[(T - 1) * cols + k] = -2.0f;
    for (int64_t j = 0; type == TD_DTYPE_Q4_0 && rows > 2 && j < 2; j++)
        for (int64_t b = 0; b < cols / TD_QBLOCK; b++)
            memset(((td_block_q4_0 *)(void *)(wq + (rows - 1 - j) * rb))[b].qs, j ? 0xff : 0, TD_QBLOCK / 2);
    *wf = w, *xf = x;
    return wq;
}

/* Q8_0 / Q4_0 weights (arg: the type), unpacked or packed as the kernel set packs them, times activations
 * quantised by the reference quantiser into the layout the product takes (each slot's quantiser has its own row).
 * The error is relative to sum_k |w_k x_k| over the dequantised operands (unpacked) or the dequantised weights
 * and the unquantised activations (packed). */
static void case_matmul_quant(run *r) {
    static const int64_t cols_list[] = {32, 96, 224, 544, 4096}; /* 1, 3, 7, 17, 128 blocks: padded groups */
    /* 300 rows: 19 slabs of 16 (r16), more than the AMX kernel keeps at a time (a group of 16, then 3); for one token,
     * r16's decode path over all 19 */
    static const int64_t rows_list[] = {1, 7, 33, 300};
    static const int64_t T_list[] = {1, 3, 4, 5, 9, 67}; /* decode and prefill paths, tile remainders */
    const td_dtype type = (td_dtype)r->c->arg;
    const int lanes = r->c->packed ? r->ks->pack : 0;
    uint64_t rng = lanes == TD_X8_LANES ? 91 : 77;
    for (int ci = 0; ci < 5; ci++)
        for (int ri = 0; ri < 4; ri++)
            for (int Ti = 0; Ti < 6; Ti++) {
                int64_t cols = cols_list[ci], rows = rows_list[ri], T = T_list[Ti], nb = cols / TD_QBLOCK;
                if (cols == 4096 && T == 67 && td_test_sanitized()) continue;
                if (rows == 300 && (cols > 96 || (T < 9 && T != 1))) continue;
                size_t rb = td_dtype_row_bytes(type, cols);
                float *wf, *xf, *xd = floats(T * cols), *yr = floats(T * rows), *ya = floats(T * rows);
                uint8_t *wq = quant_operands(type, rows, cols, T, &rng, &wf, &xf);
                td_qpack *pk = lanes ? td_qpack_new(type, rows, cols, wq, rb, lanes) : NULL;
                CHECK(!lanes || pk != NULL);
                td_mat w = {type, rows, cols, rb, wq, pk};
                for (int64_t j = 0; j < rows; j++) td_row_to_f32(wf + j * cols, &w, j); /* now the weights' values */
                int layout = td_qrows_layout(type, pk);
                void *qbuf = calloc(1, td_qrows_bytes(T, cols)), **qone = malloc((size_t)T * sizeof *qone);
                td_qrows xq, *one = malloc((size_t)T * sizeof *one);
                td_qrows_bind(&xq, qbuf, T, cols, layout);
                r->ref->quantize_rows(xf, cols, &xq, 0, T);
                for (int64_t t = 0; t < T; t++) {
                    qone[t] = calloc(1, td_qrows_bytes(1, cols));
                    td_qrows_bind(&one[t], qone[t], 1, cols, layout);
                    r->ref->quantize_rows(xf + t * cols, cols, &one[t], 0, 1);
                    if (layout == TD_QROWS_PLAIN) td_dequantize_q8_0(xq.q + t * nb, xd + t * cols, cols);
                    else memcpy(xd + t * cols, xf + t * cols, (size_t)cols * sizeof *xd);
                }
                r->ref->matmul(&w, NULL, xf, &xq, T, cols, yr, rows, 0, rows);
                r->ks->matmul(&w, NULL, xf, &xq, T, cols, ya, rows, 0, rows);
                for (int64_t t = 0; t < T; t++)
                    for (int64_t j = 0; j < rows; j++) {
                        double mag = 0;
                        for (int64_t k = 0; k < cols; k++) mag += fabs((double)wf[j * cols + k] * xd[t * cols + k]);
                        float a = yr[t * rows + j], b = ya[t * rows + j];
                        judge(r, fabs((double)a - b) / (mag + 1e-30), same_float(a, b),
                              "cols %lld rows %lld T %lld, token %lld row %lld: ref %.9g, got %.9g", (long long)cols,
                              (long long)rows, (long long)T, (long long)t, (long long)j, a, b);
                    }
                matmul_splits(r, &w, xf, cols, &xq, one, T, ya);
                for (int64_t t = 0; t < T; t++) free(qone[t]);
                td_qpack_free(pk);
                free(wf), free(xf), free(xd), free(yr), free(ya), free(wq), free(qbuf), free(qone), free(one);
            }
}

/* BF16 weights times activations rounded to bf16, as the engine gives them to sets that have a BF16 kernel
 * (td_kernels.bf16): against the reference that spells out vdpbf16ps. Besides weights
 * in [-1, 1] and activations in [-2, 2], rows at magnitudes where the products and sums fall below FLT_MIN
 * (1e-19 each: products ~1e-38), where the flushing to zero and the rounding of tiny sums must match. */
static void case_matmul_bf16(run *r) {
    static const int64_t cols_list[] = {1, 7, 33, 96, 4097};
    static const int64_t rows_list[] = {1, 7, 33};
    static const int64_t T_list[] = {1, 3, 4, 5, 9, 67};
    uint64_t rng = 23;
    for (int tiny = 0; tiny < 2; tiny++)
        for (size_t ci = 0; ci < 5; ci++)
            for (size_t ri = 0; ri < 3; ri++)
                for (size_t Ti = 0; Ti < 6; Ti++) {
                    int64_t cols = cols_list[ci], rows = rows_list[ri], T = T_list[Ti];
                    if ((cols == 4097 && T == 67 && td_test_sanitized()) || (tiny && T > 5)) continue;
                    td_mat w;
                    void *data = make_weights(TD_DTYPE_BF16, rows, cols, &rng, &w);
                    float scale = tiny ? 1e-19f : 1.0f;
                    for (int64_t i = 0; i < rows * cols && tiny; i++) {
                        uint16_t h;
                        memcpy(&h, (uint8_t *)data + 2 * i, 2);
                        h = td_f32_to_bf16(td_bf16_to_f32(h) * scale);
                        memcpy((uint8_t *)data + 2 * i, &h, 2);
                    }
                    int layout = td_kernels_layout(r->ks, &w, 1); /* a context at TD_PRECISION_BF16 */
                    CHECK(td_kernels_layout(r->ks, &w, 0) == -1); /* the default: fp32 activations */
                    CHECK(layout == TD_QROWS_BF16);
                    float *x = floats(T * cols), *wf = floats(rows * cols), *yr = floats(T * rows), *ya = floats(T * rows);
                    for (int64_t i = 0; i < T * cols; i++) x[i] = td_test_uniform(&rng, -2.0f, 2.0f) * scale;
                    if (T > 2 && cols > 3) x[cols + 3] = 0.0f, x[2 * cols + 1] = -0.0f;
                    for (int64_t j = 0; j < rows; j++) td_row_to_f32(wf + j * cols, &w, j);
                    void *qbuf = calloc(1, td_qrows_bytes(T, cols)), **qone = malloc((size_t)T * sizeof *qone);
                    td_qrows xq, *one = malloc((size_t)T * sizeof *one);
                    td_qrows_bind(&xq, qbuf, T, cols, layout);
                    r->ref->quantize_rows(x, cols, &xq, 0, T);
                    for (int64_t t = 0; t < T; t++) {
                        qone[t] = calloc(1, td_qrows_bytes(1, cols));
                        td_qrows_bind(&one[t], qone[t], 1, cols, layout);
                        r->ref->quantize_rows(x + t * cols, cols, &one[t], 0, 1);
                    }
                    r->ref->matmul(&w, NULL, x, &xq, T, cols, yr, rows, 0, rows);
                    r->ks->matmul(&w, NULL, x, &xq, T, cols, ya, rows, 0, rows);
                    for (int64_t t = 0; t < T; t++)
                        for (int64_t j = 0; j < rows; j++) {
                            double mag = 0;
                            for (int64_t k = 0; k < cols; k++) mag += fabs((double)wf[j * cols + k] * x[t * cols + k]);
                            float a = yr[t * rows + j], b = ya[t * rows + j];
                            judge(r, fabs((double)a - b) / (mag + 1e-300), same_float(a, b),
                                  "cols %lld rows %lld T %lld%s, token %lld row %lld: ref %a, got %a", (long long)cols,
                                  (long long)rows, (long long)T, tiny ? " (tiny)" : "", (long long)t, (long long)j, a, b);
                        }
                    matmul_splits(r, &w, x, cols, &xq, one, T, ya);
                    for (int64_t t = 0; t < T; t++) free(qone[t]);
                    free(data), free(x), free(wf), free(yr), free(ya), free(qbuf), free(qone), free(one);
                }
}

/* ---- attention ---- */

/* attn_rows (arg: 1 = f16 cache, 2 = the first keys gathered beforehand as fp32 rows, as the engine does once
 * per layer for a batch's shared prefix (as many as the shortest row reads) or for a prefill's sequence (as many as
 * the longest row reads), in turn), over three families of shapes: groups of R rows of uneven lengths (like
 * causal rows), single rows of 1, 7, 33 and 300 keys (one query head), and one long group. Every row's result is
 * also the same alone as in any group (the engine groups rows differently in batched, serial and fresh runs), with
 * or without gathered keys, and from an f16 cache as from an f32 cache holding the same values. */
static void case_attn_rows(run *r) {
    static const int64_t dims[] = {1, 7, 8, 33, 128};
    static const int64_t Rs[] = {1, 2, 3, 8};
    const int f16 = r->c->arg & 1, gathered = (r->c->arg & 2) != 0;
    uint64_t rng = 11;
    static const int64_t singles[] = {1, 7, 33, 300};
    static const int64_t long_n[] = {4097, 1, 2000};
    for (size_t cfg = 0; cfg < 5 * 4 + 5 * 4 + 1; cfg++) {
        /* dim x R groups over 310 cells; dim x single rows; 3 rows of 4097, 1 and 2000 keys over 4100 cells */
        int single = cfg >= 20 && cfg < 40, long_one = cfg == 40;
        size_t di = long_one ? 4 : (cfg % 20) / 4;
        int64_t dim = dims[di], R = long_one ? 3 : single ? 1 : Rs[cfg % 4], stride = dim + 3;
        int64_t cells = long_one ? 4100 : 310, n[8], max_n = 0, min_n = INT64_MAX;
        for (int64_t i = 0; i < R; i++) {
            n[i] = long_one ? long_n[i] : single ? singles[cfg % 4] : 1 + (i * 37 + 5 * (int64_t)di) % 300;
            max_n = n[i] > max_n ? n[i] : max_n;
            min_n = n[i] < min_n ? n[i] : min_n;
        }
        float *kf = floats(cells * stride), *vf = floats(cells * stride);
        uint16_t *kh = malloc((size_t)(cells * stride) * 2), *vh = malloc((size_t)(cells * stride) * 2);
        for (int64_t i = 0; i < cells * stride; i++) {
            kf[i] = td_test_uniform(&rng, -1, 1), vf[i] = td_test_uniform(&rng, -1, 1);
            kh[i] = td_f32_to_f16(kf[i]), vh[i] = td_f32_to_f16(vf[i]);
            if (f16) kf[i] = td_f16_to_f32(kh[i]), vf[i] = td_f16_to_f32(vh[i]); /* the same values */
        }
        int32_t *idx = malloc((size_t)cells * sizeof *idx);
        for (int64_t i = 0; i < cells; i++) idx[i] = (int32_t)((i * 7 + 3) % cells); /* scattered cells */
        int64_t n_pre = cfg % 2 ? max_n : min_n;
        float *pk = floats(n_pre * dim), *pv = floats(n_pre * dim);
        for (int64_t i = 0; i < n_pre; i++)
            for (int64_t d = 0; d < dim; d++)
                pk[i * dim + d] = kf[(int64_t)idx[i] * stride + d], pv[i * dim + d] = vf[(int64_t)idx[i] * stride + d];
        float *qs = floats(R * dim), *o_ref = floats(R * dim), *o = floats(R * dim), *o2 = floats(R * dim);
        float *scratch = floats(td_attn_rows_scratch(R, max_n, dim, f16));
        const float *qp[8];
        float *pr[8], *pa[8], *pb[8];
        for (int64_t i = 0; i < R; i++) {
            for (int64_t d = 0; d < dim; d++) qs[i * dim + d] = td_test_uniform(&rng, -2, 2);
            qp[i] = qs + i * dim, pr[i] = o_ref + i * dim, pa[i] = o + i * dim, pb[i] = o2 + i * dim;
        }
        td_attn_keys keys = {f16 ? (const void *)kh : kf, f16 ? (const void *)vh : vf, f16, idx, stride, NULL, NULL, 0};
        td_attn_keys plain = keys, as_f32 = {kf, vf, 0, idx, stride, NULL, NULL, 0};
        if (gathered) keys.pre_k = pk, keys.pre_v = pv, keys.n_pre = n_pre;
        r->ref->attn_rows(qp, pr, n, R, &keys, dim, 0.125f, scratch);
        r->ks->attn_rows(qp, pa, n, R, &keys, dim, 0.125f, scratch);
        for (int64_t i = 0; i < R; i++)
            for (int64_t d = 0; d < dim; d++) {
                float a = o_ref[i * dim + d], b = o[i * dim + d];
                judge(r, fabs((double)a - b), same_float(a, b), "dim %lld R %lld, row %lld of %lld keys: ref %.9g, got %.9g",
                      (long long)dim, (long long)R, (long long)i, (long long)n[i], a, b);
            }
        for (int64_t i = 0; i < R; i++) {
            r->ks->attn_rows(&qp[i], &pb[i], &n[i], 1, &keys, dim, 0.125f, scratch);
            same_bits(r, pb[i], pa[i], (size_t)dim * sizeof(float), "row %lld alone differs from its group of %lld (dim %lld)",
                      (long long)i, (long long)R, (long long)dim);
        }
        if (gathered) {
            r->ks->attn_rows(qp, pb, n, R, &plain, dim, 0.125f, scratch);
            same_bits(r, o2, o, (size_t)(R * dim) * sizeof(float), "%lld gathered keys change the result (dim %lld R %lld)",
                      (long long)n_pre, (long long)dim, (long long)R);
        }
        if (f16) {
            if (gathered) as_f32.pre_k = pk, as_f32.pre_v = pv, as_f32.n_pre = n_pre;
            r->ks->attn_rows(qp, pb, n, R, &as_f32, dim, 0.125f, scratch);
            same_bits(r, o2, o, (size_t)(R * dim) * sizeof(float), "an f16 cache differs from an f32 cache of its values (dim %lld R %lld)",
                      (long long)dim, (long long)R);
        }
        free(kf), free(vf), free(kh), free(vh), free(idx), free(pk), free(pv);
        free(qs), free(o_ref), free(o), free(o2), free(scratch);
    }
}

/* ---- DeltaNet ---- */


/* deltanet_step over 40 tokens, each kernel set carrying its own state, with realistic inputs (as test_deltanet):
 * unit-norm keys, queries scaled by 1/sqrt(dk), log decays -exp(A_log) softplus(.), write strengths in (0, 1). */
static void case_deltanet_step(run *r) {
    static const int64_t dims[][2] = {{19, 1}, {19, 7}, {19, 16}, {19, 33}, {19, 128}, {128, 128}};
    uint64_t rng = 5;
    for (size_t di = 0; di < sizeof dims / sizeof dims[0]; di++) {
        const int64_t dk = dims[di][0], dv = dims[di][1], n = 40;
        float *S1 = calloc((size_t)(dk * dv), sizeof(float)), *S2 = calloc((size_t)(dk * dv), sizeof(float));
        float *q = floats(dk), *k = floats(dk), *v = floats(dv), *o1 = floats(dv), *o2 = floats(dv);
        float A = logf(td_test_uniform(&rng, 1.0f, 16.0f));
        for (int64_t t = 0; t < n; t++) {
            for (int64_t i = 0; i < dk; i++) q[i] = td_test_uniform(&rng, -1, 1), k[i] = td_test_uniform(&rng, -1, 1);
            td_l2norm(q, dk, 1e-6f);
            td_l2norm(k, dk, 1e-6f);
            for (int64_t i = 0; i < dk; i++) q[i] *= 1.0f / sqrtf((float)dk);
            for (int64_t i = 0; i < dv; i++) v[i] = td_test_uniform(&rng, -2, 2);
            float g = -expf(A) * td_softplus(td_test_uniform(&rng, -4.0f, 0.5f));
            float beta = 1.0f / (1.0f + expf(-td_test_uniform(&rng, -2, 2)));
            r->ref->deltanet_step(S1, q, k, v, g, beta, dk, dv, o1);
            r->ks->deltanet_step(S2, q, k, v, g, beta, dk, dv, o2);
            judge(r, td_test_rel_diff(o2, o1, dv), memcmp(o1, o2, (size_t)dv * sizeof *o1) == 0,
                  "dk %lld dv %lld, output of token %lld", (long long)dk, (long long)dv, (long long)t);
        }
        judge(r, td_test_rel_diff(S2, S1, dk * dv), memcmp(S1, S2, (size_t)(dk * dv) * sizeof *S1) == 0,
              "dk %lld dv %lld, state after %lld tokens", (long long)dk, (long long)dv, (long long)n);
        free(S1), free(S2), free(q), free(k), free(v), free(o1), free(o2);
    }
}

/* ---- the activation quantiser ---- */

/* Bytes that differ between two byte ranges. */
static long bytes_diff(const void *a, const void *b, size_t n) {
    long diff = 0;
    for (size_t i = 0; i < n; i++) diff += ((const uint8_t *)a)[i] != ((const uint8_t *)b)[i];
    return diff;
}

/* Bytes that differ between rows [0, T) of two td_qrows of one layout (every array the layout has). */
static long qrows_diff(const td_qrows *a, const td_qrows *b, int64_t T) {
    size_t ng = (size_t)(T * a->nbg), nq = (size_t)(T * a->nb);
    if (a->bf16) return bytes_diff(a->h, b->h, nq * TD_QBLOCK * sizeof(uint16_t));
    if (a->x8 == 1)
        return bytes_diff(a->qw, b->qw, ng * TD_X8_GROUP * sizeof(int16_t)) +
               bytes_diff(a->d, b->d, ng * TD_X8_LANES * sizeof(float));
    if (a->x8)
        return bytes_diff(a->qi, b->qi, ng * TD_X8_GROUP) + bytes_diff(a->d, b->d, ng * TD_X8_LANES * sizeof(float)) +
               bytes_diff(a->c, b->c, ng * 2 * TD_X8_LANES * sizeof(int16_t));
    if (!a->x16) return bytes_diff(a->q, b->q, nq * sizeof(td_block_q8_0)) + bytes_diff(a->d, b->d, nq * sizeof(float));
    long diff = bytes_diff(a->qi, b->qi, ng * TD_X16_GROUP) + bytes_diff(a->d, b->d, ng * TD_X16_LANES * sizeof(float)) +
                bytes_diff(a->s, b->s, ng * TD_X16_LANES * sizeof(int32_t));
    if (a->x16 > 1)
        diff += bytes_diff(a->qi2, b->qi2, ng * TD_X16_GROUP) + bytes_diff(a->d2, b->d2, ng * TD_X16_LANES * sizeof(float)) +
                bytes_diff(a->s2, b->s2, ng * TD_X16_LANES * sizeof(int32_t));
    return diff;
}

/* quantize_rows into one layout (arg: TD_QROWS_*), the whole batch and in row ranges; inputs with a zero element,
 * a zero block and a block of exact ties (x + 0.5 at d = 1). The bf16 layout also gets widths that are not
 * multiples of 32 (zeros past the end) and values at its edges: ties at 8 bits, a subnormal, the largest float
 * (rounds to infinity), infinity, NaN. */
static void case_quantize_rows(run *r) {
    static const int64_t block_cols[] = {32, 96, 224, 544, 4096}, any_cols[] = {1, 7, 33, 544, 4097};
    static const int64_t T_list[] = {1, 3, 67};
    const int layout = r->c->arg;
    uint64_t rng = 31;
    for (int ci = 0; ci < 5; ci++)
        for (int Ti = 0; Ti < 3; Ti++) {
            int64_t cols = layout == TD_QROWS_BF16 ? any_cols[ci] : block_cols[ci], T = T_list[Ti];
            float *xf = floats(T * cols);
            for (int64_t i = 0; i < T * cols; i++) xf[i] = td_test_uniform(&rng, -2, 2);
            if (T > 2 && cols >= TD_QBLOCK) {
                xf[3] = 0.0f;
                memset(xf + 2 * cols, 0, TD_QBLOCK * sizeof *xf);
                xf[cols] = 127.0f; /* Q8_0 d = 1: the others land on halves */
                for (int j = 1; j < TD_QBLOCK; j++) xf[cols + j] = (float)(j - 16) + (j % 2 ? 0.5f : -0.5f);
            }
            if (layout == TD_QROWS_BF16 && T > 2 && cols >= 13) {
                const float edge[8] = {1.0f + 1.0f / 256, 1.0f + 3.0f / 256, -1.0f - 1.0f / 256, 1e-40f, -3e-39f,
                                       FLT_MAX, -INFINITY, NAN};
                memcpy(xf + 2 * cols + 5, edge, sizeof edge);
            }
            size_t qb = td_qrows_bytes(T, cols);
            void *ba = calloc(1, qb), *bb = calloc(1, qb), *bc = calloc(1, qb);
            td_qrows a, b, c;
            td_qrows_bind(&a, ba, T, cols, layout);
            td_qrows_bind(&b, bb, T, cols, layout);
            td_qrows_bind(&c, bc, T, cols, layout);
            r->ref->quantize_rows(xf, cols, &a, 0, T);
            r->ks->quantize_rows(xf, cols, &b, 0, T);
            long diff = qrows_diff(&a, &b, T);
            judge(r, (double)diff, diff == 0, "cols %lld T %lld: %ld bytes differ", (long long)cols, (long long)T, diff);
            int64_t cut[4] = {0, 1 < T ? 1 : T, T / 2 > 1 ? T / 2 : (1 < T ? 1 : T), T};
            for (int i = 3; i > 0; i--) r->ks->quantize_rows(xf, cols, &c, cut[i - 1], cut[i]); /* last range first */
            CHECKF(qrows_diff(&b, &c, T) == 0, "quantize_rows on %s: row ranges change the bytes (cols %lld T %lld)",
                   r->ks->name, (long long)cols, (long long)T);
            free(xf), free(ba), free(bb), free(bc);
        }
}

/* ---- row operations ---- */

/* rmsnorm (arg: zero-centred weights), at three scales of input; in place (as the q/k norms run) the same bits. */
static void case_rmsnorm(run *r) {
    static const int64_t sizes[] = {1, 7, 33, 128, 1024, 4097};
    static const float scales[] = {1.0f, 1e-20f, 1e15f};
    const int zc = r->c->arg;
    uint64_t rng = 5;
    for (size_t si = 0; si < 6; si++)
        for (size_t sc = 0; sc < 3; sc++) {
            int64_t n = sizes[si];
            float *x = floats(n), *w = floats(n), *a = floats(n), *b = floats(n), *c = floats(n);
            for (int64_t i = 0; i < n; i++) x[i] = td_test_uniform(&rng, -3, 3) * scales[sc], w[i] = td_test_uniform(&rng, -1, 1);
            r->ref->rmsnorm(a, x, w, n, 1e-6f, zc);
            r->ks->rmsnorm(b, x, w, n, 1e-6f, zc);
            for (int64_t i = 0; i < n; i++)
                judge(r, fabs((double)a[i] - b[i]) / (fabs((double)a[i]) + 1e-30), same_float(a[i], b[i]),
                      "n %lld scale %g, element %lld: ref %.9g, got %.9g", (long long)n, (double)scales[sc], (long long)i,
                      a[i], b[i]);
            memcpy(c, x, (size_t)n * sizeof *c);
            r->ks->rmsnorm(c, c, w, n, 1e-6f, zc);
            same_bits(r, c, b, (size_t)n * sizeof *c, "in place (n %lld)", (long long)n);
            free(x), free(w), free(a), free(b), free(c);
        }
}

/* silu_mul, with large inputs where exp overflows or vanishes. */
static void case_silu_mul(run *r) {
    static const int64_t sizes[] = {1, 7, 33, 128, 1024, 4097};
    uint64_t rng = 5;
    for (size_t si = 0; si < 6; si++) {
        int64_t n = sizes[si];
        float *g1 = floats(n), *g2 = floats(n), *u = floats(n);
        for (int64_t i = 0; i < n; i++) {
            u[i] = td_test_uniform(&rng, -2, 2);
            g1[i] = g2[i] = i % 17 == 5 ? td_test_uniform(&rng, -120, 120) : td_test_uniform(&rng, -8, 8);
        }
        r->ref->silu_mul(g1, u, n);
        r->ks->silu_mul(g2, u, n);
        for (int64_t i = 0; i < n; i++) {
            double e = fabs((double)g1[i] - g2[i]) / (fabs((double)g1[i]) + 1e-30);
            if (g1[i] == 0.0f) e = fabs((double)g2[i]) > 1e-30 ? 1 : 0;
            judge(r, e, same_float(g1[i], g2[i]), "n %lld, element %lld: ref %.9g, got %.9g", (long long)n, (long long)i,
                  g1[i], g2[i]);
        }
        free(g1), free(g2), free(u);
    }
}

/* ---- the table ---- */

#define WHY_FMA8 \
    "8-lane fp32 FMA accumulation, a lane tree, then the k % 8 tail: another summation order than the reference's " \
    "one sum in k; both err by at most ~n eps sum|w x| (observed ~sqrt(n) eps)"
#define WHY_QUANT \
    "exact integer block sums, but each block's 8 partial sums are scaled and fma-accumulated per lane and the " \
    "lanes added as a tree, where the reference scales the whole block sum and adds blocks in order"
#define WHY_PACKED \
    "the x8 / x16 reference spells out the kernel's lanes: exact integer block sums, one fma per block and lane " \
    "in group order, the same lane tree; r16 (rows in the lanes): exact block sums, one fma per block in order"
#define WHY_ATTN \
    "8-lane (AVX-512 sets: 16-lane) score dot products, td_exp8 / td_exp16 (a polynomial, ~1 ulp from expf) in the " \
    "softmax, fma in the value sums; " \
    "each output is a convex combination of values, so its error stays ~ a few eps"
#define WHY_QUANTIZE \
    "amax is a max (exact in any order), d and 1/d are computed as the reference does, and the rounding half " \
    "away from zero is done exactly as roundf"

static const slot_case table[] = {
    {"matmul F32", TD_DTYPE_F32, 0, 1e-5, "|y-ref|/sum|wx|", WHY_FMA8, case_matmul_float},
    {"matmul F16", TD_DTYPE_F16, 0, 1e-5, "|y-ref|/sum|wx|", WHY_FMA8 "; weights converted exactly (F16C)", case_matmul_float},
    {"matmul BF16", TD_DTYPE_BF16, 0, 1e-5, "|y-ref|/sum|wx|", WHY_FMA8 "; weights converted exactly", case_matmul_float},
    {"matmul Q8_0", TD_DTYPE_Q8_0, 0, 1e-5, "|y-ref|/sum|wx|", WHY_QUANT, case_matmul_quant},
    {"matmul Q4_0", TD_DTYPE_Q4_0, 0, 1e-5, "|y-ref|/sum|wx|", WHY_QUANT, case_matmul_quant},
    {"matmul BF16, bf16 activations", TD_DTYPE_BF16, 2, 0, "|y-ref|/sum|wx|",
     "the reference spells out vdpbf16ps: exact products, two rounded adds a lane (odd column, then even), inputs "
     "and results below FLT_MIN taken as zero, the lane tree", case_matmul_bf16},
    {"matmul Q8_0 packed", TD_DTYPE_Q8_0, 1, 0, "|y-ref|/sum|wx|", WHY_PACKED, case_matmul_quant},
    {"matmul Q4_0 packed", TD_DTYPE_Q4_0, 1, 0, "|y-ref|/sum|wx|", WHY_PACKED, case_matmul_quant},
    {"attn_rows f32 KV", 0, 0, 1e-5, "|o-ref|, v in [-1,1]", WHY_ATTN, case_attn_rows},
    {"attn_rows f16 KV", 1, 0, 1e-5, "|o-ref|, v in [-1,1]", WHY_ATTN "; f16 converted exactly", case_attn_rows},
    {"attn_rows f32 KV, gathered", 2, 0, 1e-5, "|o-ref|, v in [-1,1]", WHY_ATTN, case_attn_rows},
    {"attn_rows f16 KV, gathered", 3, 0, 1e-5, "|o-ref|, v in [-1,1]", WHY_ATTN, case_attn_rows},
    {"deltanet_step", 0, 0, 1e-5, "max|o-ref|/max|ref|",
     "fma in m = S^T k, the state update and o = S^T q where the reference rounds each product first; the errors "
     "carry through the state (40 tokens here)", case_deltanet_step},
    {"quantize_rows plain", TD_QROWS_PLAIN, 0, 0, "bytes differing", WHY_QUANTIZE, case_quantize_rows},
    {"quantize_rows x16, 1 level", TD_QROWS_X16_1, 0, 0, "bytes differing", WHY_QUANTIZE, case_quantize_rows},
    {"quantize_rows x16, 2 levels", TD_QROWS_X16_2, 0, 0, "bytes differing",
     WHY_QUANTIZE "; the second level's remainder is one exact product and one rounded difference in both",
     case_quantize_rows},
    {"quantize_rows r16, 2 levels", TD_QROWS_R16_2, 0, 0, "bytes differing",
     WHY_QUANTIZE "; x16's two levels, stored in column order", case_quantize_rows},
    {"quantize_rows x8", TD_QROWS_X8, 0, 0, "bytes differing", WHY_QUANTIZE, case_quantize_rows},
    {"quantize_rows x8 Q4_0", TD_QROWS_X8_Q4, 0, 0, "bytes differing",
     WHY_QUANTIZE "; the values' offset sums by lane halves", case_quantize_rows},
    {"quantize_rows bf16", TD_QROWS_BF16, 0, 0, "bytes differing",
     "the reference's integer rounding (u + 0x7fff + bit 16, flush below FLT_MIN, NaN kept quiet) in 8 lanes",
     case_quantize_rows},
    {"rmsnorm", 0, 0, 1e-6, "|y-ref|/|ref|",
     "the mean of squares is summed in double in 8 lanes (exact products, another order): it can round to "
     "another float, rarely; the scaling is the reference's fp32 operations", case_rmsnorm},
    {"rmsnorm zero-centred", 1, 0, 1e-6, "|y-ref|/|ref|", "as rmsnorm; 1 + w as the reference", case_rmsnorm},
    {"silu_mul", 0, 0, 2e-6, "|g-ref|/|ref|",
     "exp by td_exp8 (Cephes' polynomial, ~1 ulp) instead of libm's expf in 8-lane steps (the n % 8 tail uses "
     "expf); the division and the product are the reference's", case_silu_mul},
};

/* The slots of td_kernels; a slot added there fails to compile here until it is listed, and the table must run
 * every listed slot. */
static const char *const slots[] = {"matmul", "attn_rows", "deltanet_step", "quantize_rows", "rmsnorm", "silu_mul"};
_Static_assert(sizeof(td_kernels) == offsetof(td_kernels, matmul) + 6 * sizeof(td_matmul_fn) &&
                   sizeof slots / sizeof slots[0] == 6,
               "a new td_kernels slot needs its rows in the kernel table");

/* The AMX set's product with the tile instructions emulated (tests/amx_emulated.c), in a set that is otherwise the
 * avx512r16 set: on a CPU without AMX it checks the AMX kernel's tiling and epilogue; on one with AMX the real "amx"
 * set runs beside it. */
void td_matmul_r16_amx_emulated(const td_mat *w, const int32_t *rows, const void *xq, int64_t T, float *y,
                                int64_t ldy, int64_t j0, int64_t j1);
static void matmul_amx_emulated(const td_mat *w, const int32_t *rows, const float *x, const void *xq, int64_t T,
                                int64_t ldx, float *y, int64_t ldy, int64_t j0, int64_t j1) {
    if (w->pack && w->pack->lanes == TD_R16_LANES) td_matmul_r16_amx_emulated(w, rows, xq, T, y, ldy, j0, j1);
    else td_matmul_avx512r16(w, rows, x, xq, T, ldx, y, ldy, j0, j1);
}
static td_kernels amx_emulated;
static const td_kernels *kernels_named(const char *name) {
    if (strcmp(name, "amx-emulated") != 0) return td_kernels_named(name);
    const td_kernels *twin = td_kernels_named("avx512r16");
    if (!twin) return NULL;
    amx_emulated = *twin;
    amx_emulated.name = "amx-emulated";
    amx_emulated.matmul = matmul_amx_emulated;
    return &amx_emulated;
}

/* Runs the table: per slot, one line for each kernel set (its contract and the worst error measured), then why. */
static void test_table(void) {
    static const char *const names[] = {"scalar", "avx2", "avx512vnni", "avx512bf16", "avx512r16", "amx-emulated", "amx"};
    enum { N_SETS = sizeof names / sizeof names[0] };
    const td_kernels *sets[N_SETS], *ref = td_kernels_named("scalar");
    CHECK(ref != NULL && td_kernels_named("no such kernels") == NULL);
    if (!ref) return;
    for (size_t i = 0; i < sizeof slots / sizeof slots[0]; i++) {
        int rows = 0;
        for (size_t ci = 0; ci < sizeof table / sizeof table[0]; ci++)
            rows += strncmp(table[ci].slot, slots[i], strlen(slots[i])) == 0 &&
                    (table[ci].slot[strlen(slots[i])] == ' ' || table[ci].slot[strlen(slots[i])] == '\0');
        CHECKF(rows > 0, "slot %s has no row in the kernel table", slots[i]);
    }
    printf("kernel table: every slot of td_kernels in every kernel set against the scalar set (the reference)\n");
    printf("  %-28s %-11s %-33s %s\n", "slot", "set", "contract", "worst error");
    for (int si = 0; si < N_SETS; si++)
        if (!(sets[si] = kernels_named(names[si]))) printf("  (%s: not run, this CPU cannot run it)\n", names[si]);
    for (size_t ci = 0; ci < sizeof table / sizeof table[0]; ci++) {
        const slot_case *c = &table[ci];
        for (int si = 0; si < N_SETS; si++) {
            const td_kernels *ks = sets[si];
            char slot[64], contract[64];
            if (!ks) continue;
            if ((c->packed == 1 && !ks->pack) || (c->packed == 2 && !ks->bf16)) {
                printf("  %-28s %-11s n/a: %s\n", c->slot, ks->name,
                       c->packed == 1 ? "this set does not pack" : "this set takes BF16 products in fp32");
                continue;
            }
            if (c->packed == 1 && ks->pack == TD_R16_LANES) snprintf(slot, sizeof slot, "%s r16", c->slot);
            else if (c->packed == 1) snprintf(slot, sizeof slot, "%s x%d", c->slot, ks->pack);
            else snprintf(slot, sizeof slot, "%s", c->slot);
            run r = {c, ks, ref, ks == ref ? 0 : c->tol, 0, 0};
            c->fn(&r);
            if (ks == ref) snprintf(contract, sizeof contract, "bit-exact (is the reference)");
            else if (c->tol == 0) snprintf(contract, sizeof contract, "bit-exact");
            else snprintf(contract, sizeof contract, "%s <= %g", c->metric, c->tol);
            printf("  %-28s %-11s %-33s %.3g\n", slot, ks->name, contract, r.worst);
        }
        printf("      why: %s\n", c->why);
    }
}

/* ---- the references themselves ---- */

/* Q8_0 / Q4_0: block layout and round-trip error bounds. */
static void test_blocks(void) {
    /* layout: Q4_0 low nibbles are elements 0-15, high nibbles 16-31, value (q - 8) * d */
    td_block_q4_0 b4;
    b4.d = td_f32_to_f16(0.5f);
    for (int j = 0; j < 16; j++) b4.qs[j] = (uint8_t)(j | ((15 - j) << 4));
    float y4[32];
    td_dequantize_q4_0(&b4, y4, 32);
    for (int j = 0; j < 16; j++) {
        CHECK(y4[j] == (float)(j - 8) * 0.5f);
        CHECK(y4[j + 16] == (float)(7 - j) * 0.5f);
    }
    uint64_t rng = 77;
    float x[256], back[256];
    td_block_q8_0 q8[8];
    td_block_q4_0 q4[8];
    for (int i = 0; i < 256; i++) x[i] = td_test_uniform(&rng, -3, 3);
    td_quantize_q8_0(x, q8, 256);
    td_dequantize_q8_0(q8, back, 256);
    /* half a step, plus |q| times the fp16 rounding of d (relative 2^-11, bounded here by 2^-10) */
    for (int i = 0; i < 256; i++)
        CHECKF(fabsf(back[i] - x[i]) <= fabsf(td_f16_to_f32(q8[i / 32].d)) * (0.5f + 127.0f / 1024.0f), "q8_0 element %d", i);
    td_quantize_q4_0(x, q4, 256);
    td_dequantize_q4_0(q4, back, 256);
    /* Q4_0 maps the value of largest magnitude to -8 d exactly; values near the opposite extreme clamp at q = 15
     * (7 d), so the error bound there is a whole step */
    for (int i = 0; i < 256; i++)
        CHECKF(fabsf(back[i] - x[i]) <= fabsf(td_f16_to_f32(q4[i / 32].d)) * (1.0f + 8.0f / 1024.0f), "q4_0 element %d", i);
}

/* The packed references against the exact product of the dequantised weights and the unquantised activations:
 * for Q8_0 weights, x8's int16 activations and x16's two levels keep ~15 bits of each activation, r16's ~14 (its
 * second level's scale is fixed: quant.h), within 1e-4 of the magnitude of the terms; for Q4_0 weights all three
 * take one level, the plain Q8_0 activations, within 1e-5 of the unpacked reference. */
static void test_packed_accuracy(void) {
    static const int64_t cols_list[] = {32, 96, 544, 4096};
    static const int64_t rows_list[] = {1, 7, 33};
    static const int64_t T_list[] = {1, 3, 4, 5, 9, 67};
    static const td_dtype types[] = {TD_DTYPE_Q8_0, TD_DTYPE_Q4_0};
    static const int lanes_list[] = {TD_X8_LANES, TD_X16_LANES, TD_R16_LANES};
    uint64_t rng = 19;
    double worst[3] = {0, 0, 0};
    for (int li = 0; li < 3; li++)
        for (int ti = 0; ti < 2; ti++)
            for (int ci = 0; ci < 4; ci++)
                for (int ri = 0; ri < 3; ri++)
                    for (int Ti = 0; Ti < 6; Ti++) {
                        int64_t cols = cols_list[ci], rows = rows_list[ri], T = T_list[Ti], nb = cols / TD_QBLOCK;
                        td_dtype type = types[ti];
                        int lanes = lanes_list[li];
                        if (cols == 4096 && T == 67 && td_test_sanitized()) continue;
                        size_t rb = td_dtype_row_bytes(type, cols);
                        float *wf, *xf, *xd = floats(T * cols), *yr = floats(T * rows), *yp = floats(T * rows);
                        uint8_t *wq = quant_operands(type, rows, cols, T, &rng, &wf, &xf);
                        td_qpack *pk = td_qpack_new(type, rows, cols, wq, rb, lanes);
                        CHECK(pk != NULL);
                        int layout = td_qrows_layout(type, pk);
                        int levels = type == TD_DTYPE_Q8_0 ? TD_QROWS_X16_2 : TD_QROWS_X16_1;
                        int x8 = type == TD_DTYPE_Q8_0 ? TD_QROWS_X8 : TD_QROWS_X8_Q4;
                        CHECK(layout == (lanes == TD_X8_LANES    ? x8
                                         : lanes == TD_R16_LANES ? (levels | TD_QROWS_NATURAL)
                                                                 : levels));
                        td_mat w = {type, rows, cols, rb, wq, NULL}, wp = {type, rows, cols, rb, wq, pk};
                        for (int64_t j = 0; j < rows; j++) td_row_to_f32(wf + j * cols, &w, j);
                        void *b1 = calloc(1, td_qrows_bytes(T, cols)), *b2 = calloc(1, td_qrows_bytes(T, cols));
                        td_qrows plain, packed;
                        td_qrows_bind(&plain, b1, T, cols, TD_QROWS_PLAIN);
                        td_qrows_bind(&packed, b2, T, cols, layout);
                        td_quantize_rows_ref(xf, cols, &plain, 0, T);
                        td_quantize_rows_ref(xf, cols, &packed, 0, T);
                        for (int64_t t = 0; t < T; t++) td_dequantize_q8_0(plain.q + t * nb, xd + t * cols, cols);
                        td_matmul_ref(&w, NULL, xf, &plain, T, cols, yr, rows, 0, rows);
                        td_matmul_ref(&wp, NULL, xf, &packed, T, cols, yp, rows, 0, rows);
                        int vs_plain = (layout & ~TD_QROWS_NATURAL) == TD_QROWS_X16_1 || layout == TD_QROWS_X8_Q4;
                        for (int64_t t = 0; t < T; t++)
                            for (int64_t j = 0; j < rows; j++) {
                                /* the magnitude from the dequantised activations, x8 (int16): from the inputs */
                                const float *xm = layout != TD_QROWS_X8 ? xd : xf;
                                double mag = 0, exact = 0;
                                for (int64_t k = 0; k < cols; k++) {
                                    mag += fabs((double)wf[j * cols + k] * xm[t * cols + k]);
                                    exact += (double)wf[j * cols + k] * xf[t * cols + k];
                                }
                                double want = vs_plain ? (double)yr[t * rows + j] : exact;
                                double e = fabs(want - yp[t * rows + j]) / (mag + 1e-30);
                                if (e > worst[li]) worst[li] = e;
                                CHECKF(e <= (vs_plain ? 1e-5 : 1e-4), "%s x%d cols %lld: exact %g, plain %g, packed %g",
                                       td_dtype_name(type), lanes, (long long)cols, exact, yr[t * rows + j], yp[t * rows + j]);
                            }
                        td_qpack_free(pk);
                        free(wf), free(xf), free(xd), free(yr), free(yp), free(wq), free(b1), free(b2);
                    }
    printf("packed references: worst relative difference from the exact product (with Q4_0: from the plain "
           "reference) x8 %.3g, x16 %.3g, r16 %.3g\n", worst[0], worst[1], worst[2]);
}

/* The bf16 reference against the exact product of the BF16 weights and the fp32 activations (the F32 path's
 * operands): rounding each activation to bf16 errs by at most 2^-9 of it, so the product stays within 2^-9 of
 * sum|wx| plus the fp32 sums' own rounding (bound 2.5e-3); random signs leave much less. */
static void test_bf16_accuracy(void) {
    static const int64_t cols_list[] = {7, 96, 1024, 4097};
    uint64_t rng = 29;
    double worst = 0;
    for (int ci = 0; ci < 4; ci++) {
        int64_t cols = cols_list[ci], rows = 9, T = 3;
        td_mat w;
        void *data = make_weights(TD_DTYPE_BF16, rows, cols, &rng, &w);
        float *x = floats(T * cols), *y = floats(T * rows);
        for (int64_t i = 0; i < T * cols; i++) x[i] = td_test_uniform(&rng, -2.0f, 2.0f);
        void *qbuf = calloc(1, td_qrows_bytes(T, cols));
        td_qrows xq;
        td_qrows_bind(&xq, qbuf, T, cols, TD_QROWS_BF16);
        td_quantize_rows_ref(x, cols, &xq, 0, T);
        td_matmul_bf16_ref(&w, NULL, &xq, T, y, rows, 0, rows);
        for (int64_t t = 0; t < T; t++)
            for (int64_t j = 0; j < rows; j++) {
                double exact = 0, mag = 0;
                for (int64_t k = 0; k < cols; k++) {
                    double wk = td_bf16_to_f32(((const uint16_t *)data)[j * cols + k]);
                    exact += wk * x[t * cols + k];
                    mag += fabs(wk * x[t * cols + k]);
                }
                double e = fabs(exact - y[t * rows + j]) / mag;
                if (e > worst) worst = e;
                CHECKF(e <= 2.5e-3, "bf16 activations, cols %lld: exact %g, got %g", (long long)cols, exact, y[t * rows + j]);
            }
        free(data), free(x), free(y), free(qbuf);
    }
    printf("bf16 reference: worst relative difference from the exact product (of sum|wx|) %.3g\n", worst);
}

static void test_half(void) {
    /* every f16 value converts exactly and back */
    for (uint32_t h = 0; h < 65536; h++) {
        float f = td_f16_to_f32((uint16_t)h);
        if (f != f) continue;
        CHECKF(td_f32_to_f16(f) == h, "f16 round trip %04x", h);
    }
    for (uint32_t h = 0; h < 65536; h++) {
        float f = td_bf16_to_f32((uint16_t)h);
        if (f != f) continue;
        CHECKF(td_f32_to_bf16(f) == h, "bf16 round trip %04x", h);
    }
    CHECK(td_f32_to_bf16(1.0f + 1.0f / 256) == td_f32_to_bf16(1.0f)); /* ties to even */
}

int main(void) {
    test_half();
    test_blocks();
    test_packed_accuracy();
    test_bf16_accuracy();
    test_table();
    return td_test_finish("test_kernels");
}
