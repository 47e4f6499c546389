/* The CUDA kernels (src/kernels/cuda/cuda.h) against the CPU scalar references, on random inputs of Qwen3-0.6B's
 * sizes and odd small ones, each held to the contract cuda.h states for it:
 *   bit-exact: matmul (against a host loop acc = fmaf(x, w, acc), k ascending, every weight type, bf16 inputs or
 *              not, with and without a row list; but BF16 weights with bf16 inputs on the tensor cores: within the
 *              fp32 accumulation's rounding of the exact sum, tc_close), embed, rope, store_rows, add_rows,
 *              gather_rows, the conv state;
 *   within a few ulps (the device's expf is not glibc's: CUDA documents 2 ulp): sigmoid gate, silu_mul, the conv
 *              output;
 *   within 1e-6 relative (the double sum's order): rmsnorm; within 1e-5 relative (fp32 rounding: tree sums,
 *              online softmax, fmaf): attention and DeltaNet.
 * Then batch invariance, bit for bit: a row computed alone, among 7 or 144 rows, at another row index, with other
 * sequences, groups and cell layouts around it, gives the same bits; and DeltaNet's and the conv's prefix property:
 * a sequence run in one launch or split over two (state carried in device memory) gives the same outputs and state.
 * Without a usable CUDA device it prints why and exits 77 (skipped). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/kernels.h"
#include "kernels/cpu/quant.h"
#include "cuda/attn_case.h"
#include "cuda/cuda_test.h"
#include "cuda/dn_case.h"
#include "kernels/cuda/cuda.h"
#include "util/dtype.h"
#include "util/half.h"

static uint64_t seed = 0x7d5eedull;

/* ---- plumbing (cuda_test.h) ---- */

static float uni(float lo, float hi) { return td_test_uniform(&seed, lo, hi); }
static int64_t irand(int64_t n) { return (int64_t)(td_test_rand(&seed) % (uint64_t)n); }
static float *rnd(int64_t n, float lo, float hi) { return cu_rnd(&seed, n, lo, hi); }
static void shuffle(int32_t *a, int64_t n) { cu_shuffle(&seed, a, n); }

/* ---- weights ---- */

static const int wtypes[] = {TD_DTYPE_F32, TD_DTYPE_F16, TD_DTYPE_BF16, TD_DTYPE_Q8_0, TD_DTYPE_Q4_0};

typedef struct weight {
    td_mat h;    /* host view, for td_row_to_f32 */
    td_cu_mat d; /* the same bytes on the device */
} weight;

static weight weight_new(int type, int64_t rows, int64_t cols) {
    size_t rb = td_dtype_row_bytes((td_dtype)type, cols);
    unsigned char *buf = malloc(rb * (size_t)rows);
    float *tmp = malloc((size_t)cols * sizeof *tmp);
    for (int64_t r = 0; r < rows; r++) {
        unsigned char *row = buf + (size_t)r * rb;
        for (int64_t k = 0; k < cols; k++) tmp[k] = uni(-1.0f, 1.0f);
        if (type == TD_DTYPE_F32) memcpy(row, tmp, (size_t)cols * sizeof *tmp);
        for (int64_t k = 0; k < cols && (type == TD_DTYPE_F16 || type == TD_DTYPE_BF16); k++) {
            uint16_t v = type == TD_DTYPE_F16 ? td_f32_to_f16(tmp[k]) : td_f32_to_bf16(tmp[k]);
            memcpy(row + 2 * k, &v, 2);
        }
        if (type == TD_DTYPE_Q8_0) td_quantize_q8_0(tmp, (td_block_q8_0 *)row, cols);
        if (type == TD_DTYPE_Q4_0) td_quantize_q4_0(tmp, (td_block_q4_0 *)row, cols);
    }
    free(tmp);
    weight w;
    w.h = (td_mat){(td_dtype)type, rows, cols, rb, buf, NULL};
    w.d = (td_cu_mat){type, rows, cols, rb, cu_up(buf, rb * (size_t)rows)};
    return w;
}

static void weight_free(weight *w) {
    free((void *)w->h.data);
    td_cu_free((void *)w->d.data);
}

/* The header's order, on the host: acc = fmaf(xk, W[row(j), k], acc), k ascending from +0.0f. */
static void ref_matmul(float *y, int64_t ldy, const float *x, int64_t ldx, int64_t T, const td_mat *w,
                       const int32_t *rows, int64_t n_out, int bf16_in) {
    int64_t K = w->cols;
    float *xr = malloc((size_t)(T * K) * sizeof *xr), *wr = malloc((size_t)K * sizeof *wr);
    for (int64_t t = 0; t < T; t++)
        for (int64_t k = 0; k < K; k++) {
            float v = x[t * ldx + k];
            xr[t * K + k] = bf16_in ? td_bf16_to_f32(td_f32_to_bf16(v)) : v;
        }
    for (int64_t j = 0; j < n_out; j++) {
        td_row_to_f32(wr, w, rows ? rows[j] : j);
        for (int64_t t = 0; t < T; t++) {
            float acc = 0.0f;
            for (int64_t k = 0; k < K; k++) acc = fmaf(xr[t * K + k], wr[k], acc);
            y[t * ldy + j] = acc;
        }
    }
    free(xr);
    free(wr);
}

/* The tensor-core path (cuda.h: td_cu_matmul_tc) against the exact sum of the bf16-rounded products in double:
 * |y - ref| <= (cols / 16 + 16) * 2^-22 * sum_k |x_k w_k| for every element (the mma unit's fp32 accumulation over
 * cols / 16 steps plus the slices' adds, with room), and columns past n_out unwritten (7.0f). */
static void tc_close(const char *name, const float *y, const float *x, int64_t ldx, int64_t T, const td_mat *w,
                     const int32_t *rows, int64_t n_out, int64_t ldy) {
    int64_t K = w->cols, bad = 0;
    float *wr = malloc((size_t)K * sizeof *wr);
    double worst = 0, bound = (double)(K / 16 + 16) * ldexp(1.0, -22);
    for (int64_t j = 0; j < n_out; j++) {
        td_row_to_f32(wr, w, rows ? rows[j] : j);
        for (int64_t t = 0; t < T; t++) {
            double sum = 0, mag = 0;
            for (int64_t k = 0; k < K; k++) {
                double p = (double)td_bf16_to_f32(td_f32_to_bf16(x[t * ldx + k])) * wr[k];
                sum += p, mag += fabs(p);
            }
            double e = fabs(y[t * ldy + j] - sum) / (mag > 0 ? mag : 1);
            if (!(e <= worst)) worst = e;
        }
    }
    for (int64_t t = 0; t < T; t++)
        for (int64_t j = n_out; j < ldy; j++) bad += y[t * ldy + j] != 7.0f;
    printf("  %-58s max |y - exact| / sum|x w| %.3g (allowed %.3g)%s\n", name, worst, bound,
           bad ? ", padding written" : "");
    CHECKF(worst <= bound && bad == 0, "%s: %g, %lld padding entries written", name, worst, (long long)bad);
    free(wr);
}

/* One product on the device: y [T, ldy] (unwritten entries keep 7.0f) from x [T, ldx]. */
static float *dev_matmul(const float *x, int64_t ldx, int64_t T, const weight *w, const int32_t *rows_d,
                         int64_t n_out, int64_t ldy, int bf16_in) {
    size_t yn = (size_t)(T * ldy);
    float *y = malloc(yn * sizeof *y);
    for (size_t i = 0; i < yn; i++) y[i] = 7.0f;
    float *xd = cu_up(x, (size_t)(T * ldx) * sizeof *x), *yd = cu_up(y, yn * sizeof *y);
    CU(td_cu_matmul(yd, ldy, xd, ldx, T, &w->d, rows_d, n_out, bf16_in, NULL));
    cu_down(y, yd, yn * sizeof *y);
    td_cu_free(xd);
    td_cu_free(yd);
    return y;
}

