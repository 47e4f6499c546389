/* Bad input gets a clear error that names what is wrong, never a crash: corrupted safetensors files, configs
 * that disagree with the weights, malformed JSON, bad tokenizer files. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test_util.h"
#include "typedecide.h"

static const char config[] =
    "{\"model_type\": \"qwen3\", \"vocab_size\": 300, \"hidden_size\": 32, \"num_hidden_layers\": 2,"
    " \"num_attention_heads\": 4, \"num_key_value_heads\": 2, \"head_dim\": 16, \"intermediate_size\": 64,"
    " \"max_position_embeddings\": 512, \"rms_norm_eps\": 1e-6, \"rope_theta\": 10000,"
    " \"tie_word_embeddings\": true}";

static char dir[64], st_path[128], cfg_path[128];
static unsigned char *good;
static size_t good_len;

static void write_bytes(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, n, f) != n) abort();
    fclose(f);
}

/* Loads the model dir and checks the failure: status and a substring of the message. */
static void expect_fail(const char *what, td_status want, const char *needle) {
    td_model *m = NULL;
    td_status st = td_model_load(dir, NULL, &m);
    CHECKF(st == want, "%s: status %s, want %s (%s)", what, td_status_str(st), td_status_str(want), td_last_error());
    CHECKF(m == NULL, "%s: model handle must be NULL on failure", what);
    CHECKF(strstr(td_last_error(), needle) != NULL, "%s: message \"%s\" lacks \"%s\"", what, td_last_error(), needle);
    td_model_free(m);
}

/* Rewrites the safetensors file with `edit` applied to its header JSON (data section unchanged). */
static void with_header(void (*edit)(json_t *)) {
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--) n = (n << 8) | good[i];
    json_t *h = json_loadb((const char *)good + 8, (size_t)n, 0, NULL);
    edit(h);
    char *text = json_dumps(h, JSON_COMPACT);
    size_t hl = strlen(text);
    size_t total = 8 + hl + (good_len - 8 - n);
    unsigned char *buf = malloc(total);
    for (int i = 0; i < 8; i++) buf[i] = (unsigned char)((uint64_t)hl >> (8 * i));
    memcpy(buf + 8, text, hl);
    memcpy(buf + 8 + hl, good + 8 + n, good_len - 8 - n);
    write_bytes(st_path, buf, total);
    free(buf);
    free(text);
    json_decref(h);
}

static const char *victim = "model.layers.1.mlp.up_proj.weight";

static void edit_dtype(json_t *h) { json_object_set_new(json_object_get(h, victim), "dtype", json_string("Q7_K")); }
static void edit_int_dtype(json_t *h) {
    json_t *t = json_object_get(h, victim);
    json_object_set_new(t, "dtype", json_string("I16")); /* same byte size, valid safetensors, not computable */
}
static void edit_missing(json_t *h) {
    json_t *t = json_incref(json_object_get(h, victim));
    json_object_del(h, victim);
    json_object_set_new(h, "model.layers.1.mlp.up_proj.weight_renamed", t);
}
static void edit_past_end(json_t *h) {
    json_t *o = json_object_get(json_object_get(h, victim), "data_offsets");
    json_array_set_new(o, 1, json_integer(json_integer_value(json_array_get(o, 1)) + 1000000));
    json_array_set_new(o, 0, json_integer(json_integer_value(json_array_get(o, 0)) + 1000000));
}
static void edit_overlap(json_t *h) {
    /* move the victim onto the bytes of the embedding */
    json_t *o = json_object_get(json_object_get(h, victim), "data_offsets");
    json_int_t len = json_integer_value(json_array_get(o, 1)) - json_integer_value(json_array_get(o, 0));
    json_array_set_new(o, 0, json_integer(64));
    json_array_set_new(o, 1, json_integer(64 + len));
}
static void edit_shape(json_t *h) {
    /* consistent with its byte count, but not with config.json */
    json_t *s = json_object_get(json_object_get(h, victim), "shape");
    json_int_t a = json_integer_value(json_array_get(s, 0)), b = json_integer_value(json_array_get(s, 1));
    json_array_set_new(s, 0, json_integer(b));
    json_array_set_new(s, 1, json_integer(a));
}
static void edit_size(json_t *h) {
    json_t *s = json_object_get(json_object_get(h, victim), "shape");
    json_array_set_new(s, 0, json_integer(json_integer_value(json_array_get(s, 0)) + 1));
}
static void edit_not_object(json_t *h) { json_object_set_new(h, victim, json_integer(3)); }

