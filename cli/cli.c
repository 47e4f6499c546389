#define _POSIX_C_SOURCE 200809L
#include "cli.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

int cli_error(const char *cmd, const char *fmt, ...) {
    va_list ap;
    fprintf(stderr, "typedecide %s: ", cmd);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    return 1;
}

int cli_usage_error(const char *cmd, const char *fmt, ...) {
    va_list ap;
    fprintf(stderr, "typedecide %s: ", cmd);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n(see: typedecide %s --help)\n", cmd);
    return 2;
}

int cli_fail(const char *cmd, td_status st) {
    fprintf(stderr, "typedecide %s: %s: %s\n", cmd, td_status_str(st), td_last_error());
    return 1;
}

int cli_parse(int argc, char **argv, const cli_opt *opts, const char *cmd, const char **positional, int max_pos,
              int *n_pos) {
    int np = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) return 1;
        if (a[0] != '-' || strcmp(a, "-") == 0) {
            if (np >= max_pos) return cli_usage_error(cmd, "unexpected argument \"%s\"", a);
            positional[np++] = a;
            continue;
        }
        const char *name = a[1] == '-' ? a + 2 : a + 1;
        const char *eq = strchr(name, '=');
        size_t nlen = eq ? (size_t)(eq - name) : strlen(name);
        const cli_opt *o = NULL;
        for (const cli_opt *p = opts; p && p->name; p++)
            if (strlen(p->name) == nlen && strncmp(p->name, name, nlen) == 0 && (a[1] == '-' || nlen == 1)) o = p;
        if (!o) return cli_usage_error(cmd, "unknown option \"%s\"", a);
        if (o->takes_value) {
            if (eq) *o->value = eq + 1;
            else if (i + 1 < argc) *o->value = argv[++i];
            else return cli_usage_error(cmd, "option --%s needs a value", o->name);
        } else {
            if (eq) return cli_usage_error(cmd, "option --%s takes no value", o->name);
            *o->flag = 1;
        }
    }
    if (n_pos) *n_pos = np;
    return 0;
}

int cli_int(const char *s, long long lo, long long hi, long long *out) {
    if (!s || !*s) return -1;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || *end || v < lo || v > hi) return -1;
    *out = v;
    return 0;
}

int cli_double(const char *s, double *out) {
    if (!s || !*s) return -1;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || *end || !isfinite(v)) return -1;
    *out = v;
    return 0;
}

int cli_ids(const char *s, int32_t **ids, size_t *n) {
    size_t cap = 16, k = 0;
    int32_t *v = malloc(cap * sizeof *v);
    if (!v) return -1;
    const char *p = s;
    while (*p == ' ' || *p == '[') p++;
    while (*p && *p != ']') {
        char *end;
        errno = 0;
        long long x = strtoll(p, &end, 10);
        if (end == p || errno || x < INT32_MIN || x > INT32_MAX) {
            free(v);
            return -1;
        }
        if (k == cap) {
            int32_t *nv = realloc(v, (cap *= 2) * sizeof *nv);
            if (!nv) {
                free(v);
                return -1;
            }
            v = nv;
        }
        v[k++] = (int32_t)x;
        p = end;
        while (*p == ' ') p++;
        if (*p == ',') p++;
        else if (*p && *p != ']') {
            free(v);
            return -1;
        }
        while (*p == ' ') p++;
    }
    *ids = v;
    *n = k;
    return 0;
}

void cli_print_ids(const int32_t *ids, size_t n) {
    putchar('[');
    for (size_t i = 0; i < n; i++) printf(i ? ", %d" : "%d", ids[i]);
    puts("]");
}

static void log_stderr(void *user, int level, const char *msg) {
    if (user && level == 0) return; /* quiet: warnings only */
    fprintf(stderr, "typedecide: %s%s\n", level ? "warning: " : "", msg);
}

td_status cli_load_model(const char *path, int want_tokenizer, int quiet, const char *adapter, td_model **out) {
    td_model_params mp = td_model_default_params();
    mp.load_tokenizer = want_tokenizer;
    mp.adapter = adapter;
    mp.log = log_stderr;
    mp.log_user = quiet ? (void *)1 : NULL;
    return td_model_load(path, &mp, out);
}

int cli_default_threads(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : (int)n;
}

double cli_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int cli_kv(const char *cmd, const char *s, int32_t *kv_f16) {
    if (!s) return 0;
    if (strcmp(s, "f32") == 0 || strcmp(s, "f16") == 0) {
        *kv_f16 = strcmp(s, "f16") == 0;
        return 0;
    }
    return cli_usage_error(cmd, "--kv must be f32 or f16, not '%s'", s);
}

char *cli_read_file(const char *path, size_t *len) {
    FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap + 1);
    while (buf) {
        size_t r = fread(buf + n, 1, cap - n, f);
        n += r;
        if (r == 0) break;
        if (n == cap) {
            char *nb = realloc(buf, (cap *= 2) + 1);
            if (!nb) free(buf);
            buf = nb;
        }
    }
    int err = ferror(f);
    if (f != stdin) fclose(f);
    if (buf && err) {
        free(buf);
        buf = NULL;
        errno = EIO;
    }
    if (!buf) return NULL;
    buf[n] = 0;
    if (len) *len = n;
    return buf;
}

int cli_is_file(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

int cli_is_gguf(const char *path) {
    FILE *f = fopen(path, "rb");
    unsigned char b[4] = {0};
    int ok = f && fread(b, 1, 4, f) == 4 && memcmp(b, "GGUF", 4) == 0;
    if (f) fclose(f);
    return ok;
}

int cli_is_dir(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

int cli_fail_msg(const char *cmd) {
    fprintf(stderr, "typedecide %s: %s\n", cmd, td_last_error());
    return 1;
}
