/* Each architecture described once (one arch_*.c file each): its config.json fields, its tensors (Hugging Face and
 * GGUF names, shapes as config.json implies them) and its layers as ordered lists of steps over named buffers. The
 * loaders (safetensors, GGUF), export, synth, adapters, inspection and every backend's forward pass (CPU, CUDA) read
 * this description; none of them names an architecture's tensors or blocks itself. A step list is the forward pass
 * of one layer written top to bottom: backends execute it step for step (fusing steps they recognise, bits unchanged);
 * it is not a general compute graph (no shapes to infer, no scheduling, one fixed order). */
#ifndef TD_MODEL_ARCH_H
#define TD_MODEL_ARCH_H

#include <jansson.h>
#include <stdint.h>

#include "model/config.h"
#include "model/model.h"

struct td_gguf;
struct td_gguf_writer;

/* Sizes a tensor's dims follow from (td_arch_dim gives the value, td_arch_dim_why the config.json words). */
typedef enum td_dim {
    TD_DIM_NONE = 0,
    TD_DIM_VOCAB,    /* vocab_size */
    TD_DIM_EMBD,     /* hidden_size */
    TD_DIM_FF,       /* intermediate_size */
    TD_DIM_HEAD,     /* head_dim */
    TD_DIM_Q_ROWS,   /* num_attention_heads x head_dim (x 2 with an output gate: query and gate per head) */
    TD_DIM_KV_ROWS,  /* num_key_value_heads x head_dim */
    TD_DIM_ATT,      /* num_attention_heads x head_dim (the attention output) */
    TD_DIM_DN_CONV,  /* 2 x linear_num_key_heads x linear_key_head_dim + linear_num_value_heads x linear_value_head_dim */
    TD_DIM_DN_VALUE, /* linear_num_value_heads x linear_value_head_dim */
    TD_DIM_DN_HV,    /* linear_num_value_heads */
    TD_DIM_DN_DV,    /* linear_value_head_dim */
    TD_DIM_DN_KERNEL,/* linear_conv_kernel_dim */
    TD_DIM_ONE
} td_dim;

/* Tensor flags. */
#define TD_T_VECTOR 0x01u     /* a small tensor kept as fp32 (norms, biases, DeltaNet vectors); else a matrix */
#define TD_T_NORM 0x02u       /* a norm's weight: synth draws it near 1, or near 0 when the norms are zero-centred */
#define TD_T_PLAIN_NORM 0x04u /* a norm that multiplies by plain w even where the others are zero-centred */
#define TD_T_OPTIONAL 0x08u   /* may be absent (the slot then stays empty) */
/* How llama.cpp's converter stores it besides renaming (td_gguf_layout, gguf_names.h). */
#define TD_T_GGUF_PLUS_ONE 0x10u /* stored as 1 + w (fp32) */
#define TD_T_GGUF_NEG_EXP 0x20u  /* stored as -exp(w) */
#define TD_T_GGUF_SQUEEZE 0x40u  /* the size-1 dim dropped */
#define TD_T_VHEAD_ROWS 0x80u    /* rows run over value heads (from the rows' value part: see TD_T_VHEAD_V_PART) */
#define TD_T_VHEAD_COLS 0x100u   /* columns run over value heads */
#define TD_T_VHEAD_V_PART 0x200u /* only the rows after the q and k parts ([q | k | v]) are value heads */
#define TD_T_VHEAD_UNIT 0x400u   /* one row per value head (else linear_value_head_dim rows per head) */
#define TD_T_GGUF_ROPE_PERM 0x800u /* rows permuted within each head for llama.cpp's interleaved-pair RoPE */

/* Where a tensor goes: a per-layer slot (td_wslot) or one of the model's own. */
enum { TD_T_EMBED = TD_W_COUNT, TD_T_FINAL_NORM, TD_T_HEAD };

typedef struct td_tensor_def {
    int16_t slot;       /* td_wslot, or TD_T_EMBED / TD_T_FINAL_NORM / TD_T_HEAD */
    uint8_t kinds;      /* per-layer tensors: the layer kinds (1 << td_layer_kind) that have it; 0 for the model's */
    uint16_t flags;     /* TD_T_* */
    const char *hf;     /* Hugging Face name: after "<prefix>layers.N." (per layer) or "<prefix>" (the model's; the
                           head's is "lm_head.weight", without prefix) */
    const char *gguf;   /* llama.cpp's name: after "blk.N." (per layer) or whole */
    uint8_t dims[3];    /* td_dim, outermost first (safetensors order); TD_DIM_NONE ends the list */
} td_tensor_def;

