/* Chat templates, rendered by C code that follows the Jinja templates statement by statement (each block below
 * names the template lines it stands for): the ChatML ones of Qwen3, Qwen3.5 and Qwen2.5-Instruct, Llama 3's header
 * template and Gemma 3's turns; and the reasoning splitter. The template text is only recognised, never
 * interpreted. */
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "generate/gen_internal.h"
#include "typedecide.h"
#include "util/alloc.h"
#include "util/error.h"
#include "util/grow.h"
#include "util/json.h"
#include "util/strbuf.h"
#include "util/utf8.h"

/* ---- a growing string ------------------------------------------------------------------------------------------ */

typedef struct sbuf {
    td_strbuf t;    /* the text */
    size_t *spans;  /* where the template's own text lies: [start, end) pairs, ascending (td_chat_tokenize) */
    size_t n_spans, cap_spans;
} sbuf;

static void sb_putn(sbuf *b, const char *s, size_t n) { td_strbuf_put(&b->t, s, n); }
static void sb_put(sbuf *b, const char *s) { sb_putn(b, s, strlen(s)); }

/* The template's own text (a literal of the template, never a message's): the only place where special tokens
 * may come from when the tokens are made by td_chat_tokenize. */
static void sb_lit(sbuf *b, const char *s) {
    size_t start = b->t.n;
    sb_put(b, s);
    if (b->t.oom || b->t.n == start) return;
    if (b->n_spans && b->spans[2 * b->n_spans - 1] == start) { /* continues the last span */
        b->spans[2 * b->n_spans - 1] = b->t.n;
        return;
    }
    size_t *ns = td_grow(b->spans, &b->cap_spans, b->n_spans + 1, 2 * sizeof *ns, 32); /* [start, end) pairs */
    if (!ns) {
        b->t.oom = 1;
        return;
    }
    b->spans = ns;
    b->spans[2 * b->n_spans] = start, b->spans[2 * b->n_spans + 1] = b->t.n;
    b->n_spans++;
}

/* ---- Python string operations the templates use ------------------------------------------------------------- */

typedef struct str {
    const char *p;
    size_t n;
} str;

static str S(const char *s) { return (str){s ? s : "", s ? strlen(s) : 0}; }
static void sb_str(sbuf *b, str s) { sb_putn(b, s.p, s.n); }

static int starts(str s, const char *pre) {
    size_t l = strlen(pre);
    return s.n >= l && memcmp(s.p, pre, l) == 0;
}
static int ends(str s, const char *suf) {
    size_t l = strlen(suf);
    return s.n >= l && memcmp(s.p + s.n - l, suf, l) == 0;
}
/* offset of the first / last occurrence of needle, or -1 */
static long find_first(str s, const char *needle) {
    size_t l = strlen(needle);
    for (size_t i = 0; i + l <= s.n; i++)
        if (memcmp(s.p + i, needle, l) == 0) return (long)i;
    return -1;
}
static long find_last(str s, const char *needle) {
    size_t l = strlen(needle);
    for (size_t i = s.n >= l ? s.n - l + 1 : 0; i-- > 0;)
        if (memcmp(s.p + i, needle, l) == 0) return (long)i;
    return -1;
}
/* s.split(sep)[0] and s.split(sep)[-1] */
static str split_first(str s, const char *sep) {
    long i = find_first(s, sep);
    return i < 0 ? s : (str){s.p, (size_t)i};
}
static str split_last(str s, const char *sep) {
    long i = find_last(s, sep);
    return i < 0 ? s : (str){s.p + i + strlen(sep), s.n - (size_t)i - strlen(sep)};
}
static str lstrip_nl(str s) {
    while (s.n && s.p[0] == '\n') s.p++, s.n--;
    return s;
}
static str rstrip_nl(str s) {
    while (s.n && s.p[s.n - 1] == '\n') s.n--;
    return s;
}
static str strip_nl(str s) { return rstrip_nl(lstrip_nl(s)); }

/* Python's str.isspace() code points (what Jinja's |trim, str.strip(), removes). */
static int py_space(int32_t c) {
    return (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x20) || c == 0x85 || c == 0xa0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 || c == 0x202f || c == 0x205f || c == 0x3000;
}
static str trim(str s) {
    const unsigned char *u = (const unsigned char *)s.p;
    size_t i = 0;
    while (i < s.n) {
        size_t j = i;
        int32_t c = td_utf8_next(u, s.n, &j);
        if (c < 0 || !py_space(c)) break;
        i = j;
    }
    size_t end = s.n;
    while (end > i) { /* step back one code point */
        size_t k = td_utf8_start(s.p, i, end - 1), j = k;
        int32_t c = td_utf8_next(u, end, &j);
        if (c < 0 || !py_space(c)) break;
        end = k;
    }
    return (str){s.p + i, end - i};
}

/* Jinja's |tojson in transformers: json.dumps(x, ensure_ascii=False) with its default ", " and ": " spacing and the
 * keys in their order. jansson without JSON_COMPACT and with indent 0 writes exactly that spacing. */
static void sb_json(sbuf *b, const json_t *v) {
    char *t = json_dumps(v, JSON_ENCODE_ANY | JSON_PRESERVE_ORDER);
    if (!t) {
        b->t.oom = 1;
        return;
    }
    sb_put(b, t);
    free(t); /* jansson's allocator is the C library's (td_set_allocator's note) */
}

