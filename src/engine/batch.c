#include <stdlib.h>

#include "engine/engine.h"
#include "util/alloc.h"
#include "util/error.h"

td_status td_batch_new(int32_t capacity, td_batch **out) {
    if (!out) return td_fail(TD_ERR_INVALID_ARG, "td_batch_new: NULL out");
    *out = NULL;
    if (capacity < 1) return td_fail(TD_ERR_INVALID_ARG, "td_batch_new: capacity %d must be >= 1", capacity);
    td_batch *b = td_calloc(1, sizeof *b);
    if (!b) return td_fail_nomem("a batch");
    b->cap = capacity;
    b->token = td_malloc((size_t)capacity * sizeof *b->token);
    b->seq = td_malloc((size_t)capacity * sizeof *b->seq);
    b->pos = td_malloc((size_t)capacity * sizeof *b->pos);
    b->want = td_malloc((size_t)capacity);
    if (!b->token || !b->seq || !b->pos || !b->want) {
        td_batch_free(b);
        return td_fail_nomem("a batch");
    }
    *out = b;
    return TD_OK;
}

void td_batch_free(td_batch *b) {
    if (!b) return;
    td_free(b->token);
    td_free(b->seq);
    td_free(b->pos);
    td_free(b->want);
    td_free(b);
}

void td_batch_clear(td_batch *b) {
    if (b) b->n = 0;
}

td_status td_batch_add(td_batch *b, int32_t token, int32_t seq, int32_t pos, int want_output) {
    if (!b) return td_fail(TD_ERR_INVALID_ARG, "td_batch_add: NULL batch");
    if (b->n >= b->cap) return td_fail(TD_ERR_RANGE, "batch is full (%d tokens)", b->cap);
    b->token[b->n] = token;
    b->seq[b->n] = seq;
    b->pos[b->n] = pos;
    b->want[b->n] = want_output != 0;
    b->n++;
    return TD_OK;
}

int32_t td_batch_n_tokens(const td_batch *b) { return b ? b->n : 0; }
