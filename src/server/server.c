/* The daemon: libmicrohttpd with a thread per connection, routing, the API key, the body reader (size limit and
 * deadline), admission (the bounded queue) and replies. Endpoints live in endpoints.c and generate.c. */
#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>

#include "server/server_internal.h"
#include "util/alloc.h"
#include "util/error.h"
#include "util/json.h"

td_server_params td_server_default_params(void) {
    td_server_params p;
    memset(&p, 0, sizeof p);
    p.host = "127.0.0.1";
    p.port = 8080;
    p.parallel = 4;
    p.queue_max = 64;
    p.max_body = (int64_t)1 << 20;
    p.max_tokens = 4096;
    p.timeout_s = 30;
    p.max_connections = 64;
    p.n_threads = 1;
    p.memory_mb = 1024;
    return p;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

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

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max) {
    td_stream *st = cls;
    return st->read(st->cls, pos, buf, max);
}

static void stream_free(void *cls) {
    td_stream *st = cls;
    if (st->free) st->free(st->cls);
    td_free(st);
}

static enum MHD_Result send_reply(struct MHD_Connection *c, td_reply *r) {
    struct MHD_Response *resp;
    if (r->stream.read) {
        td_stream *st = td_malloc(sizeof *st);
        if (!st) {
            if (r->stream.free) r->stream.free(r->stream.cls);
            return MHD_NO;
        }
        *st = r->stream;
        resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, stream_read, st, stream_free);
        if (!resp) {
            stream_free(st);
            return MHD_NO;
        }
        MHD_add_response_header(resp, "Content-Type", r->content_type ? r->content_type : "text/event-stream");
        MHD_add_response_header(resp, "Cache-Control", "no-cache");
    } else {
        if (!r->body) td_reply_fail(r, 500, "server_error", NULL, NULL, "out of memory");
        resp = MHD_create_response_from_buffer(r->len, r->body ? r->body : (char *)"", MHD_RESPMEM_MUST_COPY);
        td_free(r->body);
        r->body = NULL;
        if (!resp) return MHD_NO;
        MHD_add_response_header(resp, "Content-Type", r->content_type ? r->content_type : "application/json");
    }
    if (r->retry_after > 0) {
        char ra[16];
        snprintf(ra, sizeof ra, "%d", r->retry_after);
        MHD_add_response_header(resp, "Retry-After", ra);
    }
    if (r->status == 401) MHD_add_response_header(resp, "WWW-Authenticate", "Bearer");
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
    td_reply early;   /* ... this one */
    char *body;
    size_t len, cap;
    double t0;        /* when the headers were in */
    const char *method, *url;
} conn;

