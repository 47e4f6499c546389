#include "model/config.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/arch.h"
#include "util/alloc.h"
#include "util/error.h"
#include "util/fileio.h"
#include "util/json.h"

/* One set of RoPE parameters from an object (rope_parameters or rope_scaling, or a layer type's entry): rope_type
 * default, linear or llama3 (others are refused), rope_theta, partial_rotary_factor, and what the type needs. */
td_status td_config_read_rope(const json_t *r, const char *where, td_rope_params *rp, double *partial) {
    td_status st;
    if (!json_is_object(r)) return td_fail(TD_ERR_FORMAT, "%s must be an object", where);
    const char *type = "default";
    if ((st = td_json_str(r, "rope_type", 0, where, &type)) != TD_OK) return st;
    if (!json_object_get(r, "rope_type") && json_is_string(json_object_get(r, "type")) &&
        (st = td_json_str(r, "type", 0, where, &type)) != TD_OK) /* the older key */
        return st;
    if ((st = td_json_num(r, "rope_theta", 0, where, &rp->theta)) != TD_OK) return st;
    if (partial && (st = td_json_num(r, "partial_rotary_factor", 0, where, partial)) != TD_OK) return st;
    if (strcmp(type, "default") == 0) {
        rp->type = TD_ROPE_DEFAULT;
        return TD_OK;
    }
    int llama3 = strcmp(type, "llama3") == 0;
    if (!llama3 && strcmp(type, "linear") != 0)
        return td_fail(TD_ERR_UNSUPPORTED, "%s: rope_type \"%s\" is not supported (default, linear, llama3)", where, type);
    rp->type = llama3 ? TD_ROPE_LLAMA3 : TD_ROPE_LINEAR;
    if ((st = td_json_num(r, "factor", 1, where, &rp->factor)) != TD_OK) return st;
    if (!(rp->factor > 0)) return td_fail(TD_ERR_FORMAT, "%s: factor must be positive", where);
    if (!llama3) return TD_OK;
    if ((st = td_json_num(r, "low_freq_factor", 1, where, &rp->low_freq_factor)) != TD_OK ||
        (st = td_json_num(r, "high_freq_factor", 1, where, &rp->high_freq_factor)) != TD_OK ||
        (st = td_json_i32(r, "original_max_position_embeddings", 1, where, &rp->original_ctx)) != TD_OK)
        return st;
    if (!(rp->low_freq_factor > 0 && rp->high_freq_factor > rp->low_freq_factor && rp->original_ctx > 0))
        return td_fail(TD_ERR_FORMAT, "%s: llama3 rope needs 0 < low_freq_factor < high_freq_factor and "
                       "original_max_position_embeddings > 0", where);
    return TD_OK;
}

static int all_objects(const json_t *o) {
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)o, k, v) {
        if (!json_is_object(v)) return 0;
    }
    return 1;
}

/* rope_theta lives at the top level in older files and in rope_parameters (transformers 5) in newer ones, scaling
 * in rope_scaling (older) or rope_parameters. An architecture whose rope_parameters holds one set per layer type
 * (Gemma 3) reads it itself: such an object is left alone here. */
static td_status read_rope(const json_t *c, const char *name, td_config *cfg, double *partial) {
    td_status st;
    json_t *rp = json_object_get(c, "rope_parameters");
    json_t *rs = json_object_get(c, "rope_scaling");
    if ((st = td_json_num(c, "rope_theta", 0, name, &cfg->rope[0].theta)) != TD_OK) return st;
    if ((st = td_json_num(c, "partial_rotary_factor", 0, name, partial)) != TD_OK) return st;
    const json_t *srcs[2] = {rp, rs};
    for (int i = 0; i < 2; i++) {
        const json_t *r = srcs[i];
        if (!r || json_is_null(r)) continue;
        if (json_is_object(r) && json_object_size(r) > 0 && all_objects(r)) continue; /* per layer type */
        char where[256];
        snprintf(where, sizeof where, "%s: %s", name, i == 0 ? "rope_parameters" : "rope_scaling");
        if ((st = td_config_read_rope(r, where, &cfg->rope[0], partial)) != TD_OK) return st;
    }
    return TD_OK;
}

#define POSITIVE(field, key)                                                                                     \
    do {                                                                                                         \
        if (cfg->field <= 0) return td_fail(TD_ERR_FORMAT, "%s: field \"%s\" must be positive", name, key);      \
    } while (0)

