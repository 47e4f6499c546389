/* Packing a model's quantised matrices for the kernels that prefer another layout (td_qpack), once, at load. */
#include <stdlib.h>

#include "kernels/cpu/kernels.h"
#include "kernels/cpu/quant.h"
#include "model/model.h"
#include "util/error.h"
#include "util/grow.h"

static td_status pack_one(td_model *m, td_mat *w, int lanes) {
    if ((w->type != TD_DTYPE_Q8_0 && w->type != TD_DTYPE_Q4_0) || w->pack) return TD_OK;
    td_qpack **packs = td_grow(m->packs, &m->cap_packs, (size_t)m->n_packs + 1, sizeof *packs, 64);
    if (!packs) return td_fail_nomem("packed weights");
    m->packs = packs;
    td_qpack *p = td_qpack_new(w->type, w->rows, w->cols, w->data, w->row_bytes, lanes);
    if (!p) return td_fail_nomem("packed weights");
    m->packs[m->n_packs++] = p;
    w->pack = p;
    return TD_OK;
}

td_status td_model_pack(td_model *m) {
    td_status st = td_kernels_choose(&m->kernels);
    if (st != TD_OK) return st;
    int lanes = m->kernels->pack;
    if (!lanes) return TD_OK;
    for (int i = 0; i < m->cfg.n_layer && st == TD_OK; i++)
        for (int s = 0; s < TD_W_COUNT && st == TD_OK; s++) st = pack_one(m, &m->layers[i].w[s], lanes);
    if (st == TD_OK) st = pack_one(m, &m->head, lanes); /* the embedding keeps its rows for look-ups */
    return st;
}
