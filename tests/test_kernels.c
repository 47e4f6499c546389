/* AVX2 kernels against the scalar reference on random inputs of odd sizes, and the determinism contract:
 * a dot product's result does not depend on the tile, the row range or the number of tokens processed with it. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/kernels.h"
#include "kernels/cpu/quant.h"
#include "test_util.h"
#include "util/half.h"

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

static void test_matmul(void) {
    static const int64_t cols_list[] = {1, 7, 8, 33, 4097};
    static const int64_t rows_list[] = {1, 7, 33};
    static const int64_t T_list[] = {1, 2, 3, 5, 67};
    static const td_dtype types[] = {TD_DTYPE_F32, TD_DTYPE_F16, TD_DTYPE_BF16};
    uint64_t rng = 42;
    double worst = 0;
    for (size_t ti = 0; ti < 3; ti++)
        for (size_t ci = 0; ci < 5; ci++)
            for (size_t ri = 0; ri < 3; ri++)
                for (size_t Ti = 0; Ti < 5; Ti++) {
                    int64_t cols = cols_list[ci], rows = rows_list[ri], T = T_list[Ti];
                    if (cols == 4097 && T == 67 && td_test_sanitized()) continue;
                    td_mat w;
                    void *data = make_weights(types[ti], rows, cols, &rng, &w);
                    float *x = malloc((size_t)(T * cols) * sizeof *x);
                    float *yr = malloc((size_t)(T * rows) * sizeof *yr), *ya = malloc((size_t)(T * rows) * sizeof *ya);
                    float *y1 = malloc((size_t)rows * sizeof *y1);
                    for (int64_t i = 0; i < T * cols; i++) x[i] = td_test_uniform(&rng, -2.0f, 2.0f);
                    td_matmul_ref(&w, NULL, x, NULL, T, cols, yr, rows, 0, rows);
                    td_matmul_avx2(&w, NULL, x, NULL, T, cols, ya, rows, 0, rows);
                    /* relative to the magnitude of the terms: sum_k |w_k x_k| */
                    for (int64_t t = 0; t < T; t++)
                        for (int64_t r = 0; r < rows; r++) {
                            float *xr = x + t * cols;
                            double mag = 0;
                            float *row = malloc((size_t)cols * sizeof *row);
                            td_row_to_f32(row, &w, r);
                            for (int64_t k = 0; k < cols; k++) mag += fabs((double)row[k] * xr[k]);
                            free(row);
                            double err = fabs((double)yr[t * rows + r] - ya[t * rows + r]) / (mag + 1e-30);
                            if (err > worst) worst = err;
                            CHECKF(err <= 1e-5, "%s cols %lld rows %lld T %lld: ref %g avx2 %g (rel %g)",
                                   td_dtype_name(types[ti]), (long long)cols, (long long)rows, (long long)T,
                                   yr[t * rows + r], ya[t * rows + r], err);
                        }
                    /* determinism: one token at a time, and row by row, give the same bits as the whole batch */
                    for (int64_t t = 0; t < T; t++) {
                        td_matmul_avx2(&w, NULL, x + t * cols, NULL, 1, cols, y1, rows, 0, rows);
                        CHECKF(memcmp(y1, ya + t * rows, (size_t)rows * sizeof *y1) == 0,
                               "batch invariance %s cols %lld T %lld", td_dtype_name(types[ti]), (long long)cols,
                               (long long)T);
                    }
                    for (int64_t r = 0; r < rows; r++) { /* a row range of one, through a row index list */
                        int32_t idx[1] = {(int32_t)r};
                        float y[67];
                        td_matmul_avx2(&w, idx, x, NULL, T, cols, y, 1, 0, 1);
                        for (int64_t t = 0; t < T; t++)
                            CHECKF(memcmp(&y[t], &ya[t * rows + r], sizeof(float)) == 0, "row-list invariance");
                    }
                    free(data);
                    free(x);
                    free(yr);
                    free(ya);
                    free(y1);
                }
    printf("matmul: worst relative difference avx2 vs scalar %.3g\n", worst);
}

