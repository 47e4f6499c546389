/* Tokenizers from GGUF metadata alone (td_tokenizer_load_gguf) and back out as tokenizer.json
 * (td_tokenizer_to_json):
 *  - a vocabulary-only GGUF of another architecture ("qwen2", no tensors) with every token type llama.cpp's
 *    converter writes loads and encodes; TD_TOKENIZER_NO_NFC leaves out NFC and nothing else; the export reads back
 *    (td_tokenizer_load_bytes) to the same ids and is a fixed point; the flags and the normalizer are written;
 *  - every way such a file can be wrong is a status and a message naming the file and the key (and td_model_load
 *    of it says it holds a tokenizer but no model);
 *  - the GGUF fixture converted by llama.cpp from a Qwen3.5 checkpoint gives the ids of that checkpoint's
 *    tokenizer.json on the Hugging Face reference strings; so does its export. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "model/gguf.h"
#include "test_util.h"
#include "typedecide.h"

static char dir[64];

/* The byte-level alphabet: byte b's character as UTF-8 (bytes 33-126, 161-172, 174-255 stand for themselves, the
 * other 68 map in order to U+0100 onwards). */
static void byte_char(int b, char *out) {
    int cp = b;
    if (!((b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174)) {
        cp = 256;
        for (int x = 0; x < b; x++) cp += !((x >= 33 && x <= 126) || (x >= 161 && x <= 172) || x >= 174);
    }
    if (cp < 0x80) out[0] = (char)cp, out[1] = 0;
    else out[0] = (char)(0xc0 | (cp >> 6)), out[1] = (char)(0x80 | (cp & 0x3f)), out[2] = 0;
}

/* What to break in the file. */
typedef struct spec {
    const char *model, *pre; /* NULL: key left out */
    int no_tokens, no_merges, types_short, dup_string, drop_byte;
    int bad_type;       /* nonzero: token 5's type */
    const char *merge0; /* replaces the first merge */
} spec;

enum { N_TOK = 263 };

/* 256 byte tokens; merged "Ġt" 256, "he" 257, "Ġthe" 258, "é" (as bytes c3 a9) 259; <|im_end|> 260 (CONTROL),
 * <think> 261 (USER_DEFINED), [PAD262] (UNUSED). */
static const char *write_vocab(const char *file, spec sp) {
    static char path[128];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    static char strs[N_TOK][16];
    const char *s[N_TOK];
    size_t l[N_TOK];
    int32_t types[N_TOK];
    char g[4], c3[4], a9[4];
    byte_char(' ', g), byte_char(0xc3, c3), byte_char(0xa9, a9);
    for (int b = 0; b < 256; b++) byte_char(b, strs[b]), types[b] = 1;
    snprintf(strs[256], 16, "%st", g);
    snprintf(strs[257], 16, "he");
    snprintf(strs[258], 16, "%sthe", g);
    snprintf(strs[259], 16, "%s%s", c3, a9);
    snprintf(strs[260], 16, "<|im_end|>");
    snprintf(strs[261], 16, "<think>");
    snprintf(strs[262], 16, "[PAD262]");
    for (int i = 256; i < 260; i++) types[i] = 1;
    types[260] = 3, types[261] = 4, types[262] = 5;
    if (sp.dup_string) snprintf(strs[257], 16, "%s", strs[256]);
    if (sp.drop_byte) types['A'] = 5;
    if (sp.bad_type) types[5] = sp.bad_type;
    for (int i = 0; i < N_TOK; i++) s[i] = strs[i], l[i] = strlen(strs[i]);
    char m0[16], m2[16], m3[16];
    snprintf(m0, sizeof m0, "%s t", g);
    snprintf(m2, sizeof m2, "%st he", g);
    snprintf(m3, sizeof m3, "%s %s", c3, a9);
    const char *merges[4] = {sp.merge0 ? sp.merge0 : m0, "h e", m2, m3};
    size_t ml[4];
    for (int i = 0; i < 4; i++) ml[i] = strlen(merges[i]);
    td_gguf_writer *w = NULL;
    CHECK(td_gguf_writer_new(&w) == TD_OK);
    td_status st = td_gguf_add_str(w, "general.architecture", "qwen2", 5);
    if (st == TD_OK && sp.model) st = td_gguf_add_str(w, "tokenizer.ggml.model", sp.model, strlen(sp.model));
    if (st == TD_OK && sp.pre) st = td_gguf_add_str(w, "tokenizer.ggml.pre", sp.pre, strlen(sp.pre));
    if (st == TD_OK && !sp.no_tokens) st = td_gguf_add_str_array(w, "tokenizer.ggml.tokens", s, l, N_TOK);
    if (st == TD_OK) st = td_gguf_add_i32_array(w, "tokenizer.ggml.token_type", types, N_TOK - (sp.types_short != 0));
    if (st == TD_OK && !sp.no_merges) st = td_gguf_add_str_array(w, "tokenizer.ggml.merges", merges, ml, 4);
    if (st == TD_OK) st = td_gguf_write(w, path);
    CHECKF(st == TD_OK, "%s", td_last_error());
    td_gguf_writer_free(w);
    return path;
}

static spec good(void) { return (spec){.model = "gpt2", .pre = "qwen35"}; }

/* ids of text, or {-1} on failure; returns the count */
static size_t ids_of(const td_tokenizer *t, const char *text, int32_t *out, size_t cap) {
    int32_t *ids;
    size_t n;
    if (td_tokenize(t, text, strlen(text), TD_TOKENIZE_PARSE_SPECIAL, &ids, &n) != TD_OK) {
        out[0] = -1;
        return 1;
    }
    for (size_t i = 0; i < n && i < cap; i++) out[i] = ids[i];
    td_free(ids);
    return n;
}

static int same_ids(const td_tokenizer *a, const td_tokenizer *b, const char *text) {
    int32_t x[64], y[64];
    size_t nx = ids_of(a, text, x, 64), ny = ids_of(b, text, y, 64);
    return nx == ny && memcmp(x, y, nx * sizeof *x) == 0;
}

static void test_vocab_only(void) {
    const char *path = write_vocab("ok.gguf", good());
    td_tokenizer *t = NULL, *raw = NULL, *back = NULL;
    CHECKF(td_tokenizer_load_gguf(path, 0, &t) == TD_OK, "%s", td_last_error());
    CHECKF(td_tokenizer_load_gguf(path, TD_TOKENIZER_NO_NFC, &raw) == TD_OK, "%s", td_last_error());
    if (!t || !raw) return;
    int32_t ids[16];
    size_t n = ids_of(t, "<think> the<|im_end|>", ids, 16);
    CHECKF(n == 3 && ids[0] == 261 && ids[1] == 258 && ids[2] == 260, "n %zu: %d %d %d", n, ids[0], ids[1], ids[2]);
    CHECK(td_tokenizer_n_tokens(t) == 262); /* the UNUSED row at the end is no token */
    CHECK(td_token_lookup(t, "<think>") == 261 && td_token_lookup(t, "[PAD262]") == -1);
    size_t bl;
    const char *b = td_token_bytes(t, 260, &bl);
    CHECK(b && bl == 10 && memcmp(b, "<|im_end|>", 10) == 0);
    /* e + U+0301: NFC makes it "é", one token; without NFC it stays three byte tokens */
    n = ids_of(t, "e\xcc\x81", ids, 16);
    CHECKF(n == 1 && ids[0] == 259, "NFC: %zu ids, first %d", n, ids[0]);
    n = ids_of(raw, "e\xcc\x81", ids, 16);
    CHECKF(n == 3 && ids[0] == 'e', "no NFC: %zu ids", n);
    CHECK(same_ids(t, raw, "<think> the<|im_end|> \xc3\xa9t\xc3\xa9"));

    const td_tokenizer *pair[2] = {t, raw};
    for (int k = 0; k < 2; k++) {
        char *json = NULL, *again = NULL;
        CHECKF(td_tokenizer_to_json(pair[k], &json) == TD_OK, "%s", td_last_error());
        if (!json) continue;
        CHECK(strstr(json, k ? "\"normalizer\": null" : "\"normalizer\": {\n    \"type\": \"NFC\"\n  }") != NULL);
        CHECK(strstr(json, "\"content\": \"<|im_end|>\",\n      \"single_word\": false,\n      \"lstrip\": false,\n"
                           "      \"rstrip\": false,\n      \"normalized\": false,\n      \"special\": true") != NULL);
        CHECK(strstr(json, "\"content\": \"<think>\",") != NULL && strstr(json, "PAD262") == NULL);
        CHECK(strstr(json, "\\\\p{M}") != NULL && json[strlen(json) - 1] == '}');
        CHECKF(td_tokenizer_load_bytes(json, strlen(json), "export", &back) == TD_OK, "%s", td_last_error());
        if (back) {
            const char *texts[] = {"<think> the<|im_end|>", "e\xcc\x81 the theme", "\xc3\xa9\xc3\xa9 t h e\n\n", ""};
            for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++)
                CHECKF(same_ids(pair[k], back, texts[i]), "export %d: text %zu", k, i);
            CHECK(td_tokenizer_to_json(back, &again) == TD_OK && again && strcmp(again, json) == 0);
        }
        td_free(json);
        td_free(again);
        td_tokenizer_free(back);
        back = NULL;
    }
    td_tokenizer_free(t);
    td_tokenizer_free(raw);
}

