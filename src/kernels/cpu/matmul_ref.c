/* Scalar reference matrix product: the definition every faster version is tested against. */
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

/* One quantised dot product: sum over blocks of (d_w * d_x) * (integer dot of the 32 pairs). */
static float dot_quant(const td_mat *w, const void *row, const td_block_q8_0 *xq, const float *xd, int64_t nb) {
    float s = 0.0f;
    for (int64_t b = 0; b < nb; b++) {
        int32_t isum = 0;
        float dw;
        if (w->type == TD_DTYPE_Q8_0) {
            const td_block_q8_0 *wb = (const td_block_q8_0 *)row + b;
            for (int j = 0; j < 32; j++) isum += (int32_t)wb->qs[j] * xq[b].qs[j];
            dw = td_f16_to_f32(wb->d);
        } else {
            const td_block_q4_0 *wb = (const td_block_q4_0 *)row + b;
            for (int j = 0; j < 16; j++)
                isum += ((wb->qs[j] & 15) - 8) * xq[b].qs[j] + ((wb->qs[j] >> 4) - 8) * xq[b].qs[j + 16];
            dw = td_f16_to_f32(wb->d);
        }
        s += (dw * xd[b]) * (float)isum;
    }
    return s;
}

void td_matmul_ref(const td_mat *w, const int32_t *rows, const float *x, const void *xq, int64_t T, int64_t ldx,
                   float *y, int64_t ldy, int64_t j0, int64_t j1) {
    if (w->pack) {
        if (w->pack->lanes == 8) td_matmul_x8_ref(w, rows, xq, T, y, ldy, j0, j1);
        else td_matmul_x16_ref(w, rows, xq, T, y, ldy, j0, j1);
        return;
    }
    if (td_dtype_is_block(w->type)) {
        const td_qrows *xr = xq;
        int64_t nb = w->cols / 32;
        for (int64_t j = j0; j < j1; j++) {
            const void *row = td_mat_row(w, rows ? rows[j] : j);
            for (int64_t t = 0; t < T; t++) y[t * ldy + j] = dot_quant(w, row, xr->q + t * xr->nb, xr->d + t * xr->nb, nb);
        }
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
