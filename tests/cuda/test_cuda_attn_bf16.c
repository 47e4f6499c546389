/* Attention in --precision bf16 mode on the tensor cores (td_cu_attention_bf16, cuda.h's bf16 order), issue 43:
 *   accuracy: against td_attn_rows_ref on the same inputs rounded to bf16 (q; the cache's keys and values, f32 or
 *             f16, converted exactly and rounded), GQA 1, 2 and 8, head dims 64, 128 and 256, f32 and f16 caches,
 *             with and without a sliding window, positions 0, 1, 63, 64, 65, 511, 512, 513, 2047, 3000 and random
 *             ones. The bound, |out - ref| <= 2^-7 max |v|: the kernel rounds each p to bf16 (relative error
 *             u = 2^-9) and divides by the sum of the rounded p, so every weight p_i / l moves by at most about 2u of
 *             itself and the output, a weighted mean of the v, by at most 2u max |v| = 2^-8 max |v|; the other
 *             differences (the mma's fp32 dot products against fmaf chains, the online softmax's chunking) are fp32
 *             roundings, ~1e-6 here; the factor 2 is margin for the mma unit's own accumulation. A wrong fragment
 *             layout or a stale value moves outputs by O(max |v|).
 *   bit-identity: a row alone, amid other tokens of its sequence, amid other sequences, in tiles of other sizes and
 *             neighbours, through every td_cu_attention_test_mode (split by super-chunks, one block, all through
 *             the combine kernel, split by chunks), with its sequence moved to another slot and other cache rows.
 *   poison:   every cache row outside every row's range set to NaN (keys and values), including the gap between
 *             two windowed rows of one tile: the outputs are the unpoisoned ones, bit for bit.
 *   64 rows:  attention_bf16_64_kernel (the default at hd 64 and 128; its 6-warp form, 96 rows, forced or chosen
 *             for a plan cut past 64 rows; its 8-warp form, 128 rows) =
 *             attention_bf16_kernel (TD_CUDA_ATTN_ROWS=16;
 *             ctest test_cuda_attn_bf16_rows16 runs everything on it) bit for bit: G 1, 2, 8, tiles of 1 .. 64 rows, a
 *             causal run (rows of different n in one tile), reversed groups, the test modes; the plan's tile sizes
 *             (host only, also without a GPU) and a plan whose tiles a kernel cannot hold refused with the sizes.
 *   switch:   head dims other than 64, 128, 256 give td_cu_attention's bits, and so do all with TD_CUDA_TC_ATTN=0 in
 *             the environment (ctest test_cuda_attn_bf16_off); where the tensor-core kernel runs its bits differ from
 *             the fp32 kernel's (it ran). A scratch too small is refused with the sizes, a cache format outside 0 .. 2
 *             with its number.
 *   bf16 cache: every case above (accuracy, invariance, poison, 64 rows) also runs on the bf16 twin of its cache (the
 *             f32 or f16 values rounded to bf16, stored as TD_CU_KV_BF16: the bf16 order's k and v as they are) and
 *             must give the same bits as on the case's own cache, in every test mode, also from a twin that is not
 *             16-byte aligned (element loads instead of cp.async); td_cu_attention (the fp32 kernel, also at the head
 *             dims the tensor cores do not take) on the twin gives its bits on an f32 cache of the same values.
 *             The 64-row kernel stages an aligned twin's chunks one at a time by default; the invariance and
 *             64-row cases run again with them double-buffered (td_cu_attention_db_test(1)), with the keys and
 *             values pipelined (td_cu_attention_pipe_test(1)), and (compute capability 9.0) with the products on
 *             wgmma (td_cu_attention_wg_test(1); the poison cases too).
 * Without a usable CUDA device it prints why and exits 77 (skipped). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/attn_case.h"
#include "cuda/cuda_test.h"
#include "kernels/cpu/kernels.h"
#include "kernels/cuda/cuda.h"
#include "test_util.h"
#include "util/half.h"

static uint64_t seed = 0xbf16a77eull;

/* ---- plumbing (cuda_test.h) ---- */

static int64_t irand(int64_t n) { return (int64_t)(td_test_rand(&seed) % (uint64_t)n); }
static float *rnd(int64_t n, float lo, float hi) { return cu_rnd(&seed, n, lo, hi); }

static int64_t bits_differ(const float *a, const float *b, int64_t n) {
    int64_t d = 0;
    for (int64_t i = 0; i < n; i++) d += memcmp(&a[i], &b[i], sizeof *a) != 0;
    return d;
}

