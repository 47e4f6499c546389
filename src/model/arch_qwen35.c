/* Qwen3.5 (model_type "qwen3_5" with text_config for the vision-language checkpoints, "qwen3_5_text" or a flat
 * "qwen3_5" for text-only saves; llama.cpp's "qwen35"), as transformers 5.17 computes it (MODELS.md). Two kinds of
 * layer, both followed by the SwiGLU MLP:
 *   full attention   gated: q_proj yields per head a query and a gate; att * sigmoid(gate) before o_proj; partial
 *                    RoPE over the first rotary dims
 *   Gated DeltaNet   in_proj_qkv / z / b / a, a causal depthwise conv, the delta-rule recurrence, a gated RMSNorm
 *                    (plain w), out_proj
 * Every other norm is zero-centred: it scales by (1 + w). Layer i is full attention when layer_types says so, or
 * (without layer_types) when (i + 1) % full_attention_interval == 0. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "model/arch.h"
#include "model/arch_gguf.h"
#include "util/json.h"

#define A (1u << TD_LAYER_ATTENTION)
#define D (1u << TD_LAYER_DELTANET)
#define NORM_V (TD_T_VECTOR | TD_T_NORM | TD_T_GGUF_PLUS_ONE)
#define VHEADS (TD_T_VHEAD_ROWS | TD_T_VHEAD_UNIT)

static const td_tensor_def tensors[] = {
    {TD_T_EMBED, 0, 0, "embed_tokens.weight", "token_embd.weight", {TD_DIM_VOCAB, TD_DIM_EMBD}},
    {TD_W_MIX_NORM, A | D, NORM_V, "input_layernorm.weight", "attn_norm.weight", {TD_DIM_EMBD}},
    {TD_W_Q, A, 0, "self_attn.q_proj.weight", "attn_q.weight", {TD_DIM_Q_ROWS, TD_DIM_EMBD}},
    {TD_W_K, A, 0, "self_attn.k_proj.weight", "attn_k.weight", {TD_DIM_KV_ROWS, TD_DIM_EMBD}},
    {TD_W_V, A, 0, "self_attn.v_proj.weight", "attn_v.weight", {TD_DIM_KV_ROWS, TD_DIM_EMBD}},
    {TD_W_O, A, 0, "self_attn.o_proj.weight", "attn_output.weight", {TD_DIM_EMBD, TD_DIM_ATT}},
    {TD_W_Q_NORM, A, NORM_V, "self_attn.q_norm.weight", "attn_q_norm.weight", {TD_DIM_HEAD}},
    {TD_W_K_NORM, A, NORM_V, "self_attn.k_norm.weight", "attn_k_norm.weight", {TD_DIM_HEAD}},
    {TD_W_DN_QKV, D, TD_T_VHEAD_ROWS | TD_T_VHEAD_V_PART, "linear_attn.in_proj_qkv.weight", "attn_qkv.weight",
     {TD_DIM_DN_CONV, TD_DIM_EMBD}},
    {TD_W_DN_Z, D, TD_T_VHEAD_ROWS, "linear_attn.in_proj_z.weight", "attn_gate.weight", {TD_DIM_DN_VALUE, TD_DIM_EMBD}},
    {TD_W_DN_B, D, VHEADS, "linear_attn.in_proj_b.weight", "ssm_beta.weight", {TD_DIM_DN_HV, TD_DIM_EMBD}},
    {TD_W_DN_A, D, VHEADS, "linear_attn.in_proj_a.weight", "ssm_alpha.weight", {TD_DIM_DN_HV, TD_DIM_EMBD}},
    {TD_W_DN_CONV, D, TD_T_VECTOR | TD_T_GGUF_SQUEEZE | TD_T_VHEAD_ROWS | TD_T_VHEAD_V_PART, "linear_attn.conv1d.weight",
     "ssm_conv1d.weight", {TD_DIM_DN_CONV, TD_DIM_ONE, TD_DIM_DN_KERNEL}},
    {TD_W_DN_DT_BIAS, D, TD_T_VECTOR | VHEADS, "linear_attn.dt_bias", "ssm_dt.bias", {TD_DIM_DN_HV}},
    {TD_W_DN_A_LOG, D, TD_T_VECTOR | TD_T_GGUF_NEG_EXP | VHEADS, "linear_attn.A_log", "ssm_a", {TD_DIM_DN_HV}},
    {TD_W_DN_NORM, D, TD_T_VECTOR | TD_T_NORM | TD_T_PLAIN_NORM, "linear_attn.norm.weight", "ssm_norm.weight",
     {TD_DIM_DN_DV}},
    {TD_W_DN_OUT, D, TD_T_VHEAD_COLS, "linear_attn.out_proj.weight", "ssm_out.weight", {TD_DIM_EMBD, TD_DIM_DN_VALUE}},
    {TD_W_GATE, A | D, 0, "mlp.gate_proj.weight", "ffn_gate.weight", {TD_DIM_FF, TD_DIM_EMBD}},
    {TD_W_UP, A | D, 0, "mlp.up_proj.weight", "ffn_up.weight", {TD_DIM_FF, TD_DIM_EMBD}},
    {TD_W_DOWN, A | D, 0, "mlp.down_proj.weight", "ffn_down.weight", {TD_DIM_EMBD, TD_DIM_FF}},
    {TD_W_MLP_NORM, A | D, NORM_V, "post_attention_layernorm.weight", "post_attention_norm.weight", {TD_DIM_EMBD}},
    {TD_T_FINAL_NORM, 0, NORM_V, "norm.weight", "output_norm.weight", {TD_DIM_EMBD}},
    {TD_T_HEAD, 0, 0, "lm_head.weight", "output.weight", {TD_DIM_VOCAB, TD_DIM_EMBD}},
};

static const td_step attention_layer[] = {
    TD_NORM(XB, X, MIX_NORM),     /* xb  = RMSNorm_in(x), (1 + w)   [T, d] */
    TD_MATMUL(Q, XB, Q),          /* q   [T, Hq, 2hd]: per head [query | gate] */
    TD_MATMUL(K, XB, K),          /* k   [T, Hkv, hd] */
    TD_MATMUL(V, XB, V),          /* v   [T, Hkv, hd] */
    TD_HEAD_NORM(Q, Q_NORM),      /* the query half of each head */
    TD_HEAD_NORM(K, K_NORM),
    TD_ROPE(Q),                   /* partial: the first rotary_dim dims */
    TD_ROPE(K),
    TD_STORE_KV,
    TD_ATTENTION,                 /* att [T, Hq * hd] */
    TD_OUT_GATE,                  /* att *= sigmoid(gate) */
    TD_MATMUL(XB, ATT, O),        /* xb  [T, d] */
    TD_RESIDUAL(XB, "attention"),
    TD_KEEP_OUTPUTS,
    TD_NORM(XB, X, MLP_NORM),
    TD_MATMUL(FF_G, XB, GATE),
    TD_MATMUL(FF_U, XB, UP),
    TD_GLU,
    TD_MATMUL(XB, FF_G, DOWN),
    TD_RESIDUAL(XB, "MLP"),
};

