/* Run-time choice of kernels: the kernel sets (scalar, AVX2, AVX-512 VNNI, AVX-512 BF16, AVX-512 r16, AMX), what
 * this CPU can run, and the TD_KERNELS override (the scalar set and what dispatch_wasm.c shares: dispatch_ref.c). */
#include <cpuid.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/quant.h"
#include "typedecide.h"
#include "util/error.h"


/* td_kernels.quantize_rows takes its td_qrows as a pointer to void (kernels.h does not include quant.h). */
static void quant_avx2(const float *x, int64_t ldx, const void *xq, int64_t r0, int64_t r1) {
    td_quantize_rows_avx2(x, ldx, xq, r0, r1);
}
static void quant_avx512(const float *x, int64_t ldx, const void *xq, int64_t r0, int64_t r1) {
    td_quantize_rows_avx512(x, ldx, xq, r0, r1);
}

static const td_kernels avx2 = {"avx2", TD_X8_LANES, 0, td_matmul_avx2, td_attn_rows_avx2, td_deltanet_step_avx2,
                                quant_avx2, td_rmsnorm_avx2, td_silu_mul_avx2};
static const td_kernels avx512vnni = {"avx512vnni", TD_X16_LANES, 0, td_matmul_avx512, td_attn_rows_avx512,
                                      td_deltanet_step_avx2, quant_avx512, td_rmsnorm_avx2, td_silu_mul_avx2};
static const td_kernels avx512bf16 = {"avx512bf16", TD_X16_LANES, 1, td_matmul_avx512bf16,
                                      td_attn_rows_avx512, td_deltanet_step_avx2, quant_avx512, td_rmsnorm_avx2,
                                      td_silu_mul_avx2};
/* The r16 packing (16 weight rows in a vector's lanes): products of batches on AMX tiles, decode on AVX-512 VNNI; and
 * its twin without tiles, which runs wherever avx512bf16 does (the AMX set's decode path, and a CPU's own check of
 * the r16 arithmetic). */
static const td_kernels avx512r16 = {"avx512r16", TD_R16_LANES, 1, td_matmul_avx512r16, td_attn_rows_avx512,
                                     td_deltanet_step_avx2, quant_avx512, td_rmsnorm_avx2, td_silu_mul_avx2};
static const td_kernels amx = {"amx", TD_R16_LANES, 1, td_matmul_amx, td_attn_rows_avx512, td_deltanet_step_avx2,
                               quant_avx512, td_rmsnorm_avx2, td_silu_mul_avx2};

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

/* AVX512_BF16 from CPUID leaf 7, subleaf 1 (EAX bit 5), on top of AVX-512 (whose registers the OS saves). */
int td_cpu_has_avx512bf16(void) {
    unsigned a, b, c, d;
    return td_cpu_has_avx512vnni() && __get_cpuid_count(7, 1, &a, &b, &c, &d) && (a & (1u << 5));
}

/* AMX-TILE and AMX-INT8 from CPUID leaf 7 (EDX bits 24, 25); Linux hands out the tile data state (XFEATURE 18) to
 * a process only on request (arch_prctl ARCH_REQ_XCOMP_PERM, 0x1023), which fails where the OS does not enable it. */
int td_cpu_has_amx(void) {
    unsigned a, b, c, d;
    if (!td_cpu_has_avx512bf16() || !__get_cpuid_count(7, 0, &a, &b, &c, &d) || !(d & (1u << 24)) || !(d & (1u << 25)))
        return 0;
#ifdef SYS_arch_prctl
    return syscall(SYS_arch_prctl, 0x1023, 18) == 0;
#else
    return 0;
#endif
}

const td_kernels *td_kernels_named(const char *name) {
    if (strcmp(name, td_kernels_scalar.name) == 0) return &td_kernels_scalar;
    if (strcmp(name, avx2.name) == 0) return td_cpu_has_avx2() ? &avx2 : NULL;
    if (strcmp(name, avx512vnni.name) == 0) return td_cpu_has_avx512vnni() ? &avx512vnni : NULL;
    if (strcmp(name, avx512bf16.name) == 0) return td_cpu_has_avx512bf16() ? &avx512bf16 : NULL;
    if (strcmp(name, avx512r16.name) == 0) return td_cpu_has_avx512bf16() ? &avx512r16 : NULL;
    if (strcmp(name, amx.name) == 0) return td_cpu_has_amx() ? &amx : NULL;
    return NULL;
}

