/* Criteria and fixture rows from JSONL: {"id", "family", "evidence", "question", "options": [{"id",
 * "description"}], "answer"}, one per line. Every problem names its source and line; with TD_ROWS_SKIP_BAD the bad
 * lines are recorded and the rest kept. Used by decide, evaluate and whatever reads criteria next. */
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "typedecide.h"
#include "util/alloc.h"
#include "util/error.h"
#include "util/json.h"
#include "util/fileio.h"
#include "util/grow.h"
#include "util/hashmap.h"

/* A row and the strings it owns (the td_row points into them). */
typedef struct row_mem {
    td_row row;
    char *id, *family, *question, *answer, *evidence;
    char **ids, **descs;
    int32_t n_alloc; /* entries of ids / descs allocated (freed even when parsing stopped half-way) */
} row_mem;

struct td_rows {
    row_mem *v;
    int32_t n;
    size_t cap;
    char **bad; /* "SOURCE:LINE: what is wrong", in the order found */
    int32_t n_bad;
    size_t cap_bad;
    uint64_t hash;
};

static void row_mem_free(row_mem *r) {
    td_free(r->id), td_free(r->family), td_free(r->question), td_free(r->answer), td_free(r->evidence);
    for (int32_t i = 0; i < r->n_alloc; i++) {
        td_free(r->ids ? r->ids[i] : NULL);
        td_free(r->descs ? r->descs[i] : NULL);
    }
    td_free(r->ids), td_free(r->descs);
    memset(r, 0, sizeof *r);
}

void td_rows_free(td_rows *rows) {
    if (!rows) return;
    for (int32_t i = 0; i < rows->n; i++) row_mem_free(&rows->v[i]);
    for (int32_t i = 0; i < rows->n_bad; i++) td_free(rows->bad[i]);
    td_free(rows->v);
    td_free(rows->bad);
    td_free(rows);
}

enum { PARSE_OK = 0, PARSE_BAD = 1, PARSE_NOMEM = 2 };