static const td_step deltanet_layer[] = {
    TD_NORM(XB, X, MIX_NORM),          /* xb  = RMSNorm_in(x), (1 + w)   [T, d] */
    TD_MATMUL(DN_QKV, XB, DN_QKV),     /* qkv [T, conv_dim] */
    TD_MATMUL(DN_Z, XB, DN_Z),         /* z   [T, Hv, dv] */
    TD_MATMUL(DN_B, XB, DN_B),         /* b   [T, Hv] */
    TD_MATMUL(DN_A, XB, DN_A),         /* a   [T, Hv] */
    TD_DELTANET,                       /* core [T, Hv, dv]: conv, recurrence, gated norm */
    TD_MATMUL(XB, DN_CORE, DN_OUT),    /* xb  [T, d] */
    TD_RESIDUAL(XB, "DeltaNet"),
    TD_KEEP_OUTPUTS,
    TD_NORM(XB, X, MLP_NORM),
    TD_MATMUL(FF_G, XB, GATE),
    TD_MATMUL(FF_U, XB, UP),
    TD_GLU,
    TD_MATMUL(XB, FF_G, DOWN),
    TD_RESIDUAL(XB, "MLP"),
};

static const char *const model_types[] = {"qwen3_5", "qwen3_5_text", NULL};

