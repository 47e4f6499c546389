/* The loaded model: config, mapped weight files and per-layer views into them. Private to the library. */
#ifndef TD_MODEL_MODEL_H
#define TD_MODEL_MODEL_H

#include <stdint.h>

#include "kernels/cpu/kernels.h"
#include "model/config.h"
#include "model/safetensors.h"
#include "typedecide.h"

/* Full (softmax) attention: Qwen3's, and Qwen3.5's gated variant. */
typedef struct td_attn_weights {
    td_mat wq;      /* [Hq * hd, d], or [Hq * 2hd, d] with the output gate (per head: hd query, hd gate) */
    td_mat wk, wv;  /* [Hkv * hd, d] */
    td_mat wo;      /* [d, Hq * hd] */
    float *q_norm;  /* [hd] */
    float *k_norm;  /* [hd] */
} td_attn_weights;

/* Gated DeltaNet (Qwen3.5 linear attention). */
typedef struct td_deltanet_weights {
    td_mat in_qkv;  /* [2 * Hk * dk + Hv * dv, d], rows laid out [q | k | v] */
    td_mat in_z;    /* [Hv * dv, d] */
    td_mat in_b;    /* [Hv, d] */
    td_mat in_a;    /* [Hv, d] */
    float *conv_w;  /* [conv_dim, K] depthwise causal conv */
    float *a_log;   /* [Hv] */
    float *dt_bias; /* [Hv] */
    float *norm_w;  /* [dv] gated output norm, plain w */
    td_mat out;     /* [d, Hv * dv] */
} td_deltanet_weights;

typedef struct td_layer {
    td_layer_kind kind;
    float *attn_norm; /* [d] */
    float *ffn_norm;  /* [d] */
    td_attn_weights attn;
    td_deltanet_weights dn;
    td_mat w_gate, w_up; /* [ff, d] */
    td_mat w_down;       /* [d, ff] */
} td_layer;

struct td_model {
    td_config cfg;
    char *path;
    td_st_file *files;
    int n_files;
    td_mat embed;      /* [V, d] */
    td_mat head;       /* [V, d]; the same storage as embed when tied */
    float *final_norm; /* [d] */
    td_layer *layers;
    void **owned;      /* fp32 copies of small tensors and realigned data */
    int n_owned, cap_owned;
    td_tokenizer *tok;
    int32_t *stop_ids;
    int n_stop;
    char *chat_template;        /* tokenizer_config.json's chat_template or GGUF tokenizer.chat_template; NULL */
    char *chat_template_source; /* the file it came from */
    char *gen_config;           /* generation_config.json's text, or NULL */
    int64_t n_params;
    int n_skipped;     /* tensors in the files that the text model does not use */
    struct td_gguf *gguf; /* when loaded from a GGUF file */
    /* A head pruned to the option letters (export --prune-head): head row i is token keep[i]. */
    int pruned;
    int32_t *keep;
    int32_t n_keep;
    char *slot_map;    /* JSON, when pruned */
    struct td_qpack **packs; /* packed copies of quantised matrices (td_model_pack), owned */
    int n_packs, cap_packs;
    const struct td_kernels *kernels; /* the kernel set chosen at load (td_model_pack): its packing and activation
                                         layouts fix the model's numerics; every context of the model uses it */
    /* A copy of the weights on a device, made by the engine when the first device context is created (the model
     * layer knows nothing of devices: it only calls device_free on it when the model is freed). */
    void *device_weights;
    void (*device_free)(void *device_weights);
};

/* Makes the model own (and free) a heap block. Returns 0, or -1 on allocation failure (p not taken). */
int td_model_own(td_model *m, void *p);

/* Adds a stop token id read from `where` (a file) unless it is there already. An id outside the vocabulary (the
 * tokenizer's ids when the model has one, else the head's rows) fails with TD_ERR_FORMAT naming where it came
 * from: the one routine for generation_config.json, tokenizer_config.json and GGUF metadata. */
td_status td_model_add_stop(td_model *m, int64_t id, const char *where);

/* Chooses the model's kernel set (td_kernels_best: this CPU's, or TD_KERNELS) and gives every Q8_0 / Q4_0 matrix
 * (not the input embedding) a packed copy when that set wants one (td_kernels.pack). Called once, after loading
 * and merging adapters. */
td_status td_model_pack(td_model *m);

/* Loads the weights, config and tokenizer of a GGUF file into m (m->path set; m otherwise empty). */
td_status td_model_load_gguf(td_model *m, const char *path, const td_model_params *params);

#endif
