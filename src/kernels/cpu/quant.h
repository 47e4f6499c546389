/* Q8_0 and Q4_0 blocks (GGUF's exact layouts) and the scalar reference for quantising, dequantising and
 * multiplying them. Quantised matrix products quantise the activations too, row by row, to Q8_0 blocks and sum
 * exact integer block dot products scaled by d_w * d_x: a row's result depends only on that row. */
#ifndef TD_KERNELS_CPU_QUANT_H
#define TD_KERNELS_CPU_QUANT_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "util/dtype.h"

typedef struct td_block_q8_0 {
    uint16_t d;            /* fp16 scale */
    int8_t qs[TD_QBLOCK];
} td_block_q8_0;

typedef struct td_block_q4_0 {
    uint16_t d;                /* fp16 scale */
    uint8_t qs[TD_QBLOCK / 2]; /* qs[j] & 15 = element j, qs[j] >> 4 = element j + 16; value (q - 8) * d */
} td_block_q4_0;

/* f32 -> blocks, as llama.cpp's reference quantisers: Q8_0 d = amax / 127, q = round(x / d);
 * Q4_0 d = (the value of largest magnitude) / -8, q = min(15, (int8)(x / d + 8.5)). n is a multiple of 32. */
void td_quantize_q8_0(const float *x, td_block_q8_0 *y, int64_t n);
void td_quantize_q4_0(const float *x, td_block_q4_0 *y, int64_t n);
void td_dequantize_q8_0(const td_block_q8_0 *x, float *y, int64_t n);
void td_dequantize_q4_0(const td_block_q4_0 *x, float *y, int64_t n);

/* Packed Q8_0 / Q4_0 weights, made once at load for the kernels that want them (td_kernels.pack). Two layouts,
 * named by how many blocks share a vector ("lanes"); in both, every 32-bit lane of an accumulator ends up holding
 * one block's complete integer dot product, so the float work (a conversion, a scale product, an fma) is done
 * once per 8 or 16 blocks instead of once per block.
 *
 * x16 (AVX-512 VNNI: vpdpbusd, unsigned weight bytes x signed activation bytes). A row's blocks are taken in
 * groups of 16 (the last group padded with zero blocks); in a group, byte lane*4 + i of chunk k (k = 0..7, 64
 * bytes each) is element 4k + i of block lane.
 *   Q8_0: 8 chunks of unsigned bytes w + 128 (512 bytes a group).
 *   Q4_0: 4 chunks of bytes (chunk k in the low nibbles, chunk k + 4 in the high), unsigned q = w + 8 (256 bytes).
 * x8 (AVX2). Groups of 8 blocks, one a 32-bit lane of a ymm register.
 *   Q8_0 (vpmaddwd, int16 weights x int16 activations, 2 products a lane): byte lane*2 + i of chunk k (16 bytes)
 *     is element 2k + i of block lane: 16 chunks of signed bytes w (256 bytes a group), widened to int16 as they
 *     are loaded. Padding blocks are zero.
 *   Q4_0 (vpmaddubsw, unsigned weight bytes x signed activation bytes, 4 products a lane): x16's Q4_0 layout with
 *     8 lanes: byte lane*4 + i of chunk k (k = 0..7, 32 bytes) is element 4k + i of block lane, 4 chunks of bytes
 *     (chunk k in the low nibbles, chunk k + 4 in the high), unsigned q = w + 8 (128 bytes a group). Padding
 *     blocks are q = 8 (w = 0).
 * A row is the nbg groups' bytes, then nbg * lanes fp16 scales, padded to 64 bytes.
 * r16 (the AMX set and its AVX-512 VNNI twin: tdpbsud / vpdpbusd with 16 weight ROWS in the 16 lanes, one block a
 * vector, so lanes = TD_R16_LANES = 1). Rows are taken in slabs of 16 (the last padded with zero rows). A slab holds
 * its rows' blocks in order, block b in x16's group layout with "lane" meaning the row in the slab: byte r*4 + i of
 * chunk k is element 4k + i of row r's block (Q8_0: 8 chunks of w + 128, 512 bytes; Q4_0: 4 chunks of nibbles,
 * 256 bytes), then the nb blocks' fp16 scales, 16 a block (block b's at b * 16 + r), padded to 64 bytes. A Q8_0
 * block of a slab is, as it lies, an AMX B tile (8 rows of 64 bytes). For r16 packs nbg is the number of blocks
 * (nb), group_bytes a block's bytes in a slab, and row_bytes a slab's bytes (td_qpack_slab). */
