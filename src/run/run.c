/* The corpus runner: decisions over a JSONL corpus, streamed, one results line per document, crash-safe and
 * resumable, over a deterministic share of the input (td_run in typedecide.h is the contract).
 *
 * Two passes over the input. The first reads every line's id: repeated ids fail the run before anything is
 * written (in every shard, since a shard sees all ids), and the share's size is known for progress. The second
 * decides the share's documents in input order with td_decide (so a line's bits are those of `typedecide decide`)
 * and appends each finished line with one write(); the files are fsync'ed at checkpoints. A run that dies leaves
 * complete lines, at most one torn line after them, and nothing else: resume cuts the torn line, skips the ids
 * already written, and appends the rest in the same order, so the file ends up as one uninterrupted run's. */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "run/run_internal.h"
#include "util/alloc.h"
#include "util/error.h"
#include "util/hashmap.h"
#include "util/json.h"

#define TD_RUN_MAX_DUPLICATES_NAMED 10

td_run_params td_run_default_params(void) {
    td_run_params p;
    memset(&p, 0, sizeof p);
    p.timing = 1;
    p.n_shards = 1;
    p.checkpoint_docs = 64;
    p.checkpoint_seconds = 10.0;
    p.sync = 1;
    return p;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void note(const td_run_params *p, int level, const char *fmt, ...) TD_PRINTF(3, 4);
static void note(const td_run_params *p, int level, const char *fmt, ...) {
    if (!p->log) return;
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    p->log(p->log_user, level, msg);
}

/* ---- files -------------------------------------------------------------------------------------------------- */

static td_status sync_fd(int fd, const char *path) {
    if (fsync(fd) != 0) return td_fail(TD_ERR_IO, "%s: fsync failed: %s", path, strerror(errno));
    return TD_OK;
}

static int64_t file_size(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0 ? (int64_t)sb.st_size : -1;
}

/* Reads a results (or errors) file of ours: every complete line that is ours adds its id (its line number, for an
 * errors file) to `seen`. With repair, everything from the first line that is not ours (a torn last line, a crash's
 * garbage) is cut off the file; without it, reading stops there with a warning. A missing file is an empty one. */
static td_status scan_ours(const td_run_params *p, const char *path, int errors_file, int repair, td_idset *seen) {
    if (file_size(path) < 0) return TD_OK;
    td_lines r;
    int64_t n_lines = 0;
    td_status st = td_count_lines(path, &n_lines);
    if (st == TD_OK && td_idset_reserve(seen, seen->count + (size_t)n_lines)) st = td_fail_nomem("the ids already written");
    if (st == TD_OK) st = td_lines_open(&r, path);
    if (st != TD_OK) return st;
    int64_t good_end = 0;
    int32_t bad_line = 0, n_ok = 0;
    int got;
    while ((got = td_lines_next(&r)) == 1) {
        if (r.complete && td_line_blank(r.line, r.len)) {
            good_end = r.next;
            continue;
        }
        int32_t line = 0;
        char *id = NULL;
        int ours = r.complete ? td_run_parse_ours(r.line, r.len, errors_file, &line, &id) : 0;
        if (ours < 0) {
            st = td_fail_nomem("the results already written");
            break;
        }
        if (!ours) {
            bad_line = r.lineno;
            break;
        }
        char key[16];
        int kn = snprintf(key, sizeof key, "%d", line);
        int added = errors_file ? td_idset_add(seen, key, (size_t)kn, line, NULL)
                                : td_idset_add(seen, id, strlen(id), line, NULL);
        td_free(id);
        if (added < 0) {
            st = td_fail_nomem("the ids already written");
            break;
        }
        n_ok++;
        good_end = r.next;
    }
    if (got < 0) st = TD_ERR_IO;
    int64_t size = file_size(path);
    td_lines_close(&r);
    if (st != TD_OK || !bad_line) return st;
    if (!repair) {
        note(p, 1, "%s:%d: not a complete line of a results file; the lines after it are not counted", path, bad_line);
        return TD_OK;
    }
    if (truncate(path, (off_t)good_end) != 0)
        return td_fail(TD_ERR_IO, "%s: cannot cut the torn line %d: %s", path, bad_line, strerror(errno));
    note(p, 1, "%s: repaired: cut %lld bytes from line %d on (%d complete lines kept)", path,
         (long long)(size - good_end), bad_line, n_ok);
    return TD_OK;
}

/* Opens a results or errors file for appending: with resume after repairing it, else new (an existing non-empty
 * one only with overwrite). */
static td_status open_output(const td_run_params *p, const char *path, int *fd) {
    int flags = O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC;
    if (!p->resume) {
        if (file_size(path) > 0 && !p->overwrite)
            return td_fail(TD_ERR_STATE, "%s exists: resume continues it, overwrite replaces it", path);
        flags |= O_TRUNC;
    }
    *fd = open(path, flags, 0644);
    if (*fd < 0) return td_fail(TD_ERR_IO, "%s: cannot open for writing: %s", path, strerror(errno));
    return TD_OK;
}

/* ---- the first pass: ids, duplicates, the share's size --------------------------------------------------------- */

static td_status first_pass(const char *input, const td_run_params *p, int64_t *share) {
    td_lines r;
    td_idset ids = {0};
    int64_t n_lines = 0;
    td_status st = td_count_lines(input, &n_lines);
    if (st == TD_OK && td_idset_reserve(&ids, (size_t)n_lines)) st = td_fail_nomem("the document ids");
    if (st == TD_OK) st = td_lines_open(&r, input);
    if (st != TD_OK) {
        td_idset_free(&ids);
        return st;
    }
    char dups[1024] = "";
    size_t dn = 0;
    int64_t n_dups = 0, k = 0;
    int got;
    *share = 0;
    while (st == TD_OK && (got = td_lines_next(&r)) == 1) {
        if (td_line_blank(r.line, r.len)) continue;
        if (r.lineno == INT32_MAX) {
            st = td_fail(TD_ERR_RANGE, "%s: more than %d lines", input, INT32_MAX - 1);
            break;
        }
        if (k++ % p->n_shards == p->shard) ++*share;
        json_error_t e;
        int oom = 0;
        json_t *o = td_json_loadb(r.line, r.len, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &e, &oom);
        char *id = json_is_object(o) ? td_json_id(json_object_get(o, "id"), &oom) : NULL;
        json_decref(o);
        if (oom) {
            td_free(id);
            st = td_fail(TD_ERR_NOMEM, "%s:%d: out of memory reading the line", input, r.lineno);
            break;
        }
        if (!id) continue; /* a bad line: its shard reports it */
        int32_t first = 0;
        int added = td_idset_add(&ids, id, strlen(id), r.lineno, &first);
        if (added < 0) st = td_fail_nomem("the document ids");
        if (added == 0 && n_dups++ < TD_RUN_MAX_DUPLICATES_NAMED && dn < sizeof dups) {
            int w = snprintf(dups + dn, sizeof dups - dn, "%s\"%.64s\" on lines %d and %d", dn ? "; " : "", id,
                             first, r.lineno);
            dn += w > 0 ? (size_t)w : 0;
        }
        td_free(id);
    }
    if (got < 0 && st == TD_OK) st = TD_ERR_IO;
    td_idset_free(&ids);
    td_lines_close(&r);
    if (st == TD_OK && n_dups > 0)
        st = td_fail(TD_ERR_FORMAT, "%s: repeated document ids: %s%s", input, dups,
                     n_dups > TD_RUN_MAX_DUPLICATES_NAMED ? "; and more" : "");
    return st;
}

/* ---- one document ----------------------------------------------------------------------------------------------- */

typedef struct runner {
    td_decider *d;
    const td_run_params *p;
    const char *input, *out_path, *err_path;
    int out_fd, err_fd;
    const td_rows *global;      /* criteria of every document, or NULL */
    td_criterion *crit;         /* the current document's criteria */
    td_decision *dec;
    int32_t crit_cap;
    td_idset done, reported;    /* ids in the results; line numbers in the errors */
    td_run_stats s;
    int64_t since_sync;
    double t0, last_sync;
    char why[2048];             /* a bad line's reason */
} runner;

enum { DOC_OK = 0, DOC_BAD = 1, DOC_FATAL = 2 };

static td_status checkpoint(runner *rn) {
    td_status st = rn->p->sync ? sync_fd(rn->out_fd, rn->out_path) : TD_OK;
    if (st == TD_OK && rn->p->sync) st = sync_fd(rn->err_fd, rn->err_path);
    rn->since_sync = 0;
    rn->last_sync = now_s();
    return st;
}

static td_status maybe_checkpoint(runner *rn) {
    if (++rn->since_sync >= rn->p->checkpoint_docs || now_s() - rn->last_sync >= rn->p->checkpoint_seconds)
        return checkpoint(rn);
    return TD_OK;
}

/* Writes a JSON object as one line (one write()). */
static td_status write_json_line(int fd, const char *path, json_t *o, uint64_t f0) {
    char *s = td_json_dumps_checked(o, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(9), f0);
    if (!s) return td_fail_nomem("a results line");
    size_t n = strlen(s);
    char *line = td_realloc(s, n + 2);
    if (!line) {
        td_free(s);
        return td_fail_nomem("a results line");
    }
    line[n] = '\n', line[n + 1] = 0;
    td_status st = td_run_write_all(fd, path, line, n + 1);
    td_free(line);
    return st;
}

/* Replaces every byte that does not belong to a valid UTF-8 sequence with '?': a message quotes file names and
 * ids, and may have been cut in the middle of a character; the errors file must stay JSON. */
static void utf8_sanitize(char *s) {
    unsigned char *p = (unsigned char *)s;
    while (*p) {
        int n = *p < 0x80 ? 1 : (*p & 0xe0) == 0xc0 && *p >= 0xc2 ? 2 : (*p & 0xf0) == 0xe0 ? 3
                : (*p & 0xf8) == 0xf0 && *p <= 0xf4 ? 4 : 0;
        int ok = n > 0;
        for (int i = 1; i < n && ok; i++) ok = (p[i] & 0xc0) == 0x80;
        if (ok && n == 3) ok = !(p[0] == 0xe0 && p[1] < 0xa0) && !(p[0] == 0xed && p[1] >= 0xa0); /* overlong, surrogate */
        if (ok && n == 4) ok = !(p[0] == 0xf0 && p[1] < 0x90) && !(p[0] == 0xf4 && p[1] >= 0x90);
        if (!ok) {
            *p++ = '?';
            continue;
        }
        p += n;
    }
}

/* Records a bad line (once, however often runs meet it); under strict it then stops the run. */
static td_status bad_line(runner *rn, int32_t lineno, const char *id) {
    rn->s.docs_failed++;
    char key[16];
    int kn = snprintf(key, sizeof key, "%d", lineno);
    char msg[2200];
    snprintf(msg, sizeof msg, "%s:%d: %s", rn->input, lineno, rn->why);
    utf8_sanitize(msg);
    if (!td_idset_has(&rn->reported, key, (size_t)kn, NULL)) {
        uint64_t f0 = td_alloc_failures();
        json_t *o = json_object();
        json_object_set_new(o, "line", json_integer(lineno));
        json_object_set_new(o, "id", id ? json_string(id) : json_null());
        json_object_set_new(o, "error", json_string(msg));
        td_status st = write_json_line(rn->err_fd, rn->err_path, o, f0);
        json_decref(o);
        if (st != TD_OK) return st;
        if (td_idset_add(&rn->reported, key, (size_t)kn, lineno, NULL) < 0) return td_fail_nomem("the errors");
        if ((st = maybe_checkpoint(rn)) != TD_OK) return st;
    }
    if (rn->p->strict) {
        td_status st = checkpoint(rn);
        return st != TD_OK ? st : td_fail(TD_ERR_FORMAT, "%s", msg);
    }
    return TD_OK;
}

#define BAD(...)                                                                                                    \
    do {                                                                                                            \
        snprintf(rn->why, sizeof rn->why, __VA_ARGS__);                                                             \
        rc = DOC_BAD;                                                                                               \
        goto done;                                                                                                  \
    } while (0)

/* The document's criteria: the global ones, then the line's own (parsed as criteria rows into *own). */
static int gather_criteria(runner *rn, json_t *doc, const char *id, int32_t lineno, td_rows **own, int32_t *n) {
    int rc = DOC_OK;
    json_t *cj = json_object_get(doc, "criteria");
    char *text = NULL;
    size_t tn = 0;
    *n = 0;
    if (cj && !json_is_null(cj)) {
        if (!json_is_array(cj)) BAD("document \"%s\": \"criteria\" must be an array of criteria", id);
        for (size_t i = 0; i < json_array_size(cj); i++) { /* one criterion per line: the rows parser's input */
            uint64_t f0 = td_alloc_failures();
            char *c = td_json_dumps_checked(json_array_get(cj, i), JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_ENCODE_ANY, f0);
            size_t cn = c ? strlen(c) : 0;
            char *nt = c ? td_realloc(text, tn + cn + 1) : NULL;
            if (!nt) {
                td_free(c);
                td_fail_nomem("a document's criteria");
                rc = DOC_FATAL;
                goto done;
            }
            text = nt;
            memcpy(text + tn, c, cn);
            text[tn + cn] = '\n';
            tn += cn + 1;
            td_free(c);
        }
        char name[256];
        snprintf(name, sizeof name, "document \"%.64s\": criteria", id);
        td_status st = td_rows_parse(text ? text : "", tn, name, 0, own);
        if (st == TD_ERR_NOMEM) {
            rc = DOC_FATAL;
            goto done;
        }
        if (st != TD_OK) BAD("%s", td_last_error());
        for (int32_t i = 0; i < td_rows_count(*own); i++)
            if (td_rows_get(*own, i)->evidence)
                BAD("document \"%s\": criterion \"%s\" has its own \"evidence\" (the document is the evidence)", id,
                    td_rows_get(*own, i)->criterion.id);
    }
    int32_t ng = td_rows_count(rn->global), no = td_rows_count(*own), total = ng + no;
    if (total == 0) BAD("document \"%s\" has no criteria (no criteria file and no \"criteria\" of its own)", id);
    if (total > rn->crit_cap) {
        td_criterion *nc = td_realloc(rn->crit, (size_t)total * sizeof *nc);
        if (nc) rn->crit = nc;
        td_decision *nd = nc ? td_realloc(rn->dec, (size_t)total * sizeof *nd) : NULL;
        if (nd) rn->dec = nd;
        if (!nc || !nd) {
            td_fail_nomem("a document's criteria");
            rc = DOC_FATAL;
            goto done;
        }
        rn->crit_cap = total;
    }
    for (int32_t i = 0; i < ng; i++) rn->crit[i] = td_rows_get(rn->global, i)->criterion;
    for (int32_t i = 0; i < no; i++) rn->crit[ng + i] = td_rows_get(*own, i)->criterion;
    if (no > 0) { /* ids distinct within the document */
        td_strmap m;
        if (td_strmap_init(&m, (size_t)total) != 0) {
            td_fail_nomem("a document's criteria");
            rc = DOC_FATAL;
            goto done;
        }
        for (int32_t i = 0; i < total && rc == DOC_OK; i++) {
            int32_t j;
            const char *cid = rn->crit[i].id;
            if (td_strmap_get(&m, cid, strlen(cid), &j)) {
                snprintf(rn->why, sizeof rn->why, "document \"%s\": criterion id \"%s\" appears twice", id, cid);
                rc = DOC_BAD;
            }
            td_strmap_put(&m, cid, strlen(cid), i); /* sized for every id: never full */
        }
        td_strmap_free(&m);
    }
    *n = total;
    (void)lineno;
done:
    td_free(text);
    return rc;
}

/* The results line of a decided document. */
static td_status write_result(runner *rn, const char *id, int32_t lineno, int32_t n, double ms) {
    uint64_t f0 = td_alloc_failures();
    const char *letters = td_decider_letters(rn->d);
    json_t *o = json_object(), *decs = json_array();
    json_object_set_new(o, "id", json_string(id));
    json_object_set_new(o, "line", json_integer(lineno));
    for (int32_t i = 0; i < n; i++) {
        const td_criterion *c = &rn->crit[i];
        const td_decision *dc = &rn->dec[i];
        json_t *x = json_object(), *opts = json_array(), *probs = json_array();
        for (int32_t k = 0; k < c->n_options; k++) {
            json_array_append_new(opts, json_string(c->option_ids[k]));
            json_array_append_new(probs, json_real((double)dc->probs[k]));
        }
        char letter[2] = {letters[dc->best], 0};
        json_object_set_new(x, "id", json_string(c->id));
        json_object_set_new(x, "answer", json_string(c->option_ids[dc->best]));
        json_object_set_new(x, "letter", json_string(letter));
        json_object_set_new(x, "options", opts);
        json_object_set_new(x, "probs", probs);
        if (dc->allowed_mass >= 0) json_object_set_new(x, "allowed_mass", json_real((double)dc->allowed_mass));
        json_object_set_new(x, "suffix_tokens", json_integer(dc->suffix_tokens));
        json_array_append_new(decs, x);
    }
    json_object_set_new(o, "decisions", decs);
    if (rn->p->timing) json_object_set_new(o, "ms", json_real((double)(int64_t)(ms * 1000.0 + 0.5) / 1000.0));
    td_status st = write_json_line(rn->out_fd, rn->out_path, o, f0);
    json_decref(o);
    return st;
}

/* One line of the share: skipped when done, else decided and written, or recorded as bad. */
static td_status run_line(runner *rn, const char *text, size_t len, int32_t lineno) {
    json_error_t e;
    int oom = 0, rc = DOC_OK;
    td_rows *own = NULL;
    char *id = NULL;
    td_status st = TD_OK;
    int32_t n = 0;
    double t0;
    json_t *ev;
    json_t *doc = td_json_loadb(text, len, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &e, &oom);
    if (oom) {
        st = td_fail(TD_ERR_NOMEM, "%s:%d: out of memory reading the line", rn->input, lineno);
        goto out;
    }
    if (!doc) BAD("column %d: malformed JSON: %s", e.column, e.text);
    if (!json_is_object(doc)) BAD("expected a JSON object {\"id\", \"evidence\", ...}");
    if (!(id = td_json_id(json_object_get(doc, "id"), &oom))) {
        if (oom) {
            st = td_fail_nomem("a document id");
            goto out;
        }
        BAD("missing \"id\" (a string or an integer)");
    }
    if (td_idset_has(&rn->done, id, strlen(id), NULL)) {
        rn->s.docs_skipped++;
        goto out;
    }
    ev = json_object_get(doc, "evidence");
    if (!json_is_string(ev)) BAD("document \"%s\": missing string \"evidence\"", id);
    rc = gather_criteria(rn, doc, id, lineno, &own, &n);
    if (rc != DOC_OK) goto done;
    t0 = now_s();
    st = td_decide(rn->d, json_string_value(ev), json_string_length(ev), rn->crit, n, rn->dec);
    if (st == TD_ERR_RANGE || st == TD_ERR_FORMAT || st == TD_ERR_INVALID_ARG) { /* the document's fault */
        st = TD_OK;
        BAD("document \"%s\": %s", id, td_last_error());
    }
    if (st != TD_OK) {
        td_fail_context(st, "%s:%d: document \"%s\"", rn->input, lineno, id);
        goto out;
    }
    if ((st = write_result(rn, id, lineno, n, 1e3 * (now_s() - t0))) != TD_OK) goto out;
    rn->s.docs_done++;
    rn->s.criteria += n;
    st = maybe_checkpoint(rn);
    goto out;
done:
    if (rc == DOC_FATAL) st = TD_ERR_NOMEM;
    else if (rc == DOC_BAD) st = bad_line(rn, lineno, id);
out:
    json_decref(doc);
    td_rows_free(own);
    td_free(id);
    return st;
}
#undef BAD

/* ---- the run -------------------------------------------------------------------------------------------------------- */

static td_status load_global(const char *path, td_rows **out) {
    td_status st = td_rows_load(path, TD_ROWS_UNIQUE_IDS, out);
    if (st != TD_OK) return st;
    for (int32_t i = 0; i < td_rows_count(*out); i++) {
        const td_row *r = td_rows_get(*out, i);
        if (r->evidence) {
            st = td_fail(TD_ERR_FORMAT, "%s:%d: criterion \"%s\" has its own \"evidence\"; in a corpus run the "
                                        "documents are the evidence", path, r->line, r->criterion.id);
            td_rows_free(*out);
            *out = NULL;
            return st;
        }
    }
    return TD_OK;
}

td_status td_run(td_decider *d, const char *input_path, const char *out_path, const td_run_params *params,
                 td_run_stats *stats) {
    if (stats) memset(stats, 0, sizeof *stats);
    if (!d || !input_path || !out_path) return td_fail(TD_ERR_INVALID_ARG, "td_run: NULL argument");
    td_run_params p = params ? *params : td_run_default_params();
    if (p.n_shards < 1 || p.shard < 0 || p.shard >= p.n_shards)
        return td_fail(TD_ERR_INVALID_ARG, "shard %d of %d: the shard must be in 0..%d", p.shard, p.n_shards,
                       p.n_shards - 1);
    if (p.checkpoint_docs < 1) p.checkpoint_docs = 1;
    runner rn;
    memset(&rn, 0, sizeof rn);
    rn.d = d, rn.p = &p, rn.input = input_path, rn.out_path = out_path;
    rn.out_fd = rn.err_fd = -1;
    rn.t0 = rn.last_sync = now_s();
    char *err_path = NULL;
    td_rows *global = NULL;
    td_lines r;
    memset(&r, 0, sizeof r);
    r.fd = -1;
    if (p.errors_path) err_path = td_strdup(p.errors_path);
    else if ((err_path = td_malloc(strlen(out_path) + 8))) sprintf(err_path, "%s.errors", out_path);
    rn.err_path = err_path;
    td_status st = err_path ? TD_OK : td_fail_nomem("a file name");
    if (st == TD_OK && strcmp(err_path, out_path) == 0)
        st = td_fail(TD_ERR_INVALID_ARG, "%s: the results and the errors need two files", out_path);
    if (st == TD_OK && p.criteria_path) st = load_global(p.criteria_path, &global);
    rn.global = global;
    if (st == TD_OK) st = first_pass(input_path, &p, &rn.s.docs_total);
    if (st == TD_OK && p.resume) {
        st = scan_ours(&p, out_path, 0, 1, &rn.done);
        if (st == TD_OK) st = scan_ours(&p, err_path, 1, 1, &rn.reported);
        if (st == TD_OK && p.prior_out) st = scan_ours(&p, p.prior_out, 0, 0, &rn.done);
        if (st == TD_OK && p.prior_errors) st = scan_ours(&p, p.prior_errors, 1, 0, &rn.reported);
    }
    int created = st == TD_OK && (file_size(out_path) < 0 || file_size(err_path) < 0);
    if (st == TD_OK) st = open_output(&p, out_path, &rn.out_fd);
    if (st == TD_OK) st = open_output(&p, err_path, &rn.err_fd);
    if (st == TD_OK) st = checkpoint(&rn); /* the repaired (or new) files, on disk */
    if (st == TD_OK && created && p.sync) st = td_run_sync_dir(out_path);
    if (st == TD_OK) st = td_lines_open(&r, input_path);
    int64_t k = 0;
    int got = 0;
    while (st == TD_OK && (got = td_lines_next(&r)) == 1) {
        if (td_line_blank(r.line, r.len)) continue;
        if (k++ % p.n_shards != p.shard) continue;
        st = run_line(&rn, r.line, r.len, r.lineno);
        rn.s.seconds = now_s() - rn.t0;
        if (p.progress) p.progress(p.progress_user, &rn.s);
    }
    if (got < 0 && st == TD_OK) st = TD_ERR_IO;
    if (rn.out_fd >= 0 && rn.err_fd >= 0) { /* whatever happened, what was written is kept */
        td_status st2 = checkpoint(&rn);
        if (st == TD_OK) st = st2;
    }
    if (rn.out_fd >= 0) close(rn.out_fd);
    if (rn.err_fd >= 0) close(rn.err_fd);
    td_lines_close(&r);
    td_idset_free(&rn.done);
    td_idset_free(&rn.reported);
    td_free(rn.crit);
    td_free(rn.dec);
    td_rows_free(global);
    td_free(err_path);
    rn.s.seconds = now_s() - rn.t0;
    if (stats) *stats = rn.s;
    return st;
}
