#include "test_util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int td_test_failures = 0;

int td_test_finish(const char *name) {
    if (td_test_failures) {
        fprintf(stderr, "%s: %d check(s) failed\n", name, td_test_failures);
        return 1;
    }
    printf("%s: all checks passed\n", name);
    return 0;
}

uint64_t td_test_rand(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

float td_test_uniform(uint64_t *s, float lo, float hi) {
    return lo + (hi - lo) * (float)(td_test_rand(s) >> 40) * (1.0f / 16777216.0f);
}

const char *td_test_path(const char *rel) {
    static char buf[4096];
    const char *root = getenv("TD_ROOT");
    snprintf(buf, sizeof buf, "%s/%s", root ? root : ".", rel);
    return buf;
}

void *td_test_read(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    if (buf) buf[n] = 0;
    fclose(f);
    if (len) *len = (size_t)n;
    return buf;
}

int td_test_sanitized(void) { return getenv("TD_SANITIZED") != NULL; }

double td_test_rel_diff(const float *a, const float *b, int64_t n) {
    double md = 0, mx = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]);
        if (!(d <= md)) md = d;
        if (fabs((double)b[i]) > mx) mx = fabs((double)b[i]);
    }
    return md / (mx > 0 ? mx : 1);
}
