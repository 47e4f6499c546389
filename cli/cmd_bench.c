/* typedecide bench: measured speed as one JSON object (median and spread over repeats). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>

#include "bench_chat.h"
#include "bench_serve.h"
#include "cli.h"
#include "commands.h"

static const char usage_text[] =
    "usage: typedecide bench (prefill|decode) --model M [--tokens N] [--threads T] [--repeat R] [--kv f32|f16]\n"
    "       typedecide bench decide --model M [--prefix 256] [--criteria 144] [--suffix 45] [--options 4]\n"
    "                               [--serial|--batch] [--evidences E [--verify]] [--cache-head] [--memory MB]\n"
    "                               [--threads T] [--repeat R] [--kv f32|f16]\n"
    "       typedecide bench chat --model M [--history 200,1000,3000] [--turn 30] [--threads T] [--repeat R]\n"
    "       typedecide bench serve --model M [--clients 8] [--tokens 64] [--duration S] (see bench serve --help)\n"
    "       (every mode also takes [--device cpu|cuda] [--precision fp32|bf16])\n"
    "\n"
    "Prints one JSON object: load time (config, mapped weights, tokenizer), and the median / min / max\n"
    "tokens per second over R repeats.\n"
    "  prefill   run N prompt tokens in one pass (default N = 512)\n"
    "  decode    N passes of one token each after a 16-token prompt (default N = 128), each with the whole\n"
    "            vocabulary's logits; the ids are drawn, not sampled (as llama-bench's tg: the forward pass alone)\n"
    "  decide    C criteria of S suffix tokens and K options over one P-token evidence prefix (random ids):\n"
    "            criteria per second and ms per criterion with the evidence's prefill shared among them;\n"
    "            prefix_ms (the evidence alone) and suffix_ms_per_criterion (a criterion's own cost over the\n"
    "            prefilled evidence, as llama-bench -p S -d P measures)\n"
    "            --cache-head: the evidence stays prefilled between calls (td_decide_params.cache_head), so\n"
    "            each timed call runs only its criteria: with --criteria 1, ms_per_criterion is one\n"
    "            criterion's whole latency over a prefilled evidence\n"
    "            --evidences E: E different evidences of ~P tokens (synthetic English words), each with the\n"
    "            same C criteria (a question of words, K one-word options, ~S suffix tokens), decided by one\n"
    "            td_decide_multi call (several evidences per forward pass, as the server's /v1/decide):\n"
    "            criteria_per_s over all E x C; each repeat on new evidences (their prefill counted) unless\n"
    "            --cache-head; the tokens actually run are reported (shared_tokens_per_criterion: suffix\n"
    "            tokens run once for criteria whose suffixes start alike). --verify then decides each evidence of\n"
    "            the last call alone (td_decide) and compares every probability and logit bit for bit\n"
    "            (verify_mismatched; exit 1 when any differs). host_tokenize_ms_per_call: the time the\n"
    "            call's prompts (E heads, E x C suffixes) take to tokenize, timed apart (part of ms_per_call)\n"
    "            --memory MB: the decider's memory budget (default 1024 on the CPU, a quarter of the GPU's free\n"
    "            memory with --device cuda): how many criteria fit a pass; memory_mb says the one used\n"
    "  chat      time to first token of a T-token user turn after H tokens of conversation (synthetic ChatML\n"
    "            turns of random ids), for each H of --history: with the conversation's KV reused (ttft_ms; a\n"
    "            new turn per repeat, median; the repeats interleave the H values so that a change of load hits\n"
    "            them alike) and the same turn re-prefilled from scratch (reprefill_ttft_ms, once per H), in the\n"
    "            same run; slope_ms_per_history_token and reprefill_slope_ms_per_token are their least-squares\n"
    "            slopes against H. load_average is the machine's at the end\n"
    "\n"
    "  --model M      Hugging Face model directory (e.g. from typedecide synth) or GGUF file\n"
    "  --tokens N     tokens per measurement\n"
    "  --threads T    worker threads (default: all cores)\n"
    "  --repeat R     measurements (default 3; one warm-up run is not counted)\n"
    "  --kv f32|f16   KV cache precision (default f32)\n"
    "  --device cpu|cuda  where to compute (default cpu; cuda: a build with -DTD_CUDA=ON and an NVIDIA GPU)\n"
    CLI_PRECISION_HELP
    "The kernels in use (TD_KERNELS=scalar|avx2|avx512vnni|avx512bf16|avx512r16|amx forces a set) are named\n"
    "in the output, with the thread pool's jobs per token (decode) or per pass (prefill); \"device\" is \"cpu\" or\n"
    "the GPU (its name and memory) and \"precision\" fp32 or bf16.\n";

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* One measurement; returns tokens per second or a negative value on error (message printed), and in *jobs the
 * thread pool's jobs during the measured part (td_ctx_pool_jobs). */
