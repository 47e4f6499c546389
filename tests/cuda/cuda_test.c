/* The CUDA kernel tests' shared plumbing (cuda_test.h). */
#include "cuda/cuda_test.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int cu_test_ok(int ok, const char *what, const char *file, int line) {
    if (!ok) {
        fprintf(stderr, "%s:%d: %s failed: %s\n", file, line, what, td_cu_error());
        td_test_failures++;
    }
    return ok;
}

int cu_test_device(const char *test) {
    char name[256];
    int64_t total = 0;
    if (td_cu_probe(name, sizeof name, &total) != 0) {
        printf("%s: skipped: %s\n", test, td_cu_error());
        return 0;
    }
    printf("device: %s, %.1f GiB\n", name, (double)total / (1 << 30));
    return 1;
}

void *cu_up(const void *h, size_t bytes) {
    void *d = td_cu_malloc(bytes);
    if (!d) {
        fprintf(stderr, "td_cu_malloc(%zu): %s\n", bytes, td_cu_error());
        exit(1);
    }
    if (h) CU(td_cu_h2d(d, h, bytes, NULL));
    else CU(td_cu_zero(d, bytes, NULL));
    return d;
}

void cu_down(void *h, const void *d, size_t bytes) { CU(td_cu_d2h(h, d, bytes, NULL)); }

float *cu_rnd(uint64_t *seed, int64_t n, float lo, float hi) {
    float *p = malloc((size_t)(n > 0 ? n : 1) * sizeof *p);
    for (int64_t i = 0; i < n; i++) p[i] = td_test_uniform(seed, lo, hi);
    return p;
}

void cu_shuffle(uint64_t *seed, int32_t *a, int64_t n) {
    for (int64_t i = n - 1; i > 0; i--) {
        int64_t j = (int64_t)(td_test_rand(seed) % (uint64_t)(i + 1));
        int32_t t = a[i];
        a[i] = a[j], a[j] = t;
    }
}

int64_t cu_ulps(float a, float b) {
    if (isnan(a) || isnan(b)) return isnan(a) && isnan(b) ? 0 : INT64_MAX / 2;
    int32_t i, j;
    memcpy(&i, &a, 4);
    memcpy(&j, &b, 4);
    int64_t x = i < 0 ? (int64_t)INT32_MIN - i : i, y = j < 0 ? (int64_t)INT32_MIN - j : j;
    return x > y ? x - y : y - x;
}

void cu_bits(const char *name, const float *a, const float *b, int64_t n) {
    int64_t differ = 0;
    double md = 0;
    for (int64_t i = 0; i < n; i++) {
        if (memcmp(&a[i], &b[i], sizeof *a)) {
            if (differ++ < 3) fprintf(stderr, "  %s: [%lld] %.9g vs %.9g\n", name, (long long)i, a[i], b[i]);
            double d = fabs((double)a[i] - b[i]);
            if (!(d <= md)) md = d;
        }
    }
    printf("  %-58s %s", name, differ ? "NOT bit-exact" : "bit-exact");
    if (differ) printf(" (%lld of %lld differ, max |diff| %.3g)", (long long)differ, (long long)n, md);
    printf("\n");
    CHECKF(differ == 0, "%s", name);
}

void cu_within_ulps(const char *name, const float *a, const float *b, int64_t n, int64_t tol) {
    int64_t worst = 0;
    for (int64_t i = 0; i < n; i++) {
        int64_t u = cu_ulps(a[i], b[i]);
        if (u > worst) worst = u;
    }
    printf("  %-58s max %lld ulp (allowed %lld)\n", name, (long long)worst, (long long)tol);
    CHECKF(worst <= tol, "%s: %lld ulp", name, (long long)worst);
}

void cu_within_rel(const char *name, const float *a, const float *b, int64_t n, double tol) {
    double e = td_test_rel_diff(a, b, n);
    printf("  %-58s max rel diff %.3g (allowed %.3g)\n", name, e, tol);
    CHECKF(e <= tol, "%s: %g", name, e);
}
