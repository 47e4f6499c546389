/* The parts of the kernel choice both builds share (dispatch.h): the scalar reference set, td_kernels_layout, the
 * TD_KERNELS lookup, td_cpu_kernels and td_cpu_bf16_products. */
#include <stdlib.h>

#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/quant.h"
#include "typedecide.h"

void td_kernels_quant_ref(const float *x, int64_t ldx, const void *xq, int64_t r0, int64_t r1) {
    td_quantize_rows_ref(x, ldx, xq, r0, r1);
}

const td_kernels td_kernels_scalar = {"scalar", 0, 0, td_matmul_ref, td_attn_rows_ref, td_deltanet_step_ref,
                                      td_kernels_quant_ref, td_rmsnorm, td_silu_mul};

int td_kernels_layout(const td_kernels *k, const td_mat *w, int bf16_acts) {
    if (td_dtype_is_block(w->type)) return td_qrows_layout(w->type, w->pack);
    if (w->type == TD_DTYPE_BF16 && k->bf16 && bf16_acts) return TD_QROWS_BF16;
    return -1;
}

const td_kernels *td_kernels_forced(void) {
    const char *force = getenv("TD_KERNELS");
    return force && *force ? td_kernels_named(force) : NULL;
}

const char *td_cpu_kernels(void) { return td_kernels_best()->name; }

int td_cpu_bf16_products(void) { return td_kernels_best()->bf16; }
