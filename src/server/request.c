/* The request parser and validator (request.h): bytes in, a validated request or an OpenAI-style error out. Every
 * refusal names the member at fault, with its path ("messages[1].content"), so a client can fix its request. */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/request.h"
#include "util/alloc.h"
#include "util/json.h"
#include "util/strbuf.h"

#define TD_REQ_MAX_STOP 16
#define TD_REQ_MAX_TOP_LOGPROBS 20

int td_req_fail(td_req_error *err, int status, const char *type, const char *param, const char *code, const char *fmt,
                ...) {
    err->status = status;
    err->type = type;
    err->code = code;
    snprintf(err->param, sizeof err->param, "%s", param ? param : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->message, sizeof err->message, fmt, ap);
    va_end(ap);
    return status;
}

static int bad(td_req_error *err, const char *param, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int bad(td_req_error *err, const char *param, const char *fmt, ...) {
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return td_req_fail(err, 400, "invalid_request_error", param, NULL, "%s", msg);
}

static int nomem(td_req_error *err) {
    return td_req_fail(err, 500, "server_error", NULL, NULL, "out of memory while reading the request");
}

char *td_req_error_json(const td_req_error *err) {
    uint64_t f0 = td_alloc_failures();
    json_t *e = json_object(), *o = json_object();
    json_object_set_new(e, "message", json_string(err->message));
    json_object_set_new(e, "type", json_string(err->type ? err->type : "invalid_request_error"));
    json_object_set_new(e, "param", err->param[0] ? json_string(err->param) : json_null());
    json_object_set_new(e, "code", err->code ? json_string(err->code) : json_null());
    json_object_set_new(o, "error", e);
    char *s = td_json_dumps_checked(o, JSON_COMPACT | JSON_PRESERVE_ORDER, f0);
    json_decref(o);
    return s;
}

static const char *type_name(const json_t *v) {
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "an array";
    case JSON_STRING: return "a string";
    case JSON_INTEGER: return "an integer";
    case JSON_REAL: return "a number";
    case JSON_TRUE: case JSON_FALSE: return "a boolean";
    default: return "null";
    }
}

/* A member that must be a boolean when present (null counts as absent, as OpenAI's API treats it). */
static int get_bool(const json_t *o, const char *key, int *out, td_req_error *err) {
    const json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) return 0;
    if (!json_is_boolean(v)) return bad(err, key, "'%s' must be a boolean, not %s", key, type_name(v));
    *out = json_is_true(v);
    return 0;
}

/* A number in [lo, hi] when present; *has set. */
static int get_num(const json_t *o, const char *key, double lo, double hi, double *out, int *has, td_req_error *err) {
    const json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) return 0;
    if (!json_is_number(v)) return bad(err, key, "'%s' must be a number, not %s", key, type_name(v));
    double x = json_number_value(v);
    if (!isfinite(x) || x < lo || x > hi) return bad(err, key, "'%s' must be in [%g, %g], got %g", key, lo, hi, x);
    *out = x;
    *has = 1;
    return 0;
}

static int get_int(const json_t *o, const char *key, long long lo, long long hi, long long *out, int *has,
                   td_req_error *err) {
    const json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) return 0;
    if (!json_is_integer(v)) return bad(err, key, "'%s' must be an integer, not %s", key, type_name(v));
    long long x = json_integer_value(v);
    if (x < lo || x > hi) return bad(err, key, "'%s' must be in [%lld, %lld], got %lld", key, lo, hi, x);
    *out = x;
    if (has) *has = 1;
    return 0;
}

static int get_str(const json_t *o, const char *key, const char **out, size_t *len, td_req_error *err) {
    const json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) return 0;
    if (!json_is_string(v)) return bad(err, key, "'%s' must be a string, not %s", key, type_name(v));
    *out = json_string_value(v);
    if (len) *len = json_string_length(v);
    return 0;
}