/* max |a - b| over n values (NaN: infinity), checked against bound. */
static void within_abs(const char *name, const float *a, const float *b, int64_t n, double bound) {
    double worst = 0, sum = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]);
        if (!(d <= worst)) worst = isnan(d) ? INFINITY : d;
        sum += isnan(d) ? 0 : d;
    }
    printf("  %-66s max |diff| %.3g, mean %.2g (allowed %.3g)\n", name, worst, sum / (double)(n > 0 ? n : 1), bound);
    CHECKF(worst <= bound, "%s: %g > %g", name, worst, bound);
}

/* the bound against the reference: 2^-7 max |v| (the header comment); the values are in [-1, 1] */
#define BOUND ldexp(1.0, -7)

/* within BOUND of the reference; the test modes give the same bits; and (no window, f32 cache) the tensor-core
 * kernel ran: not the fp32 kernel's bits */
static void bf16_close(const attn_acc *a) {
    const kvcase *c = a->c;
    int64_t n = a->T * c->Hq * c->hd;
    within_abs(a->name, a->out, a->ref, n, BOUND);
    attn_modes_bits(c, a->q, a->seq, a->pos, a->T, a->window, a->out, 1);
    if (a->window == 0 && c->f16 == 0) {
        float *o32 = dev_attention(c, a->q, a->seq, a->pos, a->T, c->cells_d, (attn_cut){0, 0, 0, 0, 0}, 0);
        int64_t d = bits_differ(a->out, o32, n);
        printf("  %-66s %lld of %lld differ\n", "  vs the fp32 kernel (must differ)", (long long)d, (long long)n);
        CHECKF(d > 0, "hd=%lld: bf16 mode gave the fp32 kernel's bits", (long long)c->hd);
        free(o32);
    }
    /* the bf16 twin: the same bits in every test mode; the fp32 kernel's bits on it = on the f32 cache of its values */
    kvcase tw = kv_twin(c, 0), tr = kv_twin(c, 1);
    for (int mode = 0; mode <= 3; mode++) {
        float *o = dev_attention(&tw, a->q, a->seq, a->pos, a->T, c->cells_d, (attn_cut){0, a->window, mode, 0, 0}, 1);
        char name[160];
        snprintf(name, sizeof name, "  bf16 twin of the cache, test mode %d: the same bits", mode);
        cu_bits(name, o, a->out, n);
        free(o);
    }
    float *fb = dev_attention(&tw, a->q, a->seq, a->pos, a->T, c->cells_d, (attn_cut){0, a->window, 0, 0, 0}, 0);
    float *fr = dev_attention(&tr, a->q, a->seq, a->pos, a->T, c->cells_d, (attn_cut){0, a->window, 0, 0, 0}, 0);
    cu_bits("  fp32 kernel: bf16 twin vs an f32 cache of its values", fb, fr, n);
    free(fb), free(fr);
}

static void test_accuracy(void) {
    printf("bf16 attention against td_attn_rows_ref on bf16-rounded inputs (|diff| <= 2^-7 max |v|); the one-block,\n"
           "  all-through-the-combine and by-chunks paths bit-identical to the normal one\n");
    static const int64_t cases[][5] = {/* Hq, Hkv, hd, q head stride, T */
                                       {16, 8, 128, 128, 144}, {8, 8, 64, 64, 40},  {16, 2, 128, 128, 20},
                                       {8, 1, 256, 512, 12},   {4, 2, 64, 64, 200}, {16, 8, 256, 256, 24},
                                       {16, 8, 128, 128, 1}};
    attn_accuracy(&seed, cases, sizeof cases / sizeof *cases, 1, bf16_close);
}

