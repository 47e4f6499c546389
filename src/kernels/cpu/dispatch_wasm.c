/* The kernel sets of the WebAssembly build (web/CMakeLists.txt compiles this file in place of dispatch.c, which
 * asks an x86 CPU what it runs): "wasm128" (SIMD128 products, kernels_wasm.h, bit-identical to the scalar set; the
 * default: every browser and Node that runs this module has SIMD128) and "scalar", the reference set every other set
 * is tested against. The contract is kernels.h's; TD_KERNELS chooses as in the native build (the module's
 * environment: tdw_setenv). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/kernels.h"
#include "kernels/cpu/kernels_wasm.h"
#include "kernels/cpu/quant.h"
#include "typedecide.h"
#include "util/error.h"

static void quant_ref(const float *x, int64_t ldx, const void *xq, int64_t r0, int64_t r1) {
    td_quantize_rows_ref(x, ldx, xq, r0, r1);
}

static const td_kernels scalar = {"scalar", 0, 0, td_matmul_ref, td_attn_rows_ref, td_deltanet_step_ref,
                                  quant_ref, td_rmsnorm, td_silu_mul};
/* The same activations, layouts and arithmetic as scalar (no packing: pack 0), the products in SIMD128. */
static const td_kernels wasm128 = {"wasm128", 0, 0, td_matmul_wasm128, td_attn_rows_ref, td_deltanet_step_ref,
                                   quant_ref, td_rmsnorm, td_silu_mul};

int td_kernels_layout(const td_kernels *k, const td_mat *w, int bf16_acts) {
    if (td_dtype_is_block(w->type)) return td_qrows_layout(w->type, w->pack);
    if (w->type == TD_DTYPE_BF16 && k->bf16 && bf16_acts) return TD_QROWS_BF16;
    return -1;
}

int td_cpu_has_avx2(void) { return 0; }
int td_cpu_has_avx512vnni(void) { return 0; }
int td_cpu_has_avx512bf16(void) { return 0; }
int td_cpu_has_amx(void) { return 0; }

const td_kernels *td_kernels_named(const char *name) {
    if (strcmp(name, scalar.name) == 0) return &scalar;
    if (strcmp(name, wasm128.name) == 0) return &wasm128;
    return NULL;
}

const td_kernels *td_kernels_best(void) {
    const char *force = getenv("TD_KERNELS");
    const td_kernels *k = force && *force ? td_kernels_named(force) : NULL;
    return k ? k : &wasm128;
}

td_status td_kernels_choose(const td_kernels **out) {
    const char *force = getenv("TD_KERNELS");
    *out = td_kernels_best();
    if (!force || !*force || td_kernels_named(force)) return TD_OK;
    static const char *const x86_sets[] = {"avx2", "avx512vnni", "avx512bf16", "avx512r16", "amx"};
    for (size_t i = 0; i < sizeof x86_sets / sizeof x86_sets[0]; i++)
        if (strcmp(force, x86_sets[i]) == 0)
            return td_fail(TD_ERR_UNSUPPORTED, "TD_KERNELS=%.64s: an x86 kernel set; WebAssembly runs: wasm128, scalar", force);
    return td_fail(TD_ERR_INVALID_ARG, "TD_KERNELS=%.64s: no such kernel set (WebAssembly runs: wasm128, scalar)", force);
}

const char *td_cpu_kernels(void) { return td_kernels_best()->name; }

int td_cpu_bf16_products(void) { return td_kernels_best()->bf16; }
