/* Scalar reference of the packed (x8) quantised matrix product: the arithmetic that td_matmul_x8_avx2 does, one
 * lane at a time, so that the two agree to the bit.
 *
 * For weight row j and token t, lane l (0..7) accumulates over the groups g in order
 *     acc_l = fma((float)p, d_w * d_x, acc_l),   p = sum of the 32 products w * q of block 8g + l (exact integers;
 *                                                Q4_0's w = q_w - 8),
 * where q are the block's activations (Q8_0 weights: int16, Q4_0: the Q8_0 values), and the result is the lanes
 * added as a tree: a_i = acc_i + acc_{i+4}, then + 2, + 1 (the order of an AVX2 horizontal sum). */
#include <math.h>

#include "kernels/cpu/kernels.h"
#include "kernels/cpu/quant.h"
#include "util/half.h"

/* Block `lane` of a packed group times its activations: Q8_0 signed bytes x int16, Q4_0 q - 8 x Q8_0 values. */
static int32_t block_sum(const td_qpack *p, const uint8_t *group, int lane, const td_qrows *xq, int64_t at) {
    int32_t isum = 0;
    for (int e = 0; e < TD_QBLOCK && p->type == TD_DTYPE_Q8_0; e++) {
        int i = (e / 2) * TD_X8_CHUNK + lane * 2 + e % 2;
        isum += (int8_t)group[i] * xq->qw[at * TD_X8_GROUP + i];
    }
    for (int e = 0; e < TD_QBLOCK && p->type == TD_DTYPE_Q4_0; e++)
        isum += (td_qpack_weight(p, group, lane, e) - 8) * xq->qi[at * TD_X8_GROUP + (e / 4) * TD_X8_QCHUNK + lane * 4 + e % 4];
    return isum;
}

static float dot_x8(const td_qpack *p, const uint8_t *row, const td_qrows *xq, int64_t t) {
    const uint16_t *dw = td_qpack_scales(p, row);
    float acc[TD_X8_LANES] = {0};
    for (int64_t g = 0; g < p->nbg; g++) {
        const uint8_t *group = row + g * p->group_bytes;
        for (int lane = 0; lane < TD_X8_LANES; lane++) {
            int64_t at = (t * xq->nbg + g) * TD_X8_LANES + lane;
            int32_t isum = block_sum(p, group, lane, xq, t * xq->nbg + g);
            acc[lane] = fmaf((float)isum, td_f16_to_f32(dw[g * TD_X8_LANES + lane]) * xq->d[at], acc[lane]);
        }
    }
    return td_qpack_lanes_sum(acc, TD_X8_LANES);
}

void td_matmul_x8_ref(const td_mat *w, const int32_t *rows, const void *xq, int64_t T, float *y, int64_t ldy,
                      int64_t j0, int64_t j1) {
    const td_qpack *p = w->pack;
    for (int64_t j = j0; j < j1; j++) {
        const uint8_t *row = td_qpack_row(p, rows ? rows[j] : j);
        for (int64_t t = 0; t < T; t++) y[t * ldy + j] = dot_x8(p, row, xq, t);
    }
}