/* An array of token ids below n_vocab. */
static int get_ids(const json_t *a, const char *key, int32_t n_vocab, int32_t **ids, int32_t *n, td_req_error *err) {
    size_t k = json_array_size(a);
    if (k > (size_t)1 << 24) return bad(err, key, "'%s' holds too many token ids", key);
    *ids = td_malloc((k ? k : 1) * sizeof **ids);
    if (!*ids) return nomem(err);
    *n = (int32_t)k;
    for (size_t i = 0; i < k; i++) {
        const json_t *v = json_array_get(a, i);
        char p[96];
        snprintf(p, sizeof p, "%s[%zu]", key, i);
        if (!json_is_integer(v)) return bad(err, p, "'%s' must be a token id (an integer), not %s", p, type_name(v));
        long long x = json_integer_value(v);
        if (x < 0 || x >= n_vocab)
            return bad(err, p, "'%s' = %lld is not a token id of this model (0 .. %d)", p, x, n_vocab - 1);
        (*ids)[i] = (int32_t)x;
    }
    return 0;
}

/* ---- the members a request may carry ------------------------------------------------------------------------------ */

static const char *const chat_members[] = {
    "model", "messages", "tools", "chat_template_kwargs", "max_tokens", "max_completion_tokens", "stream",
    "stream_options", "ignore_eos", "temperature", "top_p", "min_p", "presence_penalty", "frequency_penalty",
    "repetition_penalty", "top_k", "seed", "n", "stop", "logit_bias", "logprobs", "top_logprobs", "response_format",
    "user", "tool_choice", "parallel_tool_calls", "store", NULL};
static const char *const completion_members[] = {
    "model", "prompt", "max_tokens", "max_completion_tokens", "stream", "stream_options", "ignore_eos", "temperature",
    "top_p", "min_p", "presence_penalty", "frequency_penalty", "repetition_penalty", "top_k", "seed", "n", "stop",
    "logit_bias", "echo", "logprobs", "best_of", "user", NULL};
static const char *const tokenize_members[] = {"model", "prompt", "text", "messages", "tools", "chat_template_kwargs",
                                               "add_generation_prompt", NULL};
static const char *const detokenize_members[] = {"model", "tokens", NULL};
static const char *const decide_members[] = {"model", "evidence", "criteria", "show_logits", NULL};

/* Why a parameter OpenAI's API has is refused here (the rest: unknown). */
static const char *refusal_hint(const char *key) {
    static const struct {
        const char *key, *why;
    } hints[] = {
        {"best_of", "generating best_of candidates and returning the best is not implemented; ask for 'n' choices"},
        {"suffix", "insertion (text after the completion) is not implemented"},
        {"functions", "the deprecated function-calling form is not implemented; use 'tools'"},
        {"function_call", "the deprecated function-calling form is not implemented; use 'tools'"},
        {"audio", "audio output is not implemented"},
        {"modalities", "only text is generated"},
        {"prediction", "predicted outputs are not implemented"},
        {"reasoning_effort", "use chat_template_kwargs.enable_thinking to turn reasoning on or off"},
        {"web_search_options", "web search is not implemented"},
        {"metadata", "stored completions are not implemented"},
        {"service_tier", "there are no service tiers"},
        {"guided_json", "constrained decoding is not implemented; use /v1/decide for typed answers"},
        {"guided_choice", "constrained decoding is not implemented; use /v1/decide for typed answers"},
        {"guided_regex", "constrained decoding is not implemented; use /v1/decide for typed answers"},
        {"grammar", "constrained decoding is not implemented; use /v1/decide for typed answers"},
    };
    for (size_t i = 0; i < sizeof hints / sizeof hints[0]; i++)
        if (strcmp(hints[i].key, key) == 0) return hints[i].why;
    return NULL;
}

