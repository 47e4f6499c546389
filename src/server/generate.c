/* Generation over HTTP: one engine thread owns the td_gen and steps every active request together (continuous
 * batching); HTTP threads hand requests over through an inbox and wait on their job for tokens. A job is one HTTP
 * request: its n choices (OpenAI's n) are n td_gen requests queued together by td_gen_submit_n (they share the
 * prompt's prefill). A job is shared by the engine (until the DONE event of its last choice) and the HTTP side
 * (until the reply is written or the stream is freed); the last one to let go frees it. A stream freed before its
 * job is done (the client went away) cancels it: the engine calls td_gen_cancel at its next turn, and the
 * request's rows are free before the next step.
 *
 * Endpoints: /v1/chat/completions (messages rendered with the model's chat template, reasoning split off as
 * reasoning_content, streamed as server-sent events or not) and /v1/completions (text or token-id prompts,
 * logprobs with top alternatives, echo with the prompt tokens' logprobs, max_tokens 0 to score a prompt alone).
 * Without a seed, a request samples with a fresh one (fresh_seed), reported as "seed" in the reply; choice k samples
 * with seed + k. A stream ends with a chunk of usage (choices: []) only when stream_options.include_usage asks. */
#include <jansson.h>
#include <math.h>
#include <microhttpd.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "server/server_internal.h"
#include "util/alloc.h"
#include "util/clock.h"
#include "util/error.h"
#include "util/grow.h"
#include "util/strbuf.h"
#include "util/utf8.h"

/* One choice: a td_gen request and what came back. */
typedef struct choice {
    int64_t id;                  /* td_gen's, 0 until submitted */
    int done, cancel_sent;
    td_strbuf text;              /* what came back so far */
    int32_t *toks, n_tok;
    size_t cap_tok, cap_lps, cap_top_ids, cap_top_lps;
    float *lps;                  /* [n_tok] */
    int32_t *top_ids;            /* [n_tok * n_top] */
    float *top_lps;
    int32_t n_reused;
    td_gen_finish finish;
    int32_t n_generated, stop_id;
    double ms_queue, ms_prefill, ms_first_token, ms_decode;
} choice;

typedef struct job {
    int refs;                    /* engine + HTTP side */
    int submitted, done, cancel;
    int err_status;              /* an HTTP status when submission failed */
    char err[512];
    td_gen_request req;          /* points into the arrays below */
    int32_t *prompt;
    char **stop;
    int32_t *bias_ids;           /* logit_bias */
    float *bias;
    int32_t n_bias;
    int32_t n_top;               /* top alternatives per token (request.logprobs) */
    int32_t n_plp, n_ptop;       /* prompt logprobs (choice 0 reads the prompt for all) */
    float *plp;                  /* [n_plp] */
    int32_t *ptop_ids;           /* [n_plp * n_ptop] */
    float *ptop_lps;
    int32_t n_choices, n_done;
    choice ch[TD_GEN_MAX_CHOICES];
    pthread_cond_t cv;
    struct job *next;
} job;

struct td_server_gen {
    td_gen *g;
    pthread_t thread;
    int started;
    pthread_mutex_t mu;
    pthread_cond_t wake;
    int stop, broken;
    int32_t n_active;
    job *inbox, *inbox_tail;     /* waiting for submission */
    job *active;                 /* submitted, not done */
    int64_t next_id;             /* for response ids */
};

/* ---- jobs ---------------------------------------------------------------------------------------------------- */

static void job_free(job *j) {
    if (!j) return;
    for (int32_t i = 0; j->stop && i < j->req.n_stop; i++) td_free(j->stop[i]);
    td_free(j->stop);
    td_free(j->prompt);
    td_free(j->bias_ids), td_free(j->bias);
    for (int32_t k = 0; k < TD_GEN_MAX_CHOICES; k++) {
        choice *c = &j->ch[k];
        td_strbuf_free(&c->text);
        td_free(c->toks), td_free(c->lps), td_free(c->top_ids), td_free(c->top_lps);
    }
    td_free(j->plp), td_free(j->ptop_ids), td_free(j->ptop_lps);
    pthread_cond_destroy(&j->cv);
    td_free(j);
}

/* Drops one reference (under mu); the last frees the job. */
static void job_unref(job *j) {
    if (--j->refs == 0) job_free(j);
}

/* Room for n tokens and their n * k alternatives in a choice: 0, or -1 (what grew keeps its new room). */
static int token_room(choice *c, size_t n, size_t k) {
    int32_t *t = td_grow(c->toks, &c->cap_tok, n, sizeof *t, 64);
    if (!t) return -1;
    c->toks = t;
    float *l = td_grow(c->lps, &c->cap_lps, n, sizeof *l, 64);
    if (!l) return -1;
    c->lps = l;
    if (!k) return 0;
    int32_t *ti = td_grow(c->top_ids, &c->cap_top_ids, n * k, sizeof *ti, 64);
    if (!ti) return -1;
    c->top_ids = ti;
    float *tl = td_grow(c->top_lps, &c->cap_top_lps, n * k, sizeof *tl, 64);
    if (!tl) return -1;
    c->top_lps = tl;
    return 0;
}

static int append_text(choice *c, const char *t, size_t n) {
    if (!n) return 0;
    td_strbuf_put(&c->text, t, n);
    return c->text.oom ? -1 : 0;
}

/* Ends a job that the engine will not run (failed submission, cancelled before it, the server stopping). */
static void job_end(td_server_gen *G, job *j, int status, const char *msg) {
    (void)G;
    j->done = 1;
    for (int32_t k = 0; k < j->n_choices; k++) {
        if (j->ch[k].done) continue;
        j->ch[k].done = 1;
        j->ch[k].finish = TD_GEN_FINISH_ERROR;
    }
    j->err_status = status;
    snprintf(j->err, sizeof j->err, "%s", msg);
    pthread_cond_broadcast(&j->cv);
    job_unref(j);
}

/* The active job and choice of a td_gen request id. */
static job *find_active(td_server_gen *G, int64_t id, job ***link, choice **c) {
    for (job **p = &G->active; *p; p = &(*p)->next)
        for (int32_t k = 0; k < (*p)->n_choices; k++)
            if ((*p)->ch[k].id == id) {
                if (link) *link = p;
                *c = &(*p)->ch[k];
                return *p;
            }
    return NULL;
}

