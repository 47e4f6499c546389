#include "model/arch_gguf.h"

#include <stdio.h>
#include <stdint.h>

#include "util/alloc.h"
#include "util/fileio.h"
#include "util/json.h"

td_status td_arch_gguf_common(const td_gguf *g, const char *arch, json_t *cfg) {
    static const struct {
        const char *key, *field;
        int required;
    } ints[] = {{"embedding_length", "hidden_size", 1},
                {"block_count", "num_hidden_layers", 1},
                {"context_length", "max_position_embeddings", 1},
                {"feed_forward_length", "intermediate_size", 1},
                {"attention.head_count", "num_attention_heads", 1},
                {"attention.head_count_kv", "num_key_value_heads", 0},
                {"attention.key_length", "head_dim", 0}};
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) {
        char key[96];
        int64_t v = -1;
        snprintf(key, sizeof key, "%s.%s", arch, ints[i].key);
        td_status st = td_gguf_get_int(g, key, ints[i].required, &v);
        if (st != TD_OK) return st;
        if (v >= 0) json_object_set_new(cfg, ints[i].field, json_integer(v));
    }
    return TD_OK;
}

td_status td_arch_gguf_sizes(const td_gguf *g, const char *arch, int64_t n_vocab, int64_t n_embd, int tied, json_t *cfg) {
    char k_eps[96], k_theta[96];
    snprintf(k_eps, sizeof k_eps, "%s.attention.layer_norm_rms_epsilon", arch);
    snprintf(k_theta, sizeof k_theta, "%s.rope.freq_base", arch);
    float eps = 1e-6f, theta = 10000.0f;
    td_status st;
    if ((st = td_gguf_get_f32(g, k_eps, 1, &eps)) != TD_OK || (st = td_gguf_get_f32(g, k_theta, 0, &theta)) != TD_OK)
        return st;
    json_object_set_new(cfg, "vocab_size", json_integer(n_vocab));
    json_object_set_new(cfg, "rms_norm_eps", json_real(eps));
    json_object_set_new(cfg, "rope_theta", json_real(theta));
    json_object_set_new(cfg, "tie_word_embeddings", json_boolean(tied));
    json_int_t h = json_integer_value(json_object_get(cfg, "hidden_size"));
    if (h != n_embd)
        return td_fail(TD_ERR_FORMAT, "%s: token_embd.weight rows have %lld values but %s.embedding_length is %lld",
                       g->map.path, (long long)n_embd, arch, (long long)h);
    return TD_OK;
}

td_status td_arch_gguf_put_u32(td_gguf_writer *w, const char *arch, const char *key, int64_t v) {
    char k[96];
    snprintf(k, sizeof k, "%s.%s", arch, key);
    return td_gguf_add_u32(w, k, (uint32_t)v);
}

td_status td_arch_gguf_put_f32(td_gguf_writer *w, const char *arch, const char *key, double v) {
    char k[96];
    snprintf(k, sizeof k, "%s.%s", arch, key);
    return td_gguf_add_f32(w, k, (float)v);
}

td_status td_arch_gguf_put_sizes(td_gguf_writer *w, const char *arch, const td_config *c) {
    td_status st = td_arch_gguf_put_u32(w, arch, "block_count", c->n_layer);
    if (st == TD_OK) st = td_arch_gguf_put_u32(w, arch, "context_length", c->n_ctx_train);
    if (st == TD_OK) st = td_arch_gguf_put_u32(w, arch, "embedding_length", c->n_embd);
    if (st == TD_OK) st = td_arch_gguf_put_u32(w, arch, "feed_forward_length", c->n_ff);
    if (st == TD_OK) st = td_arch_gguf_put_u32(w, arch, "attention.head_count", c->n_head);
    if (st == TD_OK) st = td_arch_gguf_put_u32(w, arch, "attention.head_count_kv", c->n_head_kv);
    return st;
}

td_dtype td_arch_gguf_file_dtype(uint32_t file_type) {
    switch (file_type) {
    case 0: return TD_DTYPE_F32;
    case 1: return TD_DTYPE_F16;
    case 2: return TD_DTYPE_Q4_0;
    case 7: return TD_DTYPE_Q8_0;
    default: return TD_DTYPE_BF16;
    }
}

json_t *td_arch_dir_json(const char *model_path, const char *file) {
    if (!td_is_dir(model_path)) return NULL;
    char *p = td_path_join(model_path, file);
    json_t *o = NULL;
    if (p && td_json_load_file(p, &o) != TD_OK) o = NULL; /* unreadable: as absent */
    td_free(p);
    return o;
}

const json_t *td_arch_text_config(const json_t *cfg) {
    const json_t *tc = json_object_get(cfg, "text_config");
    return json_is_object(tc) ? tc : cfg;
}

td_status td_arch_gguf_count(const td_gguf *g, const char *key, int required, int64_t *out) {
    if (!required && !td_gguf_find(g, key)) return TD_OK; /* absent and optional: keep the default */
    int64_t v = -1;
    td_status st = td_gguf_get_int(g, key, 1, &v);
    if (st != TD_OK) return st;
    if (v < 1 || v > INT32_MAX)
        return td_fail(TD_ERR_FORMAT, "%s: metadata %s must be a positive count (is %lld)", g->map.path, key, (long long)v);
    *out = v;
    return TD_OK;
}
