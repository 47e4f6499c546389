/* Scalar reference of the r16 matrix product (quant.h: slabs of 16 weight rows, x16 levels of activations in column
 * order): the arithmetic that td_matmul_r16_avx512 and td_matmul_r16_amx do, one row at a time, so that the three
 * agree to the bit.
 *
 * For weight row j and token t, one accumulator runs over the blocks b in order and, per block, the activation
 * levels in turn:
 *     acc = fma((float)p, d_w * d_x, acc),   p = sum of the block's 32 products (an exact integer),
 * and the result is acc (no lanes to add: the kernels keep 16 rows, not 16 blocks, in a vector's lanes). The
 * integer sum is computed as the kernels do, from unsigned weights: p = sum (w + o) * x - o * sum(x), o = 128 (Q8_0)
 * or 8 (Q4_0). */
#include <math.h>

#include "kernels/cpu/kernels.h"
#include "kernels/cpu/quant.h"
#include "util/half.h"

/* The exact integer dot product of row `lane` of a slab's block with one level of a token's block (32 values in
 * column order, their sum xsum). */
static int32_t block_sum(const td_qpack *p, const uint8_t *block, int lane, const int8_t *x, int32_t xsum) {
    int32_t isum = -(xsum * (p->type == TD_DTYPE_Q8_0 ? 128 : 8));
    for (int e = 0; e < TD_QBLOCK; e++) isum += td_qpack_weight(p, block, lane, e) * x[e];
    return isum;
}

static float dot_r16(const td_qpack *p, const uint8_t *slab, int lane, const td_qrows *xq, int64_t t) {
    const uint16_t *dw = td_qpack_scales(p, slab);
    const int8_t *x1 = xq->qi + t * xq->nbg * TD_X16_GROUP, *x2 = xq->qi2 + t * xq->nbg * TD_X16_GROUP;
    float acc = 0.0f;
    for (int64_t b = 0; b < p->nbg; b++) {
        const uint8_t *block = slab + b * p->group_bytes;
        int64_t at = t * xq->nbg * TD_X16_LANES + b;
        float w = td_f16_to_f32(dw[b * TD_R16_ROWS + lane]);
        int32_t i1 = block_sum(p, block, lane, x1 + b * TD_QBLOCK, xq->s[at]);
        acc = fmaf((float)i1, w * xq->d[at], acc);
        if (xq->x16 < 2) continue;
        int32_t i2 = block_sum(p, block, lane, x2 + b * TD_QBLOCK, xq->s2[at]);
        acc = fmaf((float)i2, w * xq->d2[at], acc);
    }
    return acc;
}

void td_matmul_r16_ref(const td_mat *w, const int32_t *rows, const void *xq, int64_t T, float *y, int64_t ldy,
                       int64_t j0, int64_t j1) {
    const td_qpack *p = w->pack;
    for (int64_t j = j0; j < j1; j++) {
        int64_t r = rows ? rows[j] : j;
        const uint8_t *slab = td_qpack_slab(p, r / TD_R16_ROWS);
        for (int64_t t = 0; t < T; t++) y[t * ldy + j] = dot_r16(p, slab, (int)(r % TD_R16_ROWS), xq, t);
    }
}
