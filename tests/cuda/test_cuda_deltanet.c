/* td_cu_deltanet's kernels give the same bits (src/kernels/cuda/deltanet.cu): the default (the form by warps where dk =
 * 128 and dv a multiple of 32 up to 128, else the register kernel where dk = 128, dv <= 128), the register kernel
 * (test mode 3) and the form by warps (2) against the one that reads and writes the state in global memory for every
 * token (td_cu_deltanet_test_mode(1), as TD_CUDA_DN=old), core outputs and the state after, bit for bit:
 *   Hk / Hv = 16 / 16 and 16 / 32 at dk = dv = 128 (Qwen3.5's shapes), 2 / 4 at dv = 96 (threads without a column);
 *   groups of 1, 7, 64 and 300 tokens in four of six sequences (two untouched), their rows shuffled over the batch;
 *   the 300-token group split over two launches (state carried on the device) = one launch, also old then new;
 *   shapes the register kernel does not take (dk = 64; dv = 256) fall back to the old kernel and say so.
 * Both are also held to the CPU's td_deltanet_step_ref + td_gated_rmsnorm within 1e-4 relative (test_cuda_kernels
 * allows 1e-5 over 64 tokens for the l2 norm's tree sum and expf; here roundings of 300 tokens meet), so two equally
 * wrong kernels cannot pass.
 * With TD_CUDA_DN=old in the environment (ctest test_cuda_deltanet_old) the register kernel must be off.
 * TD_DN_BENCH=1 times the three forms instead (bench(): no checks); TD_DN_SMALL=1 runs the 2 / 4, dv = 96 case alone
 * (every form; small enough for compute-sanitizer).
 * Without a usable CUDA device it prints why and exits 77 (skipped). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cuda/cuda_test.h"
#include "cuda/dn_case.h"
#include "kernels/cuda/cuda.h"
#include "test_util.h"

static uint64_t seed = 0xde17a5eedull;

/* ---- the batch: groups of 1, 7, 64 and 300 tokens (sequences 4, 0, 5, 2 of 6), rows shuffled ---- */

#define NG 4
#define DN_T 372
#define DN_NSEQ 6
static const int32_t g_seq[NG] = {4, 0, 5, 2}, g_off[NG + 1] = {0, 1, 8, 72, 372};