/* Copies one event into its job (under mu). */
static void take_event(td_server_gen *G, const td_gen_event *ev) {
    job **link = NULL;
    choice *c = NULL;
    job *j = find_active(G, ev->request, &link, &c);
    if (!j || c->done) return;
    int oom = 0;
    if (ev->kind == TD_GEN_EVENT_PROMPT) {
        c->n_reused = ev->n_reused, c->ms_prefill = ev->ms_prefill;
        if (ev->n_prompt_logprobs > 0 && !j->plp) {
            size_t n = (size_t)ev->n_prompt_logprobs, k = (size_t)ev->n_prompt_top, nk = n * k;
            j->plp = td_malloc(n * sizeof *j->plp);
            j->ptop_ids = td_malloc((nk ? nk : 1) * sizeof *j->ptop_ids);
            j->ptop_lps = td_malloc((nk ? nk : 1) * sizeof *j->ptop_lps);
            if (j->plp && j->ptop_ids && j->ptop_lps) {
                memcpy(j->plp, ev->prompt_logprobs, n * sizeof *j->plp);
                if (nk) memcpy(j->ptop_ids, ev->prompt_top_ids, nk * sizeof *j->ptop_ids);
                if (nk) memcpy(j->ptop_lps, ev->prompt_top_logprobs, nk * sizeof *j->ptop_lps);
                j->n_plp = (int32_t)n, j->n_ptop = (int32_t)k;
            } else oom = 1;
        }
    } else if (ev->kind == TD_GEN_EVENT_TOKEN) {
        int32_t n = c->n_tok + 1, k = j->n_top;
        if (token_room(c, (size_t)n, (size_t)k)) oom = 1;
        else {
            c->toks[c->n_tok] = ev->token;
            c->lps[c->n_tok] = ev->logprob;
            for (int32_t t = 0; t < k; t++) {
                c->top_ids[c->n_tok * k + t] = t < ev->n_top ? ev->top_ids[t] : -1;
                c->top_lps[c->n_tok * k + t] = t < ev->n_top ? ev->top_logprobs[t] : -INFINITY;
            }
            c->n_tok = n;
        }
        if (!oom && append_text(c, ev->text, ev->text_len)) oom = 1;
    } else if (ev->kind == TD_GEN_EVENT_DONE) {
        if (append_text(c, ev->text, ev->text_len)) oom = 1;
        c->finish = ev->finish;
        c->n_generated = ev->n_generated;
        c->stop_id = ev->stop_id;
        c->ms_queue = ev->ms_queue, c->ms_first_token = ev->ms_first_token, c->ms_decode = ev->ms_decode;
        if (ev->finish == TD_GEN_FINISH_ERROR && !j->err_status) {
            j->err_status = 500;
            snprintf(j->err, sizeof j->err, "%s", ev->error ? ev->error : "generation failed");
        }
        c->done = 1;
        if (++j->n_done == j->n_choices) {
            j->done = 1;
            *link = j->next; /* off the active list: the engine lets go */
            pthread_cond_broadcast(&j->cv);
            job_unref(j);
            return;
        }
    }
    if (oom && !j->cancel) { /* out of memory keeping the reply: end it, it could not be written whole */
        j->cancel = 1;
        j->err_status = 500;
        snprintf(j->err, sizeof j->err, "out of memory while keeping the reply");
    }
    pthread_cond_broadcast(&j->cv);
}

/* Cancels every choice of an active job not cancelled yet (their DONE events, cancelled, follow). */
static void cancel_choices(td_server_gen *G, job *j) {
    for (int32_t k = 0; k < j->n_choices; k++)
        if (!j->ch[k].done && !j->ch[k].cancel_sent) {
            j->ch[k].cancel_sent = 1;
            (void)td_gen_cancel(G->g, j->ch[k].id); /* an error: it ended with its lead already */
        }
}

/* A choice still running that was not told to stop. */
static int uncancelled(const job *j) {
    for (int32_t k = 0; k < j->n_choices; k++)
        if (!j->ch[k].done && !j->ch[k].cancel_sent) return 1;
    return 0;
}

/* Submits a job's choices (under mu). Returns 0, or the HTTP status of the refusal (j->err set). */
static int submit_job(td_server_gen *G, job *j) {
    if (G->broken) {
        snprintf(j->err, sizeof j->err, "the generation engine failed; restart the server");
        return 503;
    }
    int64_t ids[TD_GEN_MAX_CHOICES];
    td_status st = td_gen_submit_n(G->g, &j->req, j->n_choices, ids);
    for (int32_t k = 0; st == TD_OK && j->n_bias && k < j->n_choices; k++)
        st = td_gen_set_logit_bias(G->g, ids[k], j->bias_ids, j->bias, j->n_bias);
    if (st != TD_OK) {
        snprintf(j->err, sizeof j->err, "%s", td_last_error());
        for (int32_t k = 0; k < j->n_choices && ids[0]; k++) /* set_logit_bias failed: the queued choices go */
            (void)td_gen_cancel(G->g, ids[k]);
        return st == TD_ERR_STATE ? 503 : st == TD_ERR_NOMEM ? 500 : 400;
    }
    for (int32_t k = 0; k < j->n_choices; k++) j->ch[k].id = ids[k];
    return 0;
}

static void *engine_main(void *arg) {
    td_server_gen *G = arg;
    pthread_mutex_lock(&G->mu);
    while (!G->stop) {
        int cancels = 0;
        for (job *j = G->active; j; j = j->next) cancels |= j->cancel && uncancelled(j);
        if (!G->inbox && G->n_active == 0 && !cancels) {
            pthread_cond_wait(&G->wake, &G->mu);
            continue;
        }
        while (G->inbox) { /* submissions, in arrival order */
            job *j = G->inbox;
            G->inbox = j->next;
            if (!G->inbox) G->inbox_tail = NULL;
            j->next = NULL;
            if (j->cancel) {
                job_end(G, j, 499, "cancelled before it started");
                continue;
            }
            int status = submit_job(G, j);
            if (status) {
                char msg[512];
                snprintf(msg, sizeof msg, "%s", j->err);
                job_end(G, j, status, msg);
                continue;
            }
            j->submitted = 1;
            j->next = G->active;
            G->active = j;
            G->n_active++;
            pthread_cond_broadcast(&j->cv);
        }
        for (job *j = G->active; j; j = j->next)
            if (j->cancel) cancel_choices(G, j);
        pthread_mutex_unlock(&G->mu);
        int32_t n_active = 0;
        td_status st = td_gen_step(G->g, &n_active);
        pthread_mutex_lock(&G->mu);
        G->n_active = n_active;
        td_gen_event ev;
        while (td_gen_next_event(G->g, &ev)) take_event(G, &ev);
        if (st == TD_ERR_NOMEM) { /* events may be missing: no running reply can be trusted; end them all */
            char msg[512];
            snprintf(msg, sizeof msg, "out of memory in the generation engine: %s", td_last_error());
            for (job *j = G->active; j; j = j->next)
                if (uncancelled(j)) {
                    j->cancel = 1;
                    j->err_status = 500;
                    snprintf(j->err, sizeof j->err, "%s", msg);
                    cancel_choices(G, j); /* the DONE (cancelled) events come with the next step */
                }
        } else if (st != TD_OK) { /* a broken engine: every request ends with the message */
            char msg[512];
            snprintf(msg, sizeof msg, "the generation engine failed: %s", td_last_error());
            G->broken = 1;
            while (G->active) {
                job *j = G->active;
                G->active = j->next;
                job_end(G, j, 500, msg);
            }
            G->n_active = 0;
        }
    }
    while (G->inbox) { /* stopping: nothing more runs */
        job *j = G->inbox;
        G->inbox = j->next;
        job_end(G, j, 503, "the server is stopping");
    }
    while (G->active) {
        job *j = G->active;
        G->active = j->next;
        job_end(G, j, 503, "the server is stopping");
    }
    pthread_mutex_unlock(&G->mu);
    return NULL;
}

