/* For the corpus runner: streamed lines, whole writes, directory syncs, the id set and the recogniser of our own
 * output lines. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <fcntl.h>
#include <jansson.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "run/run_internal.h"
#include "util/alloc.h"
#include "util/error.h"
#include "util/json.h"

#define TD_LINES_CHUNK (1 << 16)

td_status td_lines_open(td_lines *r, const char *path) {
    memset(r, 0, sizeof *r);
    r->fd = -1;
    r->path = path;
    r->buf = td_malloc(TD_LINES_CHUNK);
    r->cap = 256;
    r->line = td_malloc(r->cap);
    if (!r->buf || !r->line) {
        td_lines_close(r);
        return td_fail_nomem("a line buffer");
    }
    r->fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC); /* a FIFO without a writer must not block us */
    if (r->fd < 0) {
        int e = errno;
        td_lines_close(r);
        return td_fail(TD_ERR_IO, "%s: cannot open: %s", path, strerror(e));
    }
    struct stat st;
    if (fstat(r->fd, &st) != 0) st.st_mode = 0;
    if (!S_ISREG(st.st_mode)) {
        td_status e = td_fail(TD_ERR_IO, "%s: %s, not a regular file", path, td_file_kind(st.st_mode));
        td_lines_close(r);
        return e;
    }
    return TD_OK;
}

void td_lines_close(td_lines *r) {
    if (r->fd >= 0) close(r->fd);
    td_free(r->buf);
    td_free(r->line);
    memset(r, 0, sizeof *r);
    r->fd = -1;
}

static int line_append(td_lines *r, const char *p, size_t n) {
    if (r->too_long) return 0;
    if (r->max_len && r->len + n > r->max_len) { /* drop what was kept: the rest is only counted */
        r->too_long = 1;
        r->len = 0;
        r->line[0] = 0;
        return 0;
    }
    if (r->len + n + 1 > r->cap) {
        size_t cap = r->cap * 2;
        while (cap < r->len + n + 1) cap *= 2;
        char *nl = td_realloc(r->line, cap);
        if (!nl) return -1;
        r->line = nl;
        r->cap = cap;
    }
    memcpy(r->line + r->len, p, n);
    r->len += n;
    r->line[r->len] = 0;
    return 0;
}

int td_lines_next(td_lines *r) {
    r->len = 0;
    r->line[0] = 0;
    r->complete = 0;
    r->too_long = 0;
    r->offset = r->next;
    if (r->digest) td_hash64_init(&r->lh);
    int any = 0;
    for (;;) {
        if (r->beg == r->end) {
            if (r->eof) break;
            ssize_t got;
            do got = read(r->fd, r->buf, TD_LINES_CHUNK);
            while (got < 0 && errno == EINTR);
            if (got < 0) {
                td_fail(TD_ERR_IO, "%s: read failed: %s", r->path, strerror(errno));
                return -1;
            }
            if (got == 0) {
                r->eof = 1;
                break;
            }
            if (r->hash) td_hash64_update(r->hash, r->buf, (size_t)got);
            r->beg = 0;
            r->end = (size_t)got;
            /* editors write a byte-order mark; it is not part of the first document */
            if (r->skip_bom && r->bytes == 0 && got >= 3 && memcmp(r->buf, "\xef\xbb\xbf", 3) == 0) {
                r->beg = 3;
                r->next = r->offset = 3;
            }
            r->bytes += got;
            if (r->beg == r->end) continue;
        }
        any = 1;
        const char *p = r->buf + r->beg, *nl = memchr(p, '\n', r->end - r->beg);
        size_t n = nl ? (size_t)(nl - p) : r->end - r->beg;
        if (r->digest) td_hash64_update(&r->lh, p, n);
        if (line_append(r, p, n)) {
            td_fail_nomem("a line");
            return -1;
        }
        r->beg += n + (nl ? 1 : 0);
        r->next += (int64_t)(n + (nl ? 1 : 0));
        if (nl) {
            r->complete = 1;
            break;
        }
    }
    if (!any) return 0;
    if (r->digest) r->line_digest = td_hash64_final(&r->lh);
    r->lineno++;
    return 1;
}

int td_line_blank(const char *line, size_t len) {
    for (size_t i = 0; i < len; i++)
        if (line[i] != ' ' && line[i] != '\t' && line[i] != '\r') return 0;
    return 1;
}

/* ---- writing -------------------------------------------------------------------------------------------------- */

