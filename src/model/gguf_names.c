#include "model/gguf_names.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct {
    const char *hf, *gguf;
} layer_names[] = {
    {"input_layernorm.weight", "attn_norm.weight"},   {"post_attention_layernorm.weight", "ffn_norm.weight"},
    {"self_attn.q_proj.weight", "attn_q.weight"},     {"self_attn.k_proj.weight", "attn_k.weight"},
    {"self_attn.v_proj.weight", "attn_v.weight"},     {"self_attn.o_proj.weight", "attn_output.weight"},
    {"self_attn.q_norm.weight", "attn_q_norm.weight"}, {"self_attn.k_norm.weight", "attn_k_norm.weight"},
    {"mlp.gate_proj.weight", "ffn_gate.weight"},      {"mlp.up_proj.weight", "ffn_up.weight"},
    {"mlp.down_proj.weight", "ffn_down.weight"},
};

int td_gguf_name_of(const char *hf, td_arch arch, char *out, size_t n) {
    (void)arch;
    if (strcmp(hf, "model.embed_tokens.weight") == 0) return snprintf(out, n, "token_embd.weight") < 0;
    if (strcmp(hf, "model.norm.weight") == 0) return snprintf(out, n, "output_norm.weight") < 0;
    if (strcmp(hf, "lm_head.weight") == 0) return snprintf(out, n, "output.weight") < 0;
    if (strncmp(hf, "model.layers.", 13) != 0) return -1;
    char *end;
    long il = strtol(hf + 13, &end, 10);
    if (end == hf + 13 || *end != '.') return -1;
    for (size_t i = 0; i < sizeof layer_names / sizeof layer_names[0]; i++)
        if (strcmp(end + 1, layer_names[i].hf) == 0) return snprintf(out, n, "blk.%ld.%s", il, layer_names[i].gguf) < 0;
    return -1;
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
