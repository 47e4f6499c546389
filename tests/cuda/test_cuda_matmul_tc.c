/* The tensor-core products' kernels against each other, bit for bit (src/kernels/cuda/matmul_tc.cu): every kernel
 * computes cuda.h's one order (slices of 256, one mma chain each, slices added in order), so the new ones (tc_stream
 * for T <= 64, with 16, 8, 4 or 32 outputs a block; tc_wide above) must give exactly the bits of the old ones
 * (tc_skinny, tc_tile) that test_cuda_kernels holds against the exact sum, for every output: T = 1 .. 9, 16, 33,
 * 45, 63, 64 and the tile sizes above, odd n_out (1, 7, 33, 4097), k of one slice, several, and a last slice shorter
 * (1008), through row lists,
 * activation rows not 8-byte aligned, several products in one launch (q/k/v of different n_out), and the entries
 * past n_out poisoned (they must stay as they were). td_cu_matmul_tc_test_mode picks the kernels in one process.
 * Also: TD_CUDA_TC with a value that is neither old nor new fails with a message naming it.
 * tc_split (a block per k slice) is checked as mode 7 (forced on every T <= 64 launch) and within mode 2, its
 * partials added in a thread-block cluster (the default up to 16 tokens; forced at every T) and by tc_fold_parts,
 * from a stream-ordered allocation or a bound scratch (test_bound_scratch). tc_wide keeps its slice totals in
 * registers with 4 weight stages by default; its other forms (td_cu_matmul_tc_wreg_test: 3 stages, and the totals in
 * shared memory) are checked as the default is: x in bf16 and in fp32, one pass and by slices, several products in a
 * launch. These run with the wgmma forms off (td_cu_matmul_tc_wg_test(0)); test_wg checks the wgmma forms, the
 * default on compute capability 9.0 (tc_wg for tc_wide, tc_split on wgmma), the same way, and tc_ws (tc_wg with
 * producer warps, td_cu_matmul_tc_ws_test) likewise; test_invariance runs the defaults.
 * td_cu_matmul_glu (the MLP's gate taken by the down product's kernels) = td_cu_glu then td_cu_matmul (test_glu).
 * A product left as its partials for the residual that adds them (td_cu_matmul_multi_parts) = the product added
 * (test_held).
 * TD_TC_BENCH=1 times the old and new kernels instead (bench(): no checks).
 * Without a usable CUDA device it prints why and exits 77 (skipped). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cuda/cuda_test.h"
#include "kernels/cuda/cuda.h"
#include "test_util.h"
#include "util/dtype.h"
#include "util/half.h"

static uint64_t seed = 0x43beefull;

/* ---- plumbing (cuda_test.h) ---- */

static float *rnd(int64_t n, float lo, float hi) { return cu_rnd(&seed, n, lo, hi); }
static int64_t irand(int64_t n) { return (int64_t)(td_test_rand(&seed) % (uint64_t)n); }

/* The kernels' modes (cuda.h td_cu_matmul_tc_test_mode): old, then new with its own choice, 16, 8, 4, 32 outputs. */
static const int new_modes[] = {2, 3, 4, 5, 6, 7};
static const char *const mode_names[] = {"", "old", "new", "new/16", "new/8", "new/4", "new/32", "new/split"};
#define N_NEW_MODES ((int)(sizeof new_modes / sizeof *new_modes))

/* A BF16 weight on the device: rows x cols, rows row_bytes apart (cols * 2 rounded up to 16). */
typedef struct weight {
    td_cu_mat d;
} weight;

static weight weight_new(int64_t rows, int64_t cols) {
    size_t rb = (size_t)cols * 2;
    rb = (rb + 15) / 16 * 16;
    uint16_t *buf = malloc(rb * (size_t)rows);
    for (int64_t r = 0; r < rows; r++)
        for (int64_t k = 0; k < (int64_t)(rb / 2); k++)
            buf[(size_t)r * rb / 2 + k] = td_f32_to_bf16(td_test_uniform(&seed, -1.0f, 1.0f));
    weight w;
    w.d = (td_cu_mat){TD_DTYPE_BF16, rows, cols, rb, cu_up(buf, rb * (size_t)rows)};
    free(buf);
    return w;
}

static void weight_free(weight *w) { td_cu_free((void *)w->d.data); }

/* One product in `mode` from the device x: y [T, ldy] starting as 7.0f everywhere. */
static float *run(int mode, const float *xd, int64_t ldx, int64_t T, const weight *w, const int32_t *rows_d,
                  int64_t n_out, int64_t ldy) {
    size_t yn = (size_t)(T * ldy);
    float *y = malloc(yn * sizeof *y);
    for (size_t i = 0; i < yn; i++) y[i] = 7.0f;
    float *yd = cu_up(y, yn * sizeof *y);
    td_cu_matmul_tc_test_mode(mode);
    CU(td_cu_matmul(yd, ldy, xd, ldx, T, &w->d, rows_d, n_out, 1, NULL));
    CU(td_cu_d2h(y, yd, yn * sizeof *y, NULL));
    td_cu_free(yd);
    return y;
}

/* Entries of a and b that differ (bits); the first few printed. */
static int64_t differ(const char *name, const float *a, const float *b, int64_t n) {
    int64_t d = 0;
    for (int64_t i = 0; i < n; i++)
        if (memcmp(&a[i], &b[i], sizeof *a) && d++ < 3)
            fprintf(stderr, "  %s: [%lld] %.9g vs %.9g\n", name, (long long)i, a[i], b[i]);
    return d;
}

/* Every n_out and k with the tokens of Ts, old against each new mode; one line per (cols, n_out). */
static void test_shapes(const int64_t *Ts, int nT, const int *modes, int n_modes, const char *what) {
    static const int64_t colss[] = {256, 1024, 3072, 1008};
    static const int64_t n_outs[] = {1, 7, 33, 4097};
    printf("%s: old vs new kernels, bit for bit\n", what);
    for (size_t ci = 0; ci < sizeof colss / sizeof *colss; ci++)
        for (size_t ni = 0; ni < sizeof n_outs / sizeof *n_outs; ni++) {
            int64_t cols = colss[ci], n_out = n_outs[ni], wrows = n_out + 5, bad = 0, launches = 0;
            weight w = weight_new(wrows, cols);
            CHECKF(td_cu_matmul_tc(&w.d, 1), "BF16 %lld x %lld should take the tensor cores", (long long)wrows,
                   (long long)cols);
            int32_t *rows = malloc((size_t)n_out * sizeof *rows);
            for (int64_t j = 0; j < n_out; j++) rows[j] = (int32_t)irand(wrows);
            int32_t *rows_d = cu_up(rows, (size_t)n_out * sizeof *rows);
            for (int ti = 0; ti < nT; ti++) {
                int64_t T = Ts[ti];
                int use_rows = (ti + (int)ni) % 2, odd = (ti + (int)ci) % 3 == 0;
                int64_t ldx = cols + (odd ? 5 : 4), ldy = n_out + 3; /* odd: rows not 8-byte aligned */
                float *x = rnd(T * ldx, -2.0f, 2.0f), *xd = cu_up(x, (size_t)(T * ldx) * sizeof *x);
                const int32_t *rd = use_rows ? rows_d : NULL;
                float *ref = run(1, xd, ldx, T, &w, rd, n_out, ldy);
                for (int m = 0; m < n_modes; m++) {
                    float *y = run(modes[m], xd, ldx, T, &w, rd, n_out, ldy);
                    char name[128];
                    snprintf(name, sizeof name, "%s T=%lld n_out=%lld cols=%lld%s%s", mode_names[modes[m]],
                             (long long)T, (long long)n_out, (long long)cols, use_rows ? " rows" : "",
                             odd ? " ldx odd" : "");
                    bad += differ(name, y, ref, T * ldy) != 0;
                    launches++;
                    free(y);
                }
                /* the poison past n_out is still there (the old kernel's too) */
                for (int64_t t = 0; t < T; t++)
                    for (int64_t j = n_out; j < ldy; j++) bad += ref[t * ldy + j] != 7.0f;
                free(x), free(ref);
                td_cu_free(xd);
            }
            char name[96];
            snprintf(name, sizeof name, "n_out=%lld cols=%lld, %lld launches", (long long)n_out, (long long)cols,
                     (long long)launches);
            printf("  %-58s %s\n", name, bad ? "NOT bit-exact" : "bit-exact");
            CHECKF(bad == 0, "%s: %s: %lld differ", what, name, (long long)bad);
            free(rows);
            td_cu_free(rows_d);
            weight_free(&w);
        }
}

