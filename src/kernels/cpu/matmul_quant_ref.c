/* Quantised matrix product over unpacked Q8_0 / Q4_0 weights and plain (Q8_0) activations, scalar reference
 * (td_matmul_quant_ref; matmul_quant_avx2.c holds its AVX2 twin). Each output sums over the blocks in order
 * s += (d_w * d_x) * (the exact integer dot product of the block's 32 pairs). */
#include "kernels/cpu/kernels.h"
#include "kernels/cpu/quant.h"
#include "util/half.h"

/* One quantised dot product: sum over blocks of (d_w * d_x) * (integer dot of the 32 pairs). */
static float dot_quant(const td_mat *w, const void *row, const td_block_q8_0 *xq, const float *xd, int64_t nb) {
    float s = 0.0f;
    for (int64_t b = 0; b < nb; b++) {
        int32_t isum = 0;
        float dw;
        if (w->type == TD_DTYPE_Q8_0) {
            const td_block_q8_0 *wb = (const td_block_q8_0 *)row + b;
            for (int j = 0; j < TD_QBLOCK; j++) isum += (int32_t)wb->qs[j] * xq[b].qs[j];
            dw = td_f16_to_f32(wb->d);
        } else {
            const td_block_q4_0 *wb = (const td_block_q4_0 *)row + b;
            for (int j = 0; j < TD_QBLOCK / 2; j++)
                isum += ((wb->qs[j] & 15) - 8) * xq[b].qs[j] + ((wb->qs[j] >> 4) - 8) * xq[b].qs[j + TD_QBLOCK / 2];
            dw = td_f16_to_f32(wb->d);
        }
        s += (dw * xd[b]) * (float)isum;
    }
    return s;
}

void td_matmul_quant_ref(const td_mat *w, const int32_t *rows, const void *xq, int64_t T, float *y, int64_t ldy,
                         int64_t j0, int64_t j1) {
    const td_qrows *xr = xq;
    int64_t nb = w->cols / TD_QBLOCK;
    for (int64_t j = j0; j < j1; j++) {
        const void *row = td_mat_row(w, rows ? rows[j] : j);
        for (int64_t t = 0; t < T; t++) y[t * ldy + j] = dot_quant(w, row, xr->q + t * xr->nb, xr->d + t * xr->nb, nb);
    }
}