/* Python's str() of a JSON scalar, as Jinja's |string writes it. */
static void sb_pystr(sbuf *b, const json_t *v) {
    if (json_is_string(v)) sb_putn(b, json_string_value(v), json_string_length(v));
    else if (json_is_true(v)) sb_put(b, "True");
    else if (json_is_false(v)) sb_put(b, "False");
    else if (json_is_null(v)) sb_put(b, "None");
    else if (json_is_integer(v)) {
        char n[32];
        snprintf(n, sizeof n, "%lld", (long long)json_integer_value(v));
        sb_put(b, n);
    } else sb_json(b, v); /* reals: repr and %.17g differ only in digits Python drops; objects are JSON */
}

/* ---- messages ---------------------------------------------------------------------------------------------------- */

typedef struct msg {
    str role, content;
    int has_reasoning; /* reasoning_content given (a string) */
    str reasoning;
    const json_t *tool_calls; /* array or NULL */
} msg;

typedef struct conv {
    msg *m;
    int32_t n;
    json_t *owned[64]; /* parsed JSON to release */
    int n_owned;
    char **strs;       /* joined content parts */
    int n_strs;
} conv;

static void conv_free(conv *c) {
    for (int i = 0; i < c->n_owned; i++) json_decref(c->owned[i]);
    for (int i = 0; i < c->n_strs; i++) td_free(c->strs[i]);
    td_free(c->strs);
    td_free(c->m);
}

static int is_role(str r, const char *name) { return r.n == strlen(name) && memcmp(r.p, name, r.n) == 0; }

static td_status check_roles(const conv *c) {
    if (c->n < 1) return td_fail(TD_ERR_INVALID_ARG, "messages: no messages");
    for (int32_t i = 0; i < c->n; i++) {
        str r = c->m[i].role;
        if (!is_role(r, "system") && !is_role(r, "user") && !is_role(r, "assistant") && !is_role(r, "tool"))
            return td_fail(TD_ERR_INVALID_ARG, "messages[%d].role: \"%.*s\" is not system, user, assistant or tool", i,
                           (int)(r.n > 40 ? 40 : r.n), r.p);
        if (c->m[i].tool_calls && !is_role(r, "assistant"))
            return td_fail(TD_ERR_INVALID_ARG, "messages[%d].tool_calls: only assistant messages carry tool calls", i);
    }
    return TD_OK;
}

/* A tool call's function object (tool_call.function when present, else the call itself), its name and arguments. */
static td_status tool_call_parts(const json_t *call, int32_t mi, size_t ci, const char **name, const json_t **args) {
    const json_t *f = json_object_get(call, "function");
    if (!json_is_object(f)) f = call;
    if (!json_is_object(f) || !json_is_string(json_object_get(f, "name")))
        return td_fail(TD_ERR_INVALID_ARG, "messages[%d].tool_calls[%zu]: no function name", mi, ci);
    *name = json_string_value(json_object_get(f, "name"));
    *args = json_object_get(f, "arguments");
    return TD_OK;
}

/* ---- what the Qwen templates share ---------------------------------------------------------------------------- */

/* {%- for tool in tools %}{{- "\n" }}{{- tool | tojson }}{%- endfor %} */
static void sb_tool_list(sbuf *b, const json_t *tools) {
    size_t i;
    json_t *t;
    json_array_foreach(tools, i, t) {
        sb_lit(b, "\n");
        sb_json(b, t);
    }
}

/* The tools section of the Qwen3 and Qwen2.5 system turn (Hermes-style calls), to the end of the turn. */
static void sb_qwen_tools(sbuf *b, const json_t *tools) {
    sb_lit(b, "# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided "
              "with function signatures within <tools></tools> XML tags:\n<tools>");
    sb_tool_list(b, tools);
    sb_lit(b, "\n</tools>\n\nFor each function call, return a json object with function name and arguments "
              "within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": "
              "<args-json-object>}\n</tool_call><|im_end|>\n");
}

/* <|im_start|>{{ message.role }}\n{{ message.content }}<|im_end|>\n */
static void sb_turn(sbuf *b, const msg *x) {
    sb_lit(b, "<|im_start|>");
    sb_str(b, x->role);
    sb_lit(b, "\n");
    sb_str(b, x->content);
    sb_lit(b, "<|im_end|>\n");
}

/* Tool message i of m[n] as a tool response: consecutive tool messages share one user turn, which `opens` begins
 * (the templates differ on when) and the last of them ends. */
static void sb_tool_response(sbuf *b, int opens, str content, const msg *m, int32_t n, int32_t i) {
    if (opens) sb_lit(b, "<|im_start|>user");
    sb_lit(b, "\n<tool_response>\n");
    sb_str(b, content);
    sb_lit(b, "\n</tool_response>");
    if (i == n - 1 || !is_role(m[i + 1].role, "tool")) sb_lit(b, "<|im_end|>\n");
}

/* An assistant message's reasoning: its reasoning_content, else the text before "</think>" (after "<think>"), which
 * then leaves *content; else "". */