static void test_attention(void) {
    static const int64_t dims[] = {1, 7, 8, 33, 128};
    static const int64_t ns[] = {1, 7, 33, 300};
    uint64_t rng = 7;
    double worst = 0;
    for (size_t di = 0; di < 5; di++)
        for (size_t ni = 0; ni < 4; ni++) {
            int64_t dim = dims[di], n = ns[ni], stride = dim + 3, cells = n + 5;
            float *k = malloc((size_t)(cells * stride) * sizeof *k), *v = malloc((size_t)(cells * stride) * sizeof *v);
            float *q = malloc((size_t)dim * sizeof *q), *o1 = malloc((size_t)dim * sizeof *o1);
            float *o2 = malloc((size_t)dim * sizeof *o2), *s = malloc((size_t)n * sizeof *s);
            int32_t *idx = malloc((size_t)n * sizeof *idx);
            for (int64_t i = 0; i < cells * stride; i++) k[i] = td_test_uniform(&rng, -1, 1), v[i] = td_test_uniform(&rng, -1, 1);
            for (int64_t i = 0; i < dim; i++) q[i] = td_test_uniform(&rng, -2, 2);
            for (int64_t i = 0; i < n; i++) idx[i] = (int32_t)((i * 7 + 3) % cells); /* scattered cells */
            td_attn_ref(q, k, v, idx, n, stride, dim, 0.125f, o1, s);
            td_attn_avx2(q, k, v, idx, n, stride, dim, 0.125f, o2, s);
            for (int64_t i = 0; i < dim; i++) {
                double err = fabs((double)o1[i] - o2[i]);
                if (err > worst) worst = err;
                CHECKF(err <= 1e-5, "attention dim %lld n %lld: %g vs %g", (long long)dim, (long long)n, o1[i], o2[i]);
            }
            free(k), free(v), free(q), free(o1), free(o2), free(s), free(idx);
        }
    printf("attention: worst absolute difference avx2 vs scalar %.3g (values in [-1, 1])\n", worst);
}

/* Grouped-row attention: AVX2 against the scalar reference, f32 and f16 caches, and every row's result the same
 * alone as in any group (the engine groups rows differently in batched, serial and fresh runs). */