static void conn_free(conn *cs) {
    if (!cs) return;
    td_free(cs->early.body);
    td_free(cs->body);
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

/* Runs a POST endpoint on the complete body. */
static void dispatch(td_server *s, conn *cs, td_reply *out) {
    td_req_kind kind = cs->r == R_TOKENIZE ? TD_REQ_TOKENIZE : cs->r == R_DETOKENIZE ? TD_REQ_DETOKENIZE
                     : cs->r == R_DECIDE ? TD_REQ_DECIDE : cs->r == R_CHAT ? TD_REQ_CHAT : TD_REQ_COMPLETION;
    td_req req;
    td_req_error err;
    if (td_req_parse(kind, cs->body ? cs->body : "", cs->len, &s->limits, &req, &err) != 0) {
        td_reply_error(out, &err);
        return;
    }
    switch (cs->r) {
    case R_TOKENIZE: td_ep_tokenize(s, &req, out); break;
    case R_DETOKENIZE: td_ep_detokenize(s, &req, out); break;
    case R_DECIDE: td_ep_decide(s, &req, out); break;
    case R_CHAT: td_ep_chat(s, &req, out); break;
    default: td_ep_completion(s, &req, out); break;
    }
    td_req_free(&req);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                  const char *version, const char *upload, size_t *upload_size, void **con_cls) {
    (void)version;
    td_server *s = cls;
    conn *cs = *con_cls;
    if (!cs) { /* the headers are in: route, authorise, check the announced size */
        if (!(cs = td_calloc(1, sizeof *cs))) return MHD_NO;
        *con_cls = cs;
        cs->t0 = now_s();
        cs->method = method;
        cs->url = url;
        int path_known = 0;
        for (size_t i = 0; i < sizeof routes / sizeof routes[0]; i++)
            if (strcmp(url, routes[i].path) == 0) {
                path_known = 1;
                if (strcmp(method, routes[i].method) == 0) cs->r = routes[i].r;
            }
        if (!path_known && strncmp(url, "/v1/models/", 11) == 0 && url[11]) { /* GET /v1/models/{id} */
            path_known = 1;
            if (strcmp(method, "GET") == 0) cs->r = R_MODEL;
        }
        td_reply *e = &cs->early;
        if (!path_known) td_reply_fail(e, 404, "invalid_request_error", NULL, "not_found", "no such path: %s %.200s", method, url);
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
            enum MHD_Result ret = send_reply(c, e);
            note(s, 0, "%s %s -> %d", method, url, e->status);
            return ret;
        }
        return MHD_YES;
    }
    if (cs->refused) { /* a reply was queued before the body: discard whatever body still comes */
        *upload_size = 0;
        return MHD_YES;
    }
    if (*upload_size) { /* a piece of the body */
        size_t n = *upload_size;
        *upload_size = 0;
        if (now_s() - cs->t0 > (double)s->p.timeout_s) {
            /* libmicrohttpd 0.9.75 cannot queue a reply while a body is arriving, and a client that trickles
             * bytes never goes idle: cut the connection (no status line reaches the client) */
            note(s, 0, "%s %s -> connection cut: the body did not arrive within %d s", method, url, s->p.timeout_s);
            return MHD_NO;
        }
        if (cs->early.status) return MHD_YES; /* over the size limit (chunked): drain, answer 413 at the end */
        if (cs->len + n > (size_t)s->p.max_body) {
            td_reply_fail(&cs->early, 413, "invalid_request_error", NULL, "request_too_large",
                          "the request body is over %lld bytes, this server's limit", (long long)s->p.max_body);
            return MHD_YES;
        }
        if (cs->len + n + 1 > cs->cap) {
            size_t cap = cs->cap ? cs->cap : 4096;
            while (cap < cs->len + n + 1) cap *= 2;
            char *b = td_realloc(cs->body, cap);
            if (!b) return MHD_NO;
            cs->body = b;
            cs->cap = cap;
        }
        memcpy(cs->body + cs->len, upload, n);
        cs->len += n;
        cs->body[cs->len] = 0;
        return MHD_YES;
    }
    /* the whole request is in */
    if (cs->early.status) {
        cs->refused = 1;
        note(s, 0, "%s %s -> %d", method, url, cs->early.status);
        return send_reply(c, &cs->early);
    }
    td_reply r;
    memset(&r, 0, sizeof r);
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    r.client_fd = ci ? (int)ci->connect_fd : -1;
    double t = now_s();
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
    default: dispatch(s, cs, &r); break;
    }
    note(s, 0, "%s %s -> %d%s (%.1f ms)", method, url, r.status, r.stream.read ? " stream" : "", 1e3 * (now_s() - t));
    return send_reply(c, &r);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe) {
    (void)cls, (void)c, (void)toe;
    conn_free(*con_cls);
    *con_cls = NULL;
}

/* ---- start and stop ------------------------------------------------------------------------------------------------ */

void td_server_free(td_server *s) {
    if (!s) return;
    td_server_gen_stop(s);               /* every waiting reply and stream ends now ... */
    if (s->mhd) MHD_stop_daemon(s->mhd); /* ... so the connection threads can be joined */
    td_server_gen_free(s);
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
    if (p.n_ctx < 0) return td_fail(TD_ERR_INVALID_ARG, "n_ctx must be >= 0");
    if (p.api_key && !*p.api_key) return td_fail(TD_ERR_INVALID_ARG, "the API key is empty");
    if (!td_model_tokenizer(model)) return td_fail(TD_ERR_STATE, "%s: the server needs the model's tokenizer", td_model_path(model));

    struct sockaddr_storage addr;
    memset(&addr, 0, sizeof addr);
    struct sockaddr_in *a4 = (struct sockaddr_in *)&addr;
    struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&addr;
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION | MHD_USE_ERROR_LOG;
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
                                  MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int)p.timeout_s,
                                  MHD_OPTION_CONNECTION_LIMIT, (unsigned int)p.max_connections,
                                  MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)64 * 1024,
                                  MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,
                                  MHD_OPTION_END);
        if (!s->mhd) st = td_fail(TD_ERR_IO, "cannot listen on %s port %d (in use, or not an address of this machine)",
                                  p.host, p.port);
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