static double run_once(td_model *m, const char *mode, int32_t n, int32_t threads, int32_t kv_f16,
                       const bench_device *dv, int64_t *jobs) {
    int prefill = strcmp(mode, "prefill") == 0;
    int32_t prompt = prefill ? n : 16, V = td_model_n_vocab(m);
    td_ctx_params cp = td_ctx_default_params();
    cp.n_ctx = prompt + (prefill ? 0 : n) + 1;
    cp.n_batch = prompt;
    cp.n_threads = threads;
    cp.kv_f16 = kv_f16;
    cp.device = dv->device;
    cp.precision = dv->precision;
    td_ctx *ctx = NULL;
    td_batch *b = NULL;
    td_status st;
    double rate = -1;
    if ((st = td_ctx_new(m, &cp, &ctx)) != TD_OK || (st = td_batch_new(prompt, &b)) != TD_OK) {
        cli_fail("bench", st);
        goto done;
    }
    uint64_t s = 12345;
    for (int32_t i = 0; i < prompt; i++) td_batch_add(b, bench_draw_id(&s, V < 1000 ? V : 1000), 0, i, i == prompt - 1);
    double t0 = cli_now();
    int64_t j0 = td_ctx_pool_jobs(ctx);
    if ((st = td_ctx_decode(ctx, b)) != TD_OK) {
        cli_fail("bench", st);
        goto done;
    }
    if (prefill) {
        rate = (double)n / (cli_now() - t0);
        *jobs = td_ctx_pool_jobs(ctx) - j0;
        goto done;
    }
    t0 = cli_now();
    j0 = td_ctx_pool_jobs(ctx);
    for (int32_t i = 0; i < n; i++) { /* the next id drawn, not sampled: the forward pass alone, as llama-bench's tg */
        td_batch_clear(b);
        td_batch_add(b, bench_draw_id(&s, V), 0, prompt + i, 1);
        if ((st = td_ctx_decode(ctx, b)) != TD_OK) {
            cli_fail("bench", st);
            goto done;
        }
    }
    rate = (double)n / (cli_now() - t0);
    *jobs = td_ctx_pool_jobs(ctx) - j0;
done:
    td_batch_free(b);
    td_ctx_free(ctx);
    return rate;
}

/* One decide measurement: wall seconds for C criteria over one prefix. */
static double decide_once(td_decider *d, const int32_t *head, int32_t P, const int32_t *const *suf, const int32_t *ns,
                          const int32_t *no, int32_t C, td_decision *out) {
    double t0 = cli_now();
    td_status st = td_decide_ids(d, head, P, suf, ns, no, C, out);
    if (st != TD_OK) {
        cli_fail("bench", st);
        return -1;
    }
    return cli_now() - t0;
}

/* --evidences E: the words of the synthetic texts (ASCII: any prefix of their tokens detokenises to valid UTF-8) */
static const char *const bench_words[] = {
    "the",    "order",  "arrived", "late",   "and",     "customer", "asked",  "for",    "a",       "refund",
    "of",     "invoice", "was",    "charged", "twice",  "account",  "cannot", "log",    "in",      "since",
    "update", "app",    "crashes", "on",     "start",   "please",   "fix",    "this",   "soon",    "plan",
    "team",   "price",  "month",   "year",   "support", "reply",    "never",  "came",   "after",   "three",
    "days",   "waiting", "mail",   "phone",  "number",  "changed",  "address", "box",   "damaged", "item",
    "missing", "from",  "package", "again",  "thanks",  "best",     "regards", "would", "like",    "to",
    "know",   "why",    "it",      "is"};
#define BENCH_N_WORDS ((uint64_t)(sizeof bench_words / sizeof *bench_words))