/* Parses one line into r. On a bad line writes the reason into why. */
static int parse_row(const char *line, size_t len, unsigned flags, row_mem *r, char *why, size_t wn) {
    json_error_t e;
    int rc = PARSE_BAD, oom = 0;
    json_t *o = td_json_loadb(line, len, JSON_REJECT_DUPLICATES, &e, &oom);
    if (!o) {
        snprintf(why, wn, "column %d: malformed JSON: %s", e.column, e.text);
        return oom ? PARSE_NOMEM : PARSE_BAD;
    }
#define BAD(...)                                                                                                \
    do {                                                                                                        \
        if (!oom) snprintf(why, wn, __VA_ARGS__);                                                               \
        goto done;                                                                                              \
    } while (0)
#define NOMEM()                                                                                                 \
    do {                                                                                                        \
        oom = 1;                                                                                                \
        goto done;                                                                                              \
    } while (0)
    if (!json_is_object(o)) BAD("expected a JSON object");
    json_t *id = json_object_get(o, "id"), *q = json_object_get(o, "question"), *opts = json_object_get(o, "options");
    json_t *ev = json_object_get(o, "evidence"), *fam = json_object_get(o, "family"), *ans = json_object_get(o, "answer");
    if (!(r->id = td_json_id(id, &oom))) BAD("missing \"id\" (a string or an integer)");
    if (!json_is_string(q)) BAD("row \"%s\": missing string \"question\"", r->id);
    if (!(r->question = td_strndup(json_string_value(q), json_string_length(q)))) NOMEM();
    if (ev && !json_is_null(ev)) {
        if (!json_is_string(ev)) BAD("row \"%s\": \"evidence\" must be a string", r->id);
        r->row.evidence_len = json_string_length(ev);
        if (!(r->evidence = td_malloc(r->row.evidence_len + 1))) NOMEM();
        memcpy(r->evidence, json_string_value(ev), r->row.evidence_len + 1);
    }
    if (fam && !json_is_null(fam) && !(r->family = td_json_id(fam, &oom))) BAD("row \"%s\": \"family\" must be a string", r->id);
    if (!json_is_array(opts)) BAD("row \"%s\": missing array \"options\"", r->id);
    size_t n_opts = json_array_size(opts);
    if (n_opts == 0) BAD("row \"%s\": the option list is empty", r->id);
    if (n_opts > TD_DECIDE_MAX_OPTIONS)
        BAD("row \"%s\": %zu options; at most %d (letters A..T) are supported", r->id, n_opts, TD_DECIDE_MAX_OPTIONS);
    r->ids = td_calloc(n_opts, sizeof *r->ids);
    r->descs = td_calloc(n_opts, sizeof *r->descs);
    if (!r->ids || !r->descs) NOMEM();
    r->n_alloc = (int32_t)n_opts;
    for (int32_t k = 0; k < (int32_t)n_opts; k++) {
        json_t *op = json_array_get(opts, (size_t)k);
        json_t *d = json_object_get(op, "description");
        if (!json_is_object(op) || !(r->ids[k] = td_json_id(json_object_get(op, "id"), &oom)))
            BAD("row \"%s\": options[%d] needs an \"id\"", r->id, k);
        if (!json_is_string(d)) BAD("row \"%s\": options[%d] (\"%s\") needs a string \"description\"", r->id, k, r->ids[k]);
        if (!(r->descs[k] = td_strndup(json_string_value(d), json_string_length(d)))) NOMEM();
        for (int32_t j = 0; j < k; j++)
            if (strcmp(r->ids[j], r->ids[k]) == 0) BAD("row \"%s\": duplicate option id \"%s\"", r->id, r->ids[k]);
    }
    if (ans && !json_is_null(ans)) {
        if (!(r->answer = td_json_id(ans, &oom))) BAD("row \"%s\": \"answer\" must be an option id", r->id);
        int found = 0;
        for (size_t k = 0; k < n_opts && !found; k++) found = strcmp(r->ids[k], r->answer) == 0;
        if (!found && (flags & TD_ROWS_ANSWER)) BAD("row \"%s\": answer \"%s\" is not among the options", r->id, r->answer);
    } else if (flags & TD_ROWS_ANSWER) {
        BAD("row \"%s\": missing \"answer\"", r->id);
    }
    if ((flags & TD_ROWS_EVIDENCE) && !r->evidence) BAD("row \"%s\" has no \"evidence\"", r->id);
#undef BAD
#undef NOMEM
    r->row.family = r->family;
    r->row.answer = r->answer;
    r->row.evidence = r->evidence;
    r->row.criterion.id = r->id;
    r->row.criterion.question = r->question;
    r->row.criterion.n_options = (int32_t)n_opts;
    r->row.criterion.option_ids = (const char *const *)r->ids;
    r->row.criterion.descriptions = (const char *const *)r->descs;
    rc = PARSE_OK;
done:
    json_decref(o);
    return oom ? PARSE_NOMEM : rc;
}

/* Records a bad line (with TD_ROWS_SKIP_BAD) or fails with its message. */
static td_status bad_line(td_rows *rs, unsigned flags, const char *name, int32_t line, const char *why) {
    if (!(flags & TD_ROWS_SKIP_BAD)) return td_fail(TD_ERR_FORMAT, "%s:%d: %s", name, line, why);
    char **nb = td_grow(rs->bad, &rs->cap_bad, (size_t)rs->n_bad + 1, sizeof *nb, 16);
    if (!nb) return td_fail_nomem("the list of bad rows");
    rs->bad = nb;
    size_t n = strlen(name) + strlen(why) + 32;
    char *msg = td_malloc(n);
    if (!msg) return td_fail_nomem("the list of bad rows");
    snprintf(msg, n, "%s:%d: %s", name, line, why);
    rs->bad[rs->n_bad++] = msg;
    return TD_OK;
}

static uint64_t fnv1a64(const char *s, size_t n) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 0x100000001b3ull;
    return h;
}

