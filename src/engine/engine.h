/* The engine's private state: batches, the context and the forward pass.
 *
 * A context is four named parts, each sized once at creation (ctx.c's plan, which td_ctx_memory reports):
 *   kv    the KV cache: a pool of n_ctx cells per attention layer, each cell one position's K and V rows. A
 *         sequence is a table position -> cell; forking copies the table entries (ints) and bumps the cells'
 *         reference counts, so a shared prefix is stored once and read by every sequence forked from it.
 *   dn    the Gated DeltaNet state of every sequence (constant size: conv rows and the recurrent matrix).
 *   pass  the batch being decoded, as the forward pass sees it: its tokens, grouped by sequence, their RoPE
 *         tables, the rows that want an output.
 *   act   the activations of one pass, sized for n_batch tokens, and per-thread scratch.
 * The forward pass (forward.c) executes the architecture's description (model/arch.h): embed, then per layer the
 * steps of its kind, then the final norm and the head; every step runs over the pass's rows, split over threads with
 * one helper (td_eng_for): row steps in steps.c, products and attention in ops.c, the Gated DeltaNet in deltanet.c. */
#ifndef TD_ENGINE_ENGINE_H
#define TD_ENGINE_ENGINE_H

#include <stdint.h>

#include "kernels/cpu/kernels.h"
#include "kernels/cpu/threadpool.h"
#include "model/arch.h"
#include "model/model.h"
#include "typedecide.h"

struct td_batch {
    int32_t cap, n;
    int32_t *token, *seq, *pos;
    uint8_t *want;
};

typedef struct td_seq {
    int32_t *cells; /* [n_ctx] position -> cell */
    int32_t len;
} td_seq;

typedef struct td_kv_cache {
    void *k_block, *v_block;                   /* [n_attention_layers, n_ctx, dim] float, f16 or bf16 */
    void *k[TD_MAX_LAYERS], *v[TD_MAX_LAYERS]; /* each layer's [n_ctx, dim] part; NULL for DeltaNet layers */
    int32_t dim;                               /* n_head_kv * head_dim */
    int f16;                                   /* IEEE half elements (td_ctx_params.kv_f16) */
    int bf16;                                  /* bf16 elements (a CUDA context: td_eng_dev_kv_bf16) */
    int32_t *refcount;                         /* [n_ctx] sequences that hold each cell */
    int32_t *free_list;                        /* [n_ctx] stack of free cells */
    int32_t n_free;
    td_seq *seqs;                              /* [n_seq_max] */
    int32_t *cells;                            /* [n_seq_max, n_ctx] the sequences' tables (td_seq.cells) */
} td_kv_cache;

typedef struct td_dn_state {
    int64_t conv_dim;              /* 2 * key_dim + value_dim: the channels of the short convolution */
    int64_t floats;                /* per sequence */
    int64_t layer_off[TD_MAX_LAYERS]; /* offset of a layer's state in a sequence's block; -1 for attention layers */
    float *data;                   /* [n_seq_max, floats]: per DeltaNet layer, conv rows [K-1, conv_dim] then
                                      S [Hv, dk, dv] (dev_chunk: the chunked kernel's state, cuda.h) */
    int dev_chunk;                 /* a CUDA context with TD_CUDA_DN=chunk: S is td_cu_deltanet_chunk's state */
} td_dn_state;

typedef struct td_pass {
    int32_t n_tokens;
    int32_t *tok_id, *tok_seq, *tok_pos, *tok_cell; /* [n_batch] */
    int32_t *out_tok; /* [n_batch] batch indices of the tokens that want an output, ascending */
    int32_t n_out;
    int32_t n_rows;   /* rows of the activations: n_tokens; n_out once the last mixer has run (td_eng_keep_outputs) */
    /* the tokens grouped by sequence, in position order (attention tasks and the DeltaNet recurrence) */
    int32_t n_groups;
    int32_t *grp_seq; /* [n_batch] sequence of each group */
    int32_t *grp_off; /* [n_batch + 1] group g holds grp_tok[grp_off[g] .. grp_off[g+1]) */
    int32_t *grp_tok; /* [n_batch] batch indices */
    int32_t n_pre;    /* keys every attention task reads, gathered once per layer: positions before every group's
                         first token whose cells all the groups share (a prefix forked to all of them; 0 when too
                         short to matter), or all of a single sequence's keys when its tokens make several tasks */
    float *rope_cs;   /* [n_rope, n_batch, rotary_dim] each token's cosines and sines (td_rope_table), per RoPE set */
    uint8_t *row_bad; /* [n_batch] a row of the residual stream held NaN or infinity after the last step */
    int32_t *seq_tmp; /* [n_seq_max] scratch while a pass is prepared (tokens seen so far; group index) */
    int32_t *pos_tmp; /* [n_ctx] scratch while a pass is prepared: the first token at each position */
} td_pass;

/* Where a pass met a non-finite value (td_ctx_nonfinite). */
typedef struct td_fault {
    int set;
    int32_t layer; /* -1: the embedding; n_layer: the output head */
    const char *block;
    int32_t seq, pos;
} td_fault;

