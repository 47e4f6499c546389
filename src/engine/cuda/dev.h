/* The device side of a CUDA context (built with -DTD_CUDA=ON):
 *   weights.c  the model's weights on the GPU, uploaded once per model as they are stored (td_dev_weights)
 *   ctx.c      a context's device part: its stream, the pass's index arrays and RoPE tables mirrored per pass, the
 *              sequences' cell tables, the outputs; DeltaNet state copies for forks
 *   forward.c  the forward pass on the GPU, step for step the CPU's (forward.c and block_*.c)
 * The KV cache, DeltaNet states and activations are the context's own buffers (ctx.c's plan marks them ON_DEVICE), so
 * td_ctx's fields hold device pointers here; the host keeps the bookkeeping (cells, reference counts, sequences). */
#ifndef TD_ENGINE_CUDA_DEV_H
#define TD_ENGINE_CUDA_DEV_H

#include "engine/engine.h"
#include "kernels/cuda/cuda.h"

/* A layer's weights on the device, slot for slot the host's td_layer (model.h). */
typedef struct td_dev_layer {
    td_cu_mat w[TD_W_COUNT];
    float *v[TD_W_COUNT];
} td_dev_layer;

typedef struct td_dev_weights {
    td_cu_mat embed, head; /* the same device bytes when the model ties them */
    float *final_norm;
    td_dev_layer *layers;  /* [n_layer] (host array of device pointers) */
    void **blocks;         /* every device allocation, freed with the model */
    int n_blocks, cap_blocks;
    size_t bytes;          /* device bytes of the weights */
} td_dev_weights;

/* The model's weights on the device, uploaded by the first CUDA context of the model (one lock for all models). */
td_status td_dev_weights_get(const td_model *m, const td_dev_weights **out);

/* A context's device part. What a pass sends goes as one copy: one block of int32 (ints, staged in page-locked host
 * memory h_ints) holds the fault word (its first two ints, reset by the copy), the pass's index arrays (the pointers
 * below point into it and are reset per pass), the attention tiles, and the changed runs of the sequences' cell
 * tables (a list of {cell-table offset, block offset, count} and the runs' data: td_cu_scatter_ints puts them in
 * place); the RoPE tables go from their own page-locked staging. */
typedef struct td_dev_ctx td_dev_ctx;
#define TD_DEV_FIXED_INTS(n_batch) (2 + 10 * (int64_t)(n_batch) + 2) /* fault word, arrays, tiles */
/* The chunked DeltaNet's tables of a pass: 6 ints a group, 2 a chunk; at most n_batch groups and n_batch chunks (a
 * prefill group of n >= 2 tokens spans at most n chunks; a one-token group none). */
#define TD_DEV_DNC_INTS(n_batch) (8 * (int64_t)(n_batch))
struct td_dev_ctx {
    void *stream;
    const td_dev_weights *w;
    int32_t *ints, *h_ints;  /* device block and its host staging (page-locked unless h_pageable) */
    int64_t n_ints;          /* ints of the block: the fixed part (fault word, arrays, tiles), then room for runs */
    int h_pageable;          /* the host would not lock pages: h_ints and h_rope are ordinary memory */
    int32_t *tok_id, *tok_seq, *tok_pos, *tok_cell, *out_tok; /* [n_batch] */
    int32_t *grp_seq, *grp_tok;                               /* [n_batch] */
    int32_t *grp_off;                                         /* [n_batch + 1] */
    int32_t *head_rows;                                       /* [head rows]: td_ctx_set_output_rows's list */
    int32_t *head_rows_on_dev; /* host: what head_rows holds ([head rows]), n_head_rows_on_dev of them (-1 unknown) */
    int64_t n_head_rows_on_dev;
    td_cu_attn_plan attn; /* the pass's attention tiles (in `ints`, [n_batch][2]), its max_n, and the split's scratch
                             (grown by each pass's need: ctx.c attn_scratch_fit) */
    float *rope_cs;  /* [n_rope, n_batch, rotary_dim] */
    float *h_rope;   /* its host staging, the same shape */
    int32_t *cells;  /* [n_seq_max, n_ctx] the sequences' cell tables (each pass uploads its sequences' rows) */
    int32_t *cells_on_dev; /* host: what `cells` holds ([n_seq_max, n_ctx], -1 unknown), so a pass uploads only the
                              changed tail of a table (forks and truncations rewrite tables on the host only) */
    float *out;      /* [n_outputs_max, head rows] the outputs before they are copied to act.out */
    uint64_t *fault; /* the smallest (step code << 32 | token) that went non-finite in the pass; UINT64_MAX: none
                        (the first 8 bytes of ints) */
    /* TD_CUDA_DN=chunk (ctx->dn.dev_chunk): every DeltaNet layer through td_cu_deltanet_chunk_multi. A pass's groups
     * go in launch sets, runs of groups whose scratch fits dnc_scratch (one set unless the pass has many prefill
     * groups); each set's table is staged in `ints` after the attention tiles. */
    float *dnc_scratch;         /* [dnc_scratch_floats]: td_cu_deltanet_chunk_scratch_floats(n_batch, 63, ...), so
                                   any one group of a pass fits */
    int64_t dnc_scratch_floats;
    td_cu_dnc_plan *dnc_sets;   /* host [n_batch]: the pass's launch sets (tab: device, in `ints`) */
    int32_t *dnc_first;         /* host [n_batch + 1]: set s is the groups [dnc_first[s], dnc_first[s + 1]) */
    int32_t *dnc_off;           /* host [n_batch + 1]: a set's grp_off rebased to its first token */
    int64_t *dnc_pos0;          /* host [n_batch]: a set's groups' first positions */
    int n_dnc_sets;
    float *mm_scratch;          /* [mm_scratch_floats]: the products' partials (td_cu_scratch_bind, bound per pass;
                                   grown when a pass's launch wanted more: forward.c) */
    int64_t mm_scratch_floats;
    uint16_t *norm_xb;          /* [norm_xb_elems]: a norm's output in bf16 for the products after it (above 64 tokens,
                                   bf16, td_cu_matmul_norm_xb: forward.c); grown by a pass that wants more */
    int64_t norm_xb_elems;
    void *graph;           /* the last small pass's kernels as a CUDA graph (forward.c), NULL: none */
    int64_t graph_key[8];  /* the shape it was recorded for */
    int32_t graph_rows;    /* ctx->pass.n_rows after the recorded kernels (the last layer keeps the output rows) */
    int graphs;            /* small passes run through graphs (TD_CUDA_GRAPHS=0 turns them off) */
    int glu_fused;         /* the MLP's gate taken into the down product (TD_CUDA_GLU_FUSED=0 turns it off) */
};

/* Drops the context's recorded graph (forward.c); the context's close calls it. */
void td_dev_graph_free(td_ctx *ctx);

/* TD_ERR_DEVICE with the CUDA runtime's words: "what: <td_cu_error()>". */
td_status td_dev_fail(const char *what);

/* Sends the prepared pass to the device: its index arrays and attention tiles, RoPE tables, its sequences' cell
 * tables, the head rows, and resets the fault word. */
td_status td_dev_upload_pass(td_ctx *ctx);

#endif
