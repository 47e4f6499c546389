/* Bounded fuzzing of the parsers of untrusted bytes with a seeded random mutator: the safetensors header parser
 * (through td_model_load of a mutated checkpoint, followed by a forward pass when it loads) and the tokenizer.json
 * loader (followed by encoding when it loads) and the GGUF reader (through td_model_load of a mutated file, and
 * through td_tokenizer_load_gguf of mutated tokenizer metadata, whose tokenizers must survive td_tokenizer_to_json
 * and give the same ids read back). Nothing may crash; under the sanitizer build ASan/UBSan watch every run.
 * TD_FUZZ_SECONDS bounds the time per target (default 8 s, 4 s under sanitizers). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "test_util.h"
#include "typedecide.h"

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static const char *interesting[] = {"0", "-1", "18446744073709551615", "9223372036854775807", "4294967296",
                                    "1e308", "[]", "{}", "null", "\"\"", "\"F16\"", "\"BF16\"", "\"I8\"",
                                    "[0, 0]", "[1, 2, 3, 4, 5, 6, 7, 8, 9]", "true", "\"\\u0000\"", "65536"};

/* One random mutation of buf[0..*n) in place (cap bytes available). Header-biased: most edits land in the
 * first `focus` bytes, where the JSON lives. */
static void mutate(unsigned char *buf, size_t *n, size_t cap, size_t focus, uint64_t *rng) {
    size_t len = *n;
    if (len == 0) return;
    size_t span = focus && focus < len && td_test_rand(rng) % 4 ? focus : len;
    size_t at = (size_t)(td_test_rand(rng) % span);
    switch (td_test_rand(rng) % 7) {
    case 0: buf[at] ^= (unsigned char)(1u << (td_test_rand(rng) % 8)); break;
    case 1: buf[at] = (unsigned char)td_test_rand(rng); break;
    case 2: *n = at; break; /* truncate */
    case 3: { /* replace a run of digits or a token with an interesting value */
        const char *v = interesting[td_test_rand(rng) % (sizeof interesting / sizeof interesting[0])];
        size_t vl = strlen(v), end = at;
        while (end < len && end - at < 24 && ((buf[end] >= '0' && buf[end] <= '9') || buf[end] == '"')) end++;
        if (end == at) end = at + 1 <= len ? at + 1 : len;
        if (len - (end - at) + vl > cap) break;
        memmove(buf + at + vl, buf + end, len - end);
        memcpy(buf + at, v, vl);
        *n = len - (end - at) + vl;
        break;
    }
    case 4: { /* delete a short run */
        size_t k = 1 + td_test_rand(rng) % 16;
        if (at + k > len) k = len - at;
        memmove(buf + at, buf + at + k, len - at - k);
        *n = len - k;
        break;
    }
    case 5: { /* duplicate a short run */
        size_t k = 1 + td_test_rand(rng) % 16;
        if (at + k > len) k = len - at;
        if (len + k > cap) break;
        memmove(buf + at + k, buf + at, len - at);
        *n = len + k;
        break;
    }
    default: /* the 8-byte length prefix of safetensors */
        buf[td_test_rand(rng) % (len < 8 ? len : 8)] = (unsigned char)td_test_rand(rng);
        break;
    }
}

