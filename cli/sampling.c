/* Sampler and stop flags shared by generate, chat and bench chat, and a streaming runner over td_gen. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sampling.h"

const char cli_sampling_help[] =
    "Sampling (each flag not given keeps the model's generation_config.json value; without that file: greedy):\n"
    "  --temperature T       0 = greedy (argmax); > 0 samples\n"
    "  --top-k K             keep the K most likely tokens (0 = off: all tokens)\n"
    "  --top-p P             then the smallest set reaching probability P (1 = off)\n"
    "  --min-p P             then drop tokens below P x the most likely one (0 = off)\n"
    "  --repeat-penalty R    divide positive / multiply negative logits of recent tokens by R (1 = off)\n"
    "  --presence-penalty X  subtract X from the logits of recent tokens (0 = off; -2..2)\n"
    "  --frequency-penalty X subtract X per occurrence in the recent tokens (0 = off; -2..2)\n"
    "  --penalty-last-n N    the recent tokens: the last N of prompt + output (default 64; -1 = all, 0 = off)\n"
    "  --seed S              sampling seed (default 1)\n";

int cli_sampling_params(const char *cmd, const cli_sampling *s, const td_model *m, td_sampler_params *out) {
    td_sampler_params p = td_model_sampler_defaults(m);
    double d;
    long long v;
    if (s->temperature) {
        if (cli_double(s->temperature, &d) || !(d >= 0 && d <= 1e6))
            return cli_usage_error(cmd, "--temperature must be a number >= 0");
        p.temperature = (float)d;
    }
    if (s->top_k) {
        if (cli_int(s->top_k, 0, 1 << 24, &v)) return cli_usage_error(cmd, "--top-k must be an integer in 0..16777216");
        p.top_k = (int32_t)v;
    }
    if (s->top_p) {
        if (cli_double(s->top_p, &d) || !(d > 0 && d <= 1)) return cli_usage_error(cmd, "--top-p must be in (0, 1]");
        p.top_p = (float)d;
    }
    if (s->min_p) {
        if (cli_double(s->min_p, &d) || !(d >= 0 && d <= 1)) return cli_usage_error(cmd, "--min-p must be in [0, 1]");
        p.min_p = (float)d;
    }
    if (s->repeat_penalty) {
        if (cli_double(s->repeat_penalty, &d) || !(d > 0 && d <= 100))
            return cli_usage_error(cmd, "--repeat-penalty must be in (0, 100]");
        p.repetition_penalty = (float)d;
    }
    if (s->presence_penalty) {
        if (cli_double(s->presence_penalty, &d) || !(d >= -2 && d <= 2))
            return cli_usage_error(cmd, "--presence-penalty must be in [-2, 2]");
        p.presence_penalty = (float)d;
    }
    if (s->frequency_penalty) {
        if (cli_double(s->frequency_penalty, &d) || !(d >= -2 && d <= 2))
            return cli_usage_error(cmd, "--frequency-penalty must be in [-2, 2]");
        p.frequency_penalty = (float)d;
    }
    if (s->penalty_last_n) {
        if (cli_int(s->penalty_last_n, -1, 1 << 24, &v))
            return cli_usage_error(cmd, "--penalty-last-n must be an integer in -1..16777216");
        p.penalty_last_n = (int32_t)v;
    }
    if (s->seed) {
        if (cli_int(s->seed, 0, INT64_MAX, &v))
            return cli_usage_error(cmd, "--seed must be an integer in 0..9223372036854775807");
        p.seed = (uint64_t)v;
    }
    if (td_sampler_params_check(&p) != TD_OK) return cli_usage_error(cmd, "%s", td_last_error());
    *out = p;
    return 0;
}

void cli_gen_result_free(cli_gen_result *res) {
    if (!res) return;
    free(res->ids);
    free(res->text);
    memset(res, 0, sizeof *res);
}

int cli_gen_run(const char *cmd, td_gen *g, const td_gen_request *rq, int stream, cli_gen_result *res) {
    memset(res, 0, sizeof *res);
    int64_t id;
    td_status st = td_gen_submit(g, rq, &id);
    if (st != TD_OK) return cli_fail(cmd, st);
    size_t cap_ids = (size_t)rq->max_tokens + 1, cap_text = 256;
    res->ids = malloc(cap_ids * sizeof *res->ids);
    res->text = malloc(cap_text);
    if (!res->ids || !res->text) return cli_error(cmd, "out of memory");
    res->text[0] = 0;
    res->stop_id = -1;
    int done = 0, rc = 0;
    while (!done) {
        int32_t active;
        if ((st = td_gen_step(g, &active)) != TD_OK) return cli_fail(cmd, st);
        td_gen_event ev;
        while (td_gen_next_event(g, &ev)) {
            if (ev.request != id) continue;
            if (ev.kind == TD_GEN_EVENT_PROMPT) {
                res->n_prompt = ev.n_prompt;
                res->n_reused = ev.n_reused;
                res->ms_prefill = ev.ms_prefill;
            }
            if (ev.kind == TD_GEN_EVENT_TOKEN && (size_t)res->n_ids < cap_ids) res->ids[res->n_ids++] = ev.token;
            if (ev.text_len) {
                if (res->n_text + ev.text_len + 1 > cap_text) {
                    while (res->n_text + ev.text_len + 1 > cap_text) cap_text *= 2;
                    char *t = realloc(res->text, cap_text);
                    if (!t) return cli_error(cmd, "out of memory");
                    res->text = t;
                }
                memcpy(res->text + res->n_text, ev.text, ev.text_len);
                res->n_text += ev.text_len;
                res->text[res->n_text] = 0;
                if (stream) {
                    fwrite(ev.text, 1, ev.text_len, stdout);
                    fflush(stdout);
                }
            }
            if (ev.kind == TD_GEN_EVENT_DONE) {
                done = 1;
                res->finish = ev.finish;
                res->stop_id = ev.stop_id;
                res->ms_first_token = ev.ms_first_token;
                res->ms_decode = ev.ms_decode;
                if (ev.finish == TD_GEN_FINISH_ERROR) rc = cli_error(cmd, "%s", ev.error ? ev.error : "generation failed");
            }
        }
        if (!active && !done) return cli_error(cmd, "the request ended without a result");
    }
    return rc;
}
