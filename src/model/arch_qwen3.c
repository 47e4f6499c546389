/* Qwen3 (model_type "qwen3"; llama.cpp's "qwen3"), as transformers 5.17 computes it (MODELS.md):
 *   x = embed[token]
 *   per layer: x += o(Attention(RoPE(RMSNorm_q(q(h))), RoPE(RMSNorm_k(k(h))), v(h))),  h = RMSNorm_in(x)
 *              x += down(silu(gate(h)) * up(h)),                                       h = RMSNorm_post(x)
 *   logits = head(RMSNorm_final(x))
 * No biases, plain RMSNorm (x * w), per-head q/k norms before RoPE, GQA. */
#include "model/arch.h"
#include "model/arch_gguf.h"

#define A (1u << TD_LAYER_ATTENTION)

static const td_tensor_def tensors[] = {
    {TD_T_EMBED, 0, 0, "embed_tokens.weight", "token_embd.weight", {TD_DIM_VOCAB, TD_DIM_EMBD}},
    {TD_W_MIX_NORM, A, TD_T_VECTOR | TD_T_NORM, "input_layernorm.weight", "attn_norm.weight", {TD_DIM_EMBD}},
    {TD_W_Q, A, 0, "self_attn.q_proj.weight", "attn_q.weight", {TD_DIM_Q_ROWS, TD_DIM_EMBD}},
    {TD_W_K, A, 0, "self_attn.k_proj.weight", "attn_k.weight", {TD_DIM_KV_ROWS, TD_DIM_EMBD}},
    {TD_W_V, A, 0, "self_attn.v_proj.weight", "attn_v.weight", {TD_DIM_KV_ROWS, TD_DIM_EMBD}},
    {TD_W_O, A, 0, "self_attn.o_proj.weight", "attn_output.weight", {TD_DIM_EMBD, TD_DIM_ATT}},
    {TD_W_Q_NORM, A, TD_T_VECTOR | TD_T_NORM, "self_attn.q_norm.weight", "attn_q_norm.weight", {TD_DIM_HEAD}},
    {TD_W_K_NORM, A, TD_T_VECTOR | TD_T_NORM, "self_attn.k_norm.weight", "attn_k_norm.weight", {TD_DIM_HEAD}},
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
    TD_HEAD_NORM(Q, Q_NORM),     /* per-head RMSNorm, before RoPE */
    TD_HEAD_NORM(K, K_NORM),
    TD_ROPE(Q),
    TD_ROPE(K),
    TD_STORE_KV,                 /* k, v into each token's cache cell */
    TD_ATTENTION,                /* att [T, Hq * hd] over positions 0..pos */
    TD_MATMUL(XB, ATT, O),       /* xb  [T, d] */
    TD_RESIDUAL(XB, "attention"),/* x  += xb */
    TD_KEEP_OUTPUTS,             /* last layer: only the output tokens' rows go on */
    TD_NORM(XB, X, MLP_NORM),    /* xb  = RMSNorm_post(x) */
    TD_MATMUL(FF_G, XB, GATE),   /* gate [T, ff] */
    TD_MATMUL(FF_U, XB, UP),     /* up   [T, ff] */
    TD_GLU,                      /* gate = silu(gate) * up */
    TD_MATMUL(XB, FF_G, DOWN),   /* xb  [T, d] */
    TD_RESIDUAL(XB, "MLP"),      /* x  += xb */
};

static const char *const model_types[] = {"qwen3", NULL};

static td_status read_config(const json_t *root, const json_t *text, const char *model_type, const char *name,
                             td_config *cfg) {
    (void)root, (void)text, (void)model_type, (void)name;
    snprintf(cfg->tensor_prefix, sizeof cfg->tensor_prefix, "model.");
    return TD_OK;
}

/* The config.json a Qwen3 GGUF stands for. */
static td_status gguf_config(const td_gguf *g, int64_t n_vocab, int64_t n_embd, int tied, json_t *cfg, int32_t *n_rot) {
    (void)n_rot;
    td_status st = td_arch_gguf_common(g, "qwen3", cfg);
    if (st != TD_OK) return st;
    int64_t hd = json_integer_value(json_object_get(cfg, "head_dim")), vlen = -1, rot = -1;
    if ((st = td_gguf_get_int(g, "qwen3.attention.value_length", 0, &vlen)) != TD_OK ||
        (st = td_gguf_get_int(g, "qwen3.rope.dimension_count", 0, &rot)) != TD_OK)
        return st;
    if ((vlen >= 0 && hd && vlen != hd) || (rot >= 0 && hd && rot != hd))
        return td_fail(TD_ERR_UNSUPPORTED, "%s: qwen3 with value_length or rope.dimension_count different from key_length",
                       g->map.path);
    json_object_set_new(cfg, "model_type", json_string("qwen3"));
    return td_arch_gguf_sizes(g, "qwen3", n_vocab, n_embd, tied, cfg);
}

static td_status gguf_keys(td_gguf_writer *w, const td_model *m, uint32_t file_type) {
    const td_config *c = &m->cfg;
    td_status st = td_arch_gguf_put_sizes(w, "qwen3", c);
    if (st == TD_OK) st = td_arch_gguf_put_u32(w, "qwen3", "attention.key_length", c->head_dim);
    if (st == TD_OK) st = td_arch_gguf_put_u32(w, "qwen3", "attention.value_length", c->head_dim);
    if (st == TD_OK) st = td_arch_gguf_put_f32(w, "qwen3", "rope.freq_base", c->rope[0].theta);
    if (st == TD_OK) st = td_arch_gguf_put_f32(w, "qwen3", "attention.layer_norm_rms_epsilon", c->rms_eps);
    if (st == TD_OK) st = td_gguf_add_u32(w, "general.file_type", file_type);
    if (st == TD_OK && td_dtype_is_block(td_arch_gguf_file_dtype(file_type)))
        st = td_gguf_add_u32(w, "general.quantization_version", 2);
    return st;
}

const td_arch_desc td_arch_qwen3 = {
    .name = "qwen3",
    .model_types = model_types,
    .gguf_arch = "qwen3",
    .tensors = tensors,
    .n_tensors = sizeof tensors / sizeof tensors[0],
    .layers = {[TD_LAYER_ATTENTION] = {attention_layer, sizeof attention_layer / sizeof attention_layer[0]}},
    .read_config = read_config,
    .gguf_config = gguf_config,
    .gguf_keys = gguf_keys,
    .gguf_bos = "<|endoftext|>",
};
