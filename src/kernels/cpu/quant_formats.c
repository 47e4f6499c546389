/* The Q8_0 and Q4_0 block formats (GGUF's): llama.cpp's reference quantisers and the dequantisers. No SIMD twin:
 * weights are quantised at export, and activations through td_quantize_rows_* (quant_ref.c, quant_avx2.c). */
#include <math.h>

#include "kernels/cpu/quant.h"
#include "util/half.h"

void td_quantize_q8_0(const float *x, td_block_q8_0 *y, int64_t n) {
    for (int64_t b = 0; b < n / TD_QBLOCK; b++) {
        const float *xb = x + b * TD_QBLOCK;
        float amax = 0.0f;
        for (int j = 0; j < TD_QBLOCK; j++) amax = fabsf(xb[j]) > amax ? fabsf(xb[j]) : amax;
        float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
        y[b].d = td_f32_to_f16(d);
        for (int j = 0; j < TD_QBLOCK; j++) y[b].qs[j] = (int8_t)roundf(xb[j] * id);
    }
}

void td_quantize_q4_0(const float *x, td_block_q4_0 *y, int64_t n) {
    for (int64_t b = 0; b < n / TD_QBLOCK; b++) {
        const float *xb = x + b * TD_QBLOCK;
        float amax = 0.0f, max = 0.0f;
        for (int j = 0; j < TD_QBLOCK; j++)
            if (fabsf(xb[j]) > amax) amax = fabsf(xb[j]), max = xb[j];
        float d = max / -8.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
        y[b].d = td_f32_to_f16(d);
        for (int j = 0; j < TD_QBLOCK / 2; j++) {
            int q0 = (int8_t)(xb[j] * id + 8.5f), q1 = (int8_t)(xb[j + TD_QBLOCK / 2] * id + 8.5f);
            q0 = q0 > 15 ? 15 : q0;
            q1 = q1 > 15 ? 15 : q1;
            y[b].qs[j] = (uint8_t)(q0 | (q1 << 4));
        }
    }
}

void td_dequantize_q8_0(const td_block_q8_0 *x, float *y, int64_t n) {
    for (int64_t b = 0; b < n / TD_QBLOCK; b++) {
        float d = td_f16_to_f32(x[b].d);
        for (int j = 0; j < TD_QBLOCK; j++) y[b * TD_QBLOCK + j] = (float)x[b].qs[j] * d;
    }
}

void td_dequantize_q4_0(const td_block_q4_0 *x, float *y, int64_t n) {
    for (int64_t b = 0; b < n / TD_QBLOCK; b++) {
        float d = td_f16_to_f32(x[b].d);
        for (int j = 0; j < TD_QBLOCK / 2; j++) {
            y[b * TD_QBLOCK + j] = (float)((x[b].qs[j] & 15) - 8) * d;
            y[b * TD_QBLOCK + j + TD_QBLOCK / 2] = (float)((x[b].qs[j] >> 4) - 8) * d;
        }
    }
}
