/* The WebAssembly module's entry points for loading from memory and for streamed generation and chat (web/
 * typedecide.mjs: Typedecide.load, Model.generate({...}), Model.chat): thin wrappers over the public API
 * (td_model_load_buffer, td_gen_*, td_chat_tokenize) that take numbers and C strings and return JSON, as td_wasm.c's
 * do. JavaScript drives the loop: one tdw_gen_step per call, so that it streams each token as it comes, yields to its
 * event loop between steps (a cancel message can arrive) and never blocks a page for a whole answer. Every string
 * returned is new (tdw_free); NULL (or 0, -1) means failure and tdw_error() says why. Nothing here computes. */
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "typedecide.h"
#include "util/alloc.h"
#include "util/error.h"

#define TDW_API __attribute__((used, visibility("default")))

TDW_API void *tdw_buffer_new(size_t size);
TDW_API td_model *tdw_model_load_buffer(void *data, size_t size, const char *name);
TDW_API double tdw_memory_bytes(void);
TDW_API char *tdw_model_info(const td_model *m);
typedef struct tdw_gen {
    td_gen *g;
    const td_model *m;
} tdw_gen;
TDW_API tdw_gen *tdw_gen_new(const td_model *m, int n_ctx, int max_sequences, int n_threads);
TDW_API void tdw_gen_free(tdw_gen *w);
TDW_API int tdw_gen_n_ctx(const tdw_gen *w);
TDW_API double tdw_gen_submit(tdw_gen *w, const int32_t *ids, int n, int max_tokens, float temperature, double seed,
                              int ignore_eos);
TDW_API char *tdw_gen_step(tdw_gen *w);
TDW_API int tdw_gen_cancel(tdw_gen *w, double id);
TDW_API void tdw_gen_clear(tdw_gen *w);
TDW_API char *tdw_chat_tokenize(const td_model *m, const char *messages_json, int enable_thinking);

/* A buffer of size bytes for tdw_model_load_buffer (td_model_buffer_new), or NULL (memory could not grow). */
void *tdw_buffer_new(size_t size) {
    void *p = td_model_buffer_new(size);
    if (!p) td_fail(TD_ERR_NOMEM, "cannot allocate %zu bytes for the model", size);
    return p;
}

/* A GGUF image filled by JavaScript; the model takes the buffer (freed on failure too). */
td_model *tdw_model_load_buffer(void *data, size_t size, const char *name) {
    td_model *m = NULL;
    td_model_params p = td_model_default_params();
    return td_model_load_buffer(data, size, name, TD_MODEL_BUFFER_TAKE, &p, &m) == TD_OK ? m : NULL;
}

/* The module's linear memory in bytes (it only grows): the measure of what loading took. */
double tdw_memory_bytes(void) { return (double)__builtin_wasm_memory_size(0) * 65536.0; }

static char *dump(json_t *o) {
    char *out = NULL, *d = o ? json_dumps(o, JSON_COMPACT) : NULL;
    if (d) {
        size_t n = strlen(d);
        if ((out = td_malloc(n + 1))) memcpy(out, d, n + 1);
        free(d);
    }
    json_decref(o);
    if (!out) td_fail_nomem("a JSON result");
    return out;
}

/* {"arch", "kernels", "n_vocab", "n_ctx_train", "hybrid", "chat_family" (null without a template this library
 * renders), "can_generate", "name"} */
char *tdw_model_info(const td_model *m) {
    const char *fam = td_model_chat_family(m, NULL);
    json_t *o = json_pack("{s:s, s:s, s:I, s:I, s:b, s:s?, s:b, s:s}", "arch", td_model_arch(m), "kernels",
                          td_model_kernels(m), "n_vocab", (json_int_t)td_model_n_vocab(m), "n_ctx_train",
                          (json_int_t)td_model_n_ctx_train(m), "hybrid", td_model_is_hybrid(m), "chat_family", fam,
                          "can_generate", td_model_can_generate(m), "name", td_model_path(m));
    return dump(o);
}

/* A generator with n_ctx KV rows (all its sessions together) and max_sequences slots (running requests, cached
 * sessions, Qwen3.5's snapshots); one request runs at a time (the module has one caller), as `typedecide chat`. */
tdw_gen *tdw_gen_new(const td_model *m, int n_ctx, int max_sequences, int n_threads) {
    td_gen_params gp = td_gen_default_params();
    gp.n_ctx = n_ctx;
    gp.cache_bytes = INT64_MAX; /* n_ctx decides; TD_ERR_NOMEM when memory cannot grow to it */
    gp.max_sequences = max_sequences;
    gp.max_running = 1;
    gp.n_threads = n_threads > 0 ? n_threads : 1;
    tdw_gen *w = td_calloc(1, sizeof *w);
    if (!w) {
        td_fail_nomem("a generator");
        return NULL;
    }
    w->m = m;
    if (td_gen_new(m, &gp, &w->g) != TD_OK) {
        td_free(w);
        return NULL;
    }
    return w;
}
void tdw_gen_free(tdw_gen *w) {
    if (w) td_gen_free(w->g);
    td_free(w);
}
int tdw_gen_n_ctx(const tdw_gen *w) { return td_gen_n_ctx(w->g); }

/* Queues n prompt ids (copied) with the model's sampling defaults (generation_config.json; greedy without one),
 * temperature overriding them when >= 0 and seed when >= 0. Returns the request's id, or -1. */