td_status td_server_gen_start(td_server *s) {
    s->gen = NULL;
    if (!td_model_can_generate(s->model)) return TD_OK; /* a pruned head decides; generation answers 400 */
    td_server_gen *G = td_calloc(1, sizeof *G);
    if (!G) return td_fail_nomem("the generation engine");
    td_gen_params gp = td_gen_default_params();
    gp.max_running = s->p.parallel;
    gp.max_queue = (s->p.parallel + s->p.queue_max + 1) * TD_GEN_MAX_CHOICES; /* admitted requests' choices: all fit */
    gp.max_sequences = 2 * s->p.parallel + 16;
    gp.n_threads = s->p.n_threads;
    gp.kv_f16 = s->p.kv_f16;
    gp.device = s->p.device;
    gp.precision = s->p.precision;
    gp.cache_bytes = (s->p.memory_mb > 0 ? s->p.memory_mb : 1024) * ((int64_t)1 << 20);
    gp.log = s->p.log, gp.log_user = s->p.log_user;
    td_status st = td_gen_new(s->model, &gp, &G->g);
    if (st != TD_OK) {
        td_free(G);
        return td_fail_context(st, "the generation engine");
    }
    pthread_mutex_init(&G->mu, NULL);
    pthread_cond_init(&G->wake, NULL);
    if (pthread_create(&G->thread, NULL, engine_main, G) != 0) {
        td_gen_free(G->g);
        pthread_mutex_destroy(&G->mu);
        pthread_cond_destroy(&G->wake);
        td_free(G);
        return td_fail(TD_ERR_NOMEM, "cannot start the engine thread");
    }
    G->started = 1;
    s->gen = G;
    return TD_OK;
}

void td_server_gen_stop(td_server *s) {
    td_server_gen *G = s->gen;
    if (!G || !G->started) return;
    pthread_mutex_lock(&G->mu);
    G->stop = 1;
    pthread_cond_broadcast(&G->wake);
    pthread_mutex_unlock(&G->mu);
    pthread_join(G->thread, NULL); /* every job is ended: waiting replies and streams finish */
    G->started = 0;
}

void td_server_gen_free(td_server *s) {
    td_server_gen *G = s->gen;
    if (!G) return;
    td_server_gen_stop(s);
    td_gen_free(G->g);
    pthread_mutex_destroy(&G->mu);
    pthread_cond_destroy(&G->wake);
    td_free(G);
    s->gen = NULL;
}

int32_t td_server_gen_rows(const td_server *s) { return s->gen ? td_gen_n_ctx(s->gen->g) : 0; }

int32_t td_server_gen_active(td_server *s) {
    td_server_gen *G = s->gen;
    if (!G) return 0;
    pthread_mutex_lock(&G->mu);
    int32_t n = 0;
    for (job *j = G->inbox; j; j = j->next) n++;
    for (job *j = G->active; j; j = j->next) n++;
    pthread_mutex_unlock(&G->mu);
    return n;
}

/* Hands a job to the engine and waits until it is submitted (or refused): *out gets the refusal. Returns 0 when
 * running. The HTTP side keeps its reference. */
static int job_submit(td_server *s, job *j, td_reply *out) {
    td_server_gen *G = s->gen;
    pthread_mutex_lock(&G->mu);
    if (G->stop) { /* stopping: the engine takes nothing more */
        pthread_mutex_unlock(&G->mu);
        job_free(j);
        td_reply_fail(out, 503, "server_error", NULL, "shutting_down", "the server is stopping");
        return -1;
    }
    j->refs = 2;
    j->next = NULL;
    if (G->inbox_tail) G->inbox_tail->next = j;
    else G->inbox = j;
    G->inbox_tail = j;
    pthread_cond_broadcast(&G->wake);
    while (!j->submitted && !j->done) pthread_cond_wait(&j->cv, &G->mu);
    int refused = j->done && !j->submitted;
    if (refused) {
        td_reply_fail(out, j->err_status, j->err_status >= 500 ? "server_error" : "invalid_request_error", NULL,
                      j->err_status == 503 ? "queue_full" : j->err_status == 400 ? "invalid_request" : NULL, "%s", j->err);
        if (j->err_status == 503) out->retry_after = 1;
        job_unref(j);
    }
    pthread_mutex_unlock(&G->mu);
    return refused ? -1 : 0;
}

/* Admits the request (td_server_admit), then submits its job. Returns 0 when running; otherwise *out holds the
 * refusal, the job is freed and the admission released. */
static int job_start(td_server *s, job *j, td_reply *out) {
    if (!td_server_admit(s, out)) {
        job_free(j);
        return -1;
    }
    if (job_submit(s, j, out)) {
        td_server_release(s);
        return -1;
    }
    return 0;
}

/* The HTTP side lets go; a job not done yet is cancelled (the client went away). */
static void job_release(td_server *s, job *j) {
    td_server_gen *G = s->gen;
    pthread_mutex_lock(&G->mu);
    if (!j->done) {
        j->cancel = 1;
        pthread_cond_broadcast(&G->wake);
    }
    job_unref(j);
    pthread_mutex_unlock(&G->mu);
}

/* ---- building a request ---------------------------------------------------------------------------------------- */