/* The MLP's down product over its gate (td_cu_matmul_glu): act(g) * u taken by the product's own kernels (tc_split,
 * tc_x_bf16 + tc_wide) must give the bits of td_cu_glu then td_cu_matmul, for both activations, T on both sides of
 * 64, k of one slice and several, in the default kernels, with tc_split off, with x rounded in tc_wide's blocks, the old
 * kernels and fp32 inputs (those three gate g first, then run the product). */
static void test_glu(void) {
    printf("the MLP's gate taken into the down product (td_cu_matmul_glu): = td_cu_glu then td_cu_matmul, bit for "
           "bit\n");
    static const int64_t Ts[] = {1, 7, 16, 45, 64, 65, 200, 777};
    static const int64_t colss[] = {3072, 1024, 256};
    static const char *const forms[] = {"default",     "split off", "x rounded in the blocks",
                                        "old kernels", "fp32 in",   "tc_split forced"};
    for (size_t ci = 0; ci < sizeof colss / sizeof *colss; ci++) {
        const int64_t cols = colss[ci], n_out = ci == 0 ? 1024 : 37, ldy = n_out + 3;
        weight w = weight_new(n_out, cols);
        int64_t bad = 0, n = 0;
        for (size_t ti = 0; ti < sizeof Ts / sizeof *Ts; ti++)
            for (int act = TD_CU_GLU_SILU; act <= TD_CU_GLU_GELU_TANH; act++)
                for (int form = 0; form < 6; form++) {
                    const int64_t T = Ts[ti], nx = T * cols;
                    float *g = rnd(nx, -6.0f, 6.0f), *u = rnd(nx, -2.0f, 2.0f);
                    float *gd = cu_up(g, (size_t)nx * sizeof *g), *g2 = cu_up(g, (size_t)nx * sizeof *g);
                    float *ud = cu_up(u, (size_t)nx * sizeof *u);
                    float *y = malloc((size_t)(T * ldy) * sizeof *y), *ref = malloc((size_t)(T * ldy) * sizeof *y);
                    for (int64_t i = 0; i < T * ldy; i++) y[i] = 7.0f;
                    float *yd = cu_up(y, (size_t)(T * ldy) * sizeof *y), *rd = cu_up(y, (size_t)(T * ldy) * sizeof *y);
                    const int bf16 = form != 4;
                    td_cu_matmul_tc_test_mode(form == 3 ? 1 : form == 5 ? 7 : 2);
                    td_cu_matmul_tc_split_test(form == 1 ? 0 : -1);
                    td_cu_matmul_tc_xb_test(form == 2 ? 0 : -1);
                    CU(td_cu_matmul_glu(yd, ldy, gd, ud, cols, T, &w.d, act, bf16, NULL));
                    CU(td_cu_glu(g2, ud, nx, act, NULL));
                    CU(td_cu_matmul(rd, ldy, g2, cols, T, &w.d, NULL, n_out, bf16, NULL));
                    CU(td_cu_d2h(y, yd, (size_t)(T * ldy) * sizeof *y, NULL));
                    CU(td_cu_d2h(ref, rd, (size_t)(T * ldy) * sizeof *y, NULL));
                    char name[128];
                    snprintf(name, sizeof name, "T=%lld cols=%lld %s, %s", (long long)T, (long long)cols,
                             act == TD_CU_GLU_SILU ? "SiLU" : "tanh GELU", forms[form]);
                    bad += differ(name, y, ref, T * ldy) != 0;
                    for (int64_t t = 0; t < T; t++) /* the poison past n_out stays */
                        for (int64_t j = n_out; j < ldy; j++) bad += y[t * ldy + j] != 7.0f;
                    n++;
                    free(g), free(u), free(y), free(ref);
                    td_cu_free(gd), td_cu_free(g2), td_cu_free(ud), td_cu_free(yd), td_cu_free(rd);
                }
        td_cu_matmul_tc_test_mode(0);
        td_cu_matmul_tc_split_test(-1);
        td_cu_matmul_tc_xb_test(-1);
        char name[96];
        snprintf(name, sizeof name, "cols=%lld n_out=%lld, %lld launches", (long long)cols, (long long)n_out,
                 (long long)n);
        printf("  %-58s %s\n", name, bad ? "NOT bit-exact" : "bit-exact");
        CHECKF(bad == 0, "td_cu_matmul_glu: %s: %lld differ", name, (long long)bad);
        weight_free(&w);
    }
    /* refusals: rows of another width than the weight's columns, an activation that is neither */
    weight w = weight_new(8, 256);
    float *d = td_cu_malloc(16 * 256 * sizeof(float));
    CHECKF(td_cu_matmul_glu(d, 8, d, d, 260, 2, &w.d, TD_CU_GLU_SILU, 1, NULL) != 0 &&
               strstr(td_cu_error(), "260") != NULL,
           "td_cu_matmul_glu: ldx 260 for 256 columns should be refused by name: %s", td_cu_error());
    CHECKF(td_cu_matmul_glu(d, 8, d, d, 256, 2, &w.d, 9, 1, NULL) != 0 && strstr(td_cu_error(), "9") != NULL,
           "td_cu_matmul_glu: activation 9 should be refused by name: %s", td_cu_error());
    td_cu_free(d);
    weight_free(&w);
}

