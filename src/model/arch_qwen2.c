/* Qwen2 and Qwen2.5 (model_type "qwen2"; llama.cpp's "qwen2"), as transformers 5.17 computes it: Llama's layer with
 * biases on the q, k and v projections (added after each product) and no q/k norms:
 *   per layer: x += o(Attention(RoPE(q(h) + bq), RoPE(k(h) + bk), v(h) + bv)),  h = RMSNorm_in(x)
 *              x += down(silu(gate(h)) * up(h)),                                 h = RMSNorm_post(x)
 * NeoX RoPE in llama.cpp too (no row permutation). Sliding-window attention (use_sliding_window) is refused. */
#include "model/arch.h"
#include "model/arch_gguf.h"
#include "util/json.h"

#define A (1u << TD_LAYER_ATTENTION)

static const td_tensor_def tensors[] = {
    {TD_T_EMBED, 0, 0, "embed_tokens.weight", "token_embd.weight", {TD_DIM_VOCAB, TD_DIM_EMBD}},
    {TD_W_MIX_NORM, A, TD_T_VECTOR | TD_T_NORM, "input_layernorm.weight", "attn_norm.weight", {TD_DIM_EMBD}},
    {TD_W_Q, A, 0, "self_attn.q_proj.weight", "attn_q.weight", {TD_DIM_Q_ROWS, TD_DIM_EMBD}},
    {TD_W_Q_BIAS, A, TD_T_VECTOR, "self_attn.q_proj.bias", "attn_q.bias", {TD_DIM_Q_ROWS}},
    {TD_W_K, A, 0, "self_attn.k_proj.weight", "attn_k.weight", {TD_DIM_KV_ROWS, TD_DIM_EMBD}},
    {TD_W_K_BIAS, A, TD_T_VECTOR, "self_attn.k_proj.bias", "attn_k.bias", {TD_DIM_KV_ROWS}},
    {TD_W_V, A, 0, "self_attn.v_proj.weight", "attn_v.weight", {TD_DIM_KV_ROWS, TD_DIM_EMBD}},
    {TD_W_V_BIAS, A, TD_T_VECTOR, "self_attn.v_proj.bias", "attn_v.bias", {TD_DIM_KV_ROWS}},
    {TD_W_O, A, 0, "self_attn.o_proj.weight", "attn_output.weight", {TD_DIM_EMBD, TD_DIM_ATT}},
    {TD_W_GATE, A, 0, "mlp.gate_proj.weight", "ffn_gate.weight", {TD_DIM_FF, TD_DIM_EMBD}},
    {TD_W_UP, A, 0, "mlp.up_proj.weight", "ffn_up.weight", {TD_DIM_FF, TD_DIM_EMBD}},
    {TD_W_DOWN, A, 0, "mlp.down_proj.weight", "ffn_down.weight", {TD_DIM_EMBD, TD_DIM_FF}},
    {TD_W_MLP_NORM, A, TD_T_VECTOR | TD_T_NORM, "post_attention_layernorm.weight", "ffn_norm.weight", {TD_DIM_EMBD}},
    {TD_T_FINAL_NORM, 0, TD_T_VECTOR | TD_T_NORM, "norm.weight", "output_norm.weight", {TD_DIM_EMBD}},
    {TD_T_HEAD, 0, 0, "lm_head.weight", "output.weight", {TD_DIM_VOCAB, TD_DIM_EMBD}},
};

static const td_step attention_layer[] = {
    TD_NORM(XB, X, MIX_NORM),            /* xb  = RMSNorm_in(x)           [T, d] */
    TD_MATMUL_BIAS(Q, XB, Q, Q_BIAS),    /* q   [T, Hq, hd] = xb Wq^T + bq */
    TD_MATMUL_BIAS(K, XB, K, K_BIAS),    /* k   [T, Hkv, hd] */
    TD_MATMUL_BIAS(V, XB, V, V_BIAS),    /* v   [T, Hkv, hd] */
    TD_ROPE(Q),
    TD_ROPE(K),
    TD_STORE_KV,
    TD_ATTENTION,                        /* att [T, Hq * hd] */
    TD_MATMUL(XB, ATT, O),               /* xb  [T, d] */
    TD_RESIDUAL(XB, "attention"),
    TD_KEEP_OUTPUTS,
    TD_NORM(XB, X, MLP_NORM),
    TD_MATMUL(FF_G, XB, GATE),
    TD_MATMUL(FF_U, XB, UP),
    TD_GLU,
    TD_MATMUL(XB, FF_G, DOWN),
    TD_RESIDUAL(XB, "MLP"),
};

static const char *const model_types[] = {"qwen2", NULL};

static td_status read_config(const json_t *root, const json_t *text, const char *model_type, const char *name,
                             td_config *cfg) {
    (void)root, (void)model_type, (void)cfg;
    int sliding = 0;
    td_status st = td_json_bool(text, "use_sliding_window", 0, name, &sliding);
    if (st == TD_OK && sliding)
        st = td_fail(TD_ERR_UNSUPPORTED, "%s: qwen2 with use_sliding_window true is not supported", name);
    return st;
}

static td_status gguf_config(const td_gguf *g, int64_t n_vocab, int64_t n_embd, int tied, json_t *cfg, int32_t *n_rot) {
    (void)n_rot;
    td_status st = td_arch_gguf_common(g, "qwen2", cfg);
    if (st != TD_OK) return st;
    json_object_set_new(cfg, "model_type", json_string("qwen2"));
    return td_arch_gguf_sizes(g, "qwen2", n_vocab, n_embd, tied, cfg);
}

static td_status gguf_keys(td_gguf_writer *w, const td_model *m, uint32_t file_type) {
    const td_config *c = &m->cfg;
    td_status st = td_arch_gguf_put_sizes(w, "qwen2", c);
    if (st == TD_OK) st = td_arch_gguf_put_f32(w, "qwen2", "rope.freq_base", c->rope[0].theta);
    if (st == TD_OK) st = td_arch_gguf_put_f32(w, "qwen2", "attention.layer_norm_rms_epsilon", c->rms_eps);
    if (st == TD_OK) st = td_gguf_add_u32(w, "general.file_type", file_type);
    if (st == TD_OK && td_dtype_is_block(td_arch_gguf_file_dtype(file_type)))
        st = td_gguf_add_u32(w, "general.quantization_version", 2);
    return st;
}

const td_arch_desc td_arch_qwen2 = {
    .name = "qwen2",
    .model_types = model_types,
    .gguf_arch = "qwen2",
    .tensors = tensors,
    .n_tensors = sizeof tensors / sizeof tensors[0],
    .layers = {[TD_LAYER_ATTENTION] = {attention_layer, sizeof attention_layer / sizeof attention_layer[0]}},
    .read_config = read_config,
    .gguf_config = gguf_config,
    .gguf_keys = gguf_keys,
    .gguf_bos = NULL,
};