int td_server_render_chat(td_server *s, const td_req *r, int add_generation_prompt, char **text, size_t *len,
                          int32_t **ids, size_t *n_ids, td_reply *out) {
    td_chat_message *m = td_calloc((size_t)r->n_msgs, sizeof *m);
    char **calls = td_calloc((size_t)r->n_msgs, sizeof *calls);
    char *tools = r->tools ? json_dumps(r->tools, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    td_status st = m && calls && (!r->tools || tools) ? TD_OK : TD_ERR_NOMEM;
    for (int32_t i = 0; i < r->n_msgs && st == TD_OK; i++) {
        m[i].role = r->msgs[i].role;
        m[i].content = r->msgs[i].content;
        m[i].reasoning_content = r->msgs[i].reasoning;
        if (r->msgs[i].tool_calls && !(calls[i] = json_dumps(r->msgs[i].tool_calls, JSON_COMPACT | JSON_PRESERVE_ORDER)))
            st = TD_ERR_NOMEM;
        m[i].tool_calls_json = calls[i];
    }
    td_chat_params cp = td_chat_default_params();
    cp.add_generation_prompt = add_generation_prompt;
    if (r->enable_thinking >= 0) cp.enable_thinking = r->enable_thinking;
    cp.tools_json = tools;
    *text = NULL;
    /* message content is text unless the operator allowed special tokens in it: a client cannot forge a turn */
    unsigned chat_flags = s->p.allow_special_in_messages ? TD_CHAT_ALLOW_SPECIAL : 0;
    if (st == TD_OK) st = td_chat_tokenize(s->model, m, r->n_msgs, &cp, chat_flags, text, ids, n_ids);
    else td_fail_nomem("the chat messages");
    for (int32_t i = 0; calls && i < r->n_msgs; i++) free(calls[i]);
    td_free(calls);
    td_free(m);
    free(tools);
    if (st != TD_OK) {
        const char *msg = td_last_error();
        char param[64] = "messages";
        int k;
        if (sscanf(msg, "messages[%d]", &k) == 1 || sscanf(msg, "message %d", &k) == 1) snprintf(param, sizeof param, "messages[%d]", k);
        td_reply_fail(out, st == TD_ERR_NOMEM ? 500 : st == TD_ERR_UNSUPPORTED ? 501 : 400,
                      st == TD_ERR_NOMEM || st == TD_ERR_UNSUPPORTED ? "server_error" : "invalid_request_error",
                      st == TD_ERR_UNSUPPORTED ? NULL : param, st == TD_ERR_UNSUPPORTED ? "unsupported_template" : NULL,
                      "%s", msg);
        return -1;
    }
    *len = strlen(*text);
    return 0;
}

/* A seed for a request that gave none: 53 random bits (getrandom; a clock mix where it fails), so that a client
 * reading JSON numbers as doubles (JavaScript) gets the exact seed back and can replay the request. */
static uint64_t fresh_seed(void) {
    uint64_t x = 0;
    if (getrandom(&x, sizeof x, GRND_NONBLOCK) != (ssize_t)sizeof x) {
        static _Atomic uint64_t counter;
        struct timespec a, b;
        clock_gettime(CLOCK_REALTIME, &a);
        clock_gettime(CLOCK_MONOTONIC, &b);
        x = ((uint64_t)a.tv_sec * 1000000000u + (uint64_t)a.tv_nsec) ^ ((uint64_t)b.tv_nsec << 21) ^
            (++counter * 0x9E3779B97F4A7C15ull);
        x ^= x >> 30, x *= 0xBF58476D1CE4E5B9ull, x ^= x >> 27, x *= 0x94D049BB133111EBull, x ^= x >> 31; /* splitmix64 */
    }
    return x & ((1ull << 53) - 1);
}

/* The sampler: the model's defaults (generation_config.json), then the request's values; a fresh seed when the
 * request gives none. */
static int sampler_of(td_server *s, const td_req *r, td_sampler_params *sp, td_reply *out) {
    *sp = td_model_sampler_defaults(s->model);
    const td_req_sampling *q = &r->sampling;
    if (q->has_temperature) sp->temperature = (float)q->temperature;
    if (q->has_top_p) sp->top_p = (float)q->top_p;
    if (q->has_top_k) sp->top_k = q->top_k;
    if (q->has_min_p) sp->min_p = (float)q->min_p;
    if (q->has_presence) sp->presence_penalty = (float)q->presence_penalty;
    if (q->has_frequency) sp->frequency_penalty = (float)q->frequency_penalty;
    if (q->has_repetition) sp->repetition_penalty = (float)q->repetition_penalty;
    sp->seed = q->has_seed ? q->seed : fresh_seed();
    if (td_sampler_params_check(sp) != TD_OK) {
        td_reply_fail(out, 400, "invalid_request_error", NULL, NULL, "%s", td_last_error());
        return -1;
    }
    return 0;
}

/* A job of r->n choices for ids[0..n): max_tokens checked against the context (400 naming `param` when the prompt
 * and the choices do not fit). */
static job *job_new(td_server *s, const td_req *r, const int32_t *ids, int32_t n, const char *param, td_reply *out) {
    int32_t limit = s->n_ctx, rows = td_server_gen_rows(s);
    if (rows > 0 && rows < limit) limit = rows;
    int32_t max_tokens = r->max_tokens, n_choices = r->n > 0 ? r->n : 1;
    if (n < 1) {
        td_reply_fail(out, 400, "invalid_request_error", param, NULL, "the prompt is empty");
        return NULL;
    }
    if (n >= limit || (max_tokens > 0 && (int64_t)n + max_tokens > limit)) {
        td_reply_fail(out, 400, "invalid_request_error", param, "context_length_exceeded",
                      "the prompt is %d tokens%s%s; with the tokens to generate it exceeds the context of %d tokens", n,
                      max_tokens > 0 ? " and max_tokens asks for " : "", max_tokens > 0 ? "more" : "", limit);
        return NULL;
    }
    if (n_choices > 1 && max_tokens > 0 && (int64_t)n + (int64_t)n_choices * max_tokens > rows) {
        /* the choices share the prompt's rows; each needs its own max_tokens rows */
        td_reply_fail(out, 400, "invalid_request_error", "n", "context_length_exceeded",
                      "the prompt (%d tokens) and %d choices of max_tokens %d need %lld rows; the generation engine "
                      "holds %d (lower n or max_tokens)", n, n_choices, max_tokens,
                      (long long)n + (long long)n_choices * max_tokens, rows);
        return NULL;
    }
    if (max_tokens < 0) { /* absent: as many as fit, within the server's limit (the choices share the rows) */
        max_tokens = limit - n;
        if (n_choices > 1 && (rows - n) / n_choices < max_tokens) max_tokens = (rows - n) / n_choices;
        if (max_tokens > s->p.max_tokens) max_tokens = s->p.max_tokens;
        if (max_tokens < 1) {
            td_reply_fail(out, 400, "invalid_request_error", "n", "context_length_exceeded",
                          "the prompt (%d tokens) leaves no room for %d choices in the engine's %d rows", n, n_choices,
                          rows);
            return NULL;
        }
    }
    td_sampler_params sp;
    if (sampler_of(s, r, &sp, out)) return NULL;
    job *j = td_calloc(1, sizeof *j);
    if (!j || !(j->prompt = td_malloc((size_t)n * sizeof *j->prompt)) ||
        (r->n_stop && !(j->stop = td_calloc((size_t)r->n_stop, sizeof *j->stop))) ||
        (r->n_bias && (!(j->bias_ids = td_malloc((size_t)r->n_bias * sizeof *j->bias_ids)) ||
                       !(j->bias = td_malloc((size_t)r->n_bias * sizeof *j->bias))))) {
        job_free(j);
        td_reply_fail(out, 500, "server_error", NULL, NULL, "out of memory");
        return NULL;
    }
    pthread_cond_init(&j->cv, NULL);
    memcpy(j->prompt, ids, (size_t)n * sizeof *ids);
    if (r->n_bias) {
        memcpy(j->bias_ids, r->bias_ids, (size_t)r->n_bias * sizeof *j->bias_ids);
        memcpy(j->bias, r->bias, (size_t)r->n_bias * sizeof *j->bias);
        j->n_bias = r->n_bias;
    }
    j->n_choices = n_choices;
    j->req = td_gen_default_request();
    j->req.prompt = j->prompt;
    j->req.n_prompt = n;
    j->req.sampler = sp;
    j->req.max_tokens = max_tokens;
    j->req.ignore_eos = r->ignore_eos;
    for (int32_t i = 0; i < r->n_stop; i++) {
        if (!(j->stop[i] = td_strdup(r->stop[i]))) {
            job_free(j);
            td_reply_fail(out, 500, "server_error", NULL, NULL, "out of memory");
            return NULL;
        }
        j->req.n_stop = i + 1;
    }
    j->req.stop = (const char *const *)j->stop;
    return j;
}

static int64_t next_id(td_server *s) {
    pthread_mutex_lock(&s->gen->mu);
    int64_t id = ++s->gen->next_id;
    pthread_mutex_unlock(&s->gen->mu);
    return id;
}

static json_t *sampler_json(const td_sampler_params *sp) {
    char *t = NULL;
    json_t *o = NULL;
    if (td_sampler_params_json(sp, &t) == TD_OK) o = json_loads(t, 0, NULL);
    td_free(t);
    return o ? o : json_null();
}

/* Usage over every choice: the prompt counted once (it was read once), the completions summed. */
static json_t *usage_json(const job *j) {
    json_t *u = json_object(), *d = json_object();
    int64_t gen = 0;
    for (int32_t k = 0; k < j->n_choices; k++) gen += j->ch[k].n_generated;
    json_object_set_new(u, "prompt_tokens", json_integer(j->req.n_prompt));
    json_object_set_new(u, "completion_tokens", json_integer(gen));
    json_object_set_new(u, "total_tokens", json_integer(j->req.n_prompt + gen));
    json_object_set_new(d, "cached_tokens", json_integer(j->ch[0].n_reused));
    json_object_set_new(u, "prompt_tokens_details", d);
    return u;
}

/* The timings of choice 0 (it read the prompt). */
static json_t *timings_json(const job *j) {
    const choice *c = &j->ch[0];
    json_t *t = json_object();
    json_object_set_new(t, "prompt_n", json_integer(j->req.n_prompt));
    json_object_set_new(t, "prompt_reused", json_integer(c->n_reused));
    json_object_set_new(t, "queue_ms", json_real(c->ms_queue));
    json_object_set_new(t, "prefill_ms", json_real(c->ms_prefill));
    json_object_set_new(t, "first_token_ms", json_real(c->ms_first_token));
    json_object_set_new(t, "decode_ms", json_real(c->ms_decode));
    double tps = c->ms_decode > 0 && c->n_generated > 1 ? 1e3 * (c->n_generated - 1) / c->ms_decode : 0;
    json_object_set_new(t, "decode_tokens_per_s", json_real(tps));
    return t;
}

/* What every reply carries besides OpenAI's members: the effective sampler, the seed (choice k used seed + k), the
 * timings. */
static void extras_json(json_t *o, const job *j) {
    json_object_set_new(o, "seed", json_integer((json_int_t)j->req.sampler.seed));
    json_object_set_new(o, "sampler", sampler_json(&j->req.sampler));
    json_object_set_new(o, "timings", timings_json(j));
}

static const char *finish_name(const choice *c) {
    return c->finish == TD_GEN_FINISH_LENGTH ? "length" : "stop";
}

/* Waits until the job is done (non-streamed replies), cancelling it when the client leaves meanwhile. */
static void job_wait(td_server *s, job *j, int fd) {
    td_server_gen *G = s->gen;
    pthread_mutex_lock(&G->mu);
    while (!j->done) {
        if (!j->cancel && td_client_gone(fd)) {
            j->cancel = 1;
            pthread_cond_broadcast(&G->wake);
        }
        struct timespec until = td_deadline(CLOCK_REALTIME, 50);
        pthread_cond_timedwait(&j->cv, &G->mu, &until);
    }
    pthread_mutex_unlock(&G->mu);
}

/* A text as a JSON string: complete characters (tokens may end inside one: U+FFFD, as the detokenizer does). */
static json_t *text_json(const char *t, size_t n) {
    size_t cl = 0;
    char *c = td_server_utf8_clean(t, n, &cl);
    json_t *v = c ? json_stringn(c, cl) : NULL;
    td_free(c);
    return v ? v : json_string("");
}

static json_t *token_str(td_server *s, int32_t id) {
    size_t n = 0;
    const char *b = td_token_bytes(td_model_tokenizer(s->model), id, &n);
    return text_json(b ? b : "", b ? n : 0);
}

/* ---- streams (server-sent events) -------------------------------------------------------------------------------- */

typedef struct stream {
    td_server *s;
    job *j;
    int chat, thinking_open, include_usage;
    int64_t id;
    int64_t created;
    char model[256];
    td_strbuf pend;        /* bytes formatted, not yet handed to MHD */
    size_t pend_off;       /* of which handed over */
    struct {
        size_t sent;       /* bytes of the choice's text already turned into events (completions) */
        size_t sent_reasoning, sent_content; /* chat: of the split texts */
        int role_sent, fin_sent;
    } c[TD_GEN_MAX_CHOICES];
    int finished;
    int fd;                /* the client's socket */
} stream;

static int pend_put(stream *st, const char *b, size_t n) {
    td_strbuf_put(&st->pend, b, n);
    return st->pend.oom ? -1 : 0;
}

/* Appends "data: {json}\n\n" (the object is decref'ed). */
static int pend_event(stream *st, json_t *o) {
    char *t = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(9));
    json_decref(o);
    int rc = !t || pend_put(st, "data: ", 6) || pend_put(st, t, strlen(t)) || pend_put(st, "\n\n", 2) ? -1 : 0;
    free(t);
    return rc;
}

