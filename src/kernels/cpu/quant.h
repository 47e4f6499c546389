/* Q8_0 and Q4_0 blocks (GGUF's exact layouts) and the scalar reference for quantising, dequantising and
 * multiplying them. Quantised matrix products quantise the activations too, row by row, to Q8_0 blocks and sum
 * exact integer block dot products scaled by d_w * d_x: a row's result depends only on that row. */
#ifndef TD_KERNELS_CPU_QUANT_H
#define TD_KERNELS_CPU_QUANT_H

#include <stddef.h>
#include <stdint.h>

#include "model/dtype.h"

typedef struct td_block_q8_0 {
    uint16_t d;     /* fp16 scale */
    int8_t qs[32];
} td_block_q8_0;

typedef struct td_block_q4_0 {
    uint16_t d;     /* fp16 scale */
    uint8_t qs[16]; /* qs[j] & 15 = element j, qs[j] >> 4 = element j + 16; value (q - 8) * d */
} td_block_q4_0;

/* f32 -> blocks, as llama.cpp's reference quantisers: Q8_0 d = amax / 127, q = round(x / d);
 * Q4_0 d = (the value of largest magnitude) / -8, q = min(15, (int8)(x / d + 8.5)). n is a multiple of 32. */
void td_quantize_q8_0(const float *x, td_block_q8_0 *y, int64_t n);
void td_quantize_q4_0(const float *x, td_block_q4_0 *y, int64_t n);
void td_dequantize_q8_0(const td_block_q8_0 *x, float *y, int64_t n);
void td_dequantize_q4_0(const td_block_q4_0 *x, float *y, int64_t n);

/* Quantises rows [r0, r1) of X [T, cols] (leading dimension ldx) to Q8_0 blocks at xq + r * (cols / 32). */
void td_quantize_rows_q8_0(const float *x, int64_t ldx, int64_t cols, td_block_q8_0 *xq, int64_t r0, int64_t r1);

#endif
