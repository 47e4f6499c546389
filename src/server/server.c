/* The daemon: libmicrohttpd polling its sockets with epoll on a small pool of threads, routing, the API key, CORS,
 * the body reader (size limit), the deadlines of a request's headers and body, framing checks, admission (the
 * bounded queue) and replies. Endpoints live in endpoints.c and generate.c.
 *
 * Connections cost a socket, not a thread: an idle or slow connection sits in epoll. The pool threads never wait on
 * the model: a POST whose body is in is suspended (MHD_suspend_connection) and handed to a work thread of its own,
 * which runs the endpoint and resumes the connection with the reply. A streamed reply is pumped by that thread into
 * a buffer; MHD's content reader takes from it, and suspends the connection while it is empty (returning 0 without
 * suspending would make MHD call it again at once: a spin). Work threads exist only while requests are worked on.
 *
 * libmicrohttpd 0.9.75 has no deadline for a request's bytes (only an idle timeout, which a client sending a byte a
 * second never reaches) and cannot queue a reply while a request is arriving: a sweeper thread watches every open
 * connection (MHD_OPTION_NOTIFY_CONNECTION) and, past the deadline, writes a 408 itself, half-closes the socket, and
 * shuts it a second later so MHD closes the connection. MHD writes nothing on a connection while its request is
 * arriving, so the 408 never interleaves with its output. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/tcp.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <unistd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>

#include "server/server_internal.h"
#include "util/alloc.h"
#include "util/clock.h"
#include "util/error.h"
#include "util/json.h"
#include "util/strbuf.h"

static void note(const td_server *s, int level, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void note(const td_server *s, int level, const char *fmt, ...) {
    if (!s->p.log) return;
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    s->p.log(s->p.log_user, level, msg);
}

static void mhd_log(void *cls, const char *fmt, va_list ap) {
    const td_server *s = cls;
    if (!s->p.log) return;
    char msg[1024];
    vsnprintf(msg, sizeof msg, fmt, ap);
    size_t n = strlen(msg);
    while (n && (msg[n - 1] == '\n' || msg[n - 1] == '\r')) msg[--n] = 0;
    s->p.log(s->p.log_user, 1, msg);
}

/* ---- replies ---------------------------------------------------------------------------------------------------- */

void td_reply_error(td_reply *out, const td_req_error *err) {
    out->status = err->status;
    out->body = td_req_error_json(err);
    out->len = out->body ? strlen(out->body) : 0;
}

int td_reply_fail(td_reply *out, int status, const char *type, const char *param, const char *code, const char *fmt, ...) {
    td_req_error err;
    memset(&err, 0, sizeof err);
    char msg[sizeof err.message];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    td_req_fail(&err, status, type, param, code, "%s", msg);
    td_reply_error(out, &err);
    return 0;
}

void td_reply_json(td_reply *out, json_t *o) {
    char *s = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(9));
    json_decref(o);
    out->status = 200;
    out->body = s ? td_strdup(s) : NULL;
    out->len = out->body ? strlen(out->body) : 0;
    free(s);
    if (!out->body) td_reply_fail(out, 500, "server_error", NULL, NULL, "out of memory while writing the reply");
}

int td_server_admit(td_server *s, td_reply *out) {
    pthread_mutex_lock(&s->mu);
    int ok = s->busy < s->p.parallel + s->p.queue_max;
    if (ok) s->busy++;
    pthread_mutex_unlock(&s->mu);
    if (!ok) {
        td_reply_fail(out, 503, "server_error", NULL, "queue_full",
                      "the server is busy: %d requests are in progress or queued; retry later",
                      s->p.parallel + s->p.queue_max);
        out->retry_after = 1;
    }
    return ok;
}

void td_server_release(td_server *s) {
    pthread_mutex_lock(&s->mu);
    s->busy--;
    pthread_mutex_unlock(&s->mu);
}

int td_client_gone(int fd) {
    if (fd < 0) return 0;
    struct pollfd pfd = {fd, POLLIN, 0};
    if (poll(&pfd, 1, 0) <= 0) return 0;
    if (pfd.revents & (POLLHUP | POLLERR)) return 1;
    char c;
    return (pfd.revents & POLLIN) && recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
}

/* ---- connections: deadlines ---------------------------------------------------------------------------------- */

enum { PH_HEADERS = 0, PH_BODY, PH_WORK };

/* One open connection (MHD's socket context), in s->slots from MHD's STARTED notice to its CLOSED one. MHD closes the
 * socket after the CLOSED notice, so under conn_mu the fd is this connection's. */
typedef struct td_conn_slot {
    struct td_conn_slot *prev, *next;
    int fd;
    int phase;        /* PH_HEADERS: waiting for a request's headers; PH_BODY: for its body; PH_WORK: no deadline */
    double since;     /* when the phase began */
    uint64_t rx_mark; /* bytes received on the socket by then: none since means an idle connection, not a slow one */
    int cut;          /* 1: past its deadline, answered and half-closed; 2: shut (MHD closes it) */
    double cut_at;
    char origin[256]; /* the request's Origin when CORS allows it (its 408 carries it too); "" when none or longer */
} td_conn_slot;

/* Bytes received on a TCP socket so far (the kernel's count), or UINT64_MAX when unknown. */
static uint64_t rx_bytes(int fd) {
    struct tcp_info ti;
    socklen_t len = sizeof ti;
    memset(&ti, 0, sizeof ti);
    if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) != 0 ||
        len < offsetof(struct tcp_info, tcpi_bytes_received) + sizeof ti.tcpi_bytes_received)
        return UINT64_MAX;
    return ti.tcpi_bytes_received;
}

/* A connection past its deadline (conn_mu held). A request that began gets a 408 written on the socket, which is then
 * half-closed (the client reads the reply and an end of file); a connection that stayed idle is shut without a word.
 * The sweeper shuts a half-closed socket a second later: MHD reads an end of file and closes the connection. */
