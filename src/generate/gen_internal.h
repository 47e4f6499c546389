/* Private helpers shared by the generation files (sampler, stop rules, chat templates, the td_gen engine). */
#ifndef TD_GENERATE_GEN_INTERNAL_H
#define TD_GENERATE_GEN_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "typedecide.h"

/* How many feeds of a stopper lost text for lack of memory (td_gen reports it as TD_ERR_NOMEM). */
int64_t td_stopper_oom(const td_stopper *s);

/* The chat families this library renders. */
typedef enum td_chat_family {
    TD_CHAT_NONE = 0,
    TD_CHAT_QWEN3 = 1,
    TD_CHAT_QWEN35 = 2,
    TD_CHAT_QWEN25 = 3, /* Qwen2.5-Instruct's ChatML with tools */
    TD_CHAT_LLAMA3 = 4, /* Llama 3's header template (bos, <|start_header_id|>role<|end_header_id|>, trimmed content) */
    TD_CHAT_GEMMA3 = 5, /* Gemma 3's turns (<start_of_turn>user / model, the system message before the first user) */
} td_chat_family;

/* The family's name as td_model_chat_family gives it ("qwen3", "qwen3.5", "qwen2.5", "llama3", "gemma3"), or NULL;
 * and back (TD_CHAT_NONE for a name that is none). */
const char *td_chat_family_name(td_chat_family f);
td_chat_family td_chat_family_named(const char *name);

/* Recognises a template text (NULL: none): the family, or TD_CHAT_NONE. */
td_chat_family td_chat_family_of(const char *chat_template);

/* Renders OpenAI messages JSON (len bytes) in a family, without a model (tests use it on the reference
 * conversations). */
td_status td_chat_render_family_json(td_chat_family family, const char *messages_json, size_t len,
                                     const td_chat_params *params, char **text);
/* The same, then td_chat_tokenize's ids with a tokenizer of the caller's (tests). */
td_status td_chat_tokenize_family_json(td_chat_family family, const td_tokenizer *tok, const char *messages_json,
                                       size_t len, const td_chat_params *params, unsigned flags, int32_t **ids,
                                       size_t *n_ids);

#endif