static void test_invariance(void) {
    printf("bf16 attention: batch invariance (tile neighbours and sizes, own sequence, other sequences, test modes,\n"
           "  sequence slot, cell layout)\n");
    static const int32_t tposs[] = {0, 64, 261, 1000, 3000};
    static const int64_t shapes[][3] = {{16, 8, 128}, {8, 1, 256}, {4, 4, 64}}; /* Hq, Hkv, hd: G 2, 8, 1 */
    const int64_t n_ctx = 3100;
    for (size_t si = 0; si < sizeof shapes / sizeof *shapes; si++)
        for (int f16 = 0; f16 < 2; f16++)
            for (size_t pi = 0; pi < sizeof tposs / sizeof *tposs; pi++) {
                int64_t Hq = shapes[si][0], Hkv = shapes[si][1], hd = shapes[si][2], ldq = Hq * hd;
                int64_t window = pi == 4 && f16 ? 700 : pi == 3 && !f16 ? 100 : 0;
                kvcase c = kv_new(&seed, Hq, Hkv, hd, hd, f16, n_ctx, 3, 1);
                float *target = rnd(ldq, -3.0f, 3.0f), *first = NULL;
                int32_t tpos = tposs[pi];
                /* T, the target's row, tokens per tile, test mode, reversed groups; r == 2, 3: the target's
                 * sequence holds the other tokens (a prefill-like tile); the last run moves the cells and slot */
                static const int64_t runs[][5] = {{1, 0, 0, 0, 0},    {7, 4, 0, 0, 0},    {9, 3, 0, 0, 1},
                                                  {16, 5, 0, 2, 0},   {144, 77, 0, 0, 0}, {144, 77, 1, 0, 0},
                                                  {144, 77, 0, 1, 0}, {144, 77, 0, 2, 0}, {144, 77, 3, 3, 1},
                                                  {1, 0, 0, 3, 0},    {144, 77, 0, 0, 0}};
                const int n_runs = sizeof runs / sizeof *runs;
                const kvcase tw = kv_twin(&c, 0);
                for (int r = 0; r < n_runs; r++) {
                    int64_t T = runs[r][0], at = runs[r][1];
                    attn_cut cut = {runs[r][2], window, (int)runs[r][3], (int)runs[r][4], 0};
                    uint64_t twin_seed = seed; /* the twin's run: the same draws */
                    float *out = attn_target_row(&c, &seed, target, tpos, T, at, r == 2 || r == 3, r == n_runs - 1,
                                                 cut, 1);
                    float *tout = attn_target_row(&tw, &twin_seed, target, tpos, T, at, r == 2 || r == 3,
                                                  r == n_runs - 1, cut, 1);
                    char tname[160];
                    snprintf(tname, sizeof tname, "hd %lld G %lld kv %s pos %d: run %d on the bf16 twin", (long long)hd,
                             (long long)(Hq / Hkv), f16 ? "f16" : "f32", tpos, r);
                    cu_bits(tname, tout, out, ldq);
                    free(tout);
                    if (!first) {
                        first = out;
                    } else {
                        char name[160];
                        snprintf(name, sizeof name,
                                 "hd %lld G %lld kv %s pos %d%s: T=%lld row %lld tile %lld mode %d%s%s", (long long)hd,
                                 (long long)(Hq / Hkv), f16 ? "f16" : "f32", tpos,
                                 window ? (window == 700 ? " w700" : " w100") : "", (long long)T, (long long)at,
                                 (long long)runs[r][2], (int)runs[r][3], r == 2 || r == 3 ? " own seq" : "",
                                 r == n_runs - 1 ? " moved" : "");
                        cu_bits(name, out, first, ldq);
                        free(out);
                    }
                }
                free(target), free(first);
                kv_free(&c);
            }
}

/* Every cache row outside every row's range NaN: the outputs must not change. One sequence's tokens in one tile with
 * a window and far-apart positions (a gap no row sees inside the tile's span), plus rows of the other sequences. */
static void test_poison(void) {
    printf("bf16 attention: NaN in every cache row no row sees reaches no output\n");
    const int64_t n_ctx = 3100;
    for (int kv = 0; kv < 3; kv++) /* f32, f16, the f32 case's bf16 twin */
        for (int wi = 0; wi < 2; wi++) {
            int64_t Hq = 16, Hkv = 8, hd = 128, ldq = Hq * hd, window = wi ? 64 : 0, T = 11;
            kvcase own = kv_new(&seed, Hq, Hkv, hd, hd, kv == 1, n_ctx, 3, 1), c = kv == 2 ? kv_twin(&own, 0) : own;
            float *q = rnd(T * ldq, -3.0f, 3.0f);
            static const int32_t tseq[] = {0, 0, 0, 0, 0, 1, 1, 2, 2, 2, 0};
            static const int32_t tpos[] = {100, 101, 700, 2000, 2001, 30, 520, 5, 6, 1300, 2900};
            int32_t seq[11], pos[11];
            memcpy(seq, tseq, sizeof seq), memcpy(pos, tpos, sizeof pos);
            for (int mode = 0; mode <= 3; mode++) {
                float *clean = dev_attention(&c, q, seq, pos, T, c.cells_d, (attn_cut){0, window, mode, 0, 0}, 1);
                /* poison every cache row not in any row's range */
                char *seen = calloc((size_t)c.n_rows, 1);
                for (int64_t t = 0; t < T; t++) {
                    int64_t n = pos[t] + 1, lo = window > 0 && n > window ? n - window : 0;
                    for (int64_t p = lo; p < n; p++) seen[c.cells[seq[t] * n_ctx + p]] = 1;
                }
                size_t es = c.kvf == TD_CU_KV_F32 ? 4 : 2, rbytes = (size_t)c.kv_dim * es;
                unsigned char *k2 = malloc((size_t)c.n_rows * rbytes), *v2 = malloc((size_t)c.n_rows * rbytes);
                memcpy(k2, c.kc, (size_t)c.n_rows * rbytes), memcpy(v2, c.vc, (size_t)c.n_rows * rbytes);
                int64_t poisoned = 0;
                for (int64_t row = 0; row < c.n_rows; row++) {
                    if (seen[row]) continue;
                    poisoned++;
                    for (int64_t i = 0; i < c.kv_dim; i++) {
                        size_t at = (size_t)row * (size_t)c.kv_dim + (size_t)i;
                        const uint16_t nan16 = c.kvf == TD_CU_KV_F16 ? 0x7e00 : 0x7fc0; /* f16, bf16 NaN */
                        if (es == 2) ((uint16_t *)k2)[at] = nan16, ((uint16_t *)v2)[at] = nan16;
                        else ((float *)k2)[at] = NAN, ((float *)v2)[at] = NAN;
                    }
                }
                CU(td_cu_h2d(c.kc_d, k2, (size_t)c.n_rows * rbytes, NULL));
                CU(td_cu_h2d(c.vc_d, v2, (size_t)c.n_rows * rbytes, NULL));
                float *dirty = dev_attention(&c, q, seq, pos, T, c.cells_d, (attn_cut){0, window, mode, 0, 0}, 1);
                char name[160];
                snprintf(name, sizeof name, "kv %s window %lld mode %d, %lld of %lld rows NaN", kv_name(&c),
                         (long long)window, mode, (long long)poisoned, (long long)c.n_rows);
                cu_bits(name, dirty, clean, T * Hq * hd);
                size_t all = (size_t)c.n_rows * rbytes; /* restore */
                CU(td_cu_h2d(c.kc_d, c.kc, all, NULL));
                CU(td_cu_h2d(c.vc_d, c.vc, all, NULL));
                free(seen), free(k2), free(v2), free(clean), free(dirty);
            }
            free(q);
            kv_free(&own);
        }
}