static str split_reasoning(const msg *x, str *content) {
    if (x->has_reasoning) return x->reasoning;
    if (find_first(*content, "</think>") < 0) return S("");
    str reasoning = lstrip_nl(split_last(rstrip_nl(split_first(*content, "</think>")), "<think>"));
    *content = lstrip_nl(split_last(*content, "</think>"));
    return reasoning;
}

/* ---- Qwen3 ---------------------------------------------------------------------------------------------------- */

static td_status render_qwen3(const conv *c, const td_chat_params *p, const json_t *tools, sbuf *b) {
    const msg *m = c->m;
    int32_t n = c->n;
    /* {%- if tools %} system turn with the tools {%- else %} the system message {%- endif %} */
    if (tools && json_array_size(tools) > 0) {
        sb_lit(b, "<|im_start|>system\n");
        if (is_role(m[0].role, "system")) {
            sb_str(b, m[0].content);
            sb_lit(b, "\n\n");
        }
        sb_qwen_tools(b, tools);
    } else if (is_role(m[0].role, "system")) {
        sb_lit(b, "<|im_start|>system\n");
        sb_str(b, m[0].content);
        sb_lit(b, "<|im_end|>\n");
    }
    /* last_query_index: the last user message that is not a tool response wrapped by the client */
    int32_t last_query = n - 1;
    for (int32_t i = n - 1; i >= 0; i--)
        if (is_role(m[i].role, "user") &&
            !(starts(m[i].content, "<tool_response>") && ends(m[i].content, "</tool_response>"))) {
            last_query = i;
            break;
        }
    for (int32_t i = 0; i < n; i++) {
        const msg *x = &m[i];
        if (is_role(x->role, "user") || (is_role(x->role, "system") && i > 0)) {
            sb_turn(b, x);
        } else if (is_role(x->role, "assistant")) {
            str content = x->content;
            str reasoning = split_reasoning(x, &content);
            sb_lit(b, "<|im_start|>assistant\n");
            if (i > last_query && (i == n - 1 || reasoning.n > 0)) {
                sb_lit(b, "<think>\n");
                sb_str(b, strip_nl(reasoning));
                sb_lit(b, "\n</think>\n\n");
                sb_str(b, lstrip_nl(content));
            } else {
                sb_str(b, content);
            }
            size_t k;
            json_t *call;
            json_array_foreach(x->tool_calls, k, call) {
                const char *name;
                const json_t *args;
                td_status st = tool_call_parts(call, i, k, &name, &args);
                if (st != TD_OK) return st;
                if ((k == 0 && content.n) || k > 0) sb_lit(b, "\n");
                sb_lit(b, "<tool_call>\n{\"name\": \"");
                sb_put(b, name);
                sb_lit(b, "\", \"arguments\": ");
                if (json_is_string(args)) sb_putn(b, json_string_value(args), json_string_length(args));
                else if (args) sb_json(b, args);
                else sb_lit(b, ""); /* an undefined value renders empty in Jinja */
                sb_lit(b, "}\n</tool_call>");
            }
            sb_lit(b, "<|im_end|>\n");
        } else if (is_role(x->role, "tool")) {
            sb_tool_response(b, i == 0 || !is_role(m[i - 1].role, "tool"), x->content, m, n, i);
        }
    }
    if (p->add_generation_prompt) {
        sb_lit(b, "<|im_start|>assistant\n");
        if (!p->enable_thinking) sb_lit(b, "<think>\n\n</think>\n\n");
    }
    return TD_OK;
}

/* ---- Qwen3.5 ------------------------------------------------------------------------------------------------- */

static const char qwen35_tools_tail[] =
    "\n\nIf you choose to call a function ONLY reply in the following format with NO suffix:\n\n<tool_call>\n"
    "<function=example_function_name>\n<parameter=example_parameter_1>\nvalue_1\n</parameter>\n"
    "<parameter=example_parameter_2>\nThis is the value for the second parameter\nthat can span\nmultiple lines\n"
    "</parameter>\n</function>\n</tool_call>\n\n<IMPORTANT>\nReminder:\n- Function calls MUST follow the specified "
    "format: an inner <function=...></function> block must be nested within <tool_call></tool_call> XML tags\n"
    "- Required parameters MUST be specified\n- You may provide optional reasoning for your function call in "
    "natural language BEFORE the function call, but NOT after\n- If there is no function call available, answer "
    "the question like normal with your current knowledge and do not tell the user about function calls\n"
    "</IMPORTANT>";

