/* The WebAssembly SIMD128 products (matmul_wasm128.c) against the scalar references (matmul_ref.c,
 * matmul_quant_ref.c), bit for bit, on random inputs of odd sizes: F32, BF16, F16, Q8_0 and Q4_0 weights; 1 to 9
 * tokens; 1, 3, 4, 7, 33, 71 rows (row ranges that do not start at 0, with and without a row list; 71 crosses the
 * quantised kernel's slices of 64 rows) and 4097 rows of one block; columns 1, 5, 32, 100, 4097 (block types: 32,
 * 64, 96, 1056 (one block past the kernel's chunk of 1024 activations), 4096); Q8_0 weights of -128 (GGUF allows
 * them; llama.cpp's quantiser never writes them). Then every one of the 65536 fp16 scales (subnormals, infinities,
 * NaNs) through the Q8_0 and Q4_0 products (the kernel converts scales four at a time; NaN outputs count as equal
 * to NaN). The attention (td_attn_rows_wasm128 against td_attn_rows_ref): 1, 3, 5 query rows over 7, 33, 4097
 * keys (a third gathered, the rest cache rows out of order), dimensions 1, 7, 64, 128. Built by web/CMakeLists.txt, run under Node by test_wasm.sh. Prints the count of outputs compared; exit
 * 1 with the first difference.
 * The products run twice: the SIMD128 set's, then the relaxed SIMD module's (td_matmul_wasm_relaxed_module, Q8_0 and
 * Q4_0 through it; the set itself takes it for Q4_0) where the engine
 * validates its module; with --relaxed (test_wasm.sh gives it, with Node's relaxed SIMD flag) its absence fails. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/kernels_wasm.h"
#include "kernels/cpu/quant.h"
#include "util/half.h"

typedef void (*matmul_fn)(const td_mat *w, const int32_t *rows, const float *x, const void *xq, int64_t T, int64_t ldx,
                          float *y, int64_t ldy, int64_t j0, int64_t j1);
static matmul_fn matmul = td_matmul_wasm128; /* the set under test */

static uint64_t rng = 0x9e3779b97f4a7c15u;
static float frand(void) { /* xorshift, uniform in [-1, 1), now and then a larger or a tiny value */
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    float u = (float)(rng >> 40) / (float)(1u << 24) * 2.0f - 1.0f;
    unsigned r = (unsigned)(rng & 63);
    return r == 0 ? u * 1e4f : r == 1 ? u * 1e-30f : u;
}

static int check(td_dtype type, int64_t R, int64_t C, int64_t T, int use_rows, long *compared) {
    int64_t Rall = R + 3; /* rows [2, 2 + R) of a larger matrix; the row list picks them backwards */
    size_t row_bytes = type == TD_DTYPE_F32 ? (size_t)C * 4 : type == TD_DTYPE_Q8_0 ? (size_t)(C / 32) * sizeof(td_block_q8_0)
                     : type == TD_DTYPE_Q4_0 ? (size_t)(C / 32) * sizeof(td_block_q4_0) : (size_t)C * 2;
    unsigned char *wdata = malloc(row_bytes * (size_t)Rall);
    float *row = malloc(sizeof(float) * (size_t)C), *x = malloc(sizeof(float) * (size_t)(C * T));
    float *y0 = calloc((size_t)(T * Rall), sizeof(float)), *y1 = calloc((size_t)(T * Rall), sizeof(float));
    int32_t *rows = malloc(sizeof(int32_t) * (size_t)Rall);
    void *qbuf = malloc(td_qrows_bytes(T, C) + 64);
    for (int64_t r = 0; r < Rall; r++) {
        for (int64_t k = 0; k < C; k++) row[k] = frand();
        unsigned char *dst = wdata + (size_t)r * row_bytes;
        if (type == TD_DTYPE_F32) memcpy(dst, row, row_bytes);
        else if (type == TD_DTYPE_BF16)
            for (int64_t k = 0; k < C; k++) ((uint16_t *)dst)[k] = td_f32_to_bf16(row[k]);
        else if (type == TD_DTYPE_F16)
            for (int64_t k = 0; k < C; k++) ((uint16_t *)dst)[k] = td_f32_to_f16(row[k] > 6e4f || row[k] < -6e4f ? 1 : row[k]);
        else if (type == TD_DTYPE_Q8_0) {
            td_quantize_q8_0(row, (td_block_q8_0 *)dst, C);
            if (r % 5 == 1) ((td_block_q8_0 *)dst)[0].qs[r % 32] = -128; /* outside the quantiser's +-127 */
        }
        else td_quantize_q4_0(row, (td_block_q4_0 *)dst, C);
        rows[r] = (int32_t)(Rall - 1 - r);
    }
    for (int64_t i = 0; i < C * T; i++) x[i] = frand();
    td_mat w = {type, Rall, C, row_bytes, wdata, NULL};
    td_qrows xq;
    const void *xqp = NULL;
    if (td_dtype_is_block(type)) {
        td_qrows_bind(&xq, qbuf, T, C, td_qrows_layout(type, NULL));
        td_quantize_rows_ref(x, C, &xq, 0, T);
        xqp = &xq;
    }
    const int32_t *rl = use_rows ? rows : NULL;
    td_matmul_ref(&w, rl, x, xqp, T, C, y0, Rall, 2, 2 + R);
    matmul(&w, rl, x, xqp, T, C, y1, Rall, 2, 2 + R);
    int bad = memcmp(y0, y1, sizeof(float) * (size_t)(T * Rall)) != 0;
    if (bad)
        for (int64_t i = 0; i < T * Rall; i++)
            if (memcmp(&y0[i], &y1[i], 4)) {
                fprintf(stderr, "FAIL: type %d rows %lld cols %lld tokens %lld list %d: output %lld: %.9g (ref) vs %.9g\n",
                        (int)type, (long long)R, (long long)C, (long long)T, use_rows, (long long)i, y0[i], y1[i]);
                break;
            }
    *compared += (long)(T * R);
    free(wdata), free(row), free(x), free(y0), free(y1), free(rows), free(qbuf);
    return bad;
}

