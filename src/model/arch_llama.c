/* Llama (model_type "llama": Llama 3.x, SmolLM2 and other Llama-shaped checkpoints; llama.cpp's "llama"), as
 * transformers 5.17 computes it:
 *   x = embed[token]
 *   per layer: x += o(Attention(RoPE(q(h)), RoPE(k(h)), v(h))),  h = RMSNorm_in(x)
 *              x += down(silu(gate(h)) * up(h)),                 h = RMSNorm_post(x)
 *   logits = head(RMSNorm_final(x))
 * Plain RMSNorm (x * w), no q/k norms, no biases (attention_bias and mlp_bias true are refused), GQA, NeoX RoPE with
 * the config's scaling (Llama 3.1's "llama3", or "linear"). llama.cpp rotates interleaved pairs instead, so its
 * converter permutes q_proj's and k_proj's rows within each head (TD_T_GGUF_ROPE_PERM), and stores Llama 3.1's
 * scaling as frequency factors (rope_freqs.weight, gguf_model.c and export.c). */
#include <string.h>

#include "model/arch.h"
#include "model/arch_gguf.h"
#include "util/json.h"

#define A (1u << TD_LAYER_ATTENTION)

static const td_tensor_def tensors[] = {
    {TD_T_EMBED, 0, 0, "embed_tokens.weight", "token_embd.weight", {TD_DIM_VOCAB, TD_DIM_EMBD}},
    {TD_W_MIX_NORM, A, TD_T_VECTOR | TD_T_NORM, "input_layernorm.weight", "attn_norm.weight", {TD_DIM_EMBD}},
    {TD_W_Q, A, TD_T_GGUF_ROPE_PERM, "self_attn.q_proj.weight", "attn_q.weight", {TD_DIM_Q_ROWS, TD_DIM_EMBD}},
    {TD_W_K, A, TD_T_GGUF_ROPE_PERM, "self_attn.k_proj.weight", "attn_k.weight", {TD_DIM_KV_ROWS, TD_DIM_EMBD}},
    {TD_W_V, A, 0, "self_attn.v_proj.weight", "attn_v.weight", {TD_DIM_KV_ROWS, TD_DIM_EMBD}},
    {TD_W_O, A, 0, "self_attn.o_proj.weight", "attn_output.weight", {TD_DIM_EMBD, TD_DIM_ATT}},
    {TD_W_GATE, A, 0, "mlp.gate_proj.weight", "ffn_gate.weight", {TD_DIM_FF, TD_DIM_EMBD}},
    {TD_W_UP, A, 0, "mlp.up_proj.weight", "ffn_up.weight", {TD_DIM_FF, TD_DIM_EMBD}},
    {TD_W_DOWN, A, 0, "mlp.down_proj.weight", "ffn_down.weight", {TD_DIM_EMBD, TD_DIM_FF}},
    {TD_W_MLP_NORM, A, TD_T_VECTOR | TD_T_NORM, "post_attention_layernorm.weight", "ffn_norm.weight", {TD_DIM_EMBD}},
    {TD_T_FINAL_NORM, 0, TD_T_VECTOR | TD_T_NORM, "norm.weight", "output_norm.weight", {TD_DIM_EMBD}},
    {TD_T_HEAD, 0, 0, "lm_head.weight", "output.weight", {TD_DIM_VOCAB, TD_DIM_EMBD}},
};

static const td_step attention_layer[] = {
    TD_NORM(XB, X, MIX_NORM),    /* xb  = RMSNorm_in(x)           [T, d] */
    TD_MATMUL(Q, XB, Q),         /* q   [T, Hq, hd] */
    TD_MATMUL(K, XB, K),         /* k   [T, Hkv, hd] */
    TD_MATMUL(V, XB, V),         /* v   [T, Hkv, hd] */
    TD_ROPE(Q),
    TD_ROPE(K),
    TD_STORE_KV,
    TD_ATTENTION,                /* att [T, Hq * hd] over positions 0..pos */
    TD_MATMUL(XB, ATT, O),       /* xb  [T, d] */
    TD_RESIDUAL(XB, "attention"),
    TD_KEEP_OUTPUTS,
    TD_NORM(XB, X, MLP_NORM),    /* xb  = RMSNorm_post(x) */
    TD_MATMUL(FF_G, XB, GATE),
    TD_MATMUL(FF_U, XB, UP),
    TD_GLU,                      /* gate = silu(gate) * up */
    TD_MATMUL(XB, FF_G, DOWN),
    TD_RESIDUAL(XB, "MLP"),
};

static const char *const model_types[] = {"llama", NULL};

static td_status read_config(const json_t *root, const json_t *text, const char *model_type, const char *name,
                             td_config *cfg) {
    (void)root, (void)model_type, (void)cfg;
    int attn_bias = 0, mlp_bias = 0;
    td_status st;
    if ((st = td_json_bool(text, "attention_bias", 0, name, &attn_bias)) != TD_OK ||
        (st = td_json_bool(text, "mlp_bias", 0, name, &mlp_bias)) != TD_OK)
        return st;
    if (attn_bias || mlp_bias)
        return td_fail(TD_ERR_UNSUPPORTED, "%s: llama with %s is not supported", name,
                       attn_bias ? "attention_bias" : "mlp_bias");
    return TD_OK;
}