static td_status render_qwen35(const conv *c, const td_chat_params *p, const json_t *tools, sbuf *b) {
    const msg *m = c->m;
    int32_t n = c->n;
    if (tools && json_array_size(tools) > 0) {
        sb_lit(b, "<|im_start|>system\n# Tools\n\nYou have access to the following functions:\n\n<tools>");
        sb_tool_list(b, tools);
        sb_lit(b, "\n</tools>");
        sb_lit(b, qwen35_tools_tail);
        if (is_role(m[0].role, "system")) {
            str s = trim(m[0].content);
            if (s.n) {
                sb_lit(b, "\n\n");
                sb_str(b, s);
            }
        }
        sb_lit(b, "<|im_end|>\n");
    } else if (is_role(m[0].role, "system")) {
        sb_lit(b, "<|im_start|>system\n");
        sb_str(b, trim(m[0].content));
        sb_lit(b, "<|im_end|>\n");
    }
    int32_t last_query = -1;
    for (int32_t i = n - 1; i >= 0; i--) {
        str s = trim(m[i].content);
        if (is_role(m[i].role, "user") && !(starts(s, "<tool_response>") && ends(s, "</tool_response>"))) {
            last_query = i;
            break;
        }
    }
    if (last_query < 0) return td_fail(TD_ERR_INVALID_ARG, "messages: no user query (the Qwen3.5 template needs one)");
    for (int32_t i = 0; i < n; i++) {
        const msg *x = &m[i];
        str content = trim(x->content);
        if (is_role(x->role, "system")) {
            if (i > 0) return td_fail(TD_ERR_INVALID_ARG, "messages[%d]: a system message must be the first", i);
        } else if (is_role(x->role, "user")) {
            sb_lit(b, "<|im_start|>user\n");
            sb_str(b, content);
            sb_lit(b, "<|im_end|>\n");
        } else if (is_role(x->role, "assistant")) {
            str reasoning = trim(split_reasoning(x, &content));
            sb_lit(b, "<|im_start|>assistant\n");
            if (i > last_query) {
                sb_lit(b, "<think>\n");
                sb_str(b, reasoning);
                sb_lit(b, "\n</think>\n\n");
            }
            sb_str(b, content);
            size_t k;
            json_t *call;
            json_array_foreach(x->tool_calls, k, call) {
                const char *name;
                const json_t *args;
                td_status st = tool_call_parts(call, i, k, &name, &args);
                if (st != TD_OK) return st;
                if (k == 0) sb_lit(b, trim(content).n ? "\n\n<tool_call>\n<function=" : "<tool_call>\n<function=");
                else sb_lit(b, "\n<tool_call>\n<function=");
                sb_put(b, name);
                sb_lit(b, ">\n");
                json_t *parsed = NULL;
                if (json_is_string(args)) { /* OpenAI clients send the arguments as a JSON string */
                    parsed = json_loadb(json_string_value(args), json_string_length(args), 0, NULL);
                    if (!json_is_object(parsed)) {
                        json_decref(parsed);
                        return td_fail(TD_ERR_FORMAT, "messages[%d].tool_calls[%zu].arguments: not a JSON object", i,
                                       k);
                    }
                    args = parsed;
                }
                if (args && !json_is_object(args)) {
                    json_decref(parsed);
                    return td_fail(TD_ERR_FORMAT, "messages[%d].tool_calls[%zu].arguments: not a JSON object", i, k);
                }
                const char *key;
                json_t *v;
                json_object_foreach((json_t *)args, key, v) {
                    sb_lit(b, "<parameter=");
                    sb_put(b, key);
                    sb_lit(b, ">\n");
                    if (json_is_object(v) || json_is_array(v)) sb_json(b, v);
                    else sb_pystr(b, v);
                    sb_lit(b, "\n</parameter>\n");
                }
                json_decref(parsed);
                sb_lit(b, "</function>\n</tool_call>");
            }
            sb_lit(b, "<|im_end|>\n");
        } else if (is_role(x->role, "tool")) {
            sb_tool_response(b, i > 0 && !is_role(m[i - 1].role, "tool"), content, m, n, i);
        }
    }
    if (p->add_generation_prompt) {
        sb_lit(b, "<|im_start|>assistant\n");
        sb_lit(b, p->enable_thinking ? "<think>\n" : "<think>\n\n</think>\n\n");
    }
    return TD_OK;
}

/* ---- Qwen2.5 ------------------------------------------------------------------------------------------------- */

static const char qwen25_default_system[] = "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.";

static td_status render_qwen25(const conv *c, const td_chat_params *p, const json_t *tools, sbuf *b) {
    const msg *m = c->m;
    int32_t n = c->n;
    int system_first = is_role(m[0].role, "system");
    /* {%- if tools %} system turn (the system message or Qwen's default) with the tools {%- else %} ... */
    sb_lit(b, "<|im_start|>system\n");
    if (system_first) sb_str(b, m[0].content);
    else sb_lit(b, qwen25_default_system);
    if (tools && json_array_size(tools) > 0) {
        sb_lit(b, "\n\n");
        sb_qwen_tools(b, tools);
    } else {
        sb_lit(b, "<|im_end|>\n");
    }
    for (int32_t i = 0; i < n; i++) {
        const msg *x = &m[i];
        int calls = x->tool_calls && json_array_size(x->tool_calls) > 0;
        if (is_role(x->role, "user") || (is_role(x->role, "system") && i > 0) ||
            (is_role(x->role, "assistant") && !calls)) {
            sb_turn(b, x);
        } else if (is_role(x->role, "assistant")) {
            sb_lit(b, "<|im_start|>assistant");
            if (x->content.n) {
                sb_lit(b, "\n");
                sb_str(b, x->content);
            }
            size_t k;
            json_t *call;
            json_array_foreach(x->tool_calls, k, call) {
                const char *name;
                const json_t *args;
                td_status st = tool_call_parts(call, i, k, &name, &args);
                if (st != TD_OK) return st;
                sb_lit(b, "\n<tool_call>\n{\"name\": \"");
                sb_put(b, name);
                sb_lit(b, "\", \"arguments\": ");
                if (args) sb_json(b, args); /* tool_call.arguments | tojson: a string argument is quoted */
                sb_lit(b, "}\n</tool_call>");
            }
            sb_lit(b, "<|im_end|>\n");
        } else if (is_role(x->role, "tool")) {
            sb_tool_response(b, i == 0 || !is_role(m[i - 1].role, "tool"), x->content, m, n, i);
        }
    }
    if (p->add_generation_prompt) sb_lit(b, "<|im_start|>assistant\n");
    return TD_OK;
}