static td_status read_layer_types(const json_t *c, const char *name, td_config *cfg) {
    json_t *lt = json_object_get(c, "layer_types");
    int32_t interval = 4;
    td_status st = td_json_i32(c, "full_attention_interval", 0, name, &interval);
    if (st != TD_OK) return st;
    if (lt && !json_is_null(lt)) {
        if (!json_is_array(lt))
            return td_fail(TD_ERR_FORMAT, "%s: field \"layer_types\" must be an array", name);
        if ((int32_t)json_array_size(lt) != cfg->n_layer)
            return td_fail(TD_ERR_FORMAT, "%s: field \"layer_types\" has %zu entries but num_hidden_layers is %d",
                           name, json_array_size(lt), cfg->n_layer);
        for (int32_t i = 0; i < cfg->n_layer; i++) {
            const char *s = json_string_value(json_array_get(lt, (size_t)i));
            if (s && strcmp(s, "full_attention") == 0) cfg->layer_kind[i] = TD_LAYER_ATTENTION;
            else if (s && strcmp(s, "linear_attention") == 0) cfg->layer_kind[i] = TD_LAYER_DELTANET;
            else
                return td_fail(TD_ERR_FORMAT,
                               "%s: layer_types[%d] must be \"full_attention\" or \"linear_attention\"", name, i);
        }
        return TD_OK;
    }
    if (interval < 1) return td_fail(TD_ERR_FORMAT, "%s: full_attention_interval must be >= 1", name);
    for (int32_t i = 0; i < cfg->n_layer; i++)
        cfg->layer_kind[i] = (i + 1) % interval == 0 ? TD_LAYER_ATTENTION : TD_LAYER_DELTANET;
    return TD_OK;
}

#define POSITIVE(field, key)                                                                                     \
    do {                                                                                                         \
        if (cfg->field <= 0) return td_fail(TD_ERR_FORMAT, "%s: field \"%s\" must be positive", name, key);      \
    } while (0)

static td_status read_config(const json_t *root, const json_t *text, const char *model_type, const char *name,
                             td_config *cfg) {
    (void)root, (void)model_type;
    td_status st;
    cfg->zero_centred_norms = 1;
    cfg->attn_output_gate = 1;
    cfg->lin_conv_kernel = 4;
    if ((st = td_json_i32(text, "linear_num_key_heads", 1, name, &cfg->lin_n_k_heads)) != TD_OK ||
        (st = td_json_i32(text, "linear_num_value_heads", 1, name, &cfg->lin_n_v_heads)) != TD_OK ||
        (st = td_json_i32(text, "linear_key_head_dim", 1, name, &cfg->lin_k_dim)) != TD_OK ||
        (st = td_json_i32(text, "linear_value_head_dim", 1, name, &cfg->lin_v_dim)) != TD_OK ||
        (st = td_json_i32(text, "linear_conv_kernel_dim", 0, name, &cfg->lin_conv_kernel)) != TD_OK)
        return st;
    POSITIVE(lin_n_k_heads, "linear_num_key_heads");
    POSITIVE(lin_n_v_heads, "linear_num_value_heads");
    POSITIVE(lin_k_dim, "linear_key_head_dim");
    POSITIVE(lin_v_dim, "linear_value_head_dim");
    POSITIVE(lin_conv_kernel, "linear_conv_kernel_dim");
    if (cfg->lin_n_v_heads % cfg->lin_n_k_heads)
        return td_fail(TD_ERR_FORMAT, "%s: linear_num_value_heads %d is not a multiple of linear_num_key_heads %d",
                       name, cfg->lin_n_v_heads, cfg->lin_n_k_heads);
    if (cfg->lin_k_dim > TD_MAX_HEAD_DIM || cfg->lin_v_dim > TD_MAX_HEAD_DIM || cfg->lin_conv_kernel > 64)
        return td_fail(TD_ERR_UNSUPPORTED, "%s: DeltaNet sizes beyond what this engine supports", name);
    return read_layer_types(text, name, cfg);
}