/* Whether TD_CUDA_ATTN_ROWS leaves the default, 64 rows (and 96 where a plan asks for them). */
static int wg_pass; /* td_cu_attention_wg_test(1) is on: no 96-row tiles by default */
static int rows_default(void) {
    const char *e = getenv("TD_CUDA_ATTN_ROWS");
    return !e || !*e || strcmp(e, "64") == 0;
}

/* The 64-row kernel (attention_bf16_64_kernel, warp w rows 16w .. 16w + 16 over the whole chunk) against the 16-row
 * one (attention_bf16_kernel) bit for bit: G 1, 2, 8 (and hd 256, which stays on the 16-row kernel), f32 and f16
 * caches, with and without a window, tiles of 1 .. 64 rows (tokens per tile 1 .. 64 / G), the test modes; a
 * prefill-like run of one sequence (a causal tile: rows of different n in one tile, crossing 512), random positions
 * and the edge positions in the other sequences, groups reversed (the tile's rows out of position order). */
static void test_rows64(void) {
    printf("bf16 attention: tiles of 64 rows vs tiles of 16 rows, bit for bit\n");
    static const int64_t shapes[][3] = {{4, 4, 64}, {16, 8, 128}, {16, 2, 128}, {8, 8, 64}, {4, 2, 64}, {8, 1, 256}};
    static const int64_t qts[] = {1, 2, 3, 4, 5, 7, 8, 13, 16, 21, 32, 33, 64, 65, 90, 128};
    const int64_t n_ctx = 2200, T = 150;
    for (size_t si = 0; si < sizeof shapes / sizeof *shapes; si++)
        for (int f16 = 0; f16 < 2; f16++)
            for (int wi = 0; wi < 2; wi++) {
                int64_t Hq = shapes[si][0], Hkv = shapes[si][1], hd = shapes[si][2], G = Hq / Hkv, ldo = Hq * hd;
                int64_t window = wi ? (si % 2 ? 100 : 600) : 0;
                kvcase c = kv_new(&seed, Hq, Hkv, hd, hd, f16, n_ctx, 3, 1);
                float *q = rnd(T * Hq * hd, -3.0f, 3.0f);
                int32_t *seq = malloc((size_t)T * 4), *pos = malloc((size_t)T * 4);
                for (int64_t t = 0; t < T; t++) {
                    if (t < 90) seq[t] = 0, pos[t] = (int32_t)(470 + t); /* positions 470 .. 559: a causal run */
                    else if (t < 130) seq[t] = 1, pos[t] = (int32_t)irand(n_ctx);
                    else seq[t] = 2, pos[t] = attn_edge[(t - 130) % (ATTN_N_EDGE - 1)]; /* 0 .. 2047 */
                }
                /* the 16-row kernel's tiles as the engine cuts them; every run below also on the bf16 twin */
                float *ref = dev_attention(&c, q, seq, pos, T, c.cells_d, (attn_cut){0, window, 0, 0, 16}, 1);
                const kvcase tw = kv_twin(&c, 0);
                {
                    float *o = dev_attention(&tw, q, seq, pos, T, c.cells_d, (attn_cut){0, window, 0, 0, 16}, 1);
                    char name[160];
                    snprintf(name, sizeof name, "hd %lld G %lld kv %s window %lld: 16 rows, bf16 twin", (long long)hd,
                             (long long)G, f16 ? "f16" : "f32", (long long)window);
                    cu_bits(name, o, ref, T * ldo);
                    free(o);
                }
                int64_t q64 = td_cu_attention_tc(hd) ? 64 / G : 16 / G, q16 = 16 / G;
                td_cu_attention_rows_test(64);
                CHECKF(td_cu_attn_tile_tokens_bf16(Hq, Hkv, hd) == (hd == 256 ? q16 : q64),
                       "td_cu_attn_tile_tokens_bf16(%lld, %lld, %lld) = %lld", (long long)Hq, (long long)Hkv,
                       (long long)hd, (long long)td_cu_attn_tile_tokens_bf16(Hq, Hkv, hd));
                td_cu_attention_rows_test(16);
                CHECKF(td_cu_attn_tile_tokens_bf16(Hq, Hkv, hd) == q16, "rows 16: tile tokens %lld",
                       (long long)td_cu_attn_tile_tokens_bf16(Hq, Hkv, hd));
                /* tiles of 96 rows: what a plan may cut at by default (hd 64 and 128), none past the 16-row kernel */
                CHECKF(td_cu_attn_whole_tokens_bf16(Hq, Hkv, hd) == 0, "rows 16: whole tokens %lld",
                       (long long)td_cu_attn_whole_tokens_bf16(Hq, Hkv, hd));
                td_cu_attention_rows_test(0);
                const int64_t whole = hd == 256 || !rows_default() || wg_pass ? 0 : 96 / G;
                CHECKF(td_cu_attn_whole_tokens_bf16(Hq, Hkv, hd) == whole,
                       "whole tokens %lld",
                       (long long)td_cu_attn_whole_tokens_bf16(Hq, Hkv, hd));
                /* the 64-row kernel, its 6-warp form (96 rows: forced by TD_CUDA_ATTN_ROWS=96, or chosen by the
                 * launch for a plan cut past 64 rows) and its 8-warp form (TD_CUDA_ATTN_ROWS=128) */
                static const int row_forms[] = {64, 96, 128};
                for (int ri = 0; ri < 3; ri++) {
                    const int rows = row_forms[ri];
                    const int64_t qmax = hd == 256 ? q16 : rows / G;
                    if (rows > 64 && hd == 256) continue;
                    if (rows > 64) { /* (64 rows' tile tokens: checked above) */
                        td_cu_attention_rows_test(rows);
                        CHECKF(td_cu_attn_tile_tokens_bf16(Hq, Hkv, hd) == qmax, "rows %d: tile tokens %lld", rows,
                               (long long)td_cu_attn_tile_tokens_bf16(Hq, Hkv, hd));
                        td_cu_attention_rows_test(0);
                    }
                    for (size_t qi = 0; qi < sizeof qts / sizeof *qts; qi++) {
                        if (qts[qi] > qmax) continue;
                        for (int rev = 0; rev < 2; rev++)
                            for (int twin = 0; twin < 2; twin++) {
                                if (rev && qts[qi] != qmax && qts[qi] != 5) continue;
                                if (rows > 64 && qts[qi] * G <= 64 && qts[qi] != 5) continue;
                                /* 96 rows past the 64-row kernel's tiles: the default's choice (rows_test 0) */
                                const int cut_rows =
                                    rows == 96 && qts[qi] * G > 64 && rows_default() && !wg_pass ? 0 : rows;
                                float *o = dev_attention(twin ? &tw : &c, q, seq, pos, T, c.cells_d,
                                                         (attn_cut){qts[qi], window, 0, rev, cut_rows}, 1);
                                char name[160];
                                snprintf(name, sizeof name,
                                         "hd %lld G %lld kv %s window %lld: %lld tokens (%lld rows%s)%s%s",
                                         (long long)hd, (long long)G, f16 ? "f16" : "f32", (long long)window,
                                         (long long)qts[qi], (long long)(qts[qi] * G),
                                         rows == 128  ? ", 8 warps"
                                         : rows == 96 ? (cut_rows ? ", 6 warps" : ", 6 warps by the plan")
                                                      : "",
                                         rev ? " reversed" : "", twin ? ", bf16 twin" : "");
                                cu_bits(name, o, ref, T * ldo);
                                free(o);
                            }
                    }
                }
                for (int mode = 1; mode <= 3; mode++)
                    for (int twin = 0; twin < 6; twin++) { /* 2, 3: the 6-warp form; 4, 5: the 8-warp form */
                        const int rows = row_forms[twin / 2];
                        if (rows > 64 && hd == 256) continue;
                        float *o = dev_attention(twin % 2 ? &tw : &c, q, seq, pos, T, c.cells_d,
                                                 (attn_cut){0, window, mode, 0, rows}, 1);
                        char name[160];
                        snprintf(name, sizeof name, "hd %lld G %lld kv %s window %lld: %d rows, test mode %d%s",
                                 (long long)hd, (long long)G, f16 ? "f16" : "f32", (long long)window, rows, mode,
                                 twin % 2 ? ", bf16 twin" : "");
                        cu_bits(name, o, ref, T * ldo);
                        free(o);
                    }
                free(ref), free(q), free(seq), free(pos);
                kv_free(&c);
            }
}