/* Row r of a one-block matrix has the fp16 scale r (all 65536), its values and the activations random; 3 tokens. */
static int scales(td_dtype type, long *compared) {
    const int64_t R = 65536, C = 32, T = 3;
    size_t rb = type == TD_DTYPE_Q8_0 ? sizeof(td_block_q8_0) : sizeof(td_block_q4_0);
    unsigned char *wdata = malloc(rb * (size_t)R);
    float row[32], x[32 * 3], *y0 = malloc(sizeof(float) * (size_t)(R * T)), *y1 = malloc(sizeof(float) * (size_t)(R * T));
    void *qbuf = malloc(td_qrows_bytes(T, C) + 64);
    for (int64_t r = 0; r < R; r++) {
        for (int k = 0; k < 32; k++) row[k] = frand();
        if (type == TD_DTYPE_Q8_0) td_quantize_q8_0(row, (td_block_q8_0 *)(void *)(wdata + r * rb), C);
        else td_quantize_q4_0(row, (td_block_q4_0 *)(void *)(wdata + r * rb), C);
        uint16_t d = (uint16_t)r;
        memcpy(wdata + r * rb, &d, 2); /* d is each block's first member */
    }
    for (int i = 0; i < 32 * 3; i++) x[i] = frand();
    td_mat w = {type, R, C, rb, wdata, NULL};
    td_qrows xq;
    td_qrows_bind(&xq, qbuf, T, C, td_qrows_layout(type, NULL));
    td_quantize_rows_ref(x, C, &xq, 0, T);
    td_matmul_ref(&w, NULL, x, &xq, T, C, y0, R, 0, R);
    matmul(&w, NULL, x, &xq, T, C, y1, R, 0, R);
    int bad = 0;
    for (int64_t i = 0; i < R * T && !bad; i++)
        if (memcmp(&y0[i], &y1[i], 4) && !(isnan(y0[i]) && isnan(y1[i]))) {
            fprintf(stderr, "FAIL: type %d, fp16 scale 0x%04x, token %lld: %.9g (ref) vs %.9g\n", (int)type,
                    (unsigned)(i % R), (long long)(i / R), y0[i], y1[i]);
            bad = 1;
        }
    *compared += (long)(R * T);
    free(wdata), free(y0), free(y1), free(qbuf);
    return bad;
}

/* Attention: R query rows over n[r] keys (the first n_pre gathered, the rest cache rows in a shuffled order),
 * against td_attn_rows_ref, bit for bit. */
