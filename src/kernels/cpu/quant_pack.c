/* Packing Q8_0 / Q4_0 weight rows into the x16 and x8 layouts (quant.h), and laying out quantised activation
 * buffers (td_qrows: binding, views of a range of rows, and the stores the quantisers share). No SIMD twin: it runs at load and per block. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "kernels/cpu/quant.h"
#include "util/alloc.h"
#include "util/half.h"

static size_t align64(size_t n) { return (n + 63) & ~(size_t)63; }

/* Packed rows are streamed once per token in decode: large ones go on transparent huge pages where the system
 * offers them (madvise mode), which spares a TLB miss every 4 KB. */
static void *alloc_rows(size_t total) {
    const size_t huge = (size_t)2 << 20;
    if (total < huge) return td_aligned_alloc(64, total ? total : 64);
    size_t rounded = (total + huge - 1) & ~(huge - 1);
    void *p = td_aligned_alloc(huge, rounded);
#ifdef MADV_HUGEPAGE
    if (p) madvise(p, rounded, MADV_HUGEPAGE); /* advice only: failure changes nothing */
#endif
    return p;
}

/* x16 (chunk = 64 bytes) and x8 Q4_0 (32): byte lane*4 + i of chunk k is element 4k + i. */
static void pack_group_x16(td_dtype type, uint8_t *g, int lane, const void *blk, int chunk) {
    for (int e = 0; e < TD_QBLOCK; e++) {
        if (type == TD_DTYPE_Q8_0) { /* w + 128 as an unsigned byte; padding is w = 0 */
            g[(e / 4) * chunk + lane * 4 + e % 4] = (uint8_t)((blk ? (uint8_t)((const td_block_q8_0 *)blk)->qs[e] : 0) ^ 0x80);
        } else { /* q in 0..15; padding is q = 8 (w = 0) */
            const td_block_q4_0 *b4 = blk;
            int q = b4 ? (e < TD_QBLOCK / 2 ? b4->qs[e] & 15 : b4->qs[e - TD_QBLOCK / 2] >> 4) : 8;
            int k = e / 4;
            g[(k % 4) * chunk + lane * 4 + e % 4] |= (uint8_t)(k < 4 ? q : q << 4);
        }
    }
}

/* x8 Q8_0: byte lane*2 + i of chunk k is element 2k + i (Q4_0 takes x16's layout with 8 lanes). */
static void pack_group_x8(td_dtype type, uint8_t *g, int lane, const void *blk) {
    if (type == TD_DTYPE_Q4_0) {
        pack_group_x16(type, g, lane, blk, TD_X8_QCHUNK);
        return;
    }
    for (int e = 0; e < TD_QBLOCK; e++)
        g[(e / 2) * TD_X8_CHUNK + lane * 2 + e % 2] = blk ? (uint8_t)((const td_block_q8_0 *)blk)->qs[e] : 0;
}

/* r16: slabs of 16 rows, each row's blocks in x16's group layout with the row as the lane (quant.h). */
static void fill_r16(td_qpack *p, int64_t rows, int64_t nb, const void *data, size_t row_bytes) {
    const td_dtype type = p->type;
    const int64_t slabs = (rows + TD_R16_ROWS - 1) / TD_R16_ROWS;
    size_t bsz = type == TD_DTYPE_Q8_0 ? sizeof(td_block_q8_0) : sizeof(td_block_q4_0);
    for (int64_t r = 0; r < slabs * TD_R16_ROWS; r++) { /* rows past the matrix: zero weights, scale 0 */
        uint8_t *slab = p->data + (size_t)(r / TD_R16_ROWS) * p->row_bytes;
        uint16_t *d = (uint16_t *)(void *)(slab + (size_t)nb * p->group_bytes);
        int lane = (int)(r % TD_R16_ROWS);
        for (int64_t b = 0; b < nb; b++) {
            const void *blk = r < rows ? (const uint8_t *)data + (size_t)r * row_bytes + (size_t)b * bsz : NULL;
            pack_group_x16(type, slab + (size_t)b * p->group_bytes, lane, blk, TD_X16_CHUNK);
            if (blk) memcpy(&d[b * TD_R16_ROWS + lane], blk, 2); /* both block types start with their fp16 scale */
        }
    }
}