/* Refuses a member outside the kind's list, and the listed ones that are accepted only at their default value. */
static int check_members(const json_t *o, td_req_kind kind, td_req_error *err) {
    const char *const *known = kind == TD_REQ_CHAT ? chat_members : kind == TD_REQ_COMPLETION ? completion_members
                             : kind == TD_REQ_TOKENIZE ? tokenize_members : kind == TD_REQ_DETOKENIZE ? detokenize_members
                             : decide_members;
    const char *key;
    const json_t *v;
    json_object_foreach((json_t *)o, key, v) {
        int ok = 0;
        for (size_t i = 0; known[i] && !ok; i++) ok = strcmp(known[i], key) == 0;
        char p[96];
        snprintf(p, sizeof p, "%.90s", key);
        if (!ok) {
            const char *why = refusal_hint(key);
            if (why) return td_req_fail(err, 400, "invalid_request_error", p, "unsupported_parameter",
                                        "'%.90s' is not supported by this server: %s", key, why);
            return td_req_fail(err, 400, "invalid_request_error", p, "unknown_parameter",
                               "Unrecognized request argument supplied: '%.90s' (this server refuses what it does not "
                               "implement rather than ignore it)", key);
        }
        if (json_is_null(v)) continue; /* null is absent, as OpenAI's API reads it */
        const char *why = NULL;
        if (strcmp(key, "user") == 0 && !json_is_string(v)) return bad(err, p, "'user' must be a string, not %s", type_name(v));
        if (strcmp(key, "top_logprobs") == 0)
            why = "log-probabilities of chat completions are not implemented; use /v1/completions with 'logprobs'";
        else if (strcmp(key, "tool_choice") == 0 && !(json_is_string(v) && strcmp(json_string_value(v), "auto") == 0))
            why = "only \"auto\" (the model decides whether to call a tool) is implemented";
        else if (strcmp(key, "parallel_tool_calls") == 0 && !json_is_true(v))
            why = "only true (the default) is implemented";
        else if (strcmp(key, "store") == 0 && !json_is_false(v))
            why = "stored completions are not implemented (only false is accepted)";
        else if (strcmp(key, "best_of") == 0 && !(json_is_integer(v) && json_integer_value(v) == 1))
            why = refusal_hint("best_of");
        else if (strcmp(key, "response_format") == 0) {
            const json_t *t = json_object_get(v, "type");
            if (!json_is_object(v) || !json_is_string(t))
                return bad(err, "response_format.type", "'response_format' must be an object with a string 'type'");
            if (strcmp(json_string_value(t), "text") != 0)
                return td_req_fail(err, 400, "invalid_request_error", "response_format.type", "unsupported_parameter",
                                   "'response_format' of type '%.60s' is not supported: this server does not constrain "
                                   "decoding (only {\"type\": \"text\"}); /v1/decide gives typed answers",
                                   json_string_value(t));
        }
        if (why) return td_req_fail(err, 400, "invalid_request_error", p, "unsupported_parameter",
                                    "'%.90s': this value is not supported by this server: %s", key, why);
    }
    return 0;
}

/* logit_bias: {"token id": bias in [-100, 100]} */
static int parse_logit_bias(const json_t *o, const td_req_limits *lim, td_req *r, td_req_error *err) {
    const json_t *lb = json_object_get(o, "logit_bias");
    if (!lb || json_is_null(lb)) return 0;
    if (!json_is_object(lb))
        return bad(err, "logit_bias", "'logit_bias' must be an object mapping token ids to biases, not %s", type_name(lb));
    size_t n = json_object_size(lb);
    if (n > TD_REQ_MAX_LOGIT_BIAS)
        return bad(err, "logit_bias", "'logit_bias' holds %zu entries; at most %d", n, TD_REQ_MAX_LOGIT_BIAS);
    r->bias_ids = td_malloc((n ? n : 1) * sizeof *r->bias_ids);
    r->bias = td_malloc((n ? n : 1) * sizeof *r->bias);
    if (!r->bias_ids || !r->bias) return nomem(err);
    const char *key;
    const json_t *v;
    json_object_foreach((json_t *)lb, key, v) {
        char *end = NULL;
        errno = 0;
        long long id = strtoll(key, &end, 10);
        if (!*key || isspace((unsigned char)*key) || *end || errno)
            return bad(err, "logit_bias", "'logit_bias' key \"%.60s\" is not a token id", key);
        if (id < 0 || id >= lim->n_vocab)
            return bad(err, "logit_bias", "'logit_bias' key %lld is not a token id of this model (0 .. %d)", id,
                       lim->n_vocab - 1);
        char p[96];
        snprintf(p, sizeof p, "logit_bias.%.60s", key);
        if (!json_is_number(v)) return bad(err, p, "'%s' must be a number, not %s", p, type_name(v));
        double b = json_number_value(v);
        if (!isfinite(b) || b < -100 || b > 100) return bad(err, p, "'%s' must be in [-100, 100], got %g", p, b);
        for (int32_t i = 0; i < r->n_bias; i++)
            if (r->bias_ids[i] == id) return bad(err, p, "'logit_bias' names token %lld twice", id);
        r->bias_ids[r->n_bias] = (int32_t)id;
        r->bias[r->n_bias++] = (float)b;
    }
    return 0;
}

