/* Loading a Hugging Face model directory: config.json, the safetensors files (single or sharded), the
 * tokenizer and the stop tokens. Every tensor the architecture needs is found, type-checked and shape-checked
 * against config.json here, so that the forward pass never meets a surprise. */
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/adapter.h"
#include "model/arch.h"
#include "kernels/cpu/quant.h"
#include "model/gguf.h"
#include "model/model.h"
#include "tokenizer/vocab.h"
#include "util/alloc.h"
#include "util/error.h"
#include "util/fileio.h"
#include "util/grow.h"
#include "util/hashmap.h"
#include "util/half.h"
#include "util/json.h"

typedef struct loader {
    td_model *m;
    td_strmap names; /* tensor name -> file index << 20 | tensor index */
    uint8_t **used;  /* per file, per tensor */
    const td_model_params *params;
} loader;

static void log_msg(const td_model_params *p, int level, const char *fmt, ...) TD_PRINTF(3, 4);
static void log_msg(const td_model_params *p, int level, const char *fmt, ...) {
    if (!p || !p->log) return;
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    p->log(p->log_user, level, buf);
}

int td_model_own(td_model *m, void *p) {
    void **n = td_grow(m->owned, &m->cap_owned, (size_t)m->n_owned + 1, sizeof *n, 64);
    if (!n) return -1;
    m->owned = n;
    m->owned[m->n_owned++] = p;
    return 0;
}


/* A tokenizer may hold ids past the embedding only for added tokens (Gemma 3 1B's <image_soft_token> is id 262144 of
 * a 262144-row embedding, as transformers loads it): such a token is refused where it is fed (TD_ERR_RANGE), never
 * produced by the vocabulary's merges. */
td_status td_model_check_vocab(const td_tokenizer *tok, int32_t n_vocab, const char *what) {
    for (int32_t id = n_vocab; id < td_tokenizer_n_tokens(tok); id++) {
        size_t len;
        td_piece_kind kind;
        if (td_vocab_piece(tok, id, &len, &kind) && kind == TD_PIECE_NORMAL)
            return td_fail(TD_ERR_FORMAT, "%s: the tokenizer has %d ids but the model's vocab_size is %d (id %d is a "
                           "vocabulary token, not an added one)", what, td_tokenizer_n_tokens(tok), n_vocab, id);
    }
    return TD_OK;
}

/* ---- opening the weight files ------------------------------------------------------------------------------ */

