/* The kernel sets of the WebAssembly build (web/CMakeLists.txt compiles this file in place of dispatch.c, which
 * asks an x86 CPU what it runs; both share dispatch_ref.c: the scalar set, td_kernels_layout, the TD_KERNELS
 * lookup): "wasm128" (SIMD128 products, kernels_wasm.h, bit-identical to the scalar set; every browser and Node
 * that runs this module has SIMD128), "wasm128r" (the same with relaxed SIMD's dot for Q4_0 and one-token Q8_0
 * products; the default where the engine runs relaxed SIMD: Chromium 114 on) and "scalar", the reference set every
 * other set is tested against. The contract is kernels.h's; TD_KERNELS chooses as in the native build (the module's environment:
 * tdw_setenv). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/kernels_wasm.h"
#include "kernels/cpu/quant.h"
#include "typedecide.h"
#include "util/error.h"

/* The same activations, layouts and arithmetic as scalar (no packing: pack 0), the products and the attention in
 * SIMD128. */
static const td_kernels wasm128 = {"wasm128", 0, 0, td_matmul_wasm128, td_attn_rows_wasm128, td_deltanet_step_ref,
                                   td_kernels_quant_ref, td_rmsnorm, td_silu_mul};
/* wasm128 with the Q8_0 / Q4_0 block dots on relaxed SIMD (relaxed_wasm.c): the same bits; offered only where the
 * engine runs relaxed SIMD (td_wasm_relaxed_available). */
static const td_kernels wasm128r = {"wasm128r", 0, 0, td_matmul_wasm_relaxed, td_attn_rows_wasm128,
                                    td_deltanet_step_ref, td_kernels_quant_ref, td_rmsnorm, td_silu_mul};

int td_cpu_has_avx2(void) { return 0; }
int td_cpu_has_avx512vnni(void) { return 0; }
int td_cpu_has_avx512bf16(void) { return 0; }
int td_cpu_has_amx(void) { return 0; }

const td_kernels *td_kernels_named(const char *name) {
    if (strcmp(name, td_kernels_scalar.name) == 0) return &td_kernels_scalar;
    if (strcmp(name, wasm128.name) == 0) return &wasm128;
    if (strcmp(name, wasm128r.name) == 0 && td_wasm_relaxed_available()) return &wasm128r;
    return NULL;
}

const td_kernels *td_kernels_best(void) {
    const td_kernels *k = td_kernels_forced();
    return k ? k : td_wasm_relaxed_available() ? &wasm128r : &wasm128;
}

td_status td_kernels_choose(const td_kernels **out) {
    const char *force = getenv("TD_KERNELS");
    *out = td_kernels_best();
    if (!force || !*force || td_kernels_named(force)) return TD_OK;
    if (strcmp(force, wasm128r.name) == 0)
        return td_fail(TD_ERR_UNSUPPORTED, "TD_KERNELS=wasm128r: this WebAssembly engine does not run relaxed SIMD "
                                           "(or the module was built without clang-19); it runs: wasm128, scalar");
    static const char *const x86_sets[] = {"avx2", "avx512vnni", "avx512bf16", "avx512r16", "amx"};
    for (size_t i = 0; i < sizeof x86_sets / sizeof x86_sets[0]; i++)
        if (strcmp(force, x86_sets[i]) == 0)
            return td_fail(TD_ERR_UNSUPPORTED, "TD_KERNELS=%.64s: an x86 kernel set; WebAssembly runs: wasm128, scalar", force);
    return td_fail(TD_ERR_INVALID_ARG, "TD_KERNELS=%.64s: no such kernel set (WebAssembly runs: wasm128, scalar; wasm128r with relaxed SIMD)", force);
}
