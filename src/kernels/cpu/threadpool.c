#include "kernels/cpu/threadpool.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "util/alloc.h"

#ifdef __EMSCRIPTEN_PTHREADS__
/* WebAssembly threads (Web Workers over shared memory) cannot give up their core: emscripten's sched_yield returns at
 * once, so a thread that spins waiting for a descheduled peer keeps the core that peer needs, and a machine with
 * other work to do makes two threads as slow as one. The waits below spin for a bounded time, then sleep on
 * memory.atomic.wait32 (emscripten_futex_wait; the browser's main thread, which may not block, gets emscripten's
 * busy wait there) until a memory.atomic.notify. The native build keeps its pause / sched_yield / condition
 * variable. What a thread computes does not change: only how it waits. */
#include <emscripten/emscripten.h>
#include <emscripten/threading.h>
#include <limits.h>
#include <math.h>
#define WASM_SPIN_MS 0.05 /* how long a waiting thread spins before it sleeps */
#define WASM_CLOCK_EVERY 64 /* spins between two looks at the clock (a call out to JavaScript) */
#endif

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define cpu_relax() _mm_pause()
#else
#define cpu_relax() ((void)0)
#endif

#define SPIN_ITERS 20000 /* ~50-100 us of pause instructions before a worker goes to sleep */
#define YIELD_EVERY 256  /* a waiting thread offers its core this often: a descheduled peer may need it */

#ifndef __EMSCRIPTEN_PTHREADS__
/* One step of a thread's wait for others: a pause, and now and then the core offered to the scheduler. */
static void wait_step(int spins) {
    if (spins % YIELD_EVERY == 0) sched_yield();
    else cpu_relax();
}
#endif

typedef struct worker {
    struct td_pool *pool;
    int index;
    pthread_t thread;
} worker;

/* A share is one atomic word: the job's generation (low GEN_BITS), the share's next chunk and its end. A thread takes
 * a chunk only from a word of the generation it is working on, so a worker that wakes up late (descheduled while
 * the others finished the job) finds either nothing left or a newer job's word, never a chunk it would run with the
 * wrong job. */
#define GEN_BITS 20
#define GEN_MASK ((UINT64_C(1) << GEN_BITS) - 1)
#define IDX_BITS 22
#define IDX_MASK ((UINT64_C(1) << IDX_BITS) - 1)
#define MAX_CHUNKS ((int64_t)IDX_MASK)
static uint64_t share_word(uint64_t gen, int64_t next, int64_t end) {
    return (gen & GEN_MASK) | (uint64_t)next << GEN_BITS | (uint64_t)end << (GEN_BITS + IDX_BITS);
}

struct td_pool {
    int n_threads;
    worker *workers;
    /* the current job: written by the caller before it publishes the generation, read by a thread only after it took
     * a chunk of that generation (the job cannot end, and these cannot change, before that chunk is done) */
    td_pool_fn fn;
    void *arg;
    int64_t n, grain;
    int dynamic;                   /* 1: chunks of `grain` items; 0: one chunk per thread, its range_of */
    int64_t jobs;                  /* jobs handed to the workers (the caller's thread alone: not counted) */
    _Alignas(64) struct share {    /* a thread's share of the chunks, taken from the front */
        _Atomic uint64_t word;
        char pad[64 - sizeof(uint64_t)];
    } share[TD_POOL_MAX_THREADS];
    _Alignas(64) atomic_int_fast64_t done; /* chunks of the current job finished */
    _Alignas(64) atomic_uint_fast64_t generation; /* bumped for each job; workers wait for a change */
    atomic_int sleepers;
    atomic_int quit;
#ifdef __EMSCRIPTEN_PTHREADS__
    _Atomic uint32_t wake_word;   /* futex word of sleeping workers: bumped when a job or quit is published to them */
    _Alignas(64) atomic_int caller_waits; /* 1 while the caller sleeps on done_wake */
    _Atomic uint32_t done_wake;   /* futex word of the caller: bumped by the chunk that finds it asleep */
#endif
    pthread_mutex_t mu;
    pthread_cond_t wake;
};

/* Thread t's contiguous range of whole grains (the static jobs' chunk t). */
static void range_of(const struct td_pool *p, int t, int64_t *b, int64_t *e) {
    int64_t grains = (p->n + p->grain - 1) / p->grain;
    int64_t per = grains / p->n_threads, extra = grains % p->n_threads;
    int64_t g0 = t * per + (t < extra ? t : extra);
    int64_t g1 = g0 + per + (t < extra ? 1 : 0);
    *b = g0 * p->grain;
    *e = g1 * p->grain < p->n ? g1 * p->grain : p->n;
}

/* Takes the next chunk of share u for job generation g; -1 when it is empty or holds another job. */
static int64_t take(struct td_pool *p, int u, uint64_t g) {
    _Atomic uint64_t *w = &p->share[u].word;
    uint64_t v = atomic_load_explicit(w, memory_order_acquire);
    for (;;) {
        int64_t next = (int64_t)(v >> GEN_BITS & IDX_MASK), end = (int64_t)(v >> (GEN_BITS + IDX_BITS) & IDX_MASK);
        if (((v ^ g) & GEN_MASK) || next >= end) return -1;
        if (atomic_compare_exchange_weak_explicit(w, &v, v + (UINT64_C(1) << GEN_BITS), memory_order_acquire,
                                                  memory_order_acquire))
            return next;
    }
}