/* The config.json a Qwen3.5 ("qwen35") GGUF stands for, in the text-only form (model_type qwen3_5_text, tensors
 * under "model."). Keys as llama.cpp reads them (src/models/qwen35.cpp, llama-model.cpp); *n_rot is
 * rope.dimension_count, which config.json can only express as a factor of head_dim. */
static td_status gguf_config(const td_gguf *g, int64_t n_vocab, int64_t n_embd_tensor, int tied, json_t *cfg,
                             int32_t *n_rot) {
    static const struct {
        const char *key, *field;
        int required;
    } ints[] = {{"qwen35.embedding_length", "hidden_size", 1},
                {"qwen35.context_length", "max_position_embeddings", 1},
                {"qwen35.feed_forward_length", "intermediate_size", 1},
                {"qwen35.attention.head_count", "num_attention_heads", 1},
                {"qwen35.attention.head_count_kv", "num_key_value_heads", 0},
                {"qwen35.attention.key_length", "head_dim", 0},
                {"qwen35.ssm.conv_kernel", "linear_conv_kernel_dim", 1},
                {"qwen35.ssm.state_size", "linear_key_head_dim", 1},
                {"qwen35.ssm.group_count", "linear_num_key_heads", 1},
                {"qwen35.ssm.time_step_rank", "linear_num_value_heads", 1}};
    const char *path = g->map.path;
    td_status st;
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) {
        int64_t v = -1;
        if ((st = td_arch_gguf_count(g, ints[i].key, ints[i].required, &v)) != TD_OK) return st;
        if (v >= 0) json_object_set_new(cfg, ints[i].field, json_integer(v));
    }
    int64_t n_embd = json_integer_value(json_object_get(cfg, "hidden_size"));
    int64_t n_head = json_integer_value(json_object_get(cfg, "num_attention_heads"));
    int64_t hv = json_integer_value(json_object_get(cfg, "linear_num_value_heads"));
    /* llama.cpp's defaults: key_length n_embd / n_head, rope.dimension_count key_length, interval 4 */
    int64_t hd = json_object_get(cfg, "head_dim") ? json_integer_value(json_object_get(cfg, "head_dim")) : n_embd / n_head;
    if (hd < 1)
        return td_fail(TD_ERR_FORMAT, "%s: no qwen35.attention.key_length and embedding_length < head_count", path);
    int64_t blocks = 0, nextn = 0, inner = 0, vlen = hd, rot = hd, interval = 4;
    if ((st = td_arch_gguf_count(g, "qwen35.block_count", 1, &blocks)) != TD_OK ||
        (st = td_gguf_get_int(g, "qwen35.nextn_predict_layers", 0, &nextn)) != TD_OK ||
        (st = td_arch_gguf_count(g, "qwen35.ssm.inner_size", 1, &inner)) != TD_OK ||
        (st = td_arch_gguf_count(g, "qwen35.attention.value_length", 0, &vlen)) != TD_OK ||
        (st = td_arch_gguf_count(g, "qwen35.rope.dimension_count", 0, &rot)) != TD_OK ||
        (st = td_arch_gguf_count(g, "qwen35.full_attention_interval", 0, &interval)) != TD_OK)
        return st;
    /* block_count counts the multi-token-prediction blocks the converter keeps after the text layers */
    if (nextn < 0 || nextn >= blocks)
        return td_fail(TD_ERR_FORMAT, "%s: qwen35.nextn_predict_layers %lld leaves no text layers of qwen35.block_count %lld",
                       path, (long long)nextn, (long long)blocks);
    int64_t n_layer = blocks - nextn;
    if (n_layer > TD_MAX_LAYERS)
        return td_fail(TD_ERR_UNSUPPORTED, "%s: qwen35.block_count %lld exceeds the limit of %d layers", path,
                       (long long)blocks, TD_MAX_LAYERS);
    if (vlen != hd)
        return td_fail(TD_ERR_UNSUPPORTED, "%s: qwen35.attention.value_length %lld differs from key_length %lld", path,
                       (long long)vlen, (long long)hd);
    if (rot % 2 || rot > hd)
        return td_fail(TD_ERR_FORMAT, "%s: qwen35.rope.dimension_count %lld must be even and at most key_length %lld",
                       path, (long long)rot, (long long)hd);
    if (inner % hv)
        return td_fail(TD_ERR_FORMAT, "%s: qwen35.ssm.inner_size %lld is not a multiple of qwen35.ssm.time_step_rank %lld",
                       path, (long long)inner, (long long)hv);
    float eps = 1e-6f, theta = 10000.0f;
    if ((st = td_gguf_get_f32(g, "qwen35.attention.layer_norm_rms_epsilon", 1, &eps)) != TD_OK ||
        (st = td_gguf_get_f32(g, "qwen35.rope.freq_base", 0, &theta)) != TD_OK)
        return st;
    /* which layers are Gated DeltaNet: attention.recurrent_layers (one flag per block) wins over the interval */
    json_t *types = json_array();
    const td_gguf_kv *rec = td_gguf_find(g, "qwen35.attention.recurrent_layers");
    if (rec && (rec->type != TD_GGUF_ARRAY || rec->elem_type == TD_GGUF_STRING || rec->elem_type == TD_GGUF_F32 ||
                rec->elem_type == TD_GGUF_F64 || rec->n != (uint64_t)blocks)) {
        json_decref(types);
        return td_fail(TD_ERR_FORMAT, "%s: metadata qwen35.attention.recurrent_layers must be one integer flag per block "
                       "(qwen35.block_count %lld)", path, (long long)blocks);
    }
    for (int64_t i = 0; i < n_layer; i++) {
        int recurrent = rec ? td_gguf_array_int(rec, (uint64_t)i) != 0 : (i + 1) % interval != 0;
        json_array_append_new(types, json_string(recurrent ? "linear_attention" : "full_attention"));
    }
    json_t *rope = json_object();
    json_object_set_new(rope, "rope_type", json_string("default"));
    json_object_set_new(rope, "rope_theta", json_real(theta));
    json_object_set_new(rope, "partial_rotary_factor", json_real((double)rot / (double)hd));
    json_object_set_new(cfg, "rope_parameters", rope);
    json_object_set_new(cfg, "layer_types", types);
    json_object_set_new(cfg, "model_type", json_string("qwen3_5_text"));
    json_object_set_new(cfg, "num_hidden_layers", json_integer(n_layer));
    json_object_set_new(cfg, "linear_value_head_dim", json_integer(inner / hv));
    json_object_set_new(cfg, "vocab_size", json_integer(n_vocab));
    json_object_set_new(cfg, "rms_norm_eps", json_real(eps));
    json_object_set_new(cfg, "tie_word_embeddings", json_boolean(tied));
    if (n_embd != n_embd_tensor)
        return td_fail(TD_ERR_FORMAT, "%s: token_embd.weight rows have %lld values but qwen35.embedding_length is %lld",
                       path, (long long)n_embd_tensor, (long long)n_embd);
    *n_rot = (int32_t)rot;
    return TD_OK;
}

