/* Scalar reference of the packed (x16) quantised matrix product: the arithmetic that td_matmul_x16_avx512 does,
 * one lane at a time, so that the two agree to the bit.
 *
 * For weight row j and token t, lane l (0..15) accumulates, over the groups g in order and for the two levels of
 * activations in turn,
 *     acc_l = fma((float)p, d_w * d_x, acc_l),   p = sum of the 32 products of block 16g + l (exact integers),
 * and the result is the lanes added as a tree: a_i = acc_i + acc_{i+8}, then + 4, + 2, + 1. The integer sum is
 * computed as the kernel does, from unsigned weights: p = sum (w + o) * x - o * sum(x), o = 128 (Q8_0) or 8 (Q4_0). */
#include <math.h>

#include "kernels/cpu/kernels.h"
#include "kernels/cpu/quant.h"
#include "util/half.h"

/* The exact integer dot product of lane `lane` of a packed group with one level of activations. */
static int32_t block_sum(const td_qpack *p, const uint8_t *group, int lane, const int8_t *xg, int32_t xsum) {
    int shift = p->type == TD_DTYPE_Q8_0 ? 7 : 3;
    uint32_t isum = 0u - (uint32_t)xsum * (1u << shift); /* wraps as the lanes do (quant.h: td_r16_offset) */
    for (int e = 0; e < TD_QBLOCK; e++)
        isum += (uint32_t)(td_qpack_weight(p, group, lane, e) * xg[(e / 4) * TD_X16_CHUNK + lane * 4 + e % 4]);
    return (int32_t)isum;
}

static float dot_x16(const td_qpack *p, const uint8_t *row, const td_qrows *xq, int64_t t) {
    const uint16_t *dw = td_qpack_scales(p, row);
    float acc[TD_X16_LANES] = {0};
    for (int64_t g = 0; g < p->nbg; g++) {
        const uint8_t *group = row + g * p->group_bytes;
        int64_t xg = (t * xq->nbg + g) * TD_X16_GROUP;
        for (int lane = 0; lane < TD_X16_LANES; lane++) {
            int64_t at = (t * xq->nbg + g) * TD_X16_LANES + lane;
            float w = td_f16_to_f32(dw[g * TD_X16_LANES + lane]);
            int32_t i1 = block_sum(p, group, lane, xq->qi + xg, xq->s[at]);
            acc[lane] = fmaf((float)i1, w * xq->d[at], acc[lane]);
            if (xq->x16 < 2) continue;
            int32_t i2 = block_sum(p, group, lane, xq->qi2 + xg, xq->s2[at]);
            acc[lane] = fmaf((float)i2, w * xq->d2[at], acc[lane]);
        }
    }
    return td_qpack_lanes_sum(acc, TD_X16_LANES);
}

void td_matmul_x16_ref(const td_mat *w, const int32_t *rows, const void *xq, int64_t T, float *y, int64_t ldy,
                       int64_t j0, int64_t j1) {
    const td_qpack *p = w->pack;
    for (int64_t j = j0; j < j1; j++) {
        const uint8_t *row = td_qpack_row(p, rows ? rows[j] : j);
        for (int64_t t = 0; t < T; t++) y[t * ldy + j] = dot_x16(p, row, xq, t);
    }
}