/* ---- layers as steps ------------------------------------------------------------------------------------------ */

/* The activation buffers a step reads and writes (td_acts), each [rows, width]. */
typedef enum td_buf {
    TD_B_X,       /* [T, d] the residual stream */
    TD_B_XB,      /* [T, d] a block's normed input, then its output */
    TD_B_Q,       /* [T, Hq * hd] (x 2 with an output gate: per head [query | gate]) */
    TD_B_K,       /* [T, Hkv * hd] */
    TD_B_V,       /* [T, Hkv * hd] */
    TD_B_ATT,     /* [T, Hq * hd] */
    TD_B_FF_G,    /* [T, ff] */
    TD_B_FF_U,    /* [T, ff] */
    TD_B_DN_QKV,  /* [T, conv_dim] */
    TD_B_DN_Z,    /* [T, Hv * dv] */
    TD_B_DN_B,    /* [T, Hv] */
    TD_B_DN_A,    /* [T, Hv] */
    TD_B_DN_CORE, /* [T, Hv * dv] */
    TD_B_COUNT
} td_buf;

typedef enum td_op {
    TD_OP_NORM,         /* dst = RMSNorm(src) * w (w: slot; (1 + w) when the config's norms are zero-centred) */
    TD_OP_MATMUL,       /* dst = src W^T (+ bias: a vector slot, added after the product when the layer has it);
                           consecutive products of one src run as one pass over it */
    TD_OP_HEAD_NORM,    /* RMSNorm of every head of dst (Q or K) over head_dim, weight slot w */
    TD_OP_ROPE,         /* rotary embedding of dst's heads (Q or K): NeoX half-split over the rotary dims */
    TD_OP_STORE_KV,     /* K and V rows into each token's cache cell (this layer's cache) */
    TD_OP_ATTENTION,    /* dst (ATT) = softmax attention of Q over the cached positions 0..pos of its sequence */
    TD_OP_OUT_GATE,     /* dst (ATT) *= sigmoid(gate), the gate being each query head's second half of Q */
    TD_OP_GLU,          /* dst (FF_G) = silu(FF_G) * src (FF_U) */
    TD_OP_RESIDUAL,     /* X += src; rows that went non-finite stop the pass, naming `block` */
    TD_OP_KEEP_OUTPUTS, /* in the last layer only: keep only the rows of the tokens that want an output */
    TD_OP_DELTANET,     /* dst (DN_CORE) = Gated DeltaNet of DN_QKV, DN_Z, DN_B, DN_A (conv, recurrence, gated norm) */
} td_op;

typedef struct td_step {
    uint8_t op;        /* td_op */
    uint8_t dst, src;  /* td_buf */
    int8_t w, bias;    /* td_wslot, or -1 */
    const char *block; /* TD_OP_RESIDUAL: the block just ended ("attention", "MLP", ...), for error messages */
} td_step;

/* The step tables read best through these (arch_*.c). */
#define TD_NORM(dst, src, w) {TD_OP_NORM, TD_B_##dst, TD_B_##src, TD_W_##w, -1, NULL}
#define TD_MATMUL(dst, src, w) {TD_OP_MATMUL, TD_B_##dst, TD_B_##src, TD_W_##w, -1, NULL}
#define TD_MATMUL_BIAS(dst, src, w, b) {TD_OP_MATMUL, TD_B_##dst, TD_B_##src, TD_W_##w, TD_W_##b, NULL}
#define TD_HEAD_NORM(dst, w) {TD_OP_HEAD_NORM, TD_B_##dst, TD_B_##dst, TD_W_##w, -1, NULL}
#define TD_ROPE(dst) {TD_OP_ROPE, TD_B_##dst, TD_B_##dst, -1, -1, NULL}
#define TD_STORE_KV {TD_OP_STORE_KV, TD_B_K, TD_B_V, -1, -1, NULL}
#define TD_ATTENTION {TD_OP_ATTENTION, TD_B_ATT, TD_B_Q, -1, -1, NULL}
#define TD_OUT_GATE {TD_OP_OUT_GATE, TD_B_ATT, TD_B_Q, -1, -1, NULL}
#define TD_GLU {TD_OP_GLU, TD_B_FF_G, TD_B_FF_U, -1, -1, NULL}
#define TD_RESIDUAL(src, name) {TD_OP_RESIDUAL, TD_B_X, TD_B_##src, -1, -1, name}
#define TD_KEEP_OUTPUTS {TD_OP_KEEP_OUTPUTS, TD_B_X, TD_B_X, -1, -1, NULL}
#define TD_DELTANET {TD_OP_DELTANET, TD_B_DN_CORE, TD_B_DN_QKV, -1, -1, NULL}