/* qwen35.rope.dimension_sections: mrope_section padded with 0 to 4 entries, [11, 11, 10, 0] when the config has
 * none (the converter's default, and Qwen3.5's). Text never uses it (all position axes are equal), but llama.cpp
 * requires the key. From a GGUF source, its own key. */
static void rope_sections(const td_model *m, int32_t sec[4]) {
    static const int32_t dflt[4] = {11, 11, 10, 0};
    memcpy(sec, dflt, sizeof dflt);
    const td_gguf_kv *kv = m->gguf ? td_gguf_find(m->gguf, "qwen35.rope.dimension_sections") : NULL;
    if (kv && kv->type == TD_GGUF_ARRAY && kv->n == 4 && kv->elem_type != TD_GGUF_STRING)
        for (int i = 0; i < 4; i++) sec[i] = (int32_t)td_gguf_array_int(kv, (uint64_t)i);
    json_t *cfg = td_arch_dir_json(m->path, "config.json");
    const json_t *tc = td_arch_text_config(cfg);
    json_t *ms = json_object_get(json_object_get(tc, "rope_parameters"), "mrope_section");
    if (!json_is_array(ms)) ms = json_object_get(json_object_get(tc, "rope_scaling"), "mrope_section");
    if (json_is_array(ms) && json_array_size(ms) <= 4) {
        memset(sec, 0, 4 * sizeof *sec);
        for (size_t i = 0; i < json_array_size(ms); i++) sec[i] = (int32_t)json_integer_value(json_array_get(ms, i));
    }
    json_decref(cfg);
}

