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

#define LLAMA32(hidden, layers, heads, head_dim)                                                                  \
    "{\"architectures\": [\"LlamaForCausalLM\"], \"model_type\": \"llama\", \"vocab_size\": 128256, "            \
    "\"hidden_size\": " #hidden ", \"num_hidden_layers\": " #layers ", \"num_attention_heads\": " #heads ", "    \
    "\"num_key_value_heads\": 8, \"head_dim\": " #head_dim ", \"intermediate_size\": 8192, "                      \
    "\"max_position_embeddings\": 131072, \"rms_norm_eps\": 1e-05, \"rope_theta\": 500000.0, "                  \
    "\"rope_scaling\": {\"factor\": 32.0, \"high_freq_factor\": 4.0, \"low_freq_factor\": 1.0, "               \
    "\"original_max_position_embeddings\": 8192, \"rope_type\": \"llama3\"}, \"tie_word_embeddings\": true, "  \
    "\"hidden_act\": \"silu\", \"attention_bias\": false, \"mlp_bias\": false, \"torch_dtype\": \"bfloat16\", "   \
    "\"bos_token_id\": 128000, \"eos_token_id\": [128001, 128008, 128009]}"

#define QWEN25(hidden, layers, heads, inter)                                                                     \
    "{\"architectures\": [\"Qwen2ForCausalLM\"], \"model_type\": \"qwen2\", \"vocab_size\": 151936, "            \
    "\"hidden_size\": " #hidden ", \"num_hidden_layers\": " #layers ", \"num_attention_heads\": " #heads ", "    \
    "\"num_key_value_heads\": 2, \"intermediate_size\": " #inter ", \"max_position_embeddings\": 32768, "        \
    "\"rms_norm_eps\": 1e-06, \"rope_theta\": 1000000.0, \"use_sliding_window\": false, "                      \
    "\"tie_word_embeddings\": true, \"hidden_act\": \"silu\", \"torch_dtype\": \"bfloat16\", "                   \
    "\"bos_token_id\": 151643, \"eos_token_id\": 151645}"

/* Gemma 3 1B: 26 layers, five sliding-window (512) layers then one global, query_pre_attn_scalar = head_dim */
#define GEMMA3_1B                                                                                                \
    "{\"architectures\": [\"Gemma3ForCausalLM\"], \"model_type\": \"gemma3_text\", \"vocab_size\": 262144, "     \
    "\"hidden_size\": 1152, \"num_hidden_layers\": 26, \"num_attention_heads\": 4, \"num_key_value_heads\": 1, " \
    "\"head_dim\": 256, \"intermediate_size\": 6912, \"max_position_embeddings\": 32768, "                      \
    "\"rms_norm_eps\": 1e-06, \"rope_theta\": 1000000.0, \"rope_local_base_freq\": 10000.0, "                  \
    "\"sliding_window\": 512, \"sliding_window_pattern\": 6, \"query_pre_attn_scalar\": 256, "                  \
    "\"hidden_activation\": \"gelu_pytorch_tanh\", \"tie_word_embeddings\": true, \"torch_dtype\": \"bfloat16\", " \
    "\"bos_token_id\": 2, \"eos_token_id\": [1, 106]}"

/* SmolLM2-360M: a Llama without rope scaling */
#define SMOLLM2_360M                                                                                             \
    "{\"architectures\": [\"LlamaForCausalLM\"], \"model_type\": \"llama\", \"vocab_size\": 49152, "             \
    "\"hidden_size\": 960, \"num_hidden_layers\": 32, \"num_attention_heads\": 15, \"num_key_value_heads\": 5, "  \
    "\"intermediate_size\": 2560, \"max_position_embeddings\": 8192, \"rms_norm_eps\": 1e-05, "                \
    "\"rope_theta\": 100000, \"tie_word_embeddings\": true, \"hidden_act\": \"silu\", \"torch_dtype\": \"bfloat16\", " \
    "\"bos_token_id\": 1, \"eos_token_id\": 2}"

static const preset presets[] = {
    {"qwen3-0.6b", QWEN3(1024, 28, 16, 8, 3072, true)},
    {"qwen3-1.7b", QWEN3(2048, 28, 16, 8, 6144, true)},
    {"qwen3-4b", QWEN3(2560, 36, 32, 8, 9728, true)},
    {"qwen3-8b", QWEN3(4096, 36, 32, 8, 12288, false)},
    {"qwen3.5-0.8b", QWEN35(1024, 3584)},
    {"qwen3.5-2b", QWEN35(2048, 6144)},
    {"llama3.2-1b", LLAMA32(2048, 16, 32, 64)},
    {"llama3.2-3b", LLAMA32(3072, 28, 24, 128)},
    {"smollm2-360m", SMOLLM2_360M},
    {"qwen2.5-0.5b", QWEN25(896, 24, 14, 4864)},
    {"qwen2.5-1.5b", QWEN25(1536, 28, 12, 8960)},
    {"gemma3-1b", GEMMA3_1B},
};

const char *td_synth_preset_config(const char *name) {
    for (size_t i = 0; i < sizeof presets / sizeof presets[0]; i++)
        if (strcmp(presets[i].name, name) == 0) return presets[i].config;
    return NULL;
}

const char *td_synth_preset_names(void) {
    return "qwen3-0.6b, qwen3-1.7b, qwen3-4b, qwen3-8b, qwen3.5-0.8b, qwen3.5-2b, llama3.2-1b, llama3.2-3b, smollm2-360m, "
           "qwen2.5-0.5b, qwen2.5-1.5b, gemma3-1b";
}