static void test_matmul(void) {
    printf("matmul: against acc = fmaf(x, w, acc), k ascending (bit-exact)\n");
    static const int64_t shapes[][3] = {/* T, n_out, cols */
                                        {1, 1024, 1024}, {3, 1000, 97}, {7, 96, 3072}, {64, 1024, 96},
                                        {144, 67, 1024}, {300, 70, 96}};
    for (size_t ti = 0; ti < sizeof wtypes / sizeof *wtypes; ti++) {
        int type = wtypes[ti], quant = td_dtype_is_block((td_dtype)type);
        for (int bf = 0; bf < 2; bf++)
            for (size_t si = 0; si < sizeof shapes / sizeof *shapes; si++) {
                int64_t T = shapes[si][0], n_out = shapes[si][1], cols = shapes[si][2];
                if (quant && cols % 32) cols += 32 - cols % 32;
                int use_rows = si % 2 == 1; /* every other shape through a row list (rows out of order, repeats) */
                int64_t wrows = use_rows ? n_out + 17 : n_out, ldx = cols + 3, ldy = n_out + 2;
                weight w = weight_new(type, wrows, cols);
                int32_t *rows = NULL, *rows_d = NULL;
                if (use_rows) {
                    rows = malloc((size_t)n_out * sizeof *rows);
                    for (int64_t j = 0; j < n_out; j++) rows[j] = (int32_t)irand(wrows);
                    rows_d = cu_up(rows, (size_t)n_out * sizeof *rows);
                }
                float *x = rnd(T * ldx, -2.0f, 2.0f);
                float *y = dev_matmul(x, ldx, T, &w, rows_d, n_out, ldy, bf);
                float *ref = malloc((size_t)(T * ldy) * sizeof *ref);
                for (int64_t i = 0; i < T * ldy; i++) ref[i] = 7.0f;
                ref_matmul(ref, ldy, x, ldx, T, &w.h, rows, n_out, bf);
                char name[128];
                snprintf(name, sizeof name, "%s bf16_in=%d T=%lld n_out=%lld cols=%lld%s%s",
                         td_dtype_name((td_dtype)type), bf, (long long)T, (long long)n_out, (long long)cols,
                         use_rows ? " rows" : "", td_cu_matmul_tc(&w.d, bf) ? " (tensor cores)" : "");
                if (td_cu_matmul_tc(&w.d, bf)) tc_close(name, y, x, ldx, T, &w.h, rows, n_out, ldy);
                else cu_bits(name, y, ref, T * ldy); /* padding columns included: still 7.0f */
                free(x), free(y), free(ref), free(rows);
                td_cu_free(rows_d);
                weight_free(&w);
            }
    }
    printf("matmul: batch invariance (one row at T = 1 / 7 / 144, row 0 / 3 / 100)\n");
    for (size_t ti = 0; ti < sizeof wtypes / sizeof *wtypes; ti++) {
        int type = wtypes[ti], bf = type == TD_DTYPE_BF16;
        int64_t cols = 1024, n_out = 200;
        weight w = weight_new(type, n_out, cols);
        float *target = rnd(cols, -2.0f, 2.0f), *first = NULL;
        static const int64_t runs[][2] = {{1, 0}, {7, 3}, {144, 100}};
        for (int r = 0; r < 3; r++) {
            int64_t T = runs[r][0], at = runs[r][1];
            float *x = rnd(T * cols, -2.0f, 2.0f);
            memcpy(x + at * cols, target, (size_t)cols * sizeof *x);
            float *y = dev_matmul(x, cols, T, &w, NULL, n_out, n_out, bf);
            if (!first) {
                first = malloc((size_t)n_out * sizeof *first);
                memcpy(first, y, (size_t)n_out * sizeof *first);
            } else {
                char name[96];
                snprintf(name, sizeof name, "%s T=%lld row %lld vs T=1", td_dtype_name((td_dtype)type), (long long)T,
                         (long long)at);
                cu_bits(name, y + at * n_out, first, n_out);
            }
            free(x), free(y);
        }
        free(target), free(first);
        weight_free(&w);
    }
}

/* The tensor-core path's order is the same for every T and kernel (tc_skinny up to 64 tokens, tc_tile above): one
 * row's outputs alone (T = 1) and at every position of larger launches, with and without a row list, over a k that
 * ends in a half step and one of many slices. */
static void test_matmul_tc_invariance(void) {
    printf("matmul (tensor cores): batch invariance (T = 1 .. 300, the row anywhere, both kernels)\n");
    static const int64_t colss[] = {1040, 3072};
    static const int64_t Ts[] = {7, 8, 9, 17, 31, 32, 33, 64, 65, 144, 300};
    for (size_t ci = 0; ci < sizeof colss / sizeof *colss; ci++)
        for (int use_rows = 0; use_rows < 2; use_rows++) {
            int64_t cols = colss[ci], n_out = 300, wrows = n_out + 11;
            weight w = weight_new(TD_DTYPE_BF16, wrows, cols);
            if (!td_cu_matmul_tc(&w.d, 1)) {
                printf("  BF16 cols=%lld: not on the tensor cores\n", (long long)cols);
                CHECKF(0, "a BF16 weight of %lld columns should take the tensor-core path", (long long)cols);
                weight_free(&w);
                continue;
            }
            int32_t *rows = NULL, *rows_d = NULL;
            if (use_rows) {
                rows = malloc((size_t)n_out * sizeof *rows);
                for (int64_t j = 0; j < n_out; j++) rows[j] = (int32_t)irand(wrows);
                rows_d = cu_up(rows, (size_t)n_out * sizeof *rows);
            }
            float *target = rnd(cols, -2.0f, 2.0f);
            float *alone = dev_matmul(target, cols, 1, &w, rows_d, n_out, n_out, 1);
            int64_t differ = 0;
            for (size_t ti = 0; ti < sizeof Ts / sizeof *Ts; ti++) {
                int64_t T = Ts[ti];
                int64_t ats[3] = {0, T / 2, T - 1};
                for (int a = 0; a < 3; a++) {
                    float *x = rnd(T * cols, -2.0f, 2.0f);
                    memcpy(x + ats[a] * cols, target, (size_t)cols * sizeof *x);
                    float *y = dev_matmul(x, cols, T, &w, rows_d, n_out, n_out, 1);
                    differ += memcmp(y + ats[a] * n_out, alone, (size_t)n_out * sizeof *y) != 0;
                    free(x), free(y);
                }
            }
            char name[96];
            snprintf(name, sizeof name, "BF16 cols=%lld%s: a row at T = 7 .. 300 vs T = 1", (long long)cols,
                     use_rows ? " rows" : "");
            printf("  %-58s %s\n", name, differ ? "NOT bit-exact" : "bit-exact");
            CHECKF(differ == 0, "%s: %lld launches differ", name, (long long)differ);
            free(target), free(alone), free(rows);
            td_cu_free(rows_d);
            weight_free(&w);
        }
}

static void test_embed(void) {
    printf("embed: against td_row_to_f32 (bit-exact)\n");
    for (size_t ti = 0; ti < sizeof wtypes / sizeof *wtypes; ti++) {
        int64_t vocab = 50, cols = 1024, T = 7;
        weight w = weight_new(wtypes[ti], vocab, cols);
        int32_t tok[7];
        for (int64_t t = 0; t < T; t++) tok[t] = (int32_t)irand(vocab);
        int32_t *tok_d = cu_up(tok, sizeof tok);
        float *xd = cu_up(NULL, (size_t)(T * cols) * sizeof(float));
        float *x = malloc((size_t)(T * cols) * sizeof *x), *ref = malloc((size_t)(T * cols) * sizeof *ref);
        CU(td_cu_embed(xd, &w.d, tok_d, T, NULL));
        cu_down(x, xd, (size_t)(T * cols) * sizeof *x);
        for (int64_t t = 0; t < T; t++) td_row_to_f32(ref + t * cols, &w.h, tok[t]);
        cu_bits(td_dtype_name((td_dtype)wtypes[ti]), x, ref, T * cols);
        free(x), free(ref);
        td_cu_free(tok_d), td_cu_free(xd);
        weight_free(&w);
    }
}

/* ---- row operations ---- */