static void slot_cut(td_server *s, td_conn_slot *sl, double now) {
    uint64_t rx = sl->phase == PH_HEADERS ? rx_bytes(sl->fd) : UINT64_MAX;
    if (rx != UINT64_MAX && rx == sl->rx_mark) {
        shutdown(sl->fd, SHUT_RDWR);
        sl->cut = 2;
        return;
    }
    const char *what = sl->phase == PH_HEADERS ? "headers" : "body";
    td_reply r;
    memset(&r, 0, sizeof r);
    td_reply_fail(&r, 408, "invalid_request_error", NULL, "request_timeout",
                  "the request's %s did not arrive within %d s (the server's --timeout)", what, s->p.timeout_s);
    char msg[1024];
    char cors[320] = "";
    if (sl->origin[0]) snprintf(cors, sizeof cors, "Access-Control-Allow-Origin: %s\r\nVary: Origin\r\n", sl->origin);
    int n = snprintf(msg, sizeof msg,
                     "HTTP/1.1 408 Request Timeout\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n"
                     "%sConnection: close\r\n\r\n%s", r.len, cors, r.body ? r.body : "");
    td_free(r.body);
    if (n > 0 && (size_t)n < sizeof msg) (void)!send(sl->fd, msg, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT);
    shutdown(sl->fd, SHUT_WR);
    sl->cut = 1;
    sl->cut_at = now;
    note(s, 0, "connection cut with 408: the request's %s did not arrive within %d s", what, s->p.timeout_s);
}

static void *sweeper_main(void *arg) {
    td_server *s = arg;
    prctl(PR_SET_NAME, "td-deadlines", 0, 0, 0);
    pthread_mutex_lock(&s->conn_mu);
    while (!s->sweeper_stop) {
        double t = td_now_s();
        for (td_conn_slot *sl = s->slots; sl; sl = sl->next) {
            if (sl->cut == 1 && t - sl->cut_at >= 1.0) {
                shutdown(sl->fd, SHUT_RDWR);
                sl->cut = 2;
            } else if (!sl->cut && sl->phase != PH_WORK && t - sl->since > (double)s->p.timeout_s)
                slot_cut(s, sl, t);
        }
        struct timespec until = td_deadline(CLOCK_REALTIME, 200);
        pthread_cond_timedwait(&s->conn_cv, &s->conn_mu, &until);
    }
    pthread_mutex_unlock(&s->conn_mu);
    return NULL;
}

static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                          enum MHD_ConnectionNotificationCode code) {
    td_server *s = cls;
    td_conn_slot *sl = *socket_context;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
        if (!ci || ci->connect_fd < 0 || !(sl = td_calloc(1, sizeof *sl))) return; /* no deadline: MHD's idle one */
        sl->fd = ci->connect_fd;
        sl->since = td_now_s();
        pthread_mutex_lock(&s->conn_mu);
        sl->next = s->slots;
        if (s->slots) s->slots->prev = sl;
        s->slots = sl;
        pthread_mutex_unlock(&s->conn_mu);
        *socket_context = sl;
        return;
    }
    if (!sl) return;
    pthread_mutex_lock(&s->conn_mu);
    if (sl->prev) sl->prev->next = sl->next;
    else s->slots = sl->next;
    if (sl->next) sl->next->prev = sl->prev;
    pthread_mutex_unlock(&s->conn_mu);
    td_free(sl);
    *socket_context = NULL;
}

static td_conn_slot *slot_of(struct MHD_Connection *c) {
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return ci ? ci->socket_context : NULL;
}

/* Moves the connection's request to a phase; returns 0 when it was already cut (then nothing more may be sent). */
static int slot_phase(td_server *s, struct MHD_Connection *c, int phase) {
    td_conn_slot *sl = slot_of(c);
    if (!sl) return 1;
    pthread_mutex_lock(&s->conn_mu);
    int ok = !sl->cut;
    if (ok) {
        sl->phase = phase;
        sl->since = td_now_s();
        if (phase == PH_HEADERS) {
            sl->rx_mark = rx_bytes(sl->fd);
            sl->origin[0] = 0;
        }
    }
    pthread_mutex_unlock(&s->conn_mu);
    return ok;
}

/* The headers are in: the body's deadline starts, and a 408 for it will carry the CORS origin the request was allowed. */
static int slot_body(td_server *s, struct MHD_Connection *c, const char *origin) {
    td_conn_slot *sl = slot_of(c);
    if (sl) {
        pthread_mutex_lock(&s->conn_mu);
        size_t n = origin ? strlen(origin) : 0;
        if (n < sizeof sl->origin) memcpy(sl->origin, origin ? origin : "", n + 1);
        pthread_mutex_unlock(&s->conn_mu);
    }
    return slot_phase(s, c, PH_BODY);
}

/* Checks the body's deadline as a piece arrives (the sweeper checks between pieces); returns 0 when cut. */
static int slot_in_time(td_server *s, struct MHD_Connection *c) {
    td_conn_slot *sl = slot_of(c);
    if (!sl) return 1;
    pthread_mutex_lock(&s->conn_mu);
    double t = td_now_s();
    if (!sl->cut && sl->phase != PH_WORK && t - sl->since > (double)s->p.timeout_s) slot_cut(s, sl, t);
    int ok = !sl->cut;
    pthread_mutex_unlock(&s->conn_mu);
    return ok;
}

/* ---- work threads ---------------------------------------------------------------------------------------------- */

/* A request worked on off the pool threads: its endpoint runs on a thread of its own, and the reply, or a stream's
 * bytes, comes back through here. Shared by the connection (until its request ends), the work thread and, for a
 * stream, MHD's response; the last to let go frees it. Every field is under s->conn_mu once the thread runs. */
