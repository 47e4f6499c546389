/* The activation quantiser, scalar reference (td_quantize_rows_ref; quant_avx2.c holds its AVX2 twin, which writes
 * the same bytes): rows of fp32 activations into a td_qrows layout, plain, x16 and x8 Q4_0 as td_quantize_q8_0 does
 * (x16's second level in td_qrows_put), x8 as int16 blocks, bf16 as bf16 values. */
#include <math.h>

#include "kernels/cpu/quant.h"

/* One x8 block: d = amax / 32767, q = roundf(x / d) within +-32767. */
static float quantize_i16(const float *x, int16_t *q) {
    float amax = 0.0f;
    for (int j = 0; j < TD_QBLOCK; j++) amax = fabsf(x[j]) > amax ? fabsf(x[j]) : amax;
    float d = amax / 32767.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
    for (int j = 0; j < TD_QBLOCK; j++) {
        float v = roundf(x[j] * id);
        q[j] = (int16_t)(v > 32767.0f ? 32767.0f : v < -32767.0f ? -32767.0f : v);
    }
    return d;
}

/* Row r in the bf16 layout: h = bf16(x), zero past cols. */
static void quantize_bf16(const float *x, const td_qrows *xq, int64_t r) {
    uint16_t *h = xq->h + r * xq->nb * TD_QBLOCK;
    for (int64_t k = 0; k < xq->nb * TD_QBLOCK; k++) h[k] = td_f32_to_bf16_daz(k < xq->cols ? x[k] : 0.0f);
}

void td_quantize_rows_ref(const float *x, int64_t ldx, const td_qrows *xq, int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; r++) {
        if (xq->bf16) {
            quantize_bf16(x + r * ldx, xq, r);
            continue;
        }
        for (int64_t b = 0; xq->x8 == 1 && b < xq->nb; b++) {
            int16_t q[TD_QBLOCK];
            float d = quantize_i16(x + r * ldx + b * TD_QBLOCK, q);
            td_qrows_put_x8(xq, r, b, q, d);
        }
        for (int64_t b = 0; xq->x8 != 1 && b < xq->nb; b++) {
            td_block_q8_0 blk;
            td_quantize_q8_0(x + r * ldx + b * TD_QBLOCK, &blk, TD_QBLOCK);
            td_qrows_put(xq, r, b, x + r * ldx + b * TD_QBLOCK, blk.qs, blk.d);
        }
        td_qrows_pad(xq, r);
    }
}
