/* The engine's private state: batches, the context (activations, KV cache, sequences) and the forward passes.
 *
 * KV cache: a pool of n_ctx cells per layer, each cell one position's K and V rows. A sequence is a table
 * position -> cell. Forking a sequence copies the table entries (ints) and bumps the cells' reference counts:
 * a shared prefix is stored once and read by every sequence forked from it. */
#ifndef TD_ENGINE_ENGINE_H
#define TD_ENGINE_ENGINE_H

#include <stdint.h>

#include "kernels/cpu/kernels.h"
#include "kernels/cpu/threadpool.h"
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

struct td_ctx {
    const td_model *model;
    td_ctx_params p;
    const td_kernels *k;
    td_pool *pool;

    /* KV cache: [n_layer][n_ctx][kv_dim] float or f16 (p.kv_f16) for attention layers (NULL for DeltaNet layers) */
    void **k_cache, **v_cache;
    int32_t kv_dim;
    int32_t *refcount;  /* [n_ctx] */
    int32_t *free_list; /* stack of free cells */
    int32_t n_free;
    td_seq *seqs;       /* [n_seq_max] */

    /* the batch being decoded */
    int32_t n_tokens;
    int32_t *tok_id, *tok_seq, *tok_pos, *tok_cell; /* [n_batch] */
    int32_t *out_tok;                               /* batch indices that want outputs */
    int32_t n_out;

    /* activations, sized for n_batch tokens */
    float *x, *xb;         /* [n_batch, d] */
    float *q, *kx, *vx;    /* [n_batch, q_rows], [n_batch, kv_dim] x2 */
    float *att;            /* [n_batch, Hq * hd] */
    float *ff_g, *ff_u;    /* [n_batch, n_ff] */
    float *scores;         /* [n_threads, attn_scratch] attention scores and scratch */
    int64_t attn_tokens;   /* tokens per attention task (TD_ATTN_TOKENS, fewer for wide GQA groups) */
    int64_t attn_rows_max; /* query rows per attention task: attn_tokens x query heads per KV head (<= 256) */
    int64_t attn_scratch;  /* floats of attention scratch per thread (td_attn_rows_scratch) */
    float *inv_freq;       /* [rotary_dim / 2] */
    float *rope_cs;        /* [n_batch, rotary_dim]: each token's td_rope_table, made once per forward pass */
    float *out_x;          /* [n_out_max, d] final-normed hidden of output tokens */
    float *out;            /* [n_out_max, n_vocab] or [n_out_max, n_rows] */
    int32_t n_out_max;
    int32_t *head_rows;    /* restricted head rows (NULL: full vocabulary) */
    int32_t n_head_rows;
    int64_t head_macs;     /* multiply-adds spent in the head so far */

    /* the batch's tokens grouped by sequence, in position order (for the DeltaNet recurrence) */
    int32_t n_groups;
    int32_t n_pre;         /* positions before every group's first token whose cells all the groups share (a
                              prefix forked to all of them); 0 when fewer than 2 groups or too short to matter */
    float *pre_kv;         /* [2][n_ctx * kv_dim] that prefix's keys then values per KV head, [Hkv][n_pre][hd]
                              fp32, gathered once per layer (n_seq_max > 1 only) */
    int32_t *grp_seq;      /* [n_batch] sequence of each group */
    int32_t *grp_off;      /* [n_batch + 1] group g holds grp_tok[grp_off[g] .. grp_off[g+1]) */
    int32_t *grp_tok;      /* [n_batch] batch indices */

    /* Gated DeltaNet: per sequence, per DeltaNet layer: conv state [(K-1), conv_dim] then S [Hv, dk, dv] */
    int hybrid;
    int64_t dn_conv_dim;
    int64_t dn_state_floats; /* per sequence */
    int64_t *dn_off;         /* [n_layer] offset of a layer's state in a sequence's block (-1: attention) */
    float *dn_state;         /* [n_seq_max, dn_state_floats] */
    float *dn_qkv, *dn_conv; /* [n_batch, conv_dim] raw projections and conv outputs */
    float *dn_z, *dn_core;   /* [n_batch, Hv * dv] */
    float *dn_b, *dn_a;      /* [n_batch, Hv] */
    float *dn_work;          /* [n_threads, dn_work_floats] chunked-form scratch */
    void *xq;                /* quantised activations (quantised weights only), td_qrows_bytes(n_batch,
                                xq_max_blocks) bytes, laid out per product by td_qrows_bind */
    int64_t xq_max_blocks;   /* blocks of the widest quantised weight's row */
    int64_t dn_work_floats;
};

static inline float *td_eng_dn_conv_state(td_ctx *ctx, int32_t seq, int il) {
    return ctx->dn_state + (int64_t)seq * ctx->dn_state_floats + ctx->dn_off[il];
}
static inline float *td_eng_dn_recurrent_state(td_ctx *ctx, int32_t seq, int il) {
    return td_eng_dn_conv_state(ctx, seq, il) + (int64_t)(ctx->model->cfg.lin_conv_kernel - 1) * ctx->dn_conv_dim;
}

#define TD_ATTN_TOKENS 32 /* consecutive tokens of a sequence whose queries share each read of a key row */
#define TD_PRE_MIN 16     /* shortest shared prefix worth gathering once per layer for all the batch's sequences */

/* Helpers the forward passes share (engine/ops.c). */

/* Y[t, :n_out] = X[t, :] W^T (rows = NULL) or the listed rows of W, split over the pool. */
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
/* att[t, h*hd..] = softmax attention of query head h of token t over its sequence's cells 0..pos, for a layer's
 * cache (q has row stride ldq, the query of head h at q + h * q_head_stride). */
void td_eng_attention(td_ctx *ctx, const float *q, int64_t ldq, int64_t q_head_stride, const void *kc,
                      const void *vc);
/* Stores one K or V row (kv_dim floats) into a cache cell, converting to f16 when the cache is f16. */
void td_eng_store_kv(const td_ctx *ctx, void *cache, int32_t cell, const float *row);
/* Runs fn(ctx, t, arg) for every token t of the pass, the tokens split over the threads. */
typedef void (*td_token_fn)(td_ctx *ctx, int64_t t, const void *arg);
void td_eng_per_token(td_ctx *ctx, td_token_fn fn, const void *arg);
/* A block's input, xb[t] = RMSNorm(x[t]) * w, and its residual connection, x[t] += xb[t], for every token. */
void td_eng_norm_in(td_ctx *ctx, const float *w);
void td_eng_residual(td_ctx *ctx);
/* Drops every token that wants no output from the pass (x and tok_* compacted to the output tokens, in order):
 * what follows the last layer's mixer is per token, and only the output tokens' hidden states are read. */
void td_eng_keep_outputs(td_ctx *ctx);
/* Final norm and head for the tokens that want outputs; fills ctx->out. */
void td_eng_outputs(td_ctx *ctx);

/* The forward pass: runs ctx->n_tokens tokens (ctx->tok_*) through the model, leaving the final hidden states in
 * ctx->x. The blocks it is made of: */
void td_forward(td_ctx *ctx);
void td_block_attention(td_ctx *ctx, int il, const td_layer *ly);
void td_block_deltanet(td_ctx *ctx, int il, const td_layer *ly);
void td_block_mlp(td_ctx *ctx, const td_layer *ly);

#endif