/* ---- Llama 3 ------------------------------------------------------------------------------------------------- */

/* {% for message in messages %}{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n' +
 * message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}...
 * The template has no tools: tools and tool calls are not rendered, as in transformers. */
static td_status render_llama3(const conv *c, const td_chat_params *p, const json_t *tools, sbuf *b) {
    (void)tools;
    for (int32_t i = 0; i < c->n; i++) {
        if (i == 0) sb_lit(b, "<|begin_of_text|>");
        sb_lit(b, "<|start_header_id|>");
        sb_str(b, c->m[i].role);
        sb_lit(b, "<|end_header_id|>\n\n");
        sb_str(b, trim(c->m[i].content));
        sb_lit(b, "<|eot_id|>");
    }
    if (p->add_generation_prompt) sb_lit(b, "<|start_header_id|>assistant<|end_header_id|>\n\n");
    return TD_OK;
}

/* ---- Gemma 3 ------------------------------------------------------------------------------------------------- */

/* {{ bos_token }}, the system message's content + '\n\n' before the first turn's content, then turns that alternate
 * user / assistant (rendered "model") with the content trimmed. No tools in the template. */
static td_status render_gemma3(const conv *c, const td_chat_params *p, const json_t *tools, sbuf *b) {
    (void)tools;
    int32_t first = is_role(c->m[0].role, "system") ? 1 : 0;
    sb_lit(b, "<bos>");
    for (int32_t i = first; i < c->n; i++) {
        const msg *x = &c->m[i];
        if (is_role(x->role, "user") != ((i - first) % 2 == 0))
            return td_fail(TD_ERR_INVALID_ARG, "messages[%d].role: \"%.*s\": Gemma 3's template needs the roles to "
                           "alternate user/assistant/user/assistant/... (after an optional first system message)",
                           i, (int)(x->role.n > 40 ? 40 : x->role.n), x->role.p);
        sb_lit(b, "<start_of_turn>");
        if (is_role(x->role, "assistant")) sb_lit(b, "model");
        else sb_str(b, x->role);
        sb_lit(b, "\n");
        if (i == first && first) {
            sb_str(b, c->m[0].content);
            sb_lit(b, "\n\n");
        }
        sb_str(b, trim(x->content));
        sb_lit(b, "<end_of_turn>\n");
    }
    if (p->add_generation_prompt) sb_lit(b, "<start_of_turn>model\n");
    return TD_OK;
}

/* ---- families --------------------------------------------------------------------------------------------------- */

/* Statements of each template that the C renderer above stands for; a template must hold all of its family's. */
static const char *const qwen3_marks[] = {
    "<|im_start|>",
    "enable_thinking is defined and enable_thinking is false",
    "{{- '<think>\\n\\n</think>\\n\\n' }}",
    "'<tool_call>\\n{\"name\": \"'",
    "ns.last_query_index",
    "'\\n<tool_response>\\n'",
    "message.content.split('</think>')[-1].lstrip('\\n')",
    "reasoning_content.strip('\\n')",
    NULL};
static const char *const qwen35_marks[] = {
    "<|im_start|>",
    "enable_thinking is defined and enable_thinking is false",
    "{{- '<think>\\n' }}",
    "'<tool_call>\\n<function=' + tool_call.name + '>\\n'",
    "'<parameter=' + args_name + '>\\n'",
    "ns.last_query_index",
    "render_content(message.content, true)|trim",
    "You have access to the following functions",
    NULL};

static int has_all(const char *t, const char *const *marks) {
    for (int i = 0; marks[i]; i++)
        if (!strstr(t, marks[i])) return 0;
    return 1;
}

static const char *const qwen25_marks[] = {
    "<|im_start|>",
    "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.",
    "(message.role == \"assistant\" and not message.tool_calls)",
    "tool_call.arguments | tojson",
    "'\\n<tool_response>\\n'",
    NULL};
static const char *const llama3_marks[] = {
    "'<|start_header_id|>' + message['role'] + '<|end_header_id|>",
    "message['content'] | trim + '<|eot_id|>'",
    "bos_token + content",
    "'<|start_header_id|>assistant<|end_header_id|>",
    NULL};
static const char *const gemma3_marks[] = {
    "{{ bos_token }}",
    "first_user_prefix = messages[0]['content'] + '",
    "Conversation roles must alternate user/assistant/user/assistant/...",
    "{%- set role = \"model\" -%}",
    "'<start_of_turn>' + role + '",
    "{{ message['content'] | trim }}",
    "'<start_of_turn>model",
    NULL};