static td_status open_files(loader *L, const char *dir) {
    td_model *m = L->m;
    char *index = td_path_join(dir, "model.safetensors.index.json");
    char *single = td_path_join(dir, "model.safetensors");
    td_status st = TD_OK;
    json_t *root = NULL;
    const char **shards = NULL;
    int n_shards = 0;
    if (!index || !single) {
        st = td_fail_nomem("a path");
        goto done;
    }
    if (td_file_exists(index)) {
        if ((st = td_json_load_file(index, &root)) != TD_OK) goto done;
        json_t *wm = json_object_get(root, "weight_map");
        if (!json_is_object(wm)) {
            st = td_fail(TD_ERR_FORMAT, "%s: missing object \"weight_map\"", index);
            goto done;
        }
        shards = td_calloc(json_object_size(wm) + 1, sizeof *shards);
        if (!shards) {
            st = td_fail_nomem("the shard list");
            goto done;
        }
        const char *key;
        json_t *v;
        json_object_foreach(wm, key, v) {
            if (!json_is_string(v)) {
                st = td_fail(TD_ERR_FORMAT, "%s: weight_map[\"%s\"] must be a file name", index, key);
                goto done;
            }
            const char *f = json_string_value(v);
            if (strchr(f, '/') || strcmp(f, "..") == 0) {
                st = td_fail(TD_ERR_FORMAT, "%s: weight_map[\"%s\"] = \"%s\" must be a file in the same directory",
                             index, key, f);
                goto done;
            }
            int seen = 0;
            for (int i = 0; i < n_shards && !seen; i++) seen = strcmp(shards[i], f) == 0;
            if (!seen) shards[n_shards++] = f;
        }
        if (n_shards == 0) {
            st = td_fail(TD_ERR_FORMAT, "%s: weight_map is empty", index);
            goto done;
        }
    } else if (td_file_exists(single)) {
        shards = td_calloc(1, sizeof *shards);
        if (!shards) {
            st = td_fail_nomem("the shard list");
            goto done;
        }
        shards[n_shards++] = "model.safetensors";
    } else {
        st = td_fail(TD_ERR_IO, "%s: no model.safetensors or model.safetensors.index.json", dir);
        goto done;
    }
    m->files = td_calloc((size_t)n_shards, sizeof *m->files);
    L->used = td_calloc((size_t)n_shards, sizeof *L->used);
    if (!m->files || !L->used) {
        st = td_fail_nomem("the file table");
        goto done;
    }
    size_t total = 0;
    for (int i = 0; i < n_shards; i++) {
        char *p = td_path_join(dir, shards[i]);
        if (!p) {
            st = td_fail_nomem("a path");
            goto done;
        }
        st = td_st_open(p, &m->files[i]);
        td_free(p);
        if (st != TD_OK) goto done;
        m->n_files++;
        total += (size_t)m->files[i].n_tensors;
        L->used[i] = td_calloc((size_t)m->files[i].n_tensors + 1, 1);
        if (!L->used[i]) {
            st = td_fail_nomem("the tensor table");
            goto done;
        }
    }
    if (td_strmap_init(&L->names, total)) {
        st = td_fail_nomem("the tensor table");
        goto done;
    }
    for (int i = 0; i < m->n_files; i++)
        for (int k = 0; k < m->files[i].n_tensors; k++) {
            const char *nm = m->files[i].tensors[k].name;
            int32_t prev;
            if (td_strmap_get(&L->names, nm, strlen(nm), &prev)) {
                st = td_fail(TD_ERR_FORMAT, "tensor %s appears in both %s and %s", nm,
                             m->files[prev >> 20].map.path, m->files[i].map.path);
                goto done;
            }
            td_strmap_put(&L->names, nm, strlen(nm), (int32_t)(i << 20 | k));
        }
done:
    td_free(index);
    td_free(single);
    td_free(shards);
    json_decref(root);
    return st;
}

/* ---- finding and checking tensors ---------------------------------------------------------------------------- */

static const td_st_tensor *find(loader *L, const char *name, const td_st_file **file) {
    int32_t v;
    if (!td_strmap_get(&L->names, name, strlen(name), &v)) return NULL;
    int f = v >> 20, k = v & 0xfffff;
    L->used[f][k] = 1;
    *file = &L->m->files[f];
    return &L->m->files[f].tensors[k];
}

static void shape_str(char *buf, size_t n, const int64_t *shape, int nd) {
    size_t o = (size_t)snprintf(buf, n, "[");
    for (int i = 0; i < nd && o < n; i++) o += (size_t)snprintf(buf + o, n - o, i ? ", %lld" : "%lld", (long long)shape[i]);
    if (o < n) snprintf(buf + o, n - o, "]");
}

/* Looks up `name` and checks its dtype and shape against the expected dims (why: how config.json implies them). */
static td_status get_tensor(loader *L, const char *name, int nd, const int64_t *dims, const char *why,
                            const td_st_tensor **out, const td_st_file **file) {
    const td_st_tensor *t = find(L, name, file);
    if (!t) {
        char want[128];
        shape_str(want, sizeof want, dims, nd);
        return td_fail(TD_ERR_FORMAT, "%s: missing tensor %s (expected shape %s: %s)", L->m->path, name, want, why);
    }
    if (t->dtype == TD_DTYPE_OTHER)
        return td_fail(TD_ERR_UNSUPPORTED, "%s: tensor %s has dtype %s; only F32, F16 and BF16 are supported",
                       (*file)->map.path, name, t->dtype_name);
    int ok = t->n_dims == nd;
    for (int i = 0; ok && i < nd; i++) ok = t->shape[i] == dims[i];
    if (!ok) {
        char have[128], want[128];
        shape_str(have, sizeof have, t->shape, t->n_dims);
        shape_str(want, sizeof want, dims, nd);
        return td_fail(TD_ERR_FORMAT, "%s: tensor %s has shape %s but config.json implies %s (%s)", (*file)->map.path,
                       name, have, want, why);
    }
    *out = t;
    return TD_OK;
}

