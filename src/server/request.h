/* Requests of the HTTP API as plain data: a pure function from the bytes of a body to a validated request or an
 * OpenAI-style error (HTTP status, message, type, param, code). No model, no sockets: the fuzz target
 * (tests/fuzz/fuzz_request.c) drives it with random bytes, and the server checks what needs the model
 * (tokenised length against the context) after it. */
#ifndef TD_SERVER_REQUEST_H
#define TD_SERVER_REQUEST_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "typedecide.h"

typedef enum td_req_kind {
    TD_REQ_CHAT = 0,   /* POST /v1/chat/completions */
    TD_REQ_COMPLETION, /* POST /v1/completions */
    TD_REQ_TOKENIZE,   /* POST /tokenize */
    TD_REQ_DETOKENIZE, /* POST /detokenize */
    TD_REQ_DECIDE,     /* POST /v1/decide */
    TD_REQ_N_KINDS
} td_req_kind;

/* What a request may ask for; the parser refuses the rest. */
typedef struct td_req_limits {
    const char *model_name; /* a "model" member must equal it (else 404) */
    int32_t max_tokens;     /* most new tokens per request (max_tokens above it: 400) */
    int32_t n_vocab;        /* token ids in prompts and /detokenize must be below it */
    size_t max_body;        /* bytes (the server refuses larger bodies with 413 before parsing) */
} td_req_limits;

typedef struct td_req_error {
    int status;        /* HTTP status: 400, 404, 413, ... */
    char message[512];
    const char *type;  /* "invalid_request_error", ... */
    char param[96];    /* the field at fault ("messages[2].content"), "" for none */
    const char *code;  /* "model_not_found", ... or NULL */
} td_req_error;

typedef struct td_req_msg {
    const char *role;      /* system, user, assistant, tool */
    char *content;         /* text (a content array's text parts joined), "" for null; owned */
    const char *reasoning; /* reasoning_content of an assistant turn, or NULL */
    const json_t *tool_calls; /* assistant tool calls (array) or NULL; borrowed from root */
    const char *name;      /* tool name of a tool message, or NULL */
} td_req_msg;

/* Sampling as asked; has_* say which members were present (the rest come from the model's defaults). */
typedef struct td_req_sampling {
    int has_temperature, has_top_p, has_top_k, has_min_p, has_presence, has_frequency, has_repetition, has_seed;
    double temperature, top_p, min_p, presence_penalty, frequency_penalty, repetition_penalty;
    int32_t top_k;
    uint64_t seed;
} td_req_sampling;

typedef struct td_req {
    td_req_kind kind;
    json_t *root;             /* the parsed body; strings below are borrowed from it */
    const char *model;        /* NULL when absent */
    /* chat, tokenize with messages */
    td_req_msg *msgs;
    int32_t n_msgs;
    const json_t *tools;      /* array or NULL */
    int enable_thinking;      /* chat_template_kwargs.enable_thinking: 1, 0, or -1 when absent */
    int add_generation_prompt;/* tokenize: default 1 */
    /* completion, tokenize with text */
    const char *prompt;       /* text prompt, or NULL */
    size_t prompt_len;
    int32_t *prompt_ids;      /* token-id prompt (owned), or NULL */
    int32_t n_prompt_ids;
    int echo;                 /* completion */
    int logprobs;             /* completion: number of top alternatives (0..20), -1 when not asked */
    /* chat, completion */
    int stream, include_usage;
    int ignore_eos;           /* vLLM's: the model's stop ids do not stop generation */
    int32_t max_tokens;       /* -1 when absent; completions may ask for 0 (with echo: scoring the prompt alone) */
    int32_t n;                /* choices, 1..TD_GEN_MAX_CHOICES (default 1) */
    td_req_sampling sampling;
    int32_t *bias_ids;        /* logit_bias: n_bias token ids (owned) and their biases (owned), in [-100, 100] */
    float *bias;
    int32_t n_bias;
    const char **stop;        /* stop strings (owned array, borrowed strings) */
    int32_t n_stop;
    /* detokenize */
    int32_t *ids;             /* owned */
    int32_t n_ids;
    /* decide */
    const char *evidence;     /* NULL when every criterion brings its own */
    size_t evidence_len;
    td_rows *criteria;        /* owned */
    int show_logits;
} td_req;

/* Every member a request may carry is known: one that is not (or an OpenAI parameter this server does not
 * implement, such as best_of or suffix) is refused with a 400 naming it, never ignored. Members accepted only at
 * their default (no effect): "user" (any string), "logprobs": false and "top_logprobs": null on chat,
 * "response_format": {"type": "text"}, "tool_choice": "auto", "parallel_tool_calls": true, "best_of": 1,
 * "store": false. */
#define TD_REQ_MAX_LOGIT_BIAS 1024

/* Parses and validates `len` bytes of a body as a request of `kind`. Returns 0 and fills *out (td_req_free), or
 * the HTTP status of the refusal and fills *err (then *out holds nothing to free). Never touches a model. */
int td_req_parse(td_req_kind kind, const char *body, size_t len, const td_req_limits *lim, td_req *out,
                 td_req_error *err);
void td_req_free(td_req *r);

/* An error reply body {"error": {"message", "type", "param", "code"}} as a new string (td_free), or NULL. */
char *td_req_error_json(const td_req_error *err);
/* Fills *err and returns err->status. */
int td_req_fail(td_req_error *err, int status, const char *type, const char *param, const char *code, const char *fmt,
                ...) __attribute__((format(printf, 6, 7)));

#endif
