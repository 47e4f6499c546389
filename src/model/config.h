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
    double rope_theta;
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

/* Parses config JSON text (for tests and synth). */
td_status td_config_parse(const char *json, size_t len, const char *name, td_config *cfg);

#endif