static int parse_model(const json_t *o, const td_req_limits *lim, td_req *r, td_req_error *err) {
    int rc = get_str(o, "model", &r->model, NULL, err);
    if (rc) return rc;
    if (r->model && lim->model_name && strcmp(r->model, lim->model_name) != 0)
        return td_req_fail(err, 404, "invalid_request_error", "model", "model_not_found",
                           "The model '%.200s' does not exist: this server serves '%.200s'", r->model, lim->model_name);
    return 0;
}

/* messages: [{role, content (string, null, or [{type: "text", text}]), reasoning_content, tool_calls, name}] */
static int parse_messages(const json_t *o, td_req *r, td_req_error *err) {
    const json_t *a = json_object_get(o, "messages");
    if (!a) return bad(err, "messages", "'messages' is required");
    if (!json_is_array(a)) return bad(err, "messages", "'messages' must be an array, not %s", type_name(a));
    size_t n = json_array_size(a);
    if (n == 0) return bad(err, "messages", "'messages' must hold at least one message");
    if (n > 100000) return bad(err, "messages", "'messages' holds too many messages");
    r->msgs = td_calloc(n, sizeof *r->msgs);
    if (!r->msgs) return nomem(err);
    r->n_msgs = (int32_t)n;
    for (size_t i = 0; i < n; i++) {
        const json_t *m = json_array_get(a, i);
        td_req_msg *msg = &r->msgs[i];
        char p[96];
        snprintf(p, sizeof p, "messages[%zu]", i);
        if (!json_is_object(m)) return bad(err, p, "'%s' must be an object, not %s", p, type_name(m));
        const json_t *role = json_object_get(m, "role"), *c = json_object_get(m, "content");
        snprintf(p, sizeof p, "messages[%zu].role", i);
        if (!role) return bad(err, p, "'%s' is required", p);
        if (!json_is_string(role)) return bad(err, p, "'%s' must be a string, not %s", p, type_name(role));
        msg->role = json_string_value(role);
        if (strcmp(msg->role, "system") && strcmp(msg->role, "user") && strcmp(msg->role, "assistant") &&
            strcmp(msg->role, "tool") && strcmp(msg->role, "developer"))
            return bad(err, p, "'%s' must be one of system, developer, user, assistant, tool; got '%.100s'", p, msg->role);
        if (strcmp(msg->role, "developer") == 0) msg->role = "system";
        snprintf(p, sizeof p, "messages[%zu].content", i);
        if (!c || json_is_null(c)) {
            if (strcmp(msg->role, "assistant") != 0) return bad(err, p, "'%s' is required", p);
            msg->content = td_strdup("");
        } else if (json_is_string(c)) {
            msg->content = td_strndup(json_string_value(c), json_string_length(c));
        } else if (json_is_array(c)) { /* content parts: the text parts, joined */
            size_t total = 0;
            for (size_t k = 0; k < json_array_size(c); k++) {
                const json_t *part = json_array_get(c, k), *t = json_object_get(part, "type"),
                             *tx = json_object_get(part, "text");
                char pp[128];
                snprintf(pp, sizeof pp, "messages[%zu].content[%zu]", i, k);
                if (!json_is_object(part)) return bad(err, pp, "'%s' must be an object, not %s", pp, type_name(part));
                if (!json_is_string(t) || strcmp(json_string_value(t), "text") != 0)
                    return bad(err, pp, "'%s': only parts of type 'text' are supported", pp);
                if (!json_is_string(tx)) return bad(err, pp, "'%s.text' must be a string", pp);
                total += json_string_length(tx);
            }
            msg->content = td_malloc(total + 1);
            if (msg->content) {
                size_t at = 0;
                for (size_t k = 0; k < json_array_size(c); k++) {
                    const json_t *tx = json_object_get(json_array_get(c, k), "text");
                    memcpy(msg->content + at, json_string_value(tx), json_string_length(tx));
                    at += json_string_length(tx);
                }
                msg->content[at] = 0;
            }
        } else return bad(err, p, "'%s' must be a string, an array of text parts or null, not %s", p, type_name(c));
        if (!msg->content) return nomem(err);
        if (strlen(msg->content) != (c && json_is_string(c) ? json_string_length(c) : strlen(msg->content)))
            return bad(err, p, "'%s' holds a NUL character", p);
        const json_t *rc = json_object_get(m, "reasoning_content");
        snprintf(p, sizeof p, "messages[%zu].reasoning_content", i);
        if (rc && !json_is_null(rc)) {
            if (!json_is_string(rc)) return bad(err, p, "'%s' must be a string, not %s", p, type_name(rc));
            msg->reasoning = json_string_value(rc);
        }
        const json_t *tc = json_object_get(m, "tool_calls");
        snprintf(p, sizeof p, "messages[%zu].tool_calls", i);
        if (tc && !json_is_null(tc)) {
            if (!json_is_array(tc)) return bad(err, p, "'%s' must be an array, not %s", p, type_name(tc));
            msg->tool_calls = tc;
        }
        const json_t *nm = json_object_get(m, "name");
        if (nm && json_is_string(nm)) msg->name = json_string_value(nm);
    }
    return 0;
}

