#define _POSIX_C_SOURCE 200809L
#include "util/fileio.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "util/alloc.h"
#include "util/error.h"
#include "util/grow.h"

/* Opens path for reading, *fd, when it is a regular file (*st its stat): else an error that says what it is. The open
 * does not block (on a FIFO it would, before the check could refuse it). */
static td_status open_regular(const char *path, int *fd, struct stat *st) {
    *fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (*fd < 0) return td_fail(TD_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    if (fstat(*fd, st) != 0) {
        int e = errno;
        close(*fd);
        return td_fail(TD_ERR_IO, "%s: cannot stat: %s", path, strerror(e));
    }
    if (!S_ISREG(st->st_mode)) {
        close(*fd);
        return td_fail(TD_ERR_IO, "%s: %s, not a regular file", path, td_file_kind(st->st_mode));
    }
    return TD_OK;
}

td_status td_map_file(const char *path, td_mapped_file *out) {
    memset(out, 0, sizeof *out);
    int fd;
    struct stat st;
    td_status rc = open_regular(path, &fd, &st);
    if (rc != TD_OK) return rc;
    out->size = (size_t)st.st_size;
    if (out->size > 0) {
        void *p = mmap(NULL, out->size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED) {
            int e = errno;
            close(fd);
            return td_fail(TD_ERR_IO, "%s: cannot map: %s", path, strerror(e));
        }
        out->data = p;
    }
    close(fd);
    out->path = td_strdup(path);
    if (!out->path) {
        td_unmap_file(out);
        return td_fail_nomem("a path");
    }
    return TD_OK;
}

void td_unmap_file(td_mapped_file *f) {
    if (!f) return;
    if (f->data) munmap(f->data, f->size);
    td_free(f->path);
    memset(f, 0, sizeof *f);
}

const char *td_file_kind(unsigned mode) {
    if (S_ISREG(mode)) return "a regular file";
    if (S_ISDIR(mode)) return "a directory";
    if (S_ISCHR(mode)) return "a character device";
    if (S_ISBLK(mode)) return "a block device";
    if (S_ISFIFO(mode)) return "a FIFO (pipe)";
    if (S_ISSOCK(mode)) return "a socket";
    return "not a regular file";
}

td_status td_read_file_max(const char *path, size_t cap, const char *what, char **data, size_t *size) {
    *data = NULL;
    if (size) *size = 0;
    int fd;
    struct stat st;
    td_status rc = open_regular(path, &fd, &st);
    if (rc != TD_OK) return rc;
    if ((uint64_t)st.st_size > (uint64_t)cap) {
        close(fd);
        return td_fail(TD_ERR_IO, "%s: %lld bytes, more than the %zu bytes %s", path, (long long)st.st_size, cap,
                       what);
    }
    size_t want = (size_t)st.st_size, n = 0;
    char *buf = td_malloc(want + 1);
    if (!buf) {
        close(fd);
        return td_fail_nomem("a file buffer");
    }
    int err = 0;
    for (;;) { /* the size from fstat, unless the file grows meanwhile: then no further than the cap */
        if (n == want) {
            if (want >= cap + 1) break;
            size_t grow = want < 4096 ? 4096 : want;
            if (grow > cap + 1 - want) grow = cap + 1 - want;
            char *nb = td_realloc(buf, want + grow + 1);
            if (!nb) {
                td_free(buf);
                close(fd);
                return td_fail_nomem("a file buffer");
            }
            buf = nb;
            want += grow;
        }
        ssize_t r = read(fd, buf + n, want - n);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            err = errno;
            break;
        }
        if (r == 0) break;
        n += (size_t)r;
    }
    close(fd);
    if (err || n > cap) {
        td_free(buf);
        if (err) return td_fail(TD_ERR_IO, "%s: read error: %s", path, strerror(err));
        return td_fail(TD_ERR_IO, "%s: more than the %zu bytes %s", path, cap, what);
    }
    buf[n] = 0;
    *data = buf;
    if (size) *size = n;
    return TD_OK;
}

td_status td_read_file(const char *path, char **data, size_t *size) {
    return td_read_file_max(path, TD_MAX_READ_FILE, "a file read whole may have", data, size);
}

int td_file_exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