#ifdef __EMSCRIPTEN_PTHREADS__
/* A finished chunk, counted; a caller asleep on done_wake is woken (seq_cst on both sides: either the caller's last
 * look at `done` sees this chunk, or this sees caller_waits set and wakes it). */
static void chunk_done(struct td_pool *p) {
    atomic_fetch_add(&p->done, 1);
    if (atomic_load(&p->caller_waits)) {
        atomic_fetch_add(&p->done_wake, 1);
        emscripten_futex_wake(&p->done_wake, 1);
    }
}

/* Spins for WASM_SPIN_MS while ready(p, arg) is false; returns whether it became true. */
static int spin_until(struct td_pool *p, int (*ready)(struct td_pool *, uint64_t), uint64_t arg) {
    double end = 0.0;
    for (int spins = 0;; spins++) {
        if (ready(p, arg)) return 1;
        if (spins % WASM_CLOCK_EVERY == 0) {
            double now = emscripten_get_now();
            if (spins == 0) end = now + WASM_SPIN_MS;
            else if (now > end) return 0;
        }
    }
}

static int job_or_quit(struct td_pool *p, uint64_t seen) {
    return atomic_load(&p->generation) != seen || atomic_load(&p->quit);
}

/* A worker's wait for a job newer than `seen` (or quit): a spin, then sleep on `wake_word`. dispatch() bumps
 * `wake_word` and notifies when it sees sleepers after publishing the generation; a worker counts itself a sleeper
 * before its last look at the generation, so one of the two sees the other (seq_cst). */
static void wait_for_job(struct td_pool *p, uint64_t seen) {
    if (spin_until(p, job_or_quit, seen)) return;
    atomic_fetch_add(&p->sleepers, 1);
    for (;;) {
        uint32_t w = atomic_load(&p->wake_word);
        if (job_or_quit(p, seen)) break;
        emscripten_futex_wait(&p->wake_word, w, INFINITY);
    }
    atomic_fetch_sub(&p->sleepers, 1);
}

static void wake_sleepers(struct td_pool *p) {
    if (atomic_load(&p->sleepers) > 0) {
        atomic_fetch_add(&p->wake_word, 1);
        emscripten_futex_wake(&p->wake_word, INT_MAX);
    }
}

static int all_done(struct td_pool *p, uint64_t chunks) { return (uint64_t)atomic_load(&p->done) >= chunks; }

/* The caller's wait for the job's last chunks: a spin, then sleep on done_wake (see chunk_done). */
static void wait_for_done(struct td_pool *p, int64_t chunks) {
    if (spin_until(p, all_done, (uint64_t)chunks)) return;
    atomic_store(&p->caller_waits, 1);
    for (;;) {
        uint32_t w = atomic_load(&p->done_wake);
        if (all_done(p, (uint64_t)chunks)) break;
        emscripten_futex_wait(&p->done_wake, w, INFINITY);
    }
    atomic_store(&p->caller_waits, 0);
}
#else
static void chunk_done(struct td_pool *p) { atomic_fetch_add_explicit(&p->done, 1, memory_order_release); }
#endif

/* Thread t's part of job g: its own share first, in order (so that it walks contiguous memory), then whatever is left
 * of the others' (a descheduled thread's share is done by those that run). Each finished chunk is counted. */
static void run_part(struct td_pool *p, int t, uint64_t g) {
    for (int k = 0; k < p->n_threads; k++) {
        int u = (t + k) % p->n_threads;
        for (int64_t c; (c = take(p, u, g)) >= 0;) {
            int64_t b, e;
            if (p->dynamic) {
                b = c * p->grain;
                e = b + p->grain < p->n ? b + p->grain : p->n;
            } else {
                range_of(p, (int)c, &b, &e);
            }
            if (b < e) p->fn(p->arg, b, e, t);
            chunk_done(p);
        }
    }
}

static void *worker_main(void *arg) {
    worker *w = arg;
    struct td_pool *p = w->pool;
    uint_fast64_t seen = 0;
    for (;;) {
        uint_fast64_t g;
#ifdef __EMSCRIPTEN_PTHREADS__
        wait_for_job(p, seen);
        g = atomic_load(&p->generation);
#else
        int spins = 0;
        while ((g = atomic_load_explicit(&p->generation, memory_order_acquire)) == seen &&
               !atomic_load_explicit(&p->quit, memory_order_acquire)) {
            if (++spins < SPIN_ITERS) {
                wait_step(spins);
                continue;
            }
            pthread_mutex_lock(&p->mu);
            atomic_fetch_add(&p->sleepers, 1);
            while (atomic_load(&p->generation) == seen && !atomic_load(&p->quit)) pthread_cond_wait(&p->wake, &p->mu);
            atomic_fetch_sub(&p->sleepers, 1);
            pthread_mutex_unlock(&p->mu);
            spins = 0;
        }
#endif
        if (atomic_load(&p->quit)) return NULL;
        seen = g;
        run_part(p, w->index, g);
    }
}