td_qpack *td_qpack_new(td_dtype type, int64_t rows, int64_t cols, const void *data, size_t row_bytes, int lanes) {
    if (!td_dtype_is_block(type) || (lanes != TD_X8_LANES && lanes != TD_X16_LANES && lanes != TD_R16_LANES))
        return NULL;
    td_qpack *p = td_calloc(1, sizeof *p);
    if (!p) return NULL;
    const int r16 = lanes == TD_R16_LANES, per = r16 ? TD_R16_ROWS : lanes; /* blocks (rows, r16) a vector */
    int64_t nb = cols / TD_QBLOCK;
    p->type = type;
    p->lanes = lanes;
    p->rows = rows;
    p->nbg = r16 ? nb : (nb + lanes - 1) / lanes;
    p->group_bytes = (size_t)per * (type == TD_DTYPE_Q8_0 ? TD_QBLOCK : TD_QBLOCK / 2);
    p->row_bytes = align64((size_t)p->nbg * (p->group_bytes + 2 * (size_t)per));
    size_t total = (size_t)(r16 ? (rows + TD_R16_ROWS - 1) / TD_R16_ROWS : rows) * p->row_bytes;
    if (!(p->data = alloc_rows(total))) {
        td_free(p);
        return NULL;
    }
    memset(p->data, 0, total);
    if (r16) {
        fill_r16(p, rows, nb, data, row_bytes);
        return p;
    }
    size_t bsz = type == TD_DTYPE_Q8_0 ? sizeof(td_block_q8_0) : sizeof(td_block_q4_0);
    for (int64_t r = 0; r < rows; r++) {
        const uint8_t *src = (const uint8_t *)data + (size_t)r * row_bytes;
        uint8_t *qs = p->data + (size_t)r * p->row_bytes;
        uint16_t *d = (uint16_t *)(void *)(qs + (size_t)p->nbg * p->group_bytes);
        for (int64_t b = 0; b < p->nbg * lanes; b++) {
            const void *blk = b < nb ? src + (size_t)b * bsz : NULL;
            uint8_t *g = qs + (size_t)(b / lanes) * p->group_bytes;
            d[b] = 0;
            if (blk) memcpy(&d[b], blk, 2); /* both block types start with their fp16 scale */
            if (lanes == TD_X16_LANES) pack_group_x16(type, g, (int)(b % TD_X16_LANES), blk, TD_X16_CHUNK);
            else pack_group_x8(type, g, (int)(b % TD_X8_LANES), blk);
        }
    }
    return p;
}

void td_qpack_free(td_qpack *p) {
    if (!p) return;
    td_free(p->data);
    td_free(p);
}

size_t td_qrows_bytes(int64_t T, int64_t cols) {
    int64_t nb = (cols + TD_QBLOCK - 1) / TD_QBLOCK;
    size_t plain = align64((size_t)(T * nb) * sizeof(td_block_q8_0)) + align64((size_t)(T * nb) * sizeof(float));
    int64_t nbg16 = (nb + TD_X16_LANES - 1) / TD_X16_LANES, nbg8 = (nb + TD_X8_LANES - 1) / TD_X8_LANES;
    size_t x16 = 2 * (size_t)(T * nbg16) * (TD_X16_GROUP + TD_X16_LANES * (sizeof(float) + sizeof(int32_t)));
    size_t x8 = (size_t)(T * nbg8) * (TD_X8_GROUP * sizeof(int16_t) + TD_X8_LANES * sizeof(float));
    size_t bf16 = (size_t)(T * nb) * TD_QBLOCK * sizeof(uint16_t);
    size_t most = plain > x16 ? plain : x16;
    most = most > x8 ? most : x8;
    return (most > bf16 ? most : bf16) + 64;
}

