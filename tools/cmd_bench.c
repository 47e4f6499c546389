/* typedecide bench: measured speed as one JSON object (median and spread over repeats). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>

#include "cli.h"
#include "commands.h"

static const char usage_text[] =
    "usage: typedecide bench (prefill|decode) --model DIR [--tokens N] [--threads T] [--repeat R]\n"
    "\n"
    "Prints one JSON object: load time (config, mapped weights, tokenizer), and the median / min / max\n"
    "tokens per second over R repeats.\n"
    "  prefill   run N prompt tokens in one pass (default N = 512)\n"
    "  decode    generate N tokens one at a time after a 16-token prompt (default N = 128)\n"
    "\n"
    "  --model DIR    Hugging Face model directory (e.g. from typedecide synth)\n"
    "  --tokens N     tokens per measurement\n"
    "  --threads T    worker threads (default: all cores)\n"
    "  --repeat R     measurements (default 3; one warm-up run is not counted)\n";

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* One measurement; returns tokens per second or a negative value on error (message printed). */
static double run_once(td_model *m, const char *mode, int32_t n, int32_t threads) {
    int prefill = strcmp(mode, "prefill") == 0;
    int32_t prompt = prefill ? n : 16, V = td_model_n_vocab(m);
    td_ctx_params cp = td_ctx_default_params();
    cp.n_ctx = prompt + (prefill ? 0 : n) + 1;
    cp.n_batch = prompt;
    cp.n_threads = threads;
    td_ctx *ctx = NULL;
    td_batch *b = NULL;
    td_status st;
    double rate = -1;
    if ((st = td_ctx_new(m, &cp, &ctx)) != TD_OK || (st = td_batch_new(prompt, &b)) != TD_OK) {
        cli_fail("bench", st);
        goto done;
    }
    uint64_t s = 12345;
    for (int32_t i = 0; i < prompt; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        td_batch_add(b, (int32_t)((s >> 33) % (uint64_t)(V < 1000 ? V : 1000)), 0, i, i == prompt - 1);
    }
    double t0 = cli_now();
    if ((st = td_ctx_decode(ctx, b)) != TD_OK) {
        cli_fail("bench", st);
        goto done;
    }
    if (prefill) {
        rate = (double)n / (cli_now() - t0);
        goto done;
    }
    t0 = cli_now();
    for (int32_t i = 0; i < n; i++) {
        const float *lg = td_ctx_output(ctx, 0);
        int32_t best = 0;
        for (int32_t k = 1; k < V; k++)
            if (lg[k] > lg[best]) best = k;
        td_batch_clear(b);
        td_batch_add(b, best, 0, prompt + i, 1);
        if ((st = td_ctx_decode(ctx, b)) != TD_OK) {
            cli_fail("bench", st);
            goto done;
        }
    }
    rate = (double)n / (cli_now() - t0);
done:
    td_batch_free(b);
    td_ctx_free(ctx);
    return rate;
}

int cmd_bench(int argc, char **argv) {
    const char *model_dir = NULL, *tokens_s = NULL, *threads_s = NULL, *repeat_s = "3";
    const cli_opt opts[] = {{"model", 1, &model_dir, NULL}, {"tokens", 1, &tokens_s, NULL},
                            {"threads", 1, &threads_s, NULL}, {"repeat", 1, &repeat_s, NULL}, {NULL, 0, NULL, NULL}};
    const char *pos[1];
    int np = 0;
    int r = cli_parse(argc, argv, opts, "bench", pos, 1, &np);
    if (r == 1) {
        fputs(usage_text, stdout);
        return 0;
    }
    if (r) return r;
    if (np != 1 || (strcmp(pos[0], "prefill") != 0 && strcmp(pos[0], "decode") != 0))
        return cli_usage_error("bench", "say what to measure: prefill or decode");
    if (!model_dir) return cli_usage_error("bench", "--model is required");
    const char *mode = pos[0];
    long long n = strcmp(mode, "prefill") == 0 ? 512 : 128, threads = cli_default_threads(), repeat;
    if (tokens_s && cli_int(tokens_s, 1, 1 << 16, &n)) return cli_usage_error("bench", "--tokens must be in 1..65536");
    if (threads_s && cli_int(threads_s, 1, 1024, &threads)) return cli_usage_error("bench", "--threads must be in 1..1024");
    if (cli_int(repeat_s, 1, 1000, &repeat)) return cli_usage_error("bench", "--repeat must be in 1..1000");

    double t0 = cli_now();
    td_model *m;
    td_status st = cli_load_model(model_dir, 1, 1, &m); /* as a user would: with the tokenizer, if any */
    if (st != TD_OK) return cli_fail("bench", st);
    double load_s = cli_now() - t0;
    double *rates = malloc((size_t)repeat * sizeof *rates);
    if (!rates) {
        td_model_free(m);
        return cli_error("bench", "out of memory");
    }
    int rc = 0;
    if (run_once(m, mode, (int32_t)n, (int32_t)threads) < 0) rc = 1; /* warm-up: page in the weights */
    for (long long i = 0; i < repeat && rc == 0; i++) {
        rates[i] = run_once(m, mode, (int32_t)n, (int32_t)threads);
        if (rates[i] < 0) rc = 1;
    }
    if (rc == 0) {
        qsort(rates, (size_t)repeat, sizeof *rates, cmp_double);
        struct utsname u;
        uname(&u);
        printf("{\"bench\": \"%s\", \"model\": \"%s\", \"arch\": \"%s\", \"params\": %lld, \"tokens\": %lld, "
               "\"threads\": %lld, \"repeat\": %lld, \"load_s\": %.4f, \"tokens_per_s\": %.3f, "
               "\"tokens_per_s_min\": %.3f, \"tokens_per_s_max\": %.3f, \"machine\": \"%s %s\"}\n",
               mode, model_dir, td_model_arch(m), (long long)td_model_n_params(m), n, threads, repeat, load_s,
               rates[repeat / 2], rates[0], rates[repeat - 1], u.machine, u.release);
    }
    free(rates);
    td_model_free(m);
    return rc;
}
