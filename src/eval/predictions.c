/* Predictions JSONL, read back: {"id", "family", "answer", "options": [ids in shown order], "probs": [same
 * order], "rotations": [[probs of each rotation, mapped back to the shown order], ...], "forwards",
 * "suffix_tokens", "ms", "unparsed"} per line (what td_eval_write_predictions writes; files made elsewhere need only
 * id, answer, options and probs). The metrics come from these alone. */
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "typedecide_eval.h"
#include "util/alloc.h"
#include "util/error.h"
#include "util/json.h"
#include "eval/eval_internal.h"
#include "util/fileio.h"
#include "util/grow.h"

/* Everything a line owns, freed together. */
typedef struct line_mem {
    char *id, *family, *answer;
    char **options;
    double *probs, *rotations;
    int32_t n_options;
} line_mem;

struct td_predictions {
    td_pred *v;
    line_mem *mem;
    int32_t n;
    size_t cap_v, cap_mem; /* v and mem grow together: the same count each, apart only after a failed grow */
    double forwards, suffix_tokens, ms; /* sums over the lines; negative when a line lacks the field */
};

static void line_free(line_mem *m) {
    td_free(m->id), td_free(m->family), td_free(m->answer), td_free(m->probs), td_free(m->rotations);
    for (int32_t k = 0; k < m->n_options; k++) td_free(m->options ? m->options[k] : NULL);
    td_free(m->options);
    memset(m, 0, sizeof *m);
}

void td_predictions_free(td_predictions *p) {
    if (!p) return;
    for (int32_t i = 0; i < p->n; i++) line_free(&p->mem[i]);
    td_free(p->mem);
    td_free(p->v);
    td_free(p);
}

/* Parses one line's object; -1 with why filled on a bad line (*oom set when it was an allocation). */
static int parse(json_t *o, line_mem *m, td_pred *p, td_predictions *all, int *oom, char *why, size_t wn) {
#define BAD(...) return (*oom ? 0 : snprintf(why, wn, __VA_ARGS__)), -1
    json_t *opts = json_object_get(o, "options"), *probs = json_object_get(o, "probs"), *rot = json_object_get(o, "rotations");
    if (!(m->id = td_json_id(json_object_get(o, "id"), oom))) BAD("missing \"id\"");
    if (!(m->answer = td_json_id(json_object_get(o, "answer"), oom))) BAD("row \"%s\": missing \"answer\"", m->id);
    m->family = td_json_id(json_object_get(o, "family"), oom);
    if (*oom) return -1;
    if (!json_is_array(opts) || json_array_size(opts) < 1 || json_array_size(opts) > TD_DECIDE_MAX_OPTIONS)
        BAD("row \"%s\": \"options\" must list 1 to %d option ids", m->id, TD_DECIDE_MAX_OPTIONS);
    int32_t k = (int32_t)json_array_size(opts);
    if (!json_is_array(probs) || (int32_t)json_array_size(probs) != k)
        BAD("row \"%s\": \"probs\" must have one number per option (%d)", m->id, k);
    m->options = td_calloc((size_t)k, sizeof *m->options);
    m->probs = td_calloc((size_t)k, sizeof *m->probs);
    if (!m->options || !m->probs) return *oom = 1, -1;
    m->n_options = k;
    int found = 0;
    for (int32_t i = 0; i < k; i++) {
        if (!(m->options[i] = td_json_id(json_array_get(opts, (size_t)i), oom))) BAD("row \"%s\": options[%d] is not an id", m->id, i);
        for (int32_t j = 0; j < i; j++)
            if (strcmp(m->options[j], m->options[i]) == 0) BAD("row \"%s\": duplicate option id \"%s\"", m->id, m->options[i]);
        json_t *pv = json_array_get(probs, (size_t)i);
        if (!json_is_number(pv)) BAD("row \"%s\": probs[%d] is not a number", m->id, i);
        m->probs[i] = json_number_value(pv);
        found |= strcmp(m->options[i], m->answer) == 0;
    }
    if (!found) BAD("row \"%s\": answer \"%s\" is not among the options", m->id, m->answer);
    char pwhy[256];
    if (td_check_probs(m->probs, k, "probs", pwhy, sizeof pwhy)) BAD("row \"%s\": %s", m->id, pwhy);
    int32_t nr = 0;
    if (rot && !json_is_null(rot)) {
        if (!json_is_array(rot)) BAD("row \"%s\": \"rotations\" must be an array", m->id);
        nr = (int32_t)json_array_size(rot);
        if (!(m->rotations = td_calloc((size_t)nr * (size_t)k + 1, sizeof *m->rotations))) return *oom = 1, -1;
        for (int32_t q = 0; q < nr; q++) {
            json_t *rq = json_array_get(rot, (size_t)q);
            if (!json_is_array(rq) || (int32_t)json_array_size(rq) != k)
                BAD("row \"%s\": rotations[%d] must have %d numbers", m->id, q, k);
            for (int32_t i = 0; i < k; i++) {
                json_t *v = json_array_get(rq, (size_t)i);
                if (!json_is_number(v)) BAD("row \"%s\": rotations[%d][%d] is not a number", m->id, q, i);
                m->rotations[q * k + i] = json_number_value(v);
            }
            char what[32];
            snprintf(what, sizeof what, "rotations[%d]", q);
            if (td_check_probs(m->rotations + (size_t)q * k, k, what, pwhy, sizeof pwhy)) BAD("row \"%s\": %s", m->id, pwhy);
        }
    }
#undef BAD
    json_t *f = json_object_get(o, "forwards"), *s = json_object_get(o, "suffix_tokens"), *t = json_object_get(o, "ms");
    if (json_is_number(f) && all->forwards >= 0) all->forwards += json_number_value(f);
    else all->forwards = -1;
    if (json_is_number(s) && all->suffix_tokens >= 0) all->suffix_tokens += json_number_value(s);
    else all->suffix_tokens = -1;
    if (json_is_number(t) && all->ms >= 0) all->ms += json_number_value(t);
    else all->ms = -1;
    p->id = m->id;
    p->family = m->family;
    p->answer = m->answer;
    p->n_options = k;
    p->option_ids = (const char *const *)m->options;
    p->probs = m->probs;
    p->n_rotations = nr;
    p->rotations = m->rotations;
    p->unparsed = json_is_true(json_object_get(o, "unparsed"));
    return 0;
}

