/* What the two dispatches share: dispatch.c (the x86 sets) and dispatch_wasm.c (the WebAssembly sets) each define
 * td_kernels_named, td_kernels_best and td_kernels_choose over their own sets; the scalar reference set, the layout
 * rule, the TD_KERNELS lookup and the two public queries are defined once, in dispatch_ref.c, which both builds
 * compile (the native build takes every kernel file, the WebAssembly build every *_ref.c). */
#ifndef TD_KERNELS_CPU_DISPATCH_H
#define TD_KERNELS_CPU_DISPATCH_H

#include "kernels/cpu/kernels.h"

/* The scalar set: the reference every other set is tested against, and the one every build runs. */
extern const td_kernels td_kernels_scalar;

/* td_quantize_rows_ref as a td_kernels.quantize_rows, whose td_qrows comes as a pointer to void (kernels.h does not
 * include quant.h). */
void td_kernels_quant_ref(const float *x, int64_t ldx, const void *xq, int64_t r0, int64_t r1);

/* The set TD_KERNELS names when this machine runs it (td_kernels_named), NULL when TD_KERNELS is unset or empty
 * or names no set this machine runs (td_kernels_choose reports those). */
const td_kernels *td_kernels_forced(void);

#endif
