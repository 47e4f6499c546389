#include "kernels/cpu/threadpool.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "util/alloc.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define cpu_relax() _mm_pause()
#else
#define cpu_relax() ((void)0)
#endif

#define SPIN_ITERS 20000 /* ~50-100 us of pause instructions before a worker goes to sleep */
#define YIELD_EVERY 256  /* a waiting thread offers its core this often: a descheduled peer may need it */

/* One step of a thread's wait for others: a pause, and now and then the core offered to the scheduler. */
static void wait_step(int spins) {
    if (spins % YIELD_EVERY == 0) sched_yield();
    else cpu_relax();
}

typedef struct worker {
    struct td_pool *pool;
    int index;
    pthread_t thread;
} worker;

struct td_pool {
    int n_threads;
    worker *workers;
    /* the current job */
    td_pool_fn fn;
    void *arg;
    int64_t n, grain;
    int dynamic;                     /* 1: threads take chunks from their own share, then from the others' */
    int64_t jobs;                    /* jobs handed to the workers (the caller's thread alone: not counted) */
    _Alignas(64) struct share {      /* a thread's share of the chunks: [next, end), taken from the front */
        atomic_int_fast64_t next;
        int64_t end;
        char pad[64 - sizeof(atomic_int_fast64_t) - sizeof(int64_t)];
    } share[TD_POOL_MAX_THREADS];
    atomic_uint_fast64_t generation; /* bumped for each job; workers wait for a change */
    atomic_int pending;              /* workers still running the current job */
    atomic_int sleepers;
    atomic_int quit;
    pthread_mutex_t mu;
    pthread_cond_t wake;
};

static void range_of(const struct td_pool *p, int t, int64_t *b, int64_t *e) {
    int64_t grains = (p->n + p->grain - 1) / p->grain;
    int64_t per = grains / p->n_threads, extra = grains % p->n_threads;
    int64_t g0 = t * per + (t < extra ? t : extra);
    int64_t g1 = g0 + per + (t < extra ? 1 : 0);
    *b = g0 * p->grain;
    *e = g1 * p->grain < p->n ? g1 * p->grain : p->n;
}

/* Takes the next chunk of thread u's share; -1 when it is empty. */
static int64_t take(struct td_pool *p, int u) {
    struct share *sh = &p->share[u];
    if (atomic_load_explicit(&sh->next, memory_order_relaxed) >= sh->end) return -1;
    int64_t c = atomic_fetch_add_explicit(&sh->next, 1, memory_order_relaxed);
    return c < sh->end ? c : -1;
}

static void run_part(struct td_pool *p, int t) {
    if (p->dynamic) { /* own share in order (so a thread walks contiguous memory), then help the others */
        for (int k = 0; k < p->n_threads; k++) {
            int u = (t + k) % p->n_threads;
            for (int64_t c; (c = take(p, u)) >= 0;) {
                int64_t b = c * p->grain;
                p->fn(p->arg, b, b + p->grain < p->n ? b + p->grain : p->n, t);
            }
        }
        return;
    }
    int64_t b, e;
    range_of(p, t, &b, &e);
    if (b < e) p->fn(p->arg, b, e, t);
}

static void *worker_main(void *arg) {
    worker *w = arg;
    struct td_pool *p = w->pool;
    uint_fast64_t seen = 0;
    for (;;) {
        uint_fast64_t g;
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
        if (atomic_load(&p->quit)) return NULL;
        seen = g;
        run_part(p, w->index);
        atomic_fetch_sub_explicit(&p->pending, 1, memory_order_release);
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
    atomic_init(&p->pending, 0);
    for (int t = 0; t < TD_POOL_MAX_THREADS; t++) atomic_init(&p->share[t].next, 0);
    atomic_init(&p->sleepers, 0);
    atomic_init(&p->quit, 0);
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

static void dispatch(td_pool *p, int64_t n, int64_t grain, td_pool_fn fn, void *arg, int dynamic) {
    if (n <= 0) return;
    if (grain < 1) grain = 1;
    if (!p || p->n_threads == 1 || n <= grain) {
        fn(arg, 0, n, 0);
        return;
    }
    p->dynamic = dynamic;
    p->jobs++;
    if (dynamic) {
        int64_t chunks = (n + grain - 1) / grain;
        for (int t = 0; t < p->n_threads; t++) {
            atomic_store_explicit(&p->share[t].next, chunks * t / p->n_threads, memory_order_relaxed);
            p->share[t].end = chunks * (t + 1) / p->n_threads;
        }
    }
    p->fn = fn;
    p->arg = arg;
    p->n = n;
    p->grain = grain;
    atomic_store_explicit(&p->pending, p->n_threads - 1, memory_order_relaxed);
    atomic_fetch_add(&p->generation, 1); /* seq_cst: pairs with a sleeper's sleepers++ then re-check */
    if (atomic_load(&p->sleepers) > 0) {
        pthread_mutex_lock(&p->mu);
        pthread_cond_broadcast(&p->wake);
        pthread_mutex_unlock(&p->mu);
    }
    run_part(p, 0);
    for (int spins = 1; atomic_load_explicit(&p->pending, memory_order_acquire) > 0; spins++) wait_step(spins);
}

void td_pool_run(td_pool *p, int64_t n, int64_t grain, td_pool_fn fn, void *arg) { dispatch(p, n, grain, fn, arg, 0); }

void td_pool_run_dynamic(td_pool *p, int64_t n, int64_t grain, td_pool_fn fn, void *arg) {
    dispatch(p, n, grain, fn, arg, 1);
}
