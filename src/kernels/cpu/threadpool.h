/* A small thread pool: the caller and n-1 workers split [0, n) into chunks that they take from per-thread shares
 * (each thread its own share first, then what is left of the others'); the caller returns when every chunk is done,
 * so a worker that the system has descheduled holds up nobody once the others have taken its share. Workers spin
 * briefly after a job (the next one usually follows within microseconds in a forward pass) and then sleep on a
 * condition variable, so an idle pool costs no CPU. Which thread runs a chunk varies; what it computes must not
 * depend on it (the thread index is for per-thread scratch). */
#ifndef TD_KERNELS_CPU_THREADPOOL_H
#define TD_KERNELS_CPU_THREADPOOL_H

#include <stddef.h>
#include <stdint.h>

typedef struct td_pool td_pool;

#define TD_POOL_MAX_THREADS 256

/* fn(arg, begin, end, thread) runs on [begin, end); ranges are multiples of `grain` except the last. */
typedef void (*td_pool_fn)(void *arg, int64_t begin, int64_t end, int thread);

/* n_threads includes the calling thread (at most TD_POOL_MAX_THREADS). Returns NULL on failure. */
td_pool *td_pool_new(int n_threads);
void td_pool_free(td_pool *pool);
/* Bytes td_pool_new(n_threads) allocates (the threads' stacks are the system's, not counted). */
size_t td_pool_bytes(int n_threads);
int td_pool_n_threads(const td_pool *pool);
/* Jobs the workers took part in since creation (one per td_pool_run* that did not run on the caller alone: each
 * costs a wake-up and a wait for its last chunk). */
int64_t td_pool_jobs(const td_pool *pool);

/* Splits [0, n) into at most n_threads contiguous ranges of whole grains, one per thread, and runs them (a range
 * whose thread is late is run by another); returns when all are done. */
void td_pool_run(td_pool *pool, int64_t n, int64_t grain, td_pool_fn fn, void *arg);

/* Like td_pool_run, but in chunks of `grain` items that threads take one at a time: each thread first takes the
 * chunks of its own contiguous share, in order, then helps with what is left of the others' shares. For work
 * whose cost varies from item to item (attention rows of different lengths) or a machine whose cores are not
 * equally fast (a shared VM). Which thread runs an item varies; what the item computes must not depend on it. */
void td_pool_run_dynamic(td_pool *pool, int64_t n, int64_t grain, td_pool_fn fn, void *arg);

#endif
