/* typedecide bench chat: the time to the first token of a T-token user turn after H tokens of conversation, (a)
 * with the conversation's KV reused (td_gen matches the cached session; only the turn is prefilled) and (b)
 * re-prefilled from scratch, for several H in the same run; the slope of each against H by least squares. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>

#include "bench_chat.h"
#include "cli.h"
#include "sampling.h"

#define MAX_H 16

/* Ids of a synthetic conversation: ChatML turns (<|im_start|>, role, text, <|im_end|>) of pseudo-random text ids,
 * so that a hybrid model meets its turn boundaries as in a real chat. */
static void fill(int32_t *ids, int32_t n, uint64_t seed, int32_t lo, int32_t span, int32_t im_start, int32_t im_end) {
    uint64_t s = seed;
    for (int32_t i = 0; i < n; i++) ids[i] = lo + bench_draw_id(&s, span);
    if (im_start < 0 || im_end < 0) return;
    for (int32_t i = 0; i + 1 < n; i += 60) { /* a turn every 60 tokens */
        if (i) ids[i - 1] = im_end;
        ids[i] = im_start;
    }
}

static double run_turn(const char *cmd, td_gen *g, const int32_t *p, int32_t n, int32_t *reused, int *err,
                       int cache) {
    td_gen_request rq = td_gen_default_request();
    rq.cache = cache;
    rq.prompt = p;
    rq.n_prompt = n;
    rq.max_tokens = 1;
    rq.ignore_eos = 1;
    cli_gen_result res;
    if (cli_gen_run(cmd, g, &rq, 0, &res)) *err = 1;
    double ms = res.ms_first_token;
    if (reused) *reused = res.n_reused;
    cli_gen_result_free(&res);
    return ms;
}

