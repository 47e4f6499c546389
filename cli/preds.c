#include "preds.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

/* Everything a line owns, freed together. */
typedef struct line_mem {
    char *id, *family, *answer;
    char **options;
    double *probs, *rotations;
    int n_options;
} line_mem;

static char *str_of(const json_t *v) {
    if (json_is_string(v)) return strndup(json_string_value(v), json_string_length(v));
    if (json_is_integer(v)) {
        char b[32];
        snprintf(b, sizeof b, "%lld", (long long)json_integer_value(v));
        return strdup(b);
    }
    return NULL;
}

static int parse(json_t *o, line_mem *m, td_pred *p, double *fw, double *st, double *ms, char *why, size_t wn) {
    json_t *opts = json_object_get(o, "options"), *probs = json_object_get(o, "probs"), *rot = json_object_get(o, "rotations");
    if (!(m->id = str_of(json_object_get(o, "id")))) return snprintf(why, wn, "missing \"id\""), -1;
    if (!(m->answer = str_of(json_object_get(o, "answer")))) return snprintf(why, wn, "row \"%s\": missing \"answer\"", m->id), -1;
    m->family = str_of(json_object_get(o, "family"));
    if (!json_is_array(opts) || json_array_size(opts) < 1 || json_array_size(opts) > TD_DECIDE_MAX_OPTIONS)
        return snprintf(why, wn, "row \"%s\": \"options\" must list 1 to %d option ids", m->id, TD_DECIDE_MAX_OPTIONS), -1;
    int k = (int)json_array_size(opts);
    if (!json_is_array(probs) || (int)json_array_size(probs) != k)
        return snprintf(why, wn, "row \"%s\": \"probs\" must have one number per option (%d)", m->id, k), -1;
    m->options = calloc((size_t)k, sizeof *m->options);
    m->probs = calloc((size_t)k, sizeof *m->probs);
    m->n_options = k;
    int found = 0;
    for (int i = 0; i < k; i++) {
        if (!(m->options[i] = str_of(json_array_get(opts, (size_t)i))))
            return snprintf(why, wn, "row \"%s\": options[%d] is not an id", m->id, i), -1;
        for (int j = 0; j < i; j++)
            if (strcmp(m->options[j], m->options[i]) == 0)
                return snprintf(why, wn, "row \"%s\": duplicate option id \"%s\"", m->id, m->options[i]), -1;
        json_t *pv = json_array_get(probs, (size_t)i);
        if (!json_is_number(pv)) return snprintf(why, wn, "row \"%s\": probs[%d] is not a number", m->id, i), -1;
        m->probs[i] = json_number_value(pv);
        found |= strcmp(m->options[i], m->answer) == 0;
    }
    if (!found) return snprintf(why, wn, "row \"%s\": answer \"%s\" is not among the options", m->id, m->answer), -1;
    int nr = 0;
    if (rot && !json_is_null(rot)) {
        if (!json_is_array(rot)) return snprintf(why, wn, "row \"%s\": \"rotations\" must be an array", m->id), -1;
        nr = (int)json_array_size(rot);
        m->rotations = calloc((size_t)(nr * k + 1), sizeof *m->rotations);
        for (int q = 0; q < nr; q++) {
            json_t *rq = json_array_get(rot, (size_t)q);
            if (!json_is_array(rq) || (int)json_array_size(rq) != k)
                return snprintf(why, wn, "row \"%s\": rotations[%d] must have %d numbers", m->id, q, k), -1;
            for (int i = 0; i < k; i++) {
                json_t *v = json_array_get(rq, (size_t)i);
                if (!json_is_number(v)) return snprintf(why, wn, "row \"%s\": rotations[%d][%d] is not a number", m->id, q, i), -1;
                m->rotations[q * k + i] = json_number_value(v);
            }
        }
    }
    json_t *f = json_object_get(o, "forwards"), *s = json_object_get(o, "suffix_tokens"), *t = json_object_get(o, "ms");
    if (json_is_number(f) && *fw >= 0) *fw += json_number_value(f); else *fw = -1;
    if (json_is_number(s) && *st >= 0) *st += json_number_value(s); else *st = -1;
    if (json_is_number(t) && *ms >= 0) *ms += json_number_value(t); else *ms = -1;
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

static void mem_free(line_mem *m, int n) {
    for (int i = 0; i < n; i++) {
        free(m[i].id), free(m[i].family), free(m[i].answer), free(m[i].probs), free(m[i].rotations);
        for (int k = 0; k < m[i].n_options; k++) free(m[i].options ? m[i].options[k] : NULL);
        free(m[i].options);
    }
    free(m);
}

int preds_load(const char *cmd, const char *path, preds *out) {
    memset(out, 0, sizeof *out);
    FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
    if (!f) return cli_error(cmd, "%s: cannot open", path);
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    int lineno = 0, cap_n = 0, rc = 0;
    line_mem *mem = NULL;
    while ((len = getline(&line, &cap, f)) >= 0) {
        lineno++;
        if (strspn(line, " \t\r\n") == (size_t)len) continue;
        if (out->n == cap_n) {
            cap_n = cap_n ? 2 * cap_n : 64;
            out->v = realloc(out->v, (size_t)cap_n * sizeof *out->v);
            mem = realloc(mem, (size_t)cap_n * sizeof *mem);
            if (!out->v || !mem) {
                rc = cli_error(cmd, "out of memory");
                break;
            }
        }
        memset(&mem[out->n], 0, sizeof *mem);
        json_error_t e;
        json_t *o = json_loadb(line, (size_t)len, 0, &e);
        char why[512];
        int bad = !json_is_object(o) ? (snprintf(why, sizeof why, "%s", o ? "expected a JSON object" : e.text), 1)
                                     : parse(o, &mem[out->n], &out->v[out->n], &out->forwards, &out->suffix_tokens,
                                             &out->ms, why, sizeof why) != 0;
        json_decref(o);
        out->n++;
        if (bad) {
            rc = cli_error(cmd, "%s:%d: %s", path, lineno, why);
            break;
        }
    }
    free(line);
    if (f != stdin) fclose(f);
    out->mem = mem;
    if (rc) preds_free(out);
    return rc;
}

void preds_free(preds *p) {
    mem_free(p->mem, p->n);
    free(p->v);
    memset(p, 0, sizeof *p);
}
