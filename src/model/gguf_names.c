#include "model/gguf_names.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct name_pair {
    const char *hf, *gguf;
} name_pair;

/* per-layer names after "model.layers.N." -> after "blk.N." (llama.cpp's src/llama-arch.cpp) */
static const name_pair qwen3_names[] = {
    {"input_layernorm.weight", "attn_norm.weight"},   {"post_attention_layernorm.weight", "ffn_norm.weight"},
    {"self_attn.q_proj.weight", "attn_q.weight"},     {"self_attn.k_proj.weight", "attn_k.weight"},
    {"self_attn.v_proj.weight", "attn_v.weight"},     {"self_attn.o_proj.weight", "attn_output.weight"},
    {"self_attn.q_norm.weight", "attn_q_norm.weight"}, {"self_attn.k_norm.weight", "attn_k_norm.weight"},
    {"mlp.gate_proj.weight", "ffn_gate.weight"},      {"mlp.up_proj.weight", "ffn_up.weight"},
    {"mlp.down_proj.weight", "ffn_down.weight"},
};

/* qwen35: the post-attention norm is ATTN_POST_NORM for this architecture, and the DeltaNet tensors are the
 * ssm_* family; A_log becomes "ssm_a" with no ".weight" suffix, dt_bias "ssm_dt.bias". */
static const name_pair qwen35_names[] = {
    {"input_layernorm.weight", "attn_norm.weight"},
    {"post_attention_layernorm.weight", "post_attention_norm.weight"},
    {"self_attn.q_proj.weight", "attn_q.weight"},
    {"self_attn.k_proj.weight", "attn_k.weight"},
    {"self_attn.v_proj.weight", "attn_v.weight"},
    {"self_attn.o_proj.weight", "attn_output.weight"},
    {"self_attn.q_norm.weight", "attn_q_norm.weight"},
    {"self_attn.k_norm.weight", "attn_k_norm.weight"},
    {"linear_attn.in_proj_qkv.weight", "attn_qkv.weight"},
    {"linear_attn.in_proj_z.weight", "attn_gate.weight"},
    {"linear_attn.in_proj_b.weight", "ssm_beta.weight"},
    {"linear_attn.in_proj_a.weight", "ssm_alpha.weight"},
    {"linear_attn.conv1d.weight", "ssm_conv1d.weight"},
    {"linear_attn.dt_bias", "ssm_dt.bias"},
    {"linear_attn.A_log", "ssm_a"},
    {"linear_attn.norm.weight", "ssm_norm.weight"},
    {"linear_attn.out_proj.weight", "ssm_out.weight"},
    {"mlp.gate_proj.weight", "ffn_gate.weight"},
    {"mlp.up_proj.weight", "ffn_up.weight"},
    {"mlp.down_proj.weight", "ffn_down.weight"},
};

/* A vision-language checkpoint's text tensors are "model.language_model.X"; the converter strips
 * "language_model." (conversion/base.py), so they name as "model.X". */
static const char *text_name(const char *hf, char *buf, size_t n) {
    if (strncmp(hf, "model.language_model.", 21) != 0) return hf;
    snprintf(buf, n, "model.%s", hf + 21);
    return buf;
}

/* The part after "model.layers.N." (N in *il), or NULL for a name outside the layers. */
static const char *layer_part(const char *hf, long *il) {
    if (strncmp(hf, "model.layers.", 13) != 0) return NULL;
    char *end;
    *il = strtol(hf + 13, &end, 10);
    if (end == hf + 13 || *end != '.') return NULL;
    return end + 1;
}