static void test_rmsnorm(void) {
    printf("rmsnorm: against td_rmsnorm (1e-6: the order of the double sum)\n");
    static const int64_t shapes[][2] = {{1, 1024}, {7, 1024}, {144, 1024}, {3, 97}, {300, 96}};
    for (size_t si = 0; si < sizeof shapes / sizeof *shapes; si++)
        for (int zc = 0; zc < 2; zc++) {
            int64_t T = shapes[si][0], n = shapes[si][1];
            float *x = rnd(T * n, -3.0f, 3.0f), *w = rnd(n, -1.0f, 1.5f), *y = malloc((size_t)(T * n) * sizeof *y);
            float *ref = malloc((size_t)(T * n) * sizeof *ref);
            float *xd = cu_up(x, (size_t)(T * n) * 4), *wd = cu_up(w, (size_t)n * 4), *yd = cu_up(NULL, (size_t)(T * n) * 4);
            CU(td_cu_rmsnorm(yd, xd, wd, T, 1, n, 0, n, 1e-6f, zc, NULL));
            cu_down(y, yd, (size_t)(T * n) * 4);
            for (int64_t t = 0; t < T; t++) td_rmsnorm(ref + t * n, x + t * n, w, n, 1e-6f, zc);
            char name[64];
            snprintf(name, sizeof name, "rows T=%lld n=%lld zero_centred=%d", (long long)T, (long long)n, zc);
            cu_within_rel(name, y, ref, T * n, 1e-6);
            free(x), free(w), free(y), free(ref);
            td_cu_free(xd), td_cu_free(wd), td_cu_free(yd);
        }
    { /* per-head, in place: Hq = 16 heads of hd = 128, 256 apart (a gated q row), per = 16 */
        int64_t T = 7, H = 16, hd = 128, stride = 256, ld = H * stride, n = T * ld;
        float *x = rnd(n, -3.0f, 3.0f), *w = rnd(hd, -1.0f, 1.0f), *y = malloc((size_t)n * 4);
        float *xd = cu_up(x, (size_t)n * 4), *wd = cu_up(w, (size_t)hd * 4);
        CU(td_cu_rmsnorm(xd, xd, wd, T * H, H, ld, stride, hd, 1e-6f, 1, NULL));
        cu_down(y, xd, (size_t)n * 4);
        for (int64_t t = 0; t < T; t++)
            for (int64_t h = 0; h < H; h++) {
                float *xh = x + t * ld + h * stride;
                td_rmsnorm(xh, xh, w, hd, 1e-6f, 1);
            }
        cu_within_rel("per head, in place, T=7 H=16 hd=128 stride=256", y, x, n, 1e-6);
        free(x), free(w), free(y);
        td_cu_free(xd), td_cu_free(wd);
    }
    { /* batch invariance */
        int64_t n = 1024;
        float *target = rnd(n, -3.0f, 3.0f), *w = rnd(n, -1.0f, 1.0f), first[1024];
        float *wd = cu_up(w, (size_t)n * 4);
        static const int64_t runs[][2] = {{1, 0}, {7, 3}, {144, 100}};
        for (int r = 0; r < 3; r++) {
            int64_t T = runs[r][0], at = runs[r][1];
            float *x = rnd(T * n, -3.0f, 3.0f), y[1024];
            memcpy(x + at * n, target, (size_t)n * 4);
            float *xd = cu_up(x, (size_t)(T * n) * 4);
            CU(td_cu_rmsnorm(xd, xd, wd, T, 1, n, 0, n, 1e-6f, 0, NULL));
            cu_down(r ? y : first, xd + at * n, (size_t)n * 4);
            char name[64];
            snprintf(name, sizeof name, "invariance: T=%lld row %lld vs T=1", (long long)T, (long long)at);
            if (r) cu_bits(name, y, first, n);
            free(x);
            td_cu_free(xd);
        }
        free(target), free(w);
        td_cu_free(wd);
    }
}

static void test_rope(void) {
    printf("rope: against td_rope (bit-exact)\n");
    static const int64_t cases[][4] = {{7, 16, 128, 128}, {144, 8, 128, 128}, {3, 4, 256, 64}}; /* T, H, hd, rot */
    for (size_t ci = 0; ci < sizeof cases / sizeof *cases; ci++) {
        int64_t T = cases[ci][0], H = cases[ci][1], hd = cases[ci][2], rot = cases[ci][3];
        int64_t ldh = hd + 5, ldt = H * ldh + 3, n = T * ldt;
        float *x = rnd(n, -2.0f, 2.0f), *y = malloc((size_t)n * 4), *cs = malloc((size_t)(T * rot) * 4);
        float inv[512];
        td_rope_inv_freq(inv, rot, 1000000.0);
        for (int64_t t = 0; t < T; t++) td_rope_table(cs + t * rot, rot, inv, (int32_t)irand(40000));
        float *xd = cu_up(x, (size_t)n * 4), *csd = cu_up(cs, (size_t)(T * rot) * 4);
        CU(td_cu_rope(xd, csd, T, H, ldt, ldh, rot, NULL));
        cu_down(y, xd, (size_t)n * 4);
        for (int64_t t = 0; t < T; t++)
            for (int64_t h = 0; h < H; h++) td_rope(x + t * ldt + h * ldh, rot, cs + t * rot);
        char name[64];
        snprintf(name, sizeof name, "T=%lld H=%lld hd=%lld rot=%lld", (long long)T, (long long)H, (long long)hd,
                 (long long)rot);
        cu_bits(name, y, x, n);
        free(x), free(y), free(cs);
        td_cu_free(xd), td_cu_free(csd);
    }
}