td_chat_family td_chat_family_of(const char *t) {
    if (!t) return TD_CHAT_NONE;
    if (has_all(t, qwen35_marks)) return TD_CHAT_QWEN35;
    if (has_all(t, qwen3_marks) && !strstr(t, "<function=")) return TD_CHAT_QWEN3;
    if (has_all(t, qwen25_marks) && !strstr(t, "<think>")) return TD_CHAT_QWEN25;
    /* Llama 3.1's full template (tools, "Cutting Knowledge Date") is another, refused */
    if (has_all(t, llama3_marks) && !strstr(t, "tools") && !strstr(t, "date_string")) return TD_CHAT_LLAMA3;
    if (has_all(t, gemma3_marks) && !strstr(t, "tools")) return TD_CHAT_GEMMA3;
    return TD_CHAT_NONE;
}

static const char *const family_names[] = {NULL, "qwen3", "qwen3.5", "qwen2.5", "llama3", "gemma3"};

const char *td_chat_family_name(td_chat_family f) {
    return (int)f > 0 && (size_t)f < sizeof family_names / sizeof *family_names ? family_names[f] : NULL;
}

td_chat_family td_chat_family_named(const char *name) {
    for (size_t f = 1; name && f < sizeof family_names / sizeof *family_names; f++)
        if (strcmp(name, family_names[f]) == 0) return (td_chat_family)f;
    return TD_CHAT_NONE;
}

const char *td_model_chat_family(const td_model *model, td_status *status) {
    if (status) *status = TD_OK;
    if (!model) {
        if (status) *status = td_fail(TD_ERR_INVALID_ARG, "td_model_chat_family: NULL model");
        return NULL;
    }
    const char *src = NULL, *t = td_model_chat_template(model, &src);
    td_chat_family f = td_chat_family_of(t);
    if (f == TD_CHAT_NONE) {
        td_status st =
            t ? td_fail(TD_ERR_UNSUPPORTED,
                        "%s: the chat template is not one this library renders (supported: Qwen3's, Qwen3.5's and "
                        "Qwen2.5's ChatML templates, Llama 3's and Gemma 3's); render the prompt yourself and use the "
                        "completion path",
                        src ? src : td_model_path(model))
              : td_fail(TD_ERR_UNSUPPORTED, "%s: the model has no chat template (no chat_template in "
                                            "tokenizer_config.json or tokenizer.chat_template in the GGUF file)",
                        td_model_path(model));
        if (status) *status = st;
        return NULL;
    }
    return td_chat_family_name(f);
}

td_chat_params td_chat_default_params(void) {
    td_chat_params p;
    memset(&p, 0, sizeof p);
    p.add_generation_prompt = 1;
    p.enable_thinking = 1;
    return p;
}

/* Renders into *text; with spans (may be NULL) also where the template's own text lies (td_free). */
static td_status render(td_chat_family f, conv *c, const td_chat_params *params, char **text, size_t **spans,
                        size_t *n_spans) {
    td_chat_params p = params ? *params : td_chat_default_params();
    json_t *tools = NULL;
    td_status st = check_roles(c);
    if (st == TD_OK && p.tools_json) {
        json_error_t e;
        tools = json_loads(p.tools_json, 0, &e);
        if (!json_is_array(tools)) {
            st = td_fail(TD_ERR_FORMAT, "tools: not a JSON array%s%s", tools ? "" : ": ", tools ? "" : e.text);
            json_decref(tools);
            tools = NULL;
        } else if (c->n_owned < 64) c->owned[c->n_owned++] = tools;
        else {
            json_decref(tools);
            tools = NULL;
            st = td_fail(TD_ERR_INVALID_ARG, "messages: too many messages with tool calls");
        }
    }
    sbuf b = {0};
    if (st == TD_OK) {
        switch (f) {
        case TD_CHAT_QWEN3: st = render_qwen3(c, &p, tools, &b); break;
        case TD_CHAT_QWEN35: st = render_qwen35(c, &p, tools, &b); break;
        case TD_CHAT_QWEN25: st = render_qwen25(c, &p, tools, &b); break;
        case TD_CHAT_LLAMA3: st = render_llama3(c, &p, tools, &b); break;
        case TD_CHAT_GEMMA3: st = render_gemma3(c, &p, tools, &b); break;
        default: st = td_fail(TD_ERR_INVALID_ARG, "chat: no such template family (%d)", (int)f);
        }
    }
    if (st == TD_OK) sb_put(&b, "");
    if (st == TD_OK && b.t.oom) st = td_fail_nomem("the rendered chat");
    if (st != TD_OK) {
        td_free(b.t.s);
        td_free(b.spans);
        return st;
    }
    *text = b.t.s;
    if (spans) *spans = b.spans, *n_spans = b.n_spans;
    else td_free(b.spans);
    return TD_OK;
}

static td_status family_of_model(const td_model *model, td_chat_family *f) {
    td_status st;
    const char *name = td_model_chat_family(model, &st);
    if (!name) return st;
    *f = td_chat_family_named(name);
    return TD_OK;
}