td_status td_predictions_parse(const char *data, size_t len, const char *name, td_predictions **out) {
    if (!out || (!data && len)) return td_fail(TD_ERR_INVALID_ARG, "td_predictions_parse: NULL argument");
    *out = NULL;
    if (!name) name = "predictions";
    td_predictions *p = td_calloc(1, sizeof *p);
    if (!p) return td_fail_nomem("predictions");
    td_status st = TD_OK;
    int32_t lineno = 0;
    const char *line;
    size_t n, at = 0;
    while (st == TD_OK && td_jsonl_next(data, len, &at, &line, &n, &lineno)) {
        td_pred *nv = td_grow(p->v, &p->cap_v, (size_t)p->n + 1, sizeof *nv, 64);
        if (nv) p->v = nv;
        line_mem *nm = nv ? td_grow(p->mem, &p->cap_mem, (size_t)p->n + 1, sizeof *nm, 64) : NULL;
        if (!nm) {
            st = td_fail_nomem("predictions");
            break;
        }
        p->mem = nm;
        line_mem *m = &p->mem[p->n];
        memset(m, 0, sizeof *m);
        json_error_t e;
        int oom, bad = 1;
        json_t *o = td_json_loadb(line, n, 0, &e, &oom);
        char why[512];
        if (!o) snprintf(why, sizeof why, "%s", e.text);
        else if (!json_is_object(o)) snprintf(why, sizeof why, "expected a JSON object");
        else bad = parse(o, m, &p->v[p->n], p, &oom, why, sizeof why) != 0;
        json_decref(o);
        if (bad) {
            line_free(m);
            st = oom ? td_fail(TD_ERR_NOMEM, "%s:%d: out of memory reading the line", name, lineno)
                     : td_fail(TD_ERR_FORMAT, "%s:%d: %s", name, lineno, why);
            break;
        }
        p->n++;
    }
    if (st != TD_OK) {
        td_predictions_free(p);
        return st;
    }
    *out = p;
    return TD_OK;
}

td_status td_predictions_load(const char *path, td_predictions **out) {
    if (!path || !out) return td_fail(TD_ERR_INVALID_ARG, "td_predictions_load: NULL argument");
    *out = NULL;
    char *data;
    size_t len;
    td_status st = td_read_file(path, &data, &len);
    if (st != TD_OK) return st;
    st = td_predictions_parse(data, len, path, out);
    td_free(data);
    return st;
}

int32_t td_predictions_count(const td_predictions *p) { return p ? p->n : 0; }

const td_pred *td_predictions_get(const td_predictions *p, int32_t i) {
    return p && i >= 0 && i < p->n ? &p->v[i] : NULL;
}

td_status td_predictions_metrics_json(const td_predictions *p, int32_t bins, char **json) {
    if (!p || !json) return td_fail(TD_ERR_INVALID_ARG, "td_predictions_metrics_json: NULL argument");
    td_cost cost = {p->forwards, p->suffix_tokens, p->ms >= 0 ? p->ms / 1e3 : -1};
    return td_metrics_json(p->v, p->n, bins, &cost, json);
}