/* One kind of layer: its steps. */
typedef struct td_layer_steps {
    const td_step *steps;
    int n;
} td_layer_steps;

/* ---- the description ---------------------------------------------------------------------------------------- */

typedef struct td_arch_desc {
    const char *name;                /* for messages: "qwen3" */
    const char *const *model_types;  /* config.json model_type values it reads, NULL-terminated */
    const char *gguf_arch;           /* llama.cpp's general.architecture */
    const td_tensor_def *tensors;    /* in checkpoint order per layer */
    int n_tensors;
    td_layer_steps layers[TD_LAYER_KINDS]; /* steps of each layer kind it has (n = 0: none) */
    /* config.json: the architecture's own fields, after the common ones (config.c) are read from `text` (the text
     * part: text_config of a vision-language config). root is the whole file; model_type is one of model_types. */
    td_status (*read_config)(const json_t *root, const json_t *text, const char *model_type, const char *name,
                             td_config *cfg);
    /* GGUF -> the config.json it stands for (the model_type and every field read_config and config.c need), from
     * llama.cpp's metadata keys; tied: the file has no output.weight. *n_rot (0: as the config says) overrides the
     * rotary dims where a factor of head_dim cannot say them exactly. */
    td_status (*gguf_config)(const struct td_gguf *g, int64_t n_vocab, int64_t n_embd, int tied, json_t *cfg,
                             int32_t *n_rot);
    /* config -> llama.cpp's metadata keys, in its converter's order (general.file_type falls among them). */
    td_status (*gguf_keys)(struct td_gguf_writer *w, const td_model *m, uint32_t file_type);
    const char *gguf_bos; /* the token the converter names tokenizer.ggml.bos_token_id, when it is fixed; NULL: the
                             tokenizer's bos_token (tokenizer_config.json), else config.json's bos_token_id */
} td_arch_desc;

/* The description of a config.json model_type, or of a GGUF general.architecture; NULL when none. */
const td_arch_desc *td_arch_of_model_type(const char *model_type);
const td_arch_desc *td_arch_of_gguf(const char *arch, size_t len);
/* "qwen3, qwen3_5, ..." for messages: every model_type this build reads. Static. */
const char *td_arch_model_types(void);
const char *td_arch_gguf_names(void);

/* The value of a dim for a config; and how config.json implies it, in words ("hidden_size 1024"). */
int64_t td_arch_dim(const td_config *c, td_dim d);
void td_arch_dim_why(const td_config *c, td_dim d, char *buf, size_t n);

/* ---- walking the tensors ------------------------------------------------------------------------------------- */

typedef struct td_tensor_spec {
    char name[192];  /* the Hugging Face name */
    char gguf[96];   /* llama.cpp's name */
    int nd;
    int64_t dims[3];
    char why[200];   /* how the shape follows from config.json, for error messages */
    unsigned flags;  /* TD_T_* */
    int layer;       /* -1 for the model's own tensors */
    int zero_centred; /* a norm that scales by (1 + w) */
    td_mat *mat;     /* where a matrix goes (NULL without a model, or for a vector) */
    float **vec;     /* where a vector goes, converted to fp32 (NULL without a model, or for a matrix) */
} td_tensor_spec;

typedef td_status (*td_spec_fn)(void *user, const td_tensor_spec *spec);

/* Calls fn for every tensor of the text model described by cfg, in checkpoint order. With m != NULL the specs
 * point at m's fields (m->layers must be allocated); with m == NULL the destinations are NULL. The walk itself
 * writes nothing. Stops at the first error fn returns. */
td_status td_arch_tensors(const td_config *cfg, td_model *m, td_spec_fn fn, void *user);
/* Each of m's layers takes its kind from the config (the loaders call it once the layers are allocated). */
void td_arch_set_kinds(const td_config *cfg, td_model *m);

/* The steps of layer il's kind. */
const td_layer_steps *td_arch_layer_steps(const td_config *cfg, int il);

#endif
