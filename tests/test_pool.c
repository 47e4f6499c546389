/* The thread pool (src/kernels/cpu/threadpool.c): every item of a job runs exactly once, static ranges stay whole
 * grains, thread indices stay in range, and with more threads than cores (workers descheduled in the middle of jobs,
 * waking up after the job they were looking at is over) no item of a finished job runs again and no item runs under
 * another job's function. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/threadpool.h"
#include "test_util.h"

typedef struct job {
    int id;
    int64_t grain, n;
    int dynamic, n_threads;
    _Atomic int *count;       /* runs of each item */
    atomic_int calls, bad_range, bad_thread, bad_job;
    const _Atomic int *current; /* the job the caller is running */
} job;

static void visit(void *arg, int64_t b, int64_t e, int thread) {
    job *j = arg;
    atomic_fetch_add(&j->calls, 1);
    if (thread < 0 || thread >= j->n_threads) atomic_fetch_add(&j->bad_thread, 1);
    if (b < 0 || e > j->n || b >= e || (b % j->grain) != 0 || (e % j->grain != 0 && e != j->n))
        atomic_fetch_add(&j->bad_range, 1);
    if (atomic_load(j->current) != j->id) atomic_fetch_add(&j->bad_job, 1);
    for (int64_t i = b; i < e && i < j->n; i++) {
        atomic_fetch_add(&j->count[i], 1);
        for (volatile int spin = 0; spin < 300; spin++) { /* a little work per item, so that workers join in */
        }
    }
}

static int all_once(const job *j) {
    for (int64_t i = 0; i < j->n; i++)
        if (atomic_load(&j->count[i]) != 1) return 0;
    return 1;
}

static void run(td_pool *p, job *j) {
    if (j->dynamic) td_pool_run_dynamic(p, j->n, j->grain, visit, j);
    else td_pool_run(p, j->n, j->grain, visit, j);
}

/* Every shape: each item once, ranges of whole grains, at most one call per thread for static jobs. */
static void test_shapes(void) {
    static const int threads[] = {1, 2, 3, 4, 8, 16};
    static const int64_t ns[] = {0, 1, 2, 7, 64, 1000, 4097};
    static const int64_t grains[] = {1, 3, 64};
    _Atomic int current = 0;
    _Atomic int *count = calloc(4097, sizeof *count);
    int id = 0;
    for (size_t a = 0; a < sizeof threads / sizeof *threads; a++) {
        td_pool *p = td_pool_new(threads[a]);
        CHECK(p != NULL);
        if (!p) continue;
        for (size_t b = 0; b < sizeof ns / sizeof *ns; b++)
            for (size_t c = 0; c < sizeof grains / sizeof *grains; c++)
                for (int dynamic = 0; dynamic < 2; dynamic++) {
                    for (int64_t i = 0; i < ns[b]; i++) atomic_store(&count[i], 0);
                    job j = {.id = ++id, .grain = grains[c], .n = ns[b], .dynamic = dynamic,
                             .n_threads = td_pool_n_threads(p), .count = count, .current = &current};
                    atomic_store(&current, j.id);
                    run(p, &j);
                    CHECKF(all_once(&j) && !j.bad_range && !j.bad_thread && !j.bad_job,
                           "threads %d n %lld grain %lld dynamic %d: once %d, bad ranges %d, threads %d, jobs %d",
                           threads[a], (long long)ns[b], (long long)grains[c], dynamic, all_once(&j),
                           atomic_load(&j.bad_range), atomic_load(&j.bad_thread), atomic_load(&j.bad_job));
                    if (!dynamic)
                        CHECKF(atomic_load(&j.calls) <= td_pool_n_threads(p), "static: %d calls on %d threads",
                               atomic_load(&j.calls), td_pool_n_threads(p));
                }
        td_pool_free(p);
    }
    free(count);
}

/* Many short jobs on more threads than cores: a job's items are checked when it returns and again three jobs
 * later, before its counts are reused, so a late worker that ran an item of a finished job is caught. */
static void test_oversubscribed(void) {
    enum { RING = 4, JOBS = 20000, N = 96 };
    td_pool *p = td_pool_new(8);
    CHECK(p != NULL);
    if (!p) return;
    _Atomic int current = 0;
    _Atomic int *counts = calloc((size_t)RING * N, sizeof *counts);
    job *ring = calloc(RING, sizeof *ring);
    int fails = 0;
    for (int k = 0; k < JOBS && fails < 5; k++) {
        job *old = &ring[k % RING];
        if (k >= RING && !all_once(old)) {
            fprintf(stderr, "job %d: an item ran again after the job returned\n", old->id);
            fails++;
        }
        _Atomic int *count = counts + (size_t)(k % RING) * N;
        for (int i = 0; i < N; i++) atomic_store(&count[i], 0);
        memset(old, 0, sizeof *old);
        *old = (job){.id = k + 1, .grain = 1 + k % 5, .n = N - k % 7, .dynamic = k % 2,
                     .n_threads = td_pool_n_threads(p), .count = count, .current = &current};
        atomic_store(&current, k + 1);
        run(p, old);
        if (!all_once(old) || old->bad_range || old->bad_thread || old->bad_job) {
            fprintf(stderr, "job %d: once %d, bad ranges %d, threads %d, other job %d\n", k + 1, all_once(old),
                    atomic_load(&old->bad_range), atomic_load(&old->bad_thread), atomic_load(&old->bad_job));
            fails++;
        }
    }
    CHECKF(fails == 0, "%d failures in %d jobs on 8 threads", fails, JOBS);
    td_pool_free(p);
    free(ring);
    free(counts);
}

int main(void) {
    test_shapes();
    test_oversubscribed();
    return td_test_finish("test_pool");
}
