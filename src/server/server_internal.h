/* The server's private state, shared by its files: the daemon and routing (server.c), the endpoints that need no
 * generation (endpoints.c), the generation engine and its endpoints (generate.c) and the page (page.html, compiled
 * in as td_server_page). */
#ifndef TD_SERVER_INTERNAL_H
#define TD_SERVER_INTERNAL_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "server/decide_batch.h"
#include "server/request.h"
#include "typedecide_server.h"

typedef struct td_server_gen td_server_gen; /* the generation engine (generate.c) */

struct td_server {
    const td_model *model;
    td_server_params p;
    char *host, *api_key, *model_name; /* owned copies */
    struct MHD_Daemon *mhd;
    int32_t port;
    int64_t created;                   /* unix time of start, for /v1/models */
    int32_t n_ctx;                     /* context per request: the model's trained context, capped by params */
    td_req_limits limits;
    pthread_mutex_t mu;                /* admission counters below */
    int32_t busy;                      /* requests admitted and not finished (decide and generation) */
    td_decider *decider;               /* /v1/decide: run by decide_batch.c, one call at a time */
    pthread_mutex_t decide_mu;         /* guards dq */
    td_decide_queue dq;                /* /v1/decide requests waiting for a shared pass (decide_batch.c) */
    td_server_gen *gen;                /* NULL until generation is available */
    /* connections (server.c): their deadlines, the work threads, CORS */
    pthread_mutex_t conn_mu;           /* the fields below and every td_conn_slot / td_work */
    pthread_cond_t conn_cv;            /* work threads ended, stream buffers drained, the sweeper's stop */
    struct td_conn_slot *slots;        /* every open connection (MHD's socket context) */
    pthread_t sweeper;                 /* cuts connections past their deadline */
    int sweeper_on, sweeper_stop, stopping;
    int32_t n_work, max_work;          /* work threads running, and the most at once (more: 503) */
    char **cors;                       /* allowed origins (owned), n_cors of them; "*": any */
    int32_t n_cors;
};

/* A streamed body: MHD pulls bytes through read(); free() runs once the connection is done with it (finished,
 * failed, or the client went away: the place to cancel work). */
typedef struct td_stream {
    ssize_t (*read)(void *cls, uint64_t pos, char *buf, size_t max);
    void (*free)(void *cls);
    void *cls;
} td_stream;

/* What an endpoint answers: a status and a body (owned, td_free), or a stream. */
typedef struct td_reply {
    int status;
    char *body;
    size_t len;
    const char *content_type; /* NULL: application/json */
    int retry_after;          /* seconds, for 503; 0: no header */
    td_stream stream;         /* stream.read != NULL: streamed (text/event-stream) */
    int client_fd;            /* in: the client's socket (-1: unknown), to notice a client that went away */
    int close;                /* 1: 'Connection: close' (the request's framing cannot be trusted) */
} td_reply;

/* 1 when the client closed its side of the connection (read end-of-file or a hang-up), without consuming data. */
int td_client_gone(int fd);

/* Sets an error reply from a filled td_req_error. */
void td_reply_error(td_reply *out, const td_req_error *err);
/* An error reply in one step; returns 0. */
int td_reply_fail(td_reply *out, int status, const char *type, const char *param, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));
/* Takes a JSON object (decref'ed here) as the reply body with status 200. */
void td_reply_json(td_reply *out, json_t *o);

/* Admission: 1 when a request may start work (counted in busy), 0 when the queue is full (then a 503 reply with
 * Retry-After is set). td_server_release ends it. */
int td_server_admit(td_server *s, td_reply *out);
void td_server_release(td_server *s);

/* Endpoints (endpoints.c). */
void td_ep_health(td_server *s, td_reply *out);
void td_ep_models(td_server *s, td_reply *out);
void td_ep_model(td_server *s, const char *id, td_reply *out); /* GET /v1/models/{id}: 404 for another id */
void td_ep_tokenize(td_server *s, const td_req *r, td_reply *out);
void td_ep_detokenize(td_server *s, const td_req *r, td_reply *out);
void td_ep_decide(td_server *s, const td_req *r, td_reply *out);

/* Generation (generate.c): the engine thread and the OpenAI endpoints. */
td_status td_server_gen_start(td_server *s);
void td_server_gen_stop(td_server *s); /* ends every job and joins the engine thread */
void td_server_gen_free(td_server *s); /* then frees it (after the HTTP threads are gone) */
/* KV rows of the generation engine's pool (0 without one). */
int32_t td_server_gen_rows(const td_server *s);
/* Requests handed to the engine and not finished (waiting for submission, queued or running in td_gen). */
int32_t td_server_gen_active(td_server *s);
void td_ep_chat(td_server *s, td_req *r, td_reply *out);
void td_ep_completion(td_server *s, td_req *r, td_reply *out);

/* Bytes as valid UTF-8 (invalid bytes become U+FFFD), a new string (td_free); *out_len its length. */
char *td_server_utf8_clean(const char *s, size_t len, size_t *out_len);
/* The chat prompt of a request's messages (the model's chat template), a new string (td_free), and its token ids
 * (td_chat_tokenize: message content as text unless the server allows special tokens in it; td_free). Returns 0,
 * or sets an error reply (400 naming the field, 501 when templates are not available) and returns -1. */
int td_server_render_chat(td_server *s, const td_req *r, int add_generation_prompt, char **text, size_t *len,
                          int32_t **ids, size_t *n_ids, td_reply *out);

/* The web page (page.html, compiled in). */
extern const char td_server_page[];
extern const size_t td_server_page_len;

#endif