static void test_case(int64_t Hk, int64_t Hv, int64_t dk, int64_t dv, int want_regs) {
    char name[128], shape[64];
    snprintf(shape, sizeof shape, "Hk=%lld Hv=%lld dk=%lld dv=%lld", (long long)Hk, (long long)Hv, (long long)dk,
             (long long)dv);
    printf("%s\n", shape);
    int regs = td_cu_deltanet_regs(dk, dv);
    printf("  %-66s %s\n", "kernel", regs ? "state in registers" : "state in global memory (old)");
    CHECKF(regs == want_regs, "%s: td_cu_deltanet_regs %d, want %d", shape, regs, want_regs);
    dncase c = dn_new(&seed, Hk, Hv, dk, dv, DN_T, DN_NSEQ);
    int64_t cn = DN_T * Hv * dv, sn = DN_NSEQ * c.ss;
    int32_t tok[DN_T];
    for (int32_t i = 0; i < DN_T; i++) tok[i] = i;
    cu_shuffle(&seed, tok, DN_T);
    groups g = groups_new(g_seq, g_off, tok, NG);
    float *core_new = malloc((size_t)cn * 4), *state_new = malloc((size_t)sn * 4);
    float *core_old = malloc((size_t)cn * 4), *state_old = malloc((size_t)sn * 4);
    dn_run(&c, &g, core_new, state_new, NULL, 0);
    dn_run(&c, &g, core_old, state_old, NULL, 1);
    cu_bits("groups of 1 / 7 / 64 / 300 tokens: core, normal vs old kernel", core_new, core_old, cn);
    cu_bits("groups of 1 / 7 / 64 / 300 tokens: state, normal vs old kernel", state_new, state_old, sn);
    cu_bits("sequence 1 (in no group) untouched", state_new + c.ss, c.state + c.ss, c.ss);
    cu_bits("sequence 3 (in no group) untouched", state_new + 3 * c.ss, c.state + 3 * c.ss, c.ss);
    /* the register kernel (test mode 3) and the form by warps (2) where they take the shape */
    const int warps = dk == 128 && dv % 32 == 0 && dv <= 128;
    for (int mode = 2; mode <= 3; mode++) {
        if (mode == 2 ? !warps : !want_regs) continue;
        float *core_w = malloc((size_t)cn * 4), *state_w = malloc((size_t)sn * 4);
        dn_run(&c, &g, core_w, state_w, NULL, mode);
        snprintf(name, sizeof name, "groups of 1 / 7 / 64 / 300 tokens: core, %s vs old kernel",
                 mode == 2 ? "by warps" : "registers");
        cu_bits(name, core_w, core_old, cn);
        snprintf(name, sizeof name, "groups of 1 / 7 / 64 / 300 tokens: state, %s vs old kernel",
                 mode == 2 ? "by warps" : "registers");
        cu_bits(name, state_w, state_old, sn);
        free(core_w), free(state_w);
    }

    /* the CPU reference */
    {
        float *rcore = calloc((size_t)cn, 4), *rstate = malloc((size_t)sn * 4);
        memcpy(rstate, c.state, (size_t)sn * 4);
        for (int gi = 0; gi < NG; gi++)
            dn_ref_group(&c, rcore, rstate, g_seq[gi], tok + g_off[gi], g_off[gi + 1] - g_off[gi]);
        cu_within_rel("core against the CPU reference", core_new, rcore, cn, 1e-4);
        cu_within_rel("state against the CPU reference", state_new, rstate, sn, 1e-4);
        free(rcore), free(rstate);
    }

    /* the 300-token group (sequence 2) as 123 + 177 tokens over two launches, the state kept on the device: normal
     * then normal, old then normal, and (where it runs) by warps then normal, each = one launch */
    static const char *form[3] = {"normal", "old", "by warps"};
    for (int first = 0; first < 2 + warps; first++) {
        int32_t seqa[1] = {2}, offa[2] = {0, 123}, offb[2] = {0, 177};
        groups ga = groups_new(seqa, offa, tok + 72, 1), gb = groups_new(seqa, offb, tok + 72 + 123, 1);
        size_t sb = (size_t)sn * 4, cb = (size_t)cn * 4;
        float *sd = cu_up(c.state, sb), *cd = cu_up(NULL, cb);
        dn_launch(&c, &ga, cd, sd, first);
        dn_launch(&c, &gb, cd, sd, 0);
        float *core2 = malloc(cb), *state2 = malloc(sb);
        cu_down(core2, cd, cb);
        cu_down(state2, sd, sb);
        float *x = malloc((size_t)(300 * Hv * dv) * 4), *y = malloc((size_t)(300 * Hv * dv) * 4);
        dn_pick(x, core2, tok + 72, 300, Hv * dv);
        dn_pick(y, core_new, tok + 72, 300, Hv * dv);
        snprintf(name, sizeof name, "300 tokens as 123 (%s) + 177 (normal) = one launch: core", form[first]);
        cu_bits(name, x, y, 300 * Hv * dv);
        snprintf(name, sizeof name, "300 tokens as 123 (%s) + 177 (normal) = one launch: state", form[first]);
        cu_bits(name, state2 + 2 * c.ss, state_new + 2 * c.ss, c.ss);
        free(core2), free(state2), free(x), free(y);
        td_cu_free(sd), td_cu_free(cd);
        groups_free(&ga), groups_free(&gb);
    }

    /* a group alone (the 7 tokens of sequence 0) = among the others */
    {
        int32_t seq1[1] = {0}, off1[2] = {0, 7};
        groups g1 = groups_new(seq1, off1, tok + 1, 1);
        float *core1 = malloc((size_t)cn * 4), *state1 = malloc((size_t)sn * 4);
        dn_run(&c, &g1, core1, state1, NULL, 0);
        float *x = malloc((size_t)(7 * Hv * dv) * 4), *y = malloc((size_t)(7 * Hv * dv) * 4);
        dn_pick(x, core1, tok + 1, 7, Hv * dv);
        dn_pick(y, core_new, tok + 1, 7, Hv * dv);
        cu_bits("a group alone vs among others: core", x, y, 7 * Hv * dv);
        cu_bits("a group alone vs among others: state", state1, state_new, c.ss);
        free(core1), free(state1), free(x), free(y);
        groups_free(&g1);
    }
    free(core_new), free(state_new), free(core_old), free(state_old);
    groups_free(&g);
    dn_free(&c);
}