/* q/k/v-like products of one x in one launch (td_cu_matmul_multi), each old vs new and against the product alone. */
static void test_multi(void) {
    printf("several products in one launch (td_cu_matmul_multi): old vs new, and vs each alone\n");
    static const int64_t Ts[] = {1, 3, 8, 9, 45, 64, 65, 300};
    static const int64_t n_outs[4] = {2048, 33, 1024, 7};
    const int64_t cols = 1024;
    weight w[4];
    for (int i = 0; i < 4; i++) w[i] = weight_new(n_outs[i] + 3, cols);
    int32_t *rows = malloc(33 * sizeof *rows);
    for (int j = 0; j < 33; j++) rows[j] = (int32_t)irand(n_outs[1] + 3);
    int32_t *rows_d = cu_up(rows, 33 * sizeof *rows);
    for (int n = 2; n <= 4; n++)
        for (size_t ti = 0; ti < sizeof Ts / sizeof *Ts; ti++) {
            int64_t T = Ts[ti], ldx = cols + 4, bad = 0;
            float *x = rnd(T * ldx, -2.0f, 2.0f), *xd = cu_up(x, (size_t)(T * ldx) * sizeof *x);
            float *alone[4], *ref[4];
            for (int i = 0; i < n; i++) {
                ref[i] = NULL;
                alone[i] = run(1, xd, ldx, T, &w[i], i == 1 ? rows_d : NULL, n_outs[i], n_outs[i] + 2);
            }
            for (int m = 0; m < 1 + (int)(sizeof new_modes / sizeof *new_modes); m++) {
                int mode = m == 0 ? 1 : new_modes[m - 1];
                td_cu_mm mm[4];
                float *yd[4];
                for (int i = 0; i < n; i++) {
                    size_t yn = (size_t)(T * (n_outs[i] + 2));
                    float *p = malloc(yn * sizeof *p);
                    for (size_t e = 0; e < yn; e++) p[e] = 7.0f;
                    yd[i] = cu_up(p, yn * sizeof *p);
                    free(p);
                    mm[i] = (td_cu_mm){yd[i], n_outs[i] + 2, &w[i].d, i == 1 ? rows_d : NULL, n_outs[i]};
                }
                td_cu_matmul_tc_test_mode(mode);
                CU(td_cu_matmul_multi(mm, n, xd, ldx, T, 1, NULL));
                for (int i = 0; i < n; i++) {
                    size_t yn = (size_t)(T * (n_outs[i] + 2));
                    float *y = malloc(yn * sizeof *y);
                    CU(td_cu_d2h(y, yd[i], yn * sizeof *y, NULL));
                    char name[96];
                    snprintf(name, sizeof name, "%s %d products T=%lld: product %d", mode_names[mode], n,
                             (long long)T, i);
                    bad += differ(name, y, alone[i], (int64_t)yn) != 0;
                    if (ref[i]) bad += differ(name, y, ref[i], (int64_t)yn) != 0, free(y);
                    else ref[i] = y;
                    td_cu_free(yd[i]);
                }
            }
            char name[96];
            snprintf(name, sizeof name, "%d products T=%lld (old, new, new/16, /8, /4, /32)", n, (long long)T);
            printf("  %-58s %s\n", name, bad ? "NOT bit-exact" : "bit-exact");
            CHECKF(bad == 0, "%s: %lld differ", name, (long long)bad);
            for (int i = 0; i < n; i++) free(alone[i]), free(ref[i]);
            free(x);
            td_cu_free(xd);
        }
    for (int i = 0; i < 4; i++) weight_free(&w[i]);
    free(rows);
    td_cu_free(rows_d);
}

/* A row's bits alone (T = 1, new) equal its bits anywhere in larger launches of the new kernels. */
static void test_invariance(void) {
    printf("new kernels: a row alone (T = 1) vs the same row in launches of T = 2 .. 300\n");
    static const int64_t Ts[] = {2, 5, 8, 9, 16, 33, 63, 64, 65, 129, 300};
    const int64_t cols = 3072, n_out = 4097;
    weight w = weight_new(n_out, cols);
    float *target = rnd(cols, -2.0f, 2.0f), *td = cu_up(target, (size_t)cols * sizeof *target);
    float *alone = run(2, td, cols, 1, &w, NULL, n_out, n_out);
    int64_t bad = 0;
    for (size_t ti = 0; ti < sizeof Ts / sizeof *Ts; ti++) {
        int64_t T = Ts[ti], at = (T * 5) / 7;
        float *x = rnd(T * cols, -2.0f, 2.0f);
        memcpy(x + at * cols, target, (size_t)cols * sizeof *x);
        float *xd = cu_up(x, (size_t)(T * cols) * sizeof *x);
        for (size_t m = 0; m < sizeof new_modes / sizeof *new_modes; m++) {
            float *y = run(new_modes[m], xd, cols, T, &w, NULL, n_out, n_out);
            char name[64];
            snprintf(name, sizeof name, "%s T=%lld row %lld", mode_names[new_modes[m]], (long long)T, (long long)at);
            bad += differ(name, y + at * n_out, alone, n_out) != 0;
            free(y);
        }
        free(x);
        td_cu_free(xd);
    }
    printf("  %-58s %s\n", "BF16 4097 x 3072", bad ? "NOT bit-exact" : "bit-exact");
    CHECKF(bad == 0, "new kernels: %lld launches differ from the row alone", (long long)bad);
    free(target), free(alone);
    td_cu_free(td);
    weight_free(&w);
}

/* TD_CUDA_TC is read at the first tensor-core launch: a bad value fails every product with its name. */
static void test_env(void) {
    printf("TD_CUDA_TC=fast (neither old nor new)\n");
    weight w = weight_new(16, 256);
    float *xd = cu_up(NULL, 256 * sizeof(float)), *yd = cu_up(NULL, 16 * sizeof(float));
    td_cu_matmul_tc_test_mode(0);
    int rc = td_cu_matmul(yd, 16, xd, 256, 1, &w.d, NULL, 16, 1, NULL);
    printf("  %-58s rc %d \"%s\"\n", "td_cu_matmul", rc, td_cu_error());
    CHECKF(rc == -1 && strstr(td_cu_error(), "TD_CUDA_TC=fast") != NULL, "a bad TD_CUDA_TC: rc %d, \"%s\"", rc,
           td_cu_error());
    td_cu_free(xd), td_cu_free(yd);
    weight_free(&w);
}

/* TD_TC_BENCH=1: no checks, the old and new kernels timed on qwen3-0.6b's products (wall time of 20 launches after
 * 3, then a sync: launch overhead included, as in a pass without graphs), weights GB/s and TFLOP/s per line. */
