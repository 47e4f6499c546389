/* How fast the attention kernels are on this CPU, alone: the tasks of one KV head of a prefill as the engine makes
 * them (blocks of --block tokens, --group query heads per KV head: rows = block x group, row r of token p attends to
 * keys 0..p), keys and values in an fp32 cache of --kvdim floats a row, one thread. For every kernel set this CPU
 * runs: ns per (row, key) pair (best of --reps), the largest difference from the scalar reference and a hash of the
 * output's bits. Not part of the engine; built against build/'s library: cc -O2 -march=native -Isrc -Iinclude
 * bench/attn_probe.c build/libtypedecide.a -lpcre2-8 -lutf8proc -ljansson -lm -lpthread
 *
 *   attn_probe [--tokens P] [--dim D] [--group G] [--block B] [--kvdim K] [--reps N] [--pre N] [--only SET]
 * (--only: that set alone, unchecked: for a profiler) */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/cpu/kernels.h"
#include "probe.h"

static void *xalloc(size_t n) {
    void *p = aligned_alloc(64, (n + 63) / 64 * 64);
    if (!p) { fprintf(stderr, "attn_probe: out of memory\n"); exit(1); }
    return p;
}

int main(int argc, char **argv) {
    int64_t P = 512, D = 128, G = 2, B = 32, K = 1024, reps = 5, pre = 0;
    const char *only = NULL;
    for (int i = 1; i + 1 < argc; i += 2) {
        int64_t v = atoll(argv[i + 1]);
        if (!strcmp(argv[i], "--only")) only = argv[i + 1];
        else if (!strcmp(argv[i], "--tokens")) P = v;
        else if (!strcmp(argv[i], "--dim")) D = v;
        else if (!strcmp(argv[i], "--group")) G = v;
        else if (!strcmp(argv[i], "--block")) B = v;
        else if (!strcmp(argv[i], "--kvdim")) K = v;
        else if (!strcmp(argv[i], "--reps")) reps = v;
        else if (!strcmp(argv[i], "--pre")) pre = v;
        else { fprintf(stderr, "attn_probe: unknown flag %s\n", argv[i]); return 2; }
    }
    float *kc = xalloc((size_t)(P * K) * 4), *vc = xalloc((size_t)(P * K) * 4);
    for (int64_t i = 0; i < P * K; i++) kc[i] = uniform() * 2, vc[i] = uniform();
    float *q = xalloc((size_t)(P * G * D) * 4);
    for (int64_t i = 0; i < P * G * D; i++) q[i] = uniform() * 2;
    float *pk = xalloc((size_t)(pre * D + 1) * 4), *pv = xalloc((size_t)(pre * D + 1) * 4);
    for (int64_t i = 0; i < pre; i++)
        memcpy(pk + i * D, kc + i * K, (size_t)D * 4), memcpy(pv + i * D, vc + i * K, (size_t)D * 4);
    int32_t *idx = xalloc((size_t)P * 4);
    for (int64_t i = 0; i < P; i++) idx[i] = (int32_t)i;
    int64_t R = B * G;
    float *scratch = xalloc((size_t)td_attn_rows_scratch(R, P, D, 0) * 4);
    float *ref = xalloc((size_t)(P * G * D) * 4), *got = xalloc((size_t)(P * G * D) * 4);
    td_attn_keys keys = {kc, vc, 0, idx, K, pre ? pk : NULL, pre ? pv : NULL, pre};
    double pairs = 0;
    for (int64_t p = pre; p < P; p++) pairs += (double)G * (double)(p + 1);
    const char *sets[] = {"scalar", "avx2", "avx512vnni"};
    for (int s = 0; s < 3; s++) {
        const td_kernels *ks = td_kernels_named(sets[s]);
        if (!ks || (only && strcmp(only, sets[s]))) continue;
        float *out = s == 0 ? ref : got;
        double best = 1e30;
        for (int64_t rep = 0; rep < (s == 0 ? 1 : reps); rep++) {
            double t0 = now();
            for (int64_t b0 = pre; b0 < P; b0 += B) {
                const float *qr[1024];
                float *o[1024];
                int64_t n[1024], r = 0;
                for (int64_t t = b0; t < b0 + B && t < P; t++)
                    for (int64_t h = 0; h < G; h++, r++)
                        qr[r] = q + (t * G + h) * D, o[r] = out + (t * G + h) * D, n[r] = t + 1;
                ks->attn_rows(qr, o, n, r, &keys, D, 1.0f / sqrtf((float)D), scratch);
            }
            double dt = now() - t0;
            if (dt < best) best = dt;
        }
        uint64_t hash = 1469598103934665603ull; /* FNV-1a of the output's bytes: equal bits, equal hash */
        for (int64_t i = pre * G * D; i < P * G * D; i++) {
            uint32_t u;
            memcpy(&u, &out[i], 4);
            hash = (hash ^ u) * 1099511628211ull;
        }
        double err = 0;
        for (int64_t i = pre * G * D; s && i < P * G * D; i++) err = fmax(err, fabs((double)got[i] - ref[i]));
        printf("{\"kernels\": \"%s\", \"tokens\": %lld, \"pre\": %lld, \"dim\": %lld, \"group\": %lld, \"block\": %lld, "
               "\"ns_per_pair\": %.3f, \"max_abs_diff_vs_ref\": %.3g, \"output_hash\": \"%016llx\"}\n",
               sets[s], (long long)P, (long long)pre, (long long)D, (long long)G, (long long)B, best * 1e9 / pairs, err, (unsigned long long)hash);
    }
    return 0;
}
