/* Gemma 3's text model (model_type "gemma3_text", or "gemma3" with text_config for the vision-language checkpoints;
 * llama.cpp's "gemma3"), as transformers 5.17 computes it:
 *   x = embed[token] * sqrt(hidden_size)                       (the scale as fp32)
 *   per layer: x += RMSNorm_post_attn(o(Attention(RoPE(RMSNorm_q(q(h))), RoPE(RMSNorm_k(k(h))), v(h)))),
 *                                                               h = RMSNorm_in(x)
 *              x += RMSNorm_post_ffw(down(gelu_tanh(gate(h)) * up(h))),  h = RMSNorm_pre_ffw(x)
 *   logits = head(RMSNorm_final(x))
 * Every norm scales by (1 + w). Scores are scaled by query_pre_attn_scalar^-0.5 (not head_dim's). Layers are
 * "sliding_attention" (a token attends to its last sliding_window positions, RoPE from the sliding set's theta, 10000
 * in the published models) or "full_attention" (every position, the full set's theta and scaling), by layer_types
 * (else every sixth layer is full). llama.cpp stores the norms as 1 + w, rotates half-split pairs as transformers does,
 * and has no key for query_pre_attn_scalar (it scales by 1 / sqrt(key_length), 1 / sqrt(hidden / heads) for the 62-layer
 * model): this library writes its own (typedecide.query_pre_attn_scalar) and follows llama.cpp without it. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "model/arch.h"
#include "model/arch_gguf.h"
#include "util/json.h"

#define A (1u << TD_LAYER_ATTENTION)
#define NORM_V (TD_T_VECTOR | TD_T_NORM | TD_T_GGUF_PLUS_ONE)

static const td_tensor_def tensors[] = {
    {TD_T_EMBED, 0, 0, "embed_tokens.weight", "token_embd.weight", {TD_DIM_VOCAB, TD_DIM_EMBD}},
    {TD_W_MIX_NORM, A, NORM_V, "input_layernorm.weight", "attn_norm.weight", {TD_DIM_EMBD}},
    {TD_W_Q, A, 0, "self_attn.q_proj.weight", "attn_q.weight", {TD_DIM_Q_ROWS, TD_DIM_EMBD}},
    {TD_W_K, A, 0, "self_attn.k_proj.weight", "attn_k.weight", {TD_DIM_KV_ROWS, TD_DIM_EMBD}},
    {TD_W_V, A, 0, "self_attn.v_proj.weight", "attn_v.weight", {TD_DIM_KV_ROWS, TD_DIM_EMBD}},
    {TD_W_O, A, 0, "self_attn.o_proj.weight", "attn_output.weight", {TD_DIM_EMBD, TD_DIM_ATT}},
    {TD_W_Q_NORM, A, NORM_V, "self_attn.q_norm.weight", "attn_q_norm.weight", {TD_DIM_HEAD}},
    {TD_W_K_NORM, A, NORM_V, "self_attn.k_norm.weight", "attn_k_norm.weight", {TD_DIM_HEAD}},
    {TD_W_MIX_POST_NORM, A, NORM_V, "post_attention_layernorm.weight", "post_attention_norm.weight", {TD_DIM_EMBD}},
    {TD_W_MLP_NORM, A, NORM_V, "pre_feedforward_layernorm.weight", "ffn_norm.weight", {TD_DIM_EMBD}},
    {TD_W_GATE, A, 0, "mlp.gate_proj.weight", "ffn_gate.weight", {TD_DIM_FF, TD_DIM_EMBD}},
    {TD_W_UP, A, 0, "mlp.up_proj.weight", "ffn_up.weight", {TD_DIM_FF, TD_DIM_EMBD}},
    {TD_W_DOWN, A, 0, "mlp.down_proj.weight", "ffn_down.weight", {TD_DIM_EMBD, TD_DIM_FF}},
    {TD_W_MLP_POST_NORM, A, NORM_V, "post_feedforward_layernorm.weight", "post_ffw_norm.weight", {TD_DIM_EMBD}},
    {TD_T_FINAL_NORM, 0, NORM_V, "norm.weight", "output_norm.weight", {TD_DIM_EMBD}},
    {TD_T_HEAD, 0, 0, "lm_head.weight", "output.weight", {TD_DIM_VOCAB, TD_DIM_EMBD}},
};

static const td_step attention_layer[] = {
    TD_NORM(XB, X, MIX_NORM),          /* xb  = RMSNorm_in(x), (1 + w)      [T, d] */
    TD_MATMUL(Q, XB, Q),               /* q   [T, Hq, hd] */
    TD_MATMUL(K, XB, K),               /* k   [T, Hkv, hd] */
    TD_MATMUL(V, XB, V),               /* v   [T, Hkv, hd] */
    TD_HEAD_NORM(Q, Q_NORM),
    TD_HEAD_NORM(K, K_NORM),
    TD_ROPE(Q),                        /* the layer's set: sliding or full */
    TD_ROPE(K),
    TD_STORE_KV,
    TD_ATTENTION,                      /* att [T, Hq * hd]: the window's positions, or all */
    TD_MATMUL(XB, ATT, O),             /* xb  [T, d] */
    TD_NORM(XB, XB, MIX_POST_NORM),    /* xb  = RMSNorm_post_attn(xb) */
    TD_RESIDUAL(XB, "attention"),
    TD_KEEP_OUTPUTS,
    TD_NORM(XB, X, MLP_NORM),          /* xb  = RMSNorm_pre_ffw(x) */
    TD_MATMUL(FF_G, XB, GATE),
    TD_MATMUL(FF_U, XB, UP),
    TD_GLU,                            /* gate = gelu_tanh(gate) * up */
    TD_MATMUL(XB, FF_G, DOWN),
    TD_NORM(XB, XB, MLP_POST_NORM),    /* xb  = RMSNorm_post_ffw(xb) */
    TD_RESIDUAL(XB, "MLP"),
};