/* The fields a response object begins with, in OpenAI's order: id ("PREFIX-N"), object, created, model. */
static json_t *response_head(const char *prefix, int64_t id, const char *object, int64_t created, const char *model) {
    json_t *o = json_object();
    char s[48];
    snprintf(s, sizeof s, "%s-%lld", prefix, (long long)id);
    json_object_set_new(o, "id", json_string(s));
    json_object_set_new(o, "object", json_string(object));
    json_object_set_new(o, "created", json_integer((json_int_t)created));
    json_object_set_new(o, "model", json_string(model));
    return o;
}

static json_t *chunk_head(stream *st) {
    return response_head(st->chat ? "chatcmpl" : "cmpl", st->id, st->chat ? "chat.completion.chunk" : "text_completion",
                         st->created, st->model);
}

/* Ends a chunk of one choice: usage null when the last chunk will carry it (as OpenAI's), the extras on a choice's
 * last chunk (extras: its job, or NULL). */
static int chunk_send(stream *st, json_t *o, json_t *c, const job *extras) {
    json_t *ch = json_array();
    json_array_append_new(ch, c);
    json_object_set_new(o, "choices", ch);
    if (st->include_usage) json_object_set_new(o, "usage", json_null());
    if (extras) extras_json(o, extras);
    return pend_event(st, o);
}