static void test_attention_rows(void) {
    static const int64_t dims[] = {1, 7, 8, 33, 128};
    static const int64_t Rs[] = {1, 2, 3, 8};
    uint64_t rng = 11;
    double worst = 0, worst16 = 0;
    for (size_t di = 0; di < 5; di++)
        for (size_t ri = 0; ri < 4; ri++)
            for (int f16 = 0; f16 < 2; f16++) {
                int64_t dim = dims[di], R = Rs[ri], stride = dim + 3, cells = 310, n[8], max_n = 0;
                for (int64_t r = 0; r < R; r++) n[r] = 1 + (r * 37 + 5 * (int64_t)di) % 300; /* uneven, like causal rows */
                for (int64_t r = 0; r < R; r++) max_n = n[r] > max_n ? n[r] : max_n;
                float *kf = malloc((size_t)(cells * stride) * 4), *vf = malloc((size_t)(cells * stride) * 4);
                uint16_t *kh = malloc((size_t)(cells * stride) * 2), *vh = malloc((size_t)(cells * stride) * 2);
                for (int64_t i = 0; i < cells * stride; i++) {
                    kf[i] = td_test_uniform(&rng, -1, 1), vf[i] = td_test_uniform(&rng, -1, 1);
                    kh[i] = td_f32_to_f16(kf[i]), vh[i] = td_f32_to_f16(vf[i]);
                    if (f16) kf[i] = td_f16_to_f32(kh[i]), vf[i] = td_f16_to_f32(vh[i]); /* the same values */
                }
                int32_t idx[310];
                for (int64_t i = 0; i < cells; i++) idx[i] = (int32_t)((i * 7 + 3) % cells);
                float qs[8][128], o_ref[8][128], o_avx[8][128], o_one[128];
                const float *qp[8];
                float *pr[8], *pa[8];
                for (int64_t r = 0; r < R; r++) {
                    for (int64_t d = 0; d < dim; d++) qs[r][d] = td_test_uniform(&rng, -2, 2);
                    qp[r] = qs[r], pr[r] = o_ref[r], pa[r] = o_avx[r];
                }
                const void *k = f16 ? (const void *)kh : (const void *)kf, *v = f16 ? (const void *)vh : (const void *)vf;
                float *scratch = malloc((size_t)td_attn_rows_scratch(R, max_n, dim, f16) * 4);
                td_attn_keys kr = {kf, vf, 0, idx, stride, NULL, NULL, 0}, ka = {k, v, f16, idx, stride, NULL, NULL, 0};
                td_attn_rows_ref(qp, pr, n, R, &kr, dim, 0.125f, scratch); /* f32 of the same values */
                td_attn_rows_avx2(qp, pa, n, R, &ka, dim, 0.125f, scratch);
                for (int64_t r = 0; r < R; r++) {
                    for (int64_t d = 0; d < dim; d++) {
                        double e = fabs((double)o_ref[r][d] - o_avx[r][d]);
                        if (f16) worst16 = e > worst16 ? e : worst16;
                        else worst = e > worst ? e : worst;
                        CHECKF(e <= 1e-5, "attention rows dim %lld R %lld f16 %d row %lld: %g vs %g", (long long)dim,
                               (long long)R, f16, (long long)r, o_ref[r][d], o_avx[r][d]);
                    }
                    float *po = o_one;
                    td_attn_rows_avx2(&qp[r], &po, &n[r], 1, &ka, dim, 0.125f, scratch);
                    CHECKF(memcmp(o_one, o_avx[r], (size_t)dim * 4) == 0, "attention row %lld of %lld differs alone (dim %lld)",
                           (long long)r, (long long)R, (long long)dim);
                }
                /* the first keys gathered beforehand as fp32 rows (as the engine does once per layer for a batch's
                 * shared prefix): the same bits, from the AVX2 kernel and from the reference */
                int64_t min_n = max_n;
                for (int64_t r = 0; r < R; r++) min_n = n[r] < min_n ? n[r] : min_n;
                float *pk = malloc((size_t)(min_n * dim) * 4), *pv = malloc((size_t)(min_n * dim) * 4);
                for (int64_t i = 0; i < min_n; i++)
                    for (int64_t d = 0; d < dim; d++)
                        pk[i * dim + d] = kf[(int64_t)idx[i] * stride + d], pv[i * dim + d] = vf[(int64_t)idx[i] * stride + d];
                td_attn_keys kp = ka, kpr = kr;
                kp.pre_k = kpr.pre_k = pk, kp.pre_v = kpr.pre_v = pv, kp.n_pre = kpr.n_pre = min_n;
                float o_pre[8][128], o_pref[8][128];
                float *pp[8], *ppr[8];
                for (int64_t r = 0; r < R; r++) pp[r] = o_pre[r], ppr[r] = o_pref[r];
                td_attn_rows_avx2(qp, pp, n, R, &kp, dim, 0.125f, scratch);
                for (int64_t r = 0; r < R; r++)
                    CHECKF(memcmp(o_pre[r], o_avx[r], (size_t)dim * 4) == 0, "attention row %lld with %lld gathered keys differs (dim %lld f16 %d)",
                           (long long)r, (long long)min_n, (long long)dim, f16);
                td_attn_rows_ref(qp, ppr, n, R, &kpr, dim, 0.125f, scratch);
                for (int64_t r = 0; r < R; r++)
                    CHECKF(memcmp(o_pref[r], o_ref[r], (size_t)dim * 4) == 0, "reference attention row %lld with gathered keys differs", (long long)r);
                free(pk), free(pv);
                free(kf), free(vf), free(kh), free(vh), free(scratch);
            }
    printf("attention rows: worst absolute difference avx2 vs scalar %.3g (f32 cache), %.3g (f16 cache)\n", worst, worst16);
}

