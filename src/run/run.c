/* The corpus runner: decisions over a JSONL corpus, streamed, one results line per document, crash-safe and
 * resumable, over a deterministic share of the input (td_run in typedecide.h is the contract).
 *
 * Two passes over the input. The first reads every line's id: repeated ids fail the run before anything is
 * written (in every shard, since a shard sees all ids), and the share's size is known for progress; it also hashes
 * the input for the provenance record. The second decides the share's documents in input order with td_decide (so
 * a line's bits are those of `typedecide decide`), or docs_per_pass of them at a time with one td_decide_multi call
 * (the same bits: batch invariance), and appends each finished line in input order with one write(); the files are
 * fsync'ed at checkpoints. A run that dies leaves complete lines, at most one torn line after them, and nothing
 * else: resume checks the provenance, keeps the longest part of the files that is this run's documents in input
 * order, cuts the rest, and appends the documents after it in the same order, so the files end up as one
 * uninterrupted run's. The results file is locked (flock) while a run writes it: a second run on it is refused. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "typedecide_run.h"
#include "run/run_internal.h"
#include "util/alloc.h"
#include "util/clock.h"
#include "util/error.h"
#include "util/hashmap.h"
#include "util/json.h"
#include "util/utf8.h"

#define TD_RUN_MAX_DUPLICATES_NAMED 10
#define TD_RUN_MAX_LINE_DEFAULT ((int64_t)64 << 20)

td_run_params td_run_default_params(void) {
    td_run_params p;
    memset(&p, 0, sizeof p);
    p.timing = 1;
    p.n_shards = 1;
    p.checkpoint_docs = 64;
    p.checkpoint_seconds = 10.0;
    p.sync = 1;
    p.max_line_bytes = TD_RUN_MAX_LINE_DEFAULT;
    p.docs_per_pass = 1;
    return p;
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

static td_status sync_fd(int fd, const char *path) {
    if (fsync(fd) != 0) return td_fail(TD_ERR_IO, "%s: fsync failed: %s", path, strerror(errno));
    return TD_OK;
}

static int64_t file_size(const char *path) {
    struct stat sb;
    return path && stat(path, &sb) == 0 ? (int64_t)sb.st_size : -1;
}

/* 1 when the JSON id is a string holding a NUL: ids are compared as C strings everywhere (the server refuses them
 * too), so "a\u0000b" and "a" would be one id. */
static int id_has_nul(const json_t *v) {
    const char *s = json_string_value(v); /* NULL also for a string jansson could not allocate */
    return s && strlen(s) != json_string_length(v);
}

/* ---- the first pass: ids, duplicates, the share's size, the input's hash --------------------------------------- */

typedef struct first_pass_out {
    int64_t bytes, docs, share;
    uint64_t hash, lines_sum;
    int32_t *share_lines; /* with want_lines: the input line of each document of the share, ascending */
    uint64_t *share_digests; /* with want_lines: their doc_hash */
    td_idset ids;         /* with want_lines: every document's id and input line (resume checks the lines' ids) */
} first_pass_out;

