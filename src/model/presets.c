/* Published shapes of the supported model families (config.json as Hugging Face ships it, text part only). */
#include <string.h>

#include "typedecide.h"

typedef struct preset {
    const char *name;
    const char *config;
} preset;

#define QWEN3(hidden, layers, heads, kv, inter, tied)                                                            \
    "{\"architectures\": [\"Qwen3ForCausalLM\"], \"model_type\": \"qwen3\", \"vocab_size\": 151936, "           \
    "\"hidden_size\": " #hidden ", \"num_hidden_layers\": " #layers ", \"num_attention_heads\": " #heads ", "    \
    "\"num_key_value_heads\": " #kv ", \"head_dim\": 128, \"intermediate_size\": " #inter ", "                  \
    "\"max_position_embeddings\": 40960, \"rms_norm_eps\": 1e-06, \"rope_theta\": 1000000, "                    \
    "\"tie_word_embeddings\": " #tied ", \"hidden_act\": \"silu\", \"attention_bias\": false, "                 \
    "\"torch_dtype\": \"bfloat16\", \"bos_token_id\": 151643, \"eos_token_id\": 151645}"

#define QWEN35(hidden, inter)                                                                                    \
    "{\"architectures\": [\"Qwen3_5ForCausalLM\"], \"model_type\": \"qwen3_5_text\", \"vocab_size\": 248320, "  \
    "\"hidden_size\": " #hidden ", \"num_hidden_layers\": 24, \"num_attention_heads\": 8, "                     \
    "\"num_key_value_heads\": 2, \"head_dim\": 256, \"intermediate_size\": " #inter ", "                        \
    "\"max_position_embeddings\": 262144, \"rms_norm_eps\": 1e-06, "                                             \
    "\"rope_parameters\": {\"rope_type\": \"default\", \"rope_theta\": 10000000, "                               \
    "\"partial_rotary_factor\": 0.25, \"mrope_section\": [11, 11, 10], \"mrope_interleaved\": true}, "           \
    "\"full_attention_interval\": 4, \"linear_num_key_heads\": 16, \"linear_num_value_heads\": 16, "            \
    "\"linear_key_head_dim\": 128, \"linear_value_head_dim\": 128, \"linear_conv_kernel_dim\": 4, "              \
    "\"tie_word_embeddings\": true, \"hidden_act\": \"silu\", \"attention_bias\": false, "                      \
    "\"torch_dtype\": \"bfloat16\", \"eos_token_id\": 248046}"

static const preset presets[] = {
    {"qwen3-0.6b", QWEN3(1024, 28, 16, 8, 3072, true)},
    {"qwen3-1.7b", QWEN3(2048, 28, 16, 8, 6144, true)},
    {"qwen3-4b", QWEN3(2560, 36, 32, 8, 9728, true)},
    {"qwen3-8b", QWEN3(4096, 36, 32, 8, 12288, false)},
    {"qwen3.5-0.8b", QWEN35(1024, 3584)},
    {"qwen3.5-2b", QWEN35(2048, 6144)},
};

const char *td_synth_preset_config(const char *name) {
    for (size_t i = 0; i < sizeof presets / sizeof presets[0]; i++)
        if (strcmp(presets[i].name, name) == 0) return presets[i].config;
    return NULL;
}

const char *td_synth_preset_names(void) { return "qwen3-0.6b, qwen3-1.7b, qwen3-4b, qwen3-8b, qwen3.5-0.8b, qwen3.5-2b"; }