/* A text of exactly n tokens (n >= 1) of seed's random words, as *text (td_free): words drawn, tokenised, the first n
 * ids detokenised. Returns TD_OK or the tokenizer's status. */
static td_status bench_text(const td_tokenizer *tok, uint64_t seed, int32_t n, char **text) {
    size_t cap = ((size_t)n + 8) * 16, at = 0; /* n + 8 words of at most 8 letters and a space */
    char *w = malloc(cap);
    if (!w) return TD_ERR_NOMEM;
    for (int32_t i = 0; i < n + 8; i++) {
        const char *s = bench_words[(uint64_t)bench_draw_id(&seed, (int32_t)BENCH_N_WORDS)];
        at += (size_t)snprintf(w + at, cap - at, "%s%s", i ? " " : "", s);
    }
    int32_t *ids = NULL;
    size_t n_ids = 0, len = 0;
    td_status st = td_tokenize(tok, w, at, 0, &ids, &n_ids);
    free(w);
    if (st == TD_OK) st = td_detokenize(tok, ids, n_ids < (size_t)n ? n_ids : (size_t)n, text, &len);
    td_free(ids);
    return st;
}

/* --evidences E: E evidences of ~P tokens, each with the same C criteria (a question of words and K one-word
 * options, ~S suffix tokens in all), decided by td_decide_multi as one call; each repeat on new evidences (their
 * prefill counted) unless --cache-head (the same evidences, found prefilled). */