typedef struct td_work {
    td_server *s;
    struct MHD_Connection *c;
    int refs;
    int r;                /* the route */
    char *body;
    size_t len;
    int fd;               /* a duplicate of the client's socket, for the endpoint's look at a client that left: it
                             stays this client's even after MHD closed its own */
    char what[160];       /* "METHOD url", for the log */
    int ready;            /* the reply is in */
    int suspended;        /* the connection is suspended until the work resumes it */
    td_reply reply;
    td_strbuf buf;        /* a stream's bytes pumped from reply.stream, not yet taken by MHD: [off, buf.n) */
    size_t off;
    ssize_t end;          /* 0, or how the stream ended (MHD_CONTENT_READER_END_OF_STREAM / _END_WITH_ERROR) */
    int gone;             /* MHD let go of the stream (the connection ended) */
} td_work;

enum { STREAM_AHEAD = 1 << 16 }; /* bytes a stream may be ahead of a client that reads slowly */

static void work_unref(td_work *w) { /* conn_mu held */
    if (--w->refs > 0) return;
    td_free(w->body);
    td_free(w->reply.body);
    td_strbuf_free(&w->buf);
    td_free(w);
}

/* Resumes the connection when it waits for the work (conn_mu held). */
static void work_wake(td_work *w) {
    if (!w->suspended) return;
    w->suspended = 0;
    MHD_resume_connection(w->c);
}

/* A stream's bytes, pumped from the endpoint's reader (which waits for tokens) into the buffer MHD reads. */
static void pump(td_work *w, td_stream *st) {
    td_server *s = w->s;
    char tmp[4096];
    uint64_t pos = 0;
    for (;;) {
        pthread_mutex_lock(&s->conn_mu);
        while (!w->gone && !s->stopping && w->buf.n - w->off >= STREAM_AHEAD) pthread_cond_wait(&s->conn_cv, &s->conn_mu);
        int gone = w->gone;
        pthread_mutex_unlock(&s->conn_mu);
        if (gone) break;
        ssize_t k = st->read(st->cls, pos, tmp, sizeof tmp);
        if (k == 0) { /* no data and no end: do not spin */
            struct timespec ts = {0, 5 * 1000000L};
            nanosleep(&ts, NULL);
        }
        pthread_mutex_lock(&s->conn_mu);
        if (k > 0) {
            td_strbuf_put(&w->buf, tmp, (size_t)k);
            if (!w->buf.oom) pos += (uint64_t)k;
            else w->end = MHD_CONTENT_READER_END_WITH_ERROR;
        } else if (k < 0) w->end = k == MHD_CONTENT_READER_END_OF_STREAM ? k : MHD_CONTENT_READER_END_WITH_ERROR;
        if (w->buf.n > w->off || w->end) work_wake(w);
        int done = w->end || w->gone;
        pthread_mutex_unlock(&s->conn_mu);
        if (done) break;
    }
    if (st->free) st->free(st->cls); /* a stream left early cancels its work here */
}

static void dispatch(td_server *s, int r, const char *body, size_t len, td_reply *out);

static void *work_main(void *arg) {
    td_work *w = arg;
    td_server *s = w->s;
    prctl(PR_SET_NAME, "td-work", 0, 0, 0); /* not MHD's pool thread's name, inherited from it */
    td_reply r;
    memset(&r, 0, sizeof r);
    r.client_fd = w->fd;
    double t = td_now_s();
    dispatch(s, w->r, w->body ? w->body : "", w->len, &r);
    note(s, 0, "%s -> %d%s (%.1f ms)", w->what, r.status, r.stream.read ? " stream" : "", 1e3 * (td_now_s() - t));
    td_stream st = r.stream;
    pthread_mutex_lock(&s->conn_mu);
    w->reply = r;
    w->ready = 1;
    work_wake(w);
    pthread_mutex_unlock(&s->conn_mu);
    if (st.read) pump(w, &st);
    if (w->fd >= 0) close(w->fd);
    pthread_mutex_lock(&s->conn_mu);
    s->n_work--;
    work_unref(w);
    pthread_cond_broadcast(&s->conn_cv);
    pthread_mutex_unlock(&s->conn_mu);
    return NULL;
}

/* MHD's reader of a stream: what the pump has, or a suspended connection until it has more. */
static ssize_t work_read(void *cls, uint64_t pos, char *buf, size_t max) {
    (void)pos;
    td_work *w = cls;
    td_server *s = w->s;
    ssize_t ret;
    pthread_mutex_lock(&s->conn_mu);
    if (w->buf.n > w->off) {
        size_t k = w->buf.n - w->off < max ? w->buf.n - w->off : max;
        memcpy(buf, w->buf.s + w->off, k);
        w->off += k;
        if (w->off == w->buf.n) {
            w->off = 0;
            td_strbuf_clear(&w->buf);
        }
        pthread_cond_broadcast(&s->conn_cv);
        ret = (ssize_t)k;
    } else if (w->end) ret = w->end;
    else {
        w->suspended = 1;
        MHD_suspend_connection(w->c);
        ret = 0;
    }
    pthread_mutex_unlock(&s->conn_mu);
    return ret;
}

static void work_stream_free(void *cls) {
    td_work *w = cls;
    td_server *s = w->s; /* w may be freed below */
    pthread_mutex_lock(&s->conn_mu);
    w->gone = 1;
    pthread_cond_broadcast(&s->conn_cv);
    work_unref(w);
    pthread_mutex_unlock(&s->conn_mu);
}

/* ---- replies on the wire ------------------------------------------------------------------------------------------ */