static int parse_template_options(const json_t *o, td_req *r, td_req_error *err) {
    const json_t *t = json_object_get(o, "tools");
    if (t && !json_is_null(t)) {
        if (!json_is_array(t)) return bad(err, "tools", "'tools' must be an array, not %s", type_name(t));
        for (size_t i = 0; i < json_array_size(t); i++)
            if (!json_is_object(json_array_get(t, i))) {
                char p[64];
                snprintf(p, sizeof p, "tools[%zu]", i);
                return bad(err, p, "'%s' must be an object", p);
            }
        r->tools = t;
    }
    const json_t *k = json_object_get(o, "chat_template_kwargs");
    if (k && !json_is_null(k)) {
        if (!json_is_object(k))
            return bad(err, "chat_template_kwargs", "'chat_template_kwargs' must be an object, not %s", type_name(k));
        const json_t *e = json_object_get(k, "enable_thinking");
        if (e && !json_is_null(e)) {
            if (!json_is_boolean(e))
                return bad(err, "chat_template_kwargs.enable_thinking",
                           "'chat_template_kwargs.enable_thinking' must be a boolean, not %s", type_name(e));
            r->enable_thinking = json_is_true(e);
        }
    }
    return 0;
}

static int parse_generation(const json_t *o, const td_req_limits *lim, td_req *r, td_req_error *err) {
    int rc, has = 0;
    long long v = -1;
    const char *mt_key = json_object_get(o, "max_completion_tokens") ? "max_completion_tokens" : "max_tokens";
    const json_t *mt = json_object_get(o, mt_key);
    if (mt && !json_is_null(mt)) {
        if (!json_is_integer(mt)) return bad(err, mt_key, "'%s' must be an integer, not %s", mt_key, type_name(mt));
        v = json_integer_value(mt);
        long long lo = r->kind == TD_REQ_COMPLETION ? 0 : 1;
        if (v < lo) return bad(err, mt_key, "'%s' must be at least %lld, got %lld", mt_key, lo, v);
        if (v > lim->max_tokens)
            return bad(err, mt_key, "'%s' = %lld exceeds this server's limit of %d tokens", mt_key, v, lim->max_tokens);
    }
    r->max_tokens = (int32_t)v;
    if ((rc = get_bool(o, "stream", &r->stream, err))) return rc;
    if ((rc = get_bool(o, "ignore_eos", &r->ignore_eos, err))) return rc;
    const json_t *so = json_object_get(o, "stream_options");
    if (so && !json_is_null(so)) {
        if (!json_is_object(so)) return bad(err, "stream_options", "'stream_options' must be an object, not %s", type_name(so));
        const json_t *iu = json_object_get(so, "include_usage");
        if (iu && !json_is_null(iu) && !json_is_boolean(iu))
            return bad(err, "stream_options.include_usage", "'stream_options.include_usage' must be a boolean");
        r->include_usage = json_is_true(iu);
    }
    td_req_sampling *s = &r->sampling;
    if ((rc = get_num(o, "temperature", 0, 100, &s->temperature, &s->has_temperature, err))) return rc;
    if ((rc = get_num(o, "top_p", 0, 1, &s->top_p, &s->has_top_p, err))) return rc;
    if (s->has_top_p && s->top_p <= 0) return bad(err, "top_p", "'top_p' must be in (0, 1], got 0");
    if ((rc = get_num(o, "min_p", 0, 1, &s->min_p, &s->has_min_p, err))) return rc;
    if ((rc = get_num(o, "presence_penalty", -2, 2, &s->presence_penalty, &s->has_presence, err))) return rc;
    if ((rc = get_num(o, "frequency_penalty", -2, 2, &s->frequency_penalty, &s->has_frequency, err))) return rc;
    if ((rc = get_num(o, "repetition_penalty", 0, 10, &s->repetition_penalty, &s->has_repetition, err))) return rc;
    if (s->has_repetition && s->repetition_penalty <= 0)
        return bad(err, "repetition_penalty", "'repetition_penalty' must be > 0");
    if ((rc = get_int(o, "top_k", -1, 1 << 30, &v, &s->has_top_k, err))) return rc;
    if (s->has_top_k) s->top_k = v < 0 ? 0 : (int32_t)v; /* -1 (vLLM) and 0 both mean off */
    if ((rc = get_int(o, "seed", INT64_MIN, INT64_MAX, &v, &s->has_seed, err))) return rc;
    if (s->has_seed) s->seed = (uint64_t)v;
    v = 1;
    if ((rc = get_int(o, "n", 1, TD_GEN_MAX_CHOICES, &v, &has, err))) return rc;
    r->n = (int32_t)v;
    if ((rc = parse_logit_bias(o, lim, r, err))) return rc;
    const json_t *st = json_object_get(o, "stop");
    if (st && !json_is_null(st)) {
        size_t n = json_is_string(st) ? 1 : json_is_array(st) ? json_array_size(st) : 0;
        if (!json_is_string(st) && !json_is_array(st))
            return bad(err, "stop", "'stop' must be a string or an array of strings, not %s", type_name(st));
        if (n > TD_REQ_MAX_STOP) return bad(err, "stop", "'stop' holds %zu strings; at most %d", n, TD_REQ_MAX_STOP);
        r->stop = td_calloc(n ? n : 1, sizeof *r->stop);
        if (!r->stop) return nomem(err);
        for (size_t i = 0; i < n; i++) {
            const json_t *x = json_is_string(st) ? st : json_array_get(st, i);
            char p[32];
            snprintf(p, sizeof p, "stop[%zu]", i);
            if (!json_is_string(x)) return bad(err, p, "'%s' must be a string, not %s", p, type_name(x));
            if (json_string_length(x) == 0) return bad(err, p, "'%s' is empty", p);
            if (strlen(json_string_value(x)) != json_string_length(x)) return bad(err, p, "'%s' holds a NUL", p);
            r->stop[r->n_stop++] = json_string_value(x);
        }
    }
    return 0;
}

