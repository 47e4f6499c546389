#define _POSIX_C_SOURCE 200809L
#include "util/fileio.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/alloc.h"
#include "util/error.h"

td_status td_map_file(const char *path, td_mapped_file *out) {
    memset(out, 0, sizeof *out);
    int fd = open(path, O_RDONLY);
    if (fd < 0) return td_fail(TD_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return td_fail(TD_ERR_IO, "%s: cannot stat: %s", path, strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return td_fail(TD_ERR_IO, "%s: not a regular file", path);
    }
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

td_status td_read_file(const char *path, char **data, size_t *size) {
    *data = NULL;
    if (size) *size = 0;
    FILE *fp = fopen(path, "rb");
    if (!fp) return td_fail(TD_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    size_t cap = 1 << 16, n = 0;
    char *buf = td_malloc(cap + 1);
    if (!buf) {
        fclose(fp);
        return td_fail_nomem("a file buffer");
    }
    for (;;) {
        if (n == cap) {
            char *nb = td_realloc(buf, cap * 2 + 1);
            if (!nb) {
                td_free(buf);
                fclose(fp);
                return td_fail_nomem("a file buffer");
            }
            buf = nb;
            cap *= 2;
        }
        size_t r = fread(buf + n, 1, cap - n, fp);
        n += r;
        if (r == 0) break;
    }
    int err = ferror(fp);
    fclose(fp);
    if (err) {
        td_free(buf);
        return td_fail(TD_ERR_IO, "%s: read error", path);
    }
    buf[n] = 0;
    *data = buf;
    if (size) *size = n;
    return TD_OK;
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