static void fuzz_safetensors(double seconds) {
    static const char config[] =
        "{\"model_type\": \"qwen3\", \"vocab_size\": 64, \"hidden_size\": 16, \"num_hidden_layers\": 1,"
        " \"num_attention_heads\": 2, \"num_key_value_heads\": 1, \"head_dim\": 8, \"intermediate_size\": 24,"
        " \"rms_norm_eps\": 1e-6, \"tie_word_embeddings\": false}";
    char dir[] = "/tmp/td_fuzz_st_XXXXXX";
    if (!mkdtemp(dir)) return;
    char path[128];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    td_synth_params sp = td_synth_default_params();
    sp.seed = 3;
    CHECK(td_synth_write(dir, config, &sp) == TD_OK);
    size_t len;
    unsigned char *orig = td_test_read(path, &len);
    if (!orig) return;
    uint64_t hl = 0;
    for (int i = 7; i >= 0; i--) hl = (hl << 8) | orig[i];
    size_t cap = len + 4096;
    unsigned char *buf = malloc(cap);
    uint64_t rng = 1234;
    long runs = 0, loaded = 0;
    double t0 = now();
    while (now() - t0 < seconds) {
        size_t n = len;
        memcpy(buf, orig, len);
        int k = 1 + (int)(td_test_rand(&rng) % 4);
        for (int i = 0; i < k; i++) mutate(buf, &n, cap, (size_t)hl + 8, &rng);
        FILE *f = fopen(path, "wb");
        if (!f) break;
        if (n) fwrite(buf, 1, n, f);
        fclose(f);
        td_model *m = NULL;
        if (td_model_load(dir, NULL, &m) == TD_OK) {
            loaded++;
            td_ctx *ctx = NULL;
            td_batch *b = NULL;
            td_ctx_params p = td_ctx_default_params();
            p.n_ctx = 8;
            p.n_batch = 4;
            if (td_ctx_new(m, &p, &ctx) == TD_OK && td_batch_new(4, &b) == TD_OK) {
                td_batch_add(b, 1, 0, 0, 0);
                td_batch_add(b, 2, 0, 1, 1);
                td_status st = td_ctx_decode(ctx, b); /* a mutated weight may be NaN: then a named error, not NaN */
                CHECKF(st == TD_OK || (st == TD_ERR_NONFINITE && strstr(td_last_error(), "layer")) ||
                           (st == TD_ERR_NONFINITE && strstr(td_last_error(), "embedding")) ||
                           (st == TD_ERR_NONFINITE && strstr(td_last_error(), "head")),
                       "%s: %s", td_status_str(st), td_last_error());
                const float *lg = st == TD_OK ? td_ctx_output(ctx, 0) : NULL; /* and success means numbers */
                for (int32_t v = 0; lg && v < td_model_head_rows(m); v++) CHECK(isfinite(lg[v]));
            }
            td_batch_free(b);
            td_ctx_free(ctx);
        } else {
            CHECK(td_last_error()[0] != 0);
        }
        td_model_free(m);
        runs++;
    }
    printf("safetensors: %ld mutated checkpoints, %ld loaded and ran, none crashed\n", runs, loaded);
    free(buf);
    free(orig);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
}

static void fuzz_tokenizer(double seconds) {
    size_t len;
    unsigned char *orig = td_test_read(td_test_path("fixtures/tokenizers/qwen3-trunc2048/tokenizer.json"), &len);
    CHECKF(orig != NULL, "fixture tokenizer missing");
    if (!orig) return;
    size_t cap = len + 4096;
    unsigned char *buf = malloc(cap);
    uint64_t rng = 99;
    long runs = 0, loaded = 0;
    static const char *texts[] = {"Hello, world! 123", "<|im_start|>user\nhi<|im_end|>", "e\xcc\x81 \xe4\xbd\xa0\xe5\xa5\xbd",
                                  "   \r\n\t x", "don't STOP"};
    double t0 = now();
    while (now() - t0 < seconds) {
        size_t n = len;
        memcpy(buf, orig, len);
        int k = 1 + (int)(td_test_rand(&rng) % 3);
        for (int i = 0; i < k; i++) mutate(buf, &n, cap, 0, &rng);
        td_tokenizer *t = NULL;
        if (td_tokenizer_load_bytes((const char *)buf, n, "fuzz", &t) == TD_OK) {
            loaded++;
            for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
                int32_t *ids;
                size_t ni;
                if (td_tokenize(t, texts[i], strlen(texts[i]), TD_TOKENIZE_PARSE_SPECIAL, &ids, &ni) == TD_OK) {
                    char *back;
                    size_t bl;
                    if (td_detokenize(t, ids, ni, &back, &bl) == TD_OK) td_free(back);
                    td_free(ids);
                }
            }
        }
        td_tokenizer_free(t);
        runs++;
    }
    printf("tokenizer.json: %ld mutated files, %ld loaded and encoded, none crashed\n", runs, loaded);
    free(buf);
    free(orig);
}

