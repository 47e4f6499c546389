/* Tokenizer pieces that the real-tokenizer parity test does not reach on its own:
 *  - Hugging Face's five Split behaviours, on the example of its documentation ("the-final--countdown");
 *  - ByteLevel with its own GPT-2 regex and add_prefix_space (the space goes in front of the text, then the split);
 *  - the truncated Qwen3 and Qwen3.5 tokenizers (different Split regexes; Qwen3.5 adds \p{M}) against the ids the
 *    Hugging Face `tokenizers` library gave on the GPU machine (fixtures/tokenizers/<name>/ref_ids.jsonl);
 *  - decoding a cut UTF-8 sequence gives one U+FFFD per maximal invalid subpart, as Rust's from_utf8_lossy;
 *  - merges written as "a b" strings (older tokenizer.json files) give the same ids as ["a", "b"] pairs;
 *  - td_tokenizer_to_json: the fixtures and every pre-tokenizer form above written out and read back give the same
 *    pieces and ids, and writing again gives the same text. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "test_util.h"
#include "tokenizer/recent_unicode.h"
#include "tokenizer/tokenizer_internal.h"
#include "typedecide.h"

/* A byte-level tokenizer with no merges and the given pre_tokenizer JSON. */
static td_tokenizer *byte_tokenizer(const char *pre_tokenizer) {
    json_t *vocab = json_object();
    for (int b = 0; b < 256; b++) {
        char s[4] = {0};
        td_utf8_put(td_byte_to_cp((uint8_t)b), s);
        json_object_set_new(vocab, s, json_integer(b));
    }
    json_error_t e;
    json_t *pre = json_loads(pre_tokenizer, 0, &e), *model = json_object(), *root = json_object();
    json_object_set_new(model, "type", json_string("BPE"));
    json_object_set_new(model, "vocab", vocab);
    json_object_set_new(model, "merges", json_array());
    json_object_set_new(root, "model", model);
    json_object_set_new(root, "pre_tokenizer", pre);
    char *text = json_dumps(root, 0);
    td_tokenizer *t = NULL;
    CHECKF(td_tokenizer_load_bytes(text, strlen(text), "test", &t) == TD_OK, "%s", td_last_error());
    free(text);
    json_decref(root);
    return t;
}

/* t written as tokenizer.json and read back (NULL on failure); *json receives the text unless json is NULL. */
static td_tokenizer *exported(const td_tokenizer *t, char **json) {
    char *text = NULL;
    td_tokenizer *back = NULL;
    CHECKF(td_tokenizer_to_json(t, &text) == TD_OK, "%s", td_last_error());
    if (text) CHECKF(td_tokenizer_load_bytes(text, strlen(text), "export", &back) == TD_OK, "%s", td_last_error());
    if (json) *json = text;
    else td_free(text);
    return back;
}

/* Pre-tokens of text joined with '|' */
static void pieces(const td_tokenizer *t, const char *text, char *out, size_t n) {
    td_pieces pc;
    out[0] = 0;
    if (td_pretokenize(t, text, strlen(text), &pc) != TD_OK) return;
    size_t o = 0;
    for (size_t i = 0; i < pc.n && o < n; i++)
        o += (size_t)snprintf(out + o, n - o, "%s%.*s", i ? "|" : "", (int)pc.len[i], pc.text + pc.start[i]);
    td_pieces_free(&pc);
}