/* Q8_0 / Q4_0: block layout, round-trip error bounds, and the AVX2 product against the scalar reference
 * (identical integer block sums; only the float accumulation order differs), batch- and row-invariant. */
static void test_quant(void) {
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

    static const int64_t cols_list[] = {32, 96, 544, 4096}; /* 544: 17 blocks, so x16 pads a second group */
    static const int64_t rows_list[] = {1, 7, 33};
    static const int64_t T_list[] = {1, 3, 5, 67};
    static const td_dtype types[] = {TD_DTYPE_Q8_0, TD_DTYPE_Q4_0};
    int vnni = td_cpu_has_avx512vnni();
    double worst = 0, worst_x16 = 0;
    for (int ti = 0; ti < 2; ti++)
        for (int ci = 0; ci < 4; ci++)
            for (int ri = 0; ri < 3; ri++)
                for (int Ti = 0; Ti < 4; Ti++) {
                    int64_t cols = cols_list[ci], rows = rows_list[ri], T = T_list[Ti], nb = cols / 32;
                    float *wf = malloc((size_t)(rows * cols) * sizeof *wf), *xf = malloc((size_t)(T * cols) * sizeof *xf);
                    size_t rb = td_dtype_row_bytes(types[ti], cols), qb = td_qrows_bytes(T, nb), q1b = td_qrows_bytes(1, nb);
                    uint8_t *wq = malloc((size_t)rows * rb);
                    void *qbuf1 = calloc(1, qb), *qbuf2 = calloc(1, qb), *qbuf3 = calloc(1, qb), *qbuf4 = calloc(1, qb), *qbuf5 = calloc(1, q1b);
                    float *yr = malloc((size_t)(T * rows) * 4), *ya = malloc((size_t)(T * rows) * 4), *y1 = malloc((size_t)rows * 4);
                    float *yx = malloc((size_t)(T * rows) * 4), *yv = malloc((size_t)(T * rows) * 4);
                    for (int64_t i = 0; i < rows * cols; i++) wf[i] = td_test_uniform(&rng, -1, 1);
                    for (int64_t i = 0; i < T * cols; i++) xf[i] = td_test_uniform(&rng, -2, 2);
                    for (int64_t r = 0; r < rows; r++) {
                        if (types[ti] == TD_DTYPE_Q8_0) td_quantize_q8_0(wf + r * cols, (td_block_q8_0 *)(wq + r * rb), cols);
                        else td_quantize_q4_0(wf + r * cols, (td_block_q4_0 *)(wq + r * rb), cols);
                    }
                    if (types[ti] == TD_DTYPE_Q8_0) ((td_block_q8_0 *)wq)->qs[5] = -128; /* legal in a GGUF file */
                    td_qrows xq, xq2, xx, xx2, one;
                    td_qrows_bind(&xq, qbuf1, T, nb, 0);
                    td_qrows_bind(&xq2, qbuf2, T, nb, 0);
                    int lv = types[ti] == TD_DTYPE_Q8_0 ? TD_QROWS_X16_2 : TD_QROWS_X16_1; /* x16 levels: 2 for Q8_0, 1 for Q4_0 */
                    td_qrows_bind(&xx, qbuf3, T, nb, lv);
                    td_qrows_bind(&xx2, qbuf4, T, nb, lv);
                    td_quantize_rows_ref(xf, cols, &xq, 0, T);
                    td_quantize_rows_avx2(xf, cols, &xq2, 0, T); /* identical bytes: same rounding as roundf */
                    CHECKF(memcmp(xq.q, xq2.q, (size_t)(T * nb) * sizeof *xq.q) == 0 && memcmp(xq.d, xq2.d, (size_t)(T * nb) * 4) == 0,
                           "AVX2 activation quantiser differs from the reference (cols %lld)", (long long)cols);
                    td_quantize_rows_ref(xf, cols, &xx, 0, T);
                    td_quantize_rows_avx2(xf, cols, &xx2, 0, T);
                    CHECKF(memcmp(xx.qi, xx2.qi, (size_t)(T * xx.nbg) * 512 * (size_t)lv) == 0 &&
                               memcmp(xx.d, xx2.d, (size_t)(T * xx.nbg) * 64) == 0 && memcmp(xx.s, xx2.s, (size_t)(T * xx.nbg) * 64) == 0 &&
                               (lv < 2 || (memcmp(xx.d2, xx2.d2, (size_t)(T * xx.nbg) * 64) == 0 && memcmp(xx.s2, xx2.s2, (size_t)(T * xx.nbg) * 64) == 0)),
                           "AVX2 x16 activation quantiser differs from the reference (cols %lld)", (long long)cols);
                    td_mat w = {types[ti], rows, cols, rb, wq, NULL};
                    td_qpack *pk = td_qpack_new(types[ti], rows, cols, wq, rb, 16);
                    CHECK(pk != NULL);
                    td_mat wp = w;
                    wp.pack = pk;
                    td_matmul_ref(&w, NULL, xf, &xq, T, cols, yr, rows, 0, rows);
                    td_matmul_avx2(&w, NULL, xf, &xq, T, cols, ya, rows, 0, rows);
                    td_matmul_ref(&wp, NULL, xf, &xx, T, cols, yx, rows, 0, rows);
                    for (int64_t t = 0; t < T; t++)
                        for (int64_t r = 0; r < rows; r++) {
                            /* magnitude of the terms, from the dequantised operands; the packed product against
                             * the exact product of the dequantised weights and the unquantised activations (its two
                             * activation levels leave ~2^-15 of each element) */
                            float wr[4096], xr[4096];
                            td_row_to_f32(wr, &w, r);
                            td_dequantize_q8_0(xq.q + t * nb, xr, cols);
                            double mag = 0, exact = 0;
                            for (int64_t k = 0; k < cols; k++) mag += fabs((double)wr[k] * xr[k]), exact += (double)wr[k] * xf[t * cols + k];
                            double e = fabs((double)yr[t * rows + r] - ya[t * rows + r]) / (mag + 1e-30);
                            /* two levels: against the exact product; one level: the same activations as plain */
                            double ex = fabs((lv == 2 ? exact : (double)yr[t * rows + r]) - yx[t * rows + r]) / (mag + 1e-30);
                            if (e > worst) worst = e;
                            if (ex > worst_x16) worst_x16 = ex;
                            CHECKF(e <= 1e-5, "%s cols %lld: ref %g avx2 %g", td_dtype_name(types[ti]), (long long)cols,
                                   yr[t * rows + r], ya[t * rows + r]);
                            CHECKF(ex <= (lv == 2 ? 1e-4 : 1e-5), "%s cols %lld: exact %g, ref %g, packed ref %g",
                                   td_dtype_name(types[ti]), (long long)cols, exact, yr[t * rows + r], yx[t * rows + r]);
                        }
                    for (int64_t t = 0; t < T; t++) {
                        td_qrows_bind(&one, qbuf5, 1, nb, 0);
                        memcpy(one.q, xq.q + t * nb, (size_t)nb * sizeof *one.q);
                        memcpy(one.d, xq.d + t * nb, (size_t)nb * 4);
                        td_matmul_avx2(&w, NULL, xf, &one, 1, cols, y1, rows, 0, rows);
                        CHECKF(memcmp(y1, ya + t * rows, (size_t)rows * 4) == 0, "%s batch invariance", td_dtype_name(types[ti]));
                    }
                    if (vnni) { /* the VNNI kernel is the packed reference, to the bit, in any batch and row order */
                        td_matmul_x16_avx512(&wp, NULL, &xx, T, yv, rows, 0, rows);
                        CHECKF(memcmp(yv, yx, (size_t)(T * rows) * 4) == 0, "%s cols %lld rows %lld T %lld: VNNI differs from the packed reference",
                               td_dtype_name(types[ti]), (long long)cols, (long long)rows, (long long)T);
                        int32_t rev[64];
                        for (int64_t r = 0; r < rows; r++) rev[r] = (int32_t)(rows - 1 - r);
                        for (int64_t t = 0; t < T; t++) {
                            td_qrows_bind(&one, qbuf5, 1, nb, lv);
                            memcpy(one.qi, xx.qi + t * xx.nbg * 512, (size_t)xx.nbg * 512);
                            if (lv == 2) memcpy(one.qi2, xx.qi2 + t * xx.nbg * 512, (size_t)xx.nbg * 512);
                            memcpy(one.d, xx.d + t * xx.nbg * 16, (size_t)xx.nbg * 64);
                            if (lv == 2) memcpy(one.d2, xx.d2 + t * xx.nbg * 16, (size_t)xx.nbg * 64);
                            memcpy(one.s, xx.s + t * xx.nbg * 16, (size_t)xx.nbg * 64);
                            if (lv == 2) memcpy(one.s2, xx.s2 + t * xx.nbg * 16, (size_t)xx.nbg * 64);
                            td_matmul_x16_avx512(&wp, rev, &one, 1, y1, rows, 0, rows);
                            for (int64_t r = 0; r < rows; r++)
                                CHECKF(memcmp(&y1[r], &yx[t * rows + rows - 1 - r], 4) == 0, "%s VNNI batch / row-order invariance",
                                       td_dtype_name(types[ti]));
                        }
                    }
                    td_qpack_free(pk);
                    free(wf), free(xf), free(wq), free(qbuf1), free(qbuf2), free(qbuf3), free(qbuf4), free(qbuf5), free(yr), free(ya), free(y1);
                    free(yx), free(yv);
                }
    printf("quantised matmul: worst relative difference avx2 vs the scalar reference %.3g; packed vs exact (Q8_0, two-level activations) or plain (Q4_0) %.3g%s\n", worst,
           worst_x16, vnni ? "; AVX-512 VNNI kernel identical to the packed reference" : " (no AVX-512 VNNI here)");
}

