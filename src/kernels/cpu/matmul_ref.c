/* Scalar reference matrix product: the definition every faster version is tested against. */
#include "kernels/cpu/kernels.h"
#include "util/half.h"

static float weight_at(const td_mat *w, const void *row, int64_t k) {
    switch (w->type) {
    case TD_DTYPE_F32: return ((const float *)row)[k];
    case TD_DTYPE_F16: return td_f16_to_f32(((const uint16_t *)row)[k]);
    case TD_DTYPE_BF16: return td_bf16_to_f32(((const uint16_t *)row)[k]);
    default: return 0.0f;
    }
}

void td_matmul_ref(const td_mat *w, const int32_t *rows, const float *x, int64_t T, int64_t ldx, float *y,
                   int64_t ldy, int64_t j0, int64_t j1) {
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
    for (int64_t k = 0; k < w->cols; k++) y[k] = weight_at(w, row, k);
}
