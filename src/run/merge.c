/* Merging the results files of several shards (and their errors files) into input order: a streaming k-way merge
 * on each line's "line" member, written beside the outputs and renamed over them only when the shards are of one
 * run and cover its input exactly once. */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "typedecide_run.h"
#include "run/run_internal.h"
#include "util/alloc.h"
#include "util/error.h"
#include "util/json.h"

typedef struct part {
    td_lines r;
    int open;
    int32_t line;  /* "line" of the current line; 0 when the file is exhausted */
    int32_t prev;
    int64_t count; /* lines merged from this file */
    uint64_t term; /* td_run_doc_term of the current line */
} part;

/* Moves a part to its next non-blank line and reads its "line" number. */
static td_status part_next(part *pt, int errors_file) {
    pt->line = 0;
    if (!pt->open) return TD_OK;
    int got;
    while ((got = td_lines_next(&pt->r)) == 1 && !pt->r.too_long && td_line_blank(pt->r.line, pt->r.len)) {}
    if (got < 0) return TD_ERR_IO;
    if (got == 0) return TD_OK;
    if (pt->r.too_long)
        return td_fail(TD_ERR_FORMAT, "%s:%d: a line longer than %zu bytes", pt->r.path, pt->r.lineno,
                       (size_t)TD_RUN_MAX_OUTPUT_LINE);
    if (!pt->r.complete)
        return td_fail(TD_ERR_FORMAT, "%s:%d: a torn last line (resume that run first)", pt->r.path, pt->r.lineno);
    td_run_line l;
    int ours = td_run_parse_line(pt->r.line, pt->r.len, errors_file, &l);
    td_free(l.id);
    pt->line = l.line;
    if (ours < 0) return td_fail(TD_ERR_NOMEM, "%s:%d: out of memory reading the line", pt->r.path, pt->r.lineno);
    if (!ours) {
        pt->line = 0;
        return td_fail(TD_ERR_FORMAT, "%s:%d: not a%s line of typedecide run", pt->r.path, pt->r.lineno,
                       errors_file ? "n errors" : " results");
    }
    if (ours == 2) {
        int had = strstr(pt->r.line, "\"check\":") != NULL;
        pt->line = 0;
        return td_fail(TD_ERR_FORMAT, "%s:%d (input line %d): %s; nothing was written (--resume of that run decides "
                                      "the line again)", pt->r.path, pt->r.lineno, l.line,
                       had ? "the line was changed after the run wrote it (its \"check\" does not match its content)"
                           : "the line has no \"doc_hash\" and \"check\" (edited, or written by an older version)");
    }
    pt->term = td_run_doc_term(l.line, l.doc_hash);
    if (pt->line <= pt->prev)
        return td_fail(TD_ERR_FORMAT, "%s:%d: input line %d comes after input line %d: not in input order",
                       pt->r.path, pt->r.lineno, pt->line, pt->prev);
    pt->prev = pt->line;
    pt->count++;
    return TD_OK;
}

/* Merges the files (those with have[i]) into w, in input order; counts[i] receives the lines of file i, lasts[i] its
 * last input line. */
static td_status merge_into(const char *const *paths, const int *have, int32_t n, int errors_file, td_wfile *w,
                            int64_t *counts, int32_t *lasts, int64_t *total, uint64_t *sum) {
    part *parts = td_calloc((size_t)(n ? n : 1), sizeof *parts);
    if (!parts) return td_fail_nomem("a merge");
    td_status st = TD_OK;
    *total = 0;
    for (int32_t i = 0; i < n && st == TD_OK; i++) {
        if (!have[i] || (errors_file && !td_file_exists(paths[i]))) continue; /* no errors file: no bad lines */
        if ((st = td_lines_open(&parts[i].r, paths[i])) == TD_OK) parts[i].open = 1;
        parts[i].r.max_len = TD_RUN_MAX_OUTPUT_LINE;
        if (st == TD_OK) st = part_next(&parts[i], errors_file);
    }
    while (st == TD_OK) {
        int32_t best = -1;
        for (int32_t i = 0; i < n && st == TD_OK; i++) {
            if (!parts[i].line) continue;
            if (best >= 0 && parts[i].line == parts[best].line)
                st = td_fail(TD_ERR_FORMAT, "input line %d is in both %s (line %d) and %s (line %d)", parts[i].line,
                             parts[best].r.path, parts[best].r.lineno, parts[i].r.path, parts[i].r.lineno);
            if (best < 0 || parts[i].line < parts[best].line) best = i;
        }
        if (st != TD_OK || best < 0) break;
        part *pt = &parts[best];
        pt->r.line[pt->r.len] = '\n'; /* the buffer always has room for the NUL, which the newline replaces */
        if (fwrite(pt->r.line, 1, pt->r.len + 1, w->f) != pt->r.len + 1)
            st = td_fail(TD_ERR_IO, "%s: write failed: %s", w->path, strerror(errno));
        ++*total;
        *sum += pt->term;
        if (st == TD_OK) st = part_next(pt, errors_file);
    }
    for (int32_t i = 0; i < n; i++) {
        counts[i] = parts[i].count;
        lasts[i] = parts[i].prev;
        if (parts[i].open) td_lines_close(&parts[i].r);
    }
    td_free(parts);
    return st;
}

