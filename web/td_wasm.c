/* The WebAssembly module's entry points for JavaScript (web/typedecide.mjs and the tests): thin wrappers over the
 * public API (include/typedecide.h) that take and return plain C strings, so that the JS side passes UTF-8 and JSON
 * and never lays out a C struct. Every string returned is new (tdw_free); NULL means failure, and tdw_error() says
 * why (td_last_error()). The engine is the C library itself: nothing here computes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "typedecide.h"
#include "util/alloc.h"
#include "util/error.h"

#define TDW_API __attribute__((used, visibility("default")))

TDW_API const char *tdw_error(void);
TDW_API int tdw_threaded(void);
TDW_API int tdw_setenv(const char *name, const char *value);
TDW_API void tdw_free(void *p);
TDW_API const char *tdw_version(void);
TDW_API td_model *tdw_model_load(const char *path);
TDW_API void tdw_model_free(td_model *m);
TDW_API const char *tdw_model_kernels(const td_model *m);
TDW_API const char *tdw_model_arch(const td_model *m);
TDW_API td_tokenizer *tdw_tokenizer_load(const char *path);
TDW_API void tdw_tokenizer_free(td_tokenizer *tok);
TDW_API const td_tokenizer *tdw_model_tokenizer(const td_model *m);
TDW_API char *tdw_tokenize(const td_tokenizer *tok, const char *text, size_t len, int parse_special);
TDW_API char *tdw_generate(const td_model *m, const char *prompt, int max_tokens, float temperature, double seed,
                           int ignore_eos, int n_threads);
TDW_API char *tdw_bench(const td_model *m, int n_prefill, int n_decode, int n_threads);
TDW_API char *tdw_decide(const td_model *m, const char *evidence, const char *criteria_jsonl, int mode,
                         int n_threads, int logits);

const char *tdw_error(void) { return td_last_error(); }

/* 1 in the threaded module (typedecide-mt: -pthread, the engine's pool on Web Workers over shared memory), 0 in the
 * one-thread module, where every n_threads below is taken as 1 (the pool would find pthread_create failing and run
 * on the caller alone: the same thing, said here rather than found). Results never depend on n_threads. */
int tdw_threaded(void) {
#ifdef __EMSCRIPTEN_PTHREADS__
    return 1;
#else
    return 0;
#endif
}
static int threads_of(int n_threads) { return n_threads > 1 && tdw_threaded() ? n_threads : 1; }
/* The module's environment, read where the native library reads the process's (TD_KERNELS when a model loads):
 * value NULL removes the name. 0 on success. */
int tdw_setenv(const char *name, const char *value) { return value ? setenv(name, value, 1) : unsetenv(name); }
void tdw_free(void *p) { td_free(p); }
const char *tdw_version(void) { return td_version(); }

td_model *tdw_model_load(const char *path) {
    td_model_params p = td_model_default_params();
    td_model *m = NULL;
    return td_model_load(path, &p, &m) == TD_OK ? m : NULL;
}
void tdw_model_free(td_model *m) { td_model_free(m); }
const char *tdw_model_kernels(const td_model *m) { return td_model_kernels(m); }
const char *tdw_model_arch(const td_model *m) { return td_model_arch(m); }
const td_tokenizer *tdw_model_tokenizer(const td_model *m) { return td_model_tokenizer(m); }

/* A tokenizer.json, or the tokenizer of a GGUF file (by its name's ending), as `typedecide tokenize --tokenizer`. */
td_tokenizer *tdw_tokenizer_load(const char *path) {
    size_t n = strlen(path);
    td_tokenizer *tok = NULL;
    td_status st = n >= 5 && strcmp(path + n - 5, ".gguf") == 0 ? td_tokenizer_load_gguf(path, 0, &tok)
                                                                 : td_tokenizer_load(path, &tok);
    return st == TD_OK ? tok : NULL;
}
void tdw_tokenizer_free(td_tokenizer *tok) { td_tokenizer_free(tok); }

/* The ids of len bytes of text (which may hold NUL bytes) as one JSON array, "[1,2,3]". */
char *tdw_tokenize(const td_tokenizer *tok, const char *text, size_t len, int parse_special) {
    int32_t *ids = NULL;
    size_t n = 0;
    if (td_tokenize(tok, text, len, parse_special ? TD_TOKENIZE_PARSE_SPECIAL : 0, &ids, &n) != TD_OK)
        return NULL;
    char *out = td_malloc(n * 12 + 3);
    if (out) {
        size_t at = 0;
        out[at++] = '[';
        for (size_t i = 0; i < n; i++) {
            int32_t v = ids[i];
            char digits[12];
            int k = 0;
            if (i) out[at++] = ',';
            if (v < 0) out[at++] = '-', v = -v;
            do digits[k++] = (char)('0' + v % 10), v /= 10; while (v);
            while (k) out[at++] = digits[--k];
        }
        out[at++] = ']';
        out[at] = 0;
    }
    td_free(ids);
    return out;
}