static void test_safetensors(void) {
    /* truncated at several points */
    size_t cuts[] = {0, 5, 9, 100, good_len / 2, good_len - 1};
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
        write_bytes(st_path, good, cuts[i]);
        td_model *m = NULL;
        td_status st = td_model_load(dir, NULL, &m);
        CHECKF(st == TD_ERR_FORMAT && m == NULL, "truncated at %zu: %s", cuts[i], td_last_error());
        CHECKF(strstr(td_last_error(), "model.safetensors") != NULL, "truncated: message names the file: %s",
               td_last_error());
    }
    /* header length past the end of the file */
    unsigned char *bad = malloc(good_len);
    memcpy(bad, good, good_len);
    bad[6] = 0x7f;
    write_bytes(st_path, bad, good_len);
    expect_fail("header length past end", TD_ERR_FORMAT, "runs past the end of the file");
    free(bad);

    with_header(edit_dtype);
    expect_fail("unknown dtype", TD_ERR_FORMAT, "unknown dtype \"Q7_K\"");
    with_header(edit_int_dtype);
    expect_fail("integer dtype", TD_ERR_UNSUPPORTED, "model.layers.1.mlp.up_proj.weight has dtype I16");
    with_header(edit_missing);
    expect_fail("missing tensor", TD_ERR_FORMAT, "missing tensor model.layers.1.mlp.up_proj.weight");
    with_header(edit_past_end);
    expect_fail("offsets past end", TD_ERR_FORMAT, "model.layers.1.mlp.up_proj.weight: data_offsets end");
    with_header(edit_overlap);
    expect_fail("overlap", TD_ERR_FORMAT, "overlap");
    with_header(edit_shape);
    expect_fail("shape vs config", TD_ERR_FORMAT, "model.layers.1.mlp.up_proj.weight has shape [32, 64] but config.json implies [64, 32]");
    with_header(edit_size);
    expect_fail("shape vs bytes", TD_ERR_FORMAT, "bytes of data but shape");
    with_header(edit_not_object);
    expect_fail("entry not an object", TD_ERR_FORMAT, "entry must be an object");
    write_bytes(st_path, good, good_len);
    td_model *m = NULL;
    CHECKF(td_model_load(dir, NULL, &m) == TD_OK, "restored file loads: %s", td_last_error());
    td_model_free(m);
}

static void test_config(void) {
    write_bytes(cfg_path, "{\"model_type\": \"qwen3\",\n  \"vocab_size\": 300,\n  \"hidden_size\": 32 32}", 64);
    expect_fail("malformed config", TD_ERR_FORMAT, "config.json:3:");
    write_bytes(cfg_path, "{\"model_type\": \"gpt2\"}", 22);
    expect_fail("unknown arch", TD_ERR_UNSUPPORTED, "model_type \"gpt2\" is not supported");
    const char *no_heads = "{\"model_type\": \"qwen3\", \"vocab_size\": 300, \"hidden_size\": 32, \"num_hidden_layers\": 2, \"intermediate_size\": 64}";
    write_bytes(cfg_path, no_heads, strlen(no_heads));
    expect_fail("missing field", TD_ERR_FORMAT, "missing field \"num_attention_heads\"");
    /* config says 3 layers, the file has 2 */
    char *more = strdup(config);
    char *p = strstr(more, "\"num_hidden_layers\": 2");
    p[21] = '3';
    write_bytes(cfg_path, more, strlen(more));
    expect_fail("layer count", TD_ERR_FORMAT, "missing tensor model.layers.2.");
    /* a head_dim that disagrees with the weights */
    strcpy(more, config);
    p = strstr(more, "\"head_dim\": 16");
    memcpy(p, "\"head_dim\": 18", 14);
    write_bytes(cfg_path, more, strlen(more));
    expect_fail("head_dim", TD_ERR_FORMAT, "q_proj.weight has shape");
    const char *rope = "{\"model_type\": \"qwen3\", \"vocab_size\": 300, \"hidden_size\": 32, \"num_hidden_layers\": 2, \"num_attention_heads\": 4, \"intermediate_size\": 64, \"rope_scaling\": {\"rope_type\": \"yarn\", \"factor\": 4}}";
    write_bytes(cfg_path, rope, strlen(rope));
    expect_fail("rope scaling", TD_ERR_UNSUPPORTED, "rope_type \"yarn\"");
    write_bytes(cfg_path, config, strlen(config));
    free(more);
}

