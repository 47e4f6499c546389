/* Stop token ids: one routine for every source (generation_config.json, tokenizer_config.json, GGUF metadata). */
#include "model/model.h"
#include "util/alloc.h"
#include "util/error.h"

td_status td_model_add_stop(td_model *m, int64_t id, const char *where) {
    int32_t limit = m->tok ? td_tokenizer_n_tokens(m->tok) : m->cfg.n_vocab;
    if (id < 0 || id >= limit)
        return td_fail(TD_ERR_FORMAT, "%s: stop token id %lld is not in the vocabulary (0..%d)", where, (long long)id,
                       limit - 1);
    for (int i = 0; i < m->n_stop; i++)
        if (m->stop_ids[i] == id) return TD_OK;
    int32_t *n = td_realloc(m->stop_ids, (size_t)(m->n_stop + 1) * sizeof *n);
    if (!n) return td_fail_nomem("stop ids");
    m->stop_ids = n;
    m->stop_ids[m->n_stop++] = (int32_t)id;
    return TD_OK;
}