/* A repeated row id is a bad row: the later one goes (or the load fails), the first stays. */
static td_status drop_duplicate_ids(td_rows *rs, unsigned flags, const char *name) {
    td_strmap seen;
    if (td_strmap_init(&seen, (size_t)rs->n + 1) != 0) return td_fail_nomem("the row ids");
    td_status st = TD_OK;
    int32_t kept = 0;
    for (int32_t i = 0; i < rs->n; i++) {
        row_mem *r = &rs->v[i];
        int32_t first;
        if (st == TD_OK && td_strmap_get(&seen, r->id, strlen(r->id), &first)) {
            char why[512];
            snprintf(why, sizeof why, "duplicate row id \"%s\" (first on line %d)", r->id, rs->v[first].row.line);
            st = bad_line(rs, flags, name, r->row.line, why);
            row_mem_free(r);
            continue;
        }
        if (st != TD_OK) { /* after a failure: drop the rest */
            row_mem_free(r);
            continue;
        }
        if (kept != i) rs->v[kept] = *r;
        td_strmap_put(&seen, rs->v[kept].id, strlen(rs->v[kept].id), kept); /* sized for every row: never full */
        kept++;
    }
    rs->n = kept;
    td_strmap_free(&seen);
    return st;
}

td_status td_rows_parse(const char *data, size_t len, const char *name, unsigned flags, td_rows **out) {
    if (!out || (!data && len)) return td_fail(TD_ERR_INVALID_ARG, "td_rows_parse: NULL argument");
    *out = NULL;
    if (!name) name = "rows";
    td_rows *rs = td_calloc(1, sizeof *rs);
    if (!rs) return td_fail_nomem("rows");
    rs->hash = fnv1a64(data ? data : "", len);
    td_status st = TD_OK;
    int32_t lineno = 0;
    const char *line;
    size_t n, at = 0;
    while (st == TD_OK && td_jsonl_next(data, len, &at, &line, &n, &lineno)) {
        row_mem *nv = td_grow(rs->v, &rs->cap, (size_t)rs->n + 1, sizeof *nv, 64);
        if (!nv) {
            st = td_fail_nomem("rows");
            break;
        }
        rs->v = nv;
        row_mem *r = &rs->v[rs->n];
        memset(r, 0, sizeof *r);
        r->row.line = lineno;
        char why[512];
        int pr = parse_row(line, n, flags, r, why, sizeof why);
        if (pr == PARSE_OK) {
            rs->n++;
            continue;
        }
        row_mem_free(r);
        st = pr == PARSE_NOMEM ? td_fail(TD_ERR_NOMEM, "%s:%d: out of memory reading the row", name, lineno)
                               : bad_line(rs, flags, name, lineno, why);
    }
    if (st == TD_OK && (flags & TD_ROWS_UNIQUE_IDS)) st = drop_duplicate_ids(rs, flags, name);
    if (st != TD_OK) {
        td_rows_free(rs);
        return st;
    }
    *out = rs;
    return TD_OK;
}

td_status td_rows_load(const char *path, unsigned flags, td_rows **out) {
    if (!path || !out) return td_fail(TD_ERR_INVALID_ARG, "td_rows_load: NULL argument");
    *out = NULL;
    char *data;
    size_t len;
    td_status st = td_read_file(path, &data, &len);
    if (st != TD_OK) return st;
    st = td_rows_parse(data, len, path, flags, out);
    td_free(data);
    return st;
}

int32_t td_rows_count(const td_rows *rows) { return rows ? rows->n : 0; }

const td_row *td_rows_get(const td_rows *rows, int32_t i) {
    return rows && i >= 0 && i < rows->n ? &rows->v[i].row : NULL;
}

int32_t td_rows_n_bad(const td_rows *rows) { return rows ? rows->n_bad : 0; }

const char *td_rows_bad(const td_rows *rows, int32_t i) {
    return rows && i >= 0 && i < rows->n_bad ? rows->bad[i] : NULL;
}

uint64_t td_rows_hash(const td_rows *rows) { return rows ? rows->hash : 0; }