static double slope(const long long *x, const double *y, int n) {
    double mx = 0, my = 0, sxx = 0, sxy = 0;
    for (int i = 0; i < n; i++) mx += (double)x[i] / n, my += y[i] / n;
    for (int i = 0; i < n; i++) sxx += ((double)x[i] - mx) * ((double)x[i] - mx), sxy += ((double)x[i] - mx) * (y[i] - my);
    return sxx > 0 ? sxy / sxx : 0;
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int bench_chat(const char *model_dir, long long threads, long long repeat, const char *history_s, const char *turn_s,
               int32_t kv_f16, const bench_device *dv) {
    long long hist[MAX_H], turn = 30;
    int nh = 0;
    const char *h = history_s ? history_s : "200,1000,3000";
    while (*h) {
        char *end;
        long long v = strtoll(h, &end, 10);
        if (end == h || v < 1 || v > (1 << 20) || nh == MAX_H || (*end && *end != ','))
            return cli_usage_error("bench", "--history must be up to %d comma-separated lengths in 1..1048576", MAX_H);
        hist[nh++] = v;
        h = *end ? end + 1 : end;
    }
    if (nh < 2) return cli_usage_error("bench", "--history needs at least two lengths to fit a slope");
    if (turn_s && cli_int(turn_s, 1, 4096, &turn)) return cli_usage_error("bench", "--turn must be in 1..4096");
    long long hmax = 0;
    for (int i = 0; i < nh; i++) hmax = hist[i] > hmax ? hist[i] : hmax;
    td_model *m;
    double t0 = cli_now();
    td_status st = cli_load_model(model_dir, 1, 1, NULL, &m);
    if (st != TD_OK) return cli_fail("bench", st);
    double load_s = cli_now() - t0;
    const td_tokenizer *tok = td_model_tokenizer(m);
    int32_t im_start = tok ? td_token_lookup(tok, "<|im_start|>") : -1, im_end = tok ? td_token_lookup(tok, "<|im_end|>") : -1;
    int32_t V = td_model_n_vocab(m), span = V < 1000 ? V : 1000, lo = V > 2000 ? 1000 : 0;
    td_gen_params gp = td_gen_default_params();
    gp.n_ctx = (int32_t)(hmax + (turn + 2) * (repeat * nh + 2) + 64);
    gp.cache_bytes = INT64_MAX;
    gp.max_sequences = 32;
    gp.max_running = 1;
    gp.n_threads = (int32_t)threads;
    gp.kv_f16 = kv_f16;
    gp.device = dv->device;
    gp.precision = dv->precision;
    td_gen *g = NULL, *g2 = NULL;
    int32_t *ids = malloc((size_t)(hmax + turn > 64 ? hmax + turn : 64) * sizeof *ids); /* 64: the warm-up turn */
    double ttft[MAX_H], pre[MAX_H] = {0}, hist_ms[MAX_H];
    int32_t reused[MAX_H] = {0};
    double *reps = malloc((size_t)repeat * sizeof *reps);
    int err = 0;
    if (!ids || !reps) {
        err = cli_error("bench", "out of memory");
        goto done;
    }
    if ((st = td_gen_new(m, &gp, &g)) != TD_OK) {
        err = cli_fail("bench", st);
        goto done;
    }
    fill(ids, 64, 99, lo, span, im_start, im_end); /* warm-up: page the weights in */
    run_turn("bench", g, ids, 64, NULL, &err, 1);
    td_gen_clear_cache(g);
    /* The conversations first (ascending H: each history is a prefix of the next, as in one long chat), each
     * left cached as a session by its first answer token. Then the timed turns, interleaved over H (repeat r of
     * every H before repeat r + 1), so that a change in the machine's load falls on every history length alike;
     * the re-prefill of each H from scratch (a second td_gen that keeps nothing) runs in the first round. */
    int32_t T = (int32_t)turn;
    double *all = malloc((size_t)(repeat * nh) * sizeof *all);
    if (!all) err = cli_error("bench", "out of memory");
    if (!err && (st = td_gen_new(m, &gp, &g2)) != TD_OK) err = cli_fail("bench", st);
    for (int i = 0; i < nh && !err; i++) {
        fill(ids, (int32_t)hist[i], 7, lo, span, im_start, im_end);
        hist_ms[i] = run_turn("bench", g, ids, (int32_t)hist[i], NULL, &err, 1);
    }
    for (long long r = 0; r < repeat && !err; r++)
        for (int i = 0; i < nh && !err; i++) {
            int32_t H = (int32_t)hist[i];
            fill(ids, H, 7, lo, span, im_start, im_end);
            fill(ids + H, T, 1000 + (uint64_t)(r * MAX_H + i), lo, span, -1, -1); /* a new turn every time */
            if (im_start >= 0) ids[H] = im_start;
            all[r * nh + i] = run_turn("bench", g, ids, H + T, &reused[i], &err, 1);
            if (r == 0 && !err) pre[i] = run_turn("bench", g2, ids, H + T, NULL, &err, 0);
        }
    for (int i = 0; i < nh && !err; i++) {
        for (long long r = 0; r < repeat; r++) reps[r] = all[r * nh + i];
        qsort(reps, (size_t)repeat, sizeof *reps, cmp_d);
        ttft[i] = reps[repeat / 2];
    }
    free(all);
    if (!err) {
        struct utsname u;
        uname(&u);
        double la[3] = {0, 0, 0};
        FILE *f = fopen("/proc/loadavg", "r");
        if (f) {
            if (fscanf(f, "%lf %lf %lf", &la[0], &la[1], &la[2]) != 3) la[0] = la[1] = la[2] = 0;
            fclose(f);
        }
        printf("{\"bench\": \"chat\", \"model\": \"%s\", \"arch\": \"%s\", \"hybrid\": %s, \"kernels\": \"%s\", "
               "\"kv\": \"%s\", \"device\": \"%s\", \"precision\": \"%s\", \"params\": %lld, \"threads\": %lld, "
               "\"turn\": %lld, \"repeat\": %lld, \"load_s\": %.4f, "
               "\"history\": [",
               model_dir, td_model_arch(m), td_model_is_hybrid(m) ? "true" : "false", td_cpu_kernels(),
               kv_f16 ? "f16" : "f32", dv->desc, cli_precision_name(dv->precision), (long long)td_model_n_params(m), threads,
               turn, repeat, load_s);
        for (int i = 0; i < nh; i++) printf("%s%lld", i ? ", " : "", hist[i]);
        printf("], \"ttft_ms\": [");
        for (int i = 0; i < nh; i++) printf("%s%.3f", i ? ", " : "", ttft[i]);
        printf("], \"reused_tokens\": [");
        for (int i = 0; i < nh; i++) printf("%s%d", i ? ", " : "", reused[i]);
        printf("], \"reprefill_ttft_ms\": [");
        for (int i = 0; i < nh; i++) printf("%s%.3f", i ? ", " : "", pre[i]);
        printf("], \"history_prefill_ms\": [");
        for (int i = 0; i < nh; i++) printf("%s%.3f", i ? ", " : "", hist_ms[i]);
        printf("], \"slope_ms_per_history_token\": %.6f, \"reprefill_slope_ms_per_token\": %.6f, "
               "\"load_average\": [%.2f, %.2f, %.2f], \"machine\": \"%s %s\"}\n",
               slope(hist, ttft, nh), slope(hist, pre, nh), la[0], la[1], la[2], u.machine, u.release);
    }
done:
    free(ids);
    free(reps);
    td_gen_free(g);
    td_gen_free(g2);
    td_model_free(m);
    return err ? 1 : 0;
}
