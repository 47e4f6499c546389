/* /v1/decide across clients (decide_batch.c): concurrent requests gather in a queue; the caller that finds the
 * decider idle takes everyone waiting and runs them as one td_decide_multi call (each evidence prefilled once, kept
 * by content), then wakes each waiter with its own results. State behind td_server.decide_mu. */
#ifndef TD_SERVER_DECIDE_BATCH_H
#define TD_SERVER_DECIDE_BATCH_H

#include <pthread.h>
#include <stdint.h>

#include "typedecide.h"

typedef struct td_decide_job td_decide_job;

typedef struct td_decide_queue {
    pthread_cond_t cv;          /* initialised on first use (under decide_mu) */
    int ready;
    int running;                /* a caller is running a pass: the decider is in use */
    td_decide_job *head, *tail; /* requests waiting for a pass, in arrival order */
    int64_t passes, requests, criteria, max_requests; /* served so far; the most requests one call took */
} td_decide_queue;

/* One request's share: its evidence groups (td_decide_multi's), filled in when done. */
struct td_decide_job {
    td_decide_group *groups;
    int32_t n_groups, n_criteria;
    int taken, done;
    int32_t pass_requests, pass_criteria; /* out: what the call that served it held */
    td_decide_job *next;
};

struct td_server;
/* Runs job in a call shared with the requests waiting beside it. Returns 0 when its groups are filled, -1 when the
 * client (client_fd, -1: not watched) went away before a pass took it (its share is dropped). */
int td_decide_queue_run(struct td_server *s, td_decide_job *job, int client_fd);
/* Adds "decide": {"passes", "requests", "criteria", "max_requests_per_pass"} (calls of td_decide_multi, the requests
 * and criteria they served, the most requests one call held) to a JSON object (/health). */
struct json_t;
void td_decide_queue_stats(struct td_server *s, struct json_t *o);

#endif
