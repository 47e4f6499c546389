#define _POSIX_C_SOURCE 200809L
#include "cli.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
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

const char *cli_precision_name(int32_t precision) { return precision == TD_PRECISION_BF16 ? "bf16" : "fp32"; }

int cli_device(const char *cmd, const char *device_s, const char *precision_s, int32_t *device, int32_t *precision,
               char *desc, size_t desc_len) {
    int dev = device_s ? td_device_parse(device_s) : TD_DEVICE_CPU;
    if (dev < 0) return cli_usage_error(cmd, "--device must be cpu or cuda, not '%s'", device_s);
    int prec = precision_s ? td_precision_parse(precision_s) : TD_PRECISION_FP32;
    if (prec < 0) return cli_usage_error(cmd, "--precision must be fp32 or bf16, not '%s'", precision_s);
    *device = (int32_t)dev;
    *precision = (int32_t)prec;
    if (desc && desc_len) snprintf(desc, desc_len, "cpu");
    if (dev == TD_DEVICE_CPU && prec == TD_PRECISION_BF16 && !td_cpu_bf16_products())
        fprintf(stderr,
                "typedecide %s: note: --precision bf16: the %s kernels%s have no bf16 products, so this CPU computes "
                "in fp32 (exact)\n",
                cmd, td_cpu_kernels(), getenv("TD_KERNELS") ? " (TD_KERNELS)" : "");
    if (dev == TD_DEVICE_CPU) return 0;
    char d[256] = "";
    if (td_device_probe((td_device)dev, d, sizeof d) != TD_OK)
        return cli_error(cmd, "--device %s: %s", device_s, td_last_error());
    if (desc && desc_len) snprintf(desc, desc_len, "%s", d);
    return 0;
}

/* A named pipe that no process opens for writing would block the open (and then the read) for ever: it is opened
 * without blocking and given CLI_FIFO_WAIT_S seconds to deliver data or its end. An anonymous pipe (a shell's
 * <(...)) has its writer already. */
static int fifo_wait(const char *cmd, const char *path, int fd) {
    char link[64], target[64] = "";
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, target, sizeof target - 1);
    if (n > 0 && strncmp(target, "pipe:", 5) == 0) return 0;
    struct pollfd p = {fd, POLLIN, 0};
    int r;
    do r = poll(&p, 1, CLI_FIFO_WAIT_S * 1000);
    while (r < 0 && errno == EINTR);
    if (r > 0) return 0;
    cli_error(cmd, "%s: a named pipe (FIFO) that no process wrote to within %d s", path, CLI_FIFO_WAIT_S);
    return -1;
}

FILE *cli_open_input(const char *cmd, const char *path) {
    if (strcmp(path, "-") == 0) return stdin;
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        cli_error(cmd, "%s: cannot open: %s", path, strerror(errno));
        return NULL;
    }
    struct stat st;
    if (fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
        close(fd);
        cli_error(cmd, "%s: is a directory, not a file", path);
        return NULL;
    }
    if (fstat(fd, &st) == 0 && S_ISFIFO(st.st_mode) && fifo_wait(cmd, path, fd)) {
        close(fd);
        return NULL;
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0) fcntl(fd, F_SETFL, fl & ~O_NONBLOCK); /* reads wait for a pipe's data again */
    FILE *f = fdopen(fd, "rb");
    if (!f) {
        close(fd);
        cli_error(cmd, "%s: out of memory opening it", path);
    }
    return f;
}

char *cli_read_input(const char *cmd, const char *path, size_t cap, const char *why_cap, size_t *len) {
    FILE *f = cli_open_input(cmd, path);
    if (!f) return NULL;
    size_t size = 1 << 16, n = 0;
    char *buf = malloc(size + 1);
    int err = 0;
    while (buf) {
        size_t want = size - n;
        if (want > cap + 1 - n) want = cap + 1 - n; /* one byte past the cap tells that there is more */
        size_t r = fread(buf + n, 1, want, f);
        n += r;
        if (r < want) {
            err = ferror(f) ? errno : 0;
            break;
        }
        if (n > cap) break;
        if (n == size) {
            char *nb = realloc(buf, (size *= 2) + 1);
            if (!nb) free(buf);
            buf = nb;
        }
    }
    if (f != stdin) fclose(f);
    if (!buf) {
        cli_error(cmd, "%s: out of memory reading it", path);
        return NULL;
    }
    if (err || n > cap) {
        free(buf);
        if (err) cli_error(cmd, "%s: read error: %s", path, strerror(err));
        else cli_error(cmd, "%s: more than %zu bytes, the most %s", path, cap, why_cap);
        return NULL;
    }
    buf[n] = 0;
    if (len) *len = n;
    return buf;
}

