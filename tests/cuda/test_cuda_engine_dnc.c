/* The CUDA engine with the chunked Gated DeltaNet (issue 43: TD_CUDA_DN=chunk, forward.c / ctx.c), on the Qwen3.5
 * models: test_cuda_engine's checks (engine_case.c) with every DeltaNet layer through td_cu_deltanet_chunk_multi.
 * Skipped (exit 77) where td_device_probe finds no usable GPU.
 * 0. The switch is taken: a CUDA context's planned memory grows by the chunked state (td_ctx_memory), and the GPU's
 *    fp32 logits of a 200-token prompt differ in bits from the token-by-token kernel's (cuda.h: other bits, within
 *    fp32 rounding) and stay within 1e-4 of them.
 * 1. Parity: the qwen35-tiny fixtures against transformers (fp32 and fp64) and the CPU within 1e-4, greedy equal;
 *    demo-qwen35's 200 positions within 1e-4 of the CPU.
 * 2. Exactness, fp32 and bf16: fork = from scratch = chunks of 77 = beside another evidence, a decode step alone =
 *    beside 7 others, CUDA graphs = plain launches, the decider bit-identical in batches of 144, 7, 1, serial and fresh
 *    and within 0.01 of the CPU's probabilities.
 * 3. A snapshot taken mid-chunk (a fork at position 100: 36 rows open) and continued = the whole prompt at once; a
 *    sequence truncated to 0 and run again = fresh. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/engine_case.h"
#include "test_util.h"
#include "typedecide.h"

static td_ctx *ctx_new(const td_model *m, int32_t n_ctx, int32_t n_batch, int32_t n_seq) {
    td_ctx_params cp = td_ctx_default_params();
    cp.n_ctx = n_ctx, cp.n_batch = n_batch, cp.n_seq_max = n_seq, cp.n_outputs_max = 1, cp.n_threads = 2;
    cp.device = TD_DEVICE_CUDA;
    td_ctx *ctx = NULL;
    CHECKF(td_ctx_new(m, &cp, &ctx) == TD_OK, "td_ctx_new: %s", td_last_error());
    return ctx;
}

/* 0: the switch reaches the context's plan and its forward pass. */
static void switch_taken(const td_model *m) {
    td_ctx_params cp = td_ctx_default_params();
    cp.n_ctx = 512, cp.n_batch = 64, cp.n_seq_max = 4, cp.device = TD_DEVICE_CUDA;
    int64_t chunked = 0, plain = 0;
    CHECK(td_ctx_memory(m, &cp, &chunked) == TD_OK);
    unsetenv("TD_CUDA_DN");
    CHECK(td_ctx_memory(m, &cp, &plain) == TD_OK);
    enum { N = 200 };
    int32_t ids[N], V = td_model_n_vocab(m);
    uint64_t rng = 5;
    for (int i = 0; i < N; i++) ids[i] = (int32_t)(td_test_rand(&rng) % (uint64_t)V);
    float *tbt = eng_prompt_logits(m, TD_DEVICE_CUDA, 0, ids, N);
    setenv("TD_CUDA_DN", "chunk", 1);
    float *chk = eng_prompt_logits(m, TD_DEVICE_CUDA, 0, ids, N);
    CHECKF(chunked > plain, "TD_CUDA_DN=chunk: a CUDA context plans %lld bytes, token by token %lld",
           (long long)chunked, (long long)plain);
    double mx = 0;
    int same = 0;
    if (tbt && chk) {
        size_t cnt = (size_t)N * V;
        same = memcmp(tbt, chk, cnt * sizeof *tbt) == 0;
        for (size_t i = 0; i < cnt; i++) {
            double d = tbt[i] > chk[i] ? (double)tbt[i] - chk[i] : (double)chk[i] - tbt[i];
            if (!(d <= mx)) mx = d;
        }
        CHECKF(!same, "TD_CUDA_DN=chunk: the logits are the token-by-token kernel's bit for bit (switch not taken?)");
        CHECKF(mx <= TOL_FP32, "chunked vs token-by-token DeltaNet: logits differ by %g (bound %g)", mx, TOL_FP32);
    }
    printf("switch: context memory %lld bytes chunked, %lld token by token; %d positions' fp32 logits chunked vs "
           "token by token: max %.3g, %s\n", (long long)chunked, (long long)plain, N, mx,
           same ? "SAME bits" : "other bits");
    free(tbt), free(chk);
}

