/* typedecide savings: the arithmetic of pruning the head to the option letters. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "commands.h"

static const char usage_text[] =
    "usage: typedecide savings (--model M | --preset NAME) [--letters K] [--tied | --untied] [--json]\n"
    "\n"
    "What a head pruned to K option letters saves: the head's parameters and share of the model, the download\n"
    "bytes removed at each tier (0 for a tied head: its table is also the input embedding, which every token\n"
    "still needs), and per criterion the head's FLOPs and the logit bytes, full vocabulary against K rows.\n"
    "Tiers: fp32 4 bytes, fp16 2, q8_0 8.5 bits (1.0625 bytes) and q4_0 4.5 bits (0.5625 bytes) per weight.\n"
    "\n"
    "  --model M      a model directory (config.json is read) or GGUF file\n"
    "  --preset NAME  a published shape (see typedecide synth --help)\n"
    "  --letters K    option letters kept (default 4)\n"
    "  --tied/--untied  override whether the head is tied to the embedding\n"
    "  --json         print one JSON object\n";

static void commas(char *out, size_t n, long long v) {
    char tmp[32];
    int l = snprintf(tmp, sizeof tmp, "%lld", v < 0 ? -v : v), o = 0;
    if (v < 0) out[o++] = '-';
    for (int i = 0; i < l && (size_t)o + 2 < n; i++) {
        out[o++] = tmp[i];
        if ((l - i - 1) % 3 == 0 && i + 1 < l) out[o++] = ',';
    }
    out[o] = 0;
}

int cmd_savings(int argc, char **argv) {
    const char *model = NULL, *preset = NULL, *letters_s = "4";
    int tied_f = 0, untied_f = 0, as_json = 0;
    const cli_opt opts[] = {{"model", 1, &model, NULL},    {"preset", 1, &preset, NULL}, {"letters", 1, &letters_s, NULL},
                            {"tied", 0, NULL, &tied_f},    {"untied", 0, NULL, &untied_f}, {"json", 0, NULL, &as_json},
                            {NULL, 0, NULL, NULL}};
    int r = cli_parse(argc, argv, opts, "savings", NULL, 0, NULL);
    if (r == 1) {
        fputs(usage_text, stdout);
        return 0;
    }
    if (r) return r;
    if (!!model + !!preset != 1) return cli_usage_error("savings", "give exactly one of --model or --preset");
    if (tied_f && untied_f) return cli_usage_error("savings", "choose one of --tied and --untied");
    long long K;
    if (cli_int(letters_s, 1, TD_DECIDE_MAX_OPTIONS, &K)) return cli_usage_error("savings", "--letters must be in 1..20");
    td_status st;
    int64_t params = 0;
    struct {
        int32_t n_vocab, n_embd;
        int tied;
    } c;
    if (preset) {
        const char *text = td_synth_preset_config(preset);
        if (!text) return cli_usage_error("savings", "unknown preset \"%s\" (known: %s)", preset, td_synth_preset_names());
        if ((st = td_config_shape(text, strlen(text), preset, &params, &c.n_vocab, &c.n_embd, &c.tied)) != TD_OK)
            return cli_fail("savings", st);
    } else {
        td_model *m;
        if ((st = cli_load_model(model, 0, 1, NULL, &m)) != TD_OK) return cli_fail("savings", st);
        char *js = NULL;
        td_model_describe(m, &js);
        json_t *o = json_loads(js, 0, NULL);
        td_free(js);
        memset(&c, 0, sizeof c);
        c.n_vocab = td_model_n_vocab(m);
        c.n_embd = td_model_n_embd(m);
        c.tied = json_is_true(json_object_get(o, "tied_embedding"));
        params = td_model_n_params(m);
        json_decref(o);
        td_model_free(m);
    }
    if (tied_f || untied_f) { /* what-if: the parameter count follows the head's storage */
        int64_t head = (int64_t)c.n_vocab * c.n_embd;
        if (c.tied && untied_f) params += head;
        if (!c.tied && tied_f) params -= head;
        c.tied = tied_f;
    }
    int64_t V = c.n_vocab, d = c.n_embd, head = V * d;
    static const struct {
        const char *name;
        double bytes;
    } tiers[] = {{"fp32", 4.0}, {"fp16", 2.0}, {"q8_0", 1.0625}, {"q4_0", 0.5625}};
    json_t *o = json_object(), *removed = json_object();
    json_object_set_new(o, "model", json_string(preset ? preset : model));
    json_object_set_new(o, "vocab_size", json_integer(V));
    json_object_set_new(o, "hidden_size", json_integer(d));
    json_object_set_new(o, "letters", json_integer(K));
    json_object_set_new(o, "tied", json_boolean(c.tied));
    json_object_set_new(o, "parameters", json_integer(params));
    json_object_set_new(o, "head_parameters", json_integer(head));
    json_object_set_new(o, "head_share", json_real((double)head / (double)params));
    for (int i = 0; i < 4; i++) /* removed: (V - K) rows of the head; none when the table is also the embedding */
        json_object_set_new(removed, tiers[i].name, json_integer(c.tied ? 0 : (json_int_t)((double)((V - K) * d) * tiers[i].bytes)));
    json_object_set_new(o, "download_bytes_removed", removed);
    json_object_set_new(o, "head_flop_per_criterion", json_integer(2 * head));
    json_object_set_new(o, "pruned_head_flop_per_criterion", json_integer(2 * K * d));
    json_object_set_new(o, "logit_bytes_fp32", json_integer(4 * V));
    json_object_set_new(o, "pruned_logit_bytes_fp32", json_integer(4 * K));
    if (as_json) {
        char *s = json_dumps(o, JSON_INDENT(1) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(10));
        puts(s);
        free(s);
        json_decref(o);
        return 0;
    }
    char a[32], b[32], x[32], y[32];
    commas(a, sizeof a, head);
    commas(b, sizeof b, params);
    printf("%s: vocab %lld x hidden %lld, %s head, K = %lld letters\n", preset ? preset : model, (long long)V, (long long)d,
           c.tied ? "tied" : "untied", K);
    printf("  head parameters          %s = %.2f%% of %s\n", a, 100.0 * (double)head / (double)params, b);
    for (int i = 0; i < 4; i++) {
        if (c.tied) {
            printf("  bytes removed at %-5s   0 (tied: the table is also the input embedding, needed for every token)\n", tiers[i].name);
            continue;
        }
        commas(x, sizeof x, (V - K) * d);
        commas(y, sizeof y, (long long)((double)((V - K) * d) * tiers[i].bytes));
        printf("  bytes removed at %-5s   %s x %g = %s\n", tiers[i].name, x, tiers[i].bytes, y);
    }
    commas(x, sizeof x, 2 * head);
    commas(y, sizeof y, 2 * K * d);
    printf("  head FLOP per criterion  %s -> %s\n", x, y);
    commas(x, sizeof x, 4 * V);
    commas(y, sizeof y, 4 * K);
    printf("  logit bytes (fp32)       %s B -> %s B\n", x, y);
    json_decref(o);
    return 0;
}
