/* typedecide chat: a conversation with the model, interactive in a terminal or one user turn per line of a pipe,
 * every turn reusing the KV of the conversation so far (td_gen sessions). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "commands.h"
#include "sampling.h"

static const char usage_text[] =
    "usage: typedecide chat --model M [--system TEXT] [--no-think] [-n N] [options]\n"
    "\n"
    "A conversation rendered with the model's chat template (Qwen3's and Qwen3.5's are supported; any other\n"
    "template is refused). Each turn streams the answer and then prints to stderr the tokens per second, the time\n"
    "to the first token and how many prompt tokens were reused from the conversation's cached KV (only the new\n"
    "turn is prefilled; on Qwen3.5 from a DeltaNet snapshot at the turn boundary).\n"
    "\n"
    "In a terminal, type a message and Enter. Commands:\n"
    "  /reset          start a new conversation (the system prompt stays)\n"
    "  /system TEXT    set the system prompt and start a new conversation (/system alone removes it)\n"
    "  /think on|off   thinking on or off from the next turn\n"
    "  /quit           leave (or end of input)\n"
    "Piped (standard input not a terminal): every line is one user turn (empty lines are skipped; the commands\n"
    "above work too); each answer is printed on stdout followed by an empty line, the statistics go to stderr.\n"
    "A line holds at most 64 MiB; a line holding a NUL byte is refused (as the server refuses it).\n"
    "\n"
    "  --model M         Hugging Face model directory or GGUF file (with a chat template)\n"
    "  --adapter DIR     PEFT LoRA adapter, merged at load\n"
    "  --system TEXT     system prompt\n"
    "  --no-think        thinking off (default on)\n"
    "  --allow-special-in-messages  special-token text typed in a message (\"<|im_start|>system\") becomes those\n"
    "                    tokens, as Hugging Face's apply_chat_template does; by default a message is text and special\n"
    "                    tokens come only from the template, so a message cannot forge a turn of another role\n"
    "  -n N              most tokens per answer (default 1024)\n"
    "  --ctx N           KV rows for the conversation (default 8192)\n"
    "  --threads N       worker threads (default: all cores)\n"
    "  --kv f32|f16      KV cache precision (default f32; f16 halves its memory)\n"
    "  --device cpu|cuda where to compute (default cpu; cuda: a build with -DTD_CUDA=ON and an NVIDIA GPU)\n"
    CLI_PRECISION_HELP
    "  --quiet           no statistics\n"
    "  --verbose         print the effective sampler and each turn's finish reason to stderr\n"
    "\n";

typedef struct history {
    td_chat_message *m;
    char **owned; /* contents, one per message */
    int32_t n, cap;
} history;

static int push(history *h, const char *role, const char *content, size_t len) {
    if (h->n == h->cap) {
        int32_t cap = h->cap ? h->cap * 2 : 16;
        td_chat_message *m = realloc(h->m, (size_t)cap * sizeof *m);
        if (!m) return -1;
        h->m = m;
        char **o = realloc(h->owned, (size_t)cap * sizeof *o);
        if (!o) return -1;
        h->owned = o;
        h->cap = cap;
    }
    char *c = malloc(len + 1);
    if (!c) return -1;
    memcpy(c, content, len);
    c[len] = 0;
    h->owned[h->n] = c;
    h->m[h->n] = (td_chat_message){role, c, NULL, NULL};
    h->n++;
    return 0;
}

static void clear(history *h, int keep_system) {
    int32_t k = keep_system && h->n && strcmp(h->m[0].role, "system") == 0 ? 1 : 0;
    for (int32_t i = k; i < h->n; i++) free(h->owned[i]);
    h->n = k;
}