#define TD_X16_LANES 16                         /* blocks a x16 group, one per 32-bit lane of a zmm register */
#define TD_X16_CHUNK (4 * TD_X16_LANES)         /* 64: a x16 chunk holds 4 consecutive elements of each block */
#define TD_X16_GROUP (TD_QBLOCK * TD_X16_LANES) /* 512: elements a x16 group (bytes of its Q8_0 weights, of one
                                                   level of its activations) */
#define TD_R16_LANES 1                          /* td_qpack.lanes of r16: one block (of 16 rows) a vector */
#define TD_R16_ROWS 16                          /* rows a r16 slab */
#define TD_R16_SHIFT 7                          /* r16 activations: d1 / d2 = 2^7 (quant.h's td_qrows) */
#define TD_X8_LANES 8                           /* blocks a x8 group, one per 32-bit lane of a ymm register */
#define TD_X8_CHUNK (2 * TD_X8_LANES)           /* 16: a x8 chunk holds 2 consecutive elements of each block */
#define TD_X8_GROUP (TD_QBLOCK * TD_X8_LANES)   /* 256: elements a x8 group (bytes of its Q8_0 weights, int16
                                                   activations) */
#define TD_X8_QCHUNK (4 * TD_X8_LANES)          /* 32: a x8 Q4_0 chunk holds 4 consecutive elements of each block */
typedef struct td_qpack {
    td_dtype type;
    int lanes;          /* TD_X8_LANES or TD_X16_LANES */
    int64_t rows, nbg;
    size_t group_bytes; /* x16: 512 or 256; x8: 256 or 128 */
    size_t row_bytes;
    uint8_t *data;      /* 64-byte aligned, rows * row_bytes */
} td_qpack;

/* Packs a Q8_0 / Q4_0 matrix of `rows` rows (row_bytes apart at data) into the layout of `lanes` (TD_X8_LANES or
 * TD_X16_LANES). Returns NULL when out of memory. */
td_qpack *td_qpack_new(td_dtype type, int64_t rows, int64_t cols, const void *data, size_t row_bytes, int lanes);
void td_qpack_free(td_qpack *p);
static inline const uint8_t *td_qpack_row(const td_qpack *p, int64_t r) { return p->data + (size_t)r * p->row_bytes; }
/* Slab s of a r16 pack (rows 16 s .. 16 s + 15). */
static inline const uint8_t *td_qpack_slab(const td_qpack *p, int64_t s) { return p->data + (size_t)s * p->row_bytes; }
/* The unsigned weight byte (Q8_0: w + 128, Q4_0: q = w + 8) of element e of lane `lane` in a x16 group (in a r16
 * block, `lane` is the row in the slab), or in a x8 Q4_0 group: the references read packed weights through it. */
static inline int td_qpack_weight(const td_qpack *p, const uint8_t *group, int lane, int e) {
    int k = e / 4, i = e % 4, chunk = p->lanes == TD_X8_LANES ? TD_X8_QCHUNK : TD_X16_CHUNK;
    if (p->type == TD_DTYPE_Q8_0) return group[k * chunk + lane * 4 + i];
    uint8_t byte = group[(k % 4) * chunk + lane * 4 + i];
    return k < 4 ? byte & 15 : byte >> 4;
}
static inline const uint16_t *td_qpack_scales(const td_qpack *p, const uint8_t *row) {
    return (const uint16_t *)(const void *)(row + (size_t)p->nbg * p->group_bytes);
}
/* The lanes of a packed product's accumulator added as the kernels' horizontal sums do: a tree that halves the
 * lanes each step (a_i = acc_i + acc_{i + lanes/2}, ...). Overwrites acc. */
static inline float td_qpack_lanes_sum(float *acc, int lanes) {
    for (int h = lanes / 2; h >= 1; h /= 2)
        for (int i = 0; i < h; i++) acc[i] += acc[i + h];
    return acc[0];
}