static td_status first_pass(const char *input, const td_run_params *p, int want_lines, first_pass_out *fo) {
    td_lines r;
    td_idset ids = {0};
    td_hash64 h;
    int64_t n_lines = 0;
    memset(fo, 0, sizeof *fo);
    td_hash64_init(&h);
    td_status st = td_count_lines(input, &n_lines);
    if (st == TD_OK && td_idset_reserve(&ids, (size_t)n_lines)) st = td_fail_nomem("the document ids");
    if (st == TD_OK && want_lines &&
        (!(fo->share_lines = td_malloc(((size_t)n_lines / (size_t)p->n_shards + 1) * sizeof *fo->share_lines)) ||
         !(fo->share_digests = td_malloc(((size_t)n_lines / (size_t)p->n_shards + 1) * sizeof *fo->share_digests))))
        st = td_fail_nomem("the document lines");
    if (st == TD_OK) st = td_lines_open(&r, input);
    if (st != TD_OK) {
        td_idset_free(&ids);
        td_free(fo->share_lines);
        td_free(fo->share_digests);
        fo->share_lines = NULL, fo->share_digests = NULL;
        return st;
    }
    r.hash = &h;
    r.digest = 1;
    r.skip_bom = 1;
    r.max_len = (size_t)p->max_line_bytes;
    char dups[1024] = "";
    size_t dn = 0;
    int64_t n_dups = 0, k = 0, cap_lines = n_lines / p->n_shards + 1;
    int got;
    while (st == TD_OK && (got = td_lines_next(&r)) == 1) {
        if (!r.too_long && td_line_blank(r.line, r.len)) continue;
        if (r.lineno == INT32_MAX) {
            st = td_fail(TD_ERR_RANGE, "%s: more than %d lines", input, INT32_MAX - 1);
            break;
        }
        if (k++ % p->n_shards == p->shard) {
            if (fo->share_lines && fo->share < cap_lines)
                fo->share_lines[fo->share] = r.lineno, fo->share_digests[fo->share] = r.line_digest;
            fo->share++;
        }
        fo->docs++;
        fo->lines_sum += td_run_doc_term(r.lineno, r.line_digest);
        if (r.too_long) continue; /* a bad line: its shard reports it */
        json_error_t e;
        int oom = 0;
        json_t *o = td_json_loadb(r.line, r.len, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &e, &oom);
        const json_t *idv = json_is_object(o) ? json_object_get(o, "id") : NULL;
        char *id = idv && !id_has_nul(idv) ? td_json_id(idv, &oom) : NULL;
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
    fo->bytes = r.bytes;
    fo->hash = td_hash64_final(&h);
    if (want_lines) fo->ids = ids;
    else td_idset_free(&ids);
    td_lines_close(&r);
    if (st == TD_OK && n_dups > 0)
        st = td_fail(TD_ERR_FORMAT, "%s: repeated document ids: %s%s", input, dups,
                     n_dups > TD_RUN_MAX_DUPLICATES_NAMED ? "; and more" : "");
    if (st == TD_OK && fo->share_lines && fo->share > cap_lines) /* the file grew between the count and the read */
        st = td_fail(TD_ERR_STATE, "%s: changed while it was read", input);
    if (st != TD_OK) {
        td_free(fo->share_lines);
        td_free(fo->share_digests);
        fo->share_lines = NULL, fo->share_digests = NULL;
        td_idset_free(&fo->ids);
    }
    return st;
}

/* ---- one document ----------------------------------------------------------------------------------------------- */

typedef struct runner {
    td_decider *d;
    const td_run_params *p;
    const char *input, *out_path, *err_path;
    int out_fd, err_fd;
    const td_rows *global;      /* criteria of every document, or NULL */
    struct doc_slot *win;       /* the documents read ahead (params.docs_per_pass), in input order */
    td_decide_group *groups;    /* [docs_per_pass]: the window's td_decide_multi call */
    int32_t win_cap, n_win;
    td_idset done, reported;    /* input line numbers in the results; in the errors */
    const int32_t *share;       /* resume: the input line of every document of the share, ascending */
    const uint64_t *digests;    /* resume: their doc_hash (NULL: not checked, td_run_repair) */
    uint64_t doc_hash;          /* the current document's */
    const td_idset *ids;        /* resume: every document's id and its input line */
    int64_t n_share;
    td_run_stats s;
    int64_t since_sync;
    double t0, last_sync;
    char why[2048];             /* a bad line's reason */
} runner;

enum { DOC_OK = 0, DOC_BAD = 1, DOC_FATAL = 2 };

/* A document read and checked, waiting for its decision (alone, or with the window's other documents in one
 * td_decide_multi call): everything its results or errors line needs. */
typedef struct doc_slot {
    int32_t lineno;
    uint64_t doc_hash;
    json_t *doc;          /* the parsed line: the evidence is borrowed from it */
    char *id;             /* NULL when the line has none (a bad line) */
    td_rows *own;         /* the line's own criteria */
    td_criterion *crit;   /* [n]: the criteria file's, then the line's own */
    td_decision *dec;
    int32_t n, cap;       /* cap: room in crit and dec, kept from document to document */
    const char *ev;
    size_t ev_len;
    char *why;            /* a bad line (found before deciding): its reason; NULL: to be decided */
} doc_slot;

/* Forgets a slot's document (its criteria arrays stay for the next one). */
static void slot_clear(doc_slot *ds) {
    json_decref(ds->doc);
    td_rows_free(ds->own);
    td_free(ds->id);
    td_free(ds->why);
    ds->doc = NULL, ds->own = NULL, ds->id = NULL, ds->why = NULL, ds->n = 0, ds->ev = NULL, ds->ev_len = 0;
}

static td_status checkpoint(runner *rn) {
    td_status st = rn->p->sync ? sync_fd(rn->out_fd, rn->out_path) : TD_OK;
    if (st == TD_OK && rn->p->sync) st = sync_fd(rn->err_fd, rn->err_path);
    rn->since_sync = 0;
    rn->last_sync = td_now_s();
    return st;
}

static td_status maybe_checkpoint(runner *rn) {
    if (++rn->since_sync >= rn->p->checkpoint_docs || td_now_s() - rn->last_sync >= rn->p->checkpoint_seconds)
        return checkpoint(rn);
    return TD_OK;
}

/* Writes a JSON object as one line (one write()), with the document's "doc_hash" and the line's "check" last
 * (run_internal.h). */
static td_status write_json_line(int fd, const char *path, json_t *o, uint64_t doc_hash, uint64_t f0) {
    char hx[17];
    snprintf(hx, sizeof hx, "%016" PRIx64, doc_hash);
    json_object_set_new(o, "doc_hash", json_string(hx));
    char *s = td_json_dumps_checked(o, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(9), f0);
    if (!s) return td_fail_nomem("a results line");
    size_t n = strlen(s);
    char *line = td_realloc(s, n + TD_RUN_CHECK_TAIL + 2);
    if (!line) {
        td_free(s);
        return td_fail_nomem("a results line");
    }
    n = td_run_seal_line(line, n);
    td_status st = td_run_write_all(fd, path, line, n);
    td_free(line);
    return st;
}

/* Replaces every byte that does not belong to a valid UTF-8 sequence with '?': a message quotes file names and
 * ids, and may have been cut in the middle of a character; the errors file must stay JSON. */
static void utf8_sanitize(char *s) {
    unsigned char *p = (unsigned char *)s;
    for (size_t i = 0, n = strlen(s); i < n;) {
        int k = td_utf8_char(p + i, n - i);
        if (k <= 0) p[i++] = '?'; /* one per byte, a cut character included */
        else i += (size_t)k;
    }
}

/* Records a bad line (once, however often runs meet it); under strict it then stops the run. */
static td_status bad_line(runner *rn, int32_t lineno, const char *id) {
    rn->s.docs_failed++;
    char msg[2200];
    snprintf(msg, sizeof msg, "%s:%d: %s", rn->input, lineno, rn->why);
    utf8_sanitize(msg);
    if (!td_lineset_has(&rn->reported, lineno)) {
        uint64_t f0 = td_alloc_failures();
        json_t *o = json_object();
        json_object_set_new(o, "line", json_integer(lineno));
        json_object_set_new(o, "id", id ? json_string(id) : json_null());
        json_object_set_new(o, "error", json_string(msg));
        td_status st = write_json_line(rn->err_fd, rn->err_path, o, rn->doc_hash, f0);
        json_decref(o);
        if (st != TD_OK) return st;
        if (td_lineset_add(&rn->reported, lineno) < 0) return td_fail_nomem("the errors");
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
static int gather_criteria(runner *rn, doc_slot *ds, json_t *doc, const char *id, td_rows **own, int32_t *n) {
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
    if (total > ds->cap) {
        td_criterion *nc = td_realloc(ds->crit, (size_t)total * sizeof *nc);
        if (nc) ds->crit = nc;
        td_decision *nd = nc ? td_realloc(ds->dec, (size_t)total * sizeof *nd) : NULL;
        if (nd) ds->dec = nd;
        if (!nc || !nd) {
            td_fail_nomem("a document's criteria");
            rc = DOC_FATAL;
            goto done;
        }
        ds->cap = total;
    }
    for (int32_t i = 0; i < ng; i++) ds->crit[i] = td_rows_get(rn->global, i)->criterion;
    for (int32_t i = 0; i < no; i++) ds->crit[ng + i] = td_rows_get(*own, i)->criterion;
    if (no > 0) { /* ids distinct within the document */
        td_strmap m;
        if (td_strmap_init(&m, (size_t)total) != 0) {
            td_fail_nomem("a document's criteria");
            rc = DOC_FATAL;
            goto done;
        }
        for (int32_t i = 0; i < total && rc == DOC_OK; i++) {
            int32_t j;
            const char *cid = ds->crit[i].id;
            if (td_strmap_get(&m, cid, strlen(cid), &j)) {
                snprintf(rn->why, sizeof rn->why, "document \"%s\": criterion id \"%s\" appears twice", id, cid);
                rc = DOC_BAD;
            }
            td_strmap_put(&m, cid, strlen(cid), i); /* sized for every id: never full */
        }
        td_strmap_free(&m);
    }
    *n = total;
done:
    td_free(text);
    return rc;
}

/* The results line of a decided document. */
static td_status write_result(runner *rn, const doc_slot *ds, double ms) {
    uint64_t f0 = td_alloc_failures();
    const char *letters = td_decider_letters(rn->d);
    json_t *o = json_object(), *decs = json_array();
    json_object_set_new(o, "id", json_string(ds->id));
    json_object_set_new(o, "line", json_integer(ds->lineno));
    for (int32_t i = 0; i < ds->n; i++) {
        const td_criterion *c = &ds->crit[i];
        const td_decision *dc = &ds->dec[i];
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
    td_status st = write_json_line(rn->out_fd, rn->out_path, o, rn->doc_hash, f0);
    json_decref(o);
    return st;
}

/* One line of the share (not done yet), read and checked into a slot: TD_OK (ds->why set for a bad line), or a
 * failure that stops the run (out of memory). */
static td_status prepare_line(runner *rn, doc_slot *ds, const char *text, size_t len, int too_long) {
    json_error_t e;
    int oom = 0, rc = DOC_OK;
    td_status st = TD_OK;
    json_t *ev;
    if (too_long)
        BAD("the line is longer than %lld bytes, the most a document line may have", (long long)rn->p->max_line_bytes);
    ds->doc = td_json_loadb(text, len, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &e, &oom);
    if (oom) return td_fail(TD_ERR_NOMEM, "%s:%d: out of memory reading the line", rn->input, ds->lineno);
    if (!ds->doc) BAD("column %d: malformed JSON: %s", e.column, e.text);
    if (!json_is_object(ds->doc)) BAD("expected a JSON object {\"id\", \"evidence\", ...}");
    if (!(ds->id = td_json_id(json_object_get(ds->doc, "id"), &oom))) {
        if (oom) return td_fail_nomem("a document id");
        BAD("missing \"id\" (a string or an integer)");
    }
    if (id_has_nul(json_object_get(ds->doc, "id"))) {
        td_free(ds->id);
        ds->id = NULL;
        BAD("the \"id\" holds a NUL character");
    }
    ev = json_object_get(ds->doc, "evidence");
    if (!json_is_string(ev)) BAD("document \"%s\": missing string \"evidence\"", ds->id);
    rc = gather_criteria(rn, ds, ds->doc, ds->id, &ds->own, &ds->n);
    ds->ev = json_string_value(ev);
    ds->ev_len = json_string_length(ev);
done:
    if (rc == DOC_FATAL) st = TD_ERR_NOMEM;
    else if (rc == DOC_BAD && !(ds->why = td_strdup(rn->why))) st = td_fail_nomem("a bad line's reason");
    return st;
}
#undef BAD

/* The document's fault among td_decide's statuses: a bad line, not a failure of the run. */
static int doc_fault(td_status st) { return st == TD_ERR_RANGE || st == TD_ERR_FORMAT || st == TD_ERR_INVALID_ARG; }

/* Writes a slot's line: its results line (dst == TD_OK; ms: its "ms"), or its errors line (a bad line, or a decision
 * refused for the document's fault: derr is td_decide's message); another dst, or any with call_failed (the window's
 * td_decide_multi call itself failed), stops the run (derr: its message). */
static td_status finish_slot(runner *rn, const doc_slot *ds, td_status dst, const char *derr, double ms, int call_failed) {
    td_status st;
    rn->doc_hash = ds->doc_hash;
    if (ds->why || (doc_fault(dst) && !call_failed)) {
        if (ds->why) snprintf(rn->why, sizeof rn->why, "%s", ds->why);
        else snprintf(rn->why, sizeof rn->why, "document \"%s\": %s", ds->id, derr);
        st = bad_line(rn, ds->lineno, ds->id);
    } else if (dst != TD_OK) {
        if (derr != td_last_error()) td_fail(dst, "%s", derr);
        st = td_fail_context(dst, "%s:%d: document \"%s\"", rn->input, ds->lineno, ds->id);
    } else if ((st = write_result(rn, ds, ms)) == TD_OK) {
        rn->s.docs_done++;
        rn->s.criteria += ds->n;
        st = maybe_checkpoint(rn);
    }
    rn->s.seconds = td_now_s() - rn->t0;
    if (rn->p->progress) rn->p->progress(rn->p->progress_user, &rn->s);
    return st;
}

/* Decides the documents read ahead and writes their lines in input order, as one document at a time would: with one
 * document per pass by td_decide, else by one td_decide_multi call (each result bit-identical to td_decide's for
 * that document alone), whose wall time is shared evenly by the documents decided in it ("ms"). The first failure
 * in input order stops it; the documents after it are not written (a resumed run decides them). */
static td_status flush_window(runner *rn) {
    int32_t nw = rn->n_win, ng = 0;
    td_status st = TD_OK;
    rn->n_win = 0;
    if (rn->p->docs_per_pass <= 1) { /* today's path: one td_decide */
        doc_slot *ds = &rn->win[0];
        double t0 = td_now_s();
        td_status dst = ds->why ? TD_OK : td_decide(rn->d, ds->ev, ds->ev_len, ds->crit, ds->n, ds->dec);
        st = finish_slot(rn, ds, dst, td_last_error(), 1e3 * (td_now_s() - t0), 0);
        slot_clear(ds);
        return st;
    }
    for (int32_t i = 0; i < nw; i++) {
        doc_slot *ds = &rn->win[i];
        if (ds->why) continue;
        td_decide_group *g = &rn->groups[ng++];
        memset(g, 0, sizeof *g);
        g->evidence = ds->ev, g->len = ds->ev_len, g->criteria = ds->crit, g->n = ds->n, g->out = ds->dec;
    }
    double t0 = td_now_s();
    td_status call = ng ? td_decide_multi(rn->d, rn->groups, ng) : TD_OK;
    double ms = ng ? 1e3 * (td_now_s() - t0) / ng : 0;
    char call_err[512];
    snprintf(call_err, sizeof call_err, "%s", call != TD_OK ? td_last_error() : "");
    for (int32_t i = 0, k = 0; i < nw; i++) {
        doc_slot *ds = &rn->win[i];
        if (st == TD_OK) {
            if (ds->why) st = finish_slot(rn, ds, TD_OK, "", 0, 0);
            else {
                td_decide_group *g = &rn->groups[k++];
                if (call != TD_OK) st = finish_slot(rn, ds, call, call_err, 0, 1);
                else if (doc_fault(g->status) && strlen(g->error) + 1 >= sizeof g->error &&
                         td_decide(rn->d, ds->ev, ds->ev_len, ds->crit, ds->n, ds->dec) == g->status)
                    st = finish_slot(rn, ds, g->status, td_last_error(), ms, 0); /* td_decide's whole message */
                else st = finish_slot(rn, ds, g->status, g->error, ms, 0);
            }
        }
        slot_clear(ds);
    }
    return st;
}

/* ---- resume: which part of the files is this run's, and the repair -------------------------------------------- */

/* 1 when line is the input line of a document of the share (share: ascending); *at receives its index. */
static int in_share_at(const runner *rn, int32_t line, int64_t *at) {
    int64_t lo = 0, hi = rn->n_share;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (rn->share[mid] < line) lo = mid + 1;
        else hi = mid;
    }
    *at = lo;
    return lo < rn->n_share && rn->share[lo] == line;
}

static int in_share(const runner *rn, int32_t line) {
    int64_t at;
    return in_share_at(rn, line, &at);
}

/* 1 when a line is about the document on its input line: its doc_hash is that line's (a line of another corpus
 * with the same id and line number is not this run's), and for results its id is that document's. Errors lines'
 * ids are not checked: a bad line may have no id. */
static int id_matches(const runner *rn, int errors_file, const td_run_line *l) {
    int32_t at = 0;
    int64_t k;
    if (rn->digests && (!in_share_at(rn, l->line, &k) || rn->digests[k] != l->doc_hash)) return 0;
    if (errors_file || !rn->ids || !l->id) return 1;
    return td_idset_has(rn->ids, l->id, strlen(l->id), &at) && at == l->line;
}

typedef struct line_list {
    int32_t *v;
    size_t n, cap;
} line_list;

static int list_push(line_list *k, int32_t line) {
    if (k->n == k->cap) {
        size_t cap = k->cap ? 2 * k->cap : 256;
        int32_t *nv = td_realloc(k->v, cap * sizeof *nv);
        if (!nv) return -1;
        k->v = nv, k->cap = cap;
    }
    k->v[k->n++] = line;
    return 0;
}

/* What the first look at a results or errors file found. */
typedef struct scan_info {
    line_list kept;       /* input lines of the lines kept: complete, ours, of the share, ascending */
    int64_t good_end;     /* where the kept part ends when nothing before it is dropped */
    int64_t size;
    int32_t cut_line;     /* the first line that is not ours (torn, garbage), 0: none */
    int dropped;          /* a line before the cut is dropped: the file is rewritten, not only cut */
} scan_info;

/* Reads a file of ours: the rule for what stays is the same here and in compact(): a complete line of ours (results
 * or errors) about a document of this share whose input line is above the last one kept; reading stops at the
 * first line that is not ours (a torn line, a crash's zeros). */
static td_status scan_file(runner *rn, const char *path, int errors_file, scan_info *si) {
    memset(si, 0, sizeof *si);
    si->size = file_size(path);
    if (si->size <= 0) return TD_OK;
    td_lines r;
    td_status st = td_lines_open(&r, path);
    if (st != TD_OK) return st;
    r.max_len = TD_RUN_MAX_OUTPUT_LINE;
    int32_t last = 0;
    int got;
    while ((got = td_lines_next(&r)) == 1) {
        if (!r.complete || r.too_long) {
            si->cut_line = r.lineno;
            break;
        }
        if (td_line_blank(r.line, r.len)) {
            si->dropped = 1;
            continue;
        }
        td_run_line l;
        int ours = td_run_parse_line(r.line, r.len, errors_file, &l);
        int32_t line = l.line;
        int id_ok = ours == 1 && id_matches(rn, errors_file, &l);
        td_free(l.id);
        if (ours < 0) {
            st = td_fail_nomem("the lines already written");
            break;
        }
        if (!ours) {
            si->cut_line = r.lineno;
            break;
        }
        if (line <= last || !in_share(rn, line) || !id_ok) {
            si->dropped = 1;
            continue;
        }
        if (list_push(&si->kept, line)) {
            st = td_fail_nomem("the lines already written");
            break;
        }
        last = line;
        si->good_end = r.next;
    }
    if (got < 0 && st == TD_OK) st = TD_ERR_IO;
    td_lines_close(&r);
    return st;
}

/* The first document of the share, in input order, that neither file nor the prior files cover while a later one is
 * covered: resuming after it would write its line after theirs, so everything from it on is decided again.
 * INT32_MAX when there is none. */
static int32_t first_gap(const runner *rn, const line_list *res, const line_list *err) {
    int32_t top = 0;
    if (res->n && res->v[res->n - 1] > top) top = res->v[res->n - 1];
    if (err->n && err->v[err->n - 1] > top) top = err->v[err->n - 1];
    size_t i = 0, j = 0;
    for (int64_t s = 0; s < rn->n_share && rn->share[s] <= top; s++) {
        int32_t L = rn->share[s];
        while (i < res->n && res->v[i] < L) i++;
        while (j < err->n && err->v[j] < L) j++;
        int covered = (i < res->n && res->v[i] == L) || (j < err->n && err->v[j] == L) ||
                      td_lineset_has(&rn->done, L) || td_lineset_has(&rn->reported, L);
        if (!covered) return L;
    }
    return INT32_MAX;
}

typedef struct drops {
    int64_t dup, order, foreign, after_gap, blank, wrong_id, edited, kept;
} drops;

/* Rewrites a file in place with the lines scan_file() keeps that are below `gap`: each moves down over what is
 * dropped (a kept line never lands past where it was read, so nothing unread is overwritten), and the file is cut
 * after the last. A crash meanwhile leaves kept lines, then old bytes that the next resume drops again. */
static td_status compact(runner *rn, int fd, const char *path, int errors_file, int32_t gap, td_idset *set,
                         drops *dr, int32_t *cut_line) {
    memset(dr, 0, sizeof *dr);
    *cut_line = 0;
    td_lines r;
    td_status st = td_lines_open(&r, path);
    if (st != TD_OK) return st;
    r.max_len = TD_RUN_MAX_OUTPUT_LINE;
    int64_t w = 0;
    int32_t last = 0, seen = 0; /* the last line kept; the highest line met */
    int got;
    while (st == TD_OK && (got = td_lines_next(&r)) == 1) {
        if (!r.complete || r.too_long) {
            *cut_line = r.lineno;
            break;
        }
        if (td_line_blank(r.line, r.len)) {
            dr->blank++;
            continue;
        }
        td_run_line l;
        int ours = td_run_parse_line(r.line, r.len, errors_file, &l);
        int32_t line = l.line;
        int id_ok = ours == 1 && id_matches(rn, errors_file, &l);
        td_free(l.id);
        if (ours < 0) st = td_fail_nomem("the lines already written");
        if (ours <= 0) {
            if (ours == 0) *cut_line = r.lineno;
            break;
        }
        int32_t prev_seen = seen;
        if (ours == 2) { /* not as the run wrote it: its document is decided again */
            dr->edited++;
            continue;
        }
        if (line > seen) seen = line;
        if (!in_share(rn, line)) dr->foreign++;
        else if (!id_ok) dr->wrong_id++;
        else if (line <= last) ++*(td_lineset_has(set, line) ? &dr->dup : &dr->order);
        else if (line >= gap) ++*(line < prev_seen ? &dr->order : &dr->after_gap);
        else {
            r.line[r.len] = '\n'; /* the buffer always has room for the NUL, which the newline replaces */
            if (r.offset != w) st = td_run_pwrite_all(fd, path, r.line, r.len + 1, w);
            if (st == TD_OK && td_lineset_add(set, line) < 0) st = td_fail_nomem("the lines already written");
            w += (int64_t)r.len + 1;
            last = line;
            dr->kept++;
        }
    }
    if (got < 0 && st == TD_OK) st = TD_ERR_IO;
    td_lines_close(&r);
    if (st == TD_OK && ftruncate(fd, (off_t)w) != 0)
        st = td_fail(TD_ERR_IO, "%s: cannot cut it after %lld bytes: %s", path, (long long)w, strerror(errno));
    return st;
}

static void report_repair(runner *rn, const char *path, const scan_info *si, const drops *dr, int32_t cut_line,
                          int64_t kept) {
    if (cut_line)
        note(rn->p, 1, "%s: repaired: cut %lld bytes from line %d on (%lld complete lines kept)", path,
             (long long)(si->size - si->good_end), cut_line, (long long)kept);
    if (!dr) return;
    char msg[1024] = "";
    size_t n = 0;
    const int64_t counts[] = {dr->dup, dr->order, dr->foreign, dr->after_gap, dr->blank, dr->wrong_id, dr->edited};
    const char *what[][2] = {{"duplicated line", "duplicated lines"},
                             {"line out of input order", "lines out of input order"},
                             {"line of no document of this share", "lines of no document of this share"},
                             {"line after a missing document (decided again)",
                              "lines after a missing document (decided again)"},
                             {"blank line", "blank lines"},
                             {"line of another document (its id or doc_hash is not its input line's)",
                              "lines of other documents (their ids or doc_hash are not their input lines')"},
                             {"line changed since the run wrote it (its check does not match; decided again)",
                              "lines changed since the run wrote them (their check does not match; decided again)"}};
    for (int i = 0; i < 7; i++)
        if (counts[i] && n < sizeof msg) {
            int k = snprintf(msg + n, sizeof msg - n, "%s%lld %s", n ? ", " : "", (long long)counts[i],
                             what[i][counts[i] != 1]);
            n += k > 0 ? (size_t)k : 0;
        }
    if (n) note(rn->p, 1, "%s: dropped %s", path, msg);
}

/* Brings the results and errors files back to what one uninterrupted run of the same share would have written up
 * to some document: their lines of this share in input order, without duplicates, up to the first document that
 * neither covers; everything else is cut (and reported). rn->done and rn->reported receive the kept lines. */
static td_status repair(runner *rn) {
    scan_info res, err;
    td_status st = scan_file(rn, rn->out_path, 0, &res);
    if (st == TD_OK) st = scan_file(rn, rn->err_path, 1, &err);
    else memset(&err, 0, sizeof err);
    int32_t gap = st == TD_OK ? first_gap(rn, &res.kept, &err.kept) : INT32_MAX;
    const struct {
        scan_info *si;
        int fd;
        const char *path;
        td_idset *set;
    } f[2] = {{&res, rn->out_fd, rn->out_path, &rn->done}, {&err, rn->err_fd, rn->err_path, &rn->reported}};
    for (int k = 0; k < 2 && st == TD_OK; k++) {
        scan_info *si = f[k].si;
        int rewrite = si->dropped || (si->kept.n && si->kept.v[si->kept.n - 1] >= gap);
        if (rewrite) {
            drops dr;
            int32_t cut = 0;
            st = compact(rn, f[k].fd, f[k].path, k, gap, f[k].set, &dr, &cut);
            if (st == TD_OK) report_repair(rn, f[k].path, si, &dr, cut, dr.kept);
            continue;
        }
        if (td_idset_reserve(f[k].set, f[k].set->count + si->kept.n)) st = td_fail_nomem("the lines already written");
        for (size_t i = 0; i < si->kept.n && st == TD_OK; i++)
            if (td_lineset_add(f[k].set, si->kept.v[i]) < 0) st = td_fail_nomem("the lines already written");
        if (st == TD_OK && si->size > si->good_end) {
            if (ftruncate(f[k].fd, (off_t)si->good_end) != 0)
                st = td_fail(TD_ERR_IO, "%s: cannot cut the torn line %d: %s", f[k].path, si->cut_line, strerror(errno));
            else report_repair(rn, f[k].path, si, NULL, si->cut_line ? si->cut_line : 1, (int64_t)si->kept.n);
        }
    }
    td_free(res.kept.v);
    td_free(err.kept.v);
    return st;
}

td_status td_run_repair(const char *out_path, const char *err_path, const int32_t *share, int64_t n_share,
                        td_log_fn log, void *log_user, int64_t *kept_results, int64_t *kept_errors) {
    td_run_params p = td_run_default_params();
    p.log = log, p.log_user = log_user;
    runner rn;
    memset(&rn, 0, sizeof rn);
    rn.p = &p, rn.out_path = out_path, rn.err_path = err_path, rn.share = share, rn.n_share = n_share;
    rn.out_fd = open(out_path, O_RDWR | O_CLOEXEC);
    rn.err_fd = open(err_path, O_RDWR | O_CLOEXEC);
    td_status st = rn.out_fd >= 0 && rn.err_fd >= 0 ? repair(&rn)
                                                     : td_fail(TD_ERR_IO, "%s: cannot open: %s", out_path, strerror(errno));
    if (kept_results) *kept_results = (int64_t)rn.done.count;
    if (kept_errors) *kept_errors = (int64_t)rn.reported.count;
    if (rn.out_fd >= 0) close(rn.out_fd);
    if (rn.err_fd >= 0) close(rn.err_fd);
    td_idset_free(&rn.done);
    td_idset_free(&rn.reported);
    return st;
}

/* Another run's files (MPI: the merged output of an earlier run) whose documents count as done: read, never
 * changed. Reading stops at a line that is not ours. */
static td_status scan_prior(runner *rn, const char *path, int errors_file) {
    if (file_size(path) < 0) return TD_OK;
    td_lines r;
    td_status st = td_lines_open(&r, path);
    if (st != TD_OK) return st;
    r.max_len = TD_RUN_MAX_OUTPUT_LINE;
    td_idset *set = errors_file ? &rn->reported : &rn->done;
    int got;
    while (st == TD_OK && (got = td_lines_next(&r)) == 1) {
        if (r.complete && td_line_blank(r.line, r.len)) continue;
        int32_t line = 0;
        char *id = NULL;
        int ours = r.complete && !r.too_long ? td_run_parse_ours(r.line, r.len, errors_file, &line, &id) : 0;
        td_free(id);
        if (ours < 0) st = td_fail_nomem("the lines already written");
        else if (!ours) {
            note(rn->p, 1, "%s:%d: not a complete line of a results file; the lines after it are not counted", path,
                 r.lineno);
            break;
        } else if (td_lineset_add(set, line) < 0) st = td_fail_nomem("the lines already written");
    }
    if (got < 0 && st == TD_OK) st = TD_ERR_IO;
    td_lines_close(&r);
    return st;
}

/* ---- files ------------------------------------------------------------------------------------------------------- */

/* Opens (creating it when missing, unless `existing`) and locks a results or errors file for this run alone. */
static td_status open_locked_as(const char *path, int existing, int *fd, int *created) {
    *created = file_size(path) < 0;
    *fd = open(path, existing ? O_RDONLY | O_NONBLOCK | O_CLOEXEC : O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (*fd < 0) return td_fail(TD_ERR_IO, "%s: cannot open for writing: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(*fd, &sb) != 0 || !S_ISREG(sb.st_mode))
        return td_fail(TD_ERR_IO, "%s: not a regular file: refusing to write there", path);
    if (flock(*fd, LOCK_EX | LOCK_NB) != 0)
        return errno == EWOULDBLOCK
                   ? td_fail(TD_ERR_STATE, "%s: another typedecide run is writing it (it holds the file's lock); two "
                                           "runs on one file would write every document twice",
                             path)
                   : td_fail(TD_ERR_IO, "%s: cannot lock it: %s", path, strerror(errno));
    return TD_OK;
}

static td_status open_locked(const char *path, int *fd, int *created) { return open_locked_as(path, 0, fd, created); }

static char *str_cat(const char *a, const char *b) {
    size_t na = strlen(a), nb = strlen(b);
    char *s = td_malloc(na + nb + 1);
    if (s) memcpy(s, a, na), memcpy(s + na, b, nb + 1);
    return s;
}

/* The file a symbolic link names (its full path), else path itself: a forced run replaces the link's target and
 * keeps the link, as every whole-file write does (td_wfile). td_free; NULL when out of memory. */
static char *link_target(const char *path) {
    struct stat sb;
    if (lstat(path, &sb) == 0 && S_ISLNK(sb.st_mode)) {
        char *r = realpath(path, NULL);
        if (r) {
            char *c = td_strdup(r);
            free(r); /* the C library's */
            return c;
        }
    }
    return td_strdup(path);
}

static td_status rename_into(const char *from, const char *to) {
    if (rename(from, to) != 0) return td_fail(TD_ERR_IO, "%s: cannot rename it to %s: %s", from, to, strerror(errno));
    return TD_OK;
}

/* A forced run that completed: its errors, results, then provenance are renamed over the old files (a crash
 * between them leaves OUT.partial.provenance.json, which --resume finishes renaming). */
static td_status finish_forced(const char *part_out, const char *part_err, const char *part_prov, const char *out,
                               const char *err, const char *prov, int sync) {
    td_status st = rename_into(part_err, err);
    if (st == TD_OK) st = rename_into(part_out, out);
    if (st == TD_OK) st = rename_into(part_prov, prov);
    if (st == TD_OK && sync) st = td_run_sync_dir(out);
    if (st == TD_OK && sync) st = td_run_sync_dir(err);
    return st;
}

/* The errors file as the provenance names it: NULL for the default (OUT.errors), its name when it lies beside the
 * results file, else its full path. *oom is set when memory ran out. */
static char *errors_name(const char *out_path, const char *err_path, int *oom) {
    size_t ol = strlen(out_path);
    *oom = 0;
    if (strncmp(err_path, out_path, ol) == 0 && strcmp(err_path + ol, ".errors") == 0) return NULL;
    td_file_id a, b;
    char *dir_o = td_strdup(out_path), *dir_e = td_strdup(err_path);
    char *slash_o = dir_o ? strrchr(dir_o, '/') : NULL, *slash_e = dir_e ? strrchr(dir_e, '/') : NULL;
    const char *base = slash_e ? err_path + (slash_e - dir_e) + 1 : err_path;
    char *name = NULL;
    if (dir_o && dir_e) {
        if (slash_o) *slash_o = 0;
        if (slash_e) *slash_e = 0;
        int same = td_file_id_of(slash_o ? (*dir_o ? dir_o : "/") : ".", &a) == TD_OK &&
                   td_file_id_of(slash_e ? (*dir_e ? dir_e : "/") : ".", &b) == TD_OK && td_file_id_same(&a, &b);
        if (same) name = td_strdup(base);
        else {
            char *dir = realpath(slash_e ? (*dir_e ? dir_e : "/") : ".", NULL);
            name = dir ? td_path_join(dir, base) : td_strdup(err_path);
            free(dir); /* the C library's */
        }
    }
    td_free(dir_o);
    td_free(dir_e);
    *oom = !name;
    return name;
}

/* Criteria for every document: read whole (capped), hashed for the provenance, parsed as criteria rows. */
static td_status load_global(const char *path, td_rows **out, td_prov *pv) {
    char *data;
    size_t n;
    td_status st = td_read_file_max(path, TD_RUN_MAX_CRITERIA, "a criteria file may have", &data, &n);
    if (st != TD_OK) return st;
    td_hash64 h;
    td_hash64_init(&h);
    td_hash64_update(&h, data, n);
    pv->has_criteria = 1;
    pv->criteria_bytes = (int64_t)n;
    pv->criteria_hash = td_hash64_final(&h);
    st = td_rows_parse(data, n, path, TD_ROWS_UNIQUE_IDS, out);
    td_free(data);
    if (st != TD_OK) return st;
    if (td_rows_count(*out) == 0) { /* every document would be a bad line for want of criteria */
        td_rows_free(*out);
        *out = NULL;
        return td_fail(TD_ERR_FORMAT, "%s: no criteria in it (give a file of criteria lines, or leave --criteria out "
                                      "when every document carries its own)",
                       path);
    }
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

/* Checks the provenance of results the run is about to continue (or count, for a prior file). */
static td_status check_provenance(const char *results, const td_prov *want, int prior, int *found) {
    char *pp = td_prov_path(results);
    if (!pp) return td_fail_nomem("a path");
    td_prov have;
    int missing = 0;
    td_status st = td_prov_read(pp, &have, &missing);
    *found = st == TD_OK;
    if (st != TD_OK && missing) st = TD_OK; /* the caller decides whether none may be missing */
    char why[800];
    if (st == TD_OK && *found) {
        if (td_prov_differs(&have, want, why, sizeof why))
            st = td_fail(TD_ERR_STATE, "%s holds results of %s: --resume continues only the run that wrote it; "
                                       "nothing was changed (overwrite/--force replaces it)",
                         results, why);
        else if (!prior && (have.shard != want->shard || have.n_shards != want->n_shards))
            st = td_fail(TD_ERR_STATE, "%s holds shard %d/%d, this run is shard %d/%d; nothing was changed", results,
                         have.shard, have.n_shards, want->shard, want->n_shards);
    }
    if (*found) td_prov_free(&have);
    td_free(pp);
    return st;
}

/* ---- the run -------------------------------------------------------------------------------------------------------- */

td_status td_run(td_decider *d, const char *input_path, const char *out_path, const td_run_params *params,
                 td_run_stats *stats) {
    if (stats) memset(stats, 0, sizeof *stats);
    if (!d || !input_path || !out_path) return td_fail(TD_ERR_INVALID_ARG, "td_run: NULL argument");
    td_run_params p = params ? *params : td_run_default_params();
    if (p.n_shards < 1 || p.shard < 0 || p.shard >= p.n_shards)
        return td_fail(TD_ERR_INVALID_ARG, "shard %d of %d: the shard must be in 0..%d", p.shard, p.n_shards,
                       p.n_shards - 1);
    if (p.max_line_bytes < 0) return td_fail(TD_ERR_INVALID_ARG, "td_run: max_line_bytes < 0");
    if (p.docs_per_pass < 0 || p.docs_per_pass > TD_RUN_MAX_DOCS_PER_PASS)
        return td_fail(TD_ERR_INVALID_ARG, "td_run: docs_per_pass %d: it must be in 1..%d", p.docs_per_pass,
                       TD_RUN_MAX_DOCS_PER_PASS);
    if (p.docs_per_pass == 0) p.docs_per_pass = 1; /* a zeroed struct: one document at a time */
    if (p.checkpoint_docs < 1) p.checkpoint_docs = 1;
    unsigned wflags = p.sync ? 0 : TD_WFILE_NO_SYNC;
    runner rn;
    memset(&rn, 0, sizeof rn);
    rn.d = d, rn.p = &p, rn.input = input_path, rn.out_path = out_path;
    rn.out_fd = rn.err_fd = -1;
    rn.t0 = rn.last_sync = td_now_s();
    rn.win_cap = p.docs_per_pass;
    rn.win = td_calloc((size_t)rn.win_cap, sizeof *rn.win);
    rn.groups = td_calloc((size_t)rn.win_cap, sizeof *rn.groups);
    if (!rn.win || !rn.groups) {
        td_free(rn.win);
        td_free(rn.groups);
        return td_fail_nomem("the documents of a pass");
    }
    char *err_path = NULL, *prov_path = td_prov_path(out_path), *out_real = link_target(out_path), *err_real = NULL,
         *part_out = out_real ? str_cat(out_real, ".partial") : NULL, *part_err = NULL,
         *part_prov = part_out ? td_prov_path(part_out) : NULL;
    int lock_fd = -1, forced = 0;
    td_rows *global = NULL;
    td_prov pv;
    memset(&pv, 0, sizeof pv);
    first_pass_out fo;
    memset(&fo, 0, sizeof fo);
    td_lines r;
    memset(&r, 0, sizeof r);
    r.fd = -1;
    int out_created = 0, err_created = 0, written = 0;
    if (p.errors_path) err_path = td_strdup(p.errors_path);
    else if ((err_path = td_malloc(strlen(out_path) + 8))) sprintf(err_path, "%s.errors", out_path);
    if (err_path && (err_real = link_target(err_path))) part_err = str_cat(err_real, ".partial");
    rn.err_path = err_path;
    td_status st = err_path && prov_path && part_err && part_prov ? TD_OK : td_fail_nomem("a file name");
    const char *ins[] = {input_path, p.criteria_path, p.prior_out, p.prior_errors},
               *outs[] = {out_path, err_path, prov_path, part_out, part_err, part_prov};
    if (st == TD_OK) st = td_paths_check(ins, 4, outs, 6);
    struct stat sb;
    if (st == TD_OK && stat(input_path, &sb) == 0 && !S_ISREG(sb.st_mode))
        st = td_fail(TD_ERR_IO, "%s: %s, not a regular file: a corpus run reads its input twice (the ids first, then "
                                "the documents) and --resume reads it again; save the stream to a file and give that",
                     input_path, td_file_kind(sb.st_mode));
    if (st == TD_OK && p.criteria_path) st = load_global(p.criteria_path, &global, &pv);
    rn.global = global;
    if (st == TD_OK) st = first_pass(input_path, &p, p.resume, &fo);
    rn.s.docs_total = fo.share;
    rn.share = fo.share_lines, rn.n_share = fo.share;
    rn.ids = p.resume ? &fo.ids : NULL;
    rn.digests = p.resume ? fo.share_digests : NULL;
    pv.input_bytes = fo.bytes, pv.input_docs = fo.docs, pv.input_hash = fo.hash;
    pv.has_lines_sum = 1, pv.lines_sum = fo.lines_sum;
    /* --force never empties OUT: it writes OUT.partial (and its errors and provenance) under OUT's lock and renames
     * them over OUT when it completes; a failure or a kill leaves OUT as it was, and --resume continues the
     * partial run */
    int partial = st == TD_OK && file_size(part_out) >= 0;
    if (st == TD_OK && p.overwrite)
        forced = partial || file_size(out_path) >= 0 || file_size(err_path) >= 0 || file_size(prov_path) >= 0;
    else if (st == TD_OK && p.resume) forced = partial;
    else if (st == TD_OK && partial)
        st = td_fail(TD_ERR_STATE, "%s holds an interrupted `run --force` that replaces %s when it completes: "
                                   "--resume continues it, --force starts it again; nothing was changed",
                     part_out, out_path);
    if (st == TD_OK && forced && file_size(out_path) >= 0) {
        int ignored;
        st = open_locked_as(out_path, 1, &lock_fd, &ignored);
    }
    const char *w_out = forced ? part_out : out_path, *w_err = forced ? part_err : err_path,
               *w_prov = forced ? part_prov : prov_path;
    rn.out_path = w_out, rn.err_path = w_err;
    pv.identity = (char *)(p.identity ? p.identity : "");
    pv.shard = p.shard, pv.n_shards = p.n_shards, pv.share_docs = fo.share;
    int oom = 0;
    if (st == TD_OK && (pv.errors = errors_name(w_out, w_err, &oom), oom)) st = td_fail_nomem("a file name");
    if (st == TD_OK) st = open_locked(w_out, &rn.out_fd, &out_created);
    if (st == TD_OK) st = open_locked(w_err, &rn.err_fd, &err_created);
    int64_t out_size = st == TD_OK ? file_size(w_out) : -1, err_size = st == TD_OK ? file_size(w_err) : -1;
    if (st == TD_OK && !p.resume && (out_size > 0 || err_size > 0)) {
        if (!p.overwrite)
            st = td_fail(TD_ERR_STATE, "%s exists: resume continues it, overwrite replaces it",
                         out_size > 0 ? w_out : w_err);
        else if (ftruncate(rn.out_fd, 0) != 0 || ftruncate(rn.err_fd, 0) != 0) /* an earlier partial run only */
            st = td_fail(TD_ERR_IO, "%s: cannot empty it: %s", w_out, strerror(errno));
    }
    if (st == TD_OK && p.resume && !forced && file_size(part_prov) >= 0 && file_size(part_err) < 0) {
        /* a forced run that completed and was stopped between its renames: its provenance is the last to go */
        td_prov pp;
        int missing = 0;
        char why[800];
        if (td_prov_read(part_prov, &pp, &missing) == TD_OK) {
            if (pp.complete && !td_prov_differs(&pp, &pv, why, sizeof why) && rename(part_prov, prov_path) == 0)
                note(&p, 1, "%s: renamed to %s: the last step of a completed --force run", part_prov, prov_path);
            td_prov_free(&pp);
        }
    }
    if (st == TD_OK && !p.resume && !p.overwrite && file_size(prov_path) >= 0) {
        /* a provenance record of an earlier run is replaced with its results; anything else there is not ours */
        td_prov old;
        int missing = 0;
        if (td_prov_read(prov_path, &old, &missing) == TD_OK) td_prov_free(&old);
        else if (!missing) {
            char why[600];
            snprintf(why, sizeof why, "%s", td_last_error());
            st = td_fail(TD_ERR_STATE, "%s exists and is not a provenance record of typedecide run (%s): nothing was "
                                       "changed (overwrite/--force replaces it)",
                         prov_path, why);
        }
    }
    if (st == TD_OK && p.resume) {
        int found = 0;
        st = check_provenance(w_out, &pv, 0, &found);
        if (st == TD_OK && !found && (out_size > 0 || err_size > 0))
            st = td_fail(TD_ERR_STATE, "%s has no provenance record (%s): it was not written by typedecide run (or "
                                       "by a version before these records), so resume cannot tell what it holds; "
                                       "nothing was changed (overwrite/--force replaces it)",
                         out_size > 0 ? w_out : w_err, w_prov);
        if (st == TD_OK && forced) note(&p, 1, "continuing the interrupted --force run in %s", w_out);
        if (st == TD_OK && p.prior_out && file_size(p.prior_out) >= 0) {
            int pf = 0;
            st = check_provenance(p.prior_out, &pv, 1, &pf);
            if (st == TD_OK && !pf && file_size(p.prior_out) > 0)
                st = td_fail(TD_ERR_STATE, "%s has no provenance record: resume cannot count its documents as done; "
                                           "nothing was changed", p.prior_out);
            if (st == TD_OK) st = scan_prior(&rn, p.prior_out, 0);
        }
        if (st == TD_OK && p.prior_errors) st = scan_prior(&rn, p.prior_errors, 1);
        if (st == TD_OK) st = repair(&rn);
    }
    if (st == TD_OK) st = td_prov_write(w_prov, &pv, wflags);
    written = st == TD_OK;
    if (st == TD_OK && (lseek(rn.out_fd, 0, SEEK_END) < 0 || lseek(rn.err_fd, 0, SEEK_END) < 0))
        st = td_fail(TD_ERR_IO, "%s: cannot seek: %s", w_out, strerror(errno));
    if (st == TD_OK) st = checkpoint(&rn); /* the repaired (or new) files, on disk */
    if (st == TD_OK && (out_created || err_created) && p.sync) st = td_run_sync_dir(w_out);
    if (st == TD_OK) st = td_lines_open(&r, input_path);
    r.skip_bom = 1;
    r.digest = 1;
    r.max_len = (size_t)p.max_line_bytes;
    int64_t k = 0;
    int got = 0;
    /* the documents of the share in input order, read ahead docs_per_pass at a time, decided together and written
     * in input order (flush_window): the files hold the same bytes whatever the window */
    while (st == TD_OK && (got = td_lines_next(&r)) == 1) {
        if (!r.too_long && td_line_blank(r.line, r.len)) continue;
        if (k++ % p.n_shards != p.shard) continue;
        if (td_lineset_has(&rn.done, r.lineno)) {
            rn.s.docs_skipped++;
            rn.s.seconds = td_now_s() - rn.t0;
            if (p.progress) p.progress(p.progress_user, &rn.s);
            continue;
        }
        doc_slot *ds = &rn.win[rn.n_win];
        ds->lineno = r.lineno, ds->doc_hash = r.line_digest;
        if ((st = prepare_line(&rn, ds, r.line, r.len, r.too_long)) != TD_OK) {
            slot_clear(ds);
            break;
        }
        /* strict: a bad line ends the window (nothing after it is decided) */
        if (++rn.n_win == rn.win_cap || (p.strict && ds->why)) st = flush_window(&rn);
    }
    if (got < 0 && st == TD_OK) st = TD_ERR_IO;
    if (rn.n_win > 0) { /* the last window, or the documents read before a failure: written as one at a time would */
        char why[2048];
        snprintf(why, sizeof why, "%s", st != TD_OK ? td_last_error() : "");
        td_status st2 = flush_window(&rn);
        if (st2 != TD_OK) st = st2; /* an earlier document's failure comes first */
        else if (st != TD_OK) td_fail(st, "%s", why);
    }
    if (written) { /* whatever happened, what was written is kept */
        td_status st2 = checkpoint(&rn);
        if (st == TD_OK) st = st2;
        pv.complete = st == TD_OK;
        if (st == TD_OK && forced) { /* the provenance as it will lie beside OUT */
            td_free(pv.errors);
            if ((pv.errors = errors_name(out_path, err_path, &oom), oom)) st = td_fail_nomem("a file name");
        }
        if (st == TD_OK) st = td_prov_write(w_prov, &pv, wflags);
        if (st == TD_OK && forced) st = finish_forced(part_out, part_err, part_prov, out_real, err_real, prov_path, p.sync);
        if (st != TD_OK && forced)
            note(&p, 1, "%s is unchanged: this --force run's lines are in %s; --resume continues them and replaces %s "
                        "when the run completes",
                 out_path, part_out, out_path);
    }
    if (!written) { /* refused before anything was written: what this call created goes again */
        if (out_created && rn.out_fd >= 0 && file_size(w_out) == 0) unlink(w_out);
        if (err_created && rn.err_fd >= 0 && file_size(w_err) == 0) unlink(w_err);
    }
    if (lock_fd >= 0) close(lock_fd);
    if (rn.out_fd >= 0) close(rn.out_fd); /* and with it the lock */
    if (rn.err_fd >= 0) close(rn.err_fd);
    td_lines_close(&r);
    td_idset_free(&rn.done);
    td_idset_free(&rn.reported);
    for (int32_t i = 0; rn.win && i < rn.win_cap; i++) {
        slot_clear(&rn.win[i]);
        td_free(rn.win[i].crit);
        td_free(rn.win[i].dec);
    }
    td_free(rn.win);
    td_free(rn.groups);
    td_free(fo.share_lines);
    td_free(fo.share_digests);
    td_idset_free(&fo.ids);
    td_rows_free(global);
    td_free(pv.errors);
    td_free(err_path);
    td_free(prov_path);
    td_free(part_out);
    td_free(part_err);
    td_free(out_real);
    td_free(err_real);
    td_free(part_prov);
    rn.s.seconds = td_now_s() - rn.t0;
    if (stats) *stats = rn.s;
    return st;
}