/* A chat chunk of choice k with delta {key: text} (role on its first), finish_reason given or null. */
static int chat_chunk(stream *st, int32_t k, const char *key, const char *t, size_t n, const char *finish,
                      const job *extras) {
    json_t *o = chunk_head(st), *c = json_object(), *d = json_object();
    if (!st->c[k].role_sent) {
        json_object_set_new(d, "role", json_string("assistant"));
        st->c[k].role_sent = 1;
    }
    if (key) json_object_set_new(d, key, text_json(t, n));
    json_object_set_new(c, "index", json_integer(k));
    json_object_set_new(c, "delta", d);
    json_object_set_new(c, "logprobs", json_null());
    json_object_set_new(c, "finish_reason", finish ? json_string(finish) : json_null());
    return chunk_send(st, o, c, extras);
}

static int text_chunk(stream *st, int32_t k, const char *t, size_t n, const char *finish, const job *extras) {
    json_t *o = chunk_head(st), *c = json_object();
    json_object_set_new(c, "text", text_json(t, n));
    json_object_set_new(c, "index", json_integer(k));
    json_object_set_new(c, "logprobs", json_null());
    json_object_set_new(c, "finish_reason", finish ? json_string(finish) : json_null());
    return chunk_send(st, o, c, extras);
}

/* Turns choice k's new text into events. Called under mu. */
static int stream_emit(stream *st, int32_t k, const char *text, size_t len, int done) {
    if (!st->chat) {
        if (len > st->c[k].sent || !st->c[k].role_sent) {
            st->c[k].role_sent = 1;
            if (len > st->c[k].sent && text_chunk(st, k, text + st->c[k].sent, len - st->c[k].sent, NULL, NULL)) return -1;
        }
        return 0;
    }
    /* chat: split the text so far into reasoning and content, send what each gained */
    size_t keep = done ? len : td_utf8_complete(text, len); /* the stopper sends whole characters: a safety net */
    if (!done && keep < 7 && strncmp(text, "<think>", keep) == 0 && !st->thinking_open)
        return st->c[k].role_sent ? 0 : chat_chunk(st, k, "content", "", 0, NULL, NULL);
    char *reasoning = NULL, *content = NULL;
    if (td_chat_split_reasoning(text, keep, st->thinking_open, &reasoning, &content) != TD_OK) return -1;
    size_t rl = strlen(reasoning), cl = strlen(content);
    int rc = 0;
    if (rl > st->c[k].sent_reasoning)
        rc = chat_chunk(st, k, "reasoning_content", reasoning + st->c[k].sent_reasoning, rl - st->c[k].sent_reasoning,
                        NULL, NULL);
    if (!rc && rl > st->c[k].sent_reasoning) st->c[k].sent_reasoning = rl;
    if (!rc && cl > st->c[k].sent_content)
        rc = chat_chunk(st, k, "content", content + st->c[k].sent_content, cl - st->c[k].sent_content, NULL, NULL);
    if (!rc && cl > st->c[k].sent_content) st->c[k].sent_content = cl;
    if (!rc && !st->c[k].role_sent) rc = chat_chunk(st, k, "content", "", 0, NULL, NULL);
    td_free(reasoning);
    td_free(content);
    return rc;
}