static int bench_decide_multi(td_model *m, td_decider *d, const char *model_dir, long long threads, long long repeat,
                              long long E, long long P, long long C, long long S, long long K, int cache_head,
                              int verify, int32_t kv_f16, const bench_device *dv, double load_s, long long memory_mb) {
    const td_tokenizer *tok = td_model_tokenizer(m);
    int rc = 1;
    td_status st = TD_OK;
    char **texts = calloc((size_t)E * (size_t)(repeat + 1), sizeof *texts);
    char **questions = calloc((size_t)C, sizeof *questions), **cids = calloc((size_t)C, sizeof *cids);
    const char *oids[TD_DECIDE_MAX_OPTIONS], *odesc[TD_DECIDE_MAX_OPTIONS];
    char oid_buf[TD_DECIDE_MAX_OPTIONS][24];
    td_criterion *crit = calloc((size_t)C, sizeof *crit);
    td_decision *out = calloc((size_t)(E * C), sizeof *out);
    td_decide_group *g = calloc((size_t)E, sizeof *g);
    double *secs = calloc((size_t)repeat, sizeof *secs);
    long long head_tokens = 0, suffix_tokens = 0, shared_tokens = 0, forwards = 0, cached = 0;
    if (!texts || !questions || !cids || !crit || !out || !g || !secs) {
        rc = cli_error("bench", "out of memory");
        goto done;
    }
    for (long long k = 0; k < K; k++) {
        snprintf(oid_buf[k], sizeof oid_buf[k], "o%lld", k);
        oids[k] = oid_buf[k];
        odesc[k] = bench_words[(k * 7 + 3) % (long long)BENCH_N_WORDS];
    }
    /* each question's length in tokens so that its rendered suffix ("\nCriterion: {question}\nOptions:\nA. {word}\n
     * ... Answer:", td_decide's) has ~S tokens: a few corrections of the count (words can merge across the joins) */
    for (long long c = 0; c < C; c++) {
        char idb[24];
        snprintf(idb, sizeof idb, "c%lld", c);
        if (!(cids[c] = strdup(idb))) {
            st = TD_ERR_NOMEM;
            goto fail;
        }
        int32_t q = (int32_t)S;
        for (int tries = 0; tries < 6; tries++) {
            td_free(questions[c]);
            questions[c] = NULL;
            if ((st = bench_text(tok, 1000003ull * (uint64_t)(c + 1), q, &questions[c])) != TD_OK) goto fail;
            size_t cap = strlen(questions[c]) + 64 + (size_t)K * 16, n;
            char *buf = malloc(cap);
            if (!buf) {
                st = TD_ERR_NOMEM;
                goto fail;
            }
            n = (size_t)snprintf(buf, cap, "\nCriterion: %s\nOptions:\n", questions[c]);
            for (long long k = 0; k < K; k++) n += (size_t)snprintf(buf + n, cap - n, "%c. %s\n", (char)('A' + k), odesc[k]);
            n += (size_t)snprintf(buf + n, cap - n, "Answer:");
            int32_t *ids = NULL;
            size_t n_ids = 0;
            st = td_tokenize(tok, buf, n, 0, &ids, &n_ids);
            free(buf);
            td_free(ids);
            if (st != TD_OK) goto fail;
            int32_t next = q + (int32_t)S - (int32_t)n_ids;
            if (next < 1) next = 1;
            if (next == q) break;
            q = next;
        }
        crit[c] = (td_criterion){cids[c], questions[c], (int32_t)K, oids, odesc};
    }
    /* set 0: the warm-up's (and every repeat's with --cache-head); set r + 1: repeat r's */
    for (long long i = 0; i < E * (cache_head ? 1 : repeat + 1); i++)
        if ((st = bench_text(tok, 7919ull * (uint64_t)(i + 1), (int32_t)P, &texts[i])) != TD_OK) goto fail;
    for (long long r = -1; r < repeat; r++) {
        long long set = cache_head || r < 0 ? 0 : r + 1;
        for (long long e = 0; e < E; e++) {
            memset(&g[e], 0, sizeof g[e]);
            g[e].evidence = texts[set * E + e];
            g[e].len = strlen(texts[set * E + e]);
            g[e].criteria = crit;
            g[e].n = (int32_t)C;
            g[e].out = out + e * C;
        }
        td_decide_stats before = td_decider_stats(d);
        double t0 = cli_now();
        if ((st = td_decide_multi(d, g, (int32_t)E)) != TD_OK) goto fail;
        double t = cli_now() - t0;
        for (long long e = 0; e < E; e++)
            if (g[e].status != TD_OK) {
                rc = cli_error("bench", "evidence %lld: %s", e, g[e].error);
                goto done;
            }
        if (r < 0) continue;
        secs[r] = t;
        td_decide_stats after = td_decider_stats(d);
        forwards += after.forwards - before.forwards;
        shared_tokens += after.shared_tokens - before.shared_tokens;
        for (long long e = 0; e < E; e++) {
            head_tokens += g[e].prefill_tokens;
            cached += g[e].head_cached;
            for (long long c = 0; c < C; c++) suffix_tokens += out[e * C + c].suffix_tokens;
        }
    }
    /* --verify: each evidence of the last timed call decided alone (td_decide), every probability and logit
     * compared bit for bit with the batched call's */
    long long verified = 0, mismatched = 0;
    double max_diff = 0;
    if (verify) {
        td_decision *alone = calloc((size_t)C, sizeof *alone);
        if (!alone) {
            rc = cli_error("bench", "out of memory");
            goto done;
        }
        for (long long e = 0; e < E && st == TD_OK; e++) {
            if ((st = td_decide(d, g[e].evidence, g[e].len, crit, (int32_t)C, alone)) != TD_OK) break;
            for (long long c = 0; c < C; c++) {
                const td_decision *a = &alone[c], *b = &out[e * C + c];
                int same = a->n_options == b->n_options;
                for (int32_t k = 0; same && k < a->n_options; k++) {
                    double dd = a->probs[k] > b->probs[k] ? a->probs[k] - b->probs[k] : b->probs[k] - a->probs[k];
                    if (dd > max_diff) max_diff = dd;
                    same = memcmp(&a->probs[k], &b->probs[k], sizeof a->probs[k]) == 0 &&
                           memcmp(&a->logits[k], &b->logits[k], sizeof a->logits[k]) == 0;
                }
                mismatched += !same;
                verified++;
            }
        }
        free(alone);
        if (st != TD_OK) goto fail;
    }
    /* the host's text work per call, timed apart: the prompts td_decide_multi renders and tokenizes (E heads:
     * instruction + "\nEvidence:\n" + evidence; E x C suffixes), tokenized here the same way, median of 3 */
    double tok_ms[3];
    for (int r = 0; r < 3 && st == TD_OK; r++) {
        double t0 = cli_now();
        for (long long e = 0; e < E && st == TD_OK; e++) {
            const char *ins = td_decide_default_instruction();
            size_t cap = strlen(ins) + g[e].len + 16, n;
            char *h = malloc(cap);
            if (!h) {
                st = TD_ERR_NOMEM;
                break;
            }
            n = (size_t)snprintf(h, cap, "%s\nEvidence:\n%s", ins, g[e].evidence);
            int32_t *ids = NULL;
            size_t n_ids = 0;
            st = td_tokenize(tok, h, n, 0, &ids, &n_ids);
            free(h);
            td_free(ids);
            for (long long c = 0; c < C && st == TD_OK; c++) {
                size_t qcap = strlen(questions[c]) + 64 + (size_t)K * 16, qn;
                char *q = malloc(qcap);
                if (!q) {
                    st = TD_ERR_NOMEM;
                    break;
                }
                qn = (size_t)snprintf(q, qcap, "\nCriterion: %s\nOptions:", questions[c]);
                for (long long k = 0; k < K; k++) qn += (size_t)snprintf(q + qn, qcap - qn, "\n%c. %s", (char)('A' + k), odesc[k]);
                qn += (size_t)snprintf(q + qn, qcap - qn, "\nAnswer:");
                ids = NULL;
                st = td_tokenize(tok, q, qn, 0, &ids, &n_ids);
                free(q);
                td_free(ids);
            }
        }
        tok_ms[r] = 1e3 * (cli_now() - t0);
    }
    if (st != TD_OK) goto fail;
    qsort(tok_ms, 3, sizeof *tok_ms, cmp_double);
    qsort(secs, (size_t)repeat, sizeof *secs, cmp_double);
    double med = secs[repeat / 2], n_crit = (double)(E * C);
    printf("{\"bench\": \"decide\", \"mode\": \"multi\", \"model\": \"%s\", \"arch\": \"%s\", \"kernels\": \"%s\", "
           "\"kv\": \"%s\", \"device\": \"%s\", \"precision\": \"%s\", \"evidences\": %lld, \"prefix\": %lld, "
           "\"criteria\": %lld, \"suffix\": %lld, \"options\": %lld, \"threads\": %lld, \"repeat\": %lld, "
           "\"memory_mb\": %lld, \"cache_head\": %s, \"load_s\": %.4f, \"criteria_per_s\": %.3f, "
           "\"criteria_per_s_min\": %.3f, \"criteria_per_s_max\": %.3f, \"ms_per_call\": %.3f, "
           "\"ms_per_criterion\": %.4f, \"prefill_tokens_per_evidence\": %.1f, \"heads_found_prefilled\": %.1f, "
           "\"suffix_tokens_per_criterion\": %.2f, \"shared_tokens_per_criterion\": %.2f, "
           "\"forwards_per_call\": %.2f, \"verified_criteria\": %lld, "
           "\"verify_mismatched\": %lld, \"verify_max_abs_prob_diff\": %.9g, \"host_tokenize_ms_per_call\": %.3f}\n",
           model_dir, td_model_arch(m), td_model_kernels(m), kv_f16 ? "f16" : "f32", dv->desc,
           cli_precision_name(dv->precision), E, P, C, S, K, threads, repeat, memory_mb, cache_head ? "true" : "false",
           load_s, n_crit / med, n_crit / secs[repeat - 1], n_crit / secs[0], 1e3 * med, 1e3 * med / n_crit,
           (double)head_tokens / (double)(E * repeat), (double)cached / (double)repeat,
           (double)suffix_tokens / (n_crit * (double)repeat), (double)shared_tokens / (n_crit * (double)repeat),
           (double)forwards / (double)repeat, verified, mismatched,
           max_diff, tok_ms[1]);
    rc = mismatched ? cli_error("bench", "--verify: %lld of %lld criteria differ from the same evidence decided alone",
                                mismatched, verified)
                    : 0;
    goto done;
fail:
    rc = cli_fail("bench", st);
done:
    for (long long i = 0; texts && i < E * (repeat + 1); i++) td_free(texts[i]);
    for (long long c = 0; questions && c < C; c++) td_free(questions[c]);
    for (long long c = 0; cids && c < C; c++) free(cids[c]);
    free(texts), free(questions), free(cids), free(crit), free(out), free(g), free(secs);
    return rc;
}