static void test_tokenizer_json(void) {
    static const struct {
        const char *json, *needle;
        td_status st;
    } cases[] = {
        {"{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []},\n \"added_tokens\": [ }", "bad:2:", TD_ERR_FORMAT},
        {"{\"model\": {\"type\": \"WordPiece\", \"vocab\": {}}, \"pre_tokenizer\": {\"type\": \"ByteLevel\"}}",
         "model type \"WordPiece\"", TD_ERR_UNSUPPORTED},
        {"{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []}, \"pre_tokenizer\": {\"type\": \"ByteLevel\"}}",
         "no token for byte 0x00", TD_ERR_FORMAT},
        {"{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": -3}}, \"pre_tokenizer\": {\"type\": \"ByteLevel\"}}",
         "model.vocab[\"a\"] must be an id", TD_ERR_FORMAT},
        {"{\"normalizer\": {\"type\": \"Lowercase\"}, \"model\": {\"type\": \"BPE\", \"vocab\": {}}}", "normalizer type \"Lowercase\"",
         TD_ERR_UNSUPPORTED},
        {"{\"pre_tokenizer\": {\"type\": \"Split\", \"pattern\": {\"Regex\": \"(unclosed\"}}, \"model\": {}}",
         "regex does not compile", TD_ERR_UNSUPPORTED},
        {"[1, 2]", "top level must be an object", TD_ERR_FORMAT},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        td_tokenizer *t = NULL;
        td_status st = td_tokenizer_load_bytes(cases[i].json, strlen(cases[i].json), "bad", &t);
        CHECKF(st == cases[i].st && t == NULL, "tokenizer case %zu: %s: %s", i, td_status_str(st), td_last_error());
        CHECKF(strstr(td_last_error(), cases[i].needle) != NULL, "tokenizer case %zu: \"%s\" lacks \"%s\"", i,
               td_last_error(), cases[i].needle);
    }
    /* a merge whose result is not in the vocabulary: build a byte-complete vocab first */
    json_t *root = json_object(), *model = json_object(), *vocab = json_object(), *merges = json_array();
    for (int b = 0; b < 256; b++) {
        unsigned cp = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174 ? (unsigned)b : 0;
        char s[8];
        if (!cp) { /* the 68 remapped bytes */
            int n = 0;
            for (int k = 0; k < b; k++) n += !((k >= 33 && k <= 126) || (k >= 161 && k <= 172) || k >= 174);
            cp = 256u + (unsigned)n;
        }
        if (cp < 0x80) s[0] = (char)cp, s[1] = 0;
        else s[0] = (char)(0xc0 | (cp >> 6)), s[1] = (char)(0x80 | (cp & 0x3f)), s[2] = 0;
        json_object_set_new(vocab, s, json_integer(b));
    }
    json_array_append_new(merges, json_string("a b"));
    json_object_set_new(model, "type", json_string("BPE"));
    json_object_set_new(model, "vocab", vocab);
    json_object_set_new(model, "merges", merges);
    json_object_set_new(root, "model", model);
    json_t *pre = json_object();
    json_object_set_new(pre, "type", json_string("ByteLevel"));
    json_object_set_new(root, "pre_tokenizer", pre);
    char *text = json_dumps(root, 0);
    td_tokenizer *t = NULL;
    CHECK(td_tokenizer_load_bytes(text, strlen(text), "bad", &t) == TD_ERR_FORMAT);
    CHECKF(strstr(td_last_error(), "merges[0]: the merged token \"ab\" is not in the vocabulary") != NULL, "%s",
           td_last_error());
    free(text);
    json_array_set_new(merges, 0, json_string("a  b"));
    text = json_dumps(root, 0);
    CHECK(td_tokenizer_load_bytes(text, strlen(text), "bad", &t) == TD_ERR_FORMAT);
    CHECKF(strstr(td_last_error(), "merges[0]") != NULL, "%s", td_last_error());
    free(text);
    /* byte-complete and merge-free: loads, and encodes every byte */
    json_array_clear(merges);
    text = json_dumps(root, 0);
    CHECKF(td_tokenizer_load_bytes(text, strlen(text), "ok", &t) == TD_OK, "%s", td_last_error());
    int32_t *ids;
    size_t n;
    CHECK(td_tokenize(t, "ab\xc3\xa9", 4, 0, &ids, &n) == TD_OK && n == 4);
    td_free(ids);
    CHECK(td_tokenize(t, "a\xff", 2, 0, &ids, &n) == TD_ERR_FORMAT); /* invalid UTF-8 is named */
    CHECKF(strstr(td_last_error(), "byte offset 1") != NULL, "%s", td_last_error());
    td_tokenizer_free(t);
    free(text);
    json_decref(root);
}