/* Decides every criterion of a criteria JSONL text (the format of `typedecide decide --criteria`) over `evidence`
 * (a row's own "evidence" takes its place, as in the CLI: rows with one evidence text share one call) and returns
 * one JSON line per criterion, td_decision_json's, without "ms". mode: td_decide_mode. */
char *tdw_decide(const td_model *m, const char *evidence, const char *criteria_jsonl, int mode, int n_threads,
                 int logits) {
    td_rows *rs = NULL;
    td_decider *d = NULL;
    td_decide_params dp = td_decide_default_params();
    dp.mode = (td_decide_mode)mode;
    dp.n_threads = threads_of(n_threads);
    if (td_rows_parse(criteria_jsonl, strlen(criteria_jsonl), "criteria", 0, &rs) != TD_OK) return NULL;
    if (td_decider_new(m, &dp, &d) != TD_OK) {
        td_rows_free(rs);
        return NULL;
    }
    int32_t n = td_rows_count(rs);
    size_t cnt = (size_t)(n ? n : 1);
    td_decision *dec = td_calloc(cnt, sizeof *dec), *gdec = td_calloc(cnt, sizeof *gdec);
    td_criterion *cs = td_calloc(cnt, sizeof *cs);
    const char **texts = td_calloc(cnt, sizeof *texts);
    size_t *lens = td_calloc(cnt, sizeof *lens);
    int32_t *group = td_calloc(cnt, sizeof *group), *members = td_calloc(cnt, sizeof *members), n_groups = 0;
    char *out = NULL;
    size_t out_len = 0;
    td_status st = dec && gdec && cs && texts && lens && group && members ? TD_OK : td_fail_nomem("the decisions");
    for (int32_t i = 0; st == TD_OK && i < n; i++) {
        const td_row *row = td_rows_get(rs, i);
        texts[i] = row->evidence ? row->evidence : evidence;
        lens[i] = row->evidence ? row->evidence_len : strlen(evidence);
    }
    if (st == TD_OK) st = td_evidence_groups(texts, lens, n, group, members, &n_groups);
    for (int32_t at = 0, g = 0; st == TD_OK && at < n; g++) {
        const int32_t *rows = members + at;
        int32_t k = 0;
        while (at < n && group[members[at]] == g) cs[k++] = td_rows_get(rs, members[at++])->criterion;
        st = td_decide(d, texts[rows[0]], lens[rows[0]], cs, k, gdec);
        for (int32_t t = 0; st == TD_OK && t < k; t++) dec[rows[t]] = gdec[t];
    }
    unsigned flags = TD_DECISION_NO_MS | (logits ? TD_DECISION_LOGITS : 0u);
    for (int32_t i = 0; st == TD_OK && i < n; i++) {
        char *line = NULL;
        st = td_decision_json(&td_rows_get(rs, i)->criterion, &dec[i], td_decider_letters(d), flags, &line);
        if (st != TD_OK) break;
        size_t len = strlen(line);
        char *grown = td_realloc(out, out_len + len + 2);
        if (!grown) st = td_fail_nomem("the decisions' JSON");
        else {
            memcpy(grown + out_len, line, len);
            out_len += len;
            grown[out_len++] = '\n';
            grown[out_len] = 0;
            out = grown;
        }
        td_free(line);
    }
    if (st == TD_OK && !out) out = td_calloc(1, 1);
    if (st != TD_OK) td_free(out), out = NULL;
    td_free(dec), td_free(gdec), td_free(cs), td_free(texts), td_free(lens), td_free(group), td_free(members);
    td_decider_free(d);
    td_rows_free(rs);
    return out;
}

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* The forward pass alone, as `typedecide bench prefill|decode` measures it: n_prefill random ids in one pass (one
 * output), then n_decode passes of one token each with the whole vocabulary's logits. Returns
 * {"prefill_tokens", "prefill_ms", "decode_tokens", "decode_ms", "kernels", "threads", "pool_jobs"}: pool_jobs, the
 * jobs the context's pool handed to its worker threads (td_ctx_pool_jobs), is 0 unless threads really ran. */