/* Why the inputs do not cover the corpus: the shards missing and the ones that stopped early. */
static td_status not_covered(const char *const *inputs, int32_t n, const td_prov *pv, const int *have,
                             const int64_t *counts, const int32_t *lasts, int64_t covered) {
    int32_t N = 1;
    int whole = 0;
    for (int32_t i = 0; i < n; i++)
        if (have[i]) {
            if (pv[i].n_shards == 1) whole = 1;
            else if (N == 1) N = pv[i].n_shards;
        }
    char msg[1500] = "";
    size_t m = 0;
#define ADD(...)                                                                                                       \
    do {                                                                                                               \
        if (m < sizeof msg) {                                                                                          \
            int k_ = snprintf(msg + m, sizeof msg - m, __VA_ARGS__);                                                   \
            m += k_ > 0 ? (size_t)k_ : 0;                                                                              \
        }                                                                                                              \
    } while (0)
    for (int32_t s = 0; !whole && N > 1 && s < N; s++) {
        int found = 0;
        for (int32_t i = 0; i < n && !found; i++) found = have[i] && pv[i].n_shards == N && pv[i].shard == s;
        if (!found)
            ADD("%sshard %d/%d (no file given: documents %d, %d, %d, ... of the input, every %d-th non-blank line)",
                m ? "; " : "", s, N, s + 1, s + 1 + N, s + 1 + 2 * N, N);
    }
    for (int32_t i = 0; i < n; i++)
        if (have[i] && counts[i] < pv[i].share_docs) {
            if (lasts[i])
                ADD("%s%s (shard %d/%d) has %lld of its %lld documents, none after input line %d (resume that run)",
                    m ? "; " : "", inputs[i], pv[i].shard, pv[i].n_shards, (long long)counts[i],
                    (long long)pv[i].share_docs, lasts[i]);
            else
                ADD("%s%s (shard %d/%d) has none of its %lld documents (resume that run)", m ? "; " : "", inputs[i],
                    pv[i].shard, pv[i].n_shards, (long long)pv[i].share_docs);
        }
#undef ADD
    int64_t docs = 0;
    for (int32_t i = 0; i < n && !docs; i++)
        if (have[i]) docs = pv[i].input_docs;
    return td_fail(TD_ERR_FORMAT, "the files do not cover the corpus: %lld of its %lld documents (results and errors "
                                  "lines); missing: %s; nothing was written",
                   (long long)covered, (long long)docs, m ? msg : "documents that no file holds");
}

/* TD_OK unless path is a regular file holding the bytes of the run's input or criteria file (same size and hash as
 * the provenance records): that is the corpus itself (or a copy of it), which merge never writes over. */
static td_status not_an_input(const char *path, const td_prov *pv) {
    struct stat sb;
    if (stat(path, &sb) != 0 || !S_ISREG(sb.st_mode)) return TD_OK;
    int as_input = (int64_t)sb.st_size == pv->input_bytes;
    int as_criteria = pv->has_criteria && (int64_t)sb.st_size == pv->criteria_bytes;
    if (!as_input && !as_criteria) return TD_OK;
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return TD_OK; /* unreadable: the write itself will say what is wrong */
    char *buf = td_malloc(1 << 16);
    if (!buf) {
        close(fd);
        return td_fail_nomem("a read buffer");
    }
    td_hash64 h;
    td_hash64_init(&h);
    ssize_t got;
    int failed = 0;
    while ((got = read(fd, buf, 1 << 16)) != 0) {
        if (got < 0 && errno == EINTR) continue;
        if (got < 0) {
            failed = 1;
            break;
        }
        td_hash64_update(&h, buf, (size_t)got);
    }
    td_free(buf);
    close(fd);
    if (failed) return TD_OK;
    uint64_t v = td_hash64_final(&h);
    if (as_input && v == pv->input_hash)
        return td_fail(TD_ERR_INVALID_ARG, "%s holds the corpus the shards were run on (its size and hash are the "
                                           "input's in their provenance): merge never writes over an input; nothing "
                                           "was written",
                       path);
    if (as_criteria && v == pv->criteria_hash)
        return td_fail(TD_ERR_INVALID_ARG, "%s holds the criteria file the shards were run with (its size and hash "
                                           "are in their provenance): merge never writes over an input; nothing was "
                                           "written",
                       path);
    return TD_OK;
}

