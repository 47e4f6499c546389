/* The loaded model: config, mapped weight files and per-layer views into them. Private to the library. */
#ifndef TD_MODEL_MODEL_H
#define TD_MODEL_MODEL_H

#include <stdint.h>

#include "kernels/cpu/kernels.h"
#include "model/config.h"
#include "model/safetensors.h"
#include "typedecide.h"

/* A layer's weights, by what they do (one slot list for every architecture: an architecture's description,
 * arch.h, says which slots its layers have and what they are called in its files). */
typedef enum td_wslot {
    TD_W_MIX_NORM,      /* [d] the mixer's input norm */
    TD_W_Q,             /* [Hq * hd, d], or [Hq * 2hd, d] with an output gate (per head: hd query, hd gate) */
    TD_W_K, TD_W_V,     /* [Hkv * hd, d] */
    TD_W_O,             /* [d, Hq * hd] */
    TD_W_Q_BIAS,        /* [Hq * hd] */
    TD_W_K_BIAS,        /* [Hkv * hd] */
    TD_W_V_BIAS,        /* [Hkv * hd] */
    TD_W_Q_NORM,        /* [hd] */
    TD_W_K_NORM,        /* [hd] */
    TD_W_DN_QKV,        /* [2 * Hk * dk + Hv * dv, d], rows laid out [q | k | v] */
    TD_W_DN_Z,          /* [Hv * dv, d] */
    TD_W_DN_B,          /* [Hv, d] */
    TD_W_DN_A,          /* [Hv, d] */
    TD_W_DN_CONV,       /* [conv_dim, K] depthwise causal conv */
    TD_W_DN_DT_BIAS,    /* [Hv] */
    TD_W_DN_A_LOG,      /* [Hv] */
    TD_W_DN_NORM,       /* [dv] gated output norm, plain w */
    TD_W_DN_OUT,        /* [d, Hv * dv] */
    TD_W_MIX_POST_NORM, /* [d] the mixer's output norm, before the residual */
    TD_W_MLP_NORM,      /* [d] the MLP's input norm */
    TD_W_GATE, TD_W_UP, /* [ff, d] */
    TD_W_DOWN,          /* [d, ff] */
    TD_W_MLP_POST_NORM, /* [d] the MLP's output norm, before the residual */
    TD_W_COUNT
} td_wslot;

typedef struct td_layer {
    td_layer_kind kind;
    td_mat w[TD_W_COUNT];   /* the matrices of the slots the architecture has for this kind of layer */
    float *v[TD_W_COUNT];   /* its vectors (norms, biases, DeltaNet parameters), as fp32; NULL when absent */
} td_layer;

struct td_model {
    td_config cfg;
    char *path;
    td_st_file *files;
    int n_files;
    td_mat embed;      /* [V, d] */
    td_mat head;       /* [V, d]; the same storage as embed when tied */
    float *final_norm; /* [d] */
    float *rope_freqs; /* [rotary_dim / 2] a GGUF's RoPE frequency factors (llama.cpp's rope_freqs.weight: Llama 3.1's
                          scaling as llama.cpp stores it), or NULL: the config's rope parameters say it all */
    td_layer *layers;
    void **owned;      /* fp32 copies of small tensors and realigned data */
    int n_owned;
    size_t cap_owned;
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
    int n_packs;
    size_t cap_packs;
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

/* The inverse frequencies of RoPE set `set` (config.rope[set]; rotary_dim / 2 floats). */
void td_model_inv_freq(const td_model *m, int set, float *inv_freq);

/* Loads the weights, config and tokenizer of a GGUF file into m (m->path set; m otherwise empty). */
/* Binds a GGUF file's tensors and metadata into m; m->gguf may be open already (a buffer), else path is opened. */
td_status td_model_load_gguf(td_model *m, const char *path, const td_model_params *params);

/* TD_OK when every token id at or past n_vocab is an added token (what: the tokenizer's path, in the message). */
td_status td_model_check_vocab(const td_tokenizer *tok, int32_t n_vocab, const char *what);

#endif