static void fuzz_gguf(double seconds) {
    size_t len;
    unsigned char *orig = td_test_read(td_test_path("fixtures/gguf/qwen3-tiny-tied-q8_0.gguf"), &len);
    CHECKF(orig != NULL, "fixture GGUF missing");
    if (!orig) return;
    char path[] = "/tmp/td_fuzz_gguf_XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0) return;
    close(fd);
    size_t cap = len + 4096;
    unsigned char *buf = malloc(cap);
    uint64_t rng = 4242;
    long runs = 0, loaded = 0;
    double t0 = now();
    while (now() - t0 < seconds) {
        size_t n = len;
        memcpy(buf, orig, len);
        int k = 1 + (int)(td_test_rand(&rng) % 4);
        for (int i = 0; i < k; i++) mutate(buf, &n, cap, 4096, &rng); /* the metadata and tensor infos come first */
        FILE *f = fopen(path, "wb");
        if (!f) break;
        if (n) fwrite(buf, 1, n, f);
        fclose(f);
        td_model *m = NULL;
        if (td_model_load(path, NULL, &m) == TD_OK) {
            loaded++;
            td_ctx *ctx = NULL;
            td_batch *b = NULL;
            td_ctx_params p = td_ctx_default_params();
            p.n_ctx = 8;
            p.n_batch = 4;
            if (td_ctx_new(m, &p, &ctx) == TD_OK && td_batch_new(4, &b) == TD_OK) {
                td_batch_add(b, 1, 0, 0, 0);
                td_batch_add(b, 2, 0, 1, 1);
                td_status st = td_ctx_decode(ctx, b); /* a mutated weight may be NaN: then a named error, not NaN */
                CHECKF(st == TD_OK || (st == TD_ERR_NONFINITE && strstr(td_last_error(), "layer")) ||
                           (st == TD_ERR_NONFINITE && strstr(td_last_error(), "embedding")) ||
                           (st == TD_ERR_NONFINITE && strstr(td_last_error(), "head")),
                       "%s: %s", td_status_str(st), td_last_error());
                const float *lg = st == TD_OK ? td_ctx_output(ctx, 0) : NULL; /* and success means numbers */
                for (int32_t v = 0; lg && v < td_model_head_rows(m); v++) CHECK(isfinite(lg[v]));
            }
            td_batch_free(b);
            td_ctx_free(ctx);
        } else {
            CHECK(td_last_error()[0] != 0);
        }
        td_model_free(m);
        runs++;
    }
    remove(path);
    printf("gguf: %ld mutated files, %ld loaded and ran, none crashed\n", runs, loaded);
    free(buf);
    free(orig);
}

static int32_t *ids_of(const td_tokenizer *t, const char *text, size_t *n) {
    int32_t *ids = NULL;
    if (td_tokenize(t, text, strlen(text), TD_TOKENIZE_PARSE_SPECIAL, &ids, n) != TD_OK) *n = (size_t)-1;
    return ids;
}

static void fuzz_gguf_tokenizer(double seconds) {
    size_t len;
    unsigned char *orig = td_test_read(td_test_path("fixtures/gguf/qwen3-tiny-tied-q8_0.gguf"), &len);
    CHECKF(orig != NULL, "fixture GGUF missing");
    if (!orig) return;
    char path[] = "/tmp/td_fuzz_gguf_tok_XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0) return;
    close(fd);
    size_t cap = len + 4096;
    unsigned char *buf = malloc(cap);
    uint64_t rng = 1919;
    long runs = 0, loaded = 0;
    double t0 = now();
    static const char text[] = "Answer: A <|im_start|>caf\xc3\xa9 e\xcc\x81 \xe0\xb8\x81\xe0\xb9\x88 12345\n\n";
    while (now() - t0 < seconds) {
        size_t n = len;
        memcpy(buf, orig, len);
        int k = 1 + (int)(td_test_rand(&rng) % 4);
        for (int i = 0; i < k; i++) mutate(buf, &n, cap, 64000, &rng); /* the tokenizer.ggml.* arrays: ~64 KB */
        FILE *f = fopen(path, "wb");
        if (!f) break;
        if (n) fwrite(buf, 1, n, f);
        fclose(f);
        td_tokenizer *t = NULL, *back = NULL;
        if (td_tokenizer_load_gguf(path, td_test_rand(&rng) % 2 ? TD_TOKENIZER_NO_NFC : 0, &t) == TD_OK) {
            loaded++;
            char *json = NULL;
            CHECKF(td_tokenizer_to_json(t, &json) == TD_OK, "%s", td_last_error());
            if (json) CHECKF(td_tokenizer_load_bytes(json, strlen(json), "export", &back) == TD_OK, "%s", td_last_error());
            if (back) {
                size_t na, nb;
                int32_t *a = ids_of(t, text, &na), *b = ids_of(back, text, &nb);
                CHECKF(na == nb && (na == (size_t)-1 || memcmp(a, b, na * sizeof *a) == 0),
                       "a mutated GGUF's tokenizer and its export disagree");
                td_free(a);
                td_free(b);
            }
            td_free(json);
        } else {
            CHECK(td_last_error()[0] != 0);
        }
        td_tokenizer_free(t);
        td_tokenizer_free(back);
        runs++;
    }
    remove(path);
    printf("gguf tokenizer: %ld mutated files, %ld loaded (and exported, read back, same ids), none crashed\n", runs,
           loaded);
    free(buf);
    free(orig);
}

int main(void) {
    const char *s = getenv("TD_FUZZ_SECONDS");
    double seconds = s ? atof(s) : (td_test_sanitized() ? 4.0 : 8.0);
    fuzz_safetensors(seconds);
    fuzz_tokenizer(seconds);
    fuzz_gguf(seconds);
    fuzz_gguf_tokenizer(seconds);
    return td_test_finish("test_fuzz");
}