double tdw_gen_submit(tdw_gen *w, const int32_t *ids, int n, int max_tokens, float temperature, double seed,
                      int ignore_eos) {
    td_gen_request rq = td_gen_default_request();
    rq.prompt = ids, rq.n_prompt = n, rq.max_tokens = max_tokens, rq.ignore_eos = ignore_eos;
    rq.sampler = td_model_sampler_defaults(w->m);
    if (temperature >= 0) rq.sampler.temperature = temperature;
    if (seed >= 0) rq.sampler.seed = (uint64_t)seed;
    int64_t id = 0;
    return td_gen_submit(w->g, &rq, &id) == TD_OK ? (double)id : -1;
}

/* One td_gen_step, then its events as {"active": N, "events": [...]}, each one of
 *   {"kind": "prompt", "id", "n_prompt", "n_reused", "ms_prefill"}
 *   {"kind": "token", "id", "token", "index", "text"}
 *   {"kind": "done", "id", "finish", "n_generated", "stop_id", "text", "error", "ms_queue", "ms_prefill",
 *    "ms_first_token", "ms_decode"}
 * (text: the UTF-8 released with the event, stop strings held back until they cannot match). NULL on failure. */
char *tdw_gen_step(tdw_gen *w) {
    int32_t active = 0;
    td_status st = td_gen_step(w->g, &active);
    json_t *evs = json_array(), *o = json_pack("{s:I}", "active", (json_int_t)active);
    td_gen_event ev;
    while (evs && td_gen_next_event(w->g, &ev)) {
        json_t *e = NULL;
        if (ev.kind == TD_GEN_EVENT_PROMPT)
            e = json_pack("{s:s, s:I, s:I, s:I, s:f}", "kind", "prompt", "id", (json_int_t)ev.request, "n_prompt",
                          (json_int_t)ev.n_prompt, "n_reused", (json_int_t)ev.n_reused, "ms_prefill", ev.ms_prefill);
        else if (ev.kind == TD_GEN_EVENT_TOKEN)
            e = json_pack("{s:s, s:I, s:I, s:I, s:s%}", "kind", "token", "id", (json_int_t)ev.request, "token",
                          (json_int_t)ev.token, "index", (json_int_t)ev.index, "text", ev.text ? ev.text : "",
                          ev.text_len);
        else if (ev.kind == TD_GEN_EVENT_DONE)
            e = json_pack("{s:s, s:I, s:s, s:I, s:I, s:s%, s:s?, s:f, s:f, s:f, s:f}", "kind", "done", "id",
                          (json_int_t)ev.request, "finish", td_gen_finish_str(ev.finish), "n_generated",
                          (json_int_t)ev.n_generated, "stop_id", (json_int_t)ev.stop_id, "text",
                          ev.text ? ev.text : "", ev.text_len, "error", ev.error, "ms_queue", ev.ms_queue,
                          "ms_prefill", ev.ms_prefill, "ms_first_token", ev.ms_first_token, "ms_decode",
                          ev.ms_decode);
        if (!e || json_array_append_new(evs, e)) {
            json_decref(evs), evs = NULL;
            st = TD_ERR_NOMEM;
        }
    }
    if (!o || !evs || json_object_set_new(o, "events", evs)) {
        json_decref(o);
        td_fail_nomem("the step's events");
        return NULL;
    }
    if (st != TD_OK) { /* the events that could be made are returned; the caller cannot trust its stream */
        json_object_set_new(o, "error", json_string(td_last_error()));
    }
    return dump(o);
}

/* Cancels a request (its DONE event, "cancelled", comes with the next step). 0 on success. */
int tdw_gen_cancel(tdw_gen *w, double id) { return td_gen_cancel(w->g, (int64_t)id) == TD_OK ? 0 : -1; }
/* Drops every cached session and snapshot (a new conversation). */
void tdw_gen_clear(tdw_gen *w) { td_gen_clear_cache(w->g); }

/* The token ids of a conversation, rendered with the model's chat template (td_chat_tokenize: special tokens only
 * from the template, a message is text) and ending with the assistant's opening: messages_json is an array of
 * {"role", "content"}. Returns "[ids...]", NULL on failure (TD_ERR_FORMAT naming the member). */
char *tdw_chat_tokenize(const td_model *m, const char *messages_json, int enable_thinking) {
    json_error_t jerr;
    json_t *a = json_loads(messages_json, 0, &jerr);
    char *out = NULL;
    if (!json_is_array(a)) {
        td_fail(TD_ERR_FORMAT, "chat messages: not a JSON array");
        json_decref(a);
        return NULL;
    }
    size_t n = json_array_size(a);
    td_chat_message *ms = td_calloc(n ? n : 1, sizeof *ms);
    if (!ms) {
        json_decref(a);
        td_fail_nomem("the chat messages");
        return NULL;
    }
    for (size_t i = 0; i < n; i++) {
        json_t *x = json_array_get(a, i), *r = json_object_get(x, "role"), *c = json_object_get(x, "content");
        if (!json_is_string(r) || (c && !json_is_string(c) && !json_is_null(c))) {
            td_fail(TD_ERR_FORMAT, "chat messages[%zu]: %s", i, !json_is_string(r) ? "role is not a string"
                    : "content is not a string");
            goto done;
        }
        ms[i].role = json_string_value(r);
        ms[i].content = json_is_string(c) ? json_string_value(c) : NULL;
    }
    td_chat_params cp = td_chat_default_params();
    cp.enable_thinking = enable_thinking;
    int32_t *ids = NULL;
    size_t n_ids = 0;
    if (td_chat_tokenize(m, ms, (int32_t)n, &cp, 0, NULL, &ids, &n_ids) != TD_OK) goto done;
    json_t *arr = json_array();
    for (size_t i = 0; arr && i < n_ids; i++)
        if (json_array_append_new(arr, json_integer(ids[i]))) json_decref(arr), arr = NULL;
    td_free(ids);
    out = dump(arr);
done:
    td_free(ms);
    json_decref(a);
    return out;
}