/* The packed x8 (AVX2) product: the AVX2 quantiser writes the reference's bytes, the AVX2 kernel gives the scalar
 * reference's bits in every tile shape (decode and prefill paths, row and token remainders, padded groups), the
 * result does not depend on the batch or the row order, and int16 activations keep it within 1e-4 (relative to
 * the magnitude of the terms) of the exact product of the dequantised weights and the unquantised inputs. */
static void test_quant_x8(void) {
    static const int64_t cols_list[] = {32, 96, 544, 4096}; /* 1, 3 and 17 blocks leave padding in a group */
    static const int64_t rows_list[] = {1, 7, 33};
    static const int64_t T_list[] = {1, 3, 4, 5, 9, 67};
    static const td_dtype types[] = {TD_DTYPE_Q8_0, TD_DTYPE_Q4_0};
    uint64_t rng = 91;
    double worst = 0;
    for (int ti = 0; ti < 2; ti++)
        for (int ci = 0; ci < 4; ci++)
            for (int ri = 0; ri < 3; ri++)
                for (int Ti = 0; Ti < 6; Ti++) {
                    int64_t cols = cols_list[ci], rows = rows_list[ri], T = T_list[Ti], nb = cols / 32;
                    if (cols == 4096 && T == 67 && td_test_sanitized()) continue;
                    float *wf = malloc((size_t)(rows * cols) * sizeof *wf), *xf = malloc((size_t)(T * cols) * sizeof *xf);
                    size_t rb = td_dtype_row_bytes(types[ti], cols), qb = td_qrows_bytes(T, nb);
                    uint8_t *wq = malloc((size_t)rows * rb);
                    void *qr = calloc(1, qb), *qa = calloc(1, qb), *q1 = calloc(1, td_qrows_bytes(1, nb));
                    float *yr = malloc((size_t)(T * rows) * 4), *ya = malloc((size_t)(T * rows) * 4), *y1 = malloc((size_t)rows * 4);
                    for (int64_t i = 0; i < rows * cols; i++) wf[i] = td_test_uniform(&rng, -1, 1);
                    for (int64_t i = 0; i < T * cols; i++) xf[i] = td_test_uniform(&rng, -2, 2);
                    if (T > 2) xf[cols + 3] = 0.0f, memset(xf + 2 * cols, 0, 32 * sizeof *xf); /* a zero block */
                    for (int64_t r = 0; r < rows; r++) {
                        if (types[ti] == TD_DTYPE_Q8_0) td_quantize_q8_0(wf + r * cols, (td_block_q8_0 *)(wq + r * rb), cols);
                        else td_quantize_q4_0(wf + r * cols, (td_block_q4_0 *)(wq + r * rb), cols);
                    }
                    if (types[ti] == TD_DTYPE_Q8_0) ((td_block_q8_0 *)wq)->qs[5] = -128; /* legal in a GGUF file */
                    td_qpack *pk = td_qpack_new(types[ti], rows, cols, wq, rb, 8);
                    CHECK(pk != NULL);
                    td_mat w = {types[ti], rows, cols, rb, wq, pk};
                    CHECK(td_qrows_layout(types[ti], pk) == TD_QROWS_X8);
                    td_qrows xr, xa, one;
                    td_qrows_bind(&xr, qr, T, nb, TD_QROWS_X8);
                    td_qrows_bind(&xa, qa, T, nb, TD_QROWS_X8);
                    td_quantize_rows_ref(xf, cols, &xr, 0, T);
                    td_quantize_rows_avx2(xf, cols, &xa, 0, T);
                    size_t n = (size_t)(T * xr.nbg);
                    CHECKF(memcmp(xr.qw, xa.qw, n * 512) == 0 && memcmp(xr.d, xa.d, n * 32) == 0 && memcmp(xr.s, xa.s, n * 32) == 0,
                           "AVX2 x8 activation quantiser differs from the reference (cols %lld)", (long long)cols);
                    td_matmul_ref(&w, NULL, xf, &xr, T, cols, yr, rows, 0, rows); /* -> td_matmul_x8_ref */
                    td_matmul_avx2(&w, NULL, xf, &xa, T, cols, ya, rows, 0, rows);
                    CHECKF(memcmp(yr, ya, (size_t)(T * rows) * 4) == 0, "%s cols %lld rows %lld T %lld: AVX2 x8 differs from its reference",
                           td_dtype_name(types[ti]), (long long)cols, (long long)rows, (long long)T);
                    for (int64_t t = 0; t < T; t++)
                        for (int64_t r = 0; r < rows; r++) {
                            float wr[4096];
                            td_row_to_f32(wr, &w, r);
                            double mag = 0, exact = 0;
                            for (int64_t k = 0; k < cols; k++) {
                                double xv = xf[t * cols + k];
                                mag += fabs((double)wr[k] * xv), exact += (double)wr[k] * xv;
                            }
                            double e = fabs(exact - yr[t * rows + r]) / (mag + 1e-30);
                            if (e > worst) worst = e;
                            CHECKF(e <= 1e-4, "%s cols %lld: exact %g, x8 %g", td_dtype_name(types[ti]), (long long)cols, exact, yr[t * rows + r]);
                        }
                    int32_t rev[64];
                    for (int64_t r = 0; r < rows; r++) rev[r] = (int32_t)(rows - 1 - r);
                    for (int64_t t = 0; t < T; t++) { /* one token at a time, rows in reverse through a row list */
                        td_qrows_bind(&one, q1, 1, nb, TD_QROWS_X8);
                        memcpy(one.qw, xa.qw + t * xa.nbg * 256, (size_t)xa.nbg * 512);
                        memcpy(one.d, xa.d + t * xa.nbg * 8, (size_t)xa.nbg * 32);
                        memcpy(one.s, xa.s + t * xa.nbg * 8, (size_t)xa.nbg * 32);
                        td_matmul_avx2(&w, rev, xf, &one, 1, cols, y1, rows, 0, rows);
                        for (int64_t r = 0; r < rows; r++)
                            CHECKF(memcmp(&y1[r], &ya[t * rows + rows - 1 - r], 4) == 0, "%s x8 batch / row-order invariance",
                                   td_dtype_name(types[ti]));
                    }
                    td_qpack_free(pk);
                    free(wf), free(xf), free(wq), free(qr), free(qa), free(q1), free(yr), free(ya), free(y1);
                }
    printf("packed x8 matmul: AVX2 identical to the reference; worst relative difference from the exact product %.3g\n", worst);
}

