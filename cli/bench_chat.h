/* typedecide bench chat: time to first token of a chat turn after a long history, with reuse and re-prefilled. */
#ifndef TD_CLI_BENCH_CHAT_H
#define TD_CLI_BENCH_CHAT_H

#include <stdint.h>

/* Where a bench computes (cli_device's results): the device, bf16 products, and "cpu" or the GPU's description. */
typedef struct bench_device {
    int32_t device, precision;
    char desc[256];
} bench_device;

/* The benches' pseudo-random token ids: the next id in [0, span) of the LCG stream s (the same ids on every machine). */
static inline int32_t bench_draw_id(uint64_t *s, int32_t span) {
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return (int32_t)((*s >> 33) % (uint64_t)span);
}

int bench_chat(const char *model_dir, long long threads, long long repeat, const char *history_s, const char *turn_s,
               int32_t kv_f16, const bench_device *dv);

#endif
