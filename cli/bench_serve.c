/* typedecide bench serve: the server's throughput under concurrent clients, measured through HTTP on loopback.
 * The server runs in this process (td_server on a free port); clients are threads with a minimal HTTP/1.1 client.
 * One run measures, with the same server and prompts: one client sending the N prompts one after another (one
 * stream), then N clients at once (N concurrent streams, batched by the engine), greedy with ignore_eos so every
 * reply has exactly --tokens tokens; every concurrent reply is checked against the single-client reply for its
 * prompt. --duration S adds a load phase: N clients send requests back to back for S seconds, every reply checked,
 * the process's resident memory sampled. */
#include <arpa/inet.h>
#include <jansson.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bench_serve.h"
#include "cli.h"
#include "typedecide_server.h"

static const char usage_text[] =
    "usage: typedecide bench serve --model M [--clients 8] [--tokens 64] [--threads T] [--duration S] [options]\n"
    "\n"
    "Starts the server in this process on a free loopback port and measures generation through HTTP\n"
    "(/v1/completions, greedy, ignore_eos: every reply has exactly --tokens tokens). Prints one JSON object:\n"
    "  single      one client, the N prompts one after another: tokens/s of one stream\n"
    "  concurrent  N clients at once (--parallel N sequences stepped together): aggregate tokens/s\n"
    "  speedup     concurrent / single; replies_mismatched: concurrent replies whose tokens differ from the\n"
    "              single-client reply for the same prompt (temperature 0: must be 0)\n"
    "  load        with --duration S: N clients back to back for S seconds: replies, tokens/s, mismatched replies,\n"
    "              errors, resident memory (MB) at the start, the end and its peak\n"
    "\n"
    "  --model M        model directory or GGUF file (with a tokenizer)\n"
    "  --clients N      concurrent clients and prompts (default 8)\n"
    "  --tokens T       tokens per reply (default 64)\n"
    "  --rounds R       requests per client in the concurrent phase (default 1)\n"
    "  --parallel P     sequences the server steps together (default: N)\n"
    "  --duration S     add the load phase, S seconds\n"
    "  --memory MB      the server's context budget (default 1024)\n"
    "  --threads T      worker threads (default: all cores)\n"
    "  --device cpu|cuda  where to compute (default cpu; cuda: a build with -DTD_CUDA=ON and an NVIDIA GPU)\n"
    CLI_PRECISION_HELP
    "  --url URL        measure another server instead (http://IPV4:PORT with OpenAI's /v1/completions, e.g.\n"
    "                   llama-server --parallel N): the same clients and prompts; replies compared by their text\n"
    "  --name NAME      the \"model\" of the requests (default \"bench\")\n"
    "\"device\" (\"cpu\" or the GPU: its name and memory) and \"precision\" (fp32 or bf16) say where the server ran.\n";

typedef struct bench {
    const char *host;      /* IPv4 address of the server */
    int port, tokens;
    const char *model_name;
    json_t **ref;          /* [clients] token_ids of the single-client reply */
    pthread_mutex_t mu;
    long long replies, tokens_done, mismatched, errors;
    double deadline;       /* load phase */
    int rounds;
} bench;

/* POSTs body to host:port/path with Connection: close; the reply body (free()) and status, or NULL. */
static char *http_post(const char *host, int port, const char *path, const char *body, int *status) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return NULL;
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    if (inet_pton(AF_INET, host, &a.sin_addr) != 1) {
        close(fd);
        return NULL;
    }
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        close(fd);
        return NULL;
    }
    size_t bl = strlen(body), hl;
    char head[256];
    hl = (size_t)snprintf(head, sizeof head,
                          "POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                          "Content-Length: %zu\r\nConnection: close\r\n\r\n", path, bl);
    if (write(fd, head, hl) != (ssize_t)hl || write(fd, body, bl) != (ssize_t)bl) {
        close(fd);
        return NULL;
    }
    size_t n = 0, cap = 8192;
    char *buf = malloc(cap);
    for (ssize_t r; buf && (r = read(fd, buf + n, cap - n - 1)) > 0;) {
        n += (size_t)r;
        if (cap - n < 4096) {
            char *nb = realloc(buf, cap *= 2);
            if (!nb) free(buf);
            buf = nb;
        }
    }
    close(fd);
    if (!buf) return NULL;
    buf[n] = 0;
    char *sep = strstr(buf, "\r\n\r\n");
    if (!sep || sscanf(buf, "HTTP/1.%*d %d", status) != 1) {
        free(buf);
        return NULL;
    }
    memmove(buf, sep + 4, n - (size_t)(sep + 4 - buf) + 1);
    return buf;
}