static void test_split_behaviours(void) {
    static const struct {
        const char *behavior, *want;
    } cases[] = {{"Removed", "the|final|countdown"},
                 {"Isolated", "the|-|final|-|-|countdown"},
                 {"MergedWithPrevious", "the-|final-|-|countdown"},
                 {"MergedWithNext", "the|-final|-|-countdown"},
                 {"Contiguous", "the|-|final|--|countdown"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char pre[512], got[256];
        snprintf(pre, sizeof pre,
                 "{\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": \"Split\", \"pattern\": {\"String\": \"-\"}, "
                 "\"behavior\": \"%s\", \"invert\": false}, {\"type\": \"ByteLevel\", \"add_prefix_space\": false, "
                 "\"use_regex\": false}]}",
                 cases[i].behavior);
        td_tokenizer *t = byte_tokenizer(pre);
        if (!t) continue;
        pieces(t, "the-final--countdown", got, sizeof got);
        CHECKF(strcmp(got, cases[i].want) == 0, "Split %s: got %s, want %s", cases[i].behavior, got, cases[i].want);
        td_tokenizer *back = exported(t, NULL);
        if (back) pieces(back, "the-final--countdown", got, sizeof got);
        CHECKF(back && strcmp(got, cases[i].want) == 0, "Split %s exported: got %s", cases[i].behavior, got);
        td_tokenizer_free(back);
        td_tokenizer_free(t);
    }
    char got[256];
    td_tokenizer *t = byte_tokenizer(
        "{\"type\": \"ByteLevel\", \"add_prefix_space\": true, \"trim_offsets\": true, \"use_regex\": true}");
    if (t) {
        pieces(t, "Hello world!", got, sizeof got);
        CHECKF(strcmp(got, " Hello| world|!") == 0, "ByteLevel prefix space + GPT-2 regex: got %s", got);
        pieces(t, " already spaced's", got, sizeof got);
        CHECKF(strcmp(got, " already| spaced|'s") == 0, "ByteLevel: got %s", got);
        char *json = NULL;
        td_tokenizer *back = exported(t, &json); /* ByteLevel alone, with its regex: one step, no Sequence */
        CHECK(json && strstr(json, "\"pre_tokenizer\": {\n    \"type\": \"ByteLevel\",\n    \"add_prefix_space\": true,\n"
                                   "    \"trim_offsets\": false,\n    \"use_regex\": true\n  }"));
        if (back) pieces(back, "Hello world!", got, sizeof got);
        CHECKF(back && strcmp(got, " Hello| world|!") == 0, "ByteLevel exported: got %s", got);
        td_free(json);
        td_tokenizer_free(back);
        td_tokenizer_free(t);
    }
}

/* A Split whose match needs more than the 32 KB of stack the JIT matches on first ((?:(a)|b)* over 10,000 characters
 * fails with PCRE2_ERROR_JIT_STACKLIMIT there): the pre-tokenizer repeats it with a JIT stack of its own and gets the
 * whole match as one piece; a short text before and after on the same tokenizer matches as usual. */
static void test_jit_stack(void) {
    td_tokenizer *t = byte_tokenizer(
        "{\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": \"Split\", \"pattern\": {\"Regex\": "
        "\"(?:(a)|b)*\"}, \"behavior\": \"Isolated\", \"invert\": false}, {\"type\": \"ByteLevel\", "
        "\"add_prefix_space\": false, \"use_regex\": false}]}");
    if (!t) return;
    enum { PAIRS = 5000 };
    char *text = malloc(2 * PAIRS + 1), *got = malloc(2 * PAIRS + 64);
    for (int i = 0; i < PAIRS; i++) text[2 * i] = 'a', text[2 * i + 1] = 'b';
    text[2 * PAIRS] = 0;
    char small[64];
    pieces(t, "abba-ab", small, sizeof small);
    CHECKF(strcmp(small, "abba|-|ab") == 0, "short text before: %s", small);
    pieces(t, text, got, 2 * PAIRS + 64);
    CHECKF(strcmp(got, text) == 0, "a match past the JIT's first stack: %zu bytes of pieces, want one piece of %d",
           strlen(got), 2 * PAIRS);
    pieces(t, "abba-ab", small, sizeof small);
    CHECKF(strcmp(small, "abba|-|ab") == 0, "short text after: %s", small);
    free(text);
    free(got);
    td_tokenizer_free(t);
}

/* Tokenizes every line of fixtures/tokenizers/<name>/ref_ids.jsonl with t and counts the lines whose ids equal
 * Hugging Face's; *n gets the number of lines. */
static int lines_identical(const td_tokenizer *t, const char *name, int *n) {
    char path[512];
    snprintf(path, sizeof path, "fixtures/tokenizers/%s/ref_ids.jsonl", name);
    FILE *f = fopen(td_test_path(path), "r");
    CHECKF(f != NULL, "%s missing", path);
    char line[8192];
    int same = 0;
    *n = 0;
    while (f && fgets(line, sizeof line, f)) {
        json_error_t e;
        json_t *o = json_loads(line, 0, &e), *txt = json_object_get(o, "text"), *ids = json_object_get(o, "ids");
        int32_t *got;
        size_t ng;
        (*n)++;
        if (td_tokenize(t, json_string_value(txt), json_string_length(txt), TD_TOKENIZE_PARSE_SPECIAL, &got, &ng) == TD_OK) {
            int ok = ng == json_array_size(ids);
            for (size_t i = 0; ok && i < ng; i++) ok = got[i] == json_integer_value(json_array_get(ids, i));
            same += ok;
            CHECKF(ok, "%s line %d: ids differ from Hugging Face tokenizers: %s", name, *n, json_string_value(txt));
            td_free(got);
        }
        json_decref(o);
    }
    if (f) fclose(f);
    return same;
}

static void test_reference_ids(const char *name) {
    char path[512];
    snprintf(path, sizeof path, "fixtures/tokenizers/%s/tokenizer.json", name);
    td_tokenizer *t = NULL;
    CHECKF(td_tokenizer_load(td_test_path(path), &t) == TD_OK, "%s", td_last_error());
    if (!t) return;
    int n, same = lines_identical(t, name, &n);
    printf("%s: %d/%d lines identical to Hugging Face tokenizers\n", name, same, n);
    CHECK(n >= 40);
    /* written as tokenizer.json and read back: the same ids; written again: the same text */
    char *json = NULL, *again = NULL;
    td_tokenizer *back = exported(t, &json);
    if (back) {
        int m, same_back = lines_identical(back, name, &m);
        CHECKF(same_back == same && m == n, "%s exported: %d/%d lines identical", name, same_back, m);
        CHECK(td_tokenizer_to_json(back, &again) == TD_OK && again && json && strcmp(again, json) == 0);
    }
    td_free(json);
    td_free(again);
    td_tokenizer_free(back);
    td_tokenizer_free(t);
}

/* The truncated Qwen3 tokenizer with its merges rewritten from ["a", "b"] pairs to "a b" strings: every
 * reference line must tokenize to the Hugging Face ids, as with the pairs. */
static void test_merge_strings(void) {
    json_error_t e;
    json_t *root = json_load_file(td_test_path("fixtures/tokenizers/qwen3-trunc2048/tokenizer.json"), 0, &e);
    CHECKF(root != NULL, "%s", e.text);
    if (!root) return;
    json_t *merges = json_object_get(json_object_get(root, "model"), "merges"), *as_strings = json_array();
    size_t n_pairs = 0;
    for (size_t i = 0; i < json_array_size(merges); i++) {
        json_t *m = json_array_get(merges, i);
        if (json_is_array(m)) {
            char buf[512];
            snprintf(buf, sizeof buf, "%s %s", json_string_value(json_array_get(m, 0)), json_string_value(json_array_get(m, 1)));
            json_array_append_new(as_strings, json_string(buf));
            n_pairs++;
        } else {
            json_array_append(as_strings, m);
        }
    }
    CHECKF(n_pairs > 1000, "the fixture should store its merges as pairs (%zu)", n_pairs);
    json_object_set_new(json_object_get(root, "model"), "merges", as_strings);
    char *text = json_dumps(root, JSON_COMPACT);
    json_decref(root);
    td_tokenizer *t = NULL;
    CHECKF(td_tokenizer_load_bytes(text, strlen(text), "merges as strings", &t) == TD_OK, "%s", td_last_error());
    free(text);
    if (!t) return;
    int n, same = lines_identical(t, "qwen3-trunc2048", &n);
    CHECKF(n >= 40 && same == n, "merges as strings: %d/%d lines identical", same, n);
    printf("merges as \"a b\" strings: %d/%d lines identical to Hugging Face tokenizers\n", same, n);
    td_tokenizer_free(t);
}

static void test_lossy_decode(void) {
    td_tokenizer *t = NULL;
    CHECK(td_tokenizer_load(td_test_path("fixtures/tokenizers/qwen3-trunc2048/tokenizer.json"), &t) == TD_OK);
    if (!t) return;
    char s[8] = {0};
    int32_t ids[4];
    const uint8_t bytes[4] = {0xe2, 0x82, 'A', 0x80}; /* a cut 3-byte sequence, a letter, a lone continuation */
    for (int i = 0; i < 4; i++) {
        memset(s, 0, sizeof s);
        td_utf8_put(td_byte_to_cp(bytes[i]), s);
        ids[i] = td_token_lookup(t, s);
        CHECK(ids[i] >= 0);
    }
    char *text;
    size_t len;
    CHECK(td_detokenize(t, ids, 4, &text, &len) == TD_OK);
    CHECKF(len == 7 && memcmp(text, "\xef\xbf\xbd" "A\xef\xbf\xbd", 7) == 0, "lossy decode gave %zu bytes", len);
    td_free(text);
    size_t bl;
    const char *raw = td_token_bytes(t, ids[0], &bl);
    CHECK(raw && bl == 1 && (uint8_t)raw[0] == 0xe2); /* raw bytes for streaming */
    td_tokenizer_free(t);
}

/* td_regex_widen: \p{X} gains the recent code points of X (Kawi's digit U+11F50 is Nd, Garay's letter U+10D50 Lu,
 * both unknown to PCRE2 10.42), as a class outside one and as items inside one; the rest stays as written. */
static void test_regex_widen(void) {
    static const struct {
        const char *in, *has, *lacks;
    } cases[] = {
        {"\\p{N}{1,3}", "[\\p{N}\\x{", NULL},
        {"\\pN", "[\\pN\\x{", NULL},
        {"[^\\r\\n\\p{L}\\p{N}]?\\p{L}+", "[^\\r\\n\\p{L}\\x{", "[[^"},
        {"\\x{11F50}", NULL, NULL},
        {"\\P{N}", NULL, "\\x{11F"},
        {"\\p{Han}", NULL, "\\x{"},
        {"\\Q\\p{N}\\E", NULL, "\\x{"},
        {"[]\\p{N}]", "[]\\p{N}\\x{", "[[]"},
        {"[[:alpha:]\\p{Nd}]", "[[:alpha:]\\p{Nd}\\x{", NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *out = NULL;
        size_t n = 0;
        CHECK(td_regex_widen(cases[i].in, strlen(cases[i].in), &out, &n) == TD_OK && out && strlen(out) == n);
        if (!out) continue;
        if (cases[i].has) CHECKF(strstr(out, cases[i].has) != NULL, "%s -> %.120s lacks %s", cases[i].in, out, cases[i].has);
        if (cases[i].lacks) CHECKF(!strstr(out, cases[i].lacks), "%s -> %.120s has %s", cases[i].in, out, cases[i].lacks);
        if (!cases[i].has) CHECKF(strcmp(out, cases[i].in) == 0, "%s -> %.120s: changed", cases[i].in, out);
        td_free(out);
    }
    /* the added items name Kawi's digits under N, Garay's capital letters under L and Lu, not under N */
    char *out = NULL;
    size_t n = 0;
    CHECK(td_regex_widen("\\p{N}", 5, &out, &n) == TD_OK && strstr(out, "\\x{11F50}-\\x{11F59}"));
    td_free(out);
    CHECK(td_regex_widen("\\p{Lu}", 6, &out, &n) == TD_OK && strstr(out, "\\x{10D50}") && !strstr(out, "\\x{11F50}"));
    td_free(out);
}

int main(void) {
    test_regex_widen();
    test_split_behaviours();
    test_jit_stack();
    test_reference_ids("qwen3-trunc2048");
    test_reference_ids("qwen35-trunc2048");
    test_lossy_decode();
    test_merge_strings();
    return td_test_finish("test_tokenizer");
}
