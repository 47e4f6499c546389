/* Hybrid (Qwen3.5) engine behaviour on the tiny fixture: a suffix run from a snapshot gives bit-identical logits
 * to prefix + suffix in one pass; forks copy the constant-size DeltaNet state instead of re-running the prefix;
 * results do not depend on the batch or the thread count; DeltaNet state cannot be rolled back; and broken
 * checkpoints (a missing DeltaNet tensor, a wrong conv kernel, layer_types of the wrong length) are named; without
 * layer_types, full_attention_interval places the attention layers. */
#define _GNU_SOURCE /* memmem */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>


#include "test_util.h"
#include "typedecide.h"

#define N 90
#define P 37

static int32_t ids[N];

static td_ctx *new_ctx(const td_model *m, int threads) {
    td_ctx_params p = td_ctx_default_params();
    p.n_ctx = 1024;
    p.n_batch = 256;
    p.n_seq_max = 6;
    p.n_threads = threads;
    p.n_outputs_max = 256;
    td_ctx *ctx = NULL;
    CHECKF(td_ctx_new(m, &p, &ctx) == TD_OK, "%s", td_last_error());
    return ctx;
}

static void run(td_ctx *ctx, td_batch *b, int seq, int from, int to, float *out, int V) {
    td_batch_clear(b);
    for (int i = from; i < to; i++) td_batch_add(b, ids[i], seq, i, 1);
    CHECKF(td_ctx_decode(ctx, b) == TD_OK, "%s", td_last_error());
    for (int i = 0; i < to - from; i++) memcpy(out + (size_t)(from + i) * V, td_ctx_output(ctx, i), (size_t)V * 4);
}

static void test_snapshots(const td_model *m) {
    int V = td_model_n_vocab(m);
    uint64_t rng = 17;
    for (int i = 0; i < N; i++) ids[i] = (int32_t)(td_test_rand(&rng) % 2074);
    td_batch *b;
    CHECK(td_batch_new(256, &b) == TD_OK);
    float *ref = calloc((size_t)N * V, 4), *alt = calloc((size_t)N * V, 4);

    td_ctx *c1 = new_ctx(m, 1);
    run(c1, b, 0, 0, N, ref, V); /* prefix + suffix in one pass */

    td_ctx *c2 = new_ctx(m, 2);
    run(c2, b, 0, 0, P, alt, V); /* the prefix once */
    int32_t free_after_prefix = td_ctx_n_free_rows(c2);
    CHECK(td_ctx_seq_fork(c2, 0, 5, P) == TD_OK); /* snapshot: a parked fork at the end of the prefix */
    CHECK(td_ctx_seq_fork(c2, 0, 1, P) == TD_OK);
    CHECK(td_ctx_seq_fork(c2, 0, 2, P) == TD_OK);
    CHECK(td_ctx_n_free_rows(c2) == free_after_prefix); /* no prefix work or KV copy */
    /* two branches in one mixed batch: 1 runs the real suffix, 2 a different one */
    td_batch_clear(b);
    for (int i = P; i < N; i++) {
        td_batch_add(b, ids[i], 1, i, 1);
        td_batch_add(b, (ids[i] * 7 + 3) % 2074, 2, i, 0);
    }
    CHECK(td_ctx_decode(c2, b) == TD_OK);
    for (int i = P; i < N; i++)
        CHECKF(memcmp(td_ctx_output(c2, i - P), ref + (size_t)i * V, (size_t)V * 4) == 0,
               "suffix from the snapshot differs at position %d", i);
    /* the snapshot still holds the state at P: a later fork from it runs the suffix token by token */
    CHECK(td_ctx_seq_fork(c2, 5, 3, P) == TD_OK);
    for (int i = P; i < N; i++) run(c2, b, 3, i, i + 1, alt, V);
    CHECK(memcmp(alt + (size_t)P * V, ref + (size_t)P * V, (size_t)(N - P) * V * 4) == 0);

    /* DeltaNet state cannot be rolled back or forked from the middle */
    CHECK(td_ctx_seq_fork(c2, 1, 4, P) == TD_ERR_STATE);
    CHECK(strstr(td_last_error(), "snapshot") != NULL);
    CHECK(td_ctx_seq_truncate(c2, 1, P) == TD_ERR_STATE);
    /* ... but a sequence emptied to 0 starts again from a zero state */
    CHECK(td_ctx_seq_truncate(c2, 1, 0) == TD_OK);
    memset(alt, 0, (size_t)N * V * 4);
    run(c2, b, 1, 0, N, alt, V);
    CHECK(memcmp(alt, ref, (size_t)N * V * 4) == 0);

    td_ctx_free(c1);
    td_ctx_free(c2);
    td_batch_free(b);
    free(ref);
    free(alt);
}

/* ---- broken checkpoints ------------------------------------------------------------------------------------ */

static char dir[64];