static int bench_decide(const char *model_dir, long long threads, long long repeat, const char *prefix_s,
                        const char *crit_s, const char *suffix_s, const char *opts_s, const char *evid_s,
                        const char *mem_s, int serial, int cache_head, int verify, int32_t kv_f16,
                        const bench_device *dv) {
    long long P = 256, C = 144, S = 45, K = 4, E = 1, M = 0;
    if ((prefix_s && cli_int(prefix_s, 0, 1 << 20, &P)) || (crit_s && cli_int(crit_s, 1, 1 << 20, &C)) ||
        (suffix_s && cli_int(suffix_s, 1, 1 << 16, &S)) || (opts_s && cli_int(opts_s, 1, TD_DECIDE_MAX_OPTIONS, &K)))
        return cli_usage_error("bench", "--prefix, --criteria, --suffix and --options take positive integers");
    if (evid_s && cli_int(evid_s, 1, 4096, &E)) return cli_usage_error("bench", "--evidences must be in 1..4096");
    if (mem_s && cli_int(mem_s, 1, 1 << 24, &M)) return cli_usage_error("bench", "--memory must be a size in MB in 1..16777216");
    if (evid_s && serial) return cli_usage_error("bench", "--evidences decides in batches: it does not take --serial");
    if (verify && !evid_s) return cli_usage_error("bench", "--verify checks --evidences: give --evidences E");
    if (evid_s && P < 1) return cli_usage_error("bench", "--evidences needs --prefix of at least 1 token");
    if (K < 2 && evid_s) return cli_usage_error("bench", "--evidences needs --options of at least 2");
    td_model *m;
    double t0 = cli_now();
    td_status st = cli_load_model(model_dir, 1, 1, NULL, &m);
    if (st != TD_OK) return cli_fail("bench", st);
    double load_s = cli_now() - t0;
    td_decide_params p = td_decide_default_params();
    p.mode = serial ? TD_DECIDE_SERIAL : TD_DECIDE_BATCH;
    p.n_threads = (int32_t)threads;
    p.kv_f16 = kv_f16;
    p.device = dv->device;
    p.precision = dv->precision;
    p.cache_head = cache_head;
    if (M) p.memory_mb = M;
    td_decider *d = NULL;
    if ((st = td_decider_new(m, &p, &d)) != TD_OK) {
        td_model_free(m);
        return cli_fail("bench", st);
    }
    if (evid_s) {
        int mrc = bench_decide_multi(m, d, model_dir, threads, repeat, E, P, C, S, K, cache_head, verify, kv_f16, dv, load_s,
                                     (long long)td_decider_stats(d).memory_mb);
        td_decider_free(d);
        td_model_free(m);
        return mrc;
    }
    int32_t V = td_model_n_vocab(m), n_rand = V < 100000 ? V : 100000;
    int32_t *head = malloc((size_t)(P ? P : 1) * sizeof *head), *ids = malloc((size_t)(C * S) * sizeof *ids);
    int32_t **suf = malloc((size_t)C * sizeof *suf), *ns = malloc((size_t)C * sizeof *ns), *no = malloc((size_t)C * sizeof *no);
    td_decision *out = malloc((size_t)C * sizeof *out);
    double *secs = malloc((size_t)repeat * sizeof *secs);
    uint64_t s = 42;
    for (long long i = 0; i < P; i++) head[i] = (int32_t)((s = s * 6364136223846793005ull + 1) >> 33) % n_rand;
    for (long long c = 0; c < C; c++) {
        suf[c] = ids + c * S;
        ns[c] = (int32_t)S;
        no[c] = (int32_t)K;
        for (long long j = 0; j < S; j++) suf[c][j] = (int32_t)((s = s * 6364136223846793005ull + 1) >> 33) % n_rand;
    }
    double *head_ms = malloc((size_t)repeat * sizeof *head_ms), *crit_ms = malloc((size_t)repeat * sizeof *crit_ms);
    int rc = decide_once(d, head, (int32_t)P, (const int32_t *const *)suf, ns, no, (int32_t)C, out) < 0; /* warm-up */
    for (long long r = 0; r < repeat && !rc; r++) {
        td_decide_stats before = td_decider_stats(d);
        secs[r] = decide_once(d, head, (int32_t)P, (const int32_t *const *)suf, ns, no, (int32_t)C, out);
        td_decide_stats after = td_decider_stats(d);
        head_ms[r] = after.head_ms - before.head_ms;
        crit_ms[r] = (after.suffix_ms - before.suffix_ms) / (double)C;
        rc = secs[r] < 0;
    }
    if (!rc) {
        qsort(secs, (size_t)repeat, sizeof *secs, cmp_double);
        qsort(head_ms, (size_t)repeat, sizeof *head_ms, cmp_double);
        qsort(crit_ms, (size_t)repeat, sizeof *crit_ms, cmp_double);
        double med = secs[repeat / 2];
        td_decide_stats ds = td_decider_stats(d);
        printf("{\"bench\": \"decide\", \"mode\": \"%s\", \"model\": \"%s\", \"arch\": \"%s\", \"kernels\": \"%s\", "
               "\"kv\": \"%s\", \"device\": \"%s\", \"precision\": \"%s\", \"prefix\": %lld, "
               "\"criteria\": %lld, \"suffix\": %lld, \"options\": %lld, \"threads\": %lld, \"repeat\": %lld, "
               "\"load_s\": %.4f, \"criteria_per_s\": %.3f, \"ms_per_criterion\": %.3f, \"ms_per_criterion_min\": %.3f, "
               "\"ms_per_criterion_max\": %.3f, \"prefix_ms\": %.3f, \"suffix_ms_per_criterion\": %.3f, "
               "\"suffix_ms_per_criterion_min\": %.3f, \"suffix_ms_per_criterion_max\": %.3f, "
               "\"forwards_per_run\": %lld, \"head_macs_per_criterion\": %lld, \"memory_mb\": %lld, "
               "\"cache_head\": %s, \"heads_found_prefilled\": %lld}\n",
               serial ? "serial" : "batch", model_dir, td_model_arch(m), td_model_kernels(m), kv_f16 ? "f16" : "f32",
               dv->desc, cli_precision_name(dv->precision), P, C,
               S, K, threads, repeat, load_s,
               (double)C / med, 1e3 * med / (double)C, 1e3 * secs[0] / (double)C, 1e3 * secs[repeat - 1] / (double)C,
               head_ms[repeat / 2], crit_ms[repeat / 2], crit_ms[0], crit_ms[repeat - 1],
               (long long)(ds.forwards / (repeat + 1)), (long long)(ds.head_macs / (ds.criteria ? ds.criteria : 1)),
               (long long)ds.memory_mb, cache_head ? "true" : "false", (long long)ds.head_cached);
    }
    free(head), free(ids), free(suf), free(ns), free(no), free(out), free(secs), free(head_ms), free(crit_ms);
    td_decider_free(d);
    td_model_free(m);
    return rc;
}