/* Data pointer of a tensor, copied to aligned memory if the file does not align it to its element size. */
static td_status tensor_data(loader *L, const td_st_tensor *t, const td_st_file *f, const void **data) {
    const uint8_t *p = f->data + t->begin;
    size_t es = td_dtype_size(t->dtype), nb = (size_t)(t->end - t->begin);
    if (((uintptr_t)p % es) == 0) {
        *data = p;
        return TD_OK;
    }
    void *copy = td_aligned_alloc(64, (nb + 63) & ~(size_t)63);
    if (!copy || td_model_own(L->m, copy)) {
        td_free(copy);
        return td_fail_nomem("a realigned tensor");
    }
    memcpy(copy, p, nb);
    *data = copy;
    return TD_OK;
}

static td_status get_mat(loader *L, const char *name, int64_t rows, int64_t cols, const char *why, td_mat *out) {
    const td_st_tensor *t;
    const td_st_file *f;
    int64_t dims[2] = {rows, cols};
    td_status st = get_tensor(L, name, 2, dims, why, &t, &f);
    if (st != TD_OK) return st;
    out->type = t->dtype;
    out->rows = rows;
    out->cols = cols;
    out->row_bytes = (size_t)cols * td_dtype_size(t->dtype);
    L->m->n_params += rows * cols;
    return tensor_data(L, t, f, &out->data);
}

/* Element i of a tensor of dtype F32, F16 or BF16 at p, as fp32 (exact for all three). */
static float elem_f32(td_dtype dtype, const uint8_t *p, int64_t i) {
    uint16_t h;
    float v;
    switch (dtype) {
    case TD_DTYPE_F32: memcpy(&v, p + 4 * i, 4); return v;
    case TD_DTYPE_F16: memcpy(&h, p + 2 * i, 2); return td_f16_to_f32(h);
    default: memcpy(&h, p + 2 * i, 2); return td_bf16_to_f32(h);
    }
}

/* Small tensors (norm weights, gates, conv kernels) are converted to fp32 once. nd/dims as in get_tensor. */
static td_status get_f32(loader *L, const char *name, int nd, const int64_t *dims, const char *why, float **out) {
    const td_st_tensor *t;
    const td_st_file *f;
    td_status st = get_tensor(L, name, nd, dims, why, &t, &f);
    if (st != TD_OK) return st;
    int64_t n = 1;
    for (int i = 0; i < nd; i++) n *= dims[i];
    float *v = td_malloc((size_t)(n ? n : 1) * sizeof *v);
    if (!v || td_model_own(L->m, v)) {
        td_free(v);
        return td_fail_nomem("a weight vector");
    }
    const uint8_t *p = f->data + t->begin;
    for (int64_t i = 0; i < n; i++) v[i] = elem_f32(t->dtype, p, i);
    L->m->n_params += n;
    *out = v;
    return TD_OK;
}

/* ---- binding the architecture ---------------------------------------------------------------------------------- */

static td_status bind_spec(void *user, const td_tensor_spec *spec) {
    loader *L = user;
    int32_t at;
    if ((spec->flags & TD_T_OPTIONAL) && !td_strmap_get(&L->names, spec->name, strlen(spec->name), &at)) return TD_OK;
    if (spec->mat) return get_mat(L, spec->name, spec->dims[0], spec->dims[1], spec->why, spec->mat);
    return get_f32(L, spec->name, spec->nd, spec->dims, spec->why, spec->vec);
}