typedef struct td_acts {
    float *x, *xb;         /* [n_batch, d] the residual stream; a block's normed input, then its output */
    float *q, *k, *v;      /* [n_batch, q_rows], [n_batch, kv_dim] x2 */
    float *att;            /* [n_batch, Hq * hd] */
    float *ff_g, *ff_u;    /* [n_batch, n_ff] */
    float *dn_qkv;         /* [n_batch, conv_dim] raw DeltaNet projections */
    float *dn_conv;        /* [n_batch, conv_dim] after the short convolution */
    float *dn_z, *dn_core; /* [n_batch, Hv * dv] */
    float *dn_b, *dn_a;    /* [n_batch, Hv] */
    void *xq;              /* quantised activations (products that take them: td_kernels_layout),
                              td_qrows_bytes(n_batch, xq_cols) */
    int64_t xq_cols;       /* the widest input of such a product */
    float *out_x;          /* [n_outputs_max, d] final-normed hidden states of the output tokens */
    float *out;            /* [n_outputs_max, head width] logits or the restricted rows */
    /* per thread */
    float *attn_scratch;   /* [n_threads, attn_floats] attention scores and key/value copies */
    int64_t attn_floats;
    float *dn_work;        /* [n_threads, dn_work_floats] the chunked DeltaNet form's scratch */
    int64_t dn_work_floats;
    float *pre_kv;         /* [2][n_ctx * kv_dim] keys every attention task of a layer reads, gathered once per
                              layer as fp32 rows [Hkv][pre][hd], keys then values: a prefix every sequence of the
                              pass shares, or a long single sequence's keys (td_eng_attention) */
} td_acts;

struct td_ctx {
    const td_model *model;
    td_ctx_params p;
    const td_kernels *k;
    int bf16_acts;         /* BF16 products take bf16 activations: TD_PRECISION_BF16 and k has bf16 products */
    td_pool *pool;
    td_kv_cache kv;
    td_dn_state dn;
    td_pass pass;
    td_acts act;
    float *inv_freq;        /* [n_rope, rotary_dim / 2] */
    int32_t *head_rows;     /* restricted head rows (NULL: every row of the head) */
    int32_t n_head_rows;
    int64_t head_macs;      /* multiply-adds spent in the head so far */
    int64_t attn_tokens;    /* tokens per attention task (TD_ATTN_TOKENS, fewer for wide GQA groups) */
    td_fault fault;         /* the last pass's non-finite value, if it met one */
    int hybrid;             /* the model has DeltaNet layers */
    struct td_dev_ctx *dev; /* a CUDA context's device side (NULL on the CPU): then the buffers the plan marks as
                               device-resident (KV cache, DeltaNet states, activations) are device pointers */
};

#define TD_ATTN_TOKENS 32     /* consecutive tokens of a sequence whose queries share each read of a key row */
#define TD_ATTN_MAX_ROWS 256  /* query rows of one attention task (tokens x query heads per KV head) */
#define TD_PRE_MIN 16         /* shortest shared prefix worth gathering once per layer for all the pass's sequences */

/* What the loader admits (config.h) must fit the kernels' and the engine's fixed buffers. */
_Static_assert(TD_MAX_HEAD_DIM <= TD_DELTANET_MAX_DV, "a DeltaNet value head the loader admits must fit the step");
_Static_assert(TD_ATTN_MAX_ROWS >= TD_MAX_GQA_GROUP, "one token's query heads of a KV group must fit a task");

static inline float *td_eng_dn_conv_state(td_ctx *ctx, int32_t seq, int il) {
    return ctx->dn.data + (int64_t)seq * ctx->dn.floats + ctx->dn.layer_off[il];
}
static inline float *td_eng_dn_recurrent_state(td_ctx *ctx, int32_t seq, int il) {
    return td_eng_dn_conv_state(ctx, seq, il) + (int64_t)(ctx->model->cfg.lin_conv_kernel - 1) * ctx->dn.conv_dim;
}

/* Runs fn(ctx, i, arg, thread) for every i in [0, n), split over the pool: td_eng_for in contiguous ranges (work
 * of even cost), td_eng_for_dynamic in chunks that threads take as they finish (uneven cost). Which thread runs an
 * item varies; what the item computes must not depend on it (thread only picks per-thread scratch). */
typedef void (*td_eng_fn)(td_ctx *ctx, int64_t i, const void *arg, int thread);
void td_eng_for(td_ctx *ctx, int64_t n, td_eng_fn fn, const void *arg);
void td_eng_for_dynamic(td_ctx *ctx, int64_t n, td_eng_fn fn, const void *arg);

/* Y[t, :n_out] = X[t, :] W^T (rows = NULL) or the listed rows of W, for the pass's first T rows. */
void td_eng_matmul(td_ctx *ctx, const td_mat *w, const int32_t *rows, int64_t n_out, const float *x, int64_t T,
                   int64_t ldx, float *y, int64_t ldy);
/* Several products of the same input X [T, ldx] (all rows of each W), in one pass of the pool, the input
 * quantised once for those whose weights share a layout: the same results as one td_eng_matmul each. */