/* The bf16 twin from an address 2 bytes past a 16-byte boundary: the staging's element loads instead of cp.async,
 * the same bits as the f32 cache (both kernels; hd 256 runs the 16-row one). */
static void test_bf16_unaligned(void) {
    printf("bf16 attention: a bf16 cache not 16-byte aligned (element loads) gives the same bits\n");
    static const int64_t shapes[][3] = {{4, 2, 64}, {16, 8, 128}, {8, 1, 256}}; /* Hq, Hkv, hd */
    const int64_t n_ctx = 1100, T = 40;
    for (size_t si = 0; si < sizeof shapes / sizeof *shapes; si++)
        for (int rows = 16; rows <= 64; rows += 48) {
            int64_t Hq = shapes[si][0], Hkv = shapes[si][1], hd = shapes[si][2], ldo = Hq * hd;
            if (rows == 64 && hd == 256) continue;
            kvcase c = kv_new(&seed, Hq, Hkv, hd, hd, 0, n_ctx, 2, 1);
            size_t bytes = (size_t)(c.n_rows * c.kv_dim) * 2;
            char *kbuf = cu_up(NULL, bytes + 16), *vbuf = cu_up(NULL, bytes + 16);
            CU(td_cu_h2d(kbuf + 2, c.kb, bytes, NULL));
            CU(td_cu_h2d(vbuf + 2, c.vb, bytes, NULL));
            kvcase tw = kv_twin(&c, 0);
            tw.kc_d = kbuf + 2, tw.vc_d = vbuf + 2;
            float *q = rnd(T * ldo, -3.0f, 3.0f);
            int32_t seq[40], pos[40];
            for (int t = 0; t < T; t++) seq[t] = t % 2, pos[t] = t < 5 ? attn_edge[t] : (int32_t)irand(n_ctx);
            float *a = dev_attention(&c, q, seq, pos, T, c.cells_d, (attn_cut){0, 0, 0, 0, rows}, 1);
            float *b = dev_attention(&tw, q, seq, pos, T, c.cells_d, (attn_cut){0, 0, 0, 0, rows}, 1);
            char name[96];
            snprintf(name, sizeof name, "hd %lld G %lld, %d rows: bf16 twin 2 bytes off vs the f32 cache",
                     (long long)hd, (long long)(Hq / Hkv), rows);
            cu_bits(name, b, a, T * ldo);
            free(a), free(b), free(q);
            td_cu_free(kbuf), td_cu_free(vbuf);
            kv_free(&c);
        }
}

