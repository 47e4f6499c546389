/* What one token of decode cannot beat: the read bandwidth of T threads streaming a buffer the size of a model's
 * weights (default 639 MB, the synthetic qwen3-0.6b at Q8_0), each thread its contiguous share, as a decode's
 * products read their rows. Not part of the engine: bench/ab_device.sh compiles it on the machine it measures
 * (cc -O2 -march=native -pthread bench/membw.c -o membw) and reports the decode ceiling it implies beside both
 * engines' decode speeds.
 *
 *   membw [--mb N] [--threads T] [--repeat R] [--prefetch BYTES] [--streams S] [--keep MB --hint nta|flush]
 *
 * Prints one JSON line: per repeat the GB/s of a whole pass (all threads started together, the slowest one's end),
 * the best and the median. --prefetch adds a software prefetch that far ahead (0: none, the default). --streams S
 * (default 1) cuts each thread's share into S equal parts read in lockstep, 256 bytes of each in turn: S concurrent
 * sequential streams per core, as a kernel that read S row slabs at once would. --keep MB --hint H reads the first
 * MB / T of each share plainly and the rest with a hint against caching it (nta: prefetchnta 1 KB ahead; flush:
 * clflushopt after the read), to see whether a part kept in the last-level cache reads faster across passes. The
 * buffer is 2 MB-aligned and advised for huge pages, as the engine's packed weights are. */
#define _GNU_SOURCE
#include <immintrin.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

typedef struct job {
    const uint8_t *p;
    size_t part; /* bytes of each stream, a multiple of 256 */
    size_t prefetch;
    int streams;
    size_t keep; /* bytes of each stream read plainly (the share's MB / T in all); the rest with `hint` */
    int hint;    /* 0 plain, 1 prefetchnta ahead, 2 clflushopt after reading */
    pthread_barrier_t *start;
    uint64_t sink;
    double begin, end;
} job;

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Evicts the 256 bytes at q from every cache level. */
__attribute__((target("clflushopt"))) static void flush256(const uint8_t *q) {
    for (int l = 0; l < 256; l += 64) _mm_clflushopt((void *)(q + l));
}

/* Reads S parts of `part` bytes from p, 256 bytes of each in turn, 64 at a time into four xor chains, so that the
 * loads, not the arithmetic, bound it. */
static void *reader(void *arg) {
    job *j = arg;
    pthread_barrier_wait(j->start);
    j->begin = now();
    __m512i a = _mm512_setzero_si512(), b = a, c = a, d = a;
    for (size_t i = 0; i < j->part; i += 256)
        for (int s = 0; s < j->streams; s++) {
            const uint8_t *q = j->p + (size_t)s * j->part + i;
            const int cold = j->hint && i >= j->keep;
            if (cold && j->hint == 1)
                for (int l = 0; l < 256; l += 64) _mm_prefetch((const char *)q + 1024 + l, _MM_HINT_NTA);
            else if (j->prefetch) _mm_prefetch((const char *)q + j->prefetch, _MM_HINT_T0);
            a = _mm512_xor_si512(a, _mm512_load_si512(q));
            b = _mm512_xor_si512(b, _mm512_load_si512(q + 64));
            c = _mm512_xor_si512(c, _mm512_load_si512(q + 128));
            d = _mm512_xor_si512(d, _mm512_load_si512(q + 192));
            if (cold && j->hint == 2) flush256(q);
        }
    j->sink = (uint64_t)_mm_cvtsi128_si64(_mm512_castsi512_si128(_mm512_xor_si512(_mm512_xor_si512(a, b), _mm512_xor_si512(c, d))));
    j->end = now();
    return NULL;
}

