/* typedecide generate: continue a prompt, greedy (default) or sampled, streaming text or printing ids. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "commands.h"

static const char usage_text[] =
    "usage: typedecide generate --model DIR (--prompt TEXT | --ids 1,2,3) [-n N] [options]\n"
    "\n"
    "Continues the prompt. Greedy by default (temperature 0). With --prompt the new text is streamed to\n"
    "stdout; with --ids the new ids are printed as one JSON array (no tokenizer needed).\n"
    "\n"
    "  --model DIR         Hugging Face model directory\n"
    "  --adapter DIR       PEFT LoRA adapter, merged at load\n"
    "  --prompt TEXT       prompt text (added tokens such as <|im_start|> are recognised)\n"
    "  --ids LIST          prompt as comma-separated token ids\n"
    "  -n N                tokens to generate (default 32)\n"
    "  --chat              wrap the prompt in the model's ChatML turn (thinking disabled)\n"
    "  --temperature T     0 = greedy (default); > 0 samples\n"
    "  --top-k K           sample among the K most likely tokens (default 0 = all)\n"
    "  --top-p P           nucleus sampling threshold (default 1)\n"
    "  --seed S            sampling seed (default 1)\n"
    "  --ignore-eos        do not stop at the model's stop tokens\n"
    "  --ctx N             allow up to N positions (default: the model's trained context; beyond it, a warning)\n"
    "  --threads N         worker threads (default: all cores)\n"
    "  --stats             print prefill/decode speed to stderr\n";

/* Length of a valid UTF-8 character at s (n bytes available): > 0 valid, 0 incomplete (could still become
 * valid with more bytes), -1 invalid. */
static int utf8_char(const unsigned char *s, size_t n) {
    unsigned c = s[0];
    if (c < 0x80) return 1;
    int need = c >= 0xc2 && c <= 0xdf ? 1 : c >= 0xe0 && c <= 0xef ? 2 : c >= 0xf0 && c <= 0xf4 ? 3 : -1;
    if (need < 0) return -1;
    unsigned lo = c == 0xe0 ? 0xa0 : c == 0xf0 ? 0x90 : 0x80, hi = c == 0xed ? 0x9f : c == 0xf4 ? 0x8f : 0xbf;
    for (int k = 1; k <= need; k++) {
        if ((size_t)k >= n) return 0;
        unsigned b = s[k];
        if (b < (k == 1 ? lo : 0x80) || b > (k == 1 ? hi : 0xbf)) return -1;
    }
    return need + 1;
}

/* Streams the pending bytes as valid UTF-8: complete characters go out, an unfinished one at the end waits for
 * the next token (unless final), and bytes that can never form a character become U+FFFD. */
static void flush_utf8(char *buf, size_t *n, int final) {
    size_t i = 0;
    const unsigned char *u = (const unsigned char *)buf;
    while (i < *n) {
        int k = utf8_char(u + i, *n - i);
        if (k == 0 && !final) break;
        if (k <= 0) {
            fputs("\xef\xbf\xbd", stdout);
            i++;
        } else {
            fwrite(buf + i, 1, (size_t)k, stdout);
            i += (size_t)k;
        }
    }
    fflush(stdout);
    memmove(buf, buf + i, *n - i);
    *n -= i;
}