static int attn(int64_t R, int64_t max_n, int64_t dim, int64_t n_pre, long *compared) {
    int64_t stride = dim + 3, cells = max_n + 5;
    float *kc = malloc(sizeof(float) * (size_t)(cells * stride)), *vc = malloc(sizeof(float) * (size_t)(cells * stride));
    float *pk = malloc(sizeof(float) * (size_t)(n_pre * dim + 1)), *pv = malloc(sizeof(float) * (size_t)(n_pre * dim + 1));
    float *qs = malloc(sizeof(float) * (size_t)(R * dim)), *o0 = malloc(sizeof(float) * (size_t)(R * dim));
    float *o1 = malloc(sizeof(float) * (size_t)(R * dim));
    int64_t sc = td_attn_rows_scratch(R, max_n, dim, 0);
    float *s0 = malloc(sizeof(float) * (size_t)sc), *s1 = malloc(sizeof(float) * (size_t)sc);
    int32_t *idx = malloc(sizeof(int32_t) * (size_t)max_n);
    const float *q[8];
    float *out0[8], *out1[8];
    int64_t n[8];
    for (int64_t i = 0; i < cells * stride; i++) kc[i] = frand(), vc[i] = frand();
    for (int64_t i = 0; i < n_pre * dim; i++) pk[i] = frand(), pv[i] = frand();
    for (int64_t i = 0; i < R * dim; i++) qs[i] = frand() * 0.1f;
    for (int64_t i = 0; i < max_n; i++) idx[i] = (int32_t)((i * 7 + 3) % cells);
    for (int64_t r = 0; r < R; r++) q[r] = qs + r * dim, out0[r] = o0 + r * dim, out1[r] = o1 + r * dim, n[r] = max_n - r;
    td_attn_keys ks = {kc, vc, 0, idx, stride, pk, pv, n_pre};
    td_attn_rows_ref(q, out0, n, R, &ks, dim, 0.088f, s0);
    td_attn_rows_wasm128(q, out1, n, R, &ks, dim, 0.088f, s1);
    int bad = memcmp(o0, o1, sizeof(float) * (size_t)(R * dim)) != 0;
    if (bad) fprintf(stderr, "FAIL: attention R %lld n %lld dim %lld pre %lld\n", (long long)R, (long long)max_n,
                     (long long)dim, (long long)n_pre);
    *compared += (long)(R * dim);
    free(kc), free(vc), free(pk), free(pv), free(qs), free(o0), free(o1), free(s0), free(s1), free(idx);
    return bad;
}

static int products(long *compared) {
    static const td_dtype types[] = {TD_DTYPE_F32, TD_DTYPE_BF16, TD_DTYPE_F16, TD_DTYPE_Q8_0, TD_DTYPE_Q4_0};
    static const int64_t Rs[] = {1, 3, 4, 7, 33, 71}, Cf[] = {1, 5, 32, 100, 4097}, Cq[] = {32, 64, 96, 1056, 4096},
                         Ts[] = {1, 2, 5, 9};
    int fails = 0;
    for (size_t a = 0; a < sizeof types / sizeof types[0]; a++) {
        int block = td_dtype_is_block(types[a]);
        const int64_t *Cs = block ? Cq : Cf;
        size_t nC = block ? sizeof Cq / sizeof Cq[0] : sizeof Cf / sizeof Cf[0];
        for (size_t r = 0; r < sizeof Rs / sizeof Rs[0]; r++)
            for (size_t c = 0; c < nC; c++)
                for (size_t t = 0; t < sizeof Ts / sizeof Ts[0]; t++)
                    for (int l = 0; l < 2; l++) fails += check(types[a], Rs[r], Cs[c], Ts[t], l, compared);
    }
    for (size_t a = 0; a < sizeof types / sizeof types[0]; a++) /* many rows, one block */
        for (int l = 0; l < 2; l++) fails += check(types[a], 4097, td_dtype_is_block(types[a]) ? 32 : 7, 3, l, compared);
    return fails + scales(TD_DTYPE_Q8_0, compared) + scales(TD_DTYPE_Q4_0, compared);
}

int main(int argc, char **argv) {
    int need_relaxed = argc > 1 && strcmp(argv[1], "--relaxed") == 0;
    long compared = 0, relaxed = 0;
    int fails = products(&compared);
    if (td_wasm_relaxed_available()) {
        matmul = td_matmul_wasm_relaxed_module; /* Q8_0 and Q4_0 through the module */
        fails += products(&relaxed);
    } else if (need_relaxed) {
        fprintf(stderr, "FAIL: --relaxed, but this engine does not run the relaxed SIMD module (it does not validate, or its dot fails the known answer)\n");
        fails++;
    }
    static const int64_t An[] = {1, 7, 33, 4097}, Ad[] = {1, 7, 64, 128};
    for (size_t a = 0; a < 4; a++)
        for (size_t d = 0; d < 4; d++)
            for (int64_t R = 1; R <= 5; R += 2)
                if (An[a] > R) fails += attn(R, An[a], Ad[d], An[a] / 3, &compared);
    printf("kernels_wasm_test: %ld outputs of td_matmul_wasm128 and td_attn_rows_wasm128, %ld of "
           "td_matmul_wasm_relaxed_module%s compared with their references: %s\n", compared, relaxed,
           relaxed ? "" : " (no relaxed SIMD here)", fails ? "DIFFERENT" : "bit-identical");
    return fails ? 1 : 0;
}