static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void bench(void) {
    static const struct {
        const char *name;
        int n;
        int64_t n_out[2], cols;
    } prods[] = {{"q/k/v", 2, {2048, 2048}, 1024}, /* q, then k and v as one 2048 */
                 {"o", 1, {1024, 0}, 2048},
                 {"gate/up", 2, {3072, 3072}, 1024},
                 {"down", 1, {1024, 0}, 3072},
                 {"lm_head", 1, {151936, 0}, 1024}};
    static const int64_t Ts[] = {1, 2, 8, 45, 64, 65, 2048, 6480};
    printf("TD_TC_BENCH: microseconds a launch (20 after 3), weights GB/s, TFLOP/s\n");
    for (size_t pi = 0; pi < sizeof prods / sizeof *prods; pi++) {
        weight w[2];
        int64_t cols = prods[pi].cols, wbytes = 0, outs = 0;
        for (int i = 0; i < prods[pi].n; i++) {
            w[i] = weight_new(prods[pi].n_out[i], cols);
            wbytes += prods[pi].n_out[i] * cols * 2, outs += prods[pi].n_out[i];
        }
        for (size_t ti = 0; ti < sizeof Ts / sizeof *Ts; ti++) {
            int64_t T = Ts[ti];
            if (T * outs > ((int64_t)1 << 28)) continue; /* y over 1 GiB */
            float *xd = cu_up(NULL, (size_t)(T * cols) * sizeof(float));
            float *yd[2];
            td_cu_mm mm[2];
            for (int i = 0; i < prods[pi].n; i++) {
                yd[i] = cu_up(NULL, (size_t)(T * prods[pi].n_out[i]) * sizeof(float));
                mm[i] = (td_cu_mm){yd[i], prods[pi].n_out[i], &w[i].d, NULL, prods[pi].n_out[i]};
            }
            /* old; new; new without the split by slices (tc_wide, tc_split); new with x in fp32; new with tc_split's
             * partials folded by a second kernel; new with tc_wide's slice totals in shared memory (the form before),
             * and in registers with 3 weight stages; tc_wg on wgmma where the GPU runs it (T > 64 only: below, the
             * same kernels as new) */
            enum { NM = 8 };
            double us[NM];
            for (int m = 0; m < NM; m++) {
                td_cu_matmul_tc_test_mode(m == 0 ? 1 : 2);
                td_cu_matmul_tc_parts_test(m == 2 ? 0 : -1);
                td_cu_matmul_tc_split_test(m == 2 ? 0 : -1);
                td_cu_matmul_tc_xb_test(m == 3 ? 0 : -1);
                td_cu_matmul_tc_cluster_test(m == 4 ? 0 : -1);
                td_cu_matmul_tc_wreg_test(m == 5 ? 0 : m == 6 ? 3 : -1);
                td_cu_matmul_tc_wg_test(m == 7 ? 3 : 0); /* "new": the mma.sync kernels */
                if ((m == 5 || m == 6) && T <= 64) { /* tc_wide's forms: the same kernels as new below */
                    us[m] = us[1];
                    continue;
                }
                if (m == 7 && !td_cu_matmul_tc_wg_here()) {
                    us[m] = us[1];
                    continue;
                }
                for (int r = 0; r < 3; r++) CU(td_cu_matmul_multi(mm, prods[pi].n, xd, cols, T, 1, NULL));
                CU(td_cu_sync(NULL));
                double t0 = now_s();
                for (int r = 0; r < 20; r++) CU(td_cu_matmul_multi(mm, prods[pi].n, xd, cols, T, 1, NULL));
                CU(td_cu_sync(NULL));
                us[m] = (now_s() - t0) / 20 * 1e6;
            }
            static const char *const col[NM] = {"old",      "new",      "new/whole", "new/x32",
                                                "new/fold", "new/smem", "new/wreg3", "new/wg"};
            for (int m = 0; m < NM; m++) {
                if ((m == 5 || m == 6) && T <= 64) continue;
                printf("  %-8s T=%-5lld %-9s %9.1f us  %7.0f GB/s  %6.1f TFLOP/s\n", prods[pi].name, (long long)T,
                       col[m], us[m], wbytes / us[m] * 1e-3,
                       2.0 * T * outs * cols / us[m] * 1e-6);
            }
            printf("  %-8s T=%-5lld new / old %.2f, wg / new %.2f\n", prods[pi].name, (long long)T, us[1] / us[0],
                   us[7] / us[1]);
            if (T > 64)
                printf("  %-8s T=%-5lld smem / new %.2f, wreg3 / new %.2f\n", prods[pi].name, (long long)T,
                       us[5] / us[1], us[6] / us[1]);
            for (int i = 0; i < prods[pi].n; i++) td_cu_free(yd[i]);
            td_cu_free(xd);
        }
        for (int i = 0; i < prods[pi].n; i++) weight_free(&w[i]);
    }
    td_cu_matmul_tc_test_mode(0);
    td_cu_matmul_tc_parts_test(-1);
    td_cu_matmul_tc_split_test(-1);
    td_cu_matmul_tc_xb_test(-1);
    td_cu_matmul_tc_cluster_test(-1);
    td_cu_matmul_tc_wreg_test(-1);
    td_cu_matmul_tc_wg_test(-1);
}

/* tc_wide in another form than the default (td_cu_matmul_tc_wreg_test: 0 its slice totals in shared memory with 3
 * weight stages, 3 in registers with 3), every T > 64 shape as the default is: x in bf16 (one pass, then by slices)
 * and in fp32, and several products in a launch. */
static void test_wreg(const int64_t *Ts, int nT, const int *modes, int stages) {
    char what[112];
    const char *form = stages ? "totals in registers, 3 stages" : "totals in shared memory, 3 stages";
    td_cu_matmul_tc_wreg_test(stages);
    snprintf(what, sizeof what, "T > 64 (tc_tile vs tc_wide, %s)", form);
    test_shapes(Ts, nT, modes, 1, what);
    td_cu_matmul_tc_xb_test(0);
    snprintf(what, sizeof what, "T > 64 (tc_tile vs tc_wide, %s, x in fp32)", form);
    test_shapes(Ts, nT, modes, 1, what);
    td_cu_matmul_tc_xb_test(-1);
    td_cu_matmul_tc_parts_test(1);
    snprintf(what, sizeof what, "T > 64 (tc_tile vs tc_wide, %s, by slices)", form);
    test_shapes(Ts, nT, modes, 1, what);
    test_multi();
    td_cu_matmul_tc_parts_test(-1);
    test_multi();
    td_cu_matmul_tc_wreg_test(-1);
}

/* The wgmma kernels on a GPU of compute capability 9.0 (skipped, and said so, on others): tc_wg in tc_wide's place over
 * every T > 64 shape with k a multiple of 64 (the others keep tc_wide) as tc_wide is checked (one pass, by slices,
 * several products in a launch, the MLP's gate): tc_tile's bits; tc_split's wgmma form over every T <= 64 shape with k
 * a multiple of 256 (1008 keeps mma.sync), in clusters and folded apart, and the gate: tc_skinny's bits. */
