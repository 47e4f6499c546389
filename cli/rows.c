#include "rows.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

/* A JSON string or integer as a new C string (ids may be written as numbers). */
static char *text_of(const json_t *v) {
    if (json_is_string(v)) return strndup(json_string_value(v), json_string_length(v));
    if (json_is_integer(v)) {
        char buf[32];
        snprintf(buf, sizeof buf, "%lld", (long long)json_integer_value(v));
        return strdup(buf);
    }
    return NULL;
}

void row_free(row *r) {
    free(r->id), free(r->family), free(r->question), free(r->answer), free(r->evidence);
    for (int i = 0; i < r->n_options; i++) {
        free(r->option_ids ? r->option_ids[i] : NULL);
        free(r->descriptions ? r->descriptions[i] : NULL);
    }
    free(r->option_ids), free(r->descriptions);
    memset(r, 0, sizeof *r);
}

/* Parses one line into r; on error writes the reason into why and returns -1. */
static int parse_row(const char *line, size_t len, int require_answer, row *r, char *why, size_t wn) {
    json_error_t e;
    json_t *o = json_loadb(line, len, JSON_REJECT_DUPLICATES, &e);
    int rc = -1;
    if (!o) {
        snprintf(why, wn, "column %d: malformed JSON: %s", e.column, e.text);
        return -1;
    }
    if (!json_is_object(o)) {
        snprintf(why, wn, "expected a JSON object");
        goto done;
    }
    json_t *id = json_object_get(o, "id"), *q = json_object_get(o, "question"), *opts = json_object_get(o, "options");
    json_t *ev = json_object_get(o, "evidence"), *fam = json_object_get(o, "family"), *ans = json_object_get(o, "answer");
    if (!(r->id = text_of(id))) {
        snprintf(why, wn, "missing \"id\" (a string or an integer)");
        goto done;
    }
    if (!json_is_string(q)) {
        snprintf(why, wn, "row \"%s\": missing string \"question\"", r->id);
        goto done;
    }
    r->question = strndup(json_string_value(q), json_string_length(q));
    if (ev && !json_is_null(ev)) {
        if (!json_is_string(ev)) {
            snprintf(why, wn, "row \"%s\": \"evidence\" must be a string", r->id);
            goto done;
        }
        r->evidence_len = json_string_length(ev);
        r->evidence = malloc(r->evidence_len + 1);
        memcpy(r->evidence, json_string_value(ev), r->evidence_len + 1);
    }
    if (fam && !json_is_null(fam) && !(r->family = text_of(fam))) {
        snprintf(why, wn, "row \"%s\": \"family\" must be a string", r->id);
        goto done;
    }
    if (!json_is_array(opts)) {
        snprintf(why, wn, "row \"%s\": missing array \"options\"", r->id);
        goto done;
    }
    if (json_array_size(opts) == 0) {
        snprintf(why, wn, "row \"%s\": the option list is empty", r->id);
        goto done;
    }
    if (json_array_size(opts) > TD_DECIDE_MAX_OPTIONS) {
        snprintf(why, wn, "row \"%s\": %zu options; at most %d (letters A..T) are supported", r->id,
                 json_array_size(opts), TD_DECIDE_MAX_OPTIONS);
        goto done;
    }
    r->n_options = (int)json_array_size(opts);
    r->option_ids = calloc((size_t)r->n_options, sizeof *r->option_ids);
    r->descriptions = calloc((size_t)r->n_options, sizeof *r->descriptions);
    for (int k = 0; k < r->n_options; k++) {
        json_t *op = json_array_get(opts, (size_t)k);
        json_t *d = json_object_get(op, "description");
        if (!json_is_object(op) || !(r->option_ids[k] = text_of(json_object_get(op, "id")))) {
            snprintf(why, wn, "row \"%s\": options[%d] needs an \"id\"", r->id, k);
            goto done;
        }
        if (!json_is_string(d)) {
            snprintf(why, wn, "row \"%s\": options[%d] (\"%s\") needs a string \"description\"", r->id, k,
                     r->option_ids[k]);
            goto done;
        }
        r->descriptions[k] = strndup(json_string_value(d), json_string_length(d));
        for (int j = 0; j < k; j++)
            if (strcmp(r->option_ids[j], r->option_ids[k]) == 0) {
                snprintf(why, wn, "row \"%s\": duplicate option id \"%s\"", r->id, r->option_ids[k]);
                goto done;
            }
    }
    if (ans && !json_is_null(ans)) {
        if (!(r->answer = text_of(ans))) {
            snprintf(why, wn, "row \"%s\": \"answer\" must be an option id", r->id);
            goto done;
        }
        int found = 0;
        for (int k = 0; k < r->n_options && !found; k++) found = strcmp(r->option_ids[k], r->answer) == 0;
        if (!found && require_answer) {
            snprintf(why, wn, "row \"%s\": answer \"%s\" is not among the options", r->id, r->answer);
            goto done;
        }
    } else if (require_answer) {
        snprintf(why, wn, "row \"%s\": missing \"answer\"", r->id);
        goto done;
    }
    rc = 0;
done:
    json_decref(o);
    return rc;
}

int rows_load(const char *cmd, const char *path, int require_answer, int skip_bad, rows *out, int *skipped) {
    memset(out, 0, sizeof *out);
    if (skipped) *skipped = 0;
    FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
    if (!f) return cli_error(cmd, "%s: cannot open", path);
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    int lineno = 0, cap_rows = 0, rc = 0;
    while ((len = getline(&line, &cap, f)) >= 0) {
        lineno++;
        size_t i = 0;
        while (i < (size_t)len && (line[i] == ' ' || line[i] == '\t' || line[i] == '\r' || line[i] == '\n')) i++;
        if (i == (size_t)len) continue;
        if (out->n == cap_rows) {
            cap_rows = cap_rows ? cap_rows * 2 : 64;
            row *nv = realloc(out->v, (size_t)cap_rows * sizeof *nv);
            if (!nv) {
                rc = cli_error(cmd, "out of memory");
                break;
            }
            out->v = nv;
        }
        row *r = &out->v[out->n];
        memset(r, 0, sizeof *r);
        r->line = lineno;
        char why[512];
        if (parse_row(line, (size_t)len, require_answer, r, why, sizeof why) != 0) {
            fprintf(stderr, "typedecide %s: %s:%d: %s\n", cmd, path, lineno, why);
            row_free(r);
            if (skip_bad) {
                if (skipped) (*skipped)++;
                continue;
            }
            rc = 1;
            break;
        }
        out->n++;
    }
    free(line);
    if (f != stdin) fclose(f);
    if (rc) rows_free(out);
    return rc;
}

void rows_free(rows *r) {
    for (int i = 0; i < r->n; i++) row_free(&r->v[i]);
    free(r->v);
    memset(r, 0, sizeof *r);
}

td_criterion row_criterion(const row *r) {
    td_criterion c;
    c.id = r->id;
    c.question = r->question;
    c.n_options = r->n_options;
    c.option_ids = (const char *const *)r->option_ids;
    c.descriptions = (const char *const *)r->descriptions;
    return c;
}
