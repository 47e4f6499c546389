/* Tensor names: Hugging Face (model.layers.N.self_attn.q_proj.weight) <-> llama.cpp GGUF (blk.N.attn_q.weight). */
#ifndef TD_MODEL_GGUF_NAMES_H
#define TD_MODEL_GGUF_NAMES_H

#include <stddef.h>

#include "model/config.h"

/* Writes the GGUF name of a Hugging Face tensor name (with the "model." prefix) into out. Returns 0, or -1 for a
 * name with no GGUF counterpart. */
int td_gguf_name_of(const char *hf, td_arch arch, char *out, size_t n);

/* The Split regex llama.cpp's pre-tokenizer name stands for ("qwen2", "qwen35"), or NULL; and back. */
const char *td_gguf_pre_regex(const char *pre, size_t len);
const char *td_gguf_pre_of_regex(const char *regex);

#endif
