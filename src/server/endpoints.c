/* The endpoints that need no generation: /health, /v1/models[/{id}], /tokenize, /detokenize, /v1/decide. */
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "server/server_internal.h"
#include "util/alloc.h"
#include "util/clock.h"
#include "util/strbuf.h"
#include "util/utf8.h"

char *td_server_utf8_clean(const char *s, size_t len, size_t *out_len) {
    char *o = td_malloc(3 * len + 1);
    if (!o) return NULL;
    size_t n = td_utf8_lossy(s, len, TD_UTF8_PER_BYTE, o); /* one U+FFFD a byte (td_detokenize: one a subpart) */
    o[n] = 0;
    if (out_len) *out_len = n;
    return o;
}

void td_ep_health(td_server *s, td_reply *out) {
    json_t *o = json_object();
    pthread_mutex_lock(&s->mu);
    int32_t busy = s->busy;
    pthread_mutex_unlock(&s->mu);
    json_object_set_new(o, "status", json_string("ok"));
    json_object_set_new(o, "requests_admitted", json_integer(busy));
    json_object_set_new(o, "generating", json_integer(td_server_gen_active(s)));
    td_decide_queue_stats(s, o);
    td_reply_json(out, o);
}

/* OpenAI's model object, with what this server adds (max_model_len, architecture, can_generate). */
static json_t *model_json(td_server *s) {
    json_t *m = json_object();
    json_object_set_new(m, "id", json_string(s->model_name));
    json_object_set_new(m, "object", json_string("model"));
    json_object_set_new(m, "created", json_integer(s->created));
    json_object_set_new(m, "owned_by", json_string("typedecide"));
    json_object_set_new(m, "max_model_len", json_integer(s->n_ctx));
    json_object_set_new(m, "architecture", json_string(td_model_arch(s->model)));
    json_object_set_new(m, "can_generate", json_boolean(td_model_can_generate(s->model)));
    return m;
}

void td_ep_models(td_server *s, td_reply *out) {
    json_t *o = json_object(), *data = json_array();
    json_array_append_new(data, model_json(s));
    json_object_set_new(o, "object", json_string("list"));
    json_object_set_new(o, "data", data);
    td_reply_json(out, o);
}

void td_ep_model(td_server *s, const char *id, td_reply *out) {
    if (strcmp(id, s->model_name) != 0) {
        td_reply_fail(out, 404, "invalid_request_error", "model", "model_not_found",
                      "The model '%.200s' does not exist: this server serves '%.200s'", id, s->model_name);
        return;
    }
    td_reply_json(out, model_json(s));
}

static json_t *ids_json(const int32_t *ids, size_t n) {
    json_t *a = json_array();
    for (size_t i = 0; i < n; i++) json_array_append_new(a, json_integer(ids[i]));
    return a;
}

void td_ep_tokenize(td_server *s, const td_req *r, td_reply *out) {
    const td_tokenizer *tok = td_model_tokenizer(s->model);
    char *rendered = NULL;
    const char *text = r->prompt;
    size_t len = r->prompt_len;
    int32_t *ids = NULL;
    size_t n = 0;
    td_status st = TD_OK;
    if (r->msgs) { /* the tokens the chat endpoint would read: message content as text unless allowed */
        size_t rl = 0;
        if (td_server_render_chat(s, r, r->add_generation_prompt, &rendered, &rl, &ids, &n, out) != 0) return;
        text = rendered, len = rl;
    } else {
        st = td_tokenize(tok, text, len, TD_TOKENIZE_PARSE_SPECIAL, &ids, &n);
    }
    if (st != TD_OK) {
        td_reply_fail(out, st == TD_ERR_NOMEM ? 500 : 400, "invalid_request_error", r->msgs ? "messages" : "prompt",
                      NULL, "%s", td_last_error());
        td_free(rendered);
        return;
    }
    json_t *o = json_object();
    json_object_set_new(o, "count", json_integer((json_int_t)n));
    json_object_set_new(o, "max_model_len", json_integer(s->n_ctx));
    json_object_set_new(o, "tokens", ids_json(ids, n));
    json_object_set_new(o, "prompt", json_stringn(text, len));
    td_free(ids);
    td_free(rendered);
    td_reply_json(out, o);
}

void td_ep_detokenize(td_server *s, const td_req *r, td_reply *out) {
    char *text = NULL;
    size_t len = 0, cl = 0;
    td_status st = td_detokenize(td_model_tokenizer(s->model), r->ids, (size_t)r->n_ids, &text, &len);
    if (st != TD_OK) {
        td_reply_fail(out, st == TD_ERR_NOMEM ? 500 : 400, "invalid_request_error", "tokens", NULL, "%s", td_last_error());
        return;
    }
    char *clean = td_server_utf8_clean(text, len, &cl); /* ids may end inside a character: U+FFFD, as vLLM */
    td_free(text);
    if (!clean) {
        td_reply_fail(out, 500, "server_error", NULL, NULL, "out of memory");
        return;
    }
    json_t *o = json_object();
    json_object_set_new(o, "prompt", json_stringn(clean, cl));
    td_free(clean);
    td_reply_json(out, o);
}

/* /v1/decide: the criteria grouped by evidence exactly as `typedecide decide` groups them, and each decision written
 * by td_decision_json: the body holds the CLI's lines verbatim. The groups join the requests waiting beside them in
 * one td_decide_multi call (decide_batch.c): each evidence prefilled once and kept by content, every result
 * bit-identical to the request alone. */
