/* Sampler and stop flags shared by generate, chat and bench chat, and a streaming runner over td_gen. */
#ifndef TD_CLI_SAMPLING_H
#define TD_CLI_SAMPLING_H

#include <stdint.h>

#include "cli.h"

/* The values of the sampling flags as given (NULL: not given: the model's generation_config.json decides). */
typedef struct cli_sampling {
    const char *temperature, *top_k, *top_p, *min_p, *repeat_penalty, *presence_penalty, *frequency_penalty,
        *penalty_last_n, *seed;
} cli_sampling;

#define CLI_SAMPLING_OPTS(s)                                                                                     \
    {"temperature", 1, &(s).temperature, NULL}, {"top-k", 1, &(s).top_k, NULL}, {"top-p", 1, &(s).top_p, NULL},  \
        {"min-p", 1, &(s).min_p, NULL}, {"repeat-penalty", 1, &(s).repeat_penalty, NULL},                       \
        {"presence-penalty", 1, &(s).presence_penalty, NULL},                                                   \
        {"frequency-penalty", 1, &(s).frequency_penalty, NULL},                                                 \
        {"penalty-last-n", 1, &(s).penalty_last_n, NULL}, {"seed", 1, &(s).seed, NULL}

/* The help lines of those flags. */
extern const char cli_sampling_help[];

/* The effective sampler: the model's defaults (generation_config.json), then each flag given. Returns 0, or 2
 * after printing a usage error naming the flag. */
int cli_sampling_params(const char *cmd, const cli_sampling *s, const td_model *m, td_sampler_params *out);

/* What one request did. */
typedef struct cli_gen_result {
    int32_t *ids; /* generated ids (free()), a final stop id included */
    int32_t n_ids, n_prompt, n_reused;
    td_gen_finish finish;
    int32_t stop_id; /* the stop id that ended it (the last of ids), or -1 */
    char *text;   /* the released text (free()) */
    size_t n_text;
    double ms_first_token, ms_decode, ms_prefill;
} cli_gen_result;

/* Submits rq, steps until it ends and, when stream is set, writes its text to stdout as it comes (flushed).
 * Returns 0, or 1 after printing why (a submit error or the request ending in error). */
int cli_gen_run(const char *cmd, td_gen *g, const td_gen_request *rq, int stream, cli_gen_result *res);
void cli_gen_result_free(cli_gen_result *res);

#endif