int td_is_dir(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

char *td_path_join(const char *dir, const char *name) {
    size_t a = strlen(dir), b = strlen(name);
    char *p = td_malloc(a + b + 2);
    if (!p) return NULL;
    memcpy(p, dir, a);
    size_t n = a;
    if (a > 0 && dir[a - 1] != '/') p[n++] = '/';
    memcpy(p + n, name, b + 1);
    return p;
}

/* ---- identity ------------------------------------------------------------------------------------------------ */

/* The directory part of a path ("." when it has none) into a new string, and where its last component starts. */
static char *dir_of(const char *path, const char **base) {
    const char *slash = strrchr(path, '/');
    *base = slash ? slash + 1 : path;
    if (!slash) return td_strdup(".");
    return td_strndup(path, slash == path ? 1 : (size_t)(slash - path));
}

td_status td_file_id_of(const char *path, td_file_id *id) {
    memset(id, 0, sizeof *id);
    struct stat st;
    if (stat(path, &st) == 0) {
        id->exists = 1;
        id->mode = (unsigned)st.st_mode;
        id->dev = (uint64_t)st.st_dev, id->ino = (uint64_t)st.st_ino;
        return TD_OK;
    }
    if (errno != ENOENT) return td_fail(TD_ERR_IO, "%s: %s", path, strerror(errno));
    const char *base;
    char *dir = dir_of(path, &base);
    if (!dir) return td_fail_nomem("a path");
    td_status r = TD_OK;
    if (!*base || strcmp(base, ".") == 0 || strcmp(base, "..") == 0) r = td_fail(TD_ERR_IO, "%s: not a file name", path);
    else if (strlen(base) >= sizeof id->name) r = td_fail(TD_ERR_IO, "%s: the file name is too long", path);
    else if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
        r = td_fail(TD_ERR_IO, "%s: no such directory %s", path, dir);
    else {
        id->dev = (uint64_t)st.st_dev, id->ino = (uint64_t)st.st_ino;
        memcpy(id->name, base, strlen(base) + 1);
    }
    td_free(dir);
    return r;
}

int td_file_id_same(const td_file_id *a, const td_file_id *b) {
    if (a->exists != b->exists || a->dev != b->dev || a->ino != b->ino) return 0;
    return a->exists || strcmp(a->name, b->name) == 0;
}

static int skip_path(const char *p) { return !p || !*p || strcmp(p, "-") == 0; }

/* 1 when out (which exists) is one of the files directly inside the directory dir. */
/* 1 when an entry of dir is the file out, 0 when none is, -1 when a path could not be allocated (reported). */
static int inside_dir(const char *dir, const td_file_id *out) {
    DIR *d = opendir(dir);
    if (!d) return 0;
    struct dirent *e;
    int hit = 0;
    while (!hit && (e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char *p = td_path_join(dir, e->d_name);
        if (!p) {
            hit = -1;
            td_fail_nomem("a path inside a model directory");
            break;
        }
        struct stat st;
        hit = stat(p, &st) == 0 && (uint64_t)st.st_dev == out->dev && (uint64_t)st.st_ino == out->ino;
        td_free(p);
    }
    closedir(d);
    return hit;
}

td_status td_paths_check(const char *const *inputs, int32_t n_inputs, const char *const *outputs,
                         int32_t n_outputs) {
    if ((n_inputs > 0 && !inputs) || (n_outputs > 0 && !outputs) || n_inputs < 0 || n_outputs < 0)
        return td_fail(TD_ERR_INVALID_ARG, "td_paths_check: bad argument");
    for (int32_t i = 0; i < n_outputs; i++) {
        const char *out = outputs[i];
        if (skip_path(out)) continue;
        td_file_id o;
        td_status st = td_file_id_of(out, &o);
        if (st != TD_OK) return st;
        if (o.exists && !S_ISREG(o.mode))
            return td_fail(TD_ERR_IO, "%s: %s, not a regular file: refusing to write there", out, td_file_kind(o.mode));
        for (int32_t j = 0; j < n_inputs; j++) {
            const char *in = inputs[j];
            td_file_id x;
            if (skip_path(in)) continue;
            td_status sx = td_file_id_of(in, &x);
            if (sx == TD_ERR_NOMEM) return sx;
            if (sx != TD_OK || !x.exists) continue; /* its reader says so */
            if (td_file_id_same(&o, &x))
                return td_fail(TD_ERR_INVALID_ARG, "%s: refusing to write over an input of this command (%s)", out, in);
            int hit = o.exists && x.exists && S_ISDIR(x.mode) ? inside_dir(in, &o) : 0;
            if (hit < 0) return TD_ERR_NOMEM;
            if (hit) return td_fail(TD_ERR_INVALID_ARG, "%s: refusing to write over a file of the model %s", out, in);
        }
        for (int32_t j = 0; j < i; j++) {
            td_file_id y;
            if (skip_path(outputs[j])) continue;
            td_status sy = td_file_id_of(outputs[j], &y);
            if (sy == TD_ERR_NOMEM) return sy;
            if (sy != TD_OK) continue;
            if (td_file_id_same(&o, &y))
                return td_fail(TD_ERR_INVALID_ARG, "%s and %s are the same file: two outputs of this command cannot "
                                                   "share it", outputs[j], out);
        }
    }
    return TD_OK;
}

/* ---- writing ------------------------------------------------------------------------------------------------- */

td_status td_wfile_open(td_wfile *w, const char *path, unsigned flags) {
    memset(w, 0, sizeof *w);
    w->flags = flags;
    if (!path || !*path) return td_fail(TD_ERR_INVALID_ARG, "an output file needs a path");
    struct stat st;
    int exists = stat(path, &st) == 0;
    if (!exists && errno != ENOENT) return td_fail(TD_ERR_IO, "%s: %s", path, strerror(errno));
    if (exists && !S_ISREG(st.st_mode))
        return td_fail(TD_ERR_IO, "%s: %s, not a regular file: refusing to write there", path, td_file_kind(st.st_mode));
    if (exists && (flags & TD_WFILE_NO_REPLACE)) return td_fail(TD_ERR_STATE, "%s exists", path);
    /* a symbolic link stays a link: its target is the file replaced, in the target's directory */
    char *target = exists ? realpath(path, NULL) : NULL;
    if (exists && !target) return td_fail(TD_ERR_IO, "%s: %s", path, strerror(errno));
    w->path = td_strdup(exists ? target : path);
    free(target); /* realpath's buffer is the C library's */
    const char *base;
    char *dir = w->path ? dir_of(w->path, &base) : NULL;
    if (!w->path || !dir) {
        td_free(dir);
        td_wfile_abort(w);
        return td_fail_nomem("a path");
    }
    struct stat ds;
    if (stat(dir, &ds) != 0 || !S_ISDIR(ds.st_mode)) {
        td_status r = td_fail(TD_ERR_IO, "%s: cannot create: no such directory %s", path, dir);
        td_free(dir);
        td_wfile_abort(w);
        return r;
    }
    /* ".NAME.tmp.PID.N" beside it: hidden, on the same file system (rename is atomic), never an existing name */
    size_t bl = strlen(base) > 200 ? 200 : strlen(base);
    w->tmp = td_malloc(strlen(dir) + bl + 64);
    if (!w->tmp) {
        td_free(dir);
        td_wfile_abort(w);
        return td_fail_nomem("a path");
    }
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    unsigned long salt = (unsigned long)ts.tv_nsec ^ ((unsigned long)(uintptr_t)w >> 4);
    int fd = -1, e = 0;
    for (int k = 0; k < 100 && fd < 0; k++) {
        sprintf(w->tmp, "%s/.%.*s.tmp.%ld.%lu", dir, (int)bl, base, (long)getpid(), (salt + (unsigned long)k) % 1000000);
        fd = open(w->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        e = errno;
        if (fd < 0 && e != EEXIST) break;
    }
    td_free(dir);
    if (fd < 0) {
        td_status r = td_fail(TD_ERR_IO, "%s: cannot create a file beside it (%s): %s", path, w->tmp, strerror(e));
        td_free(w->tmp);
        w->tmp = NULL;
        td_wfile_abort(w);
        return r;
    }
    if (exists) (void)fchmod(fd, st.st_mode & 07777); /* the replacement keeps the old file's permissions */
    if (!(w->f = fdopen(fd, "wb"))) {
        close(fd);
        td_wfile_abort(w);
        return td_fail_nomem("a file stream");
    }
    return TD_OK;
}

void td_wfile_abort(td_wfile *w) {
    if (!w) return;
    if (w->f) fclose(w->f);
    if (w->tmp) unlink(w->tmp);
    td_free(w->tmp);
    td_free(w->path);
    memset(w, 0, sizeof *w);
}

static td_status sync_dir_of(const char *path) {
    const char *base;
    char *dir = dir_of(path, &base);
    if (!dir) return td_fail_nomem("a path");
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    td_status st = TD_OK;
    if (fd < 0) st = td_fail(TD_ERR_IO, "%s: cannot open the directory: %s", dir, strerror(errno));
    else if (fsync(fd) != 0 && errno != EINVAL) st = td_fail(TD_ERR_IO, "%s: fsync failed: %s", dir, strerror(errno));
    if (fd >= 0) close(fd);
    td_free(dir);
    return st;
}

td_status td_wfile_commit(td_wfile *w) {
    if (!w || !w->f) {
        td_wfile_abort(w);
        return td_fail(TD_ERR_INVALID_ARG, "td_wfile_commit: no file open");
    }
    errno = 0;
    int bad = ferror(w->f) != 0, e = errno;
    if (fflush(w->f) != 0 && !bad) bad = 1, e = errno;
    if (!bad && !(w->flags & TD_WFILE_NO_SYNC) && fsync(fileno(w->f)) != 0) bad = 1, e = errno;
    if (fclose(w->f) != 0 && !bad) bad = 1, e = errno;
    w->f = NULL;
    td_status st = TD_OK;
    if (bad) st = td_fail(TD_ERR_IO, "%s: write failed%s%s", w->path, e ? ": " : "", e ? strerror(e) : "");
    else if (w->flags & TD_WFILE_NO_REPLACE) {
        /* link() never replaces: a file that appeared meanwhile is kept */
        if (link(w->tmp, w->path) != 0)
            st = errno == EEXIST ? td_fail(TD_ERR_STATE, "%s exists", w->path)
                                 : td_fail(TD_ERR_IO, "%s: cannot create: %s", w->path, strerror(errno));
        unlink(w->tmp);
    } else if (rename(w->tmp, w->path) != 0) {
        st = td_fail(TD_ERR_IO, "%s: cannot rename %s over it: %s", w->path, w->tmp, strerror(errno));
    } else {
        td_free(w->tmp); /* renamed: nothing to remove */
        w->tmp = NULL;
    }
    if (st == TD_OK && !(w->flags & TD_WFILE_NO_SYNC)) st = sync_dir_of(w->path);
    td_wfile_abort(w);
    return st;
}

/* ---- the public face of the same ------------------------------------------------------------------------------ */

struct td_outfile {
    td_wfile w;
    int err; /* errno of the first failed write */
};

td_status td_outfile_open(const char *path, unsigned flags, td_outfile **out) {
    if (!out) return td_fail(TD_ERR_INVALID_ARG, "td_outfile_open: NULL argument");
    *out = NULL;
    td_outfile *f = td_calloc(1, sizeof *f);
    if (!f) return td_fail_nomem("an output file");
    td_status st = td_wfile_open(&f->w, path, flags);
    if (st != TD_OK) {
        td_free(f);
        return st;
    }
    *out = f;
    return TD_OK;
}

td_status td_outfile_write(td_outfile *f, const void *data, size_t n) {
    if (!f || (!data && n)) return td_fail(TD_ERR_INVALID_ARG, "td_outfile_write: NULL argument");
    if (!f->err && n && fwrite(data, 1, n, f->w.f) != n) f->err = errno ? errno : EIO;
    if (f->err) return td_fail(TD_ERR_IO, "%s: write failed: %s", f->w.path, strerror(f->err));
    return TD_OK;
}

td_status td_outfile_commit(td_outfile *f) {
    if (!f) return td_fail(TD_ERR_INVALID_ARG, "td_outfile_commit: NULL argument");
    td_status st;
    if (f->err) {
        st = td_fail(TD_ERR_IO, "%s: write failed: %s", f->w.path, strerror(f->err));
        td_wfile_abort(&f->w);
    } else {
        st = td_wfile_commit(&f->w);
    }
    td_free(f);
    return st;
}

void td_outfile_abort(td_outfile *f) {
    if (!f) return;
    td_wfile_abort(&f->w);
    td_free(f);
}

td_status td_file_write(const char *path, const void *data, size_t n, unsigned flags) {
    td_outfile *f;
    td_status st = td_outfile_open(path, flags, &f);
    if (st != TD_OK) return st;
    if ((st = td_outfile_write(f, data, n)) != TD_OK) {
        td_outfile_abort(f);
        return st;
    }
    return td_outfile_commit(f);
}

/* ---- hashing -------------------------------------------------------------------------------------------------- */

#define H_K1 0x9e3779b97f4a7c15ull
#define H_K2 0xbf58476d1ce4e5b9ull

static uint64_t mix64(uint64_t x) {
    x ^= x >> 30, x *= H_K2, x ^= x >> 27, x *= 0x94d049bb133111ebull, x ^= x >> 31;
    return x;
}

static void hash_word(td_hash64 *s, uint64_t w) {
    s->h ^= mix64(w + H_K1);
    s->h = ((s->h << 27) | (s->h >> 37)) * H_K1 + 0x52dce729u;
}

void td_hash64_init(td_hash64 *s) { memset(s, 0, sizeof *s); }

void td_hash64_update(td_hash64 *s, const void *data, size_t len) {
    const unsigned char *p = data;
    s->n += len;
    while (len && s->nt) { /* finish the word a previous piece began */
        s->tail |= (uint64_t)*p++ << (8 * s->nt);
        len--;
        if (++s->nt == 8) hash_word(s, s->tail), s->tail = 0, s->nt = 0;
    }
    for (; len >= 8; p += 8, len -= 8) {
        uint64_t w = 0;
        for (int i = 0; i < 8; i++) w |= (uint64_t)p[i] << (8 * i);
        hash_word(s, w);
    }
    for (; len; len--) s->tail |= (uint64_t)*p++ << (8 * s->nt++);
}

uint64_t td_hash64_final(const td_hash64 *s) {
    td_hash64 c = *s;
    if (c.nt) hash_word(&c, c.tail | (uint64_t)0x80 << (8 * c.nt));
    return mix64(c.h ^ c.n);
}

/* ---- fingerprints -------------------------------------------------------------------------------------------- */

/* Size and 1 MiB of content: the first and last 64 KiB and 14 blocks of 64 KiB evenly between. */
static td_status fingerprint_file(const char *path, td_hash64 *h) {
    int fd;
    struct stat st;
    td_status rc = open_regular(path, &fd, &st);
    if (rc != TD_OK) return rc;
    uint64_t size = (uint64_t)st.st_size;
    td_hash64_update(h, &size, sizeof size);
    enum { BLOCK = 1 << 16, BLOCKS = 16 };
    char *buf = td_malloc(BLOCK);
    if (!buf) {
        close(fd);
        return td_fail_nomem("a read buffer");
    }
    td_status r = TD_OK;
    for (int b = 0; b < BLOCKS && r == TD_OK; b++) {
        uint64_t off = size <= (uint64_t)BLOCK * BLOCKS ? (uint64_t)b * BLOCK : (size - BLOCK) / (BLOCKS - 1) * (uint64_t)b;
        if (off >= size) break;
        ssize_t got = pread(fd, buf, BLOCK, (off_t)off);
        if (got < 0) r = td_fail(TD_ERR_IO, "%s: read error: %s", path, strerror(errno));
        else td_hash64_update(h, buf, (size_t)got);
    }
    td_free(buf);
    close(fd);
    return r;
}

static int model_file_name(const char *n) {
    static const char *const names[] = {"config.json", "generation_config.json", "tokenizer.json",
                                        "tokenizer_config.json", "adapter_config.json", NULL};
    for (int i = 0; names[i]; i++)
        if (strcmp(n, names[i]) == 0) return 1;
    size_t l = strlen(n);
    return (l > 12 && strcmp(n + l - 12, ".safetensors") == 0) || (l > 5 && strcmp(n + l - 5, ".gguf") == 0) ||
           (l > 23 && strcmp(n + l - 23, ".safetensors.index.json") == 0);
}

static int cmp_names(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

td_status td_file_fingerprint(const char *path, uint64_t *fingerprint) {
    if (!path || !fingerprint) return td_fail(TD_ERR_INVALID_ARG, "td_file_fingerprint: NULL argument");
    td_hash64 h;
    td_hash64_init(&h);
    if (!td_is_dir(path)) {
        td_status st = fingerprint_file(path, &h);
        *fingerprint = td_hash64_final(&h);
        return st;
    }
    DIR *d = opendir(path);
    if (!d) return td_fail(TD_ERR_IO, "%s: cannot open the directory: %s", path, strerror(errno));
    char **names = NULL;
    size_t n = 0, cap = 0;
    td_status st = TD_OK;
    struct dirent *e;
    while (st == TD_OK && (e = readdir(d))) {
        if (e->d_name[0] == '.' || !model_file_name(e->d_name)) continue;
        char **nn = td_grow(names, &cap, n + 1, sizeof *nn, 16);
        if (!nn) {
            st = td_fail_nomem("file names");
            break;
        }
        names = nn;
        if (!(names[n] = td_strdup(e->d_name))) st = td_fail_nomem("file names");
        else n++;
    }
    closedir(d);
    if (st == TD_OK && n) qsort(names, n, sizeof *names, cmp_names);
    for (size_t i = 0; i < n && st == TD_OK; i++) {
        char *p = td_path_join(path, names[i]);
        if (!p) st = td_fail_nomem("a path");
        else {
            td_hash64_update(&h, names[i], strlen(names[i]) + 1);
            st = fingerprint_file(p, &h);
        }
        td_free(p);
    }
    for (size_t i = 0; i < n; i++) td_free(names[i]);
    td_free(names);
    *fingerprint = td_hash64_final(&h);
    return st;
}