static const char *const model_types[] = {"gemma3", "gemma3_text", NULL};

enum { FULL = 0, SLIDING = 1 }; /* the RoPE sets */

static td_status read_layers(const json_t *text, const char *name, td_config *cfg) {
    td_status st;
    int32_t window = 4096, pattern = 6;
    if ((st = td_json_i32(text, "sliding_window", 0, name, &window)) != TD_OK) return st;
    if (window < 1) return td_fail(TD_ERR_FORMAT, "%s: sliding_window must be positive", name);
    if ((st = td_json_i32(text, "sliding_window_pattern", 0, name, &pattern)) != TD_OK ||
        (st = td_json_i32(text, "_sliding_window_pattern", 0, name, &pattern)) != TD_OK)
        return st;
    json_t *lt = json_object_get(text, "layer_types");
    if (lt && !json_is_null(lt) && (!json_is_array(lt) || (int32_t)json_array_size(lt) != cfg->n_layer))
        return td_fail(TD_ERR_FORMAT, "%s: layer_types must list num_hidden_layers (%d) entries", name, cfg->n_layer);
    for (int32_t i = 0; i < cfg->n_layer; i++) {
        int sliding = pattern > 0 && (i + 1) % pattern != 0;
        if (json_is_array(lt)) {
            const char *s = json_string_value(json_array_get(lt, (size_t)i));
            if (s && strcmp(s, "sliding_attention") == 0) sliding = 1;
            else if (s && strcmp(s, "full_attention") == 0) sliding = 0;
            else
                return td_fail(TD_ERR_FORMAT, "%s: layer_types[%d] must be \"sliding_attention\" or \"full_attention\"",
                               name, i);
        }
        cfg->layer_window[i] = sliding ? window : 0;
        cfg->layer_rope[i] = sliding ? SLIDING : FULL;
    }
    return TD_OK;
}

/* rope_parameters per layer type ({"sliding_attention": {...}, "full_attention": {...}}), or the older flat
 * rope_theta / rope_scaling (the full set, read by config.c) with rope_local_base_freq (the sliding set's theta). */
static td_status read_rope_sets(const json_t *text, const char *name, td_config *cfg) {
    td_status st;
    cfg->n_rope = 2;
    cfg->rope[SLIDING] = (td_rope_params){TD_ROPE_DEFAULT, 10000.0, 1.0, 0, 0, 0};
    if ((st = td_json_num(text, "rope_local_base_freq", 0, name, &cfg->rope[SLIDING].theta)) != TD_OK) return st;
    json_t *rp = json_object_get(text, "rope_parameters");
    const char *keys[2] = {"full_attention", "sliding_attention"};
    for (int set = 0; set < 2; set++) {
        json_t *r = json_object_get(rp, keys[set]);
        if (!r) continue;
        char where[200];
        snprintf(where, sizeof where, "%s: rope_parameters.%s", name, keys[set]);
        if ((st = td_config_read_rope(r, where, &cfg->rope[set], NULL)) != TD_OK) return st;
    }
    for (int set = 0; set < 2; set++)
        if (!(cfg->rope[set].theta > 0)) return td_fail(TD_ERR_FORMAT, "%s: a rope_theta must be positive", name);
    return TD_OK;
}