/* origin: the request's Origin when it is allowed (CORS), else NULL. A stream reply's stream.cls is its td_work. */
static enum MHD_Result send_reply(struct MHD_Connection *c, td_reply *r, const char *origin) {
    struct MHD_Response *resp;
    if (r->stream.read) {
        resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, work_read, r->stream.cls, work_stream_free);
        if (!resp) {
            work_stream_free(r->stream.cls);
            return MHD_NO;
        }
        MHD_add_response_header(resp, "Content-Type", r->content_type ? r->content_type : "text/event-stream");
        MHD_add_response_header(resp, "Cache-Control", "no-cache");
    } else {
        if (!r->body && r->status != 204) td_reply_fail(r, 500, "server_error", NULL, NULL, "out of memory");
        resp = MHD_create_response_from_buffer(r->len, r->body ? r->body : (char *)"", MHD_RESPMEM_MUST_COPY);
        td_free(r->body);
        r->body = NULL;
        if (!resp) return MHD_NO;
        if (r->status != 204)
            MHD_add_response_header(resp, "Content-Type", r->content_type ? r->content_type : "application/json");
    }
    if (r->retry_after > 0) {
        char ra[16];
        snprintf(ra, sizeof ra, "%d", r->retry_after);
        MHD_add_response_header(resp, "Retry-After", ra);
    }
    if (r->status == 401) MHD_add_response_header(resp, "WWW-Authenticate", "Bearer");
    if (r->close) MHD_add_response_header(resp, "Connection", "close");
    if (origin) {
        MHD_add_response_header(resp, "Access-Control-Allow-Origin", origin);
        MHD_add_response_header(resp, "Vary", "Origin");
    }
    enum MHD_Result ret = MHD_queue_response(c, (unsigned)r->status, resp);
    MHD_destroy_response(resp);
    return ret;
}

/* ---- routing ------------------------------------------------------------------------------------------------------ */

typedef enum route {
    R_NONE = 0, R_PAGE, R_HEALTH, R_MODELS, R_MODEL, R_TOKENIZE, R_DETOKENIZE, R_DECIDE, R_CHAT, R_COMPLETION
} route;

static const struct {
    const char *path;
    const char *method;
    route r;
} routes[] = {
    {"/", "GET", R_PAGE},
    {"/health", "GET", R_HEALTH},
    {"/v1/models", "GET", R_MODELS},
    {"/tokenize", "POST", R_TOKENIZE},
    {"/detokenize", "POST", R_DETOKENIZE},
    {"/v1/decide", "POST", R_DECIDE},
    {"/v1/chat/completions", "POST", R_CHAT},
    {"/v1/completions", "POST", R_COMPLETION},
};

/* The state of one request on its connection. */
typedef struct conn {
    route r;
    int refused;      /* a reply was already queued (or must be once the body is in) */
    int cut;          /* past its deadline: the 408 went out, nothing more is sent */
    int options;      /* OPTIONS on a known path */
    td_reply early;   /* ... this one */
    td_strbuf body;   /* the request's body as it arrives */
    const char *method, *url;
    const char *origin; /* the request's Origin when CORS allows it (MHD's copy, valid until the request ends) */
    char allow[48];     /* the path's methods, for Allow */
    td_work *work;      /* the endpoint at work on a thread of its own */
} conn;

static void conn_free(td_server *s, conn *cs) {
    if (!cs) return;
    if (cs->work) {
        pthread_mutex_lock(&s->conn_mu);
        work_unref(cs->work);
        pthread_mutex_unlock(&s->conn_mu);
    }
    td_free(cs->early.body);
    td_strbuf_free(&cs->body);
    td_free(cs);
}

/* Constant time in the key's length: the comparison does not tell an attacker how much of a guess was right. */
static int key_ok(const char *want, const char *got) {
    size_t n = strlen(want), m = got ? strlen(got) : 0;
    unsigned char diff = (unsigned char)(n != m);
    for (size_t i = 0; i < n; i++) diff |= (unsigned char)(want[i] ^ (i < m ? got[i] : 0));
    return diff == 0;
}

static int authorized(const td_server *s, struct MHD_Connection *c) {
    if (!s->api_key) return 1;
    const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
    if (!h || strncasecmp(h, "Bearer ", 7) != 0) return 0;
    return key_ok(s->api_key, h + 7);
}

/* The request's Origin when the server's CORS list allows it, else NULL. */
static const char *cors_origin(const td_server *s, struct MHD_Connection *c) {
    if (!s->n_cors) return NULL;
    const char *o = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Origin");
    if (!o) return NULL;
    for (int32_t i = 0; i < s->n_cors; i++)
        if (strcmp(s->cors[i], "*") == 0 || strcmp(s->cors[i], o) == 0) return o;
    return NULL;
}

