#include "util/json.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "util/alloc.h"
#include "util/error.h"

json_t *td_json_loadb(const char *data, size_t len, size_t flags, json_error_t *e, int *oom) {
    uint64_t f0 = td_alloc_failures();
    json_t *o = json_loadb(data, len, flags, e);
    *oom = td_alloc_failures() != f0 || (!o && json_error_code(e) == json_error_out_of_memory);
    if (o && *oom) { /* jansson can return an object without the members it could not allocate */
        json_decref(o);
        o = NULL;
    }
    return o;
}

char *td_json_dumps_checked(const json_t *o, size_t flags, uint64_t f0) {
    char *s = td_alloc_failures() == f0 ? json_dumps(o, flags) : NULL;
    char *copy = s && td_alloc_failures() == f0 ? td_strdup(s) : NULL; /* ours, for td_free */
    free(s); /* jansson's, from the C library's allocator */
    return copy;
}

char *td_json_id(const json_t *v, int *oom) {
    char buf[32], *s = NULL;
    if (json_is_string(v)) s = td_strndup(json_string_value(v), json_string_length(v));
    else if (json_is_integer(v)) {
        snprintf(buf, sizeof buf, "%lld", (long long)json_integer_value(v));
        s = td_strdup(buf);
    } else return NULL;
    if (!s) *oom = 1;
    return s;
}

int td_jsonl_next(const char *data, size_t len, size_t *at, const char **line, size_t *n, int32_t *lineno) {
    if (*at == 0 && len >= 3 && memcmp(data, "\xef\xbb\xbf", 3) == 0) *at = 3; /* a UTF-8 byte-order mark */
    while (*at < len) {
        const char *l = data + *at, *nl = memchr(l, '\n', len - *at);
        size_t m = nl ? (size_t)(nl - l) + 1 : len - *at, i = 0;
        *at += m;
        ++*lineno;
        while (i < m && (l[i] == ' ' || l[i] == '\t' || l[i] == '\r' || l[i] == '\n')) i++;
        if (i < m) {
            *line = l;
            *n = m;
            return 1;
        }
    }
    return 0;
}

static td_status from_error(const json_error_t *e, const char *name, int oom) {
    if (oom) return td_fail(TD_ERR_NOMEM, "%s: out of memory parsing the JSON", name);
    return td_fail(TD_ERR_FORMAT, "%s:%d:%d: malformed JSON: %s", name, e->line, e->column, e->text);
}

/* A number beyond int64 ("model_max_length": 1000000000000000019884624838656 in Hugging Face's tokenizer_config.json
 * files) is no id or size anyone reads: such a document is parsed again with every integer as a double, which the
 * typed accessors below take where it is a whole number. */
static int too_big_integer(const json_error_t *e) { return json_error_code(e) == json_error_numeric_overflow; }

td_status td_json_load_file(const char *path, json_t **out) {
    json_error_t e;
    uint64_t f0 = td_alloc_failures();
    *out = json_load_file(path, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &e);
    if (!*out && too_big_integer(&e))
        *out = json_load_file(path, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL | JSON_DECODE_INT_AS_REAL, &e);
    int oom = td_alloc_failures() != f0 || (!*out && json_error_code(&e) == json_error_out_of_memory);
    if (*out && oom) { /* jansson can return an object without the members it could not allocate */
        json_decref(*out);
        *out = NULL;
    }
    if (*out) return TD_OK;
    if (!oom && e.line < 0 && e.position == 0) return td_fail(TD_ERR_IO, "%s: %s", path, e.text);
    return from_error(&e, path, oom);
}

td_status td_json_load_bytes(const char *data, size_t len, const char *name, json_t **out) {
    json_error_t e;
    int oom;
    *out = td_json_loadb(data, len, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &e, &oom);
    if (!*out && !oom && too_big_integer(&e))
        *out = td_json_loadb(data, len, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL | JSON_DECODE_INT_AS_REAL, &e, &oom);
    return *out ? TD_OK : from_error(&e, name, oom);
}

static td_status missing(const char *where, const char *key) {
    return td_fail(TD_ERR_FORMAT, "%s: missing field \"%s\"", where, key);
}

td_status td_json_int(const json_t *obj, const char *key, int required, const char *where, int64_t *out) {
    json_t *v = json_object_get(obj, key);
    if (!v || json_is_null(v)) return required ? missing(where, key) : TD_OK;
    if (json_is_integer(v)) {
        *out = (int64_t)json_integer_value(v);
        return TD_OK;
    }
    if (json_is_real(v)) { /* 1e6 written as a float is still an integer */
        double d = json_real_value(v);
        if (d == floor(d) && fabs(d) < 9.0e15) {
            *out = (int64_t)d;
            return TD_OK;
        }
    }
    return td_fail(TD_ERR_FORMAT, "%s: field \"%s\" must be an integer", where, key);
}

td_status td_json_i32(const json_t *obj, const char *key, int required, const char *where, int32_t *out) {
    int64_t v = *out;
    td_status st = td_json_int(obj, key, required, where, &v);
    if (st != TD_OK) return st;
    if (v < INT32_MIN || v > INT32_MAX)
        return td_fail(TD_ERR_FORMAT, "%s: field \"%s\" = %lld is out of range", where, key, (long long)v);
    *out = (int32_t)v;
    return TD_OK;
}

td_status td_json_num(const json_t *obj, const char *key, int required, const char *where, double *out) {
    json_t *v = json_object_get(obj, key);
    if (!v || json_is_null(v)) return required ? missing(where, key) : TD_OK;
    if (!json_is_number(v)) return td_fail(TD_ERR_FORMAT, "%s: field \"%s\" must be a number", where, key);
    *out = json_number_value(v);
    return TD_OK;
}

td_status td_json_bool(const json_t *obj, const char *key, int required, const char *where, int *out) {
    json_t *v = json_object_get(obj, key);
    if (!v || json_is_null(v)) return required ? missing(where, key) : TD_OK;
    if (!json_is_boolean(v)) return td_fail(TD_ERR_FORMAT, "%s: field \"%s\" must be true or false", where, key);
    *out = json_is_true(v);
    return TD_OK;
}

td_status td_json_str(const json_t *obj, const char *key, int required, const char *where, const char **out) {
    json_t *v = json_object_get(obj, key);
    if (!v || json_is_null(v)) return required ? missing(where, key) : TD_OK;
    if (!json_is_string(v)) return td_fail(TD_ERR_FORMAT, "%s: field \"%s\" must be a string", where, key);
    *out = json_string_value(v);
    return TD_OK;
}
