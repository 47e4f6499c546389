/* /v1/decide batched across clients: a queue where concurrent requests gather, and the caller that finds the
 * decider idle runs everyone waiting (up to a pass's worth) as one td_decide_multi call. No thread of its own: the
 * waiting HTTP threads take turns as the runner. Each result is bit-identical to the request alone (td_decide_multi's
 * contract); a request that fails fails alone; a client that leaves before its pass is dropped from the queue. */
#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "server/server_internal.h"
#include "util/alloc.h"
#include "util/clock.h"

/* What one call takes at most: the groups of this many passes' worth (td_decide_multi plans the passes inside). */
#define CALL_GROUPS (4 * TD_DECIDE_SLOTS)
#define CALL_CRITERIA 1024

static void unlink_job(td_decide_queue *q, td_decide_job *job) {
    td_decide_job **p = &q->head, *prev = NULL;
    while (*p && *p != job) prev = *p, p = &(*p)->next;
    if (!*p) return;
    *p = job->next;
    if (q->tail == job) q->tail = prev;
    job->next = NULL;
}

/* Runs the jobs taken (a list through next, n of them) with decide_mu released; the caller holds q->running. */
static void run_jobs(td_server *s, td_decide_job *first, int32_t n_jobs) {
    int32_t n_groups = 0, n_crit = 0;
    for (td_decide_job *j = first; j; j = j->next) n_groups += j->n_groups, n_crit += j->n_criteria;
    td_decide_group *all = td_malloc((size_t)(n_groups ? n_groups : 1) * sizeof *all);
    if (all) { /* one call over everyone's groups, in arrival order */
        int32_t at = 0;
        for (td_decide_job *j = first; j; j = j->next) {
            memcpy(all + at, j->groups, (size_t)j->n_groups * sizeof *all);
            at += j->n_groups;
        }
        if (td_decide_multi(s->decider, all, n_groups) == TD_OK) {
            at = 0;
            for (td_decide_job *j = first; j; j = j->next) {
                memcpy(j->groups, all + at, (size_t)j->n_groups * sizeof *all);
                at += j->n_groups;
            }
        } else {
            td_free(all);
            all = NULL;
        }
    }
    if (!all) /* no memory for the joined list: each request's own call */
        for (td_decide_job *j = first; j; j = j->next)
            if (td_decide_multi(s->decider, j->groups, j->n_groups) != TD_OK)
                for (int32_t g = 0; g < j->n_groups; g++) {
                    j->groups[g].status = TD_ERR_NOMEM;
                    snprintf(j->groups[g].error, sizeof j->groups[g].error, "%s", td_last_error());
                }
    td_free(all);
    for (td_decide_job *j = first; j; j = j->next) j->pass_requests = n_jobs, j->pass_criteria = n_crit;
}

int td_decide_queue_run(td_server *s, td_decide_job *job, int client_fd) {
    td_decide_queue *q = &s->dq;
    pthread_mutex_lock(&s->decide_mu);
    if (!q->ready) {
        pthread_condattr_t ca;
        pthread_condattr_init(&ca);
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
        pthread_cond_init(&q->cv, &ca);
        pthread_condattr_destroy(&ca);
        q->ready = 1;
    }
    job->taken = job->done = 0;
    job->next = NULL;
    if (q->tail) q->tail->next = job;
    else q->head = job;
    q->tail = job;
    while (!job->done) {
        if (!q->running && q->head) { /* the decider is idle: this caller runs everyone waiting */
            td_decide_job *first = q->head, *last = q->head;
            int32_t n_jobs = 1, groups = first->n_groups, crit = first->n_criteria;
            while (last->next && groups + last->next->n_groups <= CALL_GROUPS &&
                   crit + last->next->n_criteria <= CALL_CRITERIA) {
                last = last->next;
                groups += last->n_groups, crit += last->n_criteria, n_jobs++;
            }
            q->head = last->next;
            if (!q->head) q->tail = NULL;
            last->next = NULL;
            for (td_decide_job *j = first; j; j = j->next) j->taken = 1;
            q->running = 1;
            pthread_mutex_unlock(&s->decide_mu);
            run_jobs(s, first, n_jobs);
            pthread_mutex_lock(&s->decide_mu);
            q->passes++;
            q->requests += n_jobs;
            q->criteria += crit;
            if (n_jobs > q->max_requests) q->max_requests = n_jobs;
            for (td_decide_job *j = first, *nx; j; j = nx) {
                nx = j->next;
                j->next = NULL;
                j->done = 1;
            }
            q->running = 0;
            pthread_cond_broadcast(&q->cv);
            continue;
        }
        if (!job->taken && td_client_gone(client_fd)) { /* left before its pass: its share goes */
            unlink_job(q, job);
            pthread_cond_broadcast(&q->cv);
            pthread_mutex_unlock(&s->decide_mu);
            return -1;
        }
        struct timespec ts = td_deadline(CLOCK_MONOTONIC, 50); /* wake to watch the client while waiting */
        int rc = pthread_cond_timedwait(&q->cv, &s->decide_mu, &ts);
        (void)rc;
    }
    pthread_mutex_unlock(&s->decide_mu);
    return 0;
}

void td_decide_queue_stats(td_server *s, json_t *o) {
    json_t *d = json_object();
    pthread_mutex_lock(&s->decide_mu);
    json_object_set_new(d, "passes", json_integer(s->dq.passes));
    json_object_set_new(d, "requests", json_integer(s->dq.requests));
    json_object_set_new(d, "criteria", json_integer(s->dq.criteria));
    json_object_set_new(d, "max_requests_per_pass", json_integer(s->dq.max_requests));
    pthread_mutex_unlock(&s->decide_mu);
    json_object_set_new(o, "decide", d);
}
