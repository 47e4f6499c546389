/* How llama.cpp's converter lays out a Hugging Face tensor in GGUF, from the flags an architecture's description gives
 * it (arch.h: the names come from the description too), and the pre-tokenizer names it knows. */
#ifndef TD_MODEL_GGUF_NAMES_H
#define TD_MODEL_GGUF_NAMES_H

#include <stddef.h>
#include <stdint.h>

#include "model/arch.h"

/* How llama.cpp's converter stores a Hugging Face tensor besides renaming it and listing its dims innermost first
 * (for qwen35: conversion/qwen.py, Qwen3NextModel and _LinearAttentionVReorderBase):
 *  - plus_one: the zero-centred norms (every "*norm.weight" but the DeltaNet output norm) are stored as 1 + w,
 *    computed in fp32, so that llama.cpp can apply a plain RMSNorm;
 *  - neg_exp: linear_attn.A_log is stored as -exp(A_log) (the decay rate itself, named blk.N.ssm_a);
 *  - squeeze: conv1d [C, 1, K] is stored as ne {K, C} (the 1 dropped; same bytes);
 *  - value heads: when Hv > Hk, HF groups the value heads by key head (head g*R + r, R = Hv/Hk, is the r-th
 *    value head of key head g) and the GGUF tiles them (that head is at r*Hk + g), so that ggml can broadcast
 *    the key heads. vhead_axis says which axis of the tensor runs over value heads (0: rows, i.e. the outer HF
 *    dim; 1: columns, the inner dim; -1: none), from element vhead_start of that axis, vhead_size per head.
 *  - rope_heads: llama.cpp's "llama" architecture rotates interleaved pairs where transformers rotates half-split
 *    ones, so its converter permutes the rows of q_proj and k_proj within each of their rope_heads heads: GGUF
 *    row 2i + j of a head is Hugging Face row j * hd/2 + i (vhead_axis is then 0 and the value-head fields unused).
 *    For vectors (A_log, dt_bias) and conv1d, "rows" are the outer dim ([Hv] or [C] rows of K). */
typedef struct td_gguf_layout {
    int plus_one, neg_exp, squeeze;
    int vhead_axis;
    int64_t vhead_start, vhead_size;
    int64_t rope_heads, rope_hd;
} td_gguf_layout;

void td_gguf_layout_of(const td_tensor_spec *s, const td_config *c, td_gguf_layout *out);

/* Value-head reordering along l's axis: for index i of the destination, the index of the source it comes from.
 * to_gguf = 1 when the destination is the GGUF order (export), 0 when it is the Hugging Face order (load). */
int64_t td_gguf_vhead_src(const td_gguf_layout *l, const td_config *c, int64_t i, int to_gguf);

/* A pre-tokenizer llama.cpp knows by name (tokenizer.ggml.pre) and what it stands for in a Hugging Face
 * tokenizer.json: the Split regex, and whether the pipeline normalises to NFC and ignores merges. */
typedef struct td_gguf_pre {
    const char *name, *regex;
    int nfc, ignore_merges;
} td_gguf_pre;

/* The pre-tokenizer of a tokenizer.ggml.pre name, or NULL; the one a tokenizer's pipeline is, or NULL. */
const td_gguf_pre *td_gguf_pre_named(const char *name, size_t len);
const td_gguf_pre *td_gguf_pre_of(const char *regex, int nfc, int ignore_merges);
/* "qwen2, qwen35, llama-bpe", for messages. */
const char *td_gguf_pre_names(void);

#endif
