/* Merging the results (or errors) files of several shards into input order: a streaming k-way merge on each line's
 * "line" member, written to a temporary file that replaces the output only when it is whole and synced. */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "run/run_internal.h"
#include "util/alloc.h"
#include "util/error.h"
#include "util/json.h"

typedef struct part {
    td_lines r;
    int open;
    int32_t line;  /* "line" of the current line; 0 when the file is exhausted */
    int32_t prev;
} part;

/* Moves a part to its next non-blank line and reads its "line" number. */
static td_status part_next(part *pt) {
    pt->line = 0;
    if (!pt->open) return TD_OK;
    int got;
    while ((got = td_lines_next(&pt->r)) == 1 && td_line_blank(pt->r.line, pt->r.len)) {}
    if (got < 0) return TD_ERR_IO;
    if (got == 0) return TD_OK;
    if (!pt->r.complete)
        return td_fail(TD_ERR_FORMAT, "%s:%d: a torn last line (resume that run first)", pt->r.path, pt->r.lineno);
    json_error_t e;
    int oom = 0;
    json_t *o = td_json_loadb(pt->r.line, pt->r.len, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &e, &oom);
    json_t *ln = json_object_get(o, "line");
    int ok = json_is_integer(ln) && json_integer_value(ln) >= 1 && json_integer_value(ln) <= INT32_MAX;
    if (ok) pt->line = (int32_t)json_integer_value(ln);
    json_decref(o);
    if (oom) return td_fail(TD_ERR_NOMEM, "%s:%d: out of memory reading the line", pt->r.path, pt->r.lineno);
    if (!ok) return td_fail(TD_ERR_FORMAT, "%s:%d: not a results line (no \"line\" number)", pt->r.path, pt->r.lineno);
    if (pt->line <= pt->prev)
        return td_fail(TD_ERR_FORMAT, "%s:%d: input line %d comes after input line %d: not in input order",
                       pt->r.path, pt->r.lineno, pt->line, pt->prev);
    pt->prev = pt->line;
    return TD_OK;
}

td_status td_run_merge(const char *const *inputs, int32_t n, const char *out_path, unsigned flags) {
    const int missing_ok = (flags & TD_MERGE_MISSING_OK) != 0, sync = !(flags & TD_MERGE_NO_SYNC);
    if (!out_path || n < 0 || (n && !inputs)) return td_fail(TD_ERR_INVALID_ARG, "td_run_merge: bad argument");
    part *parts = td_calloc((size_t)(n ? n : 1), sizeof *parts);
    char *tmp = td_malloc(strlen(out_path) + 8);
    if (!parts || !tmp) {
        td_free(parts), td_free(tmp);
        return td_fail_nomem("a merge");
    }
    sprintf(tmp, "%s.tmp", out_path);
    td_status st = TD_OK;
    for (int32_t i = 0; i < n && st == TD_OK; i++) {
        struct stat sb;
        if (!inputs[i]) st = td_fail(TD_ERR_INVALID_ARG, "td_run_merge: input %d is NULL", i);
        else if (missing_ok && stat(inputs[i], &sb) != 0 && errno == ENOENT) continue;
        else if ((st = td_lines_open(&parts[i].r, inputs[i])) == TD_OK) parts[i].open = 1;
        if (st == TD_OK) st = part_next(&parts[i]);
    }
    int fd = st == TD_OK ? open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644) : -1;
    if (st == TD_OK && fd < 0) st = td_fail(TD_ERR_IO, "%s: cannot open for writing: %s", tmp, strerror(errno));
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
        st = td_run_write_all(fd, tmp, pt->r.line, pt->r.len + 1);
        if (st == TD_OK) st = part_next(pt);
    }
    if (fd >= 0) {
        if (st == TD_OK && sync && fsync(fd) != 0) st = td_fail(TD_ERR_IO, "%s: fsync failed: %s", tmp, strerror(errno));
        if (close(fd) != 0 && st == TD_OK) st = td_fail(TD_ERR_IO, "%s: close failed: %s", tmp, strerror(errno));
    }
    for (int32_t i = 0; i < n; i++)
        if (parts[i].open) td_lines_close(&parts[i].r);
    if (st == TD_OK && rename(tmp, out_path) != 0)
        st = td_fail(TD_ERR_IO, "%s: cannot rename to %s: %s", tmp, out_path, strerror(errno));
    if (st != TD_OK && fd >= 0) unlink(tmp);
    if (st == TD_OK && sync) st = td_run_sync_dir(out_path); /* the new name on disk */
    td_free(parts);
    td_free(tmp);
    return st;
}