/* transformers 5.17's tying rule (PreTrainedModel.tie_weights, called by from_pretrained with the missing keys):
 * with tie_word_embeddings true, a file that holds lm_head.weight as well as the embedding keeps both apart when
 * their values differ (torch.equal false: it warns "both are present in the checkpoints with different values, so
 * we will NOT tie them") and ties them when they are equal (the same numbers either way). Clears cfg.tied in the
 * first case, so that td_arch_tensors binds (and shape-checks) the stored head. */
static void untie_stored_head(loader *L) {
    td_model *m = L->m;
    char embed_name[96];
    int32_t ve, vh;
    snprintf(embed_name, sizeof embed_name, "%sembed_tokens.weight", m->cfg.tensor_prefix);
    if (!m->cfg.tied || !td_strmap_get(&L->names, "lm_head.weight", strlen("lm_head.weight"), &vh) ||
        !td_strmap_get(&L->names, embed_name, strlen(embed_name), &ve))
        return; /* nothing stored to compare; a missing embedding is reported when it is bound */
    const td_st_file *fe = &m->files[ve >> 20], *fh = &m->files[vh >> 20];
    const td_st_tensor *e = &fe->tensors[ve & 0xfffff], *h = &fh->tensors[vh & 0xfffff];
    int same = e->n_dims == h->n_dims && e->dtype != TD_DTYPE_OTHER && h->dtype != TD_DTYPE_OTHER;
    int64_t n = 1;
    for (int i = 0; same && i < e->n_dims; i++) {
        same = e->shape[i] == h->shape[i];
        n *= e->shape[i];
    }
    const uint8_t *pe = fe->data + e->begin, *ph = fh->data + h->begin;
    if (same && !(e->dtype == h->dtype && memcmp(pe, ph, (size_t)(e->end - e->begin)) == 0))
        for (int64_t i = 0; same && i < n; i++) same = elem_f32(e->dtype, pe, i) == elem_f32(h->dtype, ph, i);
    if (same) return;
    m->cfg.tied = 0;
    log_msg(L->params, 1, "%s: tie_word_embeddings is true but %s holds lm_head.weight with values other than %s's: "
            "the stored head is used, as transformers does", m->path, fh->map.path, embed_name);
}

static td_status bind_layers(loader *L) {
    td_model *m = L->m;
    m->layers = td_calloc((size_t)m->cfg.n_layer, sizeof *m->layers);
    if (!m->layers) return td_fail_nomem("the layer table");
    untie_stored_head(L);
    td_arch_set_kinds(&m->cfg, m);
    td_status st = td_arch_tensors(&m->cfg, m, bind_spec, L);
    if (st != TD_OK) return st;
    if (m->cfg.tied) m->head = m->embed; /* tied: lm_head.weight, if stored, holds the same values */
    return TD_OK;
}

/* Counts (and names, in a log line) the tensors of the files that the text model did not use. */
static void report_unused(loader *L) {
    td_model *m = L->m;
    int vis = 0, mtp = 0, other = 0;
    const char *example = NULL;
    for (int i = 0; i < m->n_files; i++)
        for (int k = 0; k < m->files[i].n_tensors; k++) {
            if (L->used[i][k]) continue;
            const char *nm = m->files[i].tensors[k].name;
            if (strncmp(nm, "model.visual.", 13) == 0 || strncmp(nm, "visual.", 7) == 0) vis++;
            else if (strncmp(nm, "mtp.", 4) == 0) mtp++;
            else {
                other++;
                if (!example) example = nm;
            }
        }
    m->n_skipped = vis + mtp + other;
    if (m->n_skipped)
        log_msg(L->params, 0, "skipped %d tensors not used by the text model (vision tower: %d, mtp: %d, other: %d%s%s)",
                m->n_skipped, vis, mtp, other, example ? ", e.g. " : "", example ? example : "");
}

/* ---- stop tokens ------------------------------------------------------------------------------------------------- */