static void test_wg(const int64_t *many, int n_many, const int *wide_modes, const int64_t *few, int n_few,
                    const int *split_modes) {
    if (!td_cu_matmul_tc_wg_here()) {
        printf("tc_wg (wgmma): not on this GPU (compute capability 9.0 only): skipped\n");
        return;
    }
    td_cu_matmul_tc_wg_test(1);
    /* tc_wg, then tc_ws: its copies by a producer warpgroup, by two producer warps, by the bulk tensor copy */
    for (int ws = 0; ws < 4; ws++) {
        static const char *const what[4][2] = {{"T > 64 (tc_tile vs tc_wg)", "T > 64 (tc_tile vs tc_wg by slices)"},
                                               {"T > 64 (tc_tile vs tc_ws)", "T > 64 (tc_tile vs tc_ws by slices)"},
                                               {"T > 64 (tc_tile vs tc_ws, two producer warps)",
                                                "T > 64 (tc_tile vs tc_ws, two producer warps, by slices)"},
                                               {"T > 64 (tc_tile vs tc_ws, bulk tensor copies)",
                                                "T > 64 (tc_tile vs tc_ws, bulk tensor copies, by slices)"}};
        static const int pw[4] = {0, 4, 2, 1};
        td_cu_matmul_tc_ws_test(pw[ws]);
        const int64_t tma0 = td_cu_matmul_tc_tma_launches();
        test_shapes(many, n_many, wide_modes, 1, what[ws][0]);
        td_cu_matmul_tc_parts_test(1);
        test_shapes(many, n_many, wide_modes, 1, what[ws][1]);
        test_multi();
        td_cu_matmul_tc_parts_test(-1);
        test_multi();
        test_glu();
        if (pw[ws] == 1) /* the bulk copies ran (not tc_wg in their place: the driver encoded the maps) */
            CHECKF(td_cu_matmul_tc_tma_launches() > tma0, "tc_ws's bulk tensor copies: no launch ran them");
    }
    td_cu_matmul_tc_ws_test(-1);
    td_cu_matmul_tc_wg_test(2);
    td_cu_matmul_tc_cluster_test(1);
    test_shapes(few, n_few, split_modes, 2, "T <= 64 (tc_skinny vs tc_split on wgmma, in clusters)");
    td_cu_matmul_tc_cluster_test(0);
    test_shapes(few, n_few, split_modes, 2, "T <= 64 (tc_skinny vs tc_split on wgmma, folded apart)");
    td_cu_matmul_tc_cluster_test(-1);
    test_multi();
    test_glu();
    td_cu_matmul_tc_wg_test(0);
}

/* tc_split's partials in a scratch bound to the thread (td_cu_scratch_bind, as the engine binds its own) instead of
 * stream-ordered allocations: the same bits over every shape, one product a launch and several (test_multi), every
 * launch fitting (nothing wanted more); then a scratch too small for any launch: each falls back to an allocation
 * and says what it wanted. */
static void test_bound_scratch(const int64_t *Ts, int nT, const int *modes) {
    const int64_t floats = (int64_t)16 << 20;
    float *scr = td_cu_malloc((size_t)floats * sizeof(float));
    CHECK(scr != NULL);
    if (!scr) return;
    (void)td_cu_scratch_wanted();
    td_cu_scratch_bind(scr, floats);
    test_shapes(Ts, nT, modes, 2, "T <= 64 (tc_skinny vs tc_split, partials in a bound scratch)");
    test_multi();
    td_cu_scratch_bind(NULL, 0);
    CHECKF(td_cu_scratch_wanted() == 0, "a launch wanted more than the %lld floats bound", (long long)floats);
    td_cu_scratch_bind(scr, 1);
    test_shapes(Ts, nT, modes, 2, "T <= 64 (tc_split, a bound scratch too small: allocations)");
    td_cu_scratch_bind(NULL, 0);
    CHECKF(td_cu_scratch_wanted() > 1, "a scratch too small: nothing wanted more");
    td_cu_free(scr);
    printf("tc_split: partials in a bound scratch = in allocations; a scratch too small says what it wanted\n");
}

/* The residual + norm writing its output in bf16 too (td_cu_add_rows_norm's out_bf16), the products after it reading
 * that (td_cu_matmul_multi_xb, TD_CUDA_NORM_XB) = the same products rounding the norm themselves, bit for bit, with
 * the wgmma and the mma.sync tiles; and the copy is what they read above 64 tokens (zeros there change every output)
 * and ignored up to 64. */
static void test_norm_xb(void) {
    printf("products over the norm's own bf16 copy (td_cu_matmul_multi_xb) = over the norm, bit for bit\n");
    static const int64_t Ts[] = {45, 64, 65, 70, 130, 257};
    static const int64_t n_outs[2] = {3072, 1024};
    const int64_t d = 1024;
    weight w[2] = {weight_new(n_outs[0], d), weight_new(n_outs[1], d)};
    float *nw = rnd(d, 0.5f, 1.5f), *nwd = cu_up(nw, (size_t)d * sizeof *nw);
    int64_t bad = 0, n = 0;
    td_cu_matmul_tc_test_mode(2);
    for (int wg = 0; wg < 2; wg++)
        for (size_t ti = 0; ti < sizeof Ts / sizeof *Ts; ti++) {
            td_cu_matmul_tc_wg_test(wg ? 3 : 0);
            const int64_t T = Ts[ti], nx = T * d;
            const size_t xbytes = (size_t)nx * sizeof(float);
            float *res = rnd(nx, -3.0f, 3.0f), *y = rnd(nx, -1.0f, 1.0f), *yd = cu_up(y, xbytes);
            const td_cu_parts py = {yd, 1, d};
            float *ys[3][2], *o[3];
            for (int k = 0; k < 3; k++) { /* 0: rounded by the products, 1: the norm's copy, 2: a copy of zeros */
                float *r = cu_up(res, xbytes);
                uint64_t none = UINT64_MAX, *f = cu_up(&none, sizeof none);
                uint16_t *ob = k ? cu_up(NULL, (size_t)nx * 2) : NULL;
                o[k] = cu_up(NULL, xbytes);
                CU(td_cu_add_rows_norm(r, &py, T, d, NULL, f, 1, o[k], k == 1 ? ob : NULL, nwd, 1e-6f, 0, NULL));
                td_cu_mm mm[2];
                for (int i = 0; i < 2; i++) {
                    ys[k][i] = cu_up(NULL, (size_t)(T * n_outs[i]) * sizeof(float));
                    mm[i] = (td_cu_mm){ys[k][i], n_outs[i], &w[i].d, NULL, n_outs[i]};
                }
                td_cu_matmul_norm_xb_test(k > 0);
                CU(td_cu_matmul_multi_xb(NULL, mm, 2, o[k], ob, d, T, 1, NULL));
                td_cu_matmul_norm_xb_test(-1);
                td_cu_free(r), td_cu_free(f), td_cu_free(ob);
            }
            for (int i = 0; i < 2; i++) {
                const int64_t ny = T * n_outs[i];
                float *a = malloc((size_t)ny * sizeof *a), *b = malloc((size_t)ny * sizeof *b);
                char name[96];
                snprintf(name, sizeof name, "T=%lld %s product %d", (long long)T, wg ? "wgmma" : "mma.sync", i);
                cu_down(a, ys[0][i], (size_t)ny * sizeof *a), cu_down(b, ys[1][i], (size_t)ny * sizeof *b);
                bad += differ(name, b, a, ny) != 0;
                cu_down(b, ys[2][i], (size_t)ny * sizeof *b);
                int64_t zeroed = 0;
                for (int64_t e = 0; e < ny; e++) zeroed += memcmp(&a[e], &b[e], sizeof *a) != 0;
                CHECKF(T > 64 ? zeroed > ny / 2 : zeroed == 0, "%s: a copy of zeros changed %lld of %lld outputs",
                       name, (long long)zeroed, (long long)ny);
                n++;
                free(a), free(b);
                for (int k = 0; k < 3; k++) td_cu_free(ys[k][i]);
            }
            for (int k = 0; k < 3; k++) td_cu_free(o[k]);
            free(res), free(y), td_cu_free(yd);
        }
    td_cu_matmul_tc_wg_test(-1);
    td_cu_matmul_tc_test_mode(0);
    CHECKF(bad == 0, "%lld of %lld products differ over the norm's copy", (long long)bad, (long long)n);
    printf("  %lld products, the same bits\n", (long long)n);
    free(nw), td_cu_free(nwd), weight_free(&w[0]), weight_free(&w[1]);
}

