/* Engine invariants on a small synthetic Qwen3, then on the Llama 3, Qwen2.5 and Gemma 3 fixtures (Gemma's sliding
 * window of 8 is shorter than the 40 tokens here, and its prefix of 23): prefix reuse is exact, a token's result does
 * not depend on the rest of the batch or on the thread count, restricted head rows equal the full logits' rows, forks
 * share KV rows, and a rejected batch leaves the cache untouched. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test_util.h"
#include "typedecide.h"

static const char config[] =
    "{\"model_type\": \"qwen3\", \"vocab_size\": 515, \"hidden_size\": 96, \"num_hidden_layers\": 3,"
    " \"num_attention_heads\": 6, \"num_key_value_heads\": 2, \"head_dim\": 24, \"intermediate_size\": 200,"
    " \"max_position_embeddings\": 4096, \"rms_norm_eps\": 1e-6, \"rope_theta\": 10000,"
    " \"tie_word_embeddings\": false}";

#define N 40
#define P 23

static int32_t ids[N];

static td_ctx *new_ctx(const td_model *m, int threads, int n_seq, int n_out) {
    td_ctx_params p = td_ctx_default_params();
    p.n_ctx = 512;
    p.n_batch = 128;
    p.n_seq_max = n_seq;
    p.n_threads = threads;
    p.n_outputs_max = n_out;
    td_ctx *ctx = NULL;
    CHECK(td_ctx_new(m, &p, &ctx) == TD_OK);
    return ctx;
}

/* Runs ids[from..to) of sequence `seq` (positions from..to), all wanting output; copies logits to out. */
static void run(td_ctx *ctx, td_batch *b, int seq, int from, int to, float *out, int V) {
    td_batch_clear(b);
    for (int i = from; i < to; i++) td_batch_add(b, ids[i], seq, i, 1);
    CHECK(td_ctx_decode(ctx, b) == TD_OK);
    for (int i = 0; i < to - from; i++) memcpy(out + (size_t)(from + i) * V, td_ctx_output(ctx, i), (size_t)V * 4);
}