#define TD_ENG_MAX_PRODUCTS 4
typedef struct td_eng_product {
    const td_mat *w;
    int64_t n_out; /* rows of w */
    float *y;      /* [T, ldy] */
    int64_t ldy;
} td_eng_product;
void td_eng_matmuls(td_ctx *ctx, const float *x, int64_t T, int64_t ldx, const td_eng_product *p, int n);
/* att[t, h*hd..] = softmax attention of query head h of token t over its sequence's cells 0..pos, for layer il's
 * cache (q has row stride ldq, the query of head h at q + h * q_head_stride). */
void td_eng_attention(td_ctx *ctx, int il, const float *q, int64_t ldq, int64_t q_head_stride);
/* Stores one K or V row (kv_dim floats) into a cache cell, converting to f16 when the cache is f16. */
void td_eng_store_kv(const td_ctx *ctx, void *cache, int32_t cell, const float *row);
/* 1 when every value of the row is finite. */
int td_eng_row_finite(const float *x, int64_t n);
/* Keeps only the rows of the tokens that want an output (x compacted, in order; pass.n_rows = n_out): what
 * follows the last layer's mixer is per row, and only the output tokens' hidden states are read. */
void td_eng_keep_outputs(td_ctx *ctx);

/* The device side of a context (src/engine/cuda/; src/engine/device_none.c in a build without CUDA). */
td_status td_eng_dev_probe(td_device device, char *desc, size_t desc_len);
td_status td_eng_dev_free_bytes(int64_t *free_bytes); /* the GPU's free memory now (td_device_free_bytes) */
void *td_eng_dev_alloc(size_t bytes, int zero); /* device memory; NULL on failure */
void td_eng_dev_free(void *p);
td_status td_eng_dev_open(td_ctx *ctx);  /* the model's weights on the device (once per model), the pass mirrors */
void td_eng_dev_close(td_ctx *ctx);
td_status td_forward_dev(td_ctx *ctx);   /* td_forward on the device: same steps, outputs copied into act.out */
td_status td_eng_dev_state_copy(td_ctx *ctx, int32_t dst, int32_t src); /* a sequence's DeltaNet state */
td_status td_eng_dev_state_zero(td_ctx *ctx, int32_t seq);
/* The floats of one DeltaNet layer's recurrent state in a CUDA context's own layout, read once per context (its plan):
 * 0 for the CPU's S [Hv, dk, dv] (the token-by-token kernel), else the chunked kernel's state (TD_CUDA_DN=chunk in the
 * environment, for shapes it takes: cuda.h's td_cu_deltanet_chunk_state_floats). */
int64_t td_eng_dev_dn_state_floats(const td_config *c);
/* 1 when a CUDA context of these parameters stores its KV cache in bf16: --precision bf16, an f32 cache asked, the
 * tensor-core attention for the model's head dim (which rounds every cached key and value to bf16 the same way, so
 * the same bits at half the bytes), unless TD_CUDA_KV_BF16=0 in the environment (tested and timed on the H200: NOTES
 * "CUDA backend, part 7"; compute-sanitizer has yet to run on it: part 8). Read by each context's plan. */
int td_eng_dev_kv_bf16(const td_config *c, const td_ctx_params *p);
/* The error td_forward and td_forward_dev return for a non-finite row: sets ctx->fault for batch token t at
 * `layer` (-1: the embedding; n_layer: the head) in `block`. */
td_status td_eng_nonfinite(td_ctx *ctx, int32_t layer, const char *block, int32_t t);

/* The forward pass over the prepared pass (ctx.c's prepare_pass): embeddings, layers, final norm and head,
 * leaving the outputs in act.out. Stops with TD_ERR_NONFINITE (ctx->fault says where) when a row of the residual
 * stream or an output is NaN or infinite. */
td_status td_forward(td_ctx *ctx);

/* The steps it is made of (steps.c). A step's buffers: the activations of a td_buf, and their row width. */
float *td_eng_buf(td_ctx *ctx, td_buf b);
int64_t td_eng_buf_width(const td_ctx *ctx, td_buf b);
/* Floats between query heads in Q: head_dim, or 2 head_dim with an output gate ([query | gate] per head). */
int64_t td_eng_q_head_stride(const td_ctx *ctx);
/* 1 for a step that works row by row (in the last layer KEEP_OUTPUTS is not one: it compacts the rows). */
int td_eng_row_step(const td_step *s, int last_layer);
/* n row steps of layer il, as one pass over the rows (each row takes them in order). */
void td_eng_row_steps(td_ctx *ctx, int il, const td_layer *ly, const td_step *steps, int n);
/* After n products (MATMUL steps): each one's bias, where the layer has it, added to its output rows. */
void td_eng_add_biases(td_ctx *ctx, const td_layer *ly, const td_step *steps, int n);
/* The Gated DeltaNet of layer il: DN_QKV, DN_Z, DN_B, DN_A -> DN_CORE (deltanet.c). */
void td_eng_deltanet(td_ctx *ctx, int il, const td_layer *ly);

#endif