void td_qrows_bind(td_qrows *xq, void *buf, int64_t T, int64_t cols, int layout) {
    uint8_t *p = (uint8_t *)align64((size_t)buf);
    memset(xq, 0, sizeof *xq);
    xq->cols = cols;
    xq->nb = (cols + TD_QBLOCK - 1) / TD_QBLOCK;
    const int64_t nb = xq->nb;
    if (layout == TD_QROWS_BF16) {
        xq->bf16 = 1;
        xq->h = (uint16_t *)(void *)p;
        return;
    }
    if (layout == TD_QROWS_X8 || layout == TD_QROWS_X8_Q4) {
        xq->x8 = layout == TD_QROWS_X8 ? 1 : 2;
        xq->nbg = (nb + TD_X8_LANES - 1) / TD_X8_LANES;
        size_t n = (size_t)(T * xq->nbg);
        if (xq->x8 == 1) {
            xq->qw = (int16_t *)(void *)p;
            xq->d = (float *)(void *)(xq->qw + n * TD_X8_GROUP);
            return;
        }
        xq->qi = (int8_t *)p;
        xq->d = (float *)(void *)(xq->qi + n * TD_X8_GROUP);
        xq->c = (int16_t *)(void *)(xq->d + n * TD_X8_LANES);
        return;
    }
    xq->natural = (layout & TD_QROWS_NATURAL) != 0;
    int x16 = layout & ~TD_QROWS_NATURAL;
    xq->x16 = x16;
    xq->nbg = (nb + TD_X16_LANES - 1) / TD_X16_LANES;
    if (!x16) {
        xq->q = (td_block_q8_0 *)(void *)p;
        xq->d = (float *)(void *)(p + align64((size_t)(T * nb) * sizeof(td_block_q8_0)));
        return;
    }
    size_t n = (size_t)(T * xq->nbg);
    xq->qi = (int8_t *)p;
    xq->qi2 = xq->qi + n * TD_X16_GROUP;
    xq->d = (float *)(void *)(xq->qi2 + n * TD_X16_GROUP);
    xq->d2 = xq->d + n * TD_X16_LANES;
    xq->s = (int32_t *)(void *)(xq->d2 + n * TD_X16_LANES);
    xq->s2 = xq->s + n * TD_X16_LANES;
}

td_qrows td_qrows_from(const td_qrows *xq, int64_t t0) {
    td_qrows v = *xq;
    if (xq->bf16) {
        v.h = xq->h + (size_t)(t0 * xq->nb) * TD_QBLOCK;
    } else if (xq->x8 == 1) {
        size_t g = (size_t)(t0 * xq->nbg);
        v.qw = xq->qw + g * TD_X8_GROUP, v.d = xq->d + g * TD_X8_LANES;
    } else if (xq->x8) {
        size_t g = (size_t)(t0 * xq->nbg);
        v.qi = xq->qi + g * TD_X8_GROUP, v.d = xq->d + g * TD_X8_LANES, v.c = xq->c + g * 2 * TD_X8_LANES;
    } else if (xq->x16) {
        size_t g = (size_t)(t0 * xq->nbg);
        v.qi = xq->qi + g * TD_X16_GROUP, v.qi2 = xq->qi2 + g * TD_X16_GROUP;
        v.d = xq->d + g * TD_X16_LANES, v.d2 = xq->d2 + g * TD_X16_LANES;
        v.s = xq->s + g * TD_X16_LANES, v.s2 = xq->s2 + g * TD_X16_LANES;
    } else {
        v.q = xq->q + t0 * xq->nb, v.d = xq->d + t0 * xq->nb;
    }
    return v;
}

/* One level of a block into the interleaved layout (natural: in column order). */
static void put_level(int8_t *qi, float *d, int32_t *s, int64_t g, int64_t lane, const int8_t *qs, float scale,
                      int natural) {
    int32_t sum = 0;
    for (int k = 0; k < TD_QBLOCK / 4; k++) memcpy(qi + td_qrows_x16_at(g, lane, k, natural), qs + 4 * k, 4);
    for (int e = 0; e < TD_QBLOCK; e++) sum += qs[e];
    d[g * TD_X16_LANES + lane] = scale;
    s[g * TD_X16_LANES + lane] = sum;
}

int td_qrows_layout(td_dtype type, const td_qpack *pack) {
    if (!pack) return TD_QROWS_PLAIN;
    if (pack->lanes == TD_X8_LANES) return type == TD_DTYPE_Q8_0 ? TD_QROWS_X8 : TD_QROWS_X8_Q4;
    int levels = type == TD_DTYPE_Q8_0 ? TD_QROWS_X16_2 : TD_QROWS_X16_1;
    return pack->lanes == TD_R16_LANES ? levels | TD_QROWS_NATURAL : levels;
}

