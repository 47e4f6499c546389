/*
 * typedecide_server.h — the HTTP server: OpenAI-compatible generation, /v1/decide, the web page.
 *
 * The only part of the library that needs libmicrohttpd (src/server/): a build without it still declares these
 * functions and td_server_start says it was built without the server (TD_ERR_UNSUPPORTED).
 * Part of libtypedecide, an application on top of the core: it includes typedecide.h, whose conventions
 * (td_status and td_last_error, ownership, td_free, threads) hold here too; see that header's guide for the layering.
 */
#ifndef TYPEDECIDE_SERVER_H
#define TYPEDECIDE_SERVER_H

#include "typedecide.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------------------------------------------ */
/* HTTP server (libmicrohttpd): OpenAI-compatible generation, /v1/decide, tokenize, the web page                 */
/* ------------------------------------------------------------------------------------------------------------ */

/* td_server serves one model over HTTP/1.1 (JSON bodies, UTF-8):
 *   GET  /                     the web page (compiled in, no external assets): decisions and a streaming chat
 *   GET  /health               {"status": "ok", "requests_admitted", "generating", "decide": {"passes",
 *                              "requests", "criteria", "max_requests_per_pass"}}; never needs the API key
 *   GET  /v1/models            {"object": "list", "data": [{"id": model name, "object": "model", ...}]}
 *   GET  /v1/models/{id}       the model object; 404 (code "model_not_found") for another id
 *   POST /tokenize             {"prompt": text} or {"messages", "add_generation_prompt", "tools",
 *                              "chat_template_kwargs"} -> {"tokens", "count", "max_model_len", "prompt"}
 *   POST /detokenize           {"tokens": [ids]} -> {"prompt": text}
 *   POST /v1/decide            {"evidence", "criteria": [criterion objects] or a JSONL string, "show_logits"} ->
 *                              {"object": "decision", "model", "decisions": [td_decision_json's objects, in criteria
 *                              order], "prefill_tokens", "prefix_cached", "evidence_groups", "pass_requests",
 *                              "pass_criteria", "ms"}: the lines of `typedecide decide` on the same inputs, bit for
 *                              bit, whatever else shares the pass: concurrent requests run together (pass_requests
 *                              of them, pass_criteria criteria; each distinct evidence prefilled once) and the last
 *                              16 evidences stay prefilled, so a request on one of them prefills nothing
 *                              ("prefill_tokens": 0, "prefix_cached": true); "ms" includes the wait for the pass
 *   POST /v1/chat/completions, POST /v1/completions   OpenAI's, on a td_gen stepped by one engine thread (continuous
 *                              batching); a client that goes away is cancelled at once (README, NOTES.md). "n" up
 *                              to 16 choices share the prompt's prefill (td_gen_submit_n; choice k samples with
 *                              seed + k); without a "seed" a fresh one is drawn, and every reply reports the one used
 *                              ("seed"); "logit_bias" is step 0 of each choice's sampler; a stream ends with a usage
 *                              chunk (choices: []) only when stream_options.include_usage asks. Every member is known
 *                              or refused (400 naming it): response_format other than text, best_of != 1, suffix...
 * Errors are {"error": {"message", "type", "param", "code"}}: 400 naming the member at fault (bad JSON, wrong
 * types, max_tokens < 1 or above the limit, a prompt longer than the context), 401 (API key missing or wrong), 404
 * (unknown path, or a "model" other than the one served: code "model_not_found"), 405, 408 (a body that does not
 * arrive within timeout_s), 413 (body above max_body), 503 with Retry-After (parallel + queue_max requests already
 * admitted). The API key, when set, is required as "Authorization: Bearer KEY" on every path but /health and /
 * (the page itself holds no data; its requests carry the key the user types into it). */
typedef struct td_server td_server;

typedef struct td_server_params {
    const char *host;          /* address to bind: "127.0.0.1" (default), "0.0.0.0", "::1" */
    int32_t port;              /* 8080; 0: any free port (td_server_port says which) */
    const char *api_key;       /* NULL: no key */
    const char *model_name;    /* the model's id in /v1/models and requests; NULL: the model path's last part */
    int32_t parallel;          /* most requests worked on at once (generation: sequences stepped together). 4 */
    int32_t queue_max;         /* admitted requests waiting beyond `parallel`; more get 503. 64 */
    int64_t max_body;          /* bytes of a request body. 1 MiB */
    int32_t max_tokens;        /* most new tokens one request may ask for. 4096 */
    int32_t n_ctx;             /* positions per request (prompt + new tokens); 0: the model's trained context */
    int32_t timeout_s;         /* a request's headers must arrive within it (from the connection's start or the end of
                                  its previous reply), then its body within it: past either, a 408 and the
                                  connection is closed; a connection idle this long is closed. 30 */
    int32_t max_connections;   /* open connections at once, idle ones included (a socket each, no thread); capped by
                                  the process's open-file limit. 1024 */
    int32_t n_threads;         /* worker threads of the model's contexts. 1 */
    int64_t memory_mb;         /* budget of each context: the generation engine's (td_gen_params.cache_bytes) and
                                  /v1/decide's (td_decide_params.memory_mb). 0 (the default): 1024 MB for
                                  generation, /v1/decide's chosen by its device (td_decide_params.memory_mb 0) */
    int32_t kv_f16;            /* 1: KV caches in f16 (half a KV row: more rows in the same budget) */
    int32_t device;            /* td_device of every context (decide and generation); default CPU */
    int32_t precision;       /* td_precision of the contexts (td_ctx_params.precision); default FP32 */
    td_log_fn log;             /* one line per request (level 0) and the daemon's own complaints (1); NULL: silent */
    void *log_user;
    int allow_special_in_messages; /* 1: special-token text in chat messages becomes those tokens
                                      (TD_CHAT_ALLOW_SPECIAL); 0 (default): message content is text */
    int32_t max_connections_per_ip; /* open connections from one client address; more are closed at once. 16; 0: no cap */
    const char *cors_origins;  /* origins allowed to call the API from a browser, comma-separated ("https://a.example,
                                  http://localhost:3000"; "*": any): their OPTIONS preflight gets 204 with
                                  Access-Control-Allow-{Origin,Methods,Headers} and Max-Age, and every reply to them
                                  Access-Control-Allow-Origin. NULL (default): no CORS headers for anyone */
} td_server_params;

TD_API td_server_params td_server_default_params(void);

/* Binds and starts serving on threads of its own; returns at once. The model must outlive the server. Errors:
 * TD_ERR_INVALID_ARG (params out of range, a host that is not an IP address), TD_ERR_IO (the port cannot be bound:
 * the message says why), TD_ERR_STATE (a model without a tokenizer), TD_ERR_UNSUPPORTED (this library was built
 * without the server: libmicrohttpd was not found when it was configured). */
TD_API td_status td_server_start(const td_model *model, const td_server_params *params, td_server **out);
/* The port the server listens on (the one picked when params.port was 0). */
TD_API int32_t td_server_port(const td_server *server);
/* Stops listening, cancels requests in progress, joins every thread and frees the server. NULL: no-op. */
TD_API void td_server_free(td_server *server);

#ifdef __cplusplus
}
#endif

#endif /* TYPEDECIDE_SERVER_H */