/* criteria: an array of criterion objects, or a string of JSONL (a criteria file's contents); read by the same
 * reader as `typedecide decide --criteria`. */
static int parse_criteria(const json_t *o, td_req *r, td_req_error *err) {
    const json_t *c = json_object_get(o, "criteria");
    if (!c) return bad(err, "criteria", "'criteria' is required");
    char *text = NULL;
    size_t len = 0;
    if (json_is_string(c)) {
        text = td_strndup(json_string_value(c), json_string_length(c));
        len = json_string_length(c);
    } else if (json_is_array(c)) {
        if (json_array_size(c) == 0) return bad(err, "criteria", "'criteria' must hold at least one criterion");
        for (size_t i = 0; i < json_array_size(c); i++) { /* a repeated option id, named by its path */
            const json_t *opts = json_object_get(json_array_get(c, i), "options");
            for (size_t k = 0; json_is_array(opts) && k < json_array_size(opts); k++)
                for (size_t j = 0; j < k; j++) {
                    const json_t *a = json_object_get(json_array_get(opts, j), "id"),
                                 *b = json_object_get(json_array_get(opts, k), "id");
                    if (a && b && json_equal(a, b) && (json_is_string(a) || json_is_integer(a))) {
                        char p[96];
                        snprintf(p, sizeof p, "criteria[%zu].options[%zu].id", i, k);
                        return bad(err, p, "'%s' repeats the id of options[%zu]: option ids must be distinct", p, j);
                    }
                }
        }
        td_strbuf b = TD_STRBUF_INIT;
        for (size_t i = 0; i < json_array_size(c); i++) {
            const json_t *x = json_array_get(c, i);
            if (!json_is_object(x)) {
                td_strbuf_free(&b);
                char p[48];
                snprintf(p, sizeof p, "criteria[%zu]", i);
                return bad(err, p, "'%s' must be an object, not %s", p, type_name(x));
            }
            char *line = json_dumps(x, JSON_COMPACT | JSON_PRESERVE_ORDER);
            if (line) td_strbuf_puts(&b, line);
            td_strbuf_putc(&b, '\n');
            free(line); /* jansson's allocator is the C library's */
            if (!line || b.oom) {
                td_strbuf_free(&b);
                return nomem(err);
            }
        }
        text = td_strbuf_finish(&b, &len);
    } else return bad(err, "criteria", "'criteria' must be an array of criteria or a JSONL string, not %s", type_name(c));
    if (!text) return nomem(err);
    td_status st = td_rows_parse(text, len, "criteria", 0, &r->criteria);
    td_free(text);
    if (st == TD_ERR_NOMEM) return nomem(err);
    if (st != TD_OK) { /* "criteria:LINE: why": line k is criterion k - 1 */
        const char *m = td_last_error();
        int line = 0;
        char p[48] = "criteria";
        if (sscanf(m, "criteria:%d:", &line) == 1 && line >= 1 && json_is_array(c)) snprintf(p, sizeof p, "criteria[%d]", line - 1);
        return bad(err, p, "%s", m);
    }
    if (td_rows_count(r->criteria) == 0) return bad(err, "criteria", "'criteria' holds no criterion");
    for (int32_t i = 0; i < td_rows_count(r->criteria); i++) { /* what `decide` would answer with false confidence */
        const td_criterion *cr = &td_rows_get(r->criteria, i)->criterion;
        const char *q = cr->question;
        while (*q && isspace((unsigned char)*q)) q++;
        char p[64];
        snprintf(p, sizeof p, "criteria[%d].question", i);
        if (!*q) return bad(err, p, "'%s' is empty: there is nothing to decide", p);
        snprintf(p, sizeof p, "criteria[%d].options", i);
        if (cr->n_options < 2)
            return bad(err, p, "'%s' holds %d option: a decision needs at least two", p, cr->n_options);
    }
    for (int32_t i = 0; i < td_rows_count(r->criteria); i++)
        if (!td_rows_get(r->criteria, i)->evidence && !r->evidence) {
            char p[48];
            snprintf(p, sizeof p, "criteria[%d]", i);
            return bad(err, "evidence", "'evidence' is required: '%s' brings no evidence of its own", p);
        }
    return 0;
}