static void test_store_gather(void) {
    printf("store_rows, gather_rows: bit-exact (f16: td_f32_to_f16, bf16: td_f32_to_bf16, NaN / inf / subnormals "
           "included)\n");
    int64_t T = 7, dim = 1024, ld = dim + 9, ncells = 40;
    float *rows = rnd(T * ld, -70000.0f, 70000.0f);
    for (int64_t t = 0; t < T; t++) { /* small values: f16 subnormals and underflow; and specials */
        for (int64_t i = 0; i < 64; i++) rows[t * ld + i] = uni(-1e-4f, 1e-4f);
        for (int64_t i = 64; i < 80; i++) rows[t * ld + i] = uni(-1e-7f, 1e-7f);
        rows[t * ld + 80] = NAN, rows[t * ld + 81] = INFINITY, rows[t * ld + 82] = -INFINITY, rows[t * ld + 83] = -0.0f;
        rows[t * ld + 84] = 65519.0f, rows[t * ld + 85] = 65520.0f;
    }
    int32_t cell[7], order[40];
    for (int i = 0; i < 40; i++) order[i] = i;
    shuffle(order, 40);
    memcpy(cell, order, sizeof cell);
    int32_t *cell_d = cu_up(cell, sizeof cell);
    float *rows_d = cu_up(rows, (size_t)(T * ld) * 4);
    for (int kvf = TD_CU_KV_F32; kvf <= TD_CU_KV_BF16; kvf++) {
        static const char *const fmt[3] = {"f32", "f16", "bf16"};
        size_t es = kvf == TD_CU_KV_F32 ? 4 : 2, bytes = (size_t)(ncells * dim) * es;
        unsigned char *cache = malloc(bytes), *ref = malloc(bytes);
        memset(ref, 0x5a, bytes);
        void *cache_d = cu_up(ref, bytes);
        CU(td_cu_store_rows(cache_d, kvf, rows_d, ld, cell_d, T, dim, NULL));
        cu_down(cache, cache_d, bytes);
        for (int64_t t = 0; t < T; t++)
            for (int64_t i = 0; i < dim; i++) {
                unsigned char *dst = ref + ((size_t)cell[t] * (size_t)dim + (size_t)i) * es;
                if (kvf == TD_CU_KV_F32) {
                    memcpy(dst, &rows[t * ld + i], 4);
                } else {
                    const float x = rows[t * ld + i];
                    uint16_t h = kvf == TD_CU_KV_F16 ? td_f32_to_f16(x) : td_f32_to_bf16(x);
                    memcpy(dst, &h, 2);
                }
            }
        int same = memcmp(cache, ref, bytes) == 0;
        printf("  store_rows %-47s %s\n", fmt[kvf], same ? "bit-exact" : "NOT bit-exact");
        CHECKF(same, "store_rows %s", fmt[kvf]);
        free(cache), free(ref);
        td_cu_free(cache_d);
    }
    { /* gather: 9 rows out of 40, with repeats */
        int64_t R = 9, n = 1024;
        float *src = rnd(ncells * n, -1.0f, 1.0f), *dst = malloc((size_t)(R * n) * 4);
        float *ref = malloc((size_t)(R * n) * 4);
        int32_t idx[9];
        for (int64_t r = 0; r < R; r++) idx[r] = (int32_t)irand(ncells);
        float *src_d = cu_up(src, (size_t)(ncells * n) * 4), *dst_d = cu_up(NULL, (size_t)(R * n) * 4);
        int32_t *idx_d = cu_up(idx, sizeof idx);
        CU(td_cu_gather_rows(dst_d, src_d, idx_d, R, n, NULL));
        cu_down(dst, dst_d, (size_t)(R * n) * 4);
        for (int64_t r = 0; r < R; r++) memcpy(ref + r * n, src + idx[r] * n, (size_t)n * 4);
        cu_bits("gather_rows R=9 n=1024", dst, ref, R * n);
        free(src), free(dst), free(ref);
        td_cu_free(src_d), td_cu_free(dst_d), td_cu_free(idx_d);
    }
    { /* scatter_ints: runs of 0 .. 700 ints (one empty, one past a block's 256 threads twice) packed in one block */
        enum { RUNS = 6, DST = 5000 };
        const int32_t len[RUNS] = {1, 0, 700, 63, 257, 5}, to[RUNS] = {10, 20, 1000, 4000, 2000, 4990};
        int32_t runs[3 * RUNS], src[1100], *dst = malloc(DST * 4), *ref = malloc(DST * 4);
        int32_t at = 37; /* the data after a gap, as the engine packs it behind the pass's arrays */
        for (int r = 0; r < RUNS; r++) {
            runs[3 * r] = to[r], runs[3 * r + 1] = at, runs[3 * r + 2] = len[r];
            at += len[r];
        }
        for (int i = 0; i < 1100; i++) src[i] = (int32_t)td_test_rand(&seed);
        for (int i = 0; i < DST; i++) ref[i] = -7;
        int32_t *src_d = cu_up(src, sizeof src), *runs_d = cu_up(runs, sizeof runs), *dst_d = cu_up(ref, DST * 4);
        for (int r = 0; r < RUNS; r++) memcpy(ref + to[r], src + runs[3 * r + 1], (size_t)len[r] * 4);
        CU(td_cu_scatter_ints(dst_d, src_d, runs_d, RUNS, NULL));
        cu_down(dst, dst_d, DST * 4);
        int same = memcmp(dst, ref, DST * 4) == 0;
        printf("  %-58s %s\n", "scatter_ints 6 runs (0 .. 700 ints)", same ? "exact, nothing else written" : "WRONG");
        CHECKF(same, "scatter_ints");
        free(dst), free(ref);
        td_cu_free(src_d), td_cu_free(runs_d), td_cu_free(dst_d);
    }
    free(rows);
    td_cu_free(cell_d), td_cu_free(rows_d);
}

/* td_cu_add_rows_norm = td_cu_add_rows then td_cu_rmsnorm, bit for bit (x, the norm's output written over y, the
 * fault word), on rows of 1024, 1000 and 7 with plain and zero-centred weights. */
static void test_add_rows_norm(void) {
    printf("add_rows_norm: = add_rows then rmsnorm (bit-exact, out over y, fault)\n");
    static const int64_t ns[] = {1024, 1000, 7};
    for (size_t ni = 0; ni < 3; ni++)
        for (int zc = 0; zc < 2; zc++) {
            int64_t R = 9, n = ns[ni];
            size_t bytes = (size_t)(R * n) * 4;
            float *x = rnd(R * n, -3.0f, 3.0f), *y = rnd(R * n, -3.0f, 3.0f), *w = rnd(n, -1.0f, 1.0f);
            y[4 * n + n / 2] = NAN; /* row 4 goes non-finite: code 5, its token */
            int32_t tok[9] = {20, 21, 22, 23, 24, 25, 26, 27, 28};
            uint64_t none = UINT64_MAX, f1, f2;
            float *x1 = cu_up(x, bytes), *y1 = cu_up(y, bytes), *x2 = cu_up(x, bytes), *y2 = cu_up(y, bytes), *wd = cu_up(w, (size_t)n * 4);
            int32_t *tok_d = cu_up(tok, sizeof tok);
            uint64_t *fd1 = cu_up(&none, sizeof none), *fd2 = cu_up(&none, sizeof none);
            CU(td_cu_add_rows(x1, y1, R, n, tok_d, fd1, 5, NULL));
            CU(td_cu_rmsnorm(y1, x1, wd, R, 1, n, 0, n, 1e-6f, zc, NULL));
            const td_cu_parts y2p = {y2, 1, n};
            CU(td_cu_add_rows_norm(x2, &y2p, R, n, tok_d, fd2, 5, y2, NULL, wd, 1e-6f, zc, NULL));
            float *a = malloc(bytes), *b = malloc(bytes);
            char name[96];
            cu_down(a, x1, bytes), cu_down(b, x2, bytes);
            snprintf(name, sizeof name, "x, n=%lld zero_centred=%d", (long long)n, zc);
            cu_bits(name, b, a, R * n);
            cu_down(a, y1, bytes), cu_down(b, y2, bytes);
            snprintf(name, sizeof name, "norm, n=%lld zero_centred=%d", (long long)n, zc);
            cu_bits(name, b, a, R * n);
            cu_down(&f1, fd1, sizeof f1), cu_down(&f2, fd2, sizeof f2);
            CHECKF(f1 == f2 && f2 == ((5ull << 32) | 24), "add_rows_norm fault %llx vs %llx", (unsigned long long)f2,
                   (unsigned long long)f1);
            free(x), free(y), free(w), free(a), free(b);
            td_cu_free(x1), td_cu_free(y1), td_cu_free(x2), td_cu_free(y2), td_cu_free(wd), td_cu_free(tok_d);
            td_cu_free(fd1), td_cu_free(fd2);
        }
}

/* td_cu_qk_prep = the head norms, the two rotations and the two stores it replaces, bit for bit: with and without
 * norms, q heads 2 hd apart (Qwen3.5's [query | gate]), a partial rotation, f32, f16 and bf16 caches, scattered cells;
 * head dims 64, 128 and 256 with rotations of 64 .. hd dims (a warp a head) and a rotation of 32 (a block a head). */