static td_status render_messages(const td_model *model, const td_chat_message *messages, int32_t n,
                                 const td_chat_params *params, char **text, size_t **spans, size_t *n_spans) {
    if (text) *text = NULL;
    if (!model || !text || (n > 0 && !messages) || n < 0)
        return td_fail(TD_ERR_INVALID_ARG, "td_chat_render: NULL argument or n < 0");
    td_chat_family f = TD_CHAT_NONE;
    td_status st = family_of_model(model, &f);
    if (st != TD_OK) return st;
    conv c = {0};
    if (n && !(c.m = td_calloc((size_t)n, sizeof *c.m))) return td_fail_nomem("messages");
    c.n = n;
    for (int32_t i = 0; i < n && st == TD_OK; i++) {
        const td_chat_message *x = &messages[i];
        if (!x->role) st = td_fail(TD_ERR_INVALID_ARG, "messages[%d].role: NULL", i);
        c.m[i].role = S(x->role);
        c.m[i].content = S(x->content);
        c.m[i].has_reasoning = x->reasoning_content != NULL;
        c.m[i].reasoning = S(x->reasoning_content);
        if (x->tool_calls_json && st == TD_OK) {
            json_t *tc = json_loads(x->tool_calls_json, 0, NULL);
            if (!json_is_array(tc)) {
                json_decref(tc);
                st = td_fail(TD_ERR_FORMAT, "messages[%d].tool_calls: not a JSON array", i);
            } else if (c.n_owned == 64) {
                json_decref(tc);
                st = td_fail(TD_ERR_INVALID_ARG, "messages: more than 63 messages with tool calls");
            } else {
                c.owned[c.n_owned++] = tc;
                c.m[i].tool_calls = tc;
            }
        }
    }
    if (st == TD_OK) st = render(f, &c, params, text, spans, n_spans);
    conv_free(&c);
    return st;
}

td_status td_chat_render(const td_model *model, const td_chat_message *messages, int32_t n,
                         const td_chat_params *params, char **text) {
    return render_messages(model, messages, n, params, text, NULL, NULL);
}

td_status td_chat_tokenize(const td_model *model, const td_chat_message *messages, int32_t n,
                           const td_chat_params *params, unsigned flags, char **text, int32_t **ids, size_t *n_ids) {
    if (text) *text = NULL;
    if (!ids || !n_ids) return td_fail(TD_ERR_INVALID_ARG, "td_chat_tokenize: NULL argument");
    *ids = NULL, *n_ids = 0;
    if (flags & ~TD_CHAT_ALLOW_SPECIAL) return td_fail(TD_ERR_INVALID_ARG, "td_chat_tokenize: unknown flags 0x%x", flags);
    const td_tokenizer *tok = model ? td_model_tokenizer(model) : NULL;
    if (model && !tok) return td_fail(TD_ERR_STATE, "%s: the model has no tokenizer", td_model_path(model));
    char *t = NULL;
    size_t *spans = NULL, n_spans = 0;
    td_status st = render_messages(model, messages, n, params, &t, &spans, &n_spans);
    if (st == TD_OK) {
        /* the template's text parses its special tokens; the messages' text never does, unless asked */
        if (flags & TD_CHAT_ALLOW_SPECIAL) st = td_tokenize(tok, t, strlen(t), TD_TOKENIZE_PARSE_SPECIAL, ids, n_ids);
        else st = td_tokenize_spans(tok, t, strlen(t), TD_TOKENIZE_PARSE_SPECIAL, spans, n_spans, ids, n_ids);
    }
    td_free(spans);
    if (st == TD_OK && text) *text = t;
    else td_free(t);
    return st;
}

/* OpenAI content: a string, null, or an array of {"type": "text", "text"} parts (joined). */
static td_status content_of(conv *c, const json_t *v, int32_t i, str *out) {
    if (!v || json_is_null(v)) {
        *out = S("");
        return TD_OK;
    }
    if (json_is_string(v)) {
        *out = (str){json_string_value(v), json_string_length(v)};
        return TD_OK;
    }
    if (!json_is_array(v)) return td_fail(TD_ERR_FORMAT, "messages[%d].content: not a string, null or array of parts", i);
    sbuf b = {0};
    size_t k;
    json_t *part;
    json_array_foreach(v, k, part) {
        const json_t *t = json_object_get(part, "text");
        const json_t *type = json_object_get(part, "type");
        if (!json_is_string(t) || (type && !(json_is_string(type) && strcmp(json_string_value(type), "text") == 0))) {
            td_free(b.t.s);
            return td_fail(TD_ERR_FORMAT, "messages[%d].content[%zu]: only text parts ({\"type\": \"text\", \"text\"}) "
                                          "are supported",
                           i, k);
        }
        sb_putn(&b, json_string_value(t), json_string_length(t));
    }
    sb_put(&b, "");
    char **ns = b.t.oom ? NULL : td_realloc(c->strs, (size_t)(c->n_strs + 1) * sizeof *ns);
    if (!ns) {
        td_free(b.t.s);
        return td_fail_nomem("message content");
    }
    c->strs = ns;
    c->strs[c->n_strs++] = b.t.s;
    *out = (str){b.t.s, b.t.n};
    return TD_OK;
}

