/* typedecide serve: the HTTP API and the web page (td_server), until SIGINT or SIGTERM. */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "typedecide_server.h"
#include "commands.h"

static const char usage_text[] =
    "usage: typedecide serve --model M [--host 127.0.0.1] [--port 8080] [--api-key KEY] [--parallel N] [options]\n"
    "\n"
    "Serves the model over HTTP until interrupted (SIGINT, SIGTERM):\n"
    "  GET  /                      a web page: decisions (evidence + criteria, probability bars) and a chat\n"
    "  GET  /health                {\"status\":\"ok\", \"requests_admitted\", \"generating\", \"decide\"} (no API key needed)\n"
    "  GET  /v1/models             the served model (OpenAI's list)\n"
    "  POST /v1/decide             {\"evidence\", \"criteria\": [...]} -> the decisions `typedecide decide` prints,\n"
    "                              with \"prefill_tokens\" and \"prefix_cached\" (the last 16 evidences stay prefilled);\n"
    "                              concurrent requests share passes (\"pass_requests\"), each result as if alone\n"
    "  POST /tokenize, /detokenize {\"prompt\"} or {\"messages\", ...} -> ids and the rendered prompt; {\"tokens\"} -> text\n"
    "  POST /v1/chat/completions, /v1/completions   OpenAI-compatible generation\n"
    "Errors are OpenAI's {\"error\": {\"message\", \"type\", \"param\", \"code\"}} with 400 (naming the field), 401, 404,\n"
    "405, 408, 413 or 503 (+ Retry-After). One line per request goes to stderr unless --quiet.\n"
    "Every GET path also answers HEAD (headers only); OPTIONS on a path answers 204 with 'Allow' (and, for an origin\n"
    "given to --cors-origin, the CORS preflight's headers).\n"
    "\n"
    "Connections: an open connection costs a socket, not a thread (a few threads poll them all; a request runs on a\n"
    "thread of its own only while it is worked on). A request's headers must arrive within --timeout seconds of the\n"
    "connection's start (or of the end of its previous reply), and then its body within --timeout: a client past\n"
    "either (one byte a second, a body that stops short) gets a 408 JSON error and the connection is closed. An idle\n"
    "connection is closed after --timeout seconds without a word. Conflicting framing is refused with 400 and the\n"
    "connection closed: two Content-Length headers with different values, Content-Length with Transfer-Encoding, a\n"
    "Content-Length that is not a number; a Transfer-Encoding other than chunked gets 501.\n"
    "\n"
    "  --model M             Hugging Face model directory or GGUF file (with a tokenizer)\n"
    "  --adapter DIR         PEFT LoRA adapter, merged at load\n"
    "  --host ADDR           IP address to listen on (default 127.0.0.1; 0.0.0.0 for every interface)\n"
    "  --port N              port (default 8080; 0 = any free port, printed on stderr)\n"
    "  --api-key KEY         require 'Authorization: Bearer KEY' on every path but /health and the page\n"
    "  --name NAME           the model's id in /v1/models and requests (default: the model path's last part)\n"
    "  --parallel N          requests worked on at once: sequences generated together (default 4)\n"
    "  --queue N             admitted requests waiting beyond those; more get 503 (default 64)\n"
    "  --max-body BYTES      largest request body (default 1048576; larger: 413)\n"
    "  --max-tokens N        most new tokens per request (default 4096)\n"
    "  --ctx N               positions per request, prompt + new tokens (default: the model's trained context)\n"
    "  --timeout S           a request's headers, then its body, must each arrive within S seconds (else 408 and\n"
    "                        close); idle connections are closed after S seconds (default 30)\n"
    "  --max-connections N   open connections at once, idle ones included (default 1024, lowered to fit the\n"
    "                        open-file limit, ulimit -n); more wait in the listen queue\n"
    "  --max-connections-per-ip N  open connections from one client address; more are closed at once\n"
    "                        (default 16; 0: no cap). Behind a reverse proxy every client has the proxy's\n"
    "                        address: raise it, or 0\n"
    "  --cors-origin ORIGIN  let a web page from ORIGIN (scheme://host[:port], or * for any) call the API from a\n"
    "                        browser: its OPTIONS preflight gets 204 with Access-Control-Allow-Origin/Methods/\n"
    "                        Headers (Authorization, Content-Type and those asked for) and Max-Age 600, and every\n"
    "                        reply to it Access-Control-Allow-Origin. Repeatable, or a comma list. Default: off (no\n"
    "                        CORS header for any origin: browsers refuse cross-origin calls)\n"
    "  --memory MB           memory budget of each context (default 1024): the generation engine's (KV rows of\n"
    "                        running requests and cached sessions, LRU-evicted) and /v1/decide's (by default\n"
    "                        with --device cuda a quarter of the GPU's free memory: how many criteria share a pass)\n"
    "  --kv f32|f16          KV cache precision (default f32; f16 halves each KV row: more cached rows per budget)\n"
    "  --threads N           worker threads (default: all cores); results do not depend on it\n"
    "  --device cpu|cuda     where to compute (default cpu; cuda: a build with -DTD_CUDA=ON and an NVIDIA GPU)\n"
    CLI_PRECISION_HELP
    "  --allow-special-in-messages  chat messages may hold special tokens (\"<|im_start|>system\" typed by a user\n"
    "                        becomes that token, as Hugging Face does): only for trusted clients. By default message\n"
    "                        content is tokenized as text and special tokens come only from the template, so a user\n"
    "                        cannot forge a system turn (/v1/chat/completions and /tokenize alike)\n"
    "  --quiet               no request log\n";