static td_status load_stops(td_model *m, const char *dir) {
    char *gen = td_path_join(dir, "generation_config.json"), *tc = td_path_join(dir, "tokenizer_config.json");
    td_status st = TD_OK;
    json_t *root = NULL;
    if (!gen || !tc) {
        st = td_fail_nomem("a path");
        goto done;
    }
    if (td_file_exists(gen)) {
        size_t size;
        if ((st = td_read_file(gen, &m->gen_config, &size)) != TD_OK) goto done;
        if ((st = td_json_load_file(gen, &root)) != TD_OK) goto done;
        json_t *e = json_object_get(root, "eos_token_id");
        if (json_is_integer(e)) st = td_model_add_stop(m, json_integer_value(e), gen);
        else if (json_is_array(e)) {
            size_t i;
            json_t *v;
            json_array_foreach(e, i, v) {
                if (!json_is_integer(v)) {
                    st = td_fail(TD_ERR_FORMAT, "%s: eos_token_id[%zu] must be an integer", gen, i);
                    break;
                }
                if ((st = td_model_add_stop(m, json_integer_value(v), gen)) != TD_OK) break;
            }
        } else if (e && !json_is_null(e)) st = td_fail(TD_ERR_FORMAT, "%s: eos_token_id must be an id or a list", gen);
        json_decref(root);
        root = NULL;
        if (st != TD_OK) goto done;
    }
    if (td_file_exists(tc)) { /* the tokenizer's eos_token joins the stop ids; its chat template is kept */
        if ((st = td_json_load_file(tc, &root)) != TD_OK) goto done;
        json_t *e = json_object_get(root, "eos_token");
        const char *s = json_is_string(e) ? json_string_value(e) : json_string_value(json_object_get(e, "content"));
        if (s && m->tok) {
            int32_t id = td_token_lookup(m->tok, s);
            if (id < 0) st = td_fail(TD_ERR_FORMAT, "%s: eos_token \"%s\" is not in the vocabulary", tc, s);
            else st = td_model_add_stop(m, id, tc);
            if (st != TD_OK) goto done;
        }
        json_t *ct = json_object_get(root, "chat_template");
        if (json_is_string(ct)) {
            m->chat_template = td_strndup(json_string_value(ct), json_string_length(ct));
            m->chat_template_source = td_strdup(tc);
            if (!m->chat_template || !m->chat_template_source) st = td_fail_nomem("the chat template");
        }
    }
done:
    json_decref(root);
    td_free(gen);
    td_free(tc);
    return st;
}

/* ---- public entry points --------------------------------------------------------------------------------------- */

td_model_params td_model_default_params(void) {
    td_model_params p;
    memset(&p, 0, sizeof p);
    p.load_tokenizer = 1;
    return p;
}

void td_model_free(td_model *m) {
    if (!m) return;
    if (m->device_weights && m->device_free) m->device_free(m->device_weights);
    for (int i = 0; i < m->n_files; i++) td_st_close(&m->files[i]);
    td_free(m->files);
    td_gguf_close(m->gguf);
    td_free(m->gguf);
    td_free(m->keep);
    td_free(m->slot_map);
    td_free(m->chat_template);
    td_free(m->chat_template_source);
    td_free(m->gen_config);
    for (int i = 0; i < m->n_packs; i++) td_qpack_free(m->packs[i]);
    td_free(m->packs);
    for (int i = 0; i < m->n_owned; i++) td_free(m->owned[i]);
    td_free(m->owned);
    td_free(m->layers);
    td_tokenizer_free(m->tok);
    td_free(m->stop_ids);
    td_free(m->path);
    td_free(m);
}

/* A GGUF model once m->path is set (and m->gguf, for a buffer): binds, applies the adapter, packs. Frees m on
 * failure. */
static td_status finish_gguf(td_model *m, const char *path, const td_model_params *params) {
    td_status st = td_model_load_gguf(m, path, params);
    if (st == TD_OK && params->adapter) {
        int n = 0;
        double scaling = 0;
        st = td_adapter_apply(m, params->adapter, &n, &scaling);
    }
    if (st == TD_OK) st = td_model_pack(m);
    if (st != TD_OK) {
        td_model_free(m);
        return st;
    }
    log_msg(params, 0, "loaded %s: %s (GGUF), %d layers, %lld parameters%s", path, m->cfg.model_type, m->cfg.n_layer,
            (long long)m->n_params, m->pruned ? ", head pruned to the option letters" : "");
    return TD_OK;
}

