/* typedecide bench chat: time to first token of a chat turn after a long history, with reuse and re-prefilled. */
#ifndef TD_CLI_BENCH_CHAT_H
#define TD_CLI_BENCH_CHAT_H

#include <stdint.h>

/* Where a bench computes (cli_device's results): the device, bf16 products, and "cpu" or the GPU's description. */
typedef struct bench_device {
    int32_t device, bf16;
    char desc[256];
} bench_device;

int bench_chat(const char *model_dir, long long threads, long long repeat, const char *history_s, const char *turn_s,
               int32_t kv_f16, const bench_device *dv);

#endif