/* The plan's sizes on the host (no device needed): 64-row tiles where the 64-row kernel runs. */
static void test_tile_tokens(int off) {
    printf("bf16 attention: tokens per tile\n");
    static const int64_t shapes[][5] = {/* Hq, Hkv, hd, tokens per tile with 64 rows, with 96 (0: none) */
                                        {16, 8, 128, 32, 48}, {16, 2, 128, 8, 12}, {8, 8, 64, 64, 96},
                                        {4, 2, 64, 32, 48},   {32, 2, 128, 4, 6},  {48, 1, 64, 1, 2},
                                        {8, 1, 256, 2, 0},    {4, 2, 72, 8, 0}};
    for (size_t si = 0; si < sizeof shapes / sizeof *shapes; si++) {
        int64_t Hq = shapes[si][0], Hkv = shapes[si][1], hd = shapes[si][2], fp32 = td_cu_attn_tile_tokens(Hq, Hkv, hd);
        int64_t want = off || hd == 256 || hd == 72 ? fp32 : shapes[si][3];
        td_cu_attention_rows_test(64);
        int64_t got64 = td_cu_attn_tile_tokens_bf16(Hq, Hkv, hd);
        td_cu_attention_rows_test(16);
        int64_t got16 = td_cu_attn_tile_tokens_bf16(Hq, Hkv, hd);
        td_cu_attention_rows_test(0);
        printf("  Hq %2lld Hkv %lld hd %3lld: %2lld tokens (64 rows), %2lld (16 rows), fp32 %2lld\n", (long long)Hq,
               (long long)Hkv, (long long)hd, (long long)got64, (long long)got16, (long long)fp32);
        CHECKF(got64 == want && got16 == fp32, "Hq %lld Hkv %lld hd %lld: %lld / %lld tokens, want %lld / %lld",
               (long long)Hq, (long long)Hkv, (long long)hd, (long long)got64, (long long)got16, (long long)want,
               (long long)fp32);
        const int64_t whole = td_cu_attn_whole_tokens_bf16(Hq, Hkv, hd);
        const int64_t want96 = off || !rows_default() ? 0 : shapes[si][4];
        CHECKF(whole == want96, "Hq %lld Hkv %lld hd %lld: %lld tokens in 96 rows, want %lld", (long long)Hq,
               (long long)Hkv, (long long)hd, (long long)whole, (long long)want96);
    }
}