/* The MLP's three products as one call (td_cu_matmul_mlp: act(g) * u computed by the gate/up product, kept in bf16)
 * = td_cu_matmul_multi over the gate and up then td_cu_matmul_glu, bit for bit, x taken in fp32 or as the norm's bf16
 * copy; where it does not apply (64 tokens or fewer, fp32 products, TD_CUDA_GLU_EPI off, a GPU without tc_wg) it
 * launches nothing and says so (1). The poison past the down product's rows stays. */
static void test_mlp(void) {
    printf("the MLP's products with the gate in the gate/up product (td_cu_matmul_mlp) = gate/up, then the gated "
           "down product, bit for bit\n");
    static const int64_t Ts[] = {64, 65, 130, 257, 1000};
    static const int64_t shapes[2][3] = {{1024, 3072, 1024}, {256, 192, 100}}; /* K (x), I (gate, up), N (down) */
    const int here = td_cu_matmul_tc_wg_here();
    int64_t bad = 0, ran = 0, n = 0;
    td_cu_matmul_tc_test_mode(2);
    for (int sh = 0; sh < 2; sh++) {
        const int64_t K = shapes[sh][0], I = shapes[sh][1], N = shapes[sh][2], ldy = N + 3;
        weight wg = weight_new(I, K), wu = weight_new(I, K), wd = weight_new(N, I);
        /* tc_ws's bulk-copy form reads the gate's and up's rows as one tensor from the lower-addressed: the shapes
         * take both orders (random weights: which is which is ours to say) */
        if (((uintptr_t)wu.d.data < (uintptr_t)wg.d.data) != (sh == 1)) {
            const weight t = wg;
            wg = wu, wu = t;
        }
        float *nw = rnd(K, 0.5f, 1.5f), *nwd = cu_up(nw, (size_t)K * sizeof *nw);
        for (size_t ti = 0; ti < sizeof Ts / sizeof *Ts; ti++)
            for (int act = TD_CU_GLU_SILU; act <= TD_CU_GLU_GELU_TANH; act++)
                for (int form = 0; form < 2; form++) { /* x in fp32 / with the norm's bf16 copy */
                    const int64_t T = Ts[ti], nx = T * K, ny = T * ldy;
                    float *res = rnd(nx, -3.0f, 3.0f), *pr = rnd(nx, -1.0f, 1.0f);
                    float *rd = cu_up(res, (size_t)nx * sizeof(float)), *prd = cu_up(pr, (size_t)nx * sizeof(float));
                    float *xd = cu_up(NULL, (size_t)nx * sizeof(float));
                    uint16_t *xbd = form ? cu_up(NULL, (size_t)nx * 2) : NULL;
                    uint64_t none = UINT64_MAX, *f = cu_up(&none, sizeof none);
                    const td_cu_parts py = {prd, 1, K};
                    CU(td_cu_add_rows_norm(rd, &py, T, K, NULL, f, 1, xd, xbd, nwd, 1e-6f, 0, NULL));
                    float *y = malloc((size_t)ny * sizeof *y), *ref = malloc((size_t)ny * sizeof *y);
                    for (int64_t i = 0; i < ny; i++) y[i] = 7.0f;
                    float *yd = cu_up(y, (size_t)ny * sizeof *y), *refd = cu_up(y, (size_t)ny * sizeof *y);
                    float *gd = cu_up(NULL, (size_t)(T * I) * sizeof(float)), *ud = cu_up(NULL, (size_t)(T * I) * 4);
                    const td_cu_mm mm[2] = {{gd, I, &wg.d, NULL, I}, {ud, I, &wu.d, NULL, I}};
                    CU(td_cu_matmul_multi(mm, 2, xd, K, T, 1, NULL));
                    CU(td_cu_matmul_glu(refd, ldy, gd, ud, I, T, &wd.d, act, 1, NULL));
                    const int rc = td_cu_matmul_mlp(yd, ldy, xd, xbd, K, T, &wg.d, &wu.d, &wd.d, act, 1, NULL);
                    CHECKF(rc == (here && T > 64 ? 0 : 1), "td_cu_matmul_mlp: T=%lld: rc %d (%s)", (long long)T, rc,
                           rc < 0 ? td_cu_error() : "");
                    CU(td_cu_d2h(y, yd, (size_t)ny * sizeof *y, NULL));
                    CU(td_cu_d2h(ref, refd, (size_t)ny * sizeof *y, NULL));
                    char name[128];
                    snprintf(name, sizeof name, "T=%lld K=%lld I=%lld %s%s", (long long)T, (long long)K,
                             (long long)I, act == TD_CU_GLU_SILU ? "SiLU" : "tanh GELU", form ? ", norm's copy" : "");
                    if (rc == 0) {
                        bad += differ(name, y, ref, ny) != 0;
                        for (int64_t t = 0; t < T; t++) /* the poison past N stays */
                            for (int64_t j = N; j < ldy; j++) bad += y[t * ldy + j] != 7.0f;
                        ran++;
                    }
                    n++;
                    free(res), free(pr), free(y), free(ref);
                    td_cu_free(rd), td_cu_free(prd), td_cu_free(xd), td_cu_free(xbd), td_cu_free(f);
                    td_cu_free(yd), td_cu_free(refd), td_cu_free(gd), td_cu_free(ud);
                }
        free(nw), td_cu_free(nwd);
        /* where it does not apply: nothing launched, 1 */
        float *d = cu_up(NULL, (size_t)(130 * (K > I ? K : I) + 130 * ldy) * sizeof(float));
        CHECKF(td_cu_matmul_mlp(d, ldy, d, NULL, K, 130, &wg.d, &wu.d, &wd.d, TD_CU_GLU_SILU, 0, NULL) == 1,
               "td_cu_matmul_mlp: fp32 products should not be taken");
        td_cu_matmul_glu_epi_test(0);
        CHECKF(td_cu_matmul_mlp(d, ldy, d, NULL, K, 130, &wg.d, &wu.d, &wd.d, TD_CU_GLU_SILU, 1, NULL) == 1,
               "td_cu_matmul_mlp: TD_CUDA_GLU_EPI=0 should turn it off");
        td_cu_matmul_glu_epi_test(-1);
        CHECKF(td_cu_matmul_mlp(d, ldy, d, NULL, K, 130, &wg.d, &wu.d, &wd.d, 9, 1, NULL) == -1 &&
                   strstr(td_cu_error(), "9") != NULL,
               "td_cu_matmul_mlp: activation 9 should be refused by name: %s", td_cu_error());
        td_cu_free(d);
        weight_free(&wg), weight_free(&wu), weight_free(&wd);
    }
    td_cu_matmul_tc_test_mode(0);
    CHECKF(bad == 0, "td_cu_matmul_mlp: %lld of %lld calls differ", (long long)bad, (long long)ran);
    printf("  %lld calls, %lld on tc_wg's gated form (this GPU %s it): %s\n", (long long)n, (long long)ran,
           here ? "runs" : "does not run", bad ? "NOT bit-exact" : "the same bits");
}