static void test_qk_prep(void) {
    printf("qk_prep: = rmsnorm (per head) x2, rope x2, store_rows x2 (bit-exact)\n");
    static const int64_t shapes[][4] = {/* hd, rot, norms, the cache's format (TD_CU_KV_*) */
                                        {128, 128, 0, 0}, {128, 128, 1, 0}, {128, 128, 0, 1}, {128, 64, 1, 1},
                                        {256, 64, 1, 0},  {64, 64, 1, 1},   {128, 32, 1, 0},  {256, 256, 1, 1},
                                        {256, 128, 0, 0}, {128, 128, 1, 2}, {64, 64, 1, 2},   {256, 64, 1, 2},
                                        {128, 32, 0, 2}};
    for (int variant = 0; variant < (int)(sizeof shapes / sizeof *shapes); variant++) {
        int norms = (int)shapes[variant][2], kvf = (int)shapes[variant][3];
        int64_t T = 5, Hq = 4, Hkv = 2, hd = shapes[variant][0], qhs = 2 * hd, rot = shapes[variant][1],
                kv_dim = Hkv * hd;
        int64_t ldq = Hq * qhs, ncell = 40, es = kvf == TD_CU_KV_F32 ? 4 : 2;
        float *q = rnd(T * ldq, -2.0f, 2.0f), *k = rnd(T * kv_dim, -2.0f, 2.0f), *v = rnd(T * kv_dim, -2.0f, 2.0f);
        float *qw = rnd(hd, 0.5f, 1.5f), *kw = rnd(hd, 0.5f, 1.5f), *cs = rnd(T * rot, -1.0f, 1.0f);
        int32_t cell[5] = {33, 2, 17, 39, 8};
        float *qa = cu_up(q, (size_t)(T * ldq) * 4), *ka = cu_up(k, (size_t)(T * kv_dim) * 4), *va = cu_up(v, (size_t)(T * kv_dim) * 4);
        float *qb = cu_up(q, (size_t)(T * ldq) * 4), *kb = cu_up(k, (size_t)(T * kv_dim) * 4), *vb = cu_up(v, (size_t)(T * kv_dim) * 4);
        float *qwd = cu_up(qw, (size_t)hd * 4), *kwd = cu_up(kw, (size_t)hd * 4), *csd = cu_up(cs, (size_t)(T * rot) * 4);
        int32_t *celld = cu_up(cell, sizeof cell);
        void *kca = cu_up(NULL, (size_t)(ncell * kv_dim * es)), *vca = cu_up(NULL, (size_t)(ncell * kv_dim * es));
        void *kcb = cu_up(NULL, (size_t)(ncell * kv_dim * es)), *vcb = cu_up(NULL, (size_t)(ncell * kv_dim * es));
        if (norms) {
            CU(td_cu_rmsnorm(qa, qa, qwd, T * Hq, Hq, ldq, qhs, hd, 1e-6f, 0, NULL));
            CU(td_cu_rmsnorm(ka, ka, kwd, T * Hkv, Hkv, kv_dim, hd, hd, 1e-6f, 0, NULL));
        }
        CU(td_cu_rope(qa, csd, T, Hq, ldq, qhs, rot, NULL));
        CU(td_cu_rope(ka, csd, T, Hkv, kv_dim, hd, rot, NULL));
        CU(td_cu_store_rows(kca, kvf, ka, kv_dim, celld, T, kv_dim, NULL));
        CU(td_cu_store_rows(vca, kvf, va, kv_dim, celld, T, kv_dim, NULL));
        CU(td_cu_qk_prep(qb, ldq, qhs, Hq, kb, kv_dim, Hkv, vb, kv_dim, NULL, norms ? qwd : NULL, norms ? kwd : NULL,
                         hd, 1e-6f, 0, csd, rot, kcb, vcb, kvf, celld, kv_dim, T, NULL));
        size_t cb = (size_t)(ncell * kv_dim * es);
        float *a = malloc((size_t)(T * ldq) * 4), *b = malloc((size_t)(T * ldq) * 4);
        unsigned char *ca = malloc(cb), *cb2 = malloc(cb);
        char name[96];
        cu_down(a, qa, (size_t)(T * ldq) * 4), cu_down(b, qb, (size_t)(T * ldq) * 4);
        snprintf(name, sizeof name, "q, norms=%d kv=%d hd=%lld rot=%lld", norms, kvf, (long long)hd, (long long)rot);
        cu_bits(name, b, a, T * ldq);
        cu_down(a, ka, (size_t)(T * kv_dim) * 4), cu_down(b, kb, (size_t)(T * kv_dim) * 4);
        snprintf(name, sizeof name, "k, norms=%d kv=%d hd=%lld rot=%lld", norms, kvf, (long long)hd, (long long)rot);
        cu_bits(name, b, a, T * kv_dim);
        cu_down(ca, kca, cb), cu_down(cb2, kcb, cb);
        CHECKF(memcmp(ca, cb2, cb) == 0, "qk_prep: key cache differs (norms %d kv %d)", norms, kvf);
        cu_down(ca, vca, cb), cu_down(cb2, vcb, cb);
        CHECKF(memcmp(ca, cb2, cb) == 0, "qk_prep: value cache differs (norms %d kv %d)", norms, kvf);
        free(q), free(k), free(v), free(qw), free(kw), free(cs), free(a), free(b), free(ca), free(cb2);
        td_cu_free(qa), td_cu_free(ka), td_cu_free(va), td_cu_free(qb), td_cu_free(kb), td_cu_free(vb);
        td_cu_free(qwd), td_cu_free(kwd), td_cu_free(csd), td_cu_free(celld);
        td_cu_free(kca), td_cu_free(vca), td_cu_free(kcb), td_cu_free(vcb);
    }
}

/* td_cu_qk_prep from the q, k and v products' partials (td_cu_matmul_multi_parts' layout: [S][T][q | k | v], three
 * slices) = td_cu_qk_prep of their sums in order (made here: P_0 + P_1 + P_2 in float), bit for bit: q with its
 * gate columns, k, both caches; a warp a head and a block a head. */
static void test_qk_prep_parts(void) {
    printf("qk_prep: from the products' partials = from their sums (bit-exact)\n");
    static const int64_t shapes[][4] = {{128, 128, 1, 0}, {256, 64, 1, 2}, {128, 32, 0, 1}, {64, 64, 1, 2}};
    for (int variant = 0; variant < (int)(sizeof shapes / sizeof *shapes); variant++) {
        const int norms = (int)shapes[variant][2], kvf = (int)shapes[variant][3];
        const int64_t T = 5, S = 3, Hq = 4, Hkv = 2, hd = shapes[variant][0], qhs = 2 * hd, rot = shapes[variant][1];
        const int64_t kv_dim = Hkv * hd, ldq = Hq * qhs, ng = ldq + 2 * kv_dim, ncell = 40;
        const int64_t es = kvf == TD_CU_KV_F32 ? 4 : 2;
        float *part = rnd(S * T * ng, -1.0f, 1.0f), *sum = malloc((size_t)(T * ng) * 4);
        for (int64_t t = 0; t < T; t++)
            for (int64_t c = 0; c < ng; c++) {
                float y = part[t * ng + c];
                for (int64_t sl = 1; sl < S; sl++) y = y + part[(sl * T + t) * ng + c];
                sum[t * ng + c] = y;
            }
        float *q = malloc((size_t)(T * ldq) * 4), *k = malloc((size_t)(T * kv_dim) * 4);
        float *v = malloc((size_t)(T * kv_dim) * 4);
        for (int64_t t = 0; t < T; t++) {
            memcpy(q + t * ldq, sum + t * ng, (size_t)ldq * 4);
            memcpy(k + t * kv_dim, sum + t * ng + ldq, (size_t)kv_dim * 4);
            memcpy(v + t * kv_dim, sum + t * ng + ldq + kv_dim, (size_t)kv_dim * 4);
        }
        float *qw = rnd(hd, 0.5f, 1.5f), *kw = rnd(hd, 0.5f, 1.5f), *cs = rnd(T * rot, -1.0f, 1.0f);
        int32_t cell[5] = {33, 2, 17, 39, 8};
        const size_t qb = (size_t)(T * ldq) * 4, kb = (size_t)(T * kv_dim) * 4, cb = (size_t)(ncell * kv_dim * es);
        float *qa = cu_up(q, qb), *ka = cu_up(k, kb), *va = cu_up(v, kb), *qd = cu_up(NULL, qb), *kd = cu_up(NULL, kb);
        float *pd = cu_up(part, (size_t)(S * T * ng) * 4), *qwd = cu_up(qw, (size_t)hd * 4);
        float *kwd = cu_up(kw, (size_t)hd * 4), *csd = cu_up(cs, (size_t)(T * rot) * 4);
        int32_t *celld = cu_up(cell, sizeof cell);
        void *kca = cu_up(NULL, cb), *vca = cu_up(NULL, cb), *kcb = cu_up(NULL, cb), *vcb = cu_up(NULL, cb);
        const td_cu_parts parts[3] = {{pd, S, ng}, {pd + ldq, S, ng}, {pd + ldq + kv_dim, S, ng}};
        CU(td_cu_qk_prep(qa, ldq, qhs, Hq, ka, kv_dim, Hkv, va, kv_dim, NULL, norms ? qwd : NULL, norms ? kwd : NULL,
                         hd, 1e-6f, 0, csd, rot, kca, vca, kvf, celld, kv_dim, T, NULL));
        CU(td_cu_qk_prep(qd, ldq, qhs, Hq, kd, kv_dim, Hkv, NULL, kv_dim, parts, norms ? qwd : NULL,
                         norms ? kwd : NULL, hd, 1e-6f, 0, csd, rot, kcb, vcb, kvf, celld, kv_dim, T, NULL));
        float *a = malloc(qb), *b = malloc(qb);
        unsigned char *ca = malloc(cb), *cb2 = malloc(cb);
        char name[96];
        cu_down(a, qa, qb), cu_down(b, qd, qb);
        snprintf(name, sizeof name, "q from partials, hd=%lld rot=%lld", (long long)hd, (long long)rot);
        cu_bits(name, b, a, T * ldq);
        cu_down(a, ka, kb), cu_down(b, kd, kb);
        snprintf(name, sizeof name, "k from partials, hd=%lld rot=%lld", (long long)hd, (long long)rot);
        cu_bits(name, b, a, T * kv_dim);
        cu_down(ca, kca, cb), cu_down(cb2, kcb, cb);
        CHECKF(memcmp(ca, cb2, cb) == 0, "qk_prep from partials: key cache differs (hd %lld)", (long long)hd);
        cu_down(ca, vca, cb), cu_down(cb2, vcb, cb);
        CHECKF(memcmp(ca, cb2, cb) == 0, "qk_prep from partials: value cache differs (hd %lld)", (long long)hd);
        free(part), free(sum), free(q), free(k), free(v), free(qw), free(kw), free(cs), free(a), free(b), free(ca);
        free(cb2);
        td_cu_free(qa), td_cu_free(ka), td_cu_free(va), td_cu_free(qd), td_cu_free(kd), td_cu_free(pd);
        td_cu_free(qwd), td_cu_free(kwd), td_cu_free(csd), td_cu_free(celld);
        td_cu_free(kca), td_cu_free(vca), td_cu_free(kcb), td_cu_free(vcb);
    }
}

