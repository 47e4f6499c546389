/* config.json of the supported architectures, read into one flat struct. */
#ifndef TD_MODEL_CONFIG_H
#define TD_MODEL_CONFIG_H

#include <stdint.h>

#include "typedecide.h"

#define TD_MAX_LAYERS 256
#define TD_MAX_HEAD_DIM 1024 /* head_dim, and the DeltaNet key and value head dims: checked at load */
#define TD_MAX_GQA_GROUP 256 /* query heads per key/value head: checked at load */

struct td_arch_desc;

/* What a layer mixes the sequence with: softmax attention, or a Gated DeltaNet (Qwen3.5's linear attention). Each
 * kind has its own step list in the architecture's description (arch.h). */
typedef enum td_layer_kind { TD_LAYER_ATTENTION = 0, TD_LAYER_DELTANET = 1, TD_LAYER_KINDS } td_layer_kind;

/* Rotary position embedding: how the inverse frequencies are made (transformers' ROPE_INIT_FUNCTIONS). */
typedef enum td_rope_type {
    TD_ROPE_DEFAULT = 0, /* inv_freq[i] = theta^(-2i/rot) */
    TD_ROPE_LINEAR,      /* the default's, divided by factor */
    TD_ROPE_LLAMA3       /* Llama 3.1's: long wavelengths divided by factor, a smooth blend between */
} td_rope_type;

typedef struct td_rope_params {
    td_rope_type type;
    double theta;                              /* rope_theta */
    double factor, low_freq_factor, high_freq_factor; /* linear and llama3 */
    int32_t original_ctx;                      /* llama3: original_max_position_embeddings */
} td_rope_params;

#define TD_MAX_ROPE 2 /* sets of frequencies: Gemma 3 has one for sliding-window layers, one for the others */

typedef enum td_glu_act { TD_GLU_SILU = 0, TD_GLU_GELU_TANH = 1 } td_glu_act;

typedef struct td_config {
    const struct td_arch_desc *arch; /* the architecture's description (arch.h) */
    char model_type[32];     /* as written in config.json */
    char tensor_prefix[40];  /* "model." or "model.language_model." */
    int32_t n_vocab;         /* vocab_size: rows of the embedding and the head */
    int32_t n_embd;          /* hidden_size */
    int32_t n_layer;
    int32_t n_head;          /* query heads */
    int32_t n_head_kv;
    int32_t head_dim;        /* read from config: not always n_embd / n_head */
    int32_t n_ff;            /* intermediate_size */
    int32_t n_ctx_train;     /* max_position_embeddings */
    int32_t rotary_dim;      /* dims that RoPE rotates: head_dim, or head_dim * partial_rotary_factor */
    td_rope_params rope[TD_MAX_ROPE]; /* rope[0]: every layer's, unless layer_rope says otherwise */
    int32_t n_rope;          /* sets in use (1 or 2) */
    uint8_t layer_rope[TD_MAX_LAYERS]; /* the set of each layer */
    int32_t layer_window[TD_MAX_LAYERS]; /* a sliding window: a token attends to its last n positions; 0: all */
    double attn_scalar;      /* the scores' scale is attn_scalar^-0.5: head_dim, or Gemma 3's query_pre_attn_scalar */
    float attn_scale;        /* that scale, as fp32 */
    float embed_scale;       /* the embedding's rows times this (Gemma 3: sqrt(hidden_size) as fp32); 0: none */
    td_glu_act glu_act;      /* the MLP's gate activation */
    float rms_eps;
    int tied;                /* tie_word_embeddings */
    int32_t head_rows;       /* rows of a head pruned to the option letters (0: n_vocab) */
    int zero_centred_norms;  /* Qwen3.5: norms scale by (1 + w) */
    int attn_output_gate;    /* Qwen3.5: q_proj also yields a per-head sigmoid gate */
    /* Gated DeltaNet (Qwen3.5) */
    uint8_t layer_kind[TD_MAX_LAYERS];
    int32_t lin_n_k_heads, lin_n_v_heads, lin_k_dim, lin_v_dim, lin_conv_kernel;
} td_config;

/* Reads `path` (config.json). Unknown architectures, unsupported rope scaling and inconsistent sizes fail with a
 * message naming the field. */
td_status td_config_load(const char *path, td_config *cfg);

/* One set of RoPE parameters from a config object (`where` names it in messages); partial (may be NULL) receives
 * partial_rotary_factor when the object has one. For the architectures' own config readers. */
struct json_t;
td_status td_config_read_rope(const struct json_t *r, const char *where, td_rope_params *rp, double *partial);

/* Parses config JSON text (for tests and synth). */
td_status td_config_parse(const char *json, size_t len, const char *name, td_config *cfg);

#endif
