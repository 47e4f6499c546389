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

/* One tensor of the architecture's description: the device copy goes to the same slot as the host's. */
typedef struct upload_job {
    const td_model *m;
    td_dev_weights *w;
} upload_job;

static td_status upload_spec(void *user, const td_tensor_spec *s) {
    const upload_job *j = user;
    const td_model *m = j->m;
    td_dev_weights *w = j->w;
    int64_t n = 1;
    for (int d = 0; d < s->nd; d++) n *= s->dims[d];
    if (s->layer < 0) {
        if (s->mat == &m->embed) return upload_mat(w, &m->embed, &w->embed);
        if (s->mat == &m->head) return upload_mat(w, &m->head, &w->head);
        return upload_floats(w, m->final_norm, n, &w->final_norm);
    }
    const td_layer *l = &m->layers[s->layer];
    td_dev_layer *o = &w->layers[s->layer];
    if (s->mat) return upload_mat(w, s->mat, &o->w[s->mat - l->w]);
    return *s->vec ? upload_floats(w, *s->vec, n, &o->v[s->vec - l->v]) : TD_OK; /* an optional vector may be absent */
}

static td_status upload_model(const td_model *m, td_dev_weights *w) {
    const td_config *c = &m->cfg;
    td_status st;
    if (!(w->layers = td_calloc((size_t)c->n_layer, sizeof *w->layers))) return td_fail_nomem("device layers");
    upload_job j = {m, w};
    if ((st = td_arch_tensors(c, (td_model *)m, upload_spec, &j)) != TD_OK) return st; /* only reads the model */
    if (c->tied) w->head = w->embed; /* the same device bytes */
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