/* Head dims the tensor-core kernel does not take (all of them with TD_CUDA_TC_ATTN=0): td_cu_attention's bits. */
static void test_fallback(int off) {
    printf("bf16 attention: %s run the fp32 kernel\n", off ? "with TD_CUDA_TC_ATTN=0 all head dims" : "other head dims");
    static const int64_t shapes[][3] = {{4, 2, 72}, {2, 2, 16}, {4, 1, 320}, {4, 2, 64}, {16, 8, 128}, {8, 1, 256}};
    for (size_t si = 0; si < (off ? 6u : 3u); si++) {
        int64_t Hq = shapes[si][0], Hkv = shapes[si][1], hd = shapes[si][2], T = 9;
        CHECKF(!td_cu_attention_tc(hd), "td_cu_attention_tc(%lld)", (long long)hd);
        kvcase c = kv_new(&seed, Hq, Hkv, hd, hd, 0, 1100, 2, 1);
        float *q = rnd(T * Hq * hd, -3.0f, 3.0f);
        int32_t seq[9], pos[9];
        for (int t = 0; t < 9; t++) seq[t] = (int32_t)irand(2), pos[t] = (int32_t)irand(1100);
        float *a = dev_attention(&c, q, seq, pos, T, c.cells_d, (attn_cut){0, 0, 0, 0, 0}, 1);
        float *b = dev_attention(&c, q, seq, pos, T, c.cells_d, (attn_cut){0, 0, 0, 0, 0}, 0);
        char name[96];
        snprintf(name, sizeof name, "hd %lld: bf16 mode vs td_cu_attention", (long long)hd);
        cu_bits(name, a, b, T * Hq * hd);
        /* the bf16 twin through the fp32 kernel: its bits on an f32 cache of the same values */
        const kvcase tw = kv_twin(&c, 0), tr = kv_twin(&c, 1);
        float *ta = dev_attention(&tw, q, seq, pos, T, c.cells_d, (attn_cut){0, 0, 0, 0, 0}, 1);
        float *tb = dev_attention(&tr, q, seq, pos, T, c.cells_d, (attn_cut){0, 0, 0, 0, 0}, 0);
        snprintf(name, sizeof name, "hd %lld: bf16 twin vs an f32 cache of its values", (long long)hd);
        cu_bits(name, ta, tb, T * Hq * hd);
        free(a), free(b), free(ta), free(tb), free(q);
        kv_free(&c);
    }
}