static td_status render_family_json(td_chat_family f, const char *messages_json, size_t len,
                                    const td_chat_params *params, char **text, size_t **spans, size_t *n_spans) {
    if (text) *text = NULL;
    if (!messages_json || !text) return td_fail(TD_ERR_INVALID_ARG, "td_chat_render_json: NULL argument");
    json_t *root;
    td_status st = td_json_load_bytes(messages_json, len, "messages", &root);
    if (st != TD_OK) return st;
    conv c = {0};
    c.owned[c.n_owned++] = root;
    if (!json_is_array(root)) st = td_fail(TD_ERR_FORMAT, "messages: not a JSON array");
    else if (json_array_size(root) > (1u << 20)) st = td_fail(TD_ERR_INVALID_ARG, "messages: too many messages");
    else {
        c.n = (int32_t)json_array_size(root);
        if (c.n && !(c.m = td_calloc((size_t)c.n, sizeof *c.m))) st = td_fail_nomem("messages");
    }
    for (int32_t i = 0; st == TD_OK && i < c.n; i++) {
        const json_t *o = json_array_get(root, (size_t)i), *v;
        if (!json_is_object(o)) {
            st = td_fail(TD_ERR_FORMAT, "messages[%d]: not an object", i);
            break;
        }
        if (!json_is_string(v = json_object_get(o, "role"))) {
            st = td_fail(TD_ERR_FORMAT, "messages[%d].role: missing or not a string", i);
            break;
        }
        c.m[i].role = (str){json_string_value(v), json_string_length(v)};
        if ((st = content_of(&c, json_object_get(o, "content"), i, &c.m[i].content)) != TD_OK) break;
        v = json_object_get(o, "reasoning_content");
        if (json_is_string(v)) {
            c.m[i].has_reasoning = 1;
            c.m[i].reasoning = (str){json_string_value(v), json_string_length(v)};
        } else if (v && !json_is_null(v)) {
            st = td_fail(TD_ERR_FORMAT, "messages[%d].reasoning_content: not a string", i);
            break;
        }
        v = json_object_get(o, "tool_calls");
        if (json_is_array(v)) c.m[i].tool_calls = v;
        else if (v && !json_is_null(v)) {
            st = td_fail(TD_ERR_FORMAT, "messages[%d].tool_calls: not an array", i);
            break;
        }
    }
    if (st == TD_OK) st = render(f, &c, params, text, spans, n_spans);
    conv_free(&c);
    return st;
}

td_status td_chat_render_family_json(td_chat_family f, const char *messages_json, size_t len,
                                     const td_chat_params *params, char **text) {
    return render_family_json(f, messages_json, len, params, text, NULL, NULL);
}

td_status td_chat_tokenize_family_json(td_chat_family f, const td_tokenizer *tok, const char *messages_json,
                                       size_t len, const td_chat_params *params, unsigned flags, int32_t **ids,
                                       size_t *n_ids) {
    char *t = NULL;
    size_t *spans = NULL, n_spans = 0;
    td_status st = render_family_json(f, messages_json, len, params, &t, &spans, &n_spans);
    if (st == TD_OK && (flags & TD_CHAT_ALLOW_SPECIAL))
        st = td_tokenize(tok, t, strlen(t), TD_TOKENIZE_PARSE_SPECIAL, ids, n_ids);
    else if (st == TD_OK) st = td_tokenize_spans(tok, t, strlen(t), TD_TOKENIZE_PARSE_SPECIAL, spans, n_spans, ids, n_ids);
    td_free(spans);
    td_free(t);
    return st;
}

td_status td_chat_render_json(const td_model *model, const char *messages_json, size_t len,
                              const td_chat_params *params, char **text) {
    if (text) *text = NULL;
    if (!model) return td_fail(TD_ERR_INVALID_ARG, "td_chat_render_json: NULL model");
    td_chat_family f = TD_CHAT_NONE;
    td_status st = family_of_model(model, &f);
    if (st != TD_OK) return st;
    return td_chat_render_family_json(f, messages_json, len, params, text);
}

/* ---- reasoning ------------------------------------------------------------------------------------------------ */

td_status td_chat_split_reasoning(const char *text, size_t len, int thinking_open, char **reasoning,
                                  char **content) {
    if (reasoning) *reasoning = NULL;
    if (content) *content = NULL;
    if (!text || !reasoning || !content) return td_fail(TD_ERR_INVALID_ARG, "td_chat_split_reasoning: NULL argument");
    str t = {text, len}, r = S(""), c = t;
    long close = find_first(t, "</think>");
    if (close >= 0) {
        r = (str){t.p, (size_t)close};
        str after = {t.p + close + 8, t.n - (size_t)close - 8};
        str lead = lstrip_nl(r);
        if (starts(lead, "<think>")) r = (str){lead.p + 7, lead.n - 7};
        r = strip_nl(r);
        c = lstrip_nl(after);
    } else {
        str lead = lstrip_nl(t);
        if (starts(lead, "<think>")) {
            r = lstrip_nl((str){lead.p + 7, lead.n - 7});
            c = S("");
        } else if (thinking_open) {
            r = lstrip_nl(t);
            c = S("");
        }
    }
    *reasoning = td_strndup(r.p, r.n);
    *content = td_strndup(c.p, c.n);
    if (!*reasoning || !*content) {
        td_free(*reasoning);
        td_free(*content);
        *reasoning = *content = NULL;
        return td_fail_nomem("the split reasoning");
    }
    return TD_OK;
}