static void test_gates(void) {
    printf("sigmoid_gate, silu_mul: within 4 ulp (the device's expf)\n");
    { /* the gate sits in q's rows: [T, H, 2 hd], gate = second half of each head */
        int64_t T = 7, H = 16, hd = 128, ldx = H * hd, ldg = H * 2 * hd;
        float *x = rnd(T * ldx, -3.0f, 3.0f), *q = rnd(T * ldg, -8.0f, 8.0f), *y = malloc((size_t)(T * ldx) * 4);
        float *xd = cu_up(x, (size_t)(T * ldx) * 4), *qd = cu_up(q, (size_t)(T * ldg) * 4);
        CU(td_cu_sigmoid_gate(xd, ldx, qd + hd, ldg, 2 * hd, T, H, hd, NULL));
        cu_down(y, xd, (size_t)(T * ldx) * 4);
        for (int64_t t = 0; t < T; t++)
            for (int64_t h = 0; h < H; h++) td_sigmoid_gate(x + t * ldx + h * hd, q + t * ldg + h * 2 * hd + hd, hd);
        cu_within_ulps("sigmoid_gate T=7 H=16 hd=128", y, x, T * ldx, 4);
        free(x), free(q), free(y);
        td_cu_free(xd), td_cu_free(qd);
    }
    {
        int64_t n = 7 * 3072 + 5;
        float *g = rnd(n, -12.0f, 12.0f), *u = rnd(n, -3.0f, 3.0f), *y = malloc((size_t)n * 4);
        float *gd = cu_up(g, (size_t)n * 4), *ud = cu_up(u, (size_t)n * 4);
        CU(td_cu_silu_mul(gd, ud, n, NULL));
        cu_down(y, gd, (size_t)n * 4);
        td_silu_mul(g, u, n);
        cu_within_ulps("silu_mul n=21509", y, g, n, 4);
        free(g), free(u), free(y);
        td_cu_free(gd), td_cu_free(ud);
    }
}

static void test_residual(void) {
    printf("add_rows, check_rows: bit-exact sums; fault = (code << 32) | token, the smallest wins\n");
    int64_t R = 7, n = 1024, ld = n + 16;
    float *x = rnd(R * n, -1.0f, 1.0f), *y = rnd(R * n, -1.0f, 1.0f), *out = malloc((size_t)(R * n) * 4);
    int32_t tok[7] = {10, 11, 12, 13, 14, 15, 16};
    uint64_t fault = UINT64_MAX, got;
    float *xd = cu_up(x, (size_t)(R * n) * 4), *yd = cu_up(y, (size_t)(R * n) * 4);
    int32_t *tok_d = cu_up(tok, sizeof tok);
    uint64_t *fault_d = cu_up(&fault, sizeof fault);
    CU(td_cu_add_rows(xd, yd, R, n, tok_d, fault_d, 7, NULL));
    cu_down(out, xd, (size_t)(R * n) * 4);
    cu_down(&got, fault_d, sizeof got);
    for (int64_t i = 0; i < R * n; i++) x[i] += y[i];
    cu_bits("add_rows R=7 n=1024", out, x, R * n);
    CHECKF(got == UINT64_MAX, "add_rows on finite rows set the fault to %llx", (unsigned long long)got);
    /* NaN in row 5 and inf in row 3 (from y): code 7, token 13 */
    float nan = NAN, inf = INFINITY;
    CU(td_cu_h2d(yd + 5 * n + 17, &nan, 4, NULL));
    CU(td_cu_h2d(yd + 3 * n + 1000, &inf, 4, NULL));
    CU(td_cu_add_rows(xd, yd, R, n, tok_d, fault_d, 7, NULL));
    cu_down(&got, fault_d, sizeof got);
    CHECKF(got == ((7ull << 32) | 13), "add_rows fault %llx", (unsigned long long)got);
    /* a smaller code wins whatever the token */
    CU(td_cu_add_rows(xd + 5 * n, yd + 5 * n, 1, n, tok_d + 6, fault_d, 3, NULL));
    cu_down(&got, fault_d, sizeof got);
    CHECKF(got == ((3ull << 32) | 16), "add_rows fault after code 3 %llx", (unsigned long long)got);
    printf("  %-58s %s\n", "add_rows faults", got == ((3ull << 32) | 16) ? "as stated" : "WRONG");
    /* check_rows, rows ld apart: NaN in the gaps is not looked at; row 4 holds -inf; tok = r without row_tok */
    float *c = rnd(R * ld, -1.0f, 1.0f);
    for (int64_t r = 0; r < R; r++)
        for (int64_t i = n; i < ld; i++) c[r * ld + i] = NAN;
    float *cd = cu_up(c, (size_t)(R * ld) * 4);
    fault = UINT64_MAX;
    CU(td_cu_h2d(fault_d, &fault, sizeof fault, NULL));
    CU(td_cu_check_rows(cd, R, n, ld, NULL, fault_d, 9, NULL));
    cu_down(&got, fault_d, sizeof got);
    CHECKF(got == UINT64_MAX, "check_rows looked past n: %llx", (unsigned long long)got);
    float minf = -INFINITY;
    CU(td_cu_h2d(cd + 4 * ld + 3, &minf, 4, NULL));
    CU(td_cu_h2d(cd + 6 * ld + 0, &nan, 4, NULL));
    CU(td_cu_check_rows(cd, R, n, ld, NULL, fault_d, 9, NULL));
    cu_down(&got, fault_d, sizeof got);
    CHECKF(got == ((9ull << 32) | 4), "check_rows fault %llx", (unsigned long long)got);
    printf("  %-58s %s\n", "check_rows faults", got == ((9ull << 32) | 4) ? "as stated" : "WRONG");
    free(x), free(y), free(out), free(c);
    td_cu_free(xd), td_cu_free(yd), td_cu_free(tok_d), td_cu_free(fault_d), td_cu_free(cd);
}

/* ---- attention ---- */

/* within 1e-5 of the reference; the test modes give the same bits */
static void attention_close(const attn_acc *a) {
    cu_within_rel(a->name, a->out, a->ref, a->T * a->c->Hq * a->c->hd, 1e-5);
    attn_modes_bits(a->c, a->q, a->seq, a->pos, a->T, a->window, a->out, 0);
}