/* Activations quantised for a quantised matrix product: T rows, in one of four layouts (td_qrows_layout).
 *   plain (TD_QROWS_PLAIN): each row quantised to Q8_0 blocks (td_quantize_q8_0's values): q [T * nb] blocks and
 *     d [T * nb], each block's scale again as fp32 (the same value as the block's fp16 d) so that the inner loops
 *     need no conversion. The scalar kernels' layout, and llama.cpp's scheme.
 *   x16 (TD_QROWS_X16_1 or _2 levels, for x16 weights): level 1 the Q8_0 values q1 with scale d1; level
 *     2 the rest, r = x - d1 q1, quantised again to q2 with an fp32 scale d2 = max|r| / 127, so that x = d1 q1 +
 *     d2 q2 to about 15 bits (Q8_0 weights get two: one level alone moved decisions by up to 0.024 in probability
 *     on a full-size model, see NOTES.md; Q4_0 weights, whose own rounding dominates, get one). For each level:
 *     qi [T * nbg * 512] bytes interleaved as td_qpack's Q8_0 chunks (signed), d [T * nbg * 16] scales, s [T * nbg
 *     * 16] the sums of each block's 32 values; level 2 in qi2, d2, s2. Padding blocks are all zero.
 *   x8 (TD_QROWS_X8, for x8 Q8_0 weights): each block of 32 as int16, d = amax / 32767 in fp32 and q = roundf(x /
 *     d) (|q| <= 32767): about 15 bits, the precision of x16's two levels at the cost of one. qw [T * nbg * 256]
 *     int16 interleaved as td_qpack's x8 chunks, d [T * nbg * 8]. Padding blocks are all zero.
 *   x8 Q4_0 (TD_QROWS_X8_Q4, for x8 Q4_0 weights): x16's one level with 8 lanes: the Q8_0 values q1 (|q1| <= 127)
 *     and scale d1, qi [T * nbg * 256] bytes interleaved as td_qpack's x8 Q4_0 chunks (byte lane*4 + i of chunk k
 *     is element 4k + i), d [T * nbg * 8], and c [T * nbg * 16] int16 offsets: c[2 lane + h] = -8 x the sum of
 *     block lane's elements 4k + 2h and 4k + 2h + 1 over k, the share of q = w + 8's offset that lands in each
 *     16-bit half of the lane (vpmaddubsw adds byte pairs 4k, 4k + 1 into the low half, 4k + 2, 4k + 3 into the
 *     high). Padding blocks are all zero.
 *   bf16 (TD_QROWS_BF16, for BF16 weights on AVX-512 BF16): each value as bf16, h = bf16(x), rounded to nearest
 *     even with inputs below FLT_MIN flushed to zero, as vcvtneps2bf16 does (td_f32_to_bf16_daz): 8 significant
 *     bits, llama.cpp's activations for BF16 weights (a second level, x - h, would give 16 bits but made prefill
 *     slower than fp32 FMA on the converted weights: NOTES.md). h [T * nb * 32] in the natural order of the
 *     columns, rows of nb * 32 values, zero past `cols`.
 *   r16 (TD_QROWS_R16_1 or _2, for r16 weights): x16's levels, arrays and sizes, but each row's bytes in the
 *     natural order of the columns (block b's 32 values at b * 32 of the row's nbg * 512 bytes), so that 16 rows of
 *     a block are one AMX A tile (rows nbg * 512 bytes apart); d, s as x16 (block b of row t at t * nbg * 16 + b).
 *     The second level has the fixed scale d2 = d1 / 128 (TD_R16_SHIFT; q2 = roundf(r / d2) within +-127, never
 *     clamped while d1 is a normal fp16 number: |r| < 0.57 d1, d1 being the scale rounded to fp16; ~14 bits where
 *     x16's adaptive second scale gives 15), so that a block's two integer sums combine exactly into one,
 *     128 p1 + p2, scaled once by d_w * d2.
 * nb = cols / 32 for the block layouts (cols a multiple of 32), ceil(cols / 32) for bf16. */
enum {
    TD_QROWS_PLAIN = 0, TD_QROWS_X16_1 = 1, TD_QROWS_X16_2 = 2, TD_QROWS_X8 = 8, TD_QROWS_BF16 = 16,
    TD_QROWS_NATURAL = 32, TD_QROWS_R16_1 = TD_QROWS_NATURAL | 1, TD_QROWS_R16_2 = TD_QROWS_NATURAL | 2,
    TD_QROWS_X8_Q4 = 64
};
typedef struct td_qrows {
    int x16;            /* x16 levels (1 or 2), else 0 */
    int natural;        /* 1: x16's arrays with the bytes in column order (r16) */
    int x8;             /* 1: the x8 layout, 2: x8 Q4_0 */
    int bf16;           /* 1: the bf16 layout */
    td_block_q8_0 *q;
    int8_t *qi, *qi2;
    int16_t *qw;
    uint16_t *h;
    float *d, *d2;
    int32_t *s, *s2;
    int16_t *c;         /* x8 Q4_0's offsets */
    int64_t cols, nb, nbg;
} td_qrows;