/* Something to send: a choice's first chunk, new text, or its end. */
static int stream_news(const stream *st, const job *j) {
    if (j->done) return 1;
    for (int32_t k = 0; k < j->n_choices; k++)
        if (!st->c[k].role_sent || j->ch[k].text.n > st->c[k].sent || (j->ch[k].done && !st->c[k].fin_sent)) return 1;
    return 0;
}

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max) {
    (void)pos;
    stream *st = cls;
    td_server_gen *G = st->s->gen;
    while (st->pend_off == st->pend.n) {
        td_strbuf_clear(&st->pend);
        st->pend_off = 0;
        if (st->finished) return MHD_CONTENT_READER_END_OF_STREAM;
        pthread_mutex_lock(&G->mu);
        job *j = st->j;
        int gone = 0;
        while (!stream_news(st, j)) {
            /* look at the socket while waiting: a client that left is noticed now, not at the next write */
            if (td_client_gone(st->fd)) {
                gone = 1;
                break;
            }
            struct timespec until = td_deadline(CLOCK_REALTIME, 50);
            pthread_cond_timedwait(&j->cv, &G->mu, &until);
        }
        if (gone) { /* ends the reply; MHD frees the stream, which cancels the job */
            pthread_mutex_unlock(&G->mu);
            return MHD_CONTENT_READER_END_WITH_ERROR;
        }
        int rc = 0, failed = 0, all = 1;
        for (int32_t k = 0; k < j->n_choices && !rc && !failed; k++) {
            const choice *c = &j->ch[k];
            if (st->c[k].fin_sent) continue;
            rc = stream_emit(st, k, c->text.s ? c->text.s : "", c->text.n, c->done);
            st->c[k].sent = c->text.n;
            if (rc || !c->done) {
                all = 0;
                continue;
            }
            if (c->finish == TD_GEN_FINISH_ERROR || c->finish == TD_GEN_FINISH_CANCELLED) {
                failed = 1;
                break;
            }
            rc = st->chat ? chat_chunk(st, k, NULL, NULL, 0, finish_name(c), j)
                          : text_chunk(st, k, "", 0, finish_name(c), j); /* the sampler, seed and timings ride on it */
            st->c[k].fin_sent = 1;
        }
        if (!rc && failed) {
            json_t *e = json_object(), *o = json_object();
            json_object_set_new(e, "message", json_string(j->err[0] ? j->err : "generation failed"));
            json_object_set_new(e, "type", json_string("server_error"));
            json_object_set_new(e, "param", json_null());
            json_object_set_new(e, "code", json_null());
            json_object_set_new(o, "error", e);
            rc = pend_event(st, o);
            if (!rc) rc = pend_put(st, "data: [DONE]\n\n", 14);
            st->finished = 1;
        } else if (!rc && all) {
            if (st->include_usage) { /* OpenAI's last chunk: no choices, the usage of the whole request */
                json_t *o = chunk_head(st);
                json_object_set_new(o, "choices", json_array());
                json_object_set_new(o, "usage", usage_json(j));
                rc = pend_event(st, o);
            }
            if (!rc) rc = pend_put(st, "data: [DONE]\n\n", 14);
            st->finished = 1;
        }
        pthread_mutex_unlock(&G->mu);
        if (rc) return MHD_CONTENT_READER_END_WITH_ERROR;
    }
    size_t n = st->pend.n - st->pend_off;
    if (n > max) n = max;
    memcpy(buf, st->pend.s + st->pend_off, n);
    st->pend_off += n;
    return (ssize_t)n;
}

static void stream_free(void *cls) {
    stream *st = cls;
    job_release(st->s, st->j); /* cancels the job when the client left before the end */
    td_server_release(st->s);
    td_strbuf_free(&st->pend);
    td_free(st);
}

static void start_stream(td_server *s, job *j, int chat, int thinking_open, int include_usage, td_reply *out) {
    stream *st = td_calloc(1, sizeof *st);
    if (!st) {
        job_release(s, j);
        td_server_release(s);
        td_reply_fail(out, 500, "server_error", NULL, NULL, "out of memory");
        return;
    }
    st->s = s, st->j = j, st->chat = chat, st->thinking_open = thinking_open, st->include_usage = include_usage;
    st->fd = out->client_fd;
    st->id = next_id(s);
    st->created = (int64_t)time(NULL);
    snprintf(st->model, sizeof st->model, "%s", s->model_name);
    out->status = 200;
    out->stream.read = stream_read;
    out->stream.free = stream_free;
    out->stream.cls = st;
}

/* ---- endpoints ------------------------------------------------------------------------------------------------ */

static int gen_available(td_server *s, td_reply *out) {
    if (s->gen) return 1;
    td_reply_fail(out, 400, "invalid_request_error", NULL, "cannot_generate",
                  "this model's head was pruned to the option letters: it decides (/v1/decide) but cannot generate");
    return 0;
}

/* The reply of a finished job that failed, or 0. */
static int job_failed(const job *j, td_reply *out) {
    int failed = 0;
    for (int32_t k = 0; k < j->n_choices; k++)
        failed |= j->ch[k].finish == TD_GEN_FINISH_ERROR || j->ch[k].finish == TD_GEN_FINISH_CANCELLED;
    if (!failed) return 0;
    td_reply_fail(out, j->err_status ? j->err_status : 500, "server_error", NULL, NULL, "%s",
                  j->err[0] ? j->err : "generation failed");
    return 1;
}

void td_ep_chat(td_server *s, td_req *r, td_reply *out) {
    if (!gen_available(s, out)) return;
    char *prompt = NULL;
    size_t plen = 0;
    int32_t *ids = NULL;
    size_t n = 0;
    if (td_server_render_chat(s, r, 1, &prompt, &plen, &ids, &n, out)) return;
    td_free(prompt);
    job *j = job_new(s, r, ids, (int32_t)n, "messages", out);
    td_free(ids);
    if (!j) return;
    const char *family = td_model_chat_family(s->model, NULL);
    int thinking_open = family && strcmp(family, "qwen3.5") == 0 && r->enable_thinking != 0;
    if (job_start(s, j, out)) return;
    if (r->stream) {
        start_stream(s, j, 1, thinking_open, r->include_usage, out);
        return;
    }
    job_wait(s, j, out->client_fd);
    if (!job_failed(j, out)) {
        json_t *o = response_head("chatcmpl", next_id(s), "chat.completion", (int64_t)time(NULL), s->model_name);
        json_t *ch = json_array();
        int ok = 1;
        for (int32_t k = 0; k < j->n_choices && ok; k++) {
            const choice *cc = &j->ch[k];
            char *reasoning = NULL, *content = NULL;
            if (td_chat_split_reasoning(cc->text.s ? cc->text.s : "", cc->text.n, thinking_open, &reasoning, &content) != TD_OK) {
                ok = 0;
            } else {
                json_t *c = json_object(), *m = json_object();
                json_object_set_new(m, "role", json_string("assistant"));
                json_object_set_new(m, "content", text_json(content, strlen(content)));
                json_object_set_new(m, "reasoning_content",
                                    *reasoning ? text_json(reasoning, strlen(reasoning)) : json_null());
                json_object_set_new(c, "index", json_integer(k));
                json_object_set_new(c, "message", m);
                json_object_set_new(c, "logprobs", json_null());
                json_object_set_new(c, "finish_reason", json_string(finish_name(cc)));
                json_array_append_new(ch, c);
            }
            td_free(reasoning);
            td_free(content);
        }
        json_object_set_new(o, "choices", ch);
        json_object_set_new(o, "usage", usage_json(j));
        extras_json(o, j);
        if (ok) td_reply_json(out, o);
        else {
            json_decref(o);
            td_reply_fail(out, 500, "server_error", NULL, NULL, "%s", td_last_error());
        }
    }
    job_release(s, j);
    td_server_release(s);
}

/* OpenAI's completions logprobs of choice k: tokens, token_logprobs, top_logprobs (a map per token), text_offset;
 * with echo the prompt's come first (read once, by choice 0, for every choice). */
