/* Run-time choice of kernels. */
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/kernels.h"

static const td_kernels scalar = {"scalar", td_matmul_ref, td_attn_ref, td_deltanet_step_ref};
static const td_kernels avx2 = {"avx2", td_matmul_avx2, td_attn_avx2, td_deltanet_step_avx2};

int td_cpu_has_avx2(void) {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
}

const td_kernels *td_kernels_scalar(void) { return &scalar; }

const td_kernels *td_kernels_best(void) {
    const char *force = getenv("TD_KERNELS");
    if (force && strcmp(force, "scalar") == 0) return &scalar;
    return td_cpu_has_avx2() ? &avx2 : &scalar;
}