static void copy_fixture(void) {
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf %s && mkdir -p %s && cp %s/* %s/", dir, dir,
             td_test_path("fixtures/models/qwen35-tiny-text"), dir);
    CHECK(system(cmd) == 0);
}

static void replace_in_file(const char *name, const char *from, const char *to) {
    char path[128];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    size_t len;
    char *s = td_test_read(path, &len);
    char *at = s ? memmem(s, len, from, strlen(from)) : NULL;
    CHECKF(at != NULL, "%s lacks \"%s\"", name, from);
    if (!at) {
        free(s);
        return;
    }
    size_t fl = strlen(from), tl = strlen(to);
    FILE *f = fopen(path, "wb");
    fwrite(s, 1, (size_t)(at - s), f);
    fwrite(to, 1, tl, f);
    fwrite(at + fl, 1, len - (size_t)(at - s) - fl, f);
    fclose(f);
    free(s);
}

static void expect_fail(const char *what, const char *needle) {
    td_model *m = NULL;
    td_status st = td_model_load(dir, NULL, &m);
    CHECKF(st == TD_ERR_FORMAT && m == NULL, "%s: %s (%s)", what, td_status_str(st), td_last_error());
    CHECKF(strstr(td_last_error(), needle) != NULL, "%s: \"%s\" lacks \"%s\"", what, td_last_error(), needle);
    td_model_free(m);
}

static void test_bad_checkpoints(void) {
    snprintf(dir, sizeof dir, "/tmp/td_test_hybrid_%d", (int)getpid());
    /* a missing DeltaNet tensor: rename it in the header (same length keeps every offset valid) */
    copy_fixture();
    replace_in_file("model.safetensors", "model.layers.1.linear_attn.A_log", "model.layers.1.linear_attn.A_lox");
    expect_fail("missing A_log", "missing tensor model.layers.1.linear_attn.A_log");
    copy_fixture();
    replace_in_file("model.safetensors", "model.layers.2.linear_attn.in_proj_qkv.weight",
                    "model.layers.2.linear_attn.in_proj_qkv.wXight");
    expect_fail("missing in_proj_qkv", "missing tensor model.layers.2.linear_attn.in_proj_qkv.weight");
    /* a conv kernel that disagrees with config.json */
    copy_fixture();
    replace_in_file("config.json", "\"linear_conv_kernel_dim\": 4", "\"linear_conv_kernel_dim\": 3");
    expect_fail("conv kernel", "model.layers.0.linear_attn.conv1d.weight has shape [128, 1, 4] but config.json implies [128, 1, 3]");
    /* layer_types of the wrong length */
    copy_fixture();
    replace_in_file("config.json", "\"full_attention\"\n", "\"full_attention\", \"linear_attention\"\n");
    expect_fail("layer_types length", "\"layer_types\" has 5 entries but num_hidden_layers is 4");
    copy_fixture();
    replace_in_file("config.json", "\"full_attention\"\n", "\"sliding_attention\"\n");
    expect_fail("layer_types value", "layer_types[3] must be \"full_attention\" or \"linear_attention\"");
    /* no layer_types: full_attention_interval decides (layer i is full attention when (i + 1) % interval == 0) */
    static const char layer_types[] = "\"layer_types\": [\n    \"linear_attention\",\n    \"linear_attention\",\n"
                                      "    \"linear_attention\",\n    \"full_attention\"\n  ],";
    copy_fixture();
    replace_in_file("config.json", layer_types, "\"full_attention_interval\": 4,");
    td_model *m = NULL;
    CHECKF(td_model_load(dir, NULL, &m) == TD_OK, "full_attention_interval 4: %s", td_last_error());
    if (m) { /* the same layers as the fixture's layer_types, so the same logits */
        td_model *ref = NULL;
        CHECK(td_model_load(td_test_path("fixtures/models/qwen35-tiny-text"), NULL, &ref) == TD_OK);
        int V = td_model_n_vocab(m);
        float *a = calloc((size_t)16 * V, 4), *b2 = calloc((size_t)16 * V, 4);
        td_batch *bt;
        CHECK(td_batch_new(16, &bt) == TD_OK);
        td_ctx *ca = new_ctx(m, 1), *cb = new_ctx(ref, 1);
        run(ca, bt, 0, 0, 16, a, V);
        run(cb, bt, 0, 0, 16, b2, V);
        CHECK(memcmp(a, b2, (size_t)16 * V * 4) == 0);
        td_ctx_free(ca), td_ctx_free(cb), td_batch_free(bt), free(a), free(b2), td_model_free(ref);
    }
    td_model_free(m);
    copy_fixture();
    replace_in_file("config.json", layer_types, "\"full_attention_interval\": 2,"); /* layer 1 would be attention */
    expect_fail("full_attention_interval 2", "missing tensor model.layers.1.self_attn");
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK(system(cmd) == 0);
}

int main(void) {
    td_model *m = NULL;
    CHECKF(td_model_load(td_test_path("fixtures/models/qwen35-tiny-text"), NULL, &m) == TD_OK, "%s", td_last_error());
    if (m) test_snapshots(m);
    td_model_free(m);
    test_bad_checkpoints();
    return td_test_finish("test_hybrid");
}
