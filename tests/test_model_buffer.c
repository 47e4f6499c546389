/* td_model_load_buffer: a GGUF image in memory loads as the same file does from disk (the same logits bit for bit,
 * tokenizer ids, chat template, stop ids), both taken (td_model_buffer_new, freed with the model) and borrowed
 * (left alone, never written); bad buffers are refused with a message naming what is wrong, and a taken buffer is
 * released on every failure (the sanitizer build sees a leak or a double free). */
#include <stdlib.h>
#include <string.h>

#include "test_util.h"
#include "typedecide.h"

/* The logits of one 5-token pass (all rows), as a new array of 5 x n_vocab floats. */
static float *logits_of(const td_model *m) {
    td_ctx_params cp = td_ctx_default_params();
    cp.n_ctx = 16;
    cp.n_batch = 8;
    cp.n_outputs_max = 5;
    td_ctx *ctx = NULL;
    td_batch *b = NULL;
    int32_t nv = td_model_n_vocab(m);
    float *out = malloc((size_t)5 * (size_t)nv * sizeof *out);
    if (!out || td_ctx_new(m, &cp, &ctx) != TD_OK || td_batch_new(8, &b) != TD_OK) goto fail;
    for (int i = 0; i < 5; i++)
        if (td_batch_add(b, (int32_t)((i * 7919 + 11) % nv), 0, i, 1) != TD_OK) goto fail;
    if (td_ctx_decode(ctx, b) != TD_OK) goto fail;
    for (int i = 0; i < 5; i++) {
        const float *o = td_ctx_output(ctx, i);
        if (!o) goto fail;
        memcpy(out + (size_t)i * (size_t)nv, o, (size_t)nv * sizeof *o);
    }
    td_batch_free(b);
    td_ctx_free(ctx);
    return out;
fail:
    fprintf(stderr, "decode: %s\n", td_last_error());
    td_batch_free(b);
    td_ctx_free(ctx);
    free(out);
    return NULL;
}

static void same_model(const char *what, const td_model *a, const td_model *b) {
    CHECKF(td_model_n_vocab(a) == td_model_n_vocab(b) && td_model_n_params(a) == td_model_n_params(b),
           "%s: another shape", what);
    CHECKF(strcmp(td_model_arch(a), td_model_arch(b)) == 0, "%s: arch %s vs %s", what, td_model_arch(a),
           td_model_arch(b));
    const char *ta = td_model_chat_template(a, NULL), *tb = td_model_chat_template(b, NULL);
    CHECKF((!ta && !tb) || (ta && tb && strcmp(ta, tb) == 0), "%s: another chat template", what);
    int na = 0, nb = 0;
    const int32_t *sa = td_model_stop_ids(a, &na), *sb = td_model_stop_ids(b, &nb);
    CHECKF(na == nb && (!na || memcmp(sa, sb, (size_t)na * sizeof *sa) == 0), "%s: other stop ids", what);
    const td_tokenizer *ka = td_model_tokenizer(a), *kb = td_model_tokenizer(b);
    CHECKF(!ka == !kb, "%s: one has a tokenizer, the other not", what);
    if (ka && kb) {
        const char *text = "<|im_start|>user\nThe parcel arrived broken, héllo 123!<|im_end|>";
        int32_t *ia = NULL, *ib = NULL;
        size_t la = 0, lb = 0;
        CHECK(td_tokenize(ka, text, strlen(text), TD_TOKENIZE_PARSE_SPECIAL, &ia, &la) == TD_OK);
        CHECK(td_tokenize(kb, text, strlen(text), TD_TOKENIZE_PARSE_SPECIAL, &ib, &lb) == TD_OK);
        CHECKF(la == lb && la && memcmp(ia, ib, la * sizeof *ia) == 0, "%s: other token ids", what);
        td_free(ia), td_free(ib);
    }
    float *la = logits_of(a), *lb = logits_of(b);
    CHECKF(la && lb && memcmp(la, lb, (size_t)5 * (size_t)td_model_n_vocab(a) * sizeof *la) == 0,
           "%s: the logits differ from the file's", what);
    free(la), free(lb);
}

static void expect_refused(const char *what, void *data, size_t size, unsigned flags, td_status want,
                           const char *needle) {
    td_model *m = (td_model *)&m; /* must be reset to NULL */
    td_status st = td_model_load_buffer(data, size, "x.gguf", flags, NULL, &m);
    CHECKF(st == want, "%s: status %s, want %s (%s)", what, td_status_str(st), td_status_str(want), td_last_error());
    CHECKF(m == NULL, "%s: *out not NULL on failure", what);
    CHECKF(strstr(td_last_error(), needle) != NULL, "%s: \"%s\" lacks \"%s\"", what, td_last_error(), needle);
}