static void prompt_body(const bench *b, int k, char *out, size_t cap) {
    snprintf(out, cap,
             "{\"model\": \"%s\", \"prompt\": \"Ticket %d: the customer writes about order %d and asks whether\", "
             "\"max_tokens\": %d, \"temperature\": 0, \"ignore_eos\": true}", b->model_name, k, 1000 + 37 * k, b->tokens);
}

/* One request for prompt k: its token_ids (json, new reference) or NULL; *n_tokens receives their count. */
static json_t *one_request(const bench *b, int k, long long *n_tokens) {
    char body[512];
    prompt_body(b, k, body, sizeof body);
    int status = 0;
    char *reply = http_post(b->host, b->port, "/v1/completions", body, &status);
    json_t *j = reply && status == 200 ? json_loads(reply, 0, NULL) : NULL;
    free(reply);
    /* the reply's identity: its token ids (ours) or its text (another server, e.g. llama-server) */
    json_t *choice = json_array_get(json_object_get(j, "choices"), 0), *ids = json_object_get(choice, "token_ids");
    if (!ids) ids = json_object_get(choice, "text");
    if (ids) json_incref(ids);
    *n_tokens = json_integer_value(json_object_get(json_object_get(j, "usage"), "completion_tokens"));
    json_decref(j);
    return ids;
}

typedef struct client {
    bench *b;
    int k;
} client;

static void *client_main(void *arg) {
    client *c = arg;
    bench *b = c->b;
    for (int round = 0;; round++) {
        if (b->deadline > 0 ? cli_now() >= b->deadline : round >= b->rounds) break;
        int k = b->deadline > 0 ? (c->k + round) % b->rounds : c->k; /* load: every client cycles the prompts */
        long long n = 0;
        json_t *ids = one_request(b, k, &n);
        pthread_mutex_lock(&b->mu);
        if (!ids) b->errors++;
        else {
            b->replies++;
            b->tokens_done += n;
            if (!json_equal(ids, b->ref[k])) b->mismatched++;
        }
        pthread_mutex_unlock(&b->mu);
        json_decref(ids);
    }
    return NULL;
}

/* Runs n clients (client i starts at prompt i) until each did b->rounds requests or the deadline passed. */
static double run_clients(bench *b, int n) {
    pthread_t *t = calloc((size_t)n, sizeof *t);
    client *c = calloc((size_t)n, sizeof *c);
    if (!t || !c) {
        free(t), free(c);
        return -1;
    }
    b->replies = b->tokens_done = b->mismatched = b->errors = 0;
    double t0 = cli_now();
    int started = 0;
    for (int i = 0; i < n; i++) {
        c[i].b = b, c[i].k = i;
        if (pthread_create(&t[i], NULL, client_main, &c[i]) == 0) started++;
        else break;
    }
    for (int i = 0; i < started; i++) pthread_join(t[i], NULL);
    double s = cli_now() - t0;
    free(t), free(c);
    return started == n ? s : -1;
}

static double rss_mb(void) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    double kb = -1;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "VmRSS: %lf", &kb) == 1) break;
    if (f) fclose(f);
    return kb / 1024.0;
}

typedef struct sampler_arg {
    volatile int stop;
    double max_mb;
} sampler_arg;

static void *rss_sampler(void *arg) {
    sampler_arg *s = arg;
    while (!s->stop) {
        double m = rss_mb();
        if (m > s->max_mb) s->max_mb = m;
        usleep(200000);
    }
    return NULL;
}