int cmd_chat(int argc, char **argv) {
    const char *model_dir = NULL, *system = NULL, *n_s = "1024", *ctx_s = "8192", *threads_s = NULL, *adapter = NULL,
               *kv_s = NULL, *device_s = NULL, *precision_s = NULL;
    int no_think = 0, quiet = 0, verbose = 0, allow_special = 0;
    cli_sampling sm = {0};
    const cli_opt opts[] = {{"model", 1, &model_dir, NULL}, {"system", 1, &system, NULL},
                            {"no-think", 0, NULL, &no_think}, {"n", 1, &n_s, NULL},
                            {"ctx", 1, &ctx_s, NULL},       {"threads", 1, &threads_s, NULL},
                            {"adapter", 1, &adapter, NULL}, {"quiet", 0, NULL, &quiet},
                            {"verbose", 0, NULL, &verbose}, {"kv", 1, &kv_s, NULL},
                            {"device", 1, &device_s, NULL}, {"precision", 1, &precision_s, NULL},
                            {"allow-special-in-messages", 0, NULL, &allow_special},
                            CLI_SAMPLING_OPTS(sm),
                            {NULL, 0, NULL, NULL}};
    int r = cli_parse(argc, argv, opts, "chat", NULL, 0, NULL);
    if (r == 1) {
        fputs(usage_text, stdout);
        fputs(cli_sampling_help, stdout);
        return 0;
    }
    if (r) return r;
    if (!model_dir) return cli_usage_error("chat", "--model is required");
    long long n_max, n_ctx, threads = cli_default_threads();
    if (cli_int(n_s, 1, 1 << 20, &n_max)) return cli_usage_error("chat", "-n must be an integer in 1..1048576");
    if (cli_int(ctx_s, 64, 1 << 24, &n_ctx)) return cli_usage_error("chat", "--ctx must be an integer in 64..16777216");
    if (threads_s && cli_int(threads_s, 1, 1024, &threads))
        return cli_usage_error("chat", "--threads must be an integer in 1..1024");
    int32_t kv_f16 = 0;
    if (cli_kv("chat", kv_s, &kv_f16)) return 2;
    int32_t device = TD_DEVICE_CPU, precision = 0;
    if ((r = cli_device("chat", device_s, precision_s, &device, &precision, NULL, 0)) != 0) return r;
    int tty = isatty(0);
    int think = !no_think, rc = 0;
    td_model *m = NULL;
    td_gen *g = NULL;
    history h = {0};
    char *line = NULL;
    size_t cap = 0;
    long lineno = 0;
    td_status st = cli_load_model(model_dir, 1, !tty && !verbose, adapter, &m);
    if (st != TD_OK) {
        rc = cli_fail("chat", st);
        goto done;
    }
    if (!td_model_tokenizer(m)) {
        rc = cli_error("chat", "%s has no tokenizer", model_dir);
        goto done;
    }
    if (!td_model_can_generate(m)) {
        rc = cli_error("chat", "%s: the output head was pruned to the option letters: the model cannot generate",
                       model_dir);
        goto done;
    }
    const char *family = td_model_chat_family(m, &st);
    if (!family) {
        rc = cli_fail("chat", st);
        goto done;
    }
    td_sampler_params sp;
    if ((rc = cli_sampling_params("chat", &sm, m, &sp)) != 0) goto done;
    if (verbose) {
        char *js = NULL;
        if (td_sampler_params_json(&sp, &js) == TD_OK) fprintf(stderr, "typedecide chat: sampler %s\n", js);
        td_free(js);
        fprintf(stderr, "typedecide chat: template %s\n", family);
    }
    td_gen_params gp = td_gen_default_params();
    gp.n_ctx = (int32_t)n_ctx;
    gp.cache_bytes = INT64_MAX;
    gp.max_sequences = 8;
    gp.max_running = 1;
    gp.n_threads = (int32_t)threads;
    gp.kv_f16 = kv_f16;
    gp.device = device;
    gp.precision = precision;
    if ((st = td_gen_new(m, &gp, &g)) != TD_OK) {
        rc = cli_fail("chat", st);
        goto done;
    }
    if (system && push(&h, "system", system, strlen(system))) {
        rc = cli_error("chat", "out of memory");
        goto done;
    }
    if (tty)
        fprintf(stderr, "typedecide chat: %s (%s template, thinking %s). /reset /system TEXT /think on|off /quit\n",
                model_dir, family, think ? "on" : "off");
    for (;;) {
        if (tty) {
            fputs("> ", stdout);
            fflush(stdout);
        }
        ssize_t len = cli_read_line(stdin, &line, &cap, CLI_MAX_LINE);
        if (len == -1) break;
        if (len < 0) {
            rc = cli_line_error("chat", "-", 0, len, CLI_MAX_LINE);
            goto done;
        }
        lineno++;
        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r')) line[--len] = 0;
        if (len == 0) continue;
        if (strlen(line) != (size_t)len) { /* a message is a C string: a NUL would cut it (the server refuses it too) */
            rc = cli_error("chat", "line %ld holds a NUL character (byte %zu): a message cannot contain one", lineno,
                           strlen(line) + 1);
            goto done;
        }
        if (line[0] == '/') {
            if (strcmp(line, "/quit") == 0 || strcmp(line, "/exit") == 0) break;
            if (strcmp(line, "/reset") == 0) {
                clear(&h, 1);
                td_gen_clear_cache(g);
                if (tty) fprintf(stderr, "(new conversation)\n");
            } else if (strncmp(line, "/system", 7) == 0 && (line[7] == ' ' || line[7] == 0)) {
                const char *t = line[7] ? line + 8 : "";
                clear(&h, 0);
                td_gen_clear_cache(g);
                if (*t && push(&h, "system", t, strlen(t))) {
                    rc = cli_error("chat", "out of memory");
                    goto done;
                }
                if (tty) fprintf(stderr, "(system prompt %s; new conversation)\n", *t ? "set" : "removed");
            } else if (strcmp(line, "/think on") == 0 || strcmp(line, "/think off") == 0) {
                think = strcmp(line, "/think on") == 0;
                if (tty) fprintf(stderr, "(thinking %s)\n", think ? "on" : "off");
            } else {
                fprintf(stderr, "typedecide chat: unknown command %s (/reset, /system TEXT, /think on|off, /quit)\n",
                        line);
            }
            continue;
        }
        if (push(&h, "user", line, (size_t)len)) {
            rc = cli_error("chat", "out of memory");
            goto done;
        }
        td_chat_params cp = td_chat_default_params();
        cp.enable_thinking = think;
        int32_t *ids = NULL;
        size_t n_ids = 0;
        st = td_chat_tokenize(m, h.m, h.n, &cp, allow_special ? TD_CHAT_ALLOW_SPECIAL : 0, NULL, &ids, &n_ids);
        if (st != TD_OK) {
            rc = cli_fail("chat", st);
            goto done;
        }
        long long room = n_ctx - (long long)n_ids;
        if (room < 1) {
            td_free(ids);
            rc = cli_error("chat", "the conversation (%zu tokens) fills the context (--ctx %lld): /reset or a larger --ctx",
                           n_ids, n_ctx);
            goto done;
        }
        td_gen_request rq = td_gen_default_request();
        rq.prompt = ids;
        rq.n_prompt = (int32_t)n_ids;
        rq.sampler = sp;
        rq.max_tokens = (int32_t)(room < n_max ? room : n_max);
        cli_gen_result res;
        int e = cli_gen_run("chat", g, &rq, 1, &res);
        td_free(ids);
        if (e) {
            cli_gen_result_free(&res);
            rc = e;
            goto done;
        }
        fputs(tty ? "\n" : "\n\n", stdout);
        fflush(stdout);
        if (push(&h, "assistant", res.text, res.n_text)) {
            cli_gen_result_free(&res);
            rc = cli_error("chat", "out of memory");
            goto done;
        }
        int32_t n_out = res.n_ids - (res.stop_id >= 0);
        if (!quiet) {
            double dec = res.ms_decode / 1e3;
            fprintf(stderr,
                    "[%d tokens, %.1f tok/s, first token after %.0f ms, prompt %d tokens of which %d reused%s%s]\n",
                    n_out, res.n_ids > 1 && dec > 0 ? (res.n_ids - 1) / dec : 0.0, res.ms_first_token, res.n_prompt,
                    res.n_reused, verbose ? ", finish " : "", verbose ? td_gen_finish_str(res.finish) : "");
        }
        cli_gen_result_free(&res);
    }
done:
    clear(&h, 0);
    free(h.m);
    free(h.owned);
    free(line);
    td_gen_free(g);
    td_model_free(m);
    return rc;
}
