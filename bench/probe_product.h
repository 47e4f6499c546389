/* A random quantised matrix product for the kernel probes (bench/amx_probe.c, bench/x8_probe.c): uniform weights
 * in [-1, 1) quantised to Q8_0 or Q4_0 and packed for `lanes`, T rows of activations quantised by the reference
 * quantiser in the layout that pack takes, and two outputs (y for the kernel, yr for its reference). Not part of
 * the engine. */
#ifndef TD_BENCH_PROBE_PRODUCT_H
#define TD_BENCH_PROBE_PRODUCT_H

#include <stdlib.h>

#include "kernels/cpu/kernels.h"
#include "kernels/cpu/quant.h"
#include "probe.h"

typedef struct probe_product {
    td_mat w;
    td_qrows xq;
    float *y, *yr;
    void *qbuf;
} probe_product;

static inline void probe_product_new(probe_product *pp, td_dtype type, int64_t rows, int64_t cols, int64_t T,
                                     int lanes) {
    size_t rb = td_dtype_row_bytes(type, cols);
    float *wf = malloc((size_t)rows * cols * sizeof *wf), *xf = malloc((size_t)T * cols * sizeof *xf);
    uint8_t *wq = malloc((size_t)rows * rb);
    for (int64_t i = 0; i < rows * cols; i++) wf[i] = uniform();
    for (int64_t i = 0; i < T * cols; i++) xf[i] = uniform();
    for (int64_t j = 0; j < rows; j++) {
        if (type == TD_DTYPE_Q8_0) td_quantize_q8_0(wf + j * cols, (td_block_q8_0 *)(void *)(wq + j * rb), cols);
        else td_quantize_q4_0(wf + j * cols, (td_block_q4_0 *)(void *)(wq + j * rb), cols);
    }
    td_qpack *pk = td_qpack_new(type, rows, cols, wq, rb, lanes);
    pp->w = (td_mat){type, rows, cols, rb, wq, pk};
    pp->qbuf = aligned_alloc(64, (td_qrows_bytes(T, cols) + 63) / 64 * 64);
    td_qrows_bind(&pp->xq, pp->qbuf, T, cols, td_qrows_layout(type, pk));
    td_quantize_rows_ref(xf, cols, &pp->xq, 0, T);
    pp->y = malloc((size_t)T * rows * sizeof *pp->y);
    pp->yr = malloc((size_t)T * rows * sizeof *pp->yr);
    free(wf), free(xf);
}

static inline void probe_product_free(probe_product *pp) {
    td_qpack_free((td_qpack *)pp->w.pack);
    free((void *)pp->w.data), free(pp->qbuf), free(pp->y), free(pp->yr);
}

#endif