/* x += y then its norm (td_cu_add_rows_norm over n_out = 1024 columns), y the product of one weight: as
 * td_cu_matmul_multi_parts / td_cu_matmul_glu_parts leave it vs as td_cu_matmul / td_cu_matmul_glu write it, bit for
 * bit (x and the norm), in TD_CUDA_TC_DEFER's modes 0 / 1 / 2 with a bound scratch; and partials left exactly where
 * expected (several slices; 17 to 64 tokens, or 1 to 16 in mode 2): so the residual does add them. Then the same for
 * the MLP's gate and up (td_cu_matmul_multi_parts, gated by td_cu_glu_parts). */
static void test_held(void) {
    printf("products left as partials for the residual (td_cu_matmul_multi_parts): = the product added, bit for bit\n");
    const int64_t floats = (int64_t)16 << 20, n_out = 1024;
    float *scr = td_cu_malloc((size_t)floats * sizeof(float));
    CHECK(scr != NULL);
    if (!scr) return;
    td_cu_scratch_bind(scr, floats);
    td_cu_matmul_tc_test_mode(2);
    static const int64_t Ts[] = {1, 5, 16, 17, 45, 64, 65};
    static const int64_t colss[] = {2048, 3072, 256};
    float *nw = rnd(n_out, 0.5f, 1.5f), *nwd = cu_up(nw, (size_t)n_out * sizeof *nw);
    int64_t bad = 0, held = 0, n = 0;
    for (size_t ci = 0; ci < sizeof colss / sizeof *colss; ci++) {
        const int64_t cols = colss[ci];
        weight w = weight_new(n_out, cols);
        for (size_t ti = 0; ti < sizeof Ts / sizeof *Ts; ti++)
            for (int defer = 0; defer < 3; defer++)
                for (int glu = 0; glu < 2; glu++) {
                    const int64_t T = Ts[ti], nx = T * cols, ny = T * n_out;
                    const size_t xb = (size_t)nx * sizeof(float), yb = (size_t)ny * sizeof(float);
                    float *x = rnd(nx, -3.0f, 3.0f), *u = rnd(nx, -2.0f, 2.0f), *res = rnd(ny, -3.0f, 3.0f);
                    float *xd = cu_up(x, xb), *xd2 = cu_up(x, xb), *ud = cu_up(u, xb), *yd = cu_up(NULL, yb);
                    float *yd2 = cu_up(NULL, yb), *r1 = cu_up(res, yb), *r2 = cu_up(res, yb);
                    float *o1 = cu_up(NULL, yb), *o2 = cu_up(NULL, yb);
                    uint64_t none = UINT64_MAX;
                    uint64_t *f1 = cu_up(&none, sizeof none), *f2 = cu_up(&none, sizeof none);
                    td_cu_matmul_defer_test(0);
                    if (glu) CU(td_cu_matmul_glu(yd, n_out, xd, ud, cols, T, &w.d, TD_CU_GLU_SILU, 1, NULL));
                    else CU(td_cu_matmul(yd, n_out, xd, cols, T, &w.d, NULL, n_out, 1, NULL));
                    const td_cu_parts plain = {yd, 1, n_out};
                    CU(td_cu_add_rows_norm(r1, &plain, T, n_out, NULL, f1, 1, o1, NULL, nwd, 1e-6f, 0, NULL));
                    td_cu_matmul_defer_test(defer);
                    td_cu_parts p;
                    const td_cu_parts gu[2] = {{xd2, 1, cols}, {ud, 1, cols}};
                    if (glu)
                        CU(td_cu_matmul_glu_parts(&p, yd2, n_out, xd2, gu, cols, T, &w.d, TD_CU_GLU_SILU, 1, NULL));
                    else {
                        const td_cu_mm m1 = {yd2, n_out, &w.d, NULL, n_out};
                        CU(td_cu_matmul_multi_parts(&p, &m1, 1, xd2, cols, T, 1, NULL));
                    }
                    CU(td_cu_add_rows_norm(r2, &p, T, n_out, NULL, f2, 1, o2, NULL, nwd, 1e-6f, 0, NULL));
                    const int want = cols > 256 && defer && ((T > 16 && T <= 64) || (defer == 2 && T <= 16));
                    char name[128];
                    snprintf(name, sizeof name, "T=%lld cols=%lld %s, defer %d", (long long)T, (long long)cols,
                             glu ? "gated" : "plain", defer);
                    CHECKF((p.S > 1) == want && (p.S > 1 || p.p == yd2), "%s: %lld partials, %s expected", name,
                           (long long)p.S, want ? "several" : "one");
                    held += p.S > 1;
                    float *a = malloc(yb), *b2 = malloc(yb);
                    cu_down(a, r1, yb), cu_down(b2, r2, yb);
                    bad += differ(name, b2, a, ny) != 0;
                    cu_down(a, o1, yb), cu_down(b2, o2, yb);
                    bad += differ(name, b2, a, ny) != 0;
                    n++;
                    free(x), free(u), free(res), free(a), free(b2);
                    td_cu_free(xd), td_cu_free(xd2), td_cu_free(ud), td_cu_free(yd), td_cu_free(yd2);
                    td_cu_free(r1), td_cu_free(r2), td_cu_free(o1), td_cu_free(o2), td_cu_free(f1), td_cu_free(f2);
                }
        weight_free(&w);
    }
    /* the MLP's gate and up left as partials (td_cu_matmul_multi_parts), gated from them (td_cu_glu_parts) = their
     * ys gated (td_cu_glu); the down product over them (td_cu_matmul_glu_parts: tc_split gating the partials as it
     * stages them up to 16 tokens, else td_cu_glu_parts then the product) = td_cu_matmul_glu over the ys */
    const int64_t cols = 1024, nff = 3072;
    weight wg = weight_new(nff, cols), wu = weight_new(nff, cols), wd = weight_new(n_out, nff);
    for (size_t ti = 0; ti < sizeof Ts / sizeof *Ts; ti++)
        for (int defer = 0; defer < 3; defer++)
            for (int act = TD_CU_GLU_SILU; act <= TD_CU_GLU_GELU_TANH; act++) {
                const int64_t T = Ts[ti], ny = T * nff;
                const size_t yb = (size_t)ny * sizeof(float);
                float *x = rnd(T * cols, -3.0f, 3.0f), *xd = cu_up(x, (size_t)(T * cols) * sizeof *x);
                float *g1 = cu_up(NULL, yb), *u1 = cu_up(NULL, yb), *g2 = cu_up(NULL, yb), *u2 = cu_up(NULL, yb);
                td_cu_mm m1[2] = {{g1, nff, &wg.d, NULL, nff}, {u1, nff, &wu.d, NULL, nff}};
                td_cu_mm m2[2] = {{g2, nff, &wg.d, NULL, nff}, {u2, nff, &wu.d, NULL, nff}};
                td_cu_matmul_defer_test(0);
                const size_t db = (size_t)(T * n_out) * sizeof(float);
                float *g3 = cu_up(NULL, yb), *g4 = cu_up(NULL, yb), *d1 = cu_up(NULL, db), *d2 = cu_up(NULL, db);
                CU(td_cu_matmul_multi(m1, 2, xd, cols, T, 1, NULL));
                CU(td_cu_matmul_glu(d1, n_out, g1, u1, nff, T, &wd.d, act, 1, NULL)); /* g1: gated or as it was */
                CU(td_cu_matmul_multi(m1, 2, xd, cols, T, 1, NULL));
                CU(td_cu_glu(g1, u1, ny, act, NULL));
                td_cu_matmul_defer_test(defer);
                td_cu_parts p[2];
                CU(td_cu_matmul_multi_parts(p, m2, 2, xd, cols, T, 1, NULL));
                /* into g4: with one partial p[0] is g2 itself, which the down product below still takes ungated */
                CU(td_cu_glu_parts(g4, &p[0], &p[1], T, nff, act, NULL));
                CU(td_cu_matmul_glu_parts(NULL, d2, n_out, g3, p, nff, T, &wd.d, act, 1, NULL));
                const int want = defer && ((T > 16 && T <= 64) || (defer == 2 && T <= 16));
                char name[128];
                snprintf(name, sizeof name, "gate and up, T=%lld, act %d, defer %d", (long long)T, act, defer);
                CHECKF((p[0].S > 1) == want && p[1].S == p[0].S && (p[0].S > 1 || (p[0].p == g2 && p[1].p == u2)),
                       "%s: %lld / %lld partials, %s expected", name, (long long)p[0].S, (long long)p[1].S,
                       want ? "several" : "one");
                held += p[0].S > 1;
                float *a = malloc(yb), *b2 = malloc(yb);
                cu_down(a, g1, yb), cu_down(b2, g4, yb);
                bad += differ(name, b2, a, ny) != 0;
                cu_down(a, d1, db), cu_down(b2, d2, db);
                bad += differ(name, b2, a, T * n_out) != 0;
                n++;
                free(x), free(a), free(b2);
                td_cu_free(xd), td_cu_free(g1), td_cu_free(u1), td_cu_free(g2), td_cu_free(u2), td_cu_free(g3);
                td_cu_free(g4);
                td_cu_free(d1), td_cu_free(d2);
            }
    weight_free(&wg), weight_free(&wu), weight_free(&wd);
    td_cu_matmul_defer_test(-1);
    td_cu_matmul_tc_test_mode(0);
    td_cu_scratch_bind(NULL, 0);
    (void)td_cu_scratch_wanted();
    td_cu_free(scr), td_cu_free(nwd), free(nw);
    printf("  %lld launches, %lld left partials: %s\n", (long long)n, (long long)held, bad ? "NOT bit-exact" :
                                                                                             "bit-exact");
    CHECKF(bad == 0, "td_cu_matmul_multi_parts: %lld differ", (long long)bad);
}