static td_status read_config(const json_t *root, const json_t *text, const char *model_type, const char *name,
                             td_config *cfg) {
    (void)root, (void)model_type;
    td_status st;
    const char *act = "gelu_pytorch_tanh";
    double qpas = 0;
    int bias = 0, bidir = 0;
    if ((st = td_json_str(text, "hidden_activation", 0, name, &act)) != TD_OK ||
        (st = td_json_num(text, "query_pre_attn_scalar", 0, name, &qpas)) != TD_OK ||
        (st = td_json_bool(text, "attention_bias", 0, name, &bias)) != TD_OK ||
        (st = td_json_bool(text, "use_bidirectional_attention", 0, name, &bidir)) != TD_OK)
        return st;
    if (strcmp(act, "gelu_pytorch_tanh") != 0)
        return td_fail(TD_ERR_UNSUPPORTED, "%s: hidden_activation \"%s\" is not supported (gelu_pytorch_tanh)", name, act);
    static const char *const caps[] = {"final_logit_softcapping", "attn_logit_softcapping"};
    for (int i = 0; i < 2; i++) {
        json_t *v = json_object_get(text, caps[i]);
        if (v && !json_is_null(v))
            return td_fail(TD_ERR_UNSUPPORTED, "%s: %s is not supported (Gemma 3 has none)", name, caps[i]);
    }
    if (bias || bidir)
        return td_fail(TD_ERR_UNSUPPORTED, "%s: gemma3 with %s is not supported", name,
                       bias ? "attention_bias" : "use_bidirectional_attention");
    cfg->zero_centred_norms = 1;
    cfg->glu_act = TD_GLU_GELU_TANH;
    cfg->embed_scale = (float)sqrt((double)cfg->n_embd); /* torch.tensor(hidden_size ** 0.5): fp32 */
    if (qpas == 0) qpas = cfg->head_dim;
    if (!(qpas > 0)) return td_fail(TD_ERR_FORMAT, "%s: query_pre_attn_scalar must be positive", name);
    cfg->attn_scalar = qpas;
    cfg->attn_scale = (float)pow(qpas, -0.5); /* a Python float, rounded to fp32 where it meets the scores */
    if ((st = read_layers(text, name, cfg)) != TD_OK) return st;
    return read_rope_sets(text, name, cfg);
}

/* The config.json a gemma3 GGUF stands for, with llama.cpp's reading of it (src/models/gemma3.cpp): with
 * attention.sliding_window, layers whose (index % period) < period - 1 slide (period attention.sliding_window_pattern,
 * else 6), their RoPE theta rope.freq_base_swa (else 10000). */
static td_status gguf_config(const td_gguf *g, int64_t n_vocab, int64_t n_embd, int tied, json_t *cfg, int32_t *n_rot) {
    (void)n_rot;
    const char *path = g->map.path;
    td_status st = td_arch_gguf_common(g, "gemma3", cfg);
    if (st != TD_OK) return st;
    int64_t layers = json_integer_value(json_object_get(cfg, "num_hidden_layers")), window = 0, period = 6;
    int64_t n_head = json_integer_value(json_object_get(cfg, "num_attention_heads"));
    int64_t hd = json_object_get(cfg, "head_dim") ? json_integer_value(json_object_get(cfg, "head_dim"))
                                                   : (n_head > 0 ? n_embd / n_head : 0);
    float base_swa = 10000.0f, softcap = 0.0f, qpas = 0.0f;
    if ((st = td_gguf_get_int(g, "gemma3.attention.sliding_window", 0, &window)) != TD_OK ||
        (st = td_gguf_get_int(g, "gemma3.attention.sliding_window_pattern", 0, &period)) != TD_OK ||
        (st = td_gguf_get_f32(g, "gemma3.rope.freq_base_swa", 0, &base_swa)) != TD_OK ||
        (st = td_gguf_get_f32(g, "gemma3.final_logit_softcapping", 0, &softcap)) != TD_OK ||
        (st = td_gguf_get_f32(g, "typedecide.query_pre_attn_scalar", 0, &qpas)) != TD_OK)
        return st;
    if (softcap != 0.0f) return td_fail(TD_ERR_UNSUPPORTED, "%s: gemma3.final_logit_softcapping is not supported", path);
    if (period < 1) return td_fail(TD_ERR_FORMAT, "%s: gemma3.attention.sliding_window_pattern must be >= 1", path);
    json_t *types = json_array();
    for (int64_t i = 0; i < layers; i++)
        json_array_append_new(types, json_string(window > 0 && i % period < period - 1 ? "sliding_attention" : "full_attention"));
    json_object_set_new(cfg, "layer_types", types);
    json_object_set_new(cfg, "sliding_window", json_integer(window > 0 ? window : 4096));
    json_t *rp = json_object(), *full = json_object(), *swa = json_object();
    float theta = 10000.0f;
    if ((st = td_gguf_get_f32(g, "gemma3.rope.freq_base", 0, &theta)) != TD_OK) {
        json_decref(rp), json_decref(full), json_decref(swa);
        return st;
    }
    json_object_set_new(full, "rope_type", json_string("default"));
    json_object_set_new(full, "rope_theta", json_real(theta));
    if (td_gguf_find(g, "gemma3.rope.scaling.factor")) { /* linear, on the full layers (Gemma 3 4B and up) */
        float f = 1.0f;
        if ((st = td_gguf_get_f32(g, "gemma3.rope.scaling.factor", 1, &f)) != TD_OK) {
            json_decref(rp), json_decref(full), json_decref(swa);
            return st;
        }
        json_object_set_new(full, "rope_type", json_string("linear"));
        json_object_set_new(full, "factor", json_real(f));
    }
    json_object_set_new(swa, "rope_type", json_string("default"));
    json_object_set_new(swa, "rope_theta", json_real(base_swa));
    json_object_set_new(rp, "full_attention", full);
    json_object_set_new(rp, "sliding_attention", swa);
    json_object_set_new(cfg, "rope_parameters", rp);
    /* llama.cpp: 1 / sqrt(key_length), and for its 27B model (62 layers) 1 / sqrt(hidden / heads) */
    if (qpas <= 0.0f) qpas = (float)(layers == 62 && n_head > 0 ? n_embd / n_head : hd);
    json_object_set_new(cfg, "query_pre_attn_scalar", json_real(qpas));
    json_object_set_new(cfg, "hidden_activation", json_string("gelu_pytorch_tanh"));
    json_object_set_new(cfg, "model_type", json_string("gemma3_text"));
    return td_arch_gguf_sizes(g, "gemma3", n_vocab, n_embd, tied, cfg);
}

