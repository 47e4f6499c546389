/* What the architectures' GGUF hooks (arch.h: gguf_config, gguf_keys) share: llama.cpp's common metadata keys, read
 * into the config.json fields they stand for and written from the config, under the architecture's key prefix
 * ("qwen3.block_count", ...). */
#ifndef TD_MODEL_ARCH_GGUF_H
#define TD_MODEL_ARCH_GGUF_H

#include <jansson.h>

#include "model/config.h"
#include "model/gguf.h"
#include "util/dtype.h"
#include "util/error.h"

/* embedding_length, block_count, context_length, feed_forward_length, attention.head_count (required),
 * attention.head_count_kv and attention.key_length (optional) into hidden_size, num_hidden_layers,
 * max_position_embeddings, intermediate_size, num_attention_heads, num_key_value_heads, head_dim. */
td_status td_arch_gguf_common(const td_gguf *g, const char *arch, json_t *cfg);
/* attention.layer_norm_rms_epsilon (required) and rope.freq_base (optional) into rms_norm_eps and rope_theta;
 * vocab_size from the embedding's rows, tie_word_embeddings; the embedding's width must be embedding_length. */
td_status td_arch_gguf_sizes(const td_gguf *g, const char *arch, int64_t n_vocab, int64_t n_embd, int tied, json_t *cfg);

/* "<arch>.<key>" = v */
td_status td_arch_gguf_put_u32(td_gguf_writer *w, const char *arch, const char *key, int64_t v);
td_status td_arch_gguf_put_f32(td_gguf_writer *w, const char *arch, const char *key, double v);
/* block_count, context_length, embedding_length, feed_forward_length, attention.head_count, head_count_kv */
td_status td_arch_gguf_put_sizes(td_gguf_writer *w, const char *arch, const td_config *c);
/* A JSON file of a Hugging Face model directory (NULL when absent or unreadable, or for a GGUF path), and the text
 * part of a config.json (text_config of a vision-language config). */
json_t *td_arch_dir_json(const char *model_path, const char *file);
const json_t *td_arch_text_config(const json_t *cfg);
/* A required (or, with required = 0 and *out preset, optional) positive count that fits an int32. */
td_status td_arch_gguf_count(const td_gguf *g, const char *key, int required, int64_t *out);
/* The weight type a general.file_type (LLAMA_FTYPE_*) stands for. */
td_dtype td_arch_gguf_file_dtype(uint32_t file_type);

#endif