/* OPTIONS on a known path: 204 with Allow; for an allowed origin, the CORS preflight's answer too. */
static enum MHD_Result send_options(struct MHD_Connection *c, const conn *cs) {
    struct MHD_Response *resp = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
    if (!resp) return MHD_NO;
    MHD_add_response_header(resp, "Allow", cs->allow);
    if (cs->origin) {
        /* the headers a browser asks for are allowed too (the openai client sends X-Stainless-*), when they look
         * like header names; Authorization is always named: a '*' would not cover it */
        const char *want = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Access-Control-Request-Headers");
        char hdrs[600] = "Authorization, Content-Type";
        static const char name_chars[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_, ";
        if (want && *want && strlen(want) <= 512 && strspn(want, name_chars) == strlen(want))
            snprintf(hdrs, sizeof hdrs, "Authorization, Content-Type, %s", want);
        MHD_add_response_header(resp, "Access-Control-Allow-Origin", cs->origin);
        MHD_add_response_header(resp, "Access-Control-Allow-Methods", cs->allow);
        MHD_add_response_header(resp, "Access-Control-Allow-Headers", hdrs);
        MHD_add_response_header(resp, "Access-Control-Max-Age", "600");
        MHD_add_response_header(resp, "Vary", "Origin");
    }
    enum MHD_Result ret = MHD_queue_response(c, 204, resp);
    MHD_destroy_response(resp);
    return ret;
}

static void allow_add(char *allow, size_t cap, const char *method) {
    size_t n = strlen(allow);
    snprintf(allow + n, cap - n, "%s%s%s", n ? ", " : "", method, strcmp(method, "GET") == 0 ? ", HEAD" : "");
}

/* How the request frames its body: every Content-Length and Transfer-Encoding header (MHD reads the first alone). */
typedef struct framing {
    int n_cl, n_te, cl_differ;
    const char *cl, *te;
} framing;

static enum MHD_Result count_framing(void *cls, enum MHD_ValueKind kind, const char *key, const char *value) {
    (void)kind;
    framing *f = cls;
    if (!value) value = "";
    if (strcasecmp(key, "Content-Length") == 0) {
        if (f->n_cl++ == 0) f->cl = value;
        else if (strcmp(value, f->cl) != 0) f->cl_differ = 1;
    } else if (strcasecmp(key, "Transfer-Encoding") == 0) {
        if (f->n_te++ == 0) f->te = value;
    }
    return MHD_YES;
}

/* Ambiguous framing is refused and the connection closed: two servers reading the same bytes differently is how
 * requests get smuggled. Returns 1 when *e holds the refusal. */
static int framing_refused(struct MHD_Connection *c, td_reply *e) {
    framing f;
    memset(&f, 0, sizeof f);
    MHD_get_connection_values(c, MHD_HEADER_KIND, count_framing, &f);
    if (f.cl_differ)
        td_reply_fail(e, 400, "invalid_request_error", NULL, "bad_framing",
                      "the request has Content-Length headers with different values (%.40s, ...)", f.cl);
    else if (f.n_cl && f.n_te)
        td_reply_fail(e, 400, "invalid_request_error", NULL, "bad_framing",
                      "the request has both Content-Length and Transfer-Encoding: its length is ambiguous");
    else if (f.n_te > 1 || (f.n_te && strcasecmp(f.te, "chunked") != 0))
        td_reply_fail(e, 501, "invalid_request_error", NULL, "bad_framing",
                      "Transfer-Encoding '%.60s' is not supported: only chunked", f.te);
    else return 0;
    e->close = 1;
    return 1;
}

/* Runs a POST endpoint on the complete body. */
static void dispatch(td_server *s, int r, const char *body, size_t len, td_reply *out) {
    td_req_kind kind = r == R_TOKENIZE ? TD_REQ_TOKENIZE : r == R_DETOKENIZE ? TD_REQ_DETOKENIZE
                     : r == R_DECIDE ? TD_REQ_DECIDE : r == R_CHAT ? TD_REQ_CHAT : TD_REQ_COMPLETION;
    td_req req;
    td_req_error err;
    if (td_req_parse(kind, body, len, &s->limits, &req, &err) != 0) {
        td_reply_error(out, &err);
        return;
    }
    switch (r) {
    case R_TOKENIZE: td_ep_tokenize(s, &req, out); break;
    case R_DETOKENIZE: td_ep_detokenize(s, &req, out); break;
    case R_DECIDE: td_ep_decide(s, &req, out); break;
    case R_CHAT: td_ep_chat(s, &req, out); break;
    default: td_ep_completion(s, &req, out); break;
    }
    td_req_free(&req);
}

/* Hands the complete request to a work thread and suspends the connection until its reply is in. */
static enum MHD_Result start_work(td_server *s, struct MHD_Connection *c, conn *cs) {
    pthread_mutex_lock(&s->conn_mu);
    int ok = !s->stopping && s->n_work < s->max_work;
    if (ok) s->n_work++;
    pthread_mutex_unlock(&s->conn_mu);
    td_work *w = ok ? td_calloc(1, sizeof *w) : NULL;
    if (!w) {
        td_reply r;
        memset(&r, 0, sizeof r);
        if (ok) {
            pthread_mutex_lock(&s->conn_mu);
            s->n_work--;
            pthread_cond_broadcast(&s->conn_cv);
            pthread_mutex_unlock(&s->conn_mu);
            td_reply_fail(&r, 500, "server_error", NULL, NULL, "out of memory");
        } else if (s->stopping) td_reply_fail(&r, 503, "server_error", NULL, "shutting_down", "the server is stopping");
        else {
            td_reply_fail(&r, 503, "server_error", NULL, "queue_full",
                          "the server is busy: %d requests are being worked on; retry later", s->max_work);
            r.retry_after = 1;
        }
        note(s, 0, "%s %s -> %d", cs->method, cs->url, r.status);
        return send_reply(c, &r, cs->origin);
    }
    w->s = s;
    w->c = c;
    w->r = cs->r;
    w->body = cs->body.s; /* handed over: NULL when there was no body */
    w->len = cs->body.n;
    cs->body = (td_strbuf)TD_STRBUF_INIT;
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    w->fd = ci ? fcntl(ci->connect_fd, F_DUPFD_CLOEXEC, 0) : -1;
    snprintf(w->what, sizeof w->what, "%s %.140s", cs->method, cs->url);
    w->refs = 2; /* the connection's and the thread's */
    cs->work = w;
    pthread_mutex_lock(&s->conn_mu);
    w->suspended = 1;
    MHD_suspend_connection(c);
    pthread_mutex_unlock(&s->conn_mu);
    pthread_attr_t at;
    pthread_t th;
    pthread_attr_init(&at);
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    int rc = pthread_create(&th, &at, work_main, w);
    pthread_attr_destroy(&at);
    if (rc != 0) { /* answered as the thread would have: resumed, the handler sends it */
        if (w->fd >= 0) close(w->fd);
        w->fd = -1;
        pthread_mutex_lock(&s->conn_mu);
        s->n_work--;
        w->refs--;
        td_reply_fail(&w->reply, 503, "server_error", NULL, "queue_full", "cannot start a thread for the request; retry later");
        w->reply.retry_after = 1;
        w->ready = 1;
        work_wake(w);
        pthread_cond_broadcast(&s->conn_cv);
        pthread_mutex_unlock(&s->conn_mu);
    }
    return MHD_YES;
}

/* The connection was resumed: the work's reply goes out (a stream: its buffer, read through work_read). */
static enum MHD_Result work_reply(td_server *s, struct MHD_Connection *c, conn *cs) {
    td_work *w = cs->work;
    pthread_mutex_lock(&s->conn_mu);
    if (!w->ready) { /* not yet: wait again */
        w->suspended = 1;
        MHD_suspend_connection(c);
        pthread_mutex_unlock(&s->conn_mu);
        return MHD_YES;
    }
    td_reply r = w->reply;
    w->reply.body = NULL;
    if (r.stream.read) {
        w->refs++; /* the response's, dropped by work_stream_free */
        r.stream.cls = w;
    }
    pthread_mutex_unlock(&s->conn_mu);
    return send_reply(c, &r, cs->origin);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                  const char *version, const char *upload, size_t *upload_size, void **con_cls) {
    (void)version;
    td_server *s = cls;
    conn *cs = *con_cls;
    if (!cs) { /* the headers are in: framing, route, authorise, check the announced size */
        const char *origin = cors_origin(s, c);
        if (!slot_body(s, c, origin)) return MHD_NO; /* cut at its deadline: the 408 went out */
        if (!(cs = td_calloc(1, sizeof *cs))) return MHD_NO;
        *con_cls = cs;
        cs->method = method;
        cs->url = url;
        cs->origin = origin;
        /* HEAD is every GET route, headers only (MHD sends no body for it) */
        const char *m = strcmp(method, "HEAD") == 0 ? "GET" : method;
        int path_known = 0;
        for (size_t i = 0; i < sizeof routes / sizeof routes[0]; i++)
            if (strcmp(url, routes[i].path) == 0) {
                path_known = 1;
                if (strcmp(m, routes[i].method) == 0) cs->r = routes[i].r;
                allow_add(cs->allow, sizeof cs->allow, routes[i].method);
            }
        if (!path_known && strncmp(url, "/v1/models/", 11) == 0 && url[11]) { /* GET /v1/models/{id} */
            path_known = 1;
            if (strcmp(m, "GET") == 0) cs->r = R_MODEL;
            allow_add(cs->allow, sizeof cs->allow, "GET");
        }
        if (path_known) allow_add(cs->allow, sizeof cs->allow, "OPTIONS");
        td_reply *e = &cs->early;
        if (framing_refused(c, e)) {
        } else if (!path_known) td_reply_fail(e, 404, "invalid_request_error", NULL, "not_found", "no such path: %s %.200s", method, url);
        else if (strcmp(method, "OPTIONS") == 0) cs->options = 1; /* answered once its (empty) body is in */
        else if (cs->r == R_NONE) td_reply_fail(e, 405, "invalid_request_error", NULL, "method_not_allowed",
                                                "%.200s does not take %s", url, method);
        else if (cs->r != R_HEALTH && cs->r != R_PAGE && !authorized(s, c))
            td_reply_fail(e, 401, "invalid_request_error", NULL, "invalid_api_key",
                          MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization")
                              ? "Incorrect API key provided" : "Missing API key: send 'Authorization: Bearer KEY'");
        else {
            const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Length");
            unsigned long long n = cl ? strtoull(cl, NULL, 10) : 0;
            if (n > (unsigned long long)s->p.max_body)
                td_reply_fail(e, 413, "invalid_request_error", NULL, "request_too_large",
                              "the request body is %llu bytes; this server takes at most %lld", n, (long long)s->p.max_body);
        }
        if (e->status) { /* refused before the body: answer now (MHD then closes or drains the connection) */
            cs->refused = 1;
            slot_phase(s, c, PH_WORK);
            note(s, 0, "%s %s -> %d", method, url, e->status);
            return send_reply(c, e, cs->origin);
        }
        return MHD_YES;
    }
    if (cs->refused) { /* a reply was queued before the body: discard whatever body still comes */
        *upload_size = 0;
        return MHD_YES;
    }
    if (cs->cut) { /* the 408 went out: discard the body, close when it is in */
        if (!*upload_size) return MHD_NO;
        *upload_size = 0;
        return MHD_YES;
    }
    if (*upload_size) { /* a piece of the body */
        size_t n = *upload_size;
        *upload_size = 0;
        if (!slot_in_time(s, c)) {
            note(s, 0, "%s %s -> 408: the body did not arrive within %d s", method, url, s->p.timeout_s);
            cs->cut = 1;
            return MHD_YES;
        }
        if (cs->early.status) return MHD_YES; /* over the size limit (chunked): drain, answer 413 at the end */
        if (cs->body.n + n > (size_t)s->p.max_body) {
            td_reply_fail(&cs->early, 413, "invalid_request_error", NULL, "request_too_large",
                          "the request body is over %lld bytes, this server's limit", (long long)s->p.max_body);
            return MHD_YES;
        }
        td_strbuf_put(&cs->body, upload, n);
        return cs->body.oom ? MHD_NO : MHD_YES;
    }
    /* the whole request is in */
    if (cs->work) return work_reply(s, c, cs);
    if (!slot_phase(s, c, PH_WORK)) return MHD_NO; /* cut at its deadline meanwhile */
    if (cs->early.status) {
        cs->refused = 1;
        note(s, 0, "%s %s -> %d", method, url, cs->early.status);
        return send_reply(c, &cs->early, cs->origin);
    }
    if (cs->options) {
        note(s, 0, "%s %s -> 204%s", method, url, cs->origin ? " (CORS preflight)" : "");
        return send_options(c, cs);
    }
    td_reply r;
    memset(&r, 0, sizeof r);
    double t = td_now_s();
    switch (cs->r) {
    case R_PAGE:
        r.status = 200;
        r.body = td_malloc(td_server_page_len + 1);
        if (r.body) memcpy(r.body, td_server_page, td_server_page_len + 1);
        r.len = td_server_page_len;
        r.content_type = "text/html; charset=utf-8";
        break;
    case R_HEALTH: td_ep_health(s, &r); break;
    case R_MODELS: td_ep_models(s, &r); break;
    case R_MODEL: td_ep_model(s, url + 11, &r); break;
    default: return start_work(s, c, cs); /* the model's endpoints: off the pool threads */
    }
    note(s, 0, "%s %s -> %d (%.1f ms)", method, url, r.status, 1e3 * (td_now_s() - t));
    return send_reply(c, &r, cs->origin);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe) {
    (void)toe;
    td_server *s = cls;
    conn_free(s, *con_cls);
    *con_cls = NULL;
    slot_phase(s, c, PH_HEADERS); /* the next request's headers are due within the deadline */
}

/* The allowed origins: a comma-separated list, each "*" or scheme://host[:port] as browsers send Origin. */
static td_status parse_cors(td_server *s, const char *list) {
    if (!list) return TD_OK;
    const char *p = list;
    while (*p) {
        while (*p == ' ' || *p == ',') p++;
        size_t n = strcspn(p, ", ");
        if (!n) break;
        if (!(n == 1 && *p == '*') && (n < 4 || !memchr(p, ':', n) || p[n - 1] == '/'))
            return td_fail(TD_ERR_INVALID_ARG, "CORS origin '%.*s' is not an origin: write scheme://host[:port] (no "
                           "path, no trailing slash), or *", (int)(n > 200 ? 200 : n), p);
        char **c = td_realloc(s->cors, (size_t)(s->n_cors + 1) * sizeof *c);
        if (!c) return td_fail_nomem("the CORS origins");
        s->cors = c;
        if (!(s->cors[s->n_cors] = td_strndup(p, n))) return td_fail_nomem("the CORS origins");
        s->n_cors++;
        p += n;
    }
    if (!s->n_cors) return td_fail(TD_ERR_INVALID_ARG, "the CORS origin list is empty");
    return TD_OK;
}

/* ---- start and stop ------------------------------------------------------------------------------------------------ */

void td_server_free(td_server *s) {
    if (!s) return;
    pthread_mutex_lock(&s->conn_mu);
    s->stopping = 1;                     /* no new work threads */
    pthread_mutex_unlock(&s->conn_mu);
    td_server_gen_stop(s);               /* every waiting reply and stream ends now ... */
    pthread_mutex_lock(&s->conn_mu);
    while (s->n_work > 0) {              /* ... so the work threads end, their connections resumed */
        pthread_cond_broadcast(&s->conn_cv);
        pthread_cond_wait(&s->conn_cv, &s->conn_mu);
    }
    s->sweeper_stop = 1;
    pthread_cond_broadcast(&s->conn_cv);
    pthread_mutex_unlock(&s->conn_mu);
    if (s->sweeper_on) pthread_join(s->sweeper, NULL);
    if (s->mhd) MHD_stop_daemon(s->mhd); /* no connection is suspended now: MHD closes them all */
    td_server_gen_free(s);
    for (int32_t i = 0; i < s->n_cors; i++) td_free(s->cors[i]);
    td_free(s->cors);
    pthread_mutex_destroy(&s->conn_mu);
    pthread_cond_destroy(&s->conn_cv);
    td_decider_free(s->decider);
    pthread_mutex_destroy(&s->mu);
    pthread_mutex_destroy(&s->decide_mu);
    td_free(s->host);
    td_free(s->api_key);
    td_free(s->model_name);
    td_free(s);
}

int32_t td_server_port(const td_server *s) { return s ? s->port : 0; }

td_status td_server_start(const td_model *model, const td_server_params *params, td_server **out) {
    if (!model || !out) return td_fail(TD_ERR_INVALID_ARG, "td_server_start: NULL argument");
    *out = NULL;
    td_server_params p = params ? *params : td_server_default_params();
    if (!p.host) p.host = "127.0.0.1";
    if (p.port < 0 || p.port > 65535) return td_fail(TD_ERR_INVALID_ARG, "port %d is not in 0..65535", p.port);
    if (p.parallel < 1 || p.parallel > 1024) return td_fail(TD_ERR_INVALID_ARG, "parallel must be in 1..1024");
    if (p.queue_max < 0) return td_fail(TD_ERR_INVALID_ARG, "queue_max must be >= 0");
    if (p.max_body < 1) return td_fail(TD_ERR_INVALID_ARG, "max_body must be >= 1");
    if (p.max_tokens < 1) return td_fail(TD_ERR_INVALID_ARG, "max_tokens must be >= 1");
    if (p.timeout_s < 1) return td_fail(TD_ERR_INVALID_ARG, "timeout_s must be >= 1");
    if (p.max_connections < 1) return td_fail(TD_ERR_INVALID_ARG, "max_connections must be >= 1");
    if (p.max_connections_per_ip < 0) return td_fail(TD_ERR_INVALID_ARG, "max_connections_per_ip must be >= 0");
    if (p.n_ctx < 0) return td_fail(TD_ERR_INVALID_ARG, "n_ctx must be >= 0");
    if (p.api_key && !*p.api_key) return td_fail(TD_ERR_INVALID_ARG, "the API key is empty");
    if (!td_model_tokenizer(model)) return td_fail(TD_ERR_STATE, "%s: the server needs the model's tokenizer", td_model_path(model));

    struct sockaddr_storage addr;
    memset(&addr, 0, sizeof addr);
    struct sockaddr_in *a4 = (struct sockaddr_in *)&addr;
    struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&addr;
    /* sockets polled by a few threads (epoll where MHD has it); connections suspended while their work runs */
    unsigned flags = (MHD_is_feature_supported(MHD_FEATURE_EPOLL) == MHD_YES ? MHD_USE_EPOLL_INTERNAL_THREAD
                                                                           : MHD_USE_POLL_INTERNAL_THREAD) |
                     MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG;
    if (inet_pton(AF_INET, p.host, &a4->sin_addr) == 1) {
        a4->sin_family = AF_INET;
        a4->sin_port = htons((uint16_t)p.port);
    } else if (inet_pton(AF_INET6, p.host, &a6->sin6_addr) == 1) {
        a6->sin6_family = AF_INET6;
        a6->sin6_port = htons((uint16_t)p.port);
        flags |= MHD_USE_IPv6;
    } else return td_fail(TD_ERR_INVALID_ARG, "host '%s' is not an IPv4 or IPv6 address", p.host);

    td_server *s = td_calloc(1, sizeof *s);
    if (!s) return td_fail_nomem("the server");
    s->model = model;
    s->p = p;
    pthread_mutex_init(&s->mu, NULL);
    pthread_mutex_init(&s->decide_mu, NULL);
    pthread_mutex_init(&s->conn_mu, NULL);
    pthread_cond_init(&s->conn_cv, NULL);
    s->host = td_strdup(p.host);
    s->api_key = p.api_key ? td_strdup(p.api_key) : NULL;
    if (p.model_name) s->model_name = td_strdup(p.model_name);
    else { /* the last part of the model path, without a trailing slash */
        const char *path = td_model_path(model);
        size_t n = strlen(path);
        while (n > 1 && path[n - 1] == '/') n--;
        size_t b = n;
        while (b > 0 && path[b - 1] != '/') b--;
        s->model_name = td_strndup(path + b, n - b);
    }
    s->created = (int64_t)time(NULL);
    s->n_ctx = td_model_n_ctx_train(model);
    if (p.n_ctx > 0 && p.n_ctx < s->n_ctx) s->n_ctx = p.n_ctx;
    s->limits.model_name = s->model_name;
    s->limits.max_tokens = p.max_tokens;
    s->limits.n_vocab = td_tokenizer_n_tokens(td_model_tokenizer(model));
    if (td_model_n_vocab(model) < s->limits.n_vocab) s->limits.n_vocab = td_model_n_vocab(model);
    s->limits.max_body = (size_t)p.max_body;
    s->p.host = s->host;
    s->p.api_key = s->api_key;
    s->p.model_name = s->model_name;
    td_status st = s->host && s->model_name && (!p.api_key || s->api_key) ? TD_OK : td_fail_nomem("the server");
    if (st == TD_OK) st = parse_cors(s, p.cors_origins);
    s->p.cors_origins = NULL; /* the caller's string: s->cors holds the copies */
    /* each connection holds a socket, and one being worked on a second descriptor (work threads): stay within the
     * process's open-file limit, with room for the model's files and the log */
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
        long long room = ((long long)rl.rlim_cur - 64) / 2;
        if (room < 1) room = 1;
        if (s->p.max_connections > room) {
            note(s, 1, "max_connections %d lowered to %lld: the open-file limit is %llu (ulimit -n)", s->p.max_connections,
                 room, (unsigned long long)rl.rlim_cur);
            s->p.max_connections = (int32_t)room;
        }
    }
    s->max_work = s->p.parallel + s->p.queue_max + 64;
    if (s->max_work > s->p.max_connections || s->max_work < 0) s->max_work = s->p.max_connections;
    unsigned pool = s->p.max_connections < 4 ? (unsigned)s->p.max_connections : 4;
    td_decide_params dp = td_decide_default_params();
    dp.n_threads = p.n_threads;
    dp.memory_mb = p.memory_mb;
    dp.cache_head = 1;
    dp.kv_f16 = p.kv_f16;
    dp.device = p.device;
    dp.precision = p.precision;
    if (st == TD_OK) st = td_decider_new(model, &dp, &s->decider);
    if (st == TD_OK) st = td_server_gen_start(s);
    if (st == TD_OK) {
        s->mhd = MHD_start_daemon(flags, (uint16_t)p.port, NULL, NULL, on_request, s,
                                  MHD_OPTION_EXTERNAL_LOGGER, mhd_log, s,
                                  MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&addr,
                                  /* idle: later than the sweeper's deadlines, so that a request that stopped
                                   * short gets its 408 before MHD closes it without a word */
                                  MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int)p.timeout_s + 2,
                                  MHD_OPTION_CONNECTION_LIMIT, (unsigned int)s->p.max_connections,
                                  MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned int)p.max_connections_per_ip,
                                  MHD_OPTION_THREAD_POOL_SIZE, pool,
                                  MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)64 * 1024,
                                  MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,
                                  MHD_OPTION_NOTIFY_CONNECTION, on_connection, s,
                                  MHD_OPTION_END);
        if (!s->mhd) st = td_fail(TD_ERR_IO, "cannot listen on %s port %d (in use, or not an address of this machine)",
                                  p.host, p.port);
    }
    if (st == TD_OK) {
        if (pthread_create(&s->sweeper, NULL, sweeper_main, s) == 0) s->sweeper_on = 1;
        else st = td_fail(TD_ERR_NOMEM, "cannot start the server's deadline thread");
    }
    if (st == TD_OK) {
        const union MHD_DaemonInfo *info = MHD_get_daemon_info(s->mhd, MHD_DAEMON_INFO_BIND_PORT);
        s->port = info ? (int32_t)info->port : p.port;
        note(s, 0, "serving %s on http://%s:%d/", s->model_name, p.host, s->port);
        *out = s;
        return TD_OK;
    }
    td_server_free(s);
    return st;
}
