/* Run-time choice of kernels: the three kernel sets (scalar, AVX2, AVX-512 VNNI), what this CPU can run, and the
 * TD_KERNELS override. */
#include <cpuid.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/kernels.h"
#include "kernels/cpu/quant.h"
#include "typedecide.h"

/* td_kernels.quantize_rows takes its td_qrows as a pointer to void (kernels.h does not include quant.h). */
static void quant_ref(const float *x, int64_t ldx, const void *xq, int64_t r0, int64_t r1) {
    td_quantize_rows_ref(x, ldx, xq, r0, r1);
}
static void quant_avx2(const float *x, int64_t ldx, const void *xq, int64_t r0, int64_t r1) {
    td_quantize_rows_avx2(x, ldx, xq, r0, r1);
}

static const td_kernels scalar = {"scalar", 0, td_matmul_ref, td_attn_rows_ref, td_deltanet_step_ref,
                                  quant_ref, td_rmsnorm, td_silu_mul};
static const td_kernels avx2 = {"avx2", TD_X8_LANES, td_matmul_avx2, td_attn_rows_avx2, td_deltanet_step_avx2,
                                quant_avx2, td_rmsnorm_avx2, td_silu_mul_avx2};
static const td_kernels avx512vnni = {"avx512vnni", TD_X16_LANES, td_matmul_avx512, td_attn_rows_avx2,
                                      td_deltanet_step_avx2, quant_avx2, td_rmsnorm_avx2, td_silu_mul_avx2};

/* F16C from CPUID leaf 1 (ECX bit 29): clang's __builtin_cpu_supports does not know the name. */
static int cpu_has_f16c(void) {
    unsigned a, b, c, d;
    return __get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 29));
}

int td_cpu_has_avx2(void) {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && cpu_has_f16c();
}

int td_cpu_has_avx512vnni(void) {
    return td_cpu_has_avx2() && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni");
}

const td_kernels *td_kernels_named(const char *name) {
    if (strcmp(name, scalar.name) == 0) return &scalar;
    if (strcmp(name, avx2.name) == 0) return td_cpu_has_avx2() ? &avx2 : NULL;
    if (strcmp(name, avx512vnni.name) == 0) return td_cpu_has_avx512vnni() ? &avx512vnni : NULL;
    return NULL;
}

const td_kernels *td_kernels_best(void) {
    const char *force = getenv("TD_KERNELS");
    if (force && strcmp(force, "scalar") == 0) return &scalar;
    int cap_avx2 = force && strcmp(force, "avx2") == 0;
    if (!cap_avx2 && td_cpu_has_avx512vnni()) return &avx512vnni;
    return td_cpu_has_avx2() ? &avx2 : &scalar;
}

const char *td_cpu_kernels(void) { return td_kernels_best()->name; }