/* Where chunk k (elements 4k..4k+3) of block `lane` of x16 group g lies in a level's bytes: interleaved (x16) or in
 * column order (r16). */
static inline int64_t td_qrows_x16_at(int64_t g, int64_t lane, int k, int natural) {
    return g * TD_X16_GROUP + (natural ? lane * TD_QBLOCK + 4 * k : k * TD_X16_CHUNK + lane * 4);
}

/* The scale of a x16 / r16 block's second level, given its first level's d1 and the largest |r| of its remainder:
 * r16's fixed d1 / 128, else max|r| / 127. Both quantisers take it from here. */
static inline float td_qrows_level2_scale(const td_qrows *xq, float d1, float amax) {
    return xq->natural ? d1 / (float)(1 << TD_R16_SHIFT) : amax / 127.0f;
}

/* r16: the offset sums' share of the combined integer of block `at` (t * nbg * 16 + b), weights offset by o (128 for
 * Q8_0, 8 for Q4_0): o s1, or with two levels o (128 s1 + s2); and the scale that integer takes (d1, or d2). In
 * 32-bit wrapping arithmetic, as the SIMD kernels' lanes: a row that was not finite has sums of no meaning (the
 * quantisers saturate its values, not its sums), never undefined behaviour. */
static inline int32_t td_r16_offset(const td_qrows *xq, int64_t at, int32_t o) {
    const uint32_t u = (uint32_t)o * (uint32_t)xq->s[at];
    return (int32_t)(xq->x16 > 1 ? u * (1u << TD_R16_SHIFT) + (uint32_t)o * (uint32_t)xq->s2[at] : u);
}
static inline float td_r16_scale(const td_qrows *xq, int64_t at) { return xq->x16 > 1 ? xq->d2[at] : xq->d[at]; }

/* Bytes of a td_qrows buffer for T rows of `cols` inputs, any layout; td_qrows_bind lays one out over such a
 * buffer (64-byte aligned) in the given layout (TD_QROWS_*). */
size_t td_qrows_bytes(int64_t T, int64_t cols);
void td_qrows_bind(td_qrows *xq, void *buf, int64_t T, int64_t cols, int layout);
/* The layout a matrix product with w's type and packing (NULL: none) takes. */
int td_qrows_layout(td_dtype type, const td_qpack *pack);
/* A view of rows [t0, T) of xq, as row 0 onwards: a range of tokens of the same quantised activations. */
td_qrows td_qrows_from(const td_qrows *xq, int64_t t0);

/* fp32 -> bf16 as vcvtneps2bf16: round to nearest even, inputs below FLT_MIN in magnitude flushed to (signed)
 * zero, NaN kept quiet. */
static inline uint16_t td_f32_to_bf16_daz(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7f800000u) == 0) return (uint16_t)((u >> 16) & 0x8000u);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

/* Stores row r's block b (its 32 inputs x, their Q8_0 values qs and fp16 scale d) in the plain, x16 or x8 Q4_0
 * layout, computing the second level for x16; td_qrows_pad zeroes row r's padding blocks (x16, x8). Shared by the
 * quantisers so that they differ only in how they compute the first level. td_qrows_put_x8 stores an x8 block
 * (its int16 values and fp32 scale). */
void td_qrows_put(const td_qrows *xq, int64_t r, int64_t b, const float *x, const int8_t *qs, uint16_t d);
void td_qrows_put_x8(const td_qrows *xq, int64_t r, int64_t b, const int16_t *qs, float d);
void td_qrows_pad(const td_qrows *xq, int64_t r);

/* Quantises rows [r0, r1) of X [T, cols] (leading dimension ldx) into xq's layout: plain, x16 and x8 Q4_0
 * as td_quantize_q8_0 does, x8 and bf16 as described above. The AVX2 version gives identical bytes (round half away
 * from zero, like roundf; bf16 by the same integer rounding). */
typedef void (*td_quantize_rows_fn)(const float *x, int64_t ldx, const td_qrows *xq, int64_t r0, int64_t r1);
void td_quantize_rows_ref(const float *x, int64_t ldx, const td_qrows *xq, int64_t r0, int64_t r1);
void td_quantize_rows_avx2(const float *x, int64_t ldx, const td_qrows *xq, int64_t r0, int64_t r1);
/* AVX-512 for the x16 and r16 layouts (the others through td_quantize_rows_avx2): the same bytes again. */
void td_quantize_rows_avx512(const float *x, int64_t ldx, const td_qrows *xq, int64_t r0, int64_t r1);

#endif
