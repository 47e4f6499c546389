/* Scalar reference of the r16 matrix product (quant.h: slabs of 16 weight rows, x16 levels of activations in column
 * order, the second with d2 = d1 / 128): the arithmetic that td_matmul_r16_avx512 and td_matmul_r16_amx do, one row
 * at a time, so that the three agree to the bit.
 *
 * For weight row j and token t, one accumulator runs over the blocks b in order:
 *     acc = fma((float)P, d_w * d, acc),
 * where, for Q8_0 weights (two levels), P = 128 p1 + p2 and d = d2, and for Q4_0 (one level) P = p1 and d = d1;
 * p is a level's sum of the block's 32 products, all exact integers (|P| < 2^28). There are no lanes to add: the
 * kernels keep 16 rows, not 16 blocks, in a vector's lanes. The integer sums are computed as the kernels do, from
 * unsigned weights: p = sum (w + o) * x - o * sum(x), o = 128 (Q8_0) or 8 (Q4_0). */
#include <math.h>

#include "kernels/cpu/kernels.h"
#include "kernels/cpu/quant.h"
#include "util/half.h"

/* sum (w + o) * x over the block's 32 values: row `lane` of a slab's block times one level of a token's block. */
static int32_t raw_sum(const td_qpack *p, const uint8_t *block, int lane, const int8_t *x) {
    int32_t isum = 0;
    for (int e = 0; e < TD_QBLOCK; e++) isum += td_qpack_weight(p, block, lane, e) * x[e];
    return isum;
}

static float dot_r16(const td_qpack *p, const uint8_t *slab, int lane, const td_qrows *xq, int64_t t) {
    const uint16_t *dw = td_qpack_scales(p, slab);
    const int8_t *x1 = xq->qi + t * xq->nbg * TD_X16_GROUP, *x2 = xq->qi2 + t * xq->nbg * TD_X16_GROUP;
    const int32_t o = p->type == TD_DTYPE_Q8_0 ? 128 : 8;
    float acc = 0.0f;
    for (int64_t b = 0; b < p->nbg; b++) {
        const uint8_t *block = slab + b * p->group_bytes;
        int64_t at = t * xq->nbg * TD_X16_LANES + b;
        float w = td_f16_to_f32(dw[b * TD_R16_ROWS + lane]);
        int32_t P = raw_sum(p, block, lane, x1 + b * TD_QBLOCK);
        if (xq->x16 > 1) P = P * (1 << TD_R16_SHIFT) + raw_sum(p, block, lane, x2 + b * TD_QBLOCK);
        const int32_t net = (int32_t)((uint32_t)P - (uint32_t)td_r16_offset(xq, at, o)); /* wraps as the lanes do */
        acc = fmaf((float)net, w * td_r16_scale(xq, at), acc);
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