ssize_t cli_read_line(FILE *f, char **line, size_t *cap, size_t max) {
    size_t n = 0;
    int c;
    while ((c = getc(f)) != EOF) {
        if (n + 2 > *cap) {
            size_t nc = *cap ? 2 * *cap : 256;
            char *nl = realloc(*line, nc);
            if (!nl) return -4;
            *line = nl, *cap = nc;
        }
        (*line)[n++] = (char)c;
        if (c == '\n') break;
        if (n > max) return -3;
    }
    if (c == EOF && ferror(f)) return -2;
    if (c == EOF && n == 0) return -1;
    (*line)[n] = 0;
    return (ssize_t)n;
}

int cli_line_error(const char *cmd, const char *path, long lineno, ssize_t r, size_t max) {
    if (r == -2) return cli_error(cmd, "%s:%ld: read error: %s", path, lineno, strerror(errno));
    if (r == -3) return cli_error(cmd, "%s:%ld: line longer than %zu bytes", path, lineno, max);
    return cli_error(cmd, "%s:%ld: out of memory reading the line", path, lineno);
}

int cli_finish_output(const char *cmd) {
    if (fflush(stdout) == 0 && !ferror(stdout) && fclose(stdout) == 0) return 0;
    fprintf(stderr, "typedecide %s: writing the output failed: %s\n", cmd, strerror(errno ? errno : EIO));
    return 1;
}

int cli_same_file(const char *a, const char *b) {
    struct stat sa, sb;
    return stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

int cli_refuse_overwrite(const char *cmd, const char *out, const char *const *inputs, int n) {
    const char *outs[] = {out};
    return cli_check_paths(cmd, inputs, n, outs, 1);
}

int cli_check_paths(const char *cmd, const char *const *inputs, int n_in, const char *const *outputs, int n_out) {
    if (td_paths_check(inputs, n_in, outputs, n_out) == TD_OK) return 0;
    return cli_fail_msg(cmd);
}

char *cli_json_string(const char *s) {
    json_t *j = s ? json_string(s) : NULL;
    char *t = j ? json_dumps(j, JSON_ENCODE_ANY) : NULL;
    json_decref(j);
    return t;
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

char *cli_instruction(const char *cmd, const char *arg) {
    if (cli_is_dir(arg)) {
        cli_error(cmd, "--instruction %s: is a directory (give the instruction text, or a file holding it)", arg);
        return NULL;
    }
    struct stat st; /* a file, or a pipe or device that exists (<(...)): read, within the cap */
    if (cli_is_file(arg) || (strchr(arg, '/') && stat(arg, &st) == 0))
        return cli_read_input(cmd, arg, CLI_MAX_TEXT, "an instruction can be", NULL);
    size_t n = strlen(arg);
    int spaces = strpbrk(arg, " \t\n") != NULL;
    int pathlike = !spaces && (strchr(arg, '/') || (n > 4 && (strcmp(arg + n - 4, ".txt") == 0 || strcmp(arg + n - 3, ".md") == 0)));
    if (pathlike) {
        cli_error(cmd, "--instruction %s: no such file (to use this very text as the instruction, add a space)", arg);
        return NULL;
    }
    char *t = strdup(arg);
    if (!t) cli_error(cmd, "out of memory");
    return t;
}

int cli_check_context(const char *cmd, const td_model *m, long long needed, long long ctx_max, const char *what) {
    long long trained = td_model_n_ctx_train(m), limit = ctx_max ? ctx_max : trained;
    if (needed > limit) {
        if (ctx_max) return cli_error(cmd, "%s need %lld positions, more than --ctx %lld", what, needed, ctx_max);
        return cli_error(cmd, "%s need %lld positions, past the model's context of %lld tokens "
                              "(--ctx N goes further, outside what the model was trained on)", what, needed, trained);
    }
    if (needed > trained)
        fprintf(stderr, "typedecide %s: warning: %lld positions, past the model's trained context of %lld\n", cmd, needed,
                trained);
    return 0;
}