static void *copy_taken(const void *p, size_t n) {
    void *b = td_model_buffer_new(n);
    if (b) memcpy(b, p, n);
    return b;
}

int main(void) {
    static const char *files[] = {"fixtures/gguf/qwen3-tiny-tied-q8_0.gguf", "fixtures/gguf/qwen3-tiny-untied-bf16.gguf",
                                  "fixtures/gguf/qwen3-tiny-tied-f32.gguf", "fixtures/gguf/qwen25-tiny-bf16.gguf",
                                  "fixtures/gguf/llama3-tiny-bf16.gguf", "fixtures/gguf/gemma3-tiny-bf16.gguf",
                                  "fixtures/gguf/qwen35-tiny-vl-bf16.gguf"};
    size_t n_checked = 0;
    for (size_t f = 0; f < sizeof files / sizeof *files; f++) {
        const char *path = td_test_path(files[f]);
        size_t n = 0;
        uint8_t *bytes = td_test_read(path, &n);
        CHECKF(bytes != NULL, "%s missing", files[f]);
        if (!bytes) continue;
        td_model *disk = NULL, *taken = NULL, *borrowed = NULL;
        CHECKF(td_model_load(path, NULL, &disk) == TD_OK, "%s: %s", files[f], td_last_error());
        void *buf = copy_taken(bytes, n);
        CHECK(buf != NULL);
        CHECKF(td_model_load_buffer(buf, n, files[f], TD_MODEL_BUFFER_TAKE, NULL, &taken) == TD_OK, "%s taken: %s",
               files[f], td_last_error());
        uint8_t *mine = malloc(n);
        memcpy(mine, bytes, n);
        CHECKF(td_model_load_buffer(mine, n, NULL, 0, NULL, &borrowed) == TD_OK, "%s borrowed: %s", files[f],
               td_last_error());
        if (disk && taken && borrowed) {
            CHECKF(strcmp(td_model_path(taken), files[f]) == 0, "the name is the path: %s", td_model_path(taken));
            CHECKF(strcmp(td_model_path(borrowed), "<buffer>") == 0, "no name: %s", td_model_path(borrowed));
            same_model(files[f], disk, taken);
            same_model(files[f], disk, borrowed);
            n_checked++;
        }
        td_model_free(taken);
        td_model_free(borrowed);
        CHECKF(memcmp(mine, bytes, n) == 0, "%s: the borrowed buffer was written to", files[f]);
        free(mine); /* after the model: borrowed, so only now */
        /* a truncated image, taken: refused naming the name, and the buffer freed (ASan: no leak) */
        void *half = copy_taken(bytes, n / 2);
        expect_refused("a truncated GGUF", half, n / 2, TD_MODEL_BUFFER_TAKE, TD_ERR_FORMAT, "x.gguf");
        td_model_free(disk);
        free(bytes);
    }
    CHECKF(n_checked == sizeof files / sizeof *files, "%zu of %zu files compared", n_checked,
           sizeof files / sizeof *files);

    /* a Hugging Face config.json is not a GGUF image */
    size_t cn = 0;
    char *cfg = td_test_read(td_test_path("models/demo-qwen3/config.json"), &cn);
    CHECK(cfg != NULL);
    if (cfg) expect_refused("config.json", copy_taken(cfg, cn), cn, TD_MODEL_BUFFER_TAKE, TD_ERR_FORMAT,
                            "not a GGUF image (bad magic)");
    if (cfg) expect_refused("config.json borrowed", cfg, cn, 0, TD_ERR_FORMAT, "bad magic");
    free(cfg);
    static uint8_t few[3] = {'G', 'G', 'U'};
    expect_refused("3 bytes", few, sizeof few, 0, TD_ERR_FORMAT, "bad magic");
    expect_refused("NULL data", NULL, 10, 0, TD_ERR_INVALID_ARG, "NULL data");
    expect_refused("size 0", few, 0, 0, TD_ERR_INVALID_ARG, "size 0");
    expect_refused("an unknown flag", copy_taken(few, 3), 3, TD_MODEL_BUFFER_TAKE | 8u, TD_ERR_INVALID_ARG,
                   "unknown flags");
    CHECK(td_model_load_buffer(few, 3, NULL, 0, NULL, NULL) == TD_ERR_INVALID_ARG);
    CHECK(td_model_buffer_new(0) == NULL);
    void *b = td_model_buffer_new(100);
    CHECK(b != NULL && ((uintptr_t)b & 63) == 0);
    td_free(b);
    return td_test_finish("test_model_buffer");
}