static int clamp_threads(int n_threads) {
    return n_threads < 1 ? 1 : n_threads > TD_POOL_MAX_THREADS ? TD_POOL_MAX_THREADS : n_threads;
}

size_t td_pool_bytes(int n_threads) {
    n_threads = clamp_threads(n_threads);
    size_t pool = (sizeof(struct td_pool) + 63) & ~(size_t)63;
    return pool + (n_threads > 1 ? (size_t)n_threads * sizeof(worker) : 0);
}

td_pool *td_pool_new(int n_threads) {
    n_threads = clamp_threads(n_threads);
    td_pool *p = td_aligned_alloc(64, sizeof *p); /* the shares are cache-line aligned */
    if (!p) return NULL;
    memset(p, 0, sizeof *p);
    p->n_threads = 1; /* the threads running so far (td_pool_free joins these) */
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->wake, NULL);
    atomic_init(&p->generation, 0);
    atomic_init(&p->done, 0);
    for (int t = 0; t < TD_POOL_MAX_THREADS; t++) atomic_init(&p->share[t].word, share_word(0, 0, 0));
    atomic_init(&p->sleepers, 0);
    atomic_init(&p->quit, 0);
#ifdef __EMSCRIPTEN_PTHREADS__
    atomic_init(&p->wake_word, 0);
    atomic_init(&p->caller_waits, 0);
    atomic_init(&p->done_wake, 0);
#endif
    if (n_threads > 1) {
        p->workers = td_calloc((size_t)n_threads, sizeof *p->workers);
        if (!p->workers) {
            td_pool_free(p);
            return NULL;
        }
        for (int i = 1; i < n_threads; i++) { /* with fewer threads when the system refuses more */
            p->workers[i].pool = p;
            p->workers[i].index = i;
            if (pthread_create(&p->workers[i].thread, NULL, worker_main, &p->workers[i]) != 0) break;
            p->n_threads = i + 1;
        }
    }
    return p;
}

void td_pool_free(td_pool *p) {
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    atomic_store(&p->quit, 1);
#ifdef __EMSCRIPTEN_PTHREADS__
    wake_sleepers(p);
#endif
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
    for (int i = 1; i < p->n_threads; i++) pthread_join(p->workers[i].thread, NULL);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->wake);
    td_free(p->workers);
    td_free(p);
}

int td_pool_n_threads(const td_pool *p) { return p ? p->n_threads : 1; }

int64_t td_pool_jobs(const td_pool *p) { return p ? p->jobs : 0; }

/* The caller publishes the job and works on it too, then waits until every chunk is done: not for every worker to
 * have looked at it (one that was descheduled finds the job finished when it runs again). */
static void dispatch(td_pool *p, int64_t n, int64_t grain, td_pool_fn fn, void *arg, int dynamic) {
    if (n <= 0) return;
    if (grain < 1) grain = 1;
    if (!p || p->n_threads == 1 || n <= grain) {
        fn(arg, 0, n, 0);
        return;
    }
    if (dynamic && (n + grain - 1) / grain > MAX_CHUNKS) grain = (n + MAX_CHUNKS - 1) / MAX_CHUNKS;
    p->dynamic = dynamic;
    p->jobs++;
    p->fn = fn;
    p->arg = arg;
    p->n = n;
    p->grain = grain;
    const int nt = p->n_threads;
    const int64_t chunks = dynamic ? (n + grain - 1) / grain : nt;
    uint64_t g = atomic_load_explicit(&p->generation, memory_order_relaxed) + 1;
    atomic_store_explicit(&p->done, 0, memory_order_relaxed);
    for (int t = 0; t < nt; t++) /* contiguous runs of chunks (static: chunk t alone) */
        atomic_store_explicit(&p->share[t].word, share_word(g, chunks * t / nt, chunks * (t + 1) / nt),
                              memory_order_release); /* a thread that takes from it sees the job above */
    atomic_store(&p->generation, g); /* seq_cst: publishes the above; pairs with a sleeper's sleepers++ then re-check */
#ifdef __EMSCRIPTEN_PTHREADS__
    wake_sleepers(p);
    run_part(p, 0, g);
    wait_for_done(p, chunks);
#else
    if (atomic_load(&p->sleepers) > 0) {
        pthread_mutex_lock(&p->mu);
        pthread_cond_broadcast(&p->wake);
        pthread_mutex_unlock(&p->mu);
    }
    run_part(p, 0, g);
    for (int spins = 1; atomic_load_explicit(&p->done, memory_order_acquire) < chunks; spins++) wait_step(spins);
#endif
}

void td_pool_run(td_pool *p, int64_t n, int64_t grain, td_pool_fn fn, void *arg) { dispatch(p, n, grain, fn, arg, 0); }

void td_pool_run_dynamic(td_pool *p, int64_t n, int64_t grain, td_pool_fn fn, void *arg) {
    dispatch(p, n, grain, fn, arg, 1);
}