/* The default set: the fastest this CPU runs, by measurement, not by the newest instructions. What was measured
 * (NOTES.md, "Kernel choice (issue 16)"; bench/kernel_sets.sh shows every set side by side):
 *   quantised weights   x16 (AVX-512 VNNI) against x8 (AVX2) on the Intel Xeon, one core: decode at the same
 *                       bandwidth once x16 streams its rows, prefill 2x (Q8_0) and 3x (Q4_0); on the AMD EPYC of
 *                       the earlier machines (AVX2 only) x8 is the only packed set.
 *   BF16 weights        vdpbf16ps with bf16 activations (avx512bf16) against fp32 FMA over the converted weights:
 *                       decode 1.1x, prefill 1.4x on the Intel Xeon, at a stated distance from F32 (kernels.h).
 *   AMX tiles           amx against avx512bf16 / avx512vnni on the GPU host's Intel Xeon (AMX), 2 threads
 *                       (bench/results/peer-qwen3-0.6b-xeon16-amx-set.json): one criterion (45 tokens over 256)
 *                       191 ms at Q8_0 (avx512bf16: 217 in an earlier call of the same script), the fastest
 *                       prefill at Q4_0 (271 against 265 / 209), prefill and decode otherwise within that busy
 *                       host's noise (Q8_0 prefill 224 against 201 / 237, decode 0.97-0.98x); a quieter call: Q8_0
 *                       prefill 260 against avx512bf16's 211 (amx-set-q8_0-call3.json). BF16 products as avx512bf16.
 * A model takes its set once, at load (td_model_pack): packed layouts and activation formats fix its arithmetic, so
 * the choice never depends on a pass's shape (a row's result must not depend on its batch); within a set the
 * kernels choose their path by shape (decode streams rows, batches tile them), every path bit-identical. */
const td_kernels *td_kernels_best(void) {
    const td_kernels *k = td_kernels_forced();
    if (k) return k;
    if (td_cpu_has_amx()) return &amx;
    if (td_cpu_has_avx512bf16()) return &avx512bf16;
    if (td_cpu_has_avx512vnni()) return &avx512vnni;
    return td_cpu_has_avx2() ? &avx2 : &td_kernels_scalar;
}

static const td_kernels *const all_sets[] = {&td_kernels_scalar, &avx2, &avx512vnni, &avx512bf16, &avx512r16, &amx};

/* A TD_KERNELS that names no set, or one this CPU lacks, would otherwise fall back to the default in silence: a
 * benchmark or a test of one set would measure another. */
td_status td_kernels_choose(const td_kernels **out) {
    const char *force = getenv("TD_KERNELS");
    *out = td_kernels_best();
    if (!force || !*force || td_kernels_named(force)) return TD_OK;
    char runs[128] = "";
    size_t n = 0;
    int known = 0;
    for (size_t i = 0; i < sizeof all_sets / sizeof all_sets[0]; i++) {
        if (strcmp(force, all_sets[i]->name) == 0) known = 1;
        if (td_kernels_named(all_sets[i]->name) && n < sizeof runs) {
            int w = snprintf(runs + n, sizeof runs - n, "%s%s", n ? ", " : "", all_sets[i]->name);
            n += w > 0 ? (size_t)w : 0;
        }
    }
    if (known)
        return td_fail(TD_ERR_UNSUPPORTED, "TD_KERNELS=%.64s: this CPU cannot run that kernel set; it runs: %s", force,
                       runs);
    return td_fail(TD_ERR_INVALID_ARG, "TD_KERNELS=%.64s: no such kernel set (the sets: scalar, avx2, avx512vnni, "
                                       "avx512bf16, avx512r16, amx); this CPU runs: %s", force, runs);
}