/* 3: a snapshot mid-chunk continued, and a truncation to 0. */
static void snapshot_mid_chunk(const td_model *m, const char *name) {
    enum { H = 100, S = 30 };
    int32_t V = td_model_n_vocab(m), full[H + S];
    uint64_t rng = 41;
    for (int i = 0; i < H + S; i++) full[i] = (int32_t)(td_test_rand(&rng) % (uint64_t)V);
    td_ctx *ctx = ctx_new(m, 1024, 256, 4);
    td_batch *b = NULL;
    float *whole = malloc((size_t)V * sizeof *whole);
    if (!ctx || !whole || td_batch_new(256, &b) != TD_OK) goto done;
    if (eng_run(ctx, b, 0, 0, full, H + S, H + S)) goto done; /* the whole prompt at once */
    memcpy(whole, td_ctx_output(ctx, 0), (size_t)V * sizeof *whole);
    if (eng_run(ctx, b, 1, 0, full, H, 33)) goto done;          /* the head in passes of 33, then a snapshot at 100 */
    CHECK(td_ctx_seq_fork(ctx, 1, 2, H) == TD_OK);
    if (eng_run(ctx, b, 1, H, full + H, S, 1)) goto done; /* the original goes on one token at a time */
    CHECKF(memcmp(td_ctx_output(ctx, 0), whole, (size_t)V * sizeof *whole) == 0,
           "%s: head in passes of 33 then one token at a time != the whole prompt at once", name);
    if (eng_run(ctx, b, 2, H, full + H, S, S)) goto done; /* the snapshot: the rest in one pass */
    CHECKF(memcmp(td_ctx_output(ctx, 0), whole, (size_t)V * sizeof *whole) == 0,
           "%s: snapshot at position %d continued != the whole prompt at once", name, H);
    CHECK(td_ctx_seq_truncate(ctx, 2, 0) == TD_OK); /* cleared, then run again from nothing */
    if (eng_run(ctx, b, 2, 0, full, H + S, 64)) goto done;
    CHECKF(memcmp(td_ctx_output(ctx, 0), whole, (size_t)V * sizeof *whole) == 0,
           "%s: a sequence truncated to 0 and run again != the whole prompt at once", name);
done:
    printf("%-28s fp32: snapshot at %d (mid-chunk) continued = whole = passes of 33 + one at a time; truncated to 0 "
           "and rerun = whole: checked\n", name, H);
    free(whole);
    td_batch_free(b);
    td_ctx_free(ctx);
}

int main(void) {
    char desc[256];
    if (td_device_probe(TD_DEVICE_CUDA, desc, sizeof desc) != TD_OK) {
        printf("skipped: %s\n", td_last_error());
        return 77;
    }
    printf("device: %s\n", desc);
    setenv("TD_CUDA_DN", "chunk", 1);   /* before the first context: each context reads it once */
    setenv("TD_KERNELS", "avx2", 1);    /* the CPU side in fp32 products (the AVX-512 BF16 set rounds to bf16) */
    td_model *m = NULL;
    const char *demo = "models/demo-qwen35";
    CHECKF(td_model_load(td_test_path(demo), NULL, &m) == TD_OK, "%s: %s", demo, td_last_error());
    if (m) switch_taken(m);
    double worst32 = 0, worst16 = 0, worst_prob = 0, demo16 = 0;
    for (int i = 0; i < eng_n_fixtures; i++)
        if (strncmp(eng_fixtures[i], "qwen35-", 7) == 0) eng_parity(eng_fixtures[i], &worst32, &worst16);
    printf("parity (chunked DeltaNet): GPU fp32 vs CPU fp32 max %.3g (bound %g), GPU bf16 vs CPU fp32 max %.3g\n",
           worst32, TOL_FP32, worst16);
    if (m) {
        eng_demo_parity(m, demo, &demo16);
        snapshot_mid_chunk(m, demo);
        for (int bf16 = 0; bf16 < 2; bf16++) {
            eng_exactness_engine(m, bf16, demo);
            eng_graphs_replay(m, bf16, demo);
            eng_exactness_decider(m, bf16, demo, &worst_prob, TOL_PROB);
        }
        td_model_free(m);
    }
    printf("decide (chunked DeltaNet): GPU vs CPU probabilities max %.3g (bound %g)\n", worst_prob, TOL_PROB);
    return td_test_finish("test_cuda_engine_dnc");
}