static int cmp(const void *x, const void *y) {
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

int main(int argc, char **argv) {
    size_t mb = 639, prefetch = 0;
    int threads = 1, repeat = 5, streams = 1, hint = 0;
    size_t keep_mb = 0;
    for (int i = 1; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(argv[i], "--mb") && v) mb = strtoull(v, NULL, 10), i++;
        else if (!strcmp(argv[i], "--threads") && v) threads = atoi(v), i++;
        else if (!strcmp(argv[i], "--repeat") && v) repeat = atoi(v), i++;
        else if (!strcmp(argv[i], "--prefetch") && v) prefetch = strtoull(v, NULL, 10), i++;
        else if (!strcmp(argv[i], "--streams") && v) streams = atoi(v), i++;
        else if (!strcmp(argv[i], "--keep") && v) keep_mb = strtoull(v, NULL, 10), i++;
        else if (!strcmp(argv[i], "--hint") && v) hint = !strcmp(v, "nta") ? 1 : !strcmp(v, "flush") ? 2 : -1, i++;
        else {
            fprintf(stderr, "usage: membw [--mb N] [--threads T] [--repeat R] [--prefetch BYTES] [--streams S] "
                            "[--keep MB --hint nta|flush]\n");
            return 2;
        }
    }
    if (hint < 0) {
        fprintf(stderr, "membw: --hint takes nta or flush\n");
        return 2;
    }
    if (mb == 0 || threads < 1 || threads > 1024 || repeat < 1 || repeat > 1000 || streams < 1 || streams > 256) {
        fprintf(stderr, "membw: --mb, --threads (1-1024), --repeat (1-1000) and --streams (1-256) must be positive\n");
        return 2;
    }
    const size_t huge = (size_t)2 << 20, bytes = mb << 20, share = (bytes / (size_t)threads) & ~(size_t)255;
    /* each stream a multiple of 256 bytes: a remainder under 256 x S of a share is left unread */
    const size_t part = (share / (size_t)streams) & ~(size_t)255, read = part * (size_t)streams;
    const size_t keep = (keep_mb << 20) / (size_t)threads / (size_t)streams; /* of each stream */
    uint8_t *buf = aligned_alloc(huge, (bytes + huge - 1) / huge * huge);
    if (!buf || read == 0) {
        fprintf(stderr, "membw: cannot allocate %zu MB in %d shares\n", mb, threads);
        return 1;
    }
    madvise(buf, (bytes + huge - 1) / huge * huge, MADV_HUGEPAGE);
    for (size_t i = 0; i < bytes; i++) buf[i] = (uint8_t)(i * 131);
    double *gbs = calloc((size_t)repeat, sizeof *gbs);
    job *jobs = calloc((size_t)threads, sizeof *jobs);
    pthread_t *tid = calloc((size_t)threads, sizeof *tid);
    uint64_t sink = 0;
    for (int r = 0; r < repeat; r++) {
        pthread_barrier_t start;
        pthread_barrier_init(&start, NULL, (unsigned)threads + 1);
        for (int t = 0; t < threads; t++) {
            jobs[t] = (job){buf + (size_t)t * share, part, prefetch, streams, keep, hint, &start, 0, 0, 0};
            pthread_create(&tid[t], NULL, reader, &jobs[t]);
        }
        double begin = 0, end = 0;
        pthread_barrier_wait(&start);
        for (int t = 0; t < threads; t++) {
            pthread_join(tid[t], NULL);
            sink ^= jobs[t].sink;
            if (t == 0 || jobs[t].begin < begin) begin = jobs[t].begin;
            if (jobs[t].end > end) end = jobs[t].end;
        }
        pthread_barrier_destroy(&start);
        gbs[r] = (double)read * threads / (end - begin) / 1e9;
    }
    printf("{\"mb\": %zu, \"threads\": %d, \"prefetch\": %zu, \"streams\": %d, \"keep_mb\": %zu, \"hint\": %d, "
           "\"gb_per_s\": [",
           mb, threads, prefetch, streams, keep_mb, hint);
    for (int r = 0; r < repeat; r++) printf("%s%.2f", r ? ", " : "", gbs[r]);
    qsort(gbs, (size_t)repeat, sizeof *gbs, cmp);
    printf("], \"best\": %.2f, \"median\": %.2f, \"sink\": %u}\n", gbs[repeat - 1], gbs[repeat / 2], (unsigned)(sink & 1));
    free(gbs), free(jobs), free(tid), free(buf);
    return 0;
}
