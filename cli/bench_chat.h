/* typedecide bench chat: time to first token of a chat turn after a long history, with reuse and re-prefilled. */
#ifndef TD_CLI_BENCH_CHAT_H
#define TD_CLI_BENCH_CHAT_H

#include <stdint.h>

int bench_chat(const char *model_dir, long long threads, long long repeat, const char *history_s, const char *turn_s,
               int32_t kv_f16);

#endif