int cmd_bench(int argc, char **argv) {
    if (argc >= 2 && strcmp(argv[1], "serve") == 0) return bench_serve(argc - 1, argv + 1); /* options of its own */
    const char *model_dir = NULL, *tokens_s = NULL, *threads_s = NULL, *repeat_s = "3", *prefix_s = NULL,
               *crit_s = NULL, *suffix_s = NULL, *opts_s = NULL, *kv_s = NULL, *hist_s = NULL, *turn_s = NULL,
               *device_s = NULL, *precision_s = NULL, *evid_s = NULL, *mem_s = NULL;
    int serial = 0, batch = 0, cache_head = 0, verify = 0;
    int32_t kv_f16 = 0;
    const cli_opt opts[] = {{"model", 1, &model_dir, NULL},   {"tokens", 1, &tokens_s, NULL},
                            {"threads", 1, &threads_s, NULL}, {"repeat", 1, &repeat_s, NULL},
                            {"prefix", 1, &prefix_s, NULL},   {"criteria", 1, &crit_s, NULL},
                            {"suffix", 1, &suffix_s, NULL},   {"options", 1, &opts_s, NULL},
                            {"serial", 0, NULL, &serial},     {"batch", 0, NULL, &batch},
                            {"kv", 1, &kv_s, NULL},           {"history", 1, &hist_s, NULL},
                            {"turn", 1, &turn_s, NULL},       {"device", 1, &device_s, NULL},
                            {"precision", 1, &precision_s, NULL}, {"evidences", 1, &evid_s, NULL},
                            {"memory", 1, &mem_s, NULL},      {"cache-head", 0, NULL, &cache_head},
                            {"verify", 0, NULL, &verify},     {NULL, 0, NULL, NULL}};
    const char *pos[1];
    int np = 0;
    int r = cli_parse(argc, argv, opts, "bench", pos, 1, &np);
    if (r == 1) {
        fputs(usage_text, stdout);
        return 0;
    }
    if (r) return r;
    if (np != 1 || (strcmp(pos[0], "prefill") != 0 && strcmp(pos[0], "decode") != 0 && strcmp(pos[0], "decide") != 0 &&
                    strcmp(pos[0], "chat") != 0))
        return cli_usage_error("bench", "say what to measure: prefill, decode, decide or chat");
    if (!model_dir) return cli_usage_error("bench", "--model is required");
    const char *mode = pos[0];
    long long n = strcmp(mode, "prefill") == 0 ? 512 : 128, threads = cli_default_threads(), repeat;
    if (tokens_s && cli_int(tokens_s, 1, 1 << 16, &n)) return cli_usage_error("bench", "--tokens must be in 1..65536");
    if (threads_s && cli_int(threads_s, 1, 1024, &threads)) return cli_usage_error("bench", "--threads must be in 1..1024");
    if (cli_int(repeat_s, 1, 1000, &repeat)) return cli_usage_error("bench", "--repeat must be in 1..1000");
    if (serial && batch) return cli_usage_error("bench", "choose one of --serial and --batch");
    if (cli_kv("bench", kv_s, &kv_f16)) return 2;
    bench_device dv;
    if ((r = cli_device("bench", device_s, precision_s, &dv.device, &dv.precision, dv.desc, sizeof dv.desc)) != 0) return r;
    if (strcmp(mode, "chat") == 0) return bench_chat(model_dir, threads, repeat, hist_s, turn_s, kv_f16, &dv);
    if (strcmp(mode, "decide") == 0)
        return bench_decide(model_dir, threads, repeat, prefix_s, crit_s, suffix_s, opts_s, evid_s, mem_s, serial,
                            cache_head, verify, kv_f16, &dv);
    if (evid_s || mem_s || cache_head || verify)
        return cli_usage_error("bench", "--evidences, --memory, --cache-head and --verify are options of bench decide");

    double t0 = cli_now();
    td_model *m;
    td_status st = cli_load_model(model_dir, 1, 1, NULL, &m); /* as a user would: with the tokenizer, if any */
    if (st != TD_OK) return cli_fail("bench", st);
    double load_s = cli_now() - t0;
    double *rates = malloc((size_t)repeat * sizeof *rates);
    if (!rates) {
        td_model_free(m);
        return cli_error("bench", "out of memory");
    }
    int rc = 0;
    int64_t jobs = 0;
    /* warm-up: page in the weights */
    if (run_once(m, mode, (int32_t)n, (int32_t)threads, kv_f16, &dv, &jobs) < 0) rc = 1;
    for (long long i = 0; i < repeat && rc == 0; i++) {
        rates[i] = run_once(m, mode, (int32_t)n, (int32_t)threads, kv_f16, &dv, &jobs);
        if (rates[i] < 0) rc = 1;
    }
    if (rc == 0) {
        qsort(rates, (size_t)repeat, sizeof *rates, cmp_double);
        struct utsname u;
        uname(&u);
        printf("{\"bench\": \"%s\", \"model\": \"%s\", \"arch\": \"%s\", \"kernels\": \"%s\", \"kv\": \"%s\", "
               "\"device\": \"%s\", \"precision\": \"%s\", \"params\": %lld, \"tokens\": %lld, "
               "\"threads\": %lld, \"repeat\": %lld, \"load_s\": %.4f, \"tokens_per_s\": %.3f, "
               "\"tokens_per_s_min\": %.3f, \"tokens_per_s_max\": %.3f, \"%s\": %.2f, \"machine\": \"%s %s\"}\n",
               mode, model_dir, td_model_arch(m), td_model_kernels(m), kv_f16 ? "f16" : "f32", dv.desc,
               cli_precision_name(dv.precision), (long long)td_model_n_params(m), n, threads, repeat, load_s, rates[repeat / 2],
               rates[0], rates[repeat - 1], strcmp(mode, "prefill") == 0 ? "pool_jobs_per_pass" : "pool_jobs_per_token",
               strcmp(mode, "prefill") == 0 ? (double)jobs : (double)jobs / (double)n, u.machine, u.release);
    }
    free(rates);
    td_model_free(m);
    return rc;
}