static td_status load_gguf_file(const char *path, const td_model_params *params, td_model **out) {
    td_model *m = td_calloc(1, sizeof *m);
    if (!m || !(m->path = td_strdup(path))) {
        td_free(m);
        return td_fail_nomem("a model");
    }
    td_status st = finish_gguf(m, path, params);
    if (st == TD_OK) *out = m;
    return st;
}

static td_status load_dir(const char *path, const td_model_params *params, td_model **out);

void *td_model_buffer_new(size_t size) { return size ? td_aligned_alloc(64, size) : NULL; }

td_status td_model_load_buffer(void *data, size_t size, const char *name, unsigned flags,
                               const td_model_params *params, td_model **out) {
    const int take = (flags & TD_MODEL_BUFFER_TAKE) != 0;
    if (out) *out = NULL;
    if (!data || !out || !size || (flags & ~TD_MODEL_BUFFER_TAKE)) {
        if (take) td_free(data);
        return td_fail(TD_ERR_INVALID_ARG, "td_model_load_buffer: %s", !data ? "NULL data" : !out ? "NULL out"
                       : !size ? "an empty buffer (size 0)" : "unknown flags");
    }
    if (!name) name = "<buffer>";
    td_model_params defaults = td_model_default_params();
    if (!params) params = &defaults;
    uint64_t f0 = td_alloc_failures();
    td_model *m = td_calloc(1, sizeof *m);
    td_gguf *g = m ? td_calloc(1, sizeof *g) : NULL;
    if (!m || !g || !(m->path = td_strdup(name))) {
        if (take) td_free(data);
        td_free(g);
        td_model_free(m);
        return td_fail_nomem("a model");
    }
    if (size < 4 || memcmp(data, "GGUF", 4) != 0) {
        if (take) td_free(data);
        td_free(g);
        td_model_free(m);
        return td_fail(TD_ERR_FORMAT, "%s: not a GGUF image (bad magic): td_model_load_buffer loads GGUF only; a "
                       "Hugging Face directory loads from files (td_model_load)", name);
    }
    td_status st = td_gguf_open_buffer(data, size, name, take ? TD_GGUF_BUFFER_OWNED : TD_GGUF_BUFFER_BORROWED, g);
    if (st != TD_OK) { /* the buffer was freed by td_gguf_open_buffer when taken */
        td_free(g);
        td_model_free(m);
        return st;
    }
    m->gguf = g;
    st = finish_gguf(m, name, params);
    if (st == TD_OK && td_alloc_failures() != f0) {
        td_model_free(m);
        return td_fail(TD_ERR_NOMEM, "%s: out of memory while loading", name);
    }
    if (st == TD_OK) *out = m;
    return st;
}

td_status td_model_load(const char *path, const td_model_params *params, td_model **out) {
    if (!path || !out) return td_fail(TD_ERR_INVALID_ARG, "td_model_load: NULL argument");
    *out = NULL;
    td_model_params defaults = td_model_default_params();
    if (!params) params = &defaults;
    uint64_t f0 = td_alloc_failures();
    td_status st = load_dir(path, params, out);
    if (st == TD_OK && td_alloc_failures() != f0) { /* a refusal that a library took for something else */
        td_model_free(*out);
        *out = NULL;
        st = td_fail(TD_ERR_NOMEM, "%s: out of memory while loading", path);
    }
    return st;
}