/* The AVX2 row operations against the scalar ones: RMSNorm (both norm styles, in place too) and the SwiGLU gate,
 * including large inputs where exp overflows or vanishes. */
static void test_row_ops(void) {
    static const int64_t sizes[] = {1, 7, 33, 128, 1024, 4097};
    uint64_t rng = 5;
    double worst_norm = 0, worst_silu = 0;
    for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
        int64_t n = sizes[si];
        float *x = malloc((size_t)n * 4), *w = malloc((size_t)n * 4), *a = malloc((size_t)n * 4), *b = malloc((size_t)n * 4);
        float *g1 = malloc((size_t)n * 4), *g2 = malloc((size_t)n * 4), *u = malloc((size_t)n * 4);
        for (int64_t i = 0; i < n; i++) {
            x[i] = td_test_uniform(&rng, -3, 3), w[i] = td_test_uniform(&rng, -1, 1), u[i] = td_test_uniform(&rng, -2, 2);
            g1[i] = g2[i] = i % 17 == 5 ? td_test_uniform(&rng, -120, 120) : td_test_uniform(&rng, -8, 8);
        }
        for (int zc = 0; zc < 2; zc++) {
            td_rmsnorm(a, x, w, n, 1e-6f, zc);
            td_rmsnorm_avx2(b, x, w, n, 1e-6f, zc);
            for (int64_t i = 0; i < n; i++) {
                double e = fabs((double)a[i] - b[i]) / (fabs((double)a[i]) + 1e-30);
                if (e > worst_norm) worst_norm = e;
                CHECKF(e <= 1e-6, "rmsnorm n %lld element %lld: %g vs %g", (long long)n, (long long)i, a[i], b[i]);
            }
            memcpy(b, x, (size_t)n * 4);
            td_rmsnorm_avx2(b, b, w, n, 1e-6f, zc); /* in place, as the q/k norms run */
            for (int64_t i = 0; i < n; i++) CHECKF(fabsf(a[i] - b[i]) <= 1e-6f * fabsf(a[i]), "rmsnorm in place");
        }
        td_silu_mul(g1, u, n);
        td_silu_mul_avx2(g2, u, n);
        for (int64_t i = 0; i < n; i++) {
            double e = fabs((double)g1[i] - g2[i]) / (fabs((double)g1[i]) + 1e-30);
            if (g1[i] == 0.0f) e = fabs((double)g2[i]) > 1e-30 ? 1 : 0;
            if (e > worst_silu) worst_silu = e;
            CHECKF(e <= 2e-6, "silu_mul n %lld element %lld: %g vs %g", (long long)n, (long long)i, g1[i], g2[i]);
        }
        free(x), free(w), free(a), free(b), free(g1), free(g2), free(u);
    }
    printf("row ops: worst relative difference avx2 vs scalar: rmsnorm %.3g, silu_mul %.3g\n", worst_norm, worst_silu);
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
    if (!td_cpu_has_avx2()) {
        printf("test_kernels: this CPU has no AVX2; only the scalar reference runs\n");
        test_half();
        return td_test_finish("test_kernels");
    }
    test_half();
    test_matmul();
    test_attention();
    test_attention_rows();
    test_quant();
    test_quant_x8();
    test_row_ops();
    return td_test_finish("test_kernels");
}
