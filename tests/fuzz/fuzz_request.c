/* libFuzzer target: the server's request parser and validator (src/server/request.c), a pure function over the bytes
 * of a body. The first byte picks the endpoint (chat, completions, tokenize, detokenize, decide), the rest is the
 * body. A refusal must carry an HTTP status the API uses, a message and a writable error body; an accepted request
 * must hold what its endpoint reads. */
#include <stdint.h>
#include <string.h>

#include "server/request.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    /* the seeds start with the kind as a digit ('0' chat ... '4' decide) */
    td_req_kind kind = (td_req_kind)((data[0] >= '0' && data[0] <= '9' ? data[0] - '0' : data[0]) % TD_REQ_N_KINDS);
    td_req_limits lim = {"demo", 256, 1000, 60000};
    td_req r;
    td_req_error err;
    int status = td_req_parse(kind, (const char *)data + 1, size - 1, &lim, &r, &err);
    if (status) {
        if (status != 400 && status != 404 && status != 413) __builtin_trap();
        if (!err.message[0] || !err.type) __builtin_trap();
        char *j = td_req_error_json(&err);
        if (!j) __builtin_trap();
        td_free(j);
        return 0;
    }
    size_t touched = 0;
    if (r.n < 1 || r.n > TD_GEN_MAX_CHOICES || r.n_bias < 0 || r.n_bias > TD_REQ_MAX_LOGIT_BIAS) __builtin_trap();
    for (int32_t i = 0; i < r.n_bias; i++)
        if (r.bias_ids[i] < 0 || r.bias_ids[i] >= lim.n_vocab || !(r.bias[i] >= -100 && r.bias[i] <= 100)) __builtin_trap();
    switch (kind) {
    case TD_REQ_CHAT:
        if (r.n_msgs < 1 || (r.max_tokens != -1 && (r.max_tokens < 1 || r.max_tokens > lim.max_tokens))) __builtin_trap();
        for (int32_t i = 0; i < r.n_msgs; i++) touched += strlen(r.msgs[i].role) + strlen(r.msgs[i].content);
        break;
    case TD_REQ_COMPLETION:
        if (!r.prompt && !r.prompt_ids) __builtin_trap();
        for (int32_t i = 0; i < r.n_prompt_ids; i++)
            if (r.prompt_ids[i] < 0 || r.prompt_ids[i] >= lim.n_vocab) __builtin_trap();
        for (int32_t i = 0; i < r.n_stop; i++) touched += strlen(r.stop[i]);
        break;
    case TD_REQ_TOKENIZE:
        if (!r.prompt && !r.msgs) __builtin_trap();
        break;
    case TD_REQ_DETOKENIZE:
        for (int32_t i = 0; i < r.n_ids; i++)
            if (r.ids[i] < 0 || r.ids[i] >= lim.n_vocab) __builtin_trap();
        break;
    case TD_REQ_DECIDE:
        if (!r.criteria || td_rows_count(r.criteria) < 1) __builtin_trap();
        for (int32_t i = 0; i < td_rows_count(r.criteria); i++) {
            const td_row *row = td_rows_get(r.criteria, i);
            if (!row->evidence && !r.evidence) __builtin_trap();
            touched += strlen(row->criterion.question);
        }
        break;
    default: __builtin_trap();
    }
    if (touched == (size_t)-1) __builtin_trap();
    td_req_free(&r);
    return 0;
}