int main(void) {
    if (!cu_test_device("test_cuda_matmul_tc")) return 77;
    const char *b = getenv("TD_TC_BENCH");
    if (b && !strcmp(b, "1")) {
        bench();
        CU(td_cu_sync(NULL));
        return td_test_finish("test_cuda_matmul_tc (bench)");
    }
    setenv("TD_CUDA_TC", "fast", 1); /* before the first tensor-core launch of the process */
    test_env();
    td_cu_matmul_tc_wg_test(0); /* the mma.sync kernels first (the wgmma forms, the default, in test_wg) */
    static const int64_t few[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 16, 33, 45, 63, 64};
    static const int64_t many[] = {65, 127, 128, 129, 300, 2048};
    static const int wide_modes[] = {2}; /* above 64 tokens the modes differ only in tc_stream's outputs a block */
    test_shapes(few, (int)(sizeof few / sizeof *few), new_modes, N_NEW_MODES,
                "T <= 64 (tc_skinny vs tc_stream, tc_split)");
    test_shapes(many, (int)(sizeof many / sizeof *many), wide_modes, 1, "T > 64 (tc_tile vs tc_wide)");
    static const int split_modes[] = {2, 7};
    td_cu_matmul_tc_cluster_test(1); /* tc_split in clusters at every T (the default: up to 16 tokens) */
    test_shapes(few, (int)(sizeof few / sizeof *few), split_modes, 2, "T <= 64 (tc_skinny vs tc_split in clusters)");
    td_cu_matmul_tc_cluster_test(0); /* tc_split's partials through the scratch and tc_fold_parts */
    test_shapes(few, (int)(sizeof few / sizeof *few), split_modes, 2, "T <= 64 (tc_skinny vs tc_split, folded apart)");
    test_bound_scratch(few, (int)(sizeof few / sizeof *few), split_modes);
    td_cu_matmul_tc_cluster_test(-1);
    td_cu_matmul_tc_xb_test(0); /* tc_wide rounding x in its blocks */
    test_shapes(many, (int)(sizeof many / sizeof *many), wide_modes, 1, "T > 64 (tc_tile vs tc_wide, x in fp32)");
    td_cu_matmul_tc_xb_test(-1);
    td_cu_matmul_tc_parts_test(1); /* every tc_wide launch by slices (tc_fold_parts adds them) */
    test_shapes(many, (int)(sizeof many / sizeof *many), wide_modes, 1, "T > 64 (tc_tile vs tc_wide by slices)");
    test_multi();
    td_cu_matmul_tc_parts_test(-1);
    test_multi();
    test_glu();
    test_held();
    test_norm_xb();
    test_wreg(many, (int)(sizeof many / sizeof *many), wide_modes, 0);
    test_wreg(many, (int)(sizeof many / sizeof *many), wide_modes, 3);
    test_wg(many, (int)(sizeof many / sizeof *many), wide_modes, few, (int)(sizeof few / sizeof *few), split_modes);
    td_cu_matmul_tc_wg_test(-1); /* the defaults (wgmma where the GPU runs it) */
    test_mlp();
    td_cu_matmul_tc_ws_test(4); /* tc_ws's GLU form */
    test_mlp();
    td_cu_matmul_tc_ws_test(2);
    test_mlp();
    td_cu_matmul_tc_ws_test(1);
    const int64_t tma0 = td_cu_matmul_tc_tma_launches();
    test_mlp();
    if (td_cu_matmul_tc_wg_here())
        CHECKF(td_cu_matmul_tc_tma_launches() > tma0, "tc_ws's GLU form with bulk tensor copies: no launch ran it");
    td_cu_matmul_tc_ws_test(-1);
    test_invariance();
    td_cu_matmul_tc_test_mode(0);
    CU(td_cu_sync(NULL));
    return td_test_finish("test_cuda_matmul_tc");
}