void td_ep_decide(td_server *s, const td_req *r, td_reply *out) {
    if (!td_server_admit(s, out)) return;
    int32_t n = td_rows_count(r->criteria), n_groups = 0;
    size_t cnt = (size_t)n;
    td_decision *dec = td_calloc(cnt, sizeof *dec), *gdec = td_calloc(cnt, sizeof *gdec);
    td_criterion *cs = td_calloc(cnt, sizeof *cs);
    const char **texts = td_calloc(cnt, sizeof *texts);
    size_t *lens = td_calloc(cnt, sizeof *lens);
    int32_t *group = td_calloc(cnt, sizeof *group), *members = td_calloc(cnt, sizeof *members);
    td_decide_group *groups = NULL;
    td_strbuf body = TD_STRBUF_INIT;
    char msg[512] = "";
    td_status st = dec && gdec && cs && texts && lens && group && members ? TD_OK : TD_ERR_NOMEM;
    for (int32_t i = 0; i < n && st == TD_OK; i++) {
        const td_row *row = td_rows_get(r->criteria, i);
        texts[i] = row->evidence ? row->evidence : r->evidence;
        lens[i] = row->evidence ? row->evidence_len : r->evidence_len;
    }
    if (st == TD_OK) st = td_evidence_groups(texts, lens, n, group, members, &n_groups);
    if (st == TD_OK && !(groups = td_calloc((size_t)(n_groups ? n_groups : 1), sizeof *groups))) st = TD_ERR_NOMEM;
    for (int32_t at = 0, g = 0; at < n && st == TD_OK; g++) { /* group g: criteria cs[at..], decisions gdec[at..] */
        groups[g].evidence = texts[members[at]];
        groups[g].len = lens[members[at]];
        groups[g].criteria = cs + at;
        groups[g].out = gdec + at;
        int32_t start = at;
        while (at < n && group[members[at]] == g) cs[at] = td_rows_get(r->criteria, members[at])->criterion, at++;
        groups[g].n = at - start;
    }
    if (st != TD_OK) snprintf(msg, sizeof msg, "%s", td_last_error());
    double t0 = td_now_ms();
    td_decide_job job;
    memset(&job, 0, sizeof job);
    job.groups = groups, job.n_groups = n_groups, job.n_criteria = n;
    if (st == TD_OK && td_decide_queue_run(s, &job, out->client_fd) != 0) { /* the client left before its pass */
        td_server_release(s);
        td_reply_fail(out, 400, "invalid_request_error", NULL, NULL, "the client closed the connection");
        goto done;
    }
    double ms = td_now_ms() - t0;
    long long prefill = 0;
    int cached = 0;
    for (int32_t g = 0; g < n_groups && st == TD_OK; g++) { /* the first group that failed answers, as td_decide's */
        if (groups[g].status != TD_OK) {
            st = groups[g].status;
            snprintf(msg, sizeof msg, "%s", groups[g].error);
            break;
        }
        prefill += groups[g].prefill_tokens;
        cached |= groups[g].head_cached;
    }
    for (int32_t i = 0; i < n && st == TD_OK; i++) dec[members[i]] = gdec[i];
    const char *letters = td_decider_letters(s->decider);
    td_server_release(s);
    if (st == TD_OK) {
        char head[512];
        json_t *name = json_string(s->model_name);
        char *qname = json_dumps(name, JSON_ENCODE_ANY);
        json_decref(name);
        snprintf(head, sizeof head, "{\"object\":\"decision\",\"model\":%s,\"decisions\":[", qname ? qname : "null");
        free(qname);
        td_strbuf_puts(&body, head);
        unsigned flags = r->show_logits ? TD_DECISION_LOGITS : 0u;
        for (int32_t i = 0; i < n && st == TD_OK; i++) {
            char *line = NULL;
            st = td_decision_json(&td_rows_get(r->criteria, i)->criterion, &dec[i], letters, flags, &line);
            if (st == TD_OK) {
                if (i) td_strbuf_putc(&body, ',');
                td_strbuf_puts(&body, line);
            }
            td_free(line);
        }
        snprintf(head, sizeof head,
                 "],\"prefill_tokens\":%lld,\"prefix_cached\":%s,\"evidence_groups\":%d,\"pass_requests\":%d,"
                 "\"pass_criteria\":%d,\"ms\":%.3f}",
                 prefill, cached && prefill == 0 ? "true" : "false", n_groups, job.pass_requests, job.pass_criteria, ms);
        td_strbuf_puts(&body, head);
        if (st == TD_OK && body.oom) st = TD_ERR_NOMEM;
        if (st == TD_OK) {
            out->status = 200;
            out->body = td_strbuf_finish(&body, &out->len);
        } else td_reply_fail(out, 500, "server_error", NULL, NULL, "out of memory while writing the reply");
    } else if (st == TD_ERR_NOMEM) {
        td_reply_fail(out, 500, "server_error", NULL, NULL, "out of memory: %s", msg);
    } else { /* the request's fault: evidence too long for the context, a bad criterion, text that is not UTF-8 */
        const char *param = st == TD_ERR_RANGE ? "evidence" : "criteria";
        td_reply_fail(out, st == TD_ERR_NONFINITE ? 500 : 400, st == TD_ERR_NONFINITE ? "server_error" : "invalid_request_error",
                      param, st == TD_ERR_RANGE ? "context_length_exceeded" : NULL, "%s", msg);
    }
done:
    td_strbuf_free(&body);
    td_free(groups);
    td_free(dec), td_free(gdec), td_free(cs), td_free(texts), td_free(lens), td_free(group), td_free(members);
}