/* The sliding-window period the layers follow (layer i full iff (i + 1) % period == 0), or 0 when none does. */
static int32_t window_period(const td_config *c) {
    for (int32_t p = 1; p <= c->n_layer + 1; p++) {
        int ok = 1;
        for (int32_t i = 0; i < c->n_layer && ok; i++) ok = (c->layer_window[i] == 0) == ((i + 1) % p == 0);
        if (ok) return p;
    }
    return 0;
}

static td_status gguf_keys(td_gguf_writer *w, const td_model *m, uint32_t file_type) {
    const td_config *c = &m->cfg;
    const char *a = "gemma3";
    int32_t window = 0, period = window_period(c);
    for (int32_t i = 0; i < c->n_layer; i++)
        if (c->layer_window[i]) window = c->layer_window[i];
    if (!period)
        return td_fail(TD_ERR_UNSUPPORTED, "%s: its sliding-window layers follow no period, which llama.cpp's gemma3 "
                       "cannot say", m->path);
    td_status st = td_arch_gguf_put_sizes(w, a, c);
    if (st == TD_OK && c->rope[FULL].type == TD_ROPE_LINEAR) {
        if ((st = td_gguf_add_str(w, "gemma3.rope.scaling.type", "linear", 6)) == TD_OK)
            st = td_arch_gguf_put_f32(w, a, "rope.scaling.factor", c->rope[FULL].factor);
    }
    if (st == TD_OK) st = td_arch_gguf_put_f32(w, a, "rope.freq_base", c->rope[FULL].theta);
    if (st == TD_OK) st = td_arch_gguf_put_f32(w, a, "rope.freq_base_swa", c->rope[SLIDING].theta);
    if (st == TD_OK) st = td_arch_gguf_put_f32(w, a, "attention.layer_norm_rms_epsilon", c->rms_eps);
    if (st == TD_OK) st = td_arch_gguf_put_u32(w, a, "attention.key_length", c->head_dim);
    if (st == TD_OK) st = td_arch_gguf_put_u32(w, a, "attention.value_length", c->head_dim);
    if (st == TD_OK) st = td_gguf_add_u32(w, "general.file_type", file_type);
    if (st == TD_OK && window) st = td_arch_gguf_put_u32(w, a, "attention.sliding_window", window);
    if (st == TD_OK && window && period != 6) st = td_arch_gguf_put_u32(w, a, "attention.sliding_window_pattern", period);
    /* the score scale as query_pre_attn_scalar: llama.cpp reads none (see above) */
    if (st == TD_OK) st = td_gguf_add_f32(w, "typedecide.query_pre_attn_scalar", (float)c->attn_scalar);
    if (st == TD_OK && td_dtype_is_block(td_arch_gguf_file_dtype(file_type)))
        st = td_gguf_add_u32(w, "general.quantization_version", 2);
    return st;
}

const td_arch_desc td_arch_gemma3 = {
    .name = "gemma3",
    .model_types = model_types,
    .gguf_arch = "gemma3",
    .tensors = tensors,
    .n_tensors = sizeof tensors / sizeof tensors[0],
    .layers = {[TD_LAYER_ATTENTION] = {attention_layer, sizeof attention_layer / sizeof attention_layer[0]}},
    .read_config = read_config,
    .gguf_config = gguf_config,
    .gguf_keys = gguf_keys,
    .gguf_bos = NULL,
};
