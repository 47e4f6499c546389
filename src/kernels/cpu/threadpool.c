#include "kernels/cpu/threadpool.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define cpu_relax() _mm_pause()
#else
#define cpu_relax() ((void)0)
#endif

#define SPIN_ITERS 20000 /* ~50-100 us of pause instructions before a worker goes to sleep */

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
    int dynamic;                     /* 1: threads take chunks from `next` */
    atomic_int_fast64_t next;
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

static void run_part(struct td_pool *p, int t) {
    if (p->dynamic) {
        for (;;) {
            int64_t b = atomic_fetch_add_explicit(&p->next, p->grain, memory_order_relaxed);
            if (b >= p->n) return;
            p->fn(p->arg, b, b + p->grain < p->n ? b + p->grain : p->n, t);
        }
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
                cpu_relax();
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

td_pool *td_pool_new(int n_threads) {
    if (n_threads < 1) n_threads = 1;
    td_pool *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->n_threads = n_threads;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->wake, NULL);
    atomic_init(&p->generation, 0);
    atomic_init(&p->pending, 0);
    atomic_init(&p->next, 0);
    atomic_init(&p->sleepers, 0);
    atomic_init(&p->quit, 0);
    if (n_threads > 1) {
        p->workers = calloc((size_t)n_threads, sizeof *p->workers);
        if (!p->workers) {
            td_pool_free(p);
            return NULL;
        }
        for (int i = 1; i < n_threads; i++) {
            p->workers[i].pool = p;
            p->workers[i].index = i;
            if (pthread_create(&p->workers[i].thread, NULL, worker_main, &p->workers[i]) != 0) {
                p->n_threads = i; /* run with the threads we got */
                break;
            }
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
    free(p->workers);
    free(p);
}

int td_pool_n_threads(const td_pool *p) { return p ? p->n_threads : 1; }

static void dispatch(td_pool *p, int64_t n, int64_t grain, td_pool_fn fn, void *arg, int dynamic) {
    if (n <= 0) return;
    if (grain < 1) grain = 1;
    if (!p || p->n_threads == 1 || n <= grain) {
        fn(arg, 0, n, 0);
        return;
    }
    p->dynamic = dynamic;
    atomic_store_explicit(&p->next, 0, memory_order_relaxed);
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
    while (atomic_load_explicit(&p->pending, memory_order_acquire) > 0) cpu_relax();
}

void td_pool_run(td_pool *p, int64_t n, int64_t grain, td_pool_fn fn, void *arg) { dispatch(p, n, grain, fn, arg, 0); }

void td_pool_run_dynamic(td_pool *p, int64_t n, int64_t grain, td_pool_fn fn, void *arg) {
    dispatch(p, n, grain, fn, arg, 1);
}