int cmd_generate(int argc, char **argv) {
    const char *model_dir = NULL, *prompt = NULL, *ids_s = NULL, *n_s = "32", *temp_s = "0", *topk_s = "0",
               *topp_s = "1", *seed_s = "1", *threads_s = NULL, *adapter = NULL, *ctx_s = NULL;
    int chat = 0, ignore_eos = 0, stats = 0;
    const cli_opt opts[] = {{"model", 1, &model_dir, NULL},  {"prompt", 1, &prompt, NULL},
                            {"ids", 1, &ids_s, NULL},        {"n", 1, &n_s, NULL},
                            {"chat", 0, NULL, &chat},        {"temperature", 1, &temp_s, NULL},
                            {"top-k", 1, &topk_s, NULL},     {"top-p", 1, &topp_s, NULL},
                            {"seed", 1, &seed_s, NULL},      {"ignore-eos", 0, NULL, &ignore_eos},
                            {"threads", 1, &threads_s, NULL}, {"stats", 0, NULL, &stats},
                            {"adapter", 1, &adapter, NULL},  {"ctx", 1, &ctx_s, NULL},
                            {NULL, 0, NULL, NULL}};
    int r = cli_parse(argc, argv, opts, "generate", NULL, 0, NULL);
    if (r == 1) {
        fputs(usage_text, stdout);
        return 0;
    }
    if (r) return r;
    if (!model_dir) return cli_usage_error("generate", "--model is required");
    if (!!prompt + !!ids_s != 1) return cli_usage_error("generate", "give exactly one of --prompt or --ids");
    long long n_new, topk, seed, threads = cli_default_threads();
    double temp, topp;
    if (cli_int(n_s, 0, 1 << 20, &n_new)) return cli_usage_error("generate", "-n must be an integer in 0..1048576");
    if (cli_double(temp_s, &temp) || temp < 0) return cli_usage_error("generate", "--temperature must be >= 0");
    if (cli_int(topk_s, 0, 1 << 24, &topk)) return cli_usage_error("generate", "--top-k must be an integer in 0..16777216");
    if (cli_double(topp_s, &topp) || topp <= 0 || topp > 1) return cli_usage_error("generate", "--top-p must be in (0, 1]");
    if (cli_int(seed_s, 0, INT64_MAX, &seed))
        return cli_usage_error("generate", "--seed must be an integer in 0..9223372036854775807");
    long long ctx_max = 0;
    if (ctx_s && cli_int(ctx_s, 1, 1 << 24, &ctx_max)) return cli_usage_error("generate", "--ctx must be in 1..16777216");
    if (threads_s && cli_int(threads_s, 1, 1024, &threads))
        return cli_usage_error("generate", "--threads must be an integer in 1..1024");
    if (prompt && !*prompt) return cli_usage_error("generate", "the prompt is empty");
    if (chat && !prompt) return cli_usage_error("generate", "--chat needs --prompt");

    int rc = 0;
    td_model *m = NULL;
    td_ctx *ctx = NULL;
    td_batch *b = NULL;
    int32_t *ids = NULL, *out_ids = NULL;
    size_t n_ids = 0, n_out = 0;
    float *scratch = NULL;
    char *pending = NULL;
    size_t n_pending = 0;
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
    const td_tokenizer *tok = td_model_tokenizer(m);
    if (prompt) {
        if (!tok) {
            rc = cli_error("generate", "%s has no tokenizer.json; use --ids", model_dir);
            goto done;
        }
        char *text = NULL;
        if (chat) {
            static const char head[] = "<|im_start|>user\n", tail[] = "<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n";
            size_t len = strlen(head) + strlen(prompt) + strlen(tail) + 1;
            text = malloc(len);
            if (text) snprintf(text, len, "%s%s%s", head, prompt, tail);
        }
        const char *t = text ? text : prompt;
        st = td_tokenize(tok, t, strlen(t), TD_TOKENIZE_PARSE_SPECIAL, &ids, &n_ids);
        free(text);
        if (st != TD_OK) {
            rc = cli_fail("generate", st);
            goto done;
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
    td_ctx_params cp = td_ctx_default_params();
    cp.n_ctx = (int32_t)(n_ids + (size_t)n_new + 1);
    cp.n_batch = n_ids < 256 ? (int32_t)n_ids : 256;
    cp.n_threads = (int32_t)threads;
    if ((st = td_ctx_new(m, &cp, &ctx)) != TD_OK || (st = td_batch_new(cp.n_batch, &b)) != TD_OK) {
        rc = cli_fail("generate", st);
        goto done;
    }
    scratch = malloc((size_t)V * 2 * sizeof(float));
    out_ids = malloc(((size_t)n_new + 1) * sizeof *out_ids);
    pending = malloc(4096);
    if (!scratch || !out_ids || !pending) {
        rc = cli_error("generate", "out of memory");
        goto done;
    }
    td_sampler_params sp = td_sampler_default_params();
    sp.temperature = (float)temp;
    sp.top_k = (int32_t)topk;
    sp.top_p = (float)topp;
    uint64_t rng = (uint64_t)seed;
    int n_stop;
    const int32_t *stops = td_model_stop_ids(m, &n_stop);

    double t0 = cli_now(), t_prefill = 0;
    for (size_t i = 0; i < n_ids; i += (size_t)cp.n_batch) { /* prefill; only the last token needs logits */
        td_batch_clear(b);
        size_t e = i + (size_t)cp.n_batch < n_ids ? i + (size_t)cp.n_batch : n_ids;
        for (size_t j = i; j < e; j++) td_batch_add(b, ids[j], 0, (int32_t)j, j == n_ids - 1);
        if ((st = td_ctx_decode(ctx, b)) != TD_OK) {
            rc = cli_fail("generate", st);
            goto done;
        }
    }
    t_prefill = cli_now() - t0;
    int32_t pos = (int32_t)n_ids;
    while ((long long)n_out < n_new) {
        int32_t next = td_sample(td_ctx_output(ctx, 0), V, &sp, &rng, scratch);
        int is_stop = 0;
        for (int s = 0; s < n_stop && !ignore_eos; s++) is_stop |= next == stops[s];
        if (is_stop) break;
        out_ids[n_out++] = next;
        if (prompt) {
            size_t len;
            const char *bytes = td_token_bytes(tok, next, &len);
            if (bytes && len) {
                if (n_pending + len > 4096) flush_utf8(pending, &n_pending, 1);
                if (len > 4096) fwrite(bytes, 1, len, stdout);
                else {
                    memcpy(pending + n_pending, bytes, len);
                    n_pending += len;
                    flush_utf8(pending, &n_pending, 0);
                }
            }
        }
        if ((long long)n_out == n_new) break;
        td_batch_clear(b);
        td_batch_add(b, next, 0, pos++, 1);
        if ((st = td_ctx_decode(ctx, b)) != TD_OK) {
            rc = cli_fail("generate", st);
            goto done;
        }
    }
    double t_total = cli_now() - t0;
    if (prompt) {
        flush_utf8(pending, &n_pending, 1);
        putchar('\n');
    } else {
        cli_print_ids(out_ids, n_out);
    }
    if (stats)
        fprintf(stderr, "typedecide generate: prefill %zu tokens in %.3f s (%.1f tok/s), decode %zu tokens in %.3f s (%.1f tok/s)\n",
                n_ids, t_prefill, (double)n_ids / t_prefill, n_out, t_total - t_prefill,
                n_out > 1 ? (double)(n_out - 1) / (t_total - t_prefill) : 0.0);
done:
    free(pending);
    free(scratch);
    free(out_ids);
    free(ids);
    td_batch_free(b);
    td_ctx_free(ctx);
    td_model_free(m);
    return rc;
}
