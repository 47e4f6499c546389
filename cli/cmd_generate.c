/* typedecide generate: continue a prompt with the one sampler chain and stop rules (td_gen), streaming text or
 * printing ids. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "commands.h"
#include "sampling.h"

static const char usage_text[] =
    "usage: typedecide generate --model M (--prompt TEXT | --ids 1,2,3) [-n N] [options]\n"
    "\n"
    "Continues the prompt with the model's sampling defaults (generation_config.json; greedy when the model has\n"
    "none) unless flags override them, and stops at the model's stop tokens (generation_config.json eos_token_id\n"
    "and tokenizer_config.json eos_token), at a --stop string or after N tokens. With --prompt the new text is\n"
    "streamed to stdout (a stop string is never printed: text that may begin one is held back until it cannot);\n"
    "with --ids the new ids are printed as one JSON array (no tokenizer needed).\n"
    "\n"
    "  --model M           Hugging Face model directory or GGUF file\n"
    "  --adapter DIR       PEFT LoRA adapter, merged at load\n"
    "  --prompt TEXT       prompt text (added tokens such as <|im_start|> are recognised; with --chat, see below)\n"
    "  --ids LIST          prompt as comma-separated token ids\n"
    "  -n N                most tokens to generate (default 32)\n"
    "  --chat              render the prompt as one user turn with the model's chat template (thinking off)\n"
    "  --think             with --chat: thinking on\n"
    "  --allow-special-in-messages  with --chat: special-token text in the prompt (\"<|im_start|>system\") becomes\n"
    "                      those tokens, as Hugging Face does; by default a message is text, and special tokens come\n"
    "                      only from the template (a user cannot forge a turn)\n"
    "  --stop STR          stop before this text (one string)\n"
    "  --ignore-eos        do not stop at the model's stop tokens\n"
    "  --ctx N             allow up to N positions (default: the model's trained context; beyond it, a warning)\n"
    "  --threads N         worker threads (default: all cores)\n"
    "  --kv f32|f16        KV cache precision (default f32; f16 halves its memory)\n"
    "  --device cpu|cuda   where to compute (default cpu; cuda: a build with -DTD_CUDA=ON and an NVIDIA GPU)\n"
    CLI_PRECISION_HELP
    "  --stats             print prefill/decode speed to stderr\n"
    "  --verbose           print the effective sampler, the stop ids and the finish reason to stderr\n"
    "\n";

int cmd_generate(int argc, char **argv) {
    const char *model_dir = NULL, *prompt = NULL, *ids_s = NULL, *n_s = "32", *threads_s = NULL, *adapter = NULL,
               *ctx_s = NULL, *stop = NULL, *kv_s = NULL,
               *device_s = NULL, *precision_s = NULL;
    int chat = 0, think = 0, ignore_eos = 0, stats = 0, verbose = 0, allow_special = 0;
    cli_sampling sm = {0};
    const cli_opt opts[] = {{"model", 1, &model_dir, NULL},   {"prompt", 1, &prompt, NULL},
                            {"ids", 1, &ids_s, NULL},         {"n", 1, &n_s, NULL},
                            {"chat", 0, NULL, &chat},         {"think", 0, NULL, &think},
                            {"allow-special-in-messages", 0, NULL, &allow_special},
                            {"stop", 1, &stop, NULL},         {"ignore-eos", 0, NULL, &ignore_eos},
                            {"threads", 1, &threads_s, NULL}, {"stats", 0, NULL, &stats},
                            {"verbose", 0, NULL, &verbose},   {"adapter", 1, &adapter, NULL},
                            {"ctx", 1, &ctx_s, NULL},         {"kv", 1, &kv_s, NULL},
                            {"device", 1, &device_s, NULL},   {"precision", 1, &precision_s, NULL},
                            CLI_SAMPLING_OPTS(sm),
                            {NULL, 0, NULL, NULL}};
    int r = cli_parse(argc, argv, opts, "generate", NULL, 0, NULL);
    if (r == 1) {
        fputs(usage_text, stdout);
        fputs(cli_sampling_help, stdout);
        return 0;
    }
    if (r) return r;
    if (!model_dir) return cli_usage_error("generate", "--model is required");
    if (!!prompt + !!ids_s != 1) return cli_usage_error("generate", "give exactly one of --prompt or --ids");
    long long n_new, threads = cli_default_threads();
    if (cli_int(n_s, 0, 1 << 20, &n_new)) return cli_usage_error("generate", "-n must be an integer in 0..1048576");
    if (sm.temperature) { /* checked before loading: a bad flag costs nothing */
        double t;
        if (cli_double(sm.temperature, &t) || t < 0) return cli_usage_error("generate", "--temperature must be >= 0");
    }
    long long ctx_max = 0;
    if (ctx_s && cli_int(ctx_s, 1, 1 << 24, &ctx_max)) return cli_usage_error("generate", "--ctx must be in 1..16777216");
    if (threads_s && cli_int(threads_s, 1, 1024, &threads))
        return cli_usage_error("generate", "--threads must be an integer in 1..1024");
    if (prompt && !*prompt) return cli_usage_error("generate", "the prompt is empty");
    if (chat && !prompt) return cli_usage_error("generate", "--chat needs --prompt");
    if (think && !chat) return cli_usage_error("generate", "--think needs --chat");
    if (allow_special && !chat)
        return cli_usage_error("generate", "--allow-special-in-messages needs --chat (a plain --prompt parses them)");
    if (stop && !*stop) return cli_usage_error("generate", "--stop is empty");
    int32_t kv_f16 = 0;
    if (cli_kv("generate", kv_s, &kv_f16)) return 2;
    int32_t device = TD_DEVICE_CPU, precision = 0;
    if ((r = cli_device("generate", device_s, precision_s, &device, &precision, NULL, 0)) != 0) return r;

    int rc = 0;
    td_model *m = NULL;
    td_gen *g = NULL;
    int32_t *ids = NULL;
    size_t n_ids = 0;
    char *text = NULL;
    cli_gen_result res = {0};
    td_status st = cli_load_model(model_dir, prompt != NULL, 0, adapter, &m);
    if (st != TD_OK) {
        rc = cli_fail("generate", st);
        goto done;
    }
    if (!td_model_can_generate(m)) {
        rc = cli_error("generate", "%s: the output head was pruned to the option letters (slot map %s): the model can "
                                   "decide but not generate",
                       model_dir, td_model_slot_map(m));
        goto done;
    }
    td_sampler_params sp;
    if ((rc = cli_sampling_params("generate", &sm, m, &sp)) != 0) goto done;
    const td_tokenizer *tok = td_model_tokenizer(m);
    if (prompt) {
        if (!tok) {
            rc = cli_error("generate", "%s has no tokenizer.json; use --ids", model_dir);
            goto done;
        }
        if (chat) {
            td_chat_message msg = {"user", prompt, NULL, NULL};
            td_chat_params cp = td_chat_default_params();
            cp.enable_thinking = think;
            if ((st = td_chat_tokenize(m, &msg, 1, &cp, allow_special ? TD_CHAT_ALLOW_SPECIAL : 0, NULL, &ids,
                                       &n_ids)) != TD_OK) {
                rc = cli_fail("generate", st);
                goto done;
            }
        } else {
            /* a plain prompt starts with the tokenizer's BOS where it has one (Llama, Gemma) */
            unsigned flags = TD_TOKENIZE_PARSE_SPECIAL | TD_TOKENIZE_ADD_BOS;
            if ((st = td_tokenize(tok, prompt, strlen(prompt), flags, &ids, &n_ids)) != TD_OK) {
                rc = cli_fail("generate", st);
                goto done;
            }
        }
    } else if (cli_ids(ids_s, &ids, &n_ids)) {
        rc = cli_usage_error("generate", "--ids: expected comma-separated integers");
        goto done;
    }
    if (n_ids == 0) {
        rc = cli_usage_error("generate", "the prompt is empty");
        goto done;
    }
    int32_t V = td_model_n_vocab(m);
    for (size_t i = 0; i < n_ids; i++)
        if (ids[i] < 0 || ids[i] >= V) {
            rc = cli_error("generate", "prompt id %d (position %zu) is outside the vocabulary 0..%d", ids[i], i, V - 1);
            goto done;
        }
    if ((rc = cli_check_context("generate", m, (long long)n_ids + n_new, ctx_max, "the prompt + -n")) != 0) goto done;
    td_gen_params gp = td_gen_default_params();
    gp.n_ctx = (int32_t)(n_ids + (size_t)n_new + 1);
    gp.cache_bytes = INT64_MAX;
    gp.max_sequences = 2;
    gp.max_running = 1;
    gp.n_batch = n_ids < 256 ? (int32_t)n_ids : 256;
    gp.n_threads = (int32_t)threads;
    gp.kv_f16 = kv_f16;
    gp.device = device;
    gp.precision = precision;
    if ((st = td_gen_new(m, &gp, &g)) != TD_OK) {
        rc = cli_fail("generate", st);
        goto done;
    }
    if (verbose) {
        char *js = NULL;
        if (td_sampler_params_json(&sp, &js) == TD_OK) fprintf(stderr, "typedecide generate: sampler %s\n", js);
        td_free(js);
        int n_stop;
        const int32_t *stops = td_model_stop_ids(m, &n_stop);
        fprintf(stderr, "typedecide generate: stop ids [");
        for (int i = 0; i < n_stop; i++) fprintf(stderr, "%s%d", i ? ", " : "", stops[i]);
        fprintf(stderr, "]%s%s%s\n", ignore_eos ? " (ignored: --ignore-eos)" : "", stop ? ", stop string " : "",
                stop ? stop : "");
    }
    td_gen_request rq = td_gen_default_request();
    rq.prompt = ids;
    rq.n_prompt = (int32_t)n_ids;
    rq.sampler = sp;
    rq.max_tokens = (int32_t)n_new;
    rq.ignore_eos = ignore_eos;
    rq.stop = &stop;
    rq.n_stop = stop ? 1 : 0;
    rq.cache = 0;
    if (n_new == 0) { /* nothing to generate */
        if (!prompt) cli_print_ids(NULL, 0);
        else putchar('\n');
        goto done;
    }
    if ((rc = cli_gen_run("generate", g, &rq, prompt != NULL, &res)) != 0) goto done;
    if (prompt) putchar('\n');
    else cli_print_ids(res.ids, (size_t)(res.n_ids - (res.stop_id >= 0)));
    int32_t n_out = res.n_ids - (res.stop_id >= 0);
    if (verbose)
        fprintf(stderr, "typedecide generate: finish %s, %d tokens\n", td_gen_finish_str(res.finish), n_out);
    if (stats) {
        double pre = res.ms_prefill / 1e3, dec = res.ms_decode / 1e3;
        fprintf(stderr,
                "typedecide generate: prefill %zu tokens in %.3f s (%.1f tok/s), decode %d tokens in %.3f s (%.1f "
                "tok/s)\n",
                n_ids, pre, pre > 0 ? (double)n_ids / pre : 0.0, n_out, dec,
                res.n_ids > 1 && dec > 0 ? (double)(res.n_ids - 1) / dec : 0.0);
    }
done:
    cli_gen_result_free(&res);
    td_free(text);
    free(ids);
    td_gen_free(g);
    td_model_free(m);
    return rc;
}