/* qwen35.full_attention_interval, as the layer kinds show it: layer i is attention iff (i + 1) % k == 0. 0 when
 * no interval gives the pattern (then attention.recurrent_layers lists it). */
static int32_t attention_interval(const td_config *c) {
    for (int32_t k = 1; k <= c->n_layer + 1; k++) {
        int ok = 1;
        for (int32_t i = 0; i < c->n_layer && ok; i++)
            ok = (c->layer_kind[i] == TD_LAYER_ATTENTION) == ((i + 1) % k == 0);
        if (ok) return k;
    }
    return 0;
}

/* The keys in the order llama.cpp's converter writes them. */
static td_status gguf_keys(td_gguf_writer *w, const td_model *m, uint32_t file_type) {
    const td_config *c = &m->cfg;
    const char *a = "qwen35";
    td_status st = td_arch_gguf_put_sizes(w, a, c); /* no multi-token-prediction blocks: no nextn_predict_layers */
    int32_t sec[4];
    rope_sections(m, sec);
    if (st == TD_OK) st = td_gguf_add_i32_array(w, "qwen35.rope.dimension_sections", sec, 4);
    if (st == TD_OK) st = td_arch_gguf_put_f32(w, a, "rope.freq_base", c->rope[0].theta);
    if (st == TD_OK) st = td_arch_gguf_put_f32(w, a, "attention.layer_norm_rms_epsilon", c->rms_eps);
    if (st == TD_OK) st = td_arch_gguf_put_u32(w, a, "attention.key_length", c->head_dim);
    if (st == TD_OK) st = td_arch_gguf_put_u32(w, a, "attention.value_length", c->head_dim);
    if (st == TD_OK) st = td_gguf_add_u32(w, "general.file_type", file_type);
    if (st == TD_OK) st = td_arch_gguf_put_u32(w, a, "ssm.conv_kernel", c->lin_conv_kernel);
    if (st == TD_OK) st = td_arch_gguf_put_u32(w, a, "ssm.state_size", c->lin_k_dim);
    if (st == TD_OK) st = td_arch_gguf_put_u32(w, a, "ssm.group_count", c->lin_n_k_heads);
    if (st == TD_OK) st = td_arch_gguf_put_u32(w, a, "ssm.time_step_rank", c->lin_n_v_heads);
    if (st == TD_OK) st = td_arch_gguf_put_u32(w, a, "ssm.inner_size", (int64_t)c->lin_v_dim * c->lin_n_v_heads);
    int32_t interval = attention_interval(c);
    if (st == TD_OK) st = td_arch_gguf_put_u32(w, a, "full_attention_interval", interval ? interval : 4);
    if (!interval) { /* layer_types with no period: one flag per layer, which llama.cpp reads first */
        int32_t rec[TD_MAX_LAYERS];
        for (int32_t i = 0; i < c->n_layer; i++) rec[i] = c->layer_kind[i] == TD_LAYER_DELTANET;
        if (st == TD_OK) st = td_gguf_add_i32_array(w, "qwen35.attention.recurrent_layers", rec, (uint64_t)c->n_layer);
    }
    if (st == TD_OK) st = td_arch_gguf_put_u32(w, a, "rope.dimension_count", c->rotary_dim);
    /* the converter always writes it; llama.cpp does not read it */
    if (st == TD_OK) st = td_gguf_add_u32(w, "general.quantization_version", 2);
    return st;
}

const td_arch_desc td_arch_qwen35 = {
    .name = "qwen3_5",
    .model_types = model_types,
    .gguf_arch = "qwen35",
    .tensors = tensors,
    .n_tensors = sizeof tensors / sizeof tensors[0],
    .layers = {[TD_LAYER_ATTENTION] = {attention_layer, sizeof attention_layer / sizeof attention_layer[0]},
               [TD_LAYER_DELTANET] = {deltanet_layer, sizeof deltanet_layer / sizeof deltanet_layer[0]}},
    .read_config = read_config,
    .gguf_config = gguf_config,
    .gguf_keys = gguf_keys,
    .gguf_bos = NULL,
};