void td_qrows_put_x8(const td_qrows *xq, int64_t r, int64_t b, const int16_t *qs, float d) {
    int64_t g = r * xq->nbg + b / TD_X8_LANES, lane = b % TD_X8_LANES;
    for (int e = 0; e < TD_QBLOCK; e++) xq->qw[g * TD_X8_GROUP + (e / 2) * TD_X8_CHUNK + lane * 2 + e % 2] = qs[e];
    xq->d[g * TD_X8_LANES + lane] = d;
}

/* x8 Q4_0: the values as x16's chunks with 8 lanes, the scale, the offsets of the lane's two halves. */
static void put_x8_q4(const td_qrows *xq, int64_t r, int64_t b, const int8_t *qs, float d1) {
    int64_t g = r * xq->nbg + b / TD_X8_LANES, lane = b % TD_X8_LANES;
    int32_t half[2] = {0, 0};
    for (int e = 0; e < TD_QBLOCK; e++) {
        xq->qi[g * TD_X8_GROUP + (e / 4) * TD_X8_QCHUNK + lane * 4 + e % 4] = qs[e];
        half[(e / 2) % 2] += qs[e];
    }
    xq->d[g * TD_X8_LANES + lane] = d1;
    for (int h = 0; h < 2; h++) xq->c[g * 2 * TD_X8_LANES + 2 * lane + h] = (int16_t)(-8 * half[h]);
}

void td_qrows_put(const td_qrows *xq, int64_t r, int64_t b, const float *x, const int8_t *qs, uint16_t d) {
    float d1 = td_f16_to_f32(d);
    if (xq->x8) {
        put_x8_q4(xq, r, b, qs, d1);
        return;
    }
    if (!xq->x16) {
        td_block_q8_0 *blk = &xq->q[r * xq->nb + b];
        blk->d = d;
        memcpy(blk->qs, qs, TD_QBLOCK);
        xq->d[r * xq->nb + b] = d1;
        return;
    }
    int64_t g = r * xq->nbg + b / TD_X16_LANES, lane = b % TD_X16_LANES;
    put_level(xq->qi, xq->d, xq->s, g, lane, qs, d1, xq->natural);
    if (xq->x16 < 2) return;
    float rest[TD_QBLOCK], amax = 0.0f;
    int8_t q2[TD_QBLOCK];
    for (int e = 0; e < TD_QBLOCK; e++) {
        rest[e] = x ? x[e] - d1 * (float)qs[e] : 0.0f; /* exact product, one rounding in the difference */
        amax = fabsf(rest[e]) > amax ? fabsf(rest[e]) : amax;
    }
    float d2 = td_qrows_level2_scale(xq, d1, amax);
    float id2 = d2 != 0.0f ? 1.0f / d2 : 0.0f;
    for (int e = 0; e < TD_QBLOCK; e++) {
        float q = roundf(rest[e] * id2);
        q2[e] = (int8_t)(q > 127.0f ? 127.0f : q < -127.0f ? -127.0f : q);
    }
    put_level(xq->qi2, xq->d2, xq->s2, g, lane, q2, d2, xq->natural);
}

void td_qrows_pad(const td_qrows *xq, int64_t r) {
    static const int8_t zero[TD_QBLOCK];
    if (xq->x8 == 1) {
        static const int16_t zero16[TD_QBLOCK];
        for (int64_t b = xq->nb; b < xq->nbg * TD_X8_LANES; b++) td_qrows_put_x8(xq, r, b, zero16, 0.0f);
        return;
    }
    if (xq->x8) {
        for (int64_t b = xq->nb; b < xq->nbg * TD_X8_LANES; b++) put_x8_q4(xq, r, b, zero, 0.0f);
        return;
    }
    if (!xq->x16) return;
    for (int64_t b = xq->nb; b < xq->nbg * TD_X16_LANES; b++) td_qrows_put(xq, r, b, NULL, zero, 0);
}