td_status td_run_merge(const char *const *inputs, int32_t n, const char *out_path, const char *errors_path,
                       unsigned flags) {
    const int missing_ok = (flags & TD_MERGE_MISSING_OK) != 0;
    const unsigned wflags = (flags & TD_MERGE_NO_SYNC) ? TD_WFILE_NO_SYNC : 0;
    if (!out_path || n < 1 || !inputs) return td_fail(TD_ERR_INVALID_ARG, "td_run_merge: bad argument");
    td_prov *pv = td_calloc((size_t)n, sizeof *pv);
    int *have = td_calloc((size_t)n, sizeof *have);
    char **errs = td_calloc((size_t)n, sizeof *errs), **provs = td_calloc((size_t)n, sizeof *provs);
    int64_t *counts = td_calloc((size_t)n * 2, sizeof *counts);
    int32_t *lasts = td_calloc((size_t)n * 2, sizeof *lasts);
    td_file_id *ids = td_calloc((size_t)n, sizeof *ids);
    char *err_out = errors_path ? td_strdup(errors_path) : td_malloc(strlen(out_path) + 8);
    char *prov_out = td_prov_path(out_path);
    const char **checks = td_calloc((size_t)n * 3, sizeof *checks);
    td_wfile wr, we;
    memset(&wr, 0, sizeof wr), memset(&we, 0, sizeof we);
    int lock_fd = -1;
    td_status st = TD_OK;
    if (!pv || !have || !errs || !provs || !counts || !lasts || !ids || !err_out || !prov_out || !checks)
        st = td_fail_nomem("a merge");
    if (st == TD_OK && !errors_path) sprintf(err_out, "%s.errors", out_path);
    /* every input: its provenance, its errors file; one run; no file twice */
    int32_t first = -1;
    for (int32_t i = 0; i < n && st == TD_OK; i++) {
        struct stat sb;
        if (!inputs[i]) st = td_fail(TD_ERR_INVALID_ARG, "td_run_merge: input %d is NULL", i);
        else if (missing_ok && stat(inputs[i], &sb) != 0 && errno == ENOENT) continue;
        else if (!(provs[i] = td_prov_path(inputs[i]))) st = td_fail_nomem("a path");
        if (st != TD_OK) break;
        if ((st = td_file_id_of(inputs[i], &ids[i])) != TD_OK) break;
        if (!ids[i].exists) {
            st = td_fail(TD_ERR_IO, "%s: no such file", inputs[i]);
            break;
        }
        int missing = 0;
        st = td_prov_read(provs[i], &pv[i], &missing);
        if (st != TD_OK && missing) {
            size_t l = strlen(inputs[i]);
            int errors_like = l > 7 && strcmp(inputs[i] + l - 7, ".errors") == 0;
            st = td_fail(TD_ERR_FORMAT, "%s: no provenance record (%s): not a results file of typedecide run%s",
                         inputs[i], provs[i],
                         errors_like ? " (an errors file? give the results files: each brings its errors file)" : "");
        }
        if (st != TD_OK) break;
        have[i] = 1;
        if (!(errs[i] = td_prov_errors_path(&pv[i], inputs[i]))) {
            st = td_fail_nomem("a path");
            break;
        }
        char why[800];
        if (first >= 0 && td_prov_differs(&pv[first], &pv[i], why, sizeof why))
            st = td_fail(TD_ERR_FORMAT, "%s and %s are results of different runs: the second is of %s; nothing was "
                                        "written", inputs[first], inputs[i], why);
        for (int32_t j = 0; j < i && st == TD_OK; j++)
            if (have[j] && td_file_id_same(&ids[i], &ids[j]))
                st = td_fail(TD_ERR_INVALID_ARG, "%s and %s are the same file: give each shard once", inputs[j], inputs[i]);
            else if (have[j] && pv[j].n_shards > 1 && pv[j].n_shards == pv[i].n_shards && pv[j].shard == pv[i].shard)
                st = td_fail(TD_ERR_FORMAT, "%s and %s are both shard %d/%d", inputs[j], inputs[i], pv[i].shard,
                             pv[i].n_shards);
        if (first < 0) first = i;
    }
    if (st == TD_OK && first < 0) st = td_fail(TD_ERR_IO, "%s: no input file exists", inputs[0]);
    /* the outputs: never an input (unless asked: an earlier merged file that the parts extend), never each other */
    const char *outs[] = {out_path, err_out, prov_out};
    int32_t nc = 0;
    for (int32_t i = 0; i < n && st == TD_OK; i++)
        if (have[i]) checks[nc++] = inputs[i], checks[nc++] = errs[i], checks[nc++] = provs[i];
    if (st == TD_OK) st = td_paths_check(checks, (flags & TD_MERGE_INTO_INPUT) ? 0 : nc, outs, 3);
    for (int k = 0; k < 3 && st == TD_OK; k++) st = not_an_input(outs[k], &pv[first]);
    if (st == TD_OK && td_file_exists(out_path)) { /* a run still writing it keeps its lock */
        lock_fd = open(out_path, O_RDONLY | O_CLOEXEC);
        if (lock_fd >= 0 && flock(lock_fd, LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK)
            st = td_fail(TD_ERR_STATE, "%s: a typedecide run is writing it (it holds the file's lock)", out_path);
    }
    int64_t n_res = 0, n_err = 0;
    uint64_t sum = 0;
    if (st == TD_OK) st = td_wfile_open(&wr, out_path, wflags);
    if (st == TD_OK) st = td_wfile_open(&we, err_out, wflags);
    if (st == TD_OK) st = merge_into(inputs, have, n, 0, &wr, counts, lasts, &n_res, &sum);
    if (st == TD_OK) st = merge_into((const char *const *)errs, have, n, 1, &we, counts + n, lasts + n, &n_err, &sum);
    if (st == TD_OK && n_res + n_err != pv[first].input_docs) {
        for (int32_t i = 0; i < n; i++) {
            counts[i] += counts[n + i];
            if (lasts[n + i] > lasts[i]) lasts[i] = lasts[n + i];
        }
        st = not_covered(inputs, n, pv, have, counts, lasts, n_res + n_err);
    }
    /* every line's doc_hash, with its input line, summed: the input's sum unless a line is of another document */
    if (st == TD_OK && pv[first].has_lines_sum && sum != pv[first].lines_sum)
        st = td_fail(TD_ERR_FORMAT, "the shards hold a line of a document that is not the input's on that line (its "
                                    "\"doc_hash\" differs: a line copied from the results of another corpus?); "
                                    "--resume of each shard drops such lines; nothing was written");
    td_prov out;
    memset(&out, 0, sizeof out);
    if (st == TD_OK) {
        out = pv[first];
        out.shard = 0, out.n_shards = 1, out.share_docs = pv[first].input_docs, out.complete = 1;
        size_t ol = strlen(out_path);
        const char *slash_o = strrchr(out_path, '/'), *slash_e = strrchr(err_out, '/');
        size_t lo = slash_o ? (size_t)(slash_o - out_path) : 0, le = slash_e ? (size_t)(slash_e - err_out) : 0;
        int beside = lo == le && strncmp(out_path, err_out, lo) == 0;
        if (strncmp(err_out, out_path, ol) == 0 && strcmp(err_out + ol, ".errors") == 0) out.errors = NULL;
        else out.errors = beside ? (char *)(slash_e ? slash_e + 1 : err_out) : err_out;
    }
    /* errors, results, then the provenance: a crash between them leaves a provenance that refuses, never one that
     * vouches for files it does not describe */
    if (st == TD_OK) st = td_wfile_commit(&we);
    if (st == TD_OK) st = td_wfile_commit(&wr);
    if (st == TD_OK) st = td_prov_write(prov_out, &out, wflags);
    td_wfile_abort(&wr);
    td_wfile_abort(&we);
    if (lock_fd >= 0) close(lock_fd);
    for (int32_t i = 0; pv && i < n; i++) td_prov_free(&pv[i]);
    for (int32_t i = 0; errs && provs && i < n; i++) td_free(errs[i]), td_free(provs[i]);
    td_free(pv), td_free(have), td_free(errs), td_free(provs), td_free(counts), td_free(lasts), td_free(ids);
    td_free(err_out), td_free(prov_out), td_free((void *)checks);
    return st;
}
