/* A model described as JSON, for `typedecide inspect`. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "model/arch.h"
#include "model/gguf.h"
#include "model/model.h"
#include "util/alloc.h"
#include "util/error.h"
#include "util/json.h"

static json_t *shape(int n, const int64_t *dims) {
    json_t *a = json_array();
    for (int i = 0; i < n; i++) json_array_append_new(a, json_integer(dims[i]));
    return a;
}

td_status td_model_describe(const td_model *m, char **json) {
    if (!m || !json) return td_fail(TD_ERR_INVALID_ARG, "td_model_describe: NULL argument");
    const td_config *c = &m->cfg;
    uint64_t f0 = td_alloc_failures();
    json_t *o = json_object(), *tensors = json_array();
    int64_t bytes = 0, head_copies = c->tied ? 1 : 0;
    if (m->gguf) {
        for (int64_t i = 0; i < m->gguf->n_tensors; i++) {
            const td_gguf_tensor *t = &m->gguf->tensors[i];
            int64_t dims[4];
            for (int d = 0; d < t->n_dims; d++) dims[d] = t->ne[t->n_dims - 1 - d]; /* rows first, as safetensors */
            json_t *e = json_object();
            json_object_set_new(e, "name", json_string(t->name));
            json_object_set_new(e, "dtype", json_string(t->dtype == TD_DTYPE_OTHER ? "other" : td_dtype_name(t->dtype)));
            json_object_set_new(e, "shape", shape(t->n_dims, dims));
            json_object_set_new(e, "bytes", json_integer((json_int_t)t->nbytes));
            json_array_append_new(tensors, e);
            bytes += (int64_t)t->nbytes;
        }
    } else {
        for (int f = 0; f < m->n_files; f++)
            for (int i = 0; i < m->files[f].n_tensors; i++) {
                const td_st_tensor *t = &m->files[f].tensors[i];
                json_t *e = json_object();
                json_object_set_new(e, "name", json_string(t->name));
                json_object_set_new(e, "dtype", json_string(t->dtype_name));
                json_object_set_new(e, "shape", shape(t->n_dims, t->shape));
                json_object_set_new(e, "bytes", json_integer((json_int_t)(t->end - t->begin)));
                json_array_append_new(tensors, e);
                bytes += (int64_t)(t->end - t->begin);
                if (c->tied && strcmp(t->name, "lm_head.weight") == 0) head_copies = 2; /* stored although tied */
            }
    }
    json_object_set_new(o, "path", json_string(m->path));
    json_object_set_new(o, "format", json_string(m->gguf ? "gguf" : "safetensors"));
    json_object_set_new(o, "architecture", json_string(c->model_type));
    json_object_set_new(o, "parameters", json_integer(m->n_params));
    json_object_set_new(o, "layers", json_integer(c->n_layer));
    if (c->arch->layers[TD_LAYER_DELTANET].n) {
        int n_dn = 0;
        for (int i = 0; i < c->n_layer; i++) n_dn += m->layers[i].kind == TD_LAYER_DELTANET;
        json_object_set_new(o, "deltanet_layers", json_integer(n_dn));
    }
    json_object_set_new(o, "hidden_size", json_integer(c->n_embd));
    json_object_set_new(o, "vocab_size", json_integer(c->n_vocab));
    json_object_set_new(o, "head_rows", json_integer(m->head.rows));
    json_object_set_new(o, "tied_embedding", json_boolean(c->tied));
    json_object_set_new(o, "embedding_tables_stored",
                        json_integer(c->tied ? head_copies : 2)); /* untied: the embedding and the head */
    json_object_set_new(o, "embedding_dtype", json_string(td_dtype_name(m->embed.type)));
    json_object_set_new(o, "head_dtype", json_string(td_dtype_name(m->head.type)));
    json_object_set_new(o, "tensor_bytes", json_integer(bytes));
    json_object_set_new(o, "skipped_tensors", json_integer(m->n_skipped));
    json_object_set_new(o, "can_generate", json_boolean(!m->pruned));
    json_object_set_new(o, "slot_map", m->pruned && m->slot_map ? json_loads(m->slot_map, 0, NULL) : json_null());
    json_object_set_new(o, "tensors", tensors);
    *json = td_json_dumps_checked(o, JSON_INDENT(1) | JSON_PRESERVE_ORDER, f0);
    json_decref(o);
    return *json ? TD_OK : td_fail_nomem("the description");
}