char *tdw_bench(const td_model *m, int n_prefill, int n_decode, int n_threads) {
    td_ctx_params cp = td_ctx_default_params();
    cp.n_ctx = n_prefill + n_decode + 1;
    cp.n_batch = n_prefill > 1 ? n_prefill : 1;
    cp.n_threads = threads_of(n_threads);
    td_ctx *ctx = NULL;
    td_batch *b = NULL;
    char *out = NULL;
    if (td_ctx_new(m, &cp, &ctx) != TD_OK || td_batch_new(cp.n_batch, &b) != TD_OK) goto done;
    uint32_t r = 12345u;
    int32_t nv = td_model_n_vocab(m);
    for (int i = 0; i < n_prefill; i++) {
        r = r * 1664525u + 1013904223u;
        if (td_batch_add(b, (int32_t)((r >> 8) % (uint32_t)nv), 0, i, i == n_prefill - 1) != TD_OK) goto done;
    }
    double t0 = now_ms();
    if (td_ctx_decode(ctx, b) != TD_OK) goto done;
    double t1 = now_ms();
    for (int i = 0; i < n_decode; i++) {
        r = r * 1664525u + 1013904223u;
        td_batch_clear(b);
        if (td_batch_add(b, (int32_t)((r >> 8) % (uint32_t)nv), 0, n_prefill + i, 1) != TD_OK) goto done;
        if (td_ctx_decode(ctx, b) != TD_OK) goto done;
    }
    double t2 = now_ms();
    out = td_malloc(256);
    if (out)
        snprintf(out, 256, "{\"prefill_tokens\":%d,\"prefill_ms\":%.3f,\"decode_tokens\":%d,\"decode_ms\":%.3f,"
                 "\"kernels\":\"%s\",\"threads\":%d,\"pool_jobs\":%lld}", n_prefill, t1 - t0, n_decode, t2 - t1,
                 td_model_kernels(m), cp.n_threads, (long long)td_ctx_pool_jobs(ctx));
done:
    td_batch_free(b);
    td_ctx_free(ctx);
    return out;
}

/* Continues `prompt` (tokenised with added tokens split out) by up to max_tokens tokens with the model's sampling
 * defaults (generation_config.json; greedy without one), temperature overriding them when >= 0, seed when >= 0;
 * stops at the model's stop ids unless ignore_eos; n_threads as tdw_decide's. Returns {"prompt_ids", "ids", "text",
 * "finish"}. */
char *tdw_generate(const td_model *m, const char *prompt, int max_tokens, float temperature, double seed,
                   int ignore_eos, int n_threads) {
    const td_tokenizer *tok = td_model_tokenizer(m);
    int32_t *ids = NULL;
    size_t n = 0;
    td_gen *g = NULL;
    char *out = NULL, *text = NULL;
    size_t text_len = 0;
    json_t *res = json_object(), *jp = json_array(), *jids = json_array();
    if (!res || !jp || !jids) goto done;
    if (!tok) {
        td_fail(TD_ERR_STATE, "the model has no tokenizer");
        goto done;
    }
    if (td_tokenize(tok, prompt, strlen(prompt), TD_TOKENIZE_PARSE_SPECIAL, &ids, &n) != TD_OK) goto done;
    td_gen_params gp = td_gen_default_params();
    gp.cache_bytes = 256ll << 20;
    gp.n_threads = threads_of(n_threads);
    if (td_gen_new(m, &gp, &g) != TD_OK) goto done;
    td_gen_request rq = td_gen_default_request();
    rq.prompt = ids, rq.n_prompt = (int32_t)n, rq.max_tokens = max_tokens, rq.ignore_eos = ignore_eos;
    rq.sampler = td_model_sampler_defaults(m);
    if (temperature >= 0) rq.sampler.temperature = temperature;
    if (seed >= 0) rq.sampler.seed = (uint64_t)seed;
    int64_t id = 0;
    if (td_gen_submit(g, &rq, &id) != TD_OK) goto done;
    for (size_t i = 0; i < n; i++) json_array_append_new(jp, json_integer(ids[i]));
    const char *finish = NULL;
    for (int32_t active = 1; !finish;) {
        td_gen_event ev;
        if (!active) {
            td_fail(TD_ERR_STATE, "the request ended without its DONE event");
            goto done;
        }
        if (td_gen_step(g, &active) != TD_OK) goto done;
        while (td_gen_next_event(g, &ev)) {
            if (ev.kind == TD_GEN_EVENT_TOKEN) json_array_append_new(jids, json_integer(ev.token));
            if ((ev.kind == TD_GEN_EVENT_TOKEN || ev.kind == TD_GEN_EVENT_DONE) && ev.text_len) {
                char *grown = td_realloc(text, text_len + ev.text_len + 1);
                if (!grown) {
                    td_fail_nomem("the generated text");
                    goto done;
                }
                memcpy(grown + text_len, ev.text, ev.text_len);
                text = grown, text_len += ev.text_len;
            }
            if (ev.kind == TD_GEN_EVENT_DONE) {
                if (ev.finish == TD_GEN_FINISH_ERROR) {
                    td_fail(TD_ERR_STATE, "generation failed: %s", ev.error ? ev.error : "");
                    goto done;
                }
                finish = td_gen_finish_str(ev.finish);
            }
        }
    }
    json_object_set_new(res, "prompt_ids", jp), jp = NULL;
    json_object_set_new(res, "ids", jids), jids = NULL;
    json_object_set_new(res, "text", json_stringn(text ? text : "", text_len));
    json_object_set_new(res, "finish", json_string(finish));
    char *dumped = json_dumps(res, JSON_COMPACT);
    if (dumped) {
        size_t len = strlen(dumped);
        out = td_malloc(len + 1);
        if (out) memcpy(out, dumped, len + 1);
        free(dumped);
    }
    if (!out) td_fail_nomem("the generation's JSON");
done:
    json_decref(jp), json_decref(jids), json_decref(res);
    td_free(text);
    td_free(ids);
    td_gen_free(g);
    return out;
}