/* A tokenizer with ids past the model's vocab_size (300): an added token there loads (Gemma 3 1B's <image_soft_token>
 * is id 262144 of 262144 rows), a vocabulary token there is refused, naming it. */
static void test_vocab_past_embedding(void) {
    write_bytes(cfg_path, config, strlen(config));
    write_bytes(st_path, good, good_len);
    char tok_path[160];
    snprintf(tok_path, sizeof tok_path, "%s/tokenizer.json", dir);
    json_t *root = json_object(), *model = json_object(), *vocab = json_object(), *added = json_array();
    for (int b = 0; b < 256; b++) { /* the byte-level alphabet: printable bytes as themselves, the rest 256 + k */
        unsigned cp = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174 ? (unsigned)b : 0;
        char s[8];
        if (!cp) {
            int n = 0;
            for (int k = 0; k < b; k++) n += !((k >= 33 && k <= 126) || (k >= 161 && k <= 172) || k >= 174);
            cp = 256u + (unsigned)n;
        }
        if (cp < 0x80) s[0] = (char)cp, s[1] = 0;
        else s[0] = (char)(0xc0 | (cp >> 6)), s[1] = (char)(0x80 | (cp & 0x3f)), s[2] = 0;
        json_object_set_new(vocab, s, json_integer(b));
    }
    json_t *a = json_pack("{s:i, s:s, s:b, s:b, s:b, s:b, s:b}", "id", 300, "content", "<extra>", "single_word", 0,
                          "lstrip", 0, "rstrip", 0, "normalized", 0, "special", 1);
    json_array_append_new(added, a);
    json_object_set_new(model, "type", json_string("BPE"));
    json_object_set_new(model, "vocab", vocab);
    json_object_set_new(model, "merges", json_array());
    json_object_set_new(root, "model", model);
    json_object_set_new(root, "added_tokens", added);
    json_object_set_new(root, "pre_tokenizer", json_pack("{s:s}", "type", "ByteLevel"));
    CHECK(json_dump_file(root, tok_path, 0) == 0);
    td_model *m = NULL;
    CHECKF(td_model_load(dir, NULL, &m) == TD_OK, "an added token past vocab_size: %s", td_last_error());
    td_model_free(m);
    json_object_set_new(vocab, "ab", json_integer(301));
    CHECK(json_dump_file(root, tok_path, 0) == 0);
    expect_fail("a vocabulary token past vocab_size", TD_ERR_FORMAT, "id 301 is a vocabulary token");
    json_decref(root);
    unlink(tok_path);
}

int main(void) {
    snprintf(dir, sizeof dir, "/tmp/td_test_bad_XXXXXX");
    if (!mkdtemp(dir)) return 1;
    snprintf(st_path, sizeof st_path, "%s/model.safetensors", dir);
    snprintf(cfg_path, sizeof cfg_path, "%s/config.json", dir);
    td_synth_params sp = td_synth_default_params();
    sp.seed = 1;
    CHECK(td_synth_write(dir, config, &sp) == TD_OK);
    good = td_test_read(st_path, &good_len);
    CHECK(good != NULL);
    if (good) {
        test_safetensors();
        test_config();
        test_vocab_past_embedding();
    }
    test_tokenizer_json();
    free(good);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    return td_test_finish("test_bad_inputs");
}