td_status td_run_write_all(int fd, const char *path, const char *data, size_t n) {
    while (n > 0) {
        ssize_t w = write(fd, data, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return td_fail(TD_ERR_IO, "%s: write failed: %s", path, w < 0 ? strerror(errno) : "no progress");
        data += w;
        n -= (size_t)w;
    }
    return TD_OK;
}

td_status td_run_pwrite_all(int fd, const char *path, const char *data, size_t n, int64_t offset) {
    while (n > 0) {
        ssize_t w = pwrite(fd, data, n, (off_t)offset);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return td_fail(TD_ERR_IO, "%s: write failed: %s", path, w < 0 ? strerror(errno) : "no progress");
        data += w;
        n -= (size_t)w;
        offset += w;
    }
    return TD_OK;
}

td_status td_run_sync_dir(const char *path) {
    const char *slash = strrchr(path, '/');
    char *dir = slash ? td_strndup(path, slash == path ? 1 : (size_t)(slash - path)) : td_strdup(".");
    if (!dir) return td_fail_nomem("a directory name");
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    td_status st = TD_OK;
    if (fd < 0) st = td_fail(TD_ERR_IO, "%s: cannot open the directory: %s", dir, strerror(errno));
    else if (fsync(fd) != 0 && errno != EINVAL) st = td_fail(TD_ERR_IO, "%s: fsync failed: %s", dir, strerror(errno));
    if (fd >= 0) close(fd);
    td_free(dir);
    return st;
}

/* ---- id set ------------------------------------------------------------------------------------------------- */

typedef struct td_idslot {
    uint64_t h1;
    uint32_t h2;  /* h1 == 0 && h2 == 0: empty (a real id with both zero is remapped) */
    int32_t line;
} td_idslot;

static void id_hashes(const char *id, size_t len, uint64_t *h1, uint32_t *h2) {
    const unsigned char *p = (const unsigned char *)id;
    uint64_t a = 0xcbf29ce484222325ull, b = 0x9e3779b97f4a7c15ull ^ (uint64_t)len;
    for (size_t i = 0; i < len; i++) {
        a = (a ^ p[i]) * 0x100000001b3ull;          /* FNV-1a */
        b = (b + p[i] + 1) * 0xff51afd7ed558ccdull; /* a multiplicative polynomial with another multiplier */
        b ^= b >> 29;
    }
    a ^= a >> 30, a *= 0xbf58476d1ce4e5b9ull, a ^= a >> 27, a *= 0x94d049bb133111ebull, a ^= a >> 31;
    b ^= b >> 33, b *= 0xc4ceb9fe1a85ec53ull, b ^= b >> 33;
    *h1 = a, *h2 = (uint32_t)b;
    if (a == 0 && *h2 == 0) *h2 = 1;
}

/* Linear probing from h1 mod cap (any cap: the table is sized to the count, not to a power of two). */
static td_idslot *find_slot(td_idslot *slots, size_t cap, uint64_t h1, uint32_t h2) {
    size_t i = (size_t)(h1 % cap);
    for (;; i = i + 1 == cap ? 0 : i + 1) /* terminates: never full */
        if ((slots[i].h1 == h1 && slots[i].h2 == h2) || (slots[i].h1 == 0 && slots[i].h2 == 0)) return &slots[i];
}

void td_idset_free(td_idset *s) {
    td_free(s->slots);
    memset(s, 0, sizeof *s);
}

int td_idset_reserve(td_idset *s, size_t n) {
    size_t cap = n + n / 3 + 16; /* at most 3/4 full */
    if (cap <= s->cap) return 0;
    td_idslot *ns = td_calloc(cap, sizeof *ns);
    if (!ns) return -1;
    for (size_t i = 0; i < s->cap; i++)
        if (s->slots[i].h1 || s->slots[i].h2) *find_slot(ns, cap, s->slots[i].h1, s->slots[i].h2) = s->slots[i];
    td_free(s->slots);
    s->slots = ns;
    s->cap = cap;
    return 0;
}

int td_idset_has(const td_idset *s, const char *id, size_t len, int32_t *line) {
    if (!s->cap) return 0;
    uint64_t h1;
    uint32_t h2;
    id_hashes(id, len, &h1, &h2);
    const td_idslot *e = find_slot(s->slots, s->cap, h1, h2);
    if (e->h1 == 0 && e->h2 == 0) return 0;
    if (line) *line = e->line;
    return 1;
}

int td_idset_add(td_idset *s, const char *id, size_t len, int32_t line, int32_t *first_line) {
    if ((s->count + 1) * 4 > s->cap * 3 && td_idset_reserve(s, 2 * s->count + 1024)) return -1;
    uint64_t h1;
    uint32_t h2;
    id_hashes(id, len, &h1, &h2);
    td_idslot *e = find_slot(s->slots, s->cap, h1, h2);
    if (e->h1 || e->h2) {
        if (first_line) *first_line = e->line;
        return 0;
    }
    e->h1 = h1, e->h2 = h2, e->line = line;
    s->count++;
    return 1;
}

int td_lineset_add(td_idset *s, int32_t line) { return td_idset_add(s, (const char *)&line, sizeof line, line, NULL); }

int td_lineset_has(const td_idset *s, int32_t line) { return td_idset_has(s, (const char *)&line, sizeof line, NULL); }

td_status td_count_lines(const char *path, int64_t *n) {
    *n = 0;
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return td_fail(TD_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    char *buf = td_malloc(TD_LINES_CHUNK);
    td_status st = buf ? TD_OK : td_fail_nomem("a read buffer");
    ssize_t got;
    while (st == TD_OK && (got = read(fd, buf, TD_LINES_CHUNK)) != 0) {
        if (got < 0 && errno == EINTR) continue;
        if (got < 0) st = td_fail(TD_ERR_IO, "%s: read failed: %s", path, strerror(errno));
        for (const char *p = buf, *e = buf + (got > 0 ? got : 0); p < e && (p = memchr(p, '\n', (size_t)(e - p))); p++) ++*n;
    }
    ++*n; /* a last line without its newline */
    td_free(buf);
    close(fd);
    return st;
}

/* ---- our lines ------------------------------------------------------------------------------------------------ */

static uint64_t hash_bytes(const char *p, size_t n) {
    td_hash64 h;
    td_hash64_init(&h);
    td_hash64_update(&h, p, n);
    return td_hash64_final(&h);
}

size_t td_run_seal_line(char *buf, size_t n) {
    if (n > 0 && buf[n - 1] == '}') n--;
    uint64_t c = hash_bytes(buf, n);
    int k = snprintf(buf + n, TD_RUN_CHECK_TAIL + 2, ",\"check\":\"%016" PRIx64 "\"}\n", c);
    return n + (size_t)k;
}

uint64_t td_run_doc_term(int32_t line, uint64_t doc_hash) {
    uint64_t x = doc_hash ^ ((uint64_t)(uint32_t)line * 0x9e3779b97f4a7c15ull);
    x ^= x >> 30, x *= 0xbf58476d1ce4e5b9ull, x ^= x >> 27, x *= 0x94d049bb133111ebull, x ^= x >> 31;
    return x;
}

/* 16 lowercase hex digits. */
static int hex16(const char *s, size_t n, uint64_t *v) {
    if (n != 16) return -1;
    uint64_t x = 0;
    for (size_t i = 0; i < 16; i++) {
        char c = s[i];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        if (d < 0) return -1;
        x = x << 4 | (uint64_t)d;
    }
    *v = x;
    return 0;
}

/* 1 when the line ends with ,"check":"<16 hex>"} and the hex is the hash of the bytes before it. */
static int check_ok(const char *text, size_t len) {
    static const char head[] = ",\"check\":\"";
    if (len < TD_RUN_CHECK_TAIL + 1) return 0;
    const char *t = text + len - TD_RUN_CHECK_TAIL;
    uint64_t want;
    if (memcmp(t, head, sizeof head - 1) != 0 || memcmp(text + len - 2, "\"}", 2) != 0 ||
        hex16(t + sizeof head - 1, 16, &want))
        return 0;
    return hash_bytes(text, len - TD_RUN_CHECK_TAIL) == want;
}

int td_run_parse_line(const char *text, size_t len, int errors_file, td_run_line *out) {
    json_error_t e;
    int oom = 0, ok = 0;
    memset(out, 0, sizeof *out);
    if (len > 0 && text[len - 1] == '\r') return 0; /* a run never writes a carriage return: the line was edited */
    json_t *o = td_json_loadb(text, len, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &e, &oom);
    if (!o) return oom ? -1 : 0;
    json_t *ln = json_object_get(o, "line"), *iv = json_object_get(o, "id"), *dh = json_object_get(o, "doc_hash");
    if (json_is_object(o) && json_is_integer(ln) && json_integer_value(ln) >= 1 && json_integer_value(ln) <= INT32_MAX) {
        out->line = (int32_t)json_integer_value(ln);
        if (errors_file) ok = json_is_string(json_object_get(o, "error")) && (json_is_string(iv) || json_is_null(iv));
        else /* a document whose id holds a NUL is a bad line: never a results line */
            ok = json_is_string(iv) && strlen(json_string_value(iv)) == json_string_length(iv) &&
                 json_is_array(json_object_get(o, "decisions"));
        if (ok && json_is_string(iv) && !(out->id = td_strndup(json_string_value(iv), json_string_length(iv)))) oom = 1;
        if (ok && !(json_is_string(dh) && !hex16(json_string_value(dh), json_string_length(dh), &out->doc_hash) &&
                    check_ok(text, len)))
            ok = 2;
    }
    json_decref(o);
    if (oom) {
        td_free(out->id);
        out->id = NULL;
        return -1;
    }
    return ok;
}

int td_run_parse_ours(const char *text, size_t len, int errors_file, int32_t *line, char **id) {
    td_run_line l;
    int r = td_run_parse_line(text, len, errors_file, &l);
    *line = l.line;
    *id = NULL;
    if (r == 1) *id = l.id;
    else td_free(l.id);
    return r == 2 ? 0 : r;
}
