/* typedecide serve: the HTTP API and the web page (td_server), until SIGINT or SIGTERM. */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "commands.h"

static const char usage_text[] =
    "usage: typedecide serve --model M [--host 127.0.0.1] [--port 8080] [--api-key KEY] [--parallel N] [options]\n"
    "\n"
    "Serves the model over HTTP until interrupted (SIGINT, SIGTERM):\n"
    "  GET  /                      a web page: decisions (evidence + criteria, probability bars) and a chat\n"
    "  GET  /health                {\"status\":\"ok\", \"requests_admitted\", \"generating\"} (no API key needed)\n"
    "  GET  /v1/models             the served model (OpenAI's list)\n"
    "  POST /v1/decide             {\"evidence\", \"criteria\": [...]} -> the decisions `typedecide decide` prints,\n"
    "                              with \"prefill_tokens\" and \"prefix_cached\" (the last evidence stays prefilled)\n"
    "  POST /tokenize, /detokenize {\"prompt\"} or {\"messages\", ...} -> ids and the rendered prompt; {\"tokens\"} -> text\n"
    "  POST /v1/chat/completions, /v1/completions   OpenAI-compatible generation\n"
    "Errors are OpenAI's {\"error\": {\"message\", \"type\", \"param\", \"code\"}} with 400 (naming the field), 401, 404,\n"
    "405, 408, 413 or 503 (+ Retry-After). One line per request goes to stderr unless --quiet.\n"
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
    "  --timeout S           close connections idle for S seconds; a body must arrive within S (default 30)\n"
    "  --max-connections N   open connections at once (default 64)\n"
    "  --memory MB           memory budget of each context (default 1024): the generation engine's (KV rows of\n"
    "                        running requests and cached sessions, LRU-evicted) and /v1/decide's\n"
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

int cmd_serve(int argc, char **argv) {
    const char *model_dir = NULL, *adapter = NULL, *host = NULL, *port_s = NULL, *key = NULL, *name = NULL,
               *par_s = NULL, *queue_s = NULL, *body_s = NULL, *maxtok_s = NULL, *ctx_s = NULL, *timeout_s = NULL,
               *conn_s = NULL, *mem_s = NULL, *threads_s = NULL,
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
                            {"kv", 1, &kv_s, NULL},            {NULL, 0, NULL, NULL}};
    int r = cli_parse(argc, argv, opts, "serve", NULL, 0, NULL);
    if (r == 1) {
        fputs(usage_text, stdout);
        return 0;
    }
    if (r) return r;
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
                {mem_s, "--memory", 1, 1 << 24},       {threads_s, "--threads", 1, 1024}};
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
    if (host) p.host = host;
    if (key && !*key) return cli_usage_error("serve", "--api-key is empty");
    p.api_key = key;
    p.model_name = name;
    if (!quiet) p.log = log_line;
    p.allow_special_in_messages = allow_special;
    if (cli_kv("serve", kv_s, &p.kv_f16)) return 2;
    if ((r = cli_device("serve", device_s, precision_s, &p.device, &p.precision, NULL, 0)) != 0) return r;

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