int bench_serve(int argc, char **argv) {
    const char *model_dir = NULL, *clients_s = "8", *tokens_s = "64", *rounds_s = "1", *par_s = NULL, *dur_s = NULL,
               *mem_s = NULL, *threads_s = NULL, *url = NULL, *name = "bench",
               *device_s = NULL, *precision_s = NULL;
    const cli_opt opts[] = {{"model", 1, &model_dir, NULL},  {"clients", 1, &clients_s, NULL},
                            {"url", 1, &url, NULL},          {"name", 1, &name, NULL},
                            {"tokens", 1, &tokens_s, NULL},  {"rounds", 1, &rounds_s, NULL},
                            {"parallel", 1, &par_s, NULL},   {"duration", 1, &dur_s, NULL},
                            {"memory", 1, &mem_s, NULL},     {"threads", 1, &threads_s, NULL},
                            {"device", 1, &device_s, NULL},  {"precision", 1, &precision_s, NULL},
                            {NULL, 0, NULL, NULL}};
    int r = cli_parse(argc, argv, opts, "bench serve", NULL, 0, NULL);
    if (r == 1) {
        fputs(usage_text, stdout);
        return 0;
    }
    if (r) return r;
    if (!model_dir && !url) return cli_usage_error("bench", "--model (or --url) is required");
    char host[64] = "127.0.0.1";
    int url_port = 0;
    if (url && (sscanf(url, "http://%63[0-9.]:%d", host, &url_port) != 2 || url_port < 1 || url_port > 65535))
        return cli_usage_error("bench", "--url must be http://IPV4:PORT");
    long long clients, tokens, rounds, parallel, duration = 0, memory = 1024, threads = cli_default_threads();
    if (cli_int(clients_s, 1, 256, &clients)) return cli_usage_error("bench", "--clients must be in 1..256");
    if (cli_int(tokens_s, 1, 1 << 16, &tokens)) return cli_usage_error("bench", "--tokens must be in 1..65536");
    if (cli_int(rounds_s, 1, 1000, &rounds)) return cli_usage_error("bench", "--rounds must be in 1..1000");
    parallel = clients;
    if (par_s && cli_int(par_s, 1, 1024, &parallel)) return cli_usage_error("bench", "--parallel must be in 1..1024");
    if (dur_s && cli_int(dur_s, 1, 86400, &duration)) return cli_usage_error("bench", "--duration must be in 1..86400 s");
    if (mem_s && cli_int(mem_s, 1, 1 << 24, &memory)) return cli_usage_error("bench", "--memory must be in 1..16777216 MB");
    if (threads_s && cli_int(threads_s, 1, 1024, &threads)) return cli_usage_error("bench", "--threads must be in 1..1024");
    if (url && (device_s || precision_s))
        return cli_usage_error("bench", "--device and --precision apply to the built-in server, not --url");
    int32_t device = TD_DEVICE_CPU, precision = 0;
    char device_desc[256];
    if ((r = cli_device("bench", device_s, precision_s, &device, &precision, device_desc, sizeof device_desc)) != 0)
        return r;
    signal(SIGPIPE, SIG_IGN);

    td_model *m = NULL;
    td_server *srv = NULL;
    td_status st = url ? TD_OK : cli_load_model(model_dir, 1, 1, NULL, &m);
    td_server_params p = td_server_default_params();
    p.port = 0;
    p.parallel = (int32_t)parallel;
    p.queue_max = (int32_t)(clients > parallel ? clients - parallel : 0) + 4;
    p.max_tokens = (int32_t)tokens;
    p.n_threads = (int32_t)threads;
    p.device = device;
    p.precision = precision;
    p.memory_mb = memory;
    p.max_connections = (int32_t)clients + 8;
    p.max_connections_per_ip = 0; /* every client is this process, on 127.0.0.1 */
    p.timeout_s = 600;
    p.model_name = name;
    if (st == TD_OK && !url) st = td_server_start(m, &p, &srv);
    if (st != TD_OK) {
        td_model_free(m);
        return cli_fail("bench", st);
    }
    bench b;
    memset(&b, 0, sizeof b);
    pthread_mutex_init(&b.mu, NULL);
    b.host = host;
    b.port = url ? url_port : td_server_port(srv);
    b.tokens = (int)tokens;
    b.model_name = name;
    b.ref = calloc((size_t)clients, sizeof *b.ref);
    int rc = 0;
    long long n_ref = 0, t_ref = 0;
    /* one stream: the prompts one after another (after one warm-up request, not counted) */
    long long ignored;
    json_decref(one_request(&b, 0, &ignored));
    double t0 = cli_now();
    for (int k = 0; b.ref && k < clients; k++) {
        if (!(b.ref[k] = one_request(&b, k, &n_ref))) {
            rc = cli_error("bench", "request %d failed", k);
            break;
        }
        t_ref += n_ref;
    }
    double single_s = cli_now() - t0;
    /* N streams at once */
    double conc_s = -1;
    long long conc_tokens = 0, conc_replies = 0, conc_mismatched = 0, conc_errors = 0;
    if (rc == 0) {
        b.rounds = (int)rounds;
        conc_s = run_clients(&b, (int)clients);
        conc_tokens = b.tokens_done, conc_replies = b.replies, conc_mismatched = b.mismatched, conc_errors = b.errors;
        if (conc_s < 0) rc = cli_error("bench", "cannot start the client threads");
    }
    double load_s = 0, rss0 = 0, rss1 = 0;
    sampler_arg sa = {0, 0};
    if (rc == 0 && duration > 0) {
        rss0 = rss_mb();
        sa.max_mb = rss0;
        pthread_t sampler;
        int sampling = pthread_create(&sampler, NULL, rss_sampler, &sa) == 0;
        b.rounds = (int)clients;
        b.deadline = cli_now() + (double)duration;
        load_s = run_clients(&b, (int)clients);
        sa.stop = 1;
        if (sampling) pthread_join(sampler, NULL);
        rss1 = rss_mb();
    }
    if (rc == 0) {
        double single_tps = (double)t_ref / single_s, conc_tps = (double)conc_tokens / conc_s;
        printf("{\"bench\": \"serve\", \"model\": \"%s\", \"arch\": \"%s\", \"kernels\": \"%s\", \"device\": \"%s\", "
               "\"precision\": \"%s\", \"params\": %lld, "
               "\"threads\": %lld, \"clients\": %lld, \"parallel\": %lld, \"tokens_per_reply\": %lld, "
               "\"single\": {\"requests\": %lld, \"tokens\": %lld, \"seconds\": %.3f, \"tokens_per_s\": %.2f}, "
               "\"concurrent\": {\"requests\": %lld, \"tokens\": %lld, \"seconds\": %.3f, \"tokens_per_s\": %.2f, "
               "\"errors\": %lld}, \"speedup\": %.2f, \"replies_mismatched\": %lld",
               url ? url : model_dir, m ? td_model_arch(m) : "", url ? "" : td_cpu_kernels(), url ? "" : device_desc,
               url ? "" : cli_precision_name(precision),
               m ? (long long)td_model_n_params(m) : 0LL, threads, clients, parallel,
               tokens, clients, t_ref, single_s, single_tps, conc_replies, conc_tokens, conc_s, conc_tps, conc_errors,
               conc_tps / single_tps, conc_mismatched);
        if (duration > 0)
            printf(", \"load\": {\"seconds\": %.1f, \"replies\": %lld, \"tokens\": %lld, \"tokens_per_s\": %.2f, "
                   "\"mismatched\": %lld, \"errors\": %lld, \"rss_mb_start\": %.1f, \"rss_mb_end\": %.1f, "
                   "\"rss_mb_max\": %.1f}",
                   load_s, b.replies, b.tokens_done, (double)b.tokens_done / load_s, b.mismatched, b.errors, rss0, rss1,
                   sa.max_mb);
        printf("}\n");
        if (conc_mismatched || conc_errors || (duration > 0 && (b.mismatched || b.errors))) rc = 1;
    }
    for (int k = 0; b.ref && k < clients; k++) json_decref(b.ref[k]);
    free(b.ref);
    pthread_mutex_destroy(&b.mu);
    td_server_free(srv);
    td_model_free(m);
    return rc;
}