static json_t *logprobs_json(td_server *s, const job *j, int32_t k, int echo, int32_t n_top) {
    const choice *cc = &j->ch[k];
    json_t *o = json_object(), *toks = json_array(), *lps = json_array(), *tops = json_array(), *offs = json_array();
    size_t off = 0;
    int32_t n_prompt = echo ? j->req.n_prompt : 0;
    for (int32_t i = 0; i < n_prompt + cc->n_tok; i++) {
        int gen = i >= n_prompt;
        int32_t id = gen ? cc->toks[i - n_prompt] : j->prompt[i];
        size_t bl = 0;
        td_token_bytes(td_model_tokenizer(s->model), id, &bl);
        json_array_append_new(toks, token_str(s, id));
        json_array_append_new(offs, json_integer((json_int_t)off));
        off += bl;
        const float *lp = NULL;
        const int32_t *ti = NULL;
        const float *tl = NULL;
        int32_t kk = 0;
        if (gen) lp = &cc->lps[i - n_prompt], ti = cc->top_ids + (size_t)(i - n_prompt) * (size_t)j->n_top,
                 tl = cc->top_lps + (size_t)(i - n_prompt) * (size_t)j->n_top, kk = j->n_top;
        else if (i > 0 && i - 1 < j->n_plp) lp = &j->plp[i - 1], ti = j->ptop_ids + (size_t)(i - 1) * (size_t)j->n_ptop,
                 tl = j->ptop_lps + (size_t)(i - 1) * (size_t)j->n_ptop, kk = j->n_ptop;
        json_array_append_new(lps, lp && isfinite(*lp) ? json_real(*lp) : json_null());
        if (!lp) {
            json_array_append_new(tops, json_null());
            continue;
        }
        json_t *m = json_object();
        for (int32_t t = 0; t < kk && t < n_top; t++) {
            if (ti[t] < 0) continue;
            size_t tn = 0;
            const char *tb = td_token_bytes(td_model_tokenizer(s->model), ti[t], &tn);
            size_t cl = 0;
            char *c = td_server_utf8_clean(tb ? tb : "", tb ? tn : 0, &cl);
            if (c && !json_object_get(m, c)) json_object_set_new(m, c, json_real(tl[t]));
            td_free(c);
        }
        json_array_append_new(tops, m);
    }
    json_object_set_new(o, "tokens", toks);
    json_object_set_new(o, "token_logprobs", lps);
    json_object_set_new(o, "top_logprobs", tops);
    json_object_set_new(o, "text_offset", offs);
    return o;
}

void td_ep_completion(td_server *s, td_req *r, td_reply *out) {
    if (!gen_available(s, out)) return;
    int32_t *ids = r->prompt_ids;
    size_t n = (size_t)r->n_prompt_ids;
    int32_t *own = NULL;
    if (!ids) {
        td_status st = td_tokenize(td_model_tokenizer(s->model), r->prompt, r->prompt_len,
                                   TD_TOKENIZE_PARSE_SPECIAL | TD_TOKENIZE_ADD_BOS, &own, &n); /* BOS: as llama-server */
        if (st != TD_OK) {
            td_reply_fail(out, st == TD_ERR_NOMEM ? 500 : 400, "invalid_request_error", "prompt", NULL, "%s", td_last_error());
            return;
        }
        ids = own;
    }
    job *j = job_new(s, r, ids, (int32_t)n, "prompt", out);
    td_free(own);
    if (!j) return;
    j->req.logprobs = r->logprobs;
    j->n_top = r->logprobs > 0 ? r->logprobs : 0;
    if (r->echo && r->logprobs >= 0) {
        j->req.prompt_logprobs = r->logprobs;
        j->req.cache = 0; /* every prompt position's logits are needed: nothing reused, nothing worth keeping */
    }
    char *ptext = NULL; /* the prompt's text, for echo */
    size_t pl = 0;
    if (r->echo) {
        if (r->prompt) ptext = td_strndup(r->prompt, r->prompt_len), pl = r->prompt_len;
        else if (td_detokenize(td_model_tokenizer(s->model), j->prompt, (size_t)j->req.n_prompt, &ptext, &pl) != TD_OK)
            ptext = NULL;
    }
    if (job_start(s, j, out)) {
        td_free(ptext);
        return;
    }
    if (r->stream) {
        start_stream(s, j, 0, 0, r->include_usage, out);
        if (r->echo && out->stream.cls) /* the prompt's text goes first, for every choice */
            for (int32_t k = 0; k < j->n_choices; k++) text_chunk(out->stream.cls, k, ptext ? ptext : "", pl, NULL, NULL);
        td_free(ptext);
        return;
    }
    job_wait(s, j, out->client_fd);
    if (!job_failed(j, out)) {
        json_t *o = response_head("cmpl", next_id(s), "text_completion", (int64_t)time(NULL), s->model_name);
        json_t *ch = json_array();
        for (int32_t k = 0; k < j->n_choices; k++) {
            const choice *cc = &j->ch[k];
            json_t *c = json_object();
            char *joined = NULL;
            size_t tl = 0;
            if (r->echo && ptext) { /* the prompt's text, then the completion */
                joined = td_malloc(pl + cc->text.n + 1);
                if (joined) {
                    memcpy(joined, ptext, pl);
                    if (cc->text.n) memcpy(joined + pl, cc->text.s, cc->text.n);
                    joined[pl + cc->text.n] = 0;
                    tl = pl + cc->text.n;
                }
            }
            json_object_set_new(c, "text", joined ? text_json(joined, tl) : text_json(cc->text.s ? cc->text.s : "", cc->text.n));
            td_free(joined);
            json_object_set_new(c, "index", json_integer(k));
            json_t *tid = json_array(); /* the generated ids (vLLM's return_token_ids), for exact comparisons */
            int32_t n_ids = cc->n_tok - (cc->stop_id >= 0 && cc->n_tok > 0 && cc->toks[cc->n_tok - 1] == cc->stop_id);
            for (int32_t i = 0; i < n_ids; i++) json_array_append_new(tid, json_integer(cc->toks[i]));
            json_object_set_new(c, "token_ids", tid);
            json_object_set_new(c, "logprobs", r->logprobs >= 0 ? logprobs_json(s, j, k, r->echo, r->logprobs) : json_null());
            json_object_set_new(c, "finish_reason", json_string(finish_name(cc)));
            json_array_append_new(ch, c);
        }
        json_object_set_new(o, "choices", ch);
        json_object_set_new(o, "usage", usage_json(j));
        extras_json(o, j);
        td_reply_json(out, o);
    }
    td_free(ptext);
    job_release(s, j);
    td_server_release(s);
}