static void test_errors(void) {
    static const struct {
        const char *name;
        spec sp;
        td_status st;
        const char *needle;
    } cases[] = {
        {"nomodel.gguf", {.pre = "qwen35"}, TD_ERR_FORMAT, "no tokenizer.ggml.model"},
        {"llama.gguf", {.model = "llama", .pre = "qwen35"}, TD_ERR_UNSUPPORTED, "adds a space prefix"},
        {"bert.gguf", {.model = "bert", .pre = "qwen35"}, TD_ERR_UNSUPPORTED, "tokenizer.ggml.model \"bert\" is not supported"},
        {"nopre.gguf", {.model = "gpt2"}, TD_ERR_FORMAT, "no tokenizer.ggml.pre"},
        {"pre.gguf", {.model = "gpt2", .pre = "deepseek-llm"}, TD_ERR_UNSUPPORTED,
         "tokenizer.ggml.pre \"deepseek-llm\" is not a pre-tokenizer this library knows (qwen2, qwen35, llama-bpe)"},
        {"notokens.gguf", {.model = "gpt2", .pre = "qwen2", .no_tokens = 1}, TD_ERR_FORMAT, "missing metadata tokenizer.ggml.tokens"},
        {"short.gguf", {.model = "gpt2", .pre = "qwen2", .types_short = 1}, TD_ERR_FORMAT, "tokenizer.ggml.token_type must be"},
        {"type6.gguf", {.model = "gpt2", .pre = "qwen2", .bad_type = 6}, TD_ERR_UNSUPPORTED, "tokenizer.ggml.token_type[5] is 6"},
        {"nomerges.gguf", {.model = "gpt2", .pre = "qwen2", .no_merges = 1}, TD_ERR_FORMAT, "missing metadata tokenizer.ggml.merges"},
        {"merge.gguf", {.model = "gpt2", .pre = "qwen2", .merge0 = "ab"}, TD_ERR_FORMAT,
         "tokenizer.ggml.merges[0] \"ab\" is not two tokens separated by one space"},
        {"merge2.gguf", {.model = "gpt2", .pre = "qwen2", .merge0 = "q zz"}, TD_ERR_FORMAT,
         "tokenizer.ggml.merges[0]: \"q\" or \"zz\" is not in the vocabulary"},
        {"dup.gguf", {.model = "gpt2", .pre = "qwen2", .dup_string = 1}, TD_ERR_FORMAT,
         "tokenizer.ggml.tokens: ids 256 and 257 have the same string"},
        {"byte.gguf", {.model = "gpt2", .pre = "qwen2", .drop_byte = 1}, TD_ERR_FORMAT, "has no token for byte 0x41"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *path = write_vocab(cases[i].name, cases[i].sp);
        td_tokenizer *t = (td_tokenizer *)1;
        td_status st = td_tokenizer_load_gguf(path, 0, &t);
        CHECKF(st == cases[i].st && t == NULL, "%s: %s: %s", cases[i].name, td_status_str(st), td_last_error());
        CHECKF(strstr(td_last_error(), cases[i].needle) && strstr(td_last_error(), path), "%s: \"%s\" lacks \"%s\"",
               cases[i].name, td_last_error(), cases[i].needle);
    }
    /* not a GGUF; a GGUF handed to the tokenizer.json loader; arguments */
    td_tokenizer *t = NULL;
    const char *json_path = td_test_path("fixtures/tokenizers/qwen3-trunc2048/tokenizer.json");
    CHECK(td_tokenizer_load_gguf(json_path, 0, &t) == TD_ERR_FORMAT && strstr(td_last_error(), "not a GGUF file"));
    CHECK(td_tokenizer_load(write_vocab("ok.gguf", good()), &t) == TD_ERR_FORMAT &&
          strstr(td_last_error(), "load it with td_tokenizer_load_gguf"));
    td_model *m = NULL; /* a vocabulary-only file is no model, and the message says what it is */
    CHECK(td_model_load(write_vocab("ok.gguf", good()), NULL, &m) == TD_ERR_FORMAT && m == NULL &&
          strstr(td_last_error(), "vocabulary-only GGUF file holds a tokenizer"));
    CHECK(td_tokenizer_load_gguf(NULL, 0, &t) == TD_ERR_INVALID_ARG);
    CHECK(td_tokenizer_load_gguf(write_vocab("ok.gguf", good()), 2, &t) == TD_ERR_INVALID_ARG && t == NULL);
    CHECK(td_tokenizer_load_gguf("/nonexistent/x.gguf", 0, &t) == TD_ERR_IO);
    char *json = (char *)1;
    CHECK(td_tokenizer_to_json(NULL, &json) == TD_ERR_INVALID_ARG && json == NULL);
}

/* fixtures/gguf/qwen35-tiny-vl-bf16.gguf is llama.cpp's conversion of fixtures/models/qwen35-tiny-vl (tokenizer:
 * the 2,048-token Qwen3.5 cut): its tokenizer alone, and its export, give that tokenizer.json's ids on the
 * Hugging Face reference strings. */
static void test_converted_fixture(void) {
    td_tokenizer *g = NULL, *h = NULL, *e = NULL;
    CHECKF(td_tokenizer_load_gguf(td_test_path("fixtures/gguf/qwen35-tiny-vl-bf16.gguf"), 0, &g) == TD_OK, "%s",
           td_last_error());
    CHECKF(td_tokenizer_load(td_test_path("fixtures/models/qwen35-tiny-vl/tokenizer.json"), &h) == TD_OK, "%s",
           td_last_error());
    char *json = NULL;
    if (g) CHECK(td_tokenizer_to_json(g, &json) == TD_OK);
    if (json) CHECKF(td_tokenizer_load_bytes(json, strlen(json), "export", &e) == TD_OK, "%s", td_last_error());
    td_free(json);
    FILE *f = fopen(td_test_path("fixtures/tokenizers/qwen35-trunc2048/ref_ids.jsonl"), "r");
    CHECK(f != NULL);
    char line[8192];
    int n = 0, same = 0;
    while (g && h && e && f && fgets(line, sizeof line, f)) {
        json_error_t err;
        json_t *o = json_loads(line, 0, &err), *ids = json_object_get(o, "ids");
        const char *text = json_string_value(json_object_get(o, "text"));
        int32_t got[512];
        size_t k = text ? ids_of(g, text, got, 512) : 0;
        int ok = text && k == json_array_size(ids) && same_ids(g, h, text) && same_ids(g, e, text);
        for (size_t i = 0; ok && i < k; i++) ok = got[i] == json_integer_value(json_array_get(ids, i));
        CHECKF(ok, "reference line %d: %s", n + 1, text ? text : "?");
        same += ok, n++;
        json_decref(o);
    }
    if (f) fclose(f);
    printf("qwen35-tiny-vl-bf16.gguf: %d/%d reference lines give Hugging Face's ids, from the GGUF and its export\n",
           same, n);
    CHECK(n >= 40);
    td_tokenizer_free(g);
    td_tokenizer_free(h);
    td_tokenizer_free(e);
}

int main(void) {
    snprintf(dir, sizeof dir, "/tmp/td_tok_gguf_XXXXXX");
    if (!mkdtemp(dir)) return 1;
    test_vocab_only();
    test_errors();
    test_converted_fixture();
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    CHECK(system(cmd) == 0);
    return td_test_finish("test_tokenizer_gguf");
}
