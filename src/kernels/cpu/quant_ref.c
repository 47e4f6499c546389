/* Scalar reference of the Q8_0 / Q4_0 formats. */
#include <math.h>

#include "kernels/cpu/quant.h"
#include "util/half.h"

void td_quantize_q8_0(const float *x, td_block_q8_0 *y, int64_t n) {
    for (int64_t b = 0; b < n / 32; b++) {
        const float *xb = x + b * 32;
        float amax = 0.0f;
        for (int j = 0; j < 32; j++) amax = fabsf(xb[j]) > amax ? fabsf(xb[j]) : amax;
        float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
        y[b].d = td_f32_to_f16(d);
        for (int j = 0; j < 32; j++) y[b].qs[j] = (int8_t)roundf(xb[j] * id);
    }
}

void td_quantize_q4_0(const float *x, td_block_q4_0 *y, int64_t n) {
    for (int64_t b = 0; b < n / 32; b++) {
        const float *xb = x + b * 32;
        float amax = 0.0f, max = 0.0f;
        for (int j = 0; j < 32; j++)
            if (fabsf(xb[j]) > amax) amax = fabsf(xb[j]), max = xb[j];
        float d = max / -8.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
        y[b].d = td_f32_to_f16(d);
        for (int j = 0; j < 16; j++) {
            int q0 = (int8_t)(xb[j] * id + 8.5f), q1 = (int8_t)(xb[j + 16] * id + 8.5f);
            q0 = q0 > 15 ? 15 : q0;
            q1 = q1 > 15 ? 15 : q1;
            y[b].qs[j] = (uint8_t)(q0 | (q1 << 4));
        }
    }
}

void td_dequantize_q8_0(const td_block_q8_0 *x, float *y, int64_t n) {
    for (int64_t b = 0; b < n / 32; b++) {
        float d = td_f16_to_f32(x[b].d);
        for (int j = 0; j < 32; j++) y[b * 32 + j] = (float)x[b].qs[j] * d;
    }
}

void td_dequantize_q4_0(const td_block_q4_0 *x, float *y, int64_t n) {
    for (int64_t b = 0; b < n / 32; b++) {
        float d = td_f16_to_f32(x[b].d);
        for (int j = 0; j < 16; j++) {
            y[b * 32 + j] = (float)((x[b].qs[j] & 15) - 8) * d;
            y[b * 32 + j + 16] = (float)((x[b].qs[j] >> 4) - 8) * d;
        }
    }
}

/* One x8 block: d = amax / 32767, q = roundf(x / d) within +-32767. */
static float quantize_i16(const float *x, int16_t *q) {
    float amax = 0.0f;
    for (int j = 0; j < 32; j++) amax = fabsf(x[j]) > amax ? fabsf(x[j]) : amax;
    float d = amax / 32767.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
    for (int j = 0; j < 32; j++) {
        float v = roundf(x[j] * id);
        q[j] = (int16_t)(v > 32767.0f ? 32767.0f : v < -32767.0f ? -32767.0f : v);
    }
    return d;
}

void td_quantize_rows_ref(const float *x, int64_t ldx, const td_qrows *xq, int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; r++) {
        for (int64_t b = 0; xq->x8 && b < xq->nb; b++) {
            int16_t q[32];
            float d = quantize_i16(x + r * ldx + b * 32, q);
            td_qrows_put_x8(xq, r, b, q, d);
        }
        for (int64_t b = 0; !xq->x8 && b < xq->nb; b++) {
            td_block_q8_0 blk;
            td_quantize_q8_0(x + r * ldx + b * 32, &blk, 32);
            td_qrows_put(xq, r, b, x + r * ldx + b * 32, blk.qs, blk.d);
        }
        td_qrows_pad(xq, r);
    }
}
