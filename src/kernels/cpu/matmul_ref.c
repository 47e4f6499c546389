/* Matrix product over F32 / F16 / BF16 weights, scalar reference (matmul_avx2.c holds its AVX2 twin): each output
 * is one dot product summed in order of k in fp32. td_matmul_ref is also the scalar kernel set's matmul slot and
 * sends quantised weights to their references (matmul_quant_ref.c, matmul_x8_ref.c, matmul_x16_ref.c,
 * matmul_r16_ref.c), and td_row_to_f32 reads a weight row as the reference does. */
#include "kernels/cpu/kernels.h"
#include "kernels/cpu/quant.h"
#include "util/half.h"

static float weight_at(const td_mat *w, const void *row, int64_t k) {
    switch (w->type) {
    case TD_DTYPE_F32: return ((const float *)row)[k];
    case TD_DTYPE_F16: return td_f16_to_f32(((const uint16_t *)row)[k]);
    case TD_DTYPE_BF16: return td_bf16_to_f32(((const uint16_t *)row)[k]);
    default: return 0.0f;
    }
}

void td_matmul_ref(const td_mat *w, const int32_t *rows, const float *x, const void *xq, int64_t T, int64_t ldx,
                   float *y, int64_t ldy, int64_t j0, int64_t j1) {
    if (w->pack) {
        if (w->pack->lanes == TD_X8_LANES) td_matmul_x8_ref(w, rows, xq, T, y, ldy, j0, j1);
        else if (w->pack->lanes == TD_R16_LANES) td_matmul_r16_ref(w, rows, xq, T, y, ldy, j0, j1);
        else td_matmul_x16_ref(w, rows, xq, T, y, ldy, j0, j1);
        return;
    }
    if (td_dtype_is_block(w->type)) {
        td_matmul_quant_ref(w, rows, xq, T, y, ldy, j0, j1);
        return;
    }
    if (w->type == TD_DTYPE_BF16 && xq) { /* activations rounded to bf16 for other kernels */
        td_matmul_bf16_ref(w, rows, xq, T, y, ldy, j0, j1);
        return;
    }
    for (int64_t j = j0; j < j1; j++) {
        const void *row = td_mat_row(w, rows ? rows[j] : j);
        for (int64_t t = 0; t < T; t++) {
            const float *xt = x + t * ldx;
            float s = 0.0f;
            for (int64_t k = 0; k < w->cols; k++) s += weight_at(w, row, k) * xt[k];
            y[t * ldy + j] = s;
        }
    }
}

void td_row_to_f32(float *y, const td_mat *w, int64_t r) {
    const void *row = td_mat_row(w, r);
    if (w->type == TD_DTYPE_Q8_0) td_dequantize_q8_0(row, y, w->cols);
    else if (w->type == TD_DTYPE_Q4_0) td_dequantize_q4_0(row, y, w->cols);
    else
        for (int64_t k = 0; k < w->cols; k++) y[k] = weight_at(w, row, k);
}
