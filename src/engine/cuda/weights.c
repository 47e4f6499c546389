/* The model's weights on the GPU: every matrix uploaded once, as stored (F32, F16, BF16, Q8_0 or Q4_0 bytes: the
 * kernels dequantise in their tiles), the norms and DeltaNet vectors as float. Made by the first CUDA context of a
 * model, kept by the model (model->device_weights, freed with it). */
#include <pthread.h>
#include <string.h>

#include "engine/cuda/dev.h"
#include "util/alloc.h"
#include "util/error.h"

static pthread_mutex_t upload_lock = PTHREAD_MUTEX_INITIALIZER;

static void weights_free(void *p) {
    td_dev_weights *w = p;
    if (!w) return;
    for (int i = 0; i < w->n_blocks; i++) td_cu_free(w->blocks[i]);
    td_free(w->blocks);
    td_free(w->layers);
    td_free(w);
}

/* A device copy of `bytes` host bytes (NULL, TD_OK when there are none). */
static td_status upload(td_dev_weights *w, const void *src, size_t bytes, void **out) {
    *out = NULL;
    if (!src || !bytes) return TD_OK;
    if (w->n_blocks == w->cap_blocks) {
        int cap = w->cap_blocks ? 2 * w->cap_blocks : 64;
        void **b = td_realloc(w->blocks, (size_t)cap * sizeof *b);
        if (!b) return td_fail_nomem("the list of device weights");
        w->blocks = b;
        w->cap_blocks = cap;
    }
    void *d = td_cu_malloc(bytes);
    if (!d) return td_fail(TD_ERR_NOMEM, "the model's weights on the GPU (%.1f MB so far, %zu more): %s",
                           (double)w->bytes / 1e6, bytes, td_cu_error());
    w->blocks[w->n_blocks++] = d;
    w->bytes += bytes;
    if (td_cu_h2d(d, src, bytes, NULL) != 0) return td_dev_fail("uploading the weights");
    *out = d;
    return TD_OK;
}

static td_status upload_mat(td_dev_weights *w, const td_mat *m, td_cu_mat *out) {
    *out = (td_cu_mat){m->type, m->rows, m->cols, m->row_bytes, NULL};
    void *d;
    td_status st = upload(w, m->data, (size_t)m->rows * m->row_bytes, &d);
    out->data = d;
    return st;
}

static td_status upload_floats(td_dev_weights *w, const float *src, int64_t n, float **out) {
    void *d;
    td_status st = upload(w, src, (size_t)n * sizeof(float), &d);
    *out = d;
    return st;
}

static td_status upload_model(const td_model *m, td_dev_weights *w) {
    const td_config *c = &m->cfg;
    const int64_t d = c->n_embd, hd = c->head_dim, K = c->lin_conv_kernel, Hv = c->lin_n_v_heads;
    const int64_t conv_dim = 2 * (int64_t)c->lin_n_k_heads * c->lin_k_dim + Hv * c->lin_v_dim;
    td_status st;
    if (!(w->layers = td_calloc((size_t)c->n_layer, sizeof *w->layers))) return td_fail_nomem("device layers");
    if ((st = upload_mat(w, &m->embed, &w->embed)) != TD_OK) return st;
    if (m->head.data == m->embed.data && m->head.rows == m->embed.rows) w->head = w->embed; /* tied */
    else if ((st = upload_mat(w, &m->head, &w->head)) != TD_OK) return st;
    if ((st = upload_floats(w, m->final_norm, d, &w->final_norm)) != TD_OK) return st;
    for (int il = 0; il < c->n_layer; il++) {
        const td_layer *l = &m->layers[il];
        td_dev_layer *o = &w->layers[il];
        const td_mat *mats[] = {&l->attn.wq, &l->attn.wk, &l->attn.wv, &l->attn.wo, &l->dn.in_qkv, &l->dn.in_z,
                                &l->dn.in_b, &l->dn.in_a, &l->dn.out, &l->w_gate, &l->w_up, &l->w_down};
        td_cu_mat *outs[] = {&o->wq, &o->wk, &o->wv, &o->wo, &o->in_qkv, &o->in_z,
                             &o->in_b, &o->in_a, &o->out, &o->gate, &o->up, &o->down};
        for (size_t i = 0; i < sizeof mats / sizeof *mats; i++)
            if ((st = upload_mat(w, mats[i], outs[i])) != TD_OK) return st;
        if ((st = upload_floats(w, l->attn_norm, d, &o->attn_norm)) != TD_OK ||
            (st = upload_floats(w, l->ffn_norm, d, &o->ffn_norm)) != TD_OK)
            return st;
        if (l->kind == TD_LAYER_ATTENTION) {
            if ((st = upload_floats(w, l->attn.q_norm, hd, &o->q_norm)) != TD_OK ||
                (st = upload_floats(w, l->attn.k_norm, hd, &o->k_norm)) != TD_OK)
                return st;
        } else if ((st = upload_floats(w, l->dn.conv_w, conv_dim * K, &o->conv_w)) != TD_OK ||
                   (st = upload_floats(w, l->dn.a_log, Hv, &o->a_log)) != TD_OK ||
                   (st = upload_floats(w, l->dn.dt_bias, Hv, &o->dt_bias)) != TD_OK ||
                   (st = upload_floats(w, l->dn.norm_w, c->lin_v_dim, &o->norm_w)) != TD_OK) {
            return st;
        }
    }
    if (td_cu_sync(NULL) != 0) return td_dev_fail("uploading the weights");
    return TD_OK;
}

td_status td_dev_weights_get(const td_model *m, const td_dev_weights **out) {
    pthread_mutex_lock(&upload_lock);
    td_model *mm = (td_model *)m; /* the one field the engine sets on a loaded model, under the lock */
    td_status st = TD_OK;
    if (!mm->device_weights) {
        td_dev_weights *w = td_calloc(1, sizeof *w);
        if (!w) st = td_fail_nomem("the device weights");
        else if ((st = upload_model(m, w)) != TD_OK) weights_free(w);
        else {
            mm->device_weights = w;
            mm->device_free = weights_free;
        }
    }
    *out = mm->device_weights;
    pthread_mutex_unlock(&upload_lock);
    return st;
}