/* The config.json a llama GGUF stands for: the common keys, rope.dimension_count = key_length (llama.cpp's llama
 * rotates whole heads), linear rope scaling from rope.scaling.*; Llama 3.1's factors are a tensor the loader reads. */
static td_status gguf_config(const td_gguf *g, int64_t n_vocab, int64_t n_embd, int tied, json_t *cfg, int32_t *n_rot) {
    (void)n_rot;
    td_status st = td_arch_gguf_common(g, "llama", cfg);
    if (st != TD_OK) return st;
    int64_t n_head = json_integer_value(json_object_get(cfg, "num_attention_heads")), rot = -1;
    int64_t hd = json_object_get(cfg, "head_dim") ? json_integer_value(json_object_get(cfg, "head_dim"))
                                                   : (n_head > 0 ? json_integer_value(json_object_get(cfg, "hidden_size")) / n_head : 0);
    if ((st = td_gguf_get_int(g, "llama.rope.dimension_count", 0, &rot)) != TD_OK) return st;
    if (rot >= 0 && rot != hd)
        return td_fail(TD_ERR_UNSUPPORTED, "%s: llama.rope.dimension_count %lld differs from the head size %lld",
                       g->map.path, (long long)rot, (long long)hd);
    const char *type;
    uint64_t tl;
    if (td_gguf_find(g, "llama.rope.scaling.type")) {
        if ((st = td_gguf_get_str(g, "llama.rope.scaling.type", 1, &type, &tl)) != TD_OK) return st;
        float factor = 1.0f;
        if (tl == 6 && memcmp(type, "linear", 6) == 0) {
            if ((st = td_gguf_get_f32(g, "llama.rope.scaling.factor", 1, &factor)) != TD_OK) return st;
            json_t *rp = json_object();
            json_object_set_new(rp, "rope_type", json_string("linear"));
            json_object_set_new(rp, "factor", json_real(factor));
            json_object_set_new(cfg, "rope_scaling", rp);
        } else if (!(tl == 4 && memcmp(type, "none", 4) == 0)) {
            return td_fail(TD_ERR_UNSUPPORTED, "%s: llama.rope.scaling.type \"%.*s\" is not supported (none, linear)",
                           g->map.path, (int)(tl < 32 ? tl : 32), type);
        }
    }
    json_object_set_new(cfg, "model_type", json_string("llama"));
    return td_arch_gguf_sizes(g, "llama", n_vocab, n_embd, tied, cfg);
}

/* In the order llama.cpp's converter writes them (TextModel, then LlamaModel's own). */
static td_status gguf_keys(td_gguf_writer *w, const td_model *m, uint32_t file_type) {
    const td_config *c = &m->cfg;
    const char *a = "llama";
    td_status st = td_arch_gguf_put_sizes(w, a, c);
    if (st == TD_OK && c->rope[0].type == TD_ROPE_LINEAR) {
        if ((st = td_gguf_add_str(w, "llama.rope.scaling.type", "linear", 6)) == TD_OK)
            st = td_arch_gguf_put_f32(w, a, "rope.scaling.factor", c->rope[0].factor);
    }
    if (st == TD_OK) st = td_arch_gguf_put_f32(w, a, "rope.freq_base", c->rope[0].theta);
    if (st == TD_OK) st = td_arch_gguf_put_f32(w, a, "attention.layer_norm_rms_epsilon", c->rms_eps);
    if (st == TD_OK) st = td_arch_gguf_put_u32(w, a, "attention.key_length", c->head_dim);
    if (st == TD_OK) st = td_arch_gguf_put_u32(w, a, "attention.value_length", c->head_dim);
    if (st == TD_OK) st = td_gguf_add_u32(w, "general.file_type", file_type);
    if (st == TD_OK) st = td_arch_gguf_put_u32(w, a, "vocab_size", c->n_vocab);
    if (st == TD_OK) st = td_arch_gguf_put_u32(w, a, "rope.dimension_count", c->rotary_dim);
    if (st == TD_OK && td_dtype_is_block(td_arch_gguf_file_dtype(file_type)))
        st = td_gguf_add_u32(w, "general.quantization_version", 2);
    return st;
}

const td_arch_desc td_arch_llama = {
    .name = "llama",
    .model_types = model_types,
    .gguf_arch = "llama",
    .tensors = tensors,
    .n_tensors = sizeof tensors / sizeof tensors[0],
    .layers = {[TD_LAYER_ATTENTION] = {attention_layer, sizeof attention_layer / sizeof attention_layer[0]}},
    .read_config = read_config,
    .gguf_config = gguf_config,
    .gguf_keys = gguf_keys,
    .gguf_bos = NULL,
};