int td_gguf_name_of(const char *hf_name, td_arch arch, char *out, size_t n) {
    char buf[256];
    const char *hf = text_name(hf_name, buf, sizeof buf);
    if (strcmp(hf, "model.embed_tokens.weight") == 0) return snprintf(out, n, "token_embd.weight") < 0;
    if (strcmp(hf, "model.norm.weight") == 0) return snprintf(out, n, "output_norm.weight") < 0;
    if (strcmp(hf, "lm_head.weight") == 0) return snprintf(out, n, "output.weight") < 0;
    long il;
    const char *part = layer_part(hf, &il);
    if (!part) return -1;
    const name_pair *t = arch == TD_ARCH_QWEN35 ? qwen35_names : qwen3_names;
    size_t nt = arch == TD_ARCH_QWEN35 ? sizeof qwen35_names / sizeof qwen35_names[0]
                                       : sizeof qwen3_names / sizeof qwen3_names[0];
    for (size_t i = 0; i < nt; i++)
        if (strcmp(part, t[i].hf) == 0) return snprintf(out, n, "blk.%ld.%s", il, t[i].gguf) < 0;
    return -1;
}

static int ends_with(const char *s, const char *suffix) {
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcmp(s + a - b, suffix) == 0;
}

void td_gguf_layout_of(const char *hf_name, const td_config *c, td_gguf_layout *out) {
    char buf[256];
    const char *hf = text_name(hf_name, buf, sizeof buf);
    memset(out, 0, sizeof *out);
    out->vhead_axis = -1;
    if (c->arch != TD_ARCH_QWEN35) return;
    /* the converter's rule, by name: "norm.weight" but not "linear_attn.norm.weight" (plain w, see MODELS.md) */
    out->plus_one = ends_with(hf, "norm.weight") && !ends_with(hf, "linear_attn.norm.weight");
    out->neg_exp = ends_with(hf, ".A_log");
    out->squeeze = ends_with(hf, ".conv1d.weight");
    long il;
    const char *part = layer_part(hf, &il);
    if (!part || strncmp(part, "linear_attn.", 12) != 0 || c->lin_n_v_heads == c->lin_n_k_heads) return;
    part += 12;
    int64_t dv = c->lin_v_dim, qk = 2 * (int64_t)c->lin_n_k_heads * c->lin_k_dim;
    if (strcmp(part, "in_proj_qkv.weight") == 0 || strcmp(part, "conv1d.weight") == 0)
        out->vhead_axis = 0, out->vhead_start = qk, out->vhead_size = dv; /* [q | k | v]: only v has value heads */
    else if (strcmp(part, "in_proj_z.weight") == 0) out->vhead_axis = 0, out->vhead_size = dv;
    else if (strcmp(part, "in_proj_a.weight") == 0 || strcmp(part, "in_proj_b.weight") == 0 ||
             strcmp(part, "A_log") == 0 || strcmp(part, "dt_bias") == 0)
        out->vhead_axis = 0, out->vhead_size = 1;
    else if (strcmp(part, "out_proj.weight") == 0) out->vhead_axis = 1, out->vhead_size = dv;
}

int64_t td_gguf_vhead_src(const td_gguf_layout *l, const td_config *c, int64_t i, int to_gguf) {
    if (l->vhead_axis < 0 || i < l->vhead_start) return i;
    int64_t k = i - l->vhead_start, j = k / l->vhead_size, hk = c->lin_n_k_heads, r = c->lin_n_v_heads / hk;
    /* HF head g*R + r sits at GGUF head r*Hk + g */
    int64_t src = to_gguf ? (j % hk) * r + j / hk  /* GGUF head j = r*Hk + g comes from HF head g*R + r */
                          : (j % r) * hk + j / r;  /* HF head j = g*R + r comes from GGUF head r*Hk + g */
    return l->vhead_start + src * l->vhead_size + k % l->vhead_size;
}

static const char qwen2_regex[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
static const char qwen35_regex[] = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| "
                                   "?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

const char *td_gguf_pre_regex(const char *pre, size_t len) {
    if (len == 5 && memcmp(pre, "qwen2", 5) == 0) return qwen2_regex;
    if (len == 6 && memcmp(pre, "qwen35", 6) == 0) return qwen35_regex;
    return NULL;
}

const char *td_gguf_pre_of_regex(const char *regex) {
    if (strcmp(regex, qwen2_regex) == 0) return "qwen2";
    if (strcmp(regex, qwen35_regex) == 0) return "qwen35";
    return NULL;
}