static void test_attention(void) {
    printf("attention: against td_attn_rows_ref (1e-5 relative: fmaf dots, online softmax over chunks of 64); the\n"
           "  one-block, all-through-the-combine and by-chunks paths bit-identical to the normal one\n");
    static const int64_t cases[][5] = {/* Hq, Hkv, hd, q head stride, T */
                                       {16, 8, 128, 128, 144}, {4, 1, 64, 64, 200}, {8, 2, 256, 512, 12},
                                       {2, 2, 72, 80, 3},      {16, 2, 128, 128, 20}, {6, 2, 67, 67, 11},
                                       {4, 2, 320, 320, 9},    {16, 8, 128, 128, 1}};
    attn_accuracy(&seed, cases, sizeof cases / sizeof *cases, 0, attention_close);

    printf("attention: batch invariance (tile neighbours and sizes, other sequences, sequence slot, cell layout)\n");
    static const int32_t tposs[] = {261, 1000, 3000};
    const int64_t n_ctx = 3100;
    for (int f16 = 0; f16 < 2; f16++)
        for (size_t pi = 0; pi < sizeof tposs / sizeof *tposs; pi++) {
            int64_t Hq = 16, Hkv = 8, hd = 128, ldq = Hq * hd, window = pi == 2 && f16 ? 700 : 0;
            kvcase c = kv_new(&seed, Hq, Hkv, hd, hd, f16, n_ctx, 3, 0);
            float *target = rnd(ldq, -3.0f, 3.0f), *first = NULL;
            int32_t tpos = tposs[pi];
            /* T, the target's row, tokens per tile, reversed groups; r == 2: the target's sequence holds the other
             * tokens (a prefill-like tile); the last run moves the cells and the slot */
            static const int64_t runs[][4] = {{1, 0, 0, 0}, {7, 4, 0, 0}, {9, 3, 0, 1}, {144, 77, 0, 0},
                                              {144, 77, 1, 0}, {144, 77, 3, 1}, {144, 77, 0, 0}};
            const int n_runs = sizeof runs / sizeof *runs;
            for (int r = 0; r < n_runs; r++) {
                int64_t T = runs[r][0], at = runs[r][1];
                attn_cut cut = {runs[r][2], window, 0, (int)runs[r][3], 0};
                float *out = attn_target_row(&c, &seed, target, tpos, T, at, r == 2, r == n_runs - 1, cut, 0);
                if (!first) {
                    first = out;
                } else {
                    char name[128];
                    snprintf(name, sizeof name, "kv %s pos %d%s: T=%lld row %lld, tile %lld%s%s vs alone",
                             f16 ? "f16" : "f32", tpos, window ? " window 700" : "", (long long)T, (long long)at,
                             (long long)runs[r][2], r == 2 ? ", own sequence" : "",
                             r == n_runs - 1 ? ", moved cells and slot" : "");
                    cu_bits(name, out, first, ldq); /* ldo = ldq here */
                    free(out);
                }
            }
            free(target), free(first);
            kv_free(&c);
        }

    /* a scratch too small is refused with the sizes, not written past */
    {
        kvcase c = kv_new(&seed, 4, 2, 64, 64, 0, 1100, 1, 0);
        float *q = rnd(4 * 64, -1.0f, 1.0f);
        int32_t seq = 0, pos = 1000, tile[2] = {0, 1}, tok = 0;
        float *qd = cu_up(q, 4 * 64 * 4), *od = cu_up(NULL, 4 * 64 * 4);
        int32_t *seq_d = cu_up(&seq, 4), *pos_d = cu_up(&pos, 4), *tile_d = cu_up(tile, 8), *tok_d = cu_up(&tok, 4);
        td_cu_attn_plan plan = {tok_d, tile_d, 1, 1001, NULL, td_cu_attn_scratch_floats(1, 4, 1001, 64) - 1, 0,
                                NULL};
        int rc = td_cu_attention(od, 256, qd, 256, 64, c.kc_d, c.vc_d, 0, c.kv_dim, c.cells_d, c.n_ctx, seq_d, pos_d, 1,
                                 4, 2, 64, 0.125f, 0, &plan, NULL);
        CHECK(rc == -1 && strstr(td_cu_error(), "scratch"));
        printf("  %-58s \"%s\"\n", "a scratch too small", td_cu_error());
        td_cu_free(qd), td_cu_free(od), td_cu_free(seq_d), td_cu_free(pos_d), td_cu_free(tile_d), td_cu_free(tok_d);
        free(q);
        kv_free(&c);
    }
}

/* ---- Gated DeltaNet ---- */

/* Three groups (sequences 2, 0, 3 of 4) of 1, 7 and 64 tokens, their rows shuffled over the batch of 72. */
#define DN_T 72
static const int32_t dn_seq[3] = {2, 0, 3}, dn_off[4] = {0, 1, 8, 72};
static void dn_rows(int32_t *tok) {
    for (int32_t i = 0; i < DN_T; i++) tok[i] = i;
    shuffle(tok, DN_T);
}

/* K 4 (Qwen3.5's), 3 and 2. The 72 tokens of the first launch run every token at once (more than 64), the single
 * group and the 21 + 43 split a thread per channel walking the tokens: their outputs and states must be the bits of
 * the first's. */
static void test_conv(int64_t K) {
    printf("conv K=%lld: against td_conv_step (outputs within 4 ulp: expf; state bit-exact); invariance; "
           "prefix split\n", (long long)K);
    int64_t C = 1000, ss = (K - 1) * C + 8, n_seq = 4;
    int32_t tok[DN_T];
    dn_rows(tok);
    float *x = rnd(DN_T * C, -2.0f, 2.0f), *w = rnd(C * K, -1.0f, 1.0f), *st = rnd(n_seq * ss, -2.0f, 2.0f);
    float *out = malloc((size_t)(DN_T * C) * 4), *ref = malloc((size_t)(DN_T * C) * 4);
    float *st_ref = malloc((size_t)(n_seq * ss) * 4), *st_got = malloc((size_t)(n_seq * ss) * 4);
    memcpy(st_ref, st, (size_t)(n_seq * ss) * 4);
    float *xd = cu_up(x, (size_t)(DN_T * C) * 4), *wd = cu_up(w, (size_t)(C * K) * 4), *od = cu_up(NULL, (size_t)(DN_T * C) * 4);
    float *sd = cu_up(st, (size_t)(n_seq * ss) * 4);
    groups g = groups_new(dn_seq, dn_off, tok, 3);
    CU(td_cu_conv(od, xd, sd, ss, wd, K, C, &g.g, NULL));
    cu_down(out, od, (size_t)(DN_T * C) * 4);
    cu_down(st_got, sd, (size_t)(n_seq * ss) * 4);
    for (int gi = 0; gi < 3; gi++)
        for (int32_t i = dn_off[gi]; i < dn_off[gi + 1]; i++)
            td_conv_step(ref + tok[i] * C, st_ref + dn_seq[gi] * ss, x + tok[i] * C, w, K, C, 0, C);
    cu_within_ulps("conv C=1000, groups of 1 / 7 / 64 tokens", out, ref, DN_T * C, 4);
    cu_bits("conv state (sequence 1 untouched)", st_got, st_ref, n_seq * ss);
    /* invariance: group 1 (sequence 0, 7 tokens) alone, its tokens at rows 0..6 */
    {
        int32_t off1[2] = {0, 7}, seq1[1] = {0}, tok1[7];
        float *x1 = malloc((size_t)(7 * C) * 4), *o1 = malloc((size_t)(7 * C) * 4), *s1 = malloc((size_t)ss * 4);
        for (int i = 0; i < 7; i++) tok1[i] = i;
        dn_pick(x1, x, tok + 1, 7, C);
        float *x1d = cu_up(x1, (size_t)(7 * C) * 4), *o1d = cu_up(NULL, (size_t)(7 * C) * 4), *s1d = cu_up(st, (size_t)ss * 4);
        groups g1 = groups_new(seq1, off1, tok1, 1);
        CU(td_cu_conv(o1d, x1d, s1d, ss, wd, K, C, &g1.g, NULL));
        cu_down(o1, o1d, (size_t)(7 * C) * 4);
        cu_down(s1, s1d, (size_t)ss * 4);
        float *want = malloc((size_t)(7 * C) * 4);
        dn_pick(want, out, tok + 1, 7, C);
        cu_bits("conv: a group alone vs among others (outputs)", o1, want, 7 * C);
        cu_bits("conv: a group alone vs among others (state)", s1, st_got, ss);
        free(x1), free(o1), free(s1), free(want);
        td_cu_free(x1d), td_cu_free(o1d), td_cu_free(s1d);
        groups_free(&g1);
    }
    /* prefix: group 2 (sequence 3, 64 tokens) as 21 + 43 tokens over two launches */
    {
        float *o2 = malloc((size_t)(DN_T * C) * 4), *s2 = malloc((size_t)(n_seq * ss) * 4);
        float *o2d = cu_up(NULL, (size_t)(DN_T * C) * 4), *s2d = cu_up(st, (size_t)(n_seq * ss) * 4);
        int32_t seqa[1] = {3}, offa[2] = {0, 21}, offb[2] = {0, 43};
        groups ga = groups_new(seqa, offa, tok + 8, 1), gb = groups_new(seqa, offb, tok + 29, 1);
        CU(td_cu_conv(o2d, xd, s2d, ss, wd, K, C, &ga.g, NULL));
        CU(td_cu_conv(o2d, xd, s2d, ss, wd, K, C, &gb.g, NULL));
        cu_down(o2, o2d, (size_t)(DN_T * C) * 4);
        cu_down(s2, s2d, (size_t)(n_seq * ss) * 4);
        float *a = malloc((size_t)(64 * C) * 4), *b = malloc((size_t)(64 * C) * 4);
        dn_pick(a, o2, tok + 8, 64, C);
        dn_pick(b, out, tok + 8, 64, C);
        cu_bits("conv: 64 tokens as 21 + 43 (outputs)", a, b, 64 * C);
        cu_bits("conv: 64 tokens as 21 + 43 (state)", s2 + 3 * ss, st_got + 3 * ss, ss);
        free(o2), free(s2), free(a), free(b);
        td_cu_free(o2d), td_cu_free(s2d);
        groups_free(&ga), groups_free(&gb);
    }
    free(x), free(w), free(st), free(out), free(ref), free(st_ref), free(st_got);
    td_cu_free(xd), td_cu_free(wd), td_cu_free(od), td_cu_free(sd);
    groups_free(&g);
}