static void invariants(const char *dir) {
    td_model *m = NULL;
    CHECKF(td_model_load(dir, NULL, &m) == TD_OK, "%s: %s", dir, td_last_error());
    if (!m) return;
    int V = td_model_n_vocab(m);
    uint64_t rng = 3;
    for (int i = 0; i < N; i++) ids[i] = (int32_t)(td_test_rand(&rng) % (uint64_t)V);
    td_batch *b;
    CHECK(td_batch_new(128, &b) == TD_OK);
    float *ref = malloc((size_t)N * V * 4), *alt = malloc((size_t)N * V * 4);

    /* reference: the whole sequence in one batch, 1 thread */
    td_ctx *c1 = new_ctx(m, 1, 4, N);
    run(c1, b, 0, 0, N, ref, V);

    /* 2 threads give the same bits */
    td_ctx *c2 = new_ctx(m, 2, 4, N);
    run(c2, b, 0, 0, N, alt, V);
    CHECK(memcmp(ref, alt, (size_t)N * V * 4) == 0);
    td_ctx_free(c2);

    /* prefix reuse: prefix, then the suffix from the cache, then token by token */
    td_ctx *c3 = new_ctx(m, 2, 4, N);
    memset(alt, 0, (size_t)N * V * 4);
    run(c3, b, 0, 0, P, alt, V);
    run(c3, b, 0, P, N - 5, alt, V);
    for (int i = N - 5; i < N; i++) run(c3, b, 0, i, i + 1, alt, V);
    CHECK(memcmp(ref, alt, (size_t)N * V * 4) == 0);

    /* forks: sequences 1 and 2 share the prefix of 0 and decode their suffixes in one mixed batch */
    td_ctx_seq_truncate(c3, 0, P);
    int32_t free_before = td_ctx_n_free_rows(c3);
    CHECK(td_ctx_seq_fork(c3, 0, 1, P) == TD_OK);
    CHECK(td_ctx_seq_fork(c3, 0, 2, P - 4) == TD_OK);
    CHECK(td_ctx_n_free_rows(c3) == free_before); /* sharing copies no KV rows */
    td_batch_clear(b);
    for (int i = P - 4; i < N; i++) { /* interleave the two sequences' tokens */
        if (i >= P) td_batch_add(b, ids[i], 1, i, 1);
        td_batch_add(b, ids[i], 2, i, 1);
    }
    CHECK(td_ctx_decode(c3, b) == TD_OK);
    int o = 0;
    for (int i = P - 4; i < N; i++) {
        if (i >= P) CHECKF(memcmp(td_ctx_output(c3, o++), ref + (size_t)i * V, (size_t)V * 4) == 0, "fork 1 pos %d", i);
        CHECKF(memcmp(td_ctx_output(c3, o++), ref + (size_t)i * V, (size_t)V * 4) == 0, "fork 2 pos %d", i);
    }
    CHECK(td_ctx_seq_truncate(c3, 1, 0) == TD_OK);
    CHECK(td_ctx_seq_truncate(c3, 2, 0) == TD_OK);
    CHECK(td_ctx_n_free_rows(c3) == free_before);

    /* restricted head rows equal the same rows of the full logits, in the order given */
    int32_t rows[5] = {514, 3, 200, 3, 0};
    CHECK(td_ctx_set_output_rows(c3, rows, 5) == TD_OK);
    CHECK(td_ctx_seq_fork(c3, 0, 1, P) == TD_OK);
    td_batch_clear(b);
    td_batch_add(b, ids[P], 1, P, 1);
    CHECK(td_ctx_decode(c3, b) == TD_OK);
    const float *r = td_ctx_output(c3, 0);
    for (int k = 0; k < 5; k++) CHECKF(memcmp(&r[k], &ref[(size_t)P * V + rows[k]], 4) == 0, "restricted row %d", rows[k]);
    CHECK(td_ctx_set_output_rows(c3, NULL, 0) == TD_OK);

    /* rejected batches change nothing */
    int32_t len = td_ctx_seq_len(c3, 1), fr = td_ctx_n_free_rows(c3);
    td_batch_clear(b);
    td_batch_add(b, 5, 1, len + 1, 1); /* a gap */
    CHECK(td_ctx_decode(c3, b) == TD_ERR_INVALID_ARG);
    td_batch_clear(b);
    td_batch_add(b, V, 1, len, 1); /* outside the vocabulary */
    CHECK(td_ctx_decode(c3, b) == TD_ERR_RANGE);
    CHECK(strstr(td_last_error(), "outside the vocabulary") != NULL);
    td_batch_clear(b);
    td_batch_add(b, 5, 9, 0, 1); /* no such sequence */
    CHECK(td_ctx_decode(c3, b) == TD_ERR_RANGE);
    CHECK(td_ctx_seq_len(c3, 1) == len && td_ctx_n_free_rows(c3) == fr);
    CHECK(td_ctx_seq_fork(c3, 0, 1, 1) == TD_ERR_STATE); /* destination not empty */

    td_ctx_free(c1);
    td_ctx_free(c3);
    td_batch_free(b);
    td_model_free(m);
    free(ref);
    free(alt);
}

int main(void) {
    char dir[] = "/tmp/td_test_engine_XXXXXX";
    if (!mkdtemp(dir)) return 1;
    td_synth_params sp = td_synth_default_params();
    sp.seed = 7;
    CHECK(td_synth_write(dir, config, &sp) == TD_OK);
    invariants(dir);
    invariants(td_test_path("fixtures/models/llama3-tiny"));
    invariants(td_test_path("fixtures/models/qwen25-tiny"));
    invariants(td_test_path("fixtures/models/gemma3-tiny"));
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    return td_test_finish("test_engine");
}
