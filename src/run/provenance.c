/* The provenance record beside a results file (run_internal.h says what it holds and why). */
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "run/run_internal.h"
#include "util/alloc.h"
#include "util/error.h"
#include "util/json.h"

#define TD_PROV_FORMAT 1

char *td_prov_path(const char *results_path) {
    size_t n = strlen(results_path);
    char *p = td_malloc(n + 17);
    if (p) memcpy(p, results_path, n), memcpy(p + n, ".provenance.json", 17);
    return p;
}

void td_prov_free(td_prov *p) {
    if (!p) return;
    td_free(p->identity);
    td_free(p->errors);
    memset(p, 0, sizeof *p);
}

static void put_hash(json_t *o, const char *key, uint64_t h) {
    char s[17];
    snprintf(s, sizeof s, "%016" PRIx64, h);
    json_object_set_new(o, key, json_string(s));
}

td_status td_prov_write(const char *path, const td_prov *p, unsigned wflags) {
    uint64_t f0 = td_alloc_failures();
    json_t *o = json_object(), *in = json_object(), *cr = p->has_criteria ? json_object() : json_null();
    json_object_set_new(o, "typedecide_run", json_integer(TD_PROV_FORMAT));
    json_object_set_new(in, "bytes", json_integer(p->input_bytes));
    put_hash(in, "hash", p->input_hash);
    json_object_set_new(in, "documents", json_integer(p->input_docs));
    if (p->has_lines_sum) put_hash(in, "lines", p->lines_sum);
    json_object_set_new(o, "input", in);
    if (p->has_criteria) {
        json_object_set_new(cr, "bytes", json_integer(p->criteria_bytes));
        put_hash(cr, "hash", p->criteria_hash);
    }
    json_object_set_new(o, "criteria", cr);
    json_object_set_new(o, "identity", json_string(p->identity ? p->identity : ""));
    json_object_set_new(o, "shard", json_integer(p->shard));
    json_object_set_new(o, "n_shards", json_integer(p->n_shards));
    json_object_set_new(o, "share_documents", json_integer(p->share_docs));
    json_object_set_new(o, "errors", p->errors ? json_string(p->errors) : json_null());
    json_object_set_new(o, "complete", json_boolean(p->complete));
    char *text = td_json_dumps_checked(o, JSON_COMPACT | JSON_PRESERVE_ORDER, f0);
    json_decref(o);
    if (!text) return td_fail_nomem("a provenance record");
    td_wfile w;
    td_status st = td_wfile_open(&w, path, wflags);
    if (st == TD_OK) {
        fputs(text, w.f);
        fputc('\n', w.f);
        st = td_wfile_commit(&w);
    }
    td_free(text);
    return st;
}

static td_status bad(const char *path, const char *what) {
    return td_fail(TD_ERR_FORMAT, "%s: not a provenance record of typedecide run: %s", path, what);
}

static int get_hash(const json_t *o, const char *key, uint64_t *h) {
    const char *s = json_string_value(json_object_get(o, key));
    char *end;
    if (!s || strlen(s) != 16) return -1;
    unsigned long long v = strtoull(s, &end, 16);
    if (*end) return -1;
    *h = (uint64_t)v;
    return 0;
}

static int get_i64(const json_t *o, const char *key, int64_t lo, int64_t *v) {
    const json_t *x = json_object_get(o, key);
    if (!json_is_integer(x) || json_integer_value(x) < lo) return -1;
    *v = (int64_t)json_integer_value(x);
    return 0;
}