static void test_deltanet(void) {
    printf("deltanet: against td_deltanet_step_ref + td_gated_rmsnorm (1e-5 relative: the l2norm's tree sum, expf)\n");
    static const int64_t cases[][4] = {{4, 8, 128, 128}, {2, 2, 64, 96}, {1, 2, 256, 256}}; /* Hk, Hv, dk, dv */
    for (size_t ci = 0; ci < sizeof cases / sizeof *cases; ci++) {
        dncase c = dn_new(&seed, cases[ci][0], cases[ci][1], cases[ci][2], cases[ci][3], DN_T, 4);
        int64_t cn = DN_T * c.Hv * c.dv, sn = c.n_seq * c.ss;
        int32_t tok[DN_T];
        dn_rows(tok);
        groups g = groups_new(dn_seq, dn_off, tok, 3);
        float *core = malloc((size_t)cn * 4), *state = malloc((size_t)sn * 4);
        float *rcore = calloc((size_t)cn, 4), *rstate = malloc((size_t)sn * 4);
        memcpy(rstate, c.state, (size_t)sn * 4);
        dn_run(&c, &g, core, state, NULL, 0);
        for (int gi = 0; gi < 3; gi++)
            dn_ref_group(&c, rcore, rstate, dn_seq[gi], tok + dn_off[gi], dn_off[gi + 1] - dn_off[gi]);
        char name[96];
        snprintf(name, sizeof name, "Hk=%lld Hv=%lld dk=%lld dv=%lld: outputs", (long long)c.Hk, (long long)c.Hv,
                 (long long)c.dk, (long long)c.dv);
        cu_within_rel(name, core, rcore, cn, 1e-5);
        snprintf(name, sizeof name, "Hk=%lld Hv=%lld dk=%lld dv=%lld: state", (long long)c.Hk, (long long)c.Hv,
                 (long long)c.dk, (long long)c.dv);
        cu_within_rel(name, state, rstate, sn, 1e-5);
        cu_bits("  sequence 1 (in no group) untouched", state + c.ss, c.state + c.ss, c.ss);

        /* invariance: group 1 (sequence 0, 7 tokens) alone, same token rows, no other group */
        {
            int32_t seq1[1] = {0}, off1[2] = {0, 7};
            groups g1 = groups_new(seq1, off1, tok + 1, 1);
            float *core1 = malloc((size_t)cn * 4), *state1 = malloc((size_t)sn * 4);
            dn_run(&c, &g1, core1, state1, NULL, 0);
            float *a = malloc((size_t)(7 * c.Hv * c.dv) * 4), *b = malloc((size_t)(7 * c.Hv * c.dv) * 4);
            dn_pick(a, core1, tok + 1, 7, c.Hv * c.dv);
            dn_pick(b, core, tok + 1, 7, c.Hv * c.dv);
            cu_bits("  a group alone vs among others (outputs)", a, b, 7 * c.Hv * c.dv);
            cu_bits("  a group alone vs among others (state)", state1, state, c.ss);
            free(core1), free(state1), free(a), free(b);
            groups_free(&g1);
        }
        /* prefix: group 2 (sequence 3, 64 tokens) as 21 + 43 tokens over two launches, the state kept on the device */
        {
            int32_t seqa[1] = {3}, offa[2] = {0, 21}, offb[2] = {0, 43};
            groups ga = groups_new(seqa, offa, tok + 8, 1), gb = groups_new(seqa, offb, tok + 29, 1);
            float *core2 = malloc((size_t)cn * 4), *core3 = malloc((size_t)cn * 4), *state2 = malloc((size_t)sn * 4);
            float *sd = cu_up(c.state, (size_t)sn * 4);
            dn_run(&c, &ga, core2, state2, sd, 0);
            dn_run(&c, &gb, core3, state2, sd, 0);
            float *a = malloc((size_t)(64 * c.Hv * c.dv) * 4), *b = malloc((size_t)(64 * c.Hv * c.dv) * 4);
            dn_pick(a, core2, tok + 8, 21, c.Hv * c.dv);
            dn_pick(a + 21 * c.Hv * c.dv, core3, tok + 29, 43, c.Hv * c.dv);
            dn_pick(b, core, tok + 8, 64, c.Hv * c.dv);
            cu_bits("  64 tokens as 21 + 43 (outputs)", a, b, 64 * c.Hv * c.dv);
            cu_bits("  64 tokens as 21 + 43 (state)", state2 + 3 * c.ss, state + 3 * c.ss, c.ss);
            free(core2), free(core3), free(state2), free(a), free(b);
            td_cu_free(sd);
            groups_free(&ga), groups_free(&gb);
        }
        free(core), free(state), free(rcore), free(rstate);
        groups_free(&g);
        dn_free(&c);
    }
}

static void test_errors(void) {
    printf("errors\n");
    void *p = td_cu_malloc((size_t)1 << 50);
    CHECKF(p == NULL && strstr(td_cu_error(), "cudaMalloc(") != NULL, "td_cu_malloc(2^50): %s", td_cu_error());
    printf("  %-58s \"%s\"\n", "td_cu_malloc(2^50)", td_cu_error());
    td_cu_free(p);
    td_cu_mat bad = {TD_DTYPE_OTHER, 1, 32, 64, NULL};
    CHECK(td_cu_matmul(NULL, 1, NULL, 32, 1, &bad, NULL, 1, 0, NULL) == -1 && td_cu_error()[0]);
    printf("  %-58s \"%s\"\n", "td_cu_matmul on an OTHER weight", td_cu_error());
    /* a later good launch is not blamed for the earlier errors */
    float *x = cu_up(NULL, 64 * 4), *u = cu_up(NULL, 64 * 4);
    CU(td_cu_silu_mul(x, u, 64, NULL));
    CU(td_cu_sync(NULL));
    td_cu_free(x), td_cu_free(u);
}

int main(void) {
    if (!cu_test_device("test_cuda_kernels")) return 77;
    test_matmul();
    test_matmul_tc_invariance();
    test_embed();
    test_rmsnorm();
    test_rope();
    test_store_gather();
    test_gates();
    test_residual();
    test_add_rows_norm();
    test_qk_prep_parts();
    test_qk_prep();
    test_attention();
    test_conv(4);
    test_conv(3);
    test_conv(2);
    test_deltanet();
    test_errors();
    CU(td_cu_sync(NULL));
    return td_test_finish("test_cuda_kernels");
}