static td_status read_text_config(const json_t *c, const char *name, td_config *cfg) {
    td_status st;
    double eps = 1e-6, partial = 1.0;
    cfg->n_ctx_train = 32768;
    cfg->rope[0] = (td_rope_params){TD_ROPE_DEFAULT, 10000.0, 1.0, 0, 0, 0};
    cfg->n_rope = 1;
    cfg->head_dim = 0;
    if ((st = td_json_i32(c, "vocab_size", 1, name, &cfg->n_vocab)) != TD_OK ||
        (st = td_json_i32(c, "hidden_size", 1, name, &cfg->n_embd)) != TD_OK ||
        (st = td_json_i32(c, "num_hidden_layers", 1, name, &cfg->n_layer)) != TD_OK ||
        (st = td_json_i32(c, "num_attention_heads", 1, name, &cfg->n_head)) != TD_OK ||
        (st = td_json_i32(c, "intermediate_size", 1, name, &cfg->n_ff)) != TD_OK ||
        (st = td_json_i32(c, "max_position_embeddings", 0, name, &cfg->n_ctx_train)) != TD_OK ||
        (st = td_json_i32(c, "head_dim", 0, name, &cfg->head_dim)) != TD_OK ||
        (st = td_json_num(c, "rms_norm_eps", 0, name, &eps)) != TD_OK)
        return st;
    cfg->n_head_kv = cfg->n_head;
    if ((st = td_json_i32(c, "num_key_value_heads", 0, name, &cfg->n_head_kv)) != TD_OK) return st;
    POSITIVE(n_vocab, "vocab_size");
    POSITIVE(n_embd, "hidden_size");
    POSITIVE(n_layer, "num_hidden_layers");
    POSITIVE(n_head, "num_attention_heads");
    POSITIVE(n_head_kv, "num_key_value_heads");
    POSITIVE(n_ff, "intermediate_size");
    POSITIVE(n_ctx_train, "max_position_embeddings");
    if (cfg->n_layer > TD_MAX_LAYERS)
        return td_fail(TD_ERR_UNSUPPORTED, "%s: %d layers exceed the limit of %d", name, cfg->n_layer, TD_MAX_LAYERS);
    if (cfg->head_dim == 0) {
        if (cfg->n_embd % cfg->n_head)
            return td_fail(TD_ERR_FORMAT, "%s: no head_dim and hidden_size %% num_attention_heads != 0", name);
        cfg->head_dim = cfg->n_embd / cfg->n_head;
    }
    POSITIVE(head_dim, "head_dim");
    if (cfg->head_dim % 2) return td_fail(TD_ERR_FORMAT, "%s: head_dim %d must be even", name, cfg->head_dim);
    if (cfg->n_head / cfg->n_head_kv > TD_MAX_GQA_GROUP)
        return td_fail(TD_ERR_UNSUPPORTED, "%s: more than %d query heads per key/value head", name, TD_MAX_GQA_GROUP);
    if (cfg->n_head % cfg->n_head_kv)
        return td_fail(TD_ERR_FORMAT, "%s: num_attention_heads %d is not a multiple of num_key_value_heads %d", name,
                       cfg->n_head, cfg->n_head_kv);
    if (cfg->n_vocab > (1 << 24) || cfg->n_embd > (1 << 16) || cfg->n_ff > (1 << 18) || cfg->head_dim > TD_MAX_HEAD_DIM ||
        cfg->n_head > 1024)
        return td_fail(TD_ERR_UNSUPPORTED, "%s: sizes beyond what this engine supports", name);
    if ((st = read_rope(c, name, cfg, &partial)) != TD_OK) return st;
    if (!(cfg->rope[0].theta > 0)) return td_fail(TD_ERR_FORMAT, "%s: rope_theta must be positive", name);
    if (!(partial > 0 && partial <= 1)) return td_fail(TD_ERR_FORMAT, "%s: partial_rotary_factor must be in (0, 1]", name);
    cfg->rotary_dim = (int32_t)(cfg->head_dim * partial);
    cfg->rotary_dim -= cfg->rotary_dim % 2;
    if (cfg->rotary_dim <= 0) return td_fail(TD_ERR_FORMAT, "%s: rotary dimension is 0", name);
    if (!(eps > 0 && eps < 1)) return td_fail(TD_ERR_FORMAT, "%s: rms_norm_eps must be in (0, 1)", name);
    cfg->rms_eps = (float)eps;
    cfg->attn_scalar = cfg->head_dim;
    cfg->attn_scale = (float)(1.0 / sqrt((double)cfg->head_dim));
    return TD_OK;
}

td_status td_config_parse(const char *json, size_t len, const char *name, td_config *cfg) {
    memset(cfg, 0, sizeof *cfg);
    json_t *root;
    td_status st = td_json_load_bytes(json, len, name, &root);
    if (st != TD_OK) return st;
    if (!json_is_object(root)) {
        json_decref(root);
        return td_fail(TD_ERR_FORMAT, "%s: top level must be an object", name);
    }
    const char *mt = NULL;
    st = td_json_str(root, "model_type", 1, name, &mt);
    if (st == TD_OK) {
        snprintf(cfg->model_type, sizeof cfg->model_type, "%s", mt);
        cfg->arch = td_arch_of_model_type(mt);
        if (!cfg->arch)
            st = td_fail(TD_ERR_UNSUPPORTED, "%s: model_type \"%s\" is not supported (%s)", name, mt,
                         td_arch_model_types());
    }
    if (st == TD_OK) {
        /* a vision-language checkpoint keeps its text model's settings in text_config and its tensors under
         * model.language_model.; a text-only save is flat, under model. */
        const json_t *text = root, *tc = json_object_get(root, "text_config");
        if (json_is_object(tc)) text = tc;
        snprintf(cfg->tensor_prefix, sizeof cfg->tensor_prefix, text == root ? "model." : "model.language_model.");
        char tname[160];
        int tied = 0;
        snprintf(tname, sizeof tname, "%s%s", name, text == root ? "" : " text_config");
        st = read_text_config(text, tname, cfg);
        if (st == TD_OK) st = cfg->arch->read_config(root, text, mt, tname, cfg);
        /* transformers 5.17 ties lm_head to the embedding when the model class's own config says so: the TOP-LEVEL
         * tie_word_embeddings, also in a vision-language config (text_config's flag is not read), false when absent
         * (the default of Qwen3Config, Qwen3_5Config and Qwen3_5TextConfig). The loader still unties a head that the
         * files store with other values than the embedding (model_load.c, untie_stored_head). */
        if (st == TD_OK) st = td_json_bool(root, "tie_word_embeddings", 0, name, &tied);
        cfg->tied = tied;
    }
    json_decref(root);
    return st;
}

td_status td_config_load(const char *path, td_config *cfg) {
    char *data;
    size_t len;
    td_status st = td_read_file(path, &data, &len);
    if (st != TD_OK) return st;
    st = td_config_parse(data, len, path, cfg);
    td_free(data);
    return st;
}