/* A Hugging Face directory, or a GGUF file. */
static td_status load_dir(const char *path, const td_model_params *params, td_model **out) {
    if (!td_is_dir(path)) {
        if (td_file_exists(path) && td_gguf_sniff(path)) return load_gguf_file(path, params, out);
        if (td_file_exists(path))
            return td_fail(TD_ERR_UNSUPPORTED,
                           "%s: expected a Hugging Face model directory (config.json, *.safetensors) or a GGUF file", path);
        return td_fail(TD_ERR_IO, "%s: no such model directory or file", path);
    }
    td_model *m = td_calloc(1, sizeof *m);
    loader L;
    memset(&L, 0, sizeof L);
    L.m = m;
    L.params = params;
    td_status st = TD_OK;
    char *cfg_path = td_path_join(path, "config.json"), *tok_path = td_path_join(path, "tokenizer.json");
    if (!m || !cfg_path || !tok_path || !(m->path = td_strdup(path))) {
        st = td_fail_nomem("a model");
        goto done;
    }
    if ((st = td_config_load(cfg_path, &m->cfg)) != TD_OK) goto done;
    if ((st = open_files(&L, path)) != TD_OK) goto done;
    if ((st = bind_layers(&L)) != TD_OK) goto done;
    report_unused(&L);
    if (params->adapter) {
        int n = 0;
        double scaling = 0;
        if ((st = td_adapter_apply(m, params->adapter, &n, &scaling)) != TD_OK) goto done;
        log_msg(params, 0, "merged LoRA adapter %s: %d weights, scaling %g", params->adapter, n, scaling);
    }
    if (params->load_tokenizer && td_file_exists(tok_path)) {
        if ((st = td_tokenizer_load(tok_path, &m->tok)) != TD_OK) goto done;
        if ((st = td_model_check_vocab(m->tok, m->cfg.n_vocab, tok_path)) != TD_OK) goto done;
    }
    if ((st = load_stops(m, path)) != TD_OK) goto done;
    if ((st = td_model_pack(m)) != TD_OK) goto done;
    log_msg(params, 0, "loaded %s: %s, %d layers, %lld parameters, %d file(s)", path, m->cfg.model_type,
            m->cfg.n_layer, (long long)m->n_params, m->n_files);
done:
    td_free(cfg_path);
    td_free(tok_path);
    td_strmap_free(&L.names);
    if (L.used && m)
        for (int i = 0; i < m->n_files; i++) td_free(L.used[i]);
    td_free(L.used);
    if (st != TD_OK) {
        td_model_free(m);
        return st;
    }
    *out = m;
    return TD_OK;
}

const td_tokenizer *td_model_tokenizer(const td_model *m) { return m ? m->tok : NULL; }
int32_t td_model_n_vocab(const td_model *m) { return m ? m->cfg.n_vocab : 0; }
int32_t td_model_n_embd(const td_model *m) { return m ? m->cfg.n_embd : 0; }
int64_t td_model_n_params(const td_model *m) { return m ? m->n_params : 0; }
const char *td_model_arch(const td_model *m) { return m ? m->cfg.model_type : ""; }

const char *td_model_kernels(const td_model *m) {
    return m && m->kernels ? m->kernels->name : td_kernels_best()->name;
}
int32_t td_model_n_ctx_train(const td_model *m) { return m ? m->cfg.n_ctx_train : 0; }
const char *td_model_path(const td_model *m) { return m ? m->path : ""; }
int32_t td_model_head_rows(const td_model *m) { return m ? (int32_t)m->head.rows : 0; }
int td_model_can_generate(const td_model *m) { return m && !m->pruned; }
const char *td_model_slot_map(const td_model *m) { return m && m->pruned ? m->slot_map : NULL; }
const char *td_model_chat_template(const td_model *m, const char **source) {
    if (source) *source = m && m->chat_template ? m->chat_template_source : NULL;
    return m ? m->chat_template : NULL;
}
int td_model_is_hybrid(const td_model *m) {
    if (!m) return 0;
    for (int32_t i = 0; i < m->cfg.n_layer; i++)
        if (m->cfg.layer_kind[i] == TD_LAYER_DELTANET) return 1;
    return 0;
}
const char *td_model_generation_config(const td_model *m) { return m ? m->gen_config : NULL; }
const int32_t *td_model_stop_ids(const td_model *m, int *n) {
    if (n) *n = m ? m->n_stop : 0;
    return m ? m->stop_ids : NULL;
}