static void log_line(void *user, int level, const char *message) {
    (void)user;
    fprintf(stderr, "typedecide serve: %s%s\n", level ? "warning: " : "", message);
}

/* Every --cors-origin given (cli_parse keeps the last one), joined with commas: a new string (free). */
static char *cors_list(int argc, char **argv) {
    size_t len = 1;
    for (int i = 1; i < argc; i++) len += strlen(argv[i]) + 1;
    char *out = calloc(1, len);
    if (!out) return NULL;
    for (int i = 1; i < argc; i++) {
        const char *v = NULL;
        if (strcmp(argv[i], "--") == 0) break;
        if (strcmp(argv[i], "--cors-origin") == 0 && i + 1 < argc) v = argv[++i];
        else if (strncmp(argv[i], "--cors-origin=", 14) == 0) v = argv[i] + 14;
        if (!v) continue;
        if (*out) strcat(out, ",");
        strcat(out, v);
    }
    return out;
}

int cmd_serve(int argc, char **argv) {
    const char *model_dir = NULL, *adapter = NULL, *host = NULL, *port_s = NULL, *key = NULL, *name = NULL,
               *par_s = NULL, *queue_s = NULL, *body_s = NULL, *maxtok_s = NULL, *ctx_s = NULL, *timeout_s = NULL,
               *conn_s = NULL, *mem_s = NULL, *threads_s = NULL, *per_ip_s = NULL, *cors_s = NULL,
               *device_s = NULL, *precision_s = NULL, *kv_s = NULL;
    int quiet = 0, allow_special = 0;
    const cli_opt opts[] = {{"model", 1, &model_dir, NULL},    {"adapter", 1, &adapter, NULL},
                            {"host", 1, &host, NULL},          {"port", 1, &port_s, NULL},
                            {"api-key", 1, &key, NULL},        {"name", 1, &name, NULL},
                            {"parallel", 1, &par_s, NULL},     {"queue", 1, &queue_s, NULL},
                            {"max-body", 1, &body_s, NULL},    {"max-tokens", 1, &maxtok_s, NULL},
                            {"ctx", 1, &ctx_s, NULL},          {"timeout", 1, &timeout_s, NULL},
                            {"max-connections", 1, &conn_s, NULL}, {"memory", 1, &mem_s, NULL},
                            {"threads", 1, &threads_s, NULL},  {"quiet", 0, NULL, &quiet},
                            {"allow-special-in-messages", 0, NULL, &allow_special},
                            {"device", 1, &device_s, NULL},    {"precision", 1, &precision_s, NULL},
                            {"kv", 1, &kv_s, NULL},
                            {"max-connections-per-ip", 1, &per_ip_s, NULL}, {"cors-origin", 1, &cors_s, NULL},
                            {NULL, 0, NULL, NULL}};
    int r = cli_parse(argc, argv, opts, "serve", NULL, 0, NULL);
    if (r == 1) {
        fputs(usage_text, stdout);
        return 0;
    }
    if (r) return r;
#ifndef TD_HAVE_SERVER /* configured where libmicrohttpd was not found: said before any model is loaded */
    return cli_error("serve", "this typedecide was built without the HTTP server (libmicrohttpd was not found when it "
                              "was configured: install libmicrohttpd-dev and configure again)");
#endif
    if (!model_dir) return cli_usage_error("serve", "--model is required");
    td_server_params p = td_server_default_params();
    long long v;
    struct {
        const char *s, *name;
        long long lo, hi;
    } nums[] = {{port_s, "--port", 0, 65535},          {par_s, "--parallel", 1, 1024},
                {queue_s, "--queue", 0, 1 << 20},      {body_s, "--max-body", 1, (long long)1 << 34},
                {maxtok_s, "--max-tokens", 1, 1 << 24}, {ctx_s, "--ctx", 1, 1 << 24},
                {timeout_s, "--timeout", 1, 86400},    {conn_s, "--max-connections", 1, 65536},
                {mem_s, "--memory", 1, 1 << 24},       {threads_s, "--threads", 1, 1024},
                {per_ip_s, "--max-connections-per-ip", 0, 65536}};
    long long val[sizeof nums / sizeof nums[0]];
    for (size_t i = 0; i < sizeof nums / sizeof nums[0]; i++) {
        val[i] = -1;
        if (!nums[i].s) continue;
        if (cli_int(nums[i].s, nums[i].lo, nums[i].hi, &v))
            return cli_usage_error("serve", "%s must be an integer in %lld..%lld", nums[i].name, nums[i].lo, nums[i].hi);
        val[i] = v;
    }
    if (val[0] >= 0) p.port = (int32_t)val[0];
    if (val[1] >= 0) p.parallel = (int32_t)val[1];
    if (val[2] >= 0) p.queue_max = (int32_t)val[2];
    if (val[3] >= 0) p.max_body = val[3];
    if (val[4] >= 0) p.max_tokens = (int32_t)val[4];
    if (val[5] >= 0) p.n_ctx = (int32_t)val[5];
    if (val[6] >= 0) p.timeout_s = (int32_t)val[6];
    if (val[7] >= 0) p.max_connections = (int32_t)val[7];
    if (val[8] >= 0) p.memory_mb = val[8];
    p.n_threads = val[9] >= 0 ? (int32_t)val[9] : cli_default_threads();
    if (val[10] >= 0) p.max_connections_per_ip = (int32_t)val[10];

    if (host) p.host = host;
    if (key && !*key) return cli_usage_error("serve", "--api-key is empty");
    p.api_key = key;
    p.model_name = name;
    if (!quiet) p.log = log_line;
    p.allow_special_in_messages = allow_special;
    if (cli_kv("serve", kv_s, &p.kv_f16)) return 2;
    if ((r = cli_device("serve", device_s, precision_s, &p.device, &p.precision, NULL, 0)) != 0) return r;

    char *cors = NULL;
    if (cors_s && !(cors = cors_list(argc, argv))) return cli_usage_error("serve", "out of memory");
    p.cors_origins = cors;

    /* the server's threads inherit this mask: SIGINT and SIGTERM reach sigwait below, and a client that goes away
     * mid-reply must not kill the process (SIGPIPE) */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);

    td_model *m = NULL;
    td_server *srv = NULL;
    td_status st = cli_load_model(model_dir, 1, quiet, adapter, &m);
    if (st == TD_OK) st = td_server_start(m, &p, &srv);
    free(cors); /* the server keeps its own copies */
    if (st != TD_OK) {
        td_model_free(m);
        return cli_fail("serve", st);
    }
    fprintf(stderr, "typedecide serve: listening on http://%s:%d/\n", p.host, td_server_port(srv));
    int sig = 0;
    sigwait(&set, &sig);
    if (!quiet) fprintf(stderr, "typedecide serve: %s, stopping\n", sig == SIGINT ? "interrupted" : "terminated");
    td_server_free(srv);
    td_model_free(m);
    return 0;
}