int td_req_parse(td_req_kind kind, const char *body, size_t len, const td_req_limits *lim, td_req *r,
                 td_req_error *err) {
    memset(r, 0, sizeof *r);
    memset(err, 0, sizeof *err);
    r->kind = kind;
    r->enable_thinking = -1;
    r->add_generation_prompt = 1;
    r->logprobs = -1;
    r->max_tokens = -1;
    r->n = 1;
    if (lim->max_body && len > lim->max_body)
        return td_req_fail(err, 413, "invalid_request_error", NULL, "request_too_large",
                           "the request body is %zu bytes; this server takes at most %zu", len, lim->max_body);
    json_error_t je;
    int oom = 0;
    r->root = td_json_loadb(body, len, 0, &je, &oom);
    if (oom) return nomem(err);
    if (!r->root)
        return td_req_fail(err, 400, "invalid_request_error", NULL, "invalid_json",
                           "the body is not valid JSON: line %d, column %d: %s", je.line, je.column, je.text);
    int rc = 0;
    const json_t *o = r->root;
    if (!json_is_object(o)) rc = bad(err, NULL, "the body must be a JSON object, not %s", type_name(o));
    if (!rc && kind >= 0 && kind < TD_REQ_N_KINDS) rc = check_members(o, kind, err);
    if (!rc) rc = parse_model(o, lim, r, err);
    if (rc) goto fail;
    switch (kind) {
    case TD_REQ_CHAT:
        if (!(rc = parse_messages(o, r, err)) && !(rc = parse_template_options(o, r, err)))
            rc = parse_generation(o, lim, r, err);
        if (!rc) {
            const json_t *lp = json_object_get(o, "logprobs");
            if (lp && !json_is_null(lp) && !json_is_false(lp))
                rc = bad(err, "logprobs", "'logprobs' is not supported on chat completions; use /v1/completions");
        }
        break;
    case TD_REQ_COMPLETION: {
        const json_t *p = json_object_get(o, "prompt");
        if (!p) rc = bad(err, "prompt", "'prompt' is required");
        else if (json_is_string(p)) {
            r->prompt = json_string_value(p);
            r->prompt_len = json_string_length(p);
        } else if (json_is_array(p) && json_array_size(p) == 1 && json_is_string(json_array_get(p, 0))) {
            r->prompt = json_string_value(json_array_get(p, 0));
            r->prompt_len = json_string_length(json_array_get(p, 0));
        } else if (json_is_array(p) && json_array_size(p) > 0 && json_is_integer(json_array_get(p, 0))) {
            rc = get_ids(p, "prompt", lim->n_vocab, &r->prompt_ids, &r->n_prompt_ids, err);
        } else rc = bad(err, "prompt", "'prompt' must be a string or a non-empty array of token ids, not %s", type_name(p));
        if (!rc) rc = parse_generation(o, lim, r, err);
        if (!rc) rc = get_bool(o, "echo", &r->echo, err);
        long long lp = -1;
        if (!rc) rc = get_int(o, "logprobs", 0, TD_REQ_MAX_TOP_LOGPROBS, &lp, NULL, err);
        r->logprobs = (int)lp;
        if (!rc && r->stream && lp >= 0)
            rc = bad(err, "logprobs", "'logprobs' is not supported with 'stream': ask without streaming");
        if (!rc && r->max_tokens < 0) r->max_tokens = 16; /* OpenAI's default for completions */
        break;
    }
    case TD_REQ_TOKENIZE:
        if (json_object_get(o, "messages")) {
            if (!(rc = parse_messages(o, r, err)) && !(rc = parse_template_options(o, r, err)))
                rc = get_bool(o, "add_generation_prompt", &r->add_generation_prompt, err);
        } else {
            const char *key = json_object_get(o, "prompt") ? "prompt" : "text";
            if (!json_object_get(o, key)) rc = bad(err, "prompt", "give 'prompt' (text) or 'messages'");
            else if (!(rc = get_str(o, key, &r->prompt, &r->prompt_len, err)) && !r->prompt)
                rc = bad(err, key, "'%s' must be a string", key);
        }
        break;
    case TD_REQ_DETOKENIZE: {
        const json_t *t = json_object_get(o, "tokens");
        if (!t) rc = bad(err, "tokens", "'tokens' is required");
        else if (!json_is_array(t)) rc = bad(err, "tokens", "'tokens' must be an array of token ids, not %s", type_name(t));
        else rc = get_ids(t, "tokens", lim->n_vocab, &r->ids, &r->n_ids, err);
        break;
    }
    case TD_REQ_DECIDE:
        if (!(rc = get_str(o, "evidence", &r->evidence, &r->evidence_len, err)) &&
            !(rc = get_bool(o, "show_logits", &r->show_logits, err)))
            rc = parse_criteria(o, r, err);
        break;
    default: rc = bad(err, NULL, "unknown request kind");
    }
    if (!rc) return 0;
fail:
    td_req_free(r);
    return rc;
}

void td_req_free(td_req *r) {
    if (!r) return;
    for (int32_t i = 0; r->msgs && i < r->n_msgs; i++) td_free(r->msgs[i].content);
    td_free(r->msgs);
    td_free(r->prompt_ids);
    td_free(r->stop);
    td_free(r->ids);
    td_free(r->bias_ids);
    td_free(r->bias);
    td_rows_free(r->criteria);
    json_decref(r->root);
    memset(r, 0, sizeof *r);
}