/* TD_DN_BENCH=1: no checks; the old, the register and the by-warps forms timed on Qwen3.5's shapes (wall time of 10
 * launches after 3, then a sync: launch overhead included), microseconds a launch and tokens/s: one sequence of 2048
 * tokens (a prefill), 16 sequences of 128, 64 sequences of 1 token (decode steps). */
static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void bench(void) {
    static const int64_t heads[][2] = {{16, 16}, {16, 32}}, shapes[][2] = {{1, 2048}, {16, 128}, {64, 1}};
    for (size_t hi = 0; hi < sizeof heads / sizeof *heads; hi++)
        for (size_t si = 0; si < sizeof shapes / sizeof *shapes; si++) {
            int64_t ns = shapes[si][0], per = shapes[si][1], nt = ns * per;
            dncase c = dn_new(&seed, heads[hi][0], heads[hi][1], 128, 128, nt, ns);
            int32_t *gseq = malloc((size_t)ns * 4), *off = malloc((size_t)(ns + 1) * 4), *tok = malloc((size_t)nt * 4);
            for (int64_t i = 0; i < ns; i++) gseq[i] = (int32_t)i, off[i] = (int32_t)(i * per);
            off[ns] = (int32_t)nt;
            for (int64_t i = 0; i < nt; i++) tok[i] = (int32_t)i;
            groups g = groups_new(gseq, off, tok, ns);
            float *sd = cu_up(c.state, (size_t)(ns * c.ss) * 4), *cd = cu_up(NULL, (size_t)(nt * c.Hv * c.dv) * 4);
            double us[3];
            for (int mode = 2; mode >= 0; mode--) {
                for (int r = 0; r < 3; r++) dn_launch(&c, &g, cd, sd, mode);
                CU(td_cu_sync(NULL));
                double t0 = now_s();
                for (int r = 0; r < 10; r++) dn_launch(&c, &g, cd, sd, mode);
                CU(td_cu_sync(NULL));
                us[mode] = (now_s() - t0) / 10 * 1e6;
            }
            printf("  Hk=%lld Hv=%lld, %lld x %lld tokens: old %.1f us (%.0f tokens/s), registers %.1f us (%.0f "
                   "tokens/s), %.2fx; by warps %.1f us, %.2fx the registers'\n",
                   (long long)c.Hk, (long long)c.Hv, (long long)ns, (long long)per, us[1], (double)nt / us[1] * 1e6, us[0],
                   (double)nt / us[0] * 1e6, us[1] / us[0], us[2], us[0] / us[2]);
            td_cu_free(sd), td_cu_free(cd);
            groups_free(&g);
            free(gseq), free(off), free(tok);
            dn_free(&c);
        }
}

int main(void) {
    if (!cu_test_device("test_cuda_deltanet")) return 77;
    const char *b = getenv("TD_DN_BENCH");
    if (b && strcmp(b, "1") == 0) {
        bench();
        return td_test_finish("test_cuda_deltanet (bench)");
    }
    const char *env = getenv("TD_CUDA_DN");
    int on = !(env && strcmp(env, "old") == 0); /* TD_CUDA_DN=old: the register kernel is never chosen */
    if (!on) printf("TD_CUDA_DN=old: every shape on the old kernel\n");
    const char *small = getenv("TD_DN_SMALL"); /* 1: the smallest shape every form takes, alone (compute-sanitizer) */
    if (small && strcmp(small, "1") == 0) {
        test_case(2, 4, 128, 96, on);
        return td_test_finish("test_cuda_deltanet (TD_DN_SMALL=1)");
    }
    test_case(16, 16, 128, 128, on);
    test_case(16, 32, 128, 128, on);
    test_case(2, 4, 128, 96, on);
    test_case(2, 2, 64, 64, 0);
    test_case(1, 2, 128, 256, 0);
    CU(td_cu_sync(NULL));
    return td_test_finish("test_cuda_deltanet");
}