td_status td_prov_read(const char *path, td_prov *p, int *missing) {
    memset(p, 0, sizeof *p);
    *missing = 0;
    char *text;
    size_t n;
    if (!td_file_exists(path) && !td_is_dir(path)) {
        *missing = 1;
        return td_fail(TD_ERR_IO, "%s: no such file", path);
    }
    td_status st = td_read_file_max(path, TD_RUN_MAX_PROVENANCE, "a provenance record may have", &text, &n);
    if (st != TD_OK) return st;
    json_t *o;
    st = td_json_load_bytes(text, n, path, &o);
    td_free(text);
    if (st != TD_OK) return st;
    const json_t *in = json_object_get(o, "input"), *cr = json_object_get(o, "criteria");
    int64_t v = 0, shard = 0, nsh = 0;
    const json_t *errv = json_object_get(o, "errors");
    const char *id = json_string_value(json_object_get(o, "identity")), *err = json_string_value(errv);
    if (!json_is_object(o)) st = bad(path, "not a JSON object");
    else if (get_i64(o, "typedecide_run", 1, &v) || v != TD_PROV_FORMAT) st = bad(path, "\"typedecide_run\" is not 1");
    else if (!json_is_object(in) || get_i64(in, "bytes", 0, &p->input_bytes) || get_hash(in, "hash", &p->input_hash) ||
             get_i64(in, "documents", 0, &p->input_docs))
        st = bad(path, "\"input\" is not {\"bytes\", \"hash\", \"documents\"}");
    else if (!(json_is_null(cr) || (json_is_object(cr) && !get_i64(cr, "bytes", 0, &p->criteria_bytes) &&
                                    !get_hash(cr, "hash", &p->criteria_hash))))
        st = bad(path, "\"criteria\" is neither null nor {\"bytes\", \"hash\"}");
    else if (!id || !(err || json_is_null(errv)) || (err && (!*err || strlen(err) != json_string_length(errv))))
        st = bad(path, "\"identity\" is not a string or \"errors\" neither null nor a file name");
    else if (get_i64(o, "n_shards", 1, &nsh) || nsh > INT32_MAX || get_i64(o, "shard", 0, &shard) || shard >= nsh)
        st = bad(path, "\"shard\" is not in 0 .. \"n_shards\" - 1");
    else if (get_i64(o, "share_documents", 0, &p->share_docs) || p->share_docs > p->input_docs)
        st = bad(path, "\"share_documents\" is not a count within the input's");
    else if (!json_is_boolean(json_object_get(o, "complete"))) st = bad(path, "\"complete\" is not true or false");
    else if (json_object_get(in, "lines") && get_hash(in, "lines", &p->lines_sum))
        st = bad(path, "\"input\".\"lines\" is not 16 hexadecimal digits");
    if (st == TD_OK) {
        p->has_lines_sum = json_object_get(in, "lines") != NULL;
        p->has_criteria = json_is_object(cr);
        p->shard = (int32_t)shard, p->n_shards = (int32_t)nsh;
        p->complete = json_is_true(json_object_get(o, "complete"));
        p->identity = td_strndup(id, json_string_length(json_object_get(o, "identity")));
        p->errors = err ? td_strdup(err) : NULL;
        if (!p->identity || (err && !p->errors)) st = td_fail_nomem("a provenance record");
    }
    json_decref(o);
    if (st != TD_OK) td_prov_free(p);
    return st;
}

int td_prov_differs(const td_prov *a, const td_prov *b, char *why, size_t n) {
    if (a->input_bytes != b->input_bytes || a->input_hash != b->input_hash || a->input_docs != b->input_docs)
        snprintf(why, n, "another input (%lld bytes, %lld documents, hash %016" PRIx64 " against %lld bytes, %lld "
                         "documents, hash %016" PRIx64 ")",
                 (long long)a->input_bytes, (long long)a->input_docs, a->input_hash, (long long)b->input_bytes,
                 (long long)b->input_docs, b->input_hash);
    else if (a->has_criteria != b->has_criteria || a->criteria_bytes != b->criteria_bytes ||
             a->criteria_hash != b->criteria_hash)
        snprintf(why, n, "another criteria file (%s against %s)", a->has_criteria ? "one" : "none",
                 b->has_criteria ? (a->has_criteria ? "another" : "one") : "none");
    else if (strcmp(a->identity ? a->identity : "", b->identity ? b->identity : "") != 0)
        snprintf(why, n, "another model or other settings (%.300s against %.300s)", a->identity ? a->identity : "",
                 b->identity ? b->identity : "");
    else return 0;
    return 1;
}

char *td_prov_errors_path(const td_prov *p, const char *results_path) {
    size_t rl = strlen(results_path);
    if (!p->errors) { /* the default, beside the results file whatever its name now */
        char *s = td_malloc(rl + 8);
        if (s) memcpy(s, results_path, rl), memcpy(s + rl, ".errors", 8);
        return s;
    }
    const char *e = p->errors;
    if (strchr(e, '/')) return td_strdup(e);
    const char *slash = strrchr(results_path, '/');
    size_t dl = slash ? (size_t)(slash - results_path) + 1 : 0, el = strlen(e);
    char *s = td_malloc(dl + el + 1);
    if (s) memcpy(s, results_path, dl), memcpy(s + dl, e, el + 1);
    return s;
}