/* A scratch too small for the split is refused with the sizes, not written past (the tensor-core path's check). */
static void test_refusal(void) {
    printf("bf16 attention: errors\n");
    kvcase c = kv_new(&seed, 4, 2, 64, 64, 0, 1100, 1, 1);
    float *q = rnd(4 * 64, -1.0f, 1.0f);
    int32_t seq = 0, pos = 1000, tile[2] = {0, 1}, tok = 0;
    float *qd = cu_up(q, 4 * 64 * 4), *od = cu_up(NULL, 4 * 64 * 4);
    int32_t *seq_d = cu_up(&seq, 4), *pos_d = cu_up(&pos, 4), *tile_d = cu_up(tile, 8), *tok_d = cu_up(&tok, 4);
    td_cu_attn_plan plan = {tok_d, tile_d, 1, 1001, NULL, td_cu_attn_scratch_floats(1, 4, 1001, 64) - 1, 0, NULL};
    int rc = td_cu_attention_bf16(od, 256, qd, 256, 64, c.kc_d, c.vc_d, 0, c.kv_dim, c.cells_d, c.n_ctx, seq_d, pos_d,
                                  1, 4, 2, 64, 0.125f, 0, &plan, NULL);
    CHECK(rc == -1 && strstr(td_cu_error(), "scratch"));
    printf("  %-66s \"%s\"\n", "a scratch too small", td_cu_error());
    /* a plan cut for 64 rows given to the 16-row kernel (and the fp32 one): refused with the sizes */
    td_cu_attn_plan big = {tok_d, tile_d, 1, 1001, NULL, td_cu_attn_scratch_floats(1, 4, 1001, 64), 32, NULL};
    td_cu_attention_rows_test(16);
    rc = td_cu_attention_bf16(od, 256, qd, 256, 64, c.kc_d, c.vc_d, 0, c.kv_dim, c.cells_d, c.n_ctx, seq_d, pos_d, 1, 4,
                              2, 64, 0.125f, 0, &big, NULL);
    td_cu_attention_rows_test(0);
    CHECK(rc == -1 && strstr(td_cu_error(), "tiles of 32 tokens"));
    printf("  %-66s \"%s\"\n", "64-row tiles to the 16-row kernel", td_cu_error());
    rc = td_cu_attention(od, 256, qd, 256, 64, c.kc_d, c.vc_d, 0, c.kv_dim, c.cells_d, c.n_ctx, seq_d, pos_d, 1, 4, 2,
                         64, 0.125f, 0, &big, NULL);
    CHECK(rc == -1 && strstr(td_cu_error(), "tiles of 32 tokens"));
    printf("  %-66s \"%s\"\n", "64-row tiles to the fp32 kernel", td_cu_error());
    for (int kvf = -1; kvf <= 3; kvf += 4) { /* a cache format outside TD_CU_KV_*, both entry points */
        for (int b = 0; b < 2; b++) {
            rc = (b ? td_cu_attention_bf16 : td_cu_attention)(od, 256, qd, 256, 64, c.kc_d, c.vc_d, kvf, c.kv_dim,
                                                               c.cells_d, c.n_ctx, seq_d, pos_d, 1, 4, 2, 64, 0.125f,
                                                               0, &plan, NULL);
            CHECKF(rc == -1 && strstr(td_cu_error(), "KV cache format"), "kvf %d: rc %d", kvf, rc);
        }
        printf("  %-66s \"%s\"\n", "a cache format outside 0 .. 2", td_cu_error());
    }
    td_cu_free(qd), td_cu_free(od), td_cu_free(seq_d), td_cu_free(pos_d), td_cu_free(tile_d), td_cu_free(tok_d);
    free(q);
    kv_free(&c);
}

int main(void) {
    const char *env = getenv("TD_CUDA_TC_ATTN");
    const int off = env && strcmp(env, "0") == 0;
    test_tile_tokens(off); /* host only */
    if (!cu_test_device("test_cuda_attn_bf16")) return td_test_failures ? td_test_finish("test_cuda_attn_bf16") : 77;
    const char *rows_env = getenv("TD_CUDA_ATTN_ROWS");
    printf("bf16 attention: %s rows per tile (TD_CUDA_ATTN_ROWS=%s)\n", rows_env ? rows_env : "64",
           rows_env ? rows_env : "(unset)");
    CHECKF(td_cu_attention_tc(128) == !off, "td_cu_attention_tc(128) with TD_CUDA_TC_ATTN=%s", env ? env : "(unset)");
    test_fallback(off);
    test_refusal();
    if (off) {
        printf("TD_CUDA_TC_ATTN=0: the tensor-core kernel is off (bf16 mode runs td_cu_attention; checked above)\n");
        CU(td_cu_sync(NULL));
        return td_test_finish("test_cuda_attn_bf16");
    }
    test_accuracy();
    test_invariance();
    test_poison();
    test_rows64();
    test_bf16_unaligned();
    printf("again with a bf16 cache's chunks double-buffered (TD_CUDA_ATTN_DB=1; the same bits):\n");
    td_cu_attention_db_test(1);
    test_invariance();
    test_rows64();
    td_cu_attention_db_test(-1);
    printf("again with a bf16 cache's keys and values pipelined (TD_CUDA_ATTN_PIPE=1; the same bits):\n");
    td_cu_attention_pipe_test(1);
    test_invariance();
    test_rows64();
    td_cu_attention_pipe_test(-1);
    if (td_cu_matmul_tc_wg_here()) {
        printf("again with the 64-row kernel's products on wgmma (TD_CUDA_ATTN_WG=1; the same bits):\n");
        td_cu_attention_wg_test(1), wg_pass = 1;
        test_invariance();
        test_poison();
        test_rows64();
        td_cu_attention_wg_test(-1), wg_pass = 0;
    }
    CU(td_cu_sync(NULL));
    return td_test_finish("test_cuda_attn_bf16");
}
