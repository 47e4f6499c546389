/* Reading tokenizer.json: the BPE model (vocab, merges in both file formats), added tokens, the normalizer and
 * the pre-tokenizer. Everything is validated here so that encoding never meets an inconsistent table. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tokenizer_internal.h"
#include "util/alloc.h"
#include "util/error.h"
#include "util/fileio.h"
#include "util/json.h"

#define MAX_TOKEN_ID (1 << 24)

/* The pattern of the GPT-2 ByteLevel pre-tokenizer, used when ByteLevel has use_regex = true. */
static const char gpt2_pattern[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

void td_tokenizer_free(td_tokenizer *tok) {
    if (!tok) return;
    td_free(tok->bytes);
    td_free(tok->bytes_off);
    td_free(tok->is_token);
    td_free(tok->vocab_strings);
    td_free(tok->str_off);
    td_free(tok->str_len);
    td_free(tok->merge_a);
    td_free(tok->merge_b);
    td_strmap_free(&tok->vocab);
    td_u64map_free(&tok->merges);
    for (int i = 0; i < tok->n_added; i++) td_free(tok->added[i].content);
    td_free(tok->added);
    for (int i = 0; i < tok->n_split; i++) {
        td_split_free(tok->split[i].code);
        td_free(tok->split[i].source);
    }
    td_free(tok);
}

static td_status load_normalizer(td_tokenizer *tok, const json_t *n, const char *name) {
    if (!n || json_is_null(n)) return TD_OK;
    const char *type = NULL;
    td_status st = td_json_str(n, "type", 1, "tokenizer.json normalizer", &type);
    if (st != TD_OK) return td_fail_context(st, "%s", name);
    if (strcmp(type, "NFC") == 0) {
        tok->nfc = 1;
        return TD_OK;
    }
    if (strcmp(type, "Sequence") == 0) {
        json_t *list = json_object_get(n, "normalizers");
        if (!json_is_array(list))
            return td_fail(TD_ERR_FORMAT, "%s: normalizer Sequence without a \"normalizers\" array", name);
        size_t i;
        json_t *it;
        json_array_foreach(list, i, it) {
            st = load_normalizer(tok, it, name);
            if (st != TD_OK) return st;
        }
        return TD_OK;
    }
    return td_fail(TD_ERR_UNSUPPORTED, "%s: normalizer type \"%s\" is not supported (NFC or none)", name, type);
}

static td_status parse_behavior(const char *s, td_split_behavior *b, const char *name) {
    static const struct {
        const char *name;
        td_split_behavior b;
    } table[] = {{"Isolated", TD_SPLIT_ISOLATED},
                 {"Removed", TD_SPLIT_REMOVED},
                 {"MergedWithPrevious", TD_SPLIT_MERGED_WITH_PREVIOUS},
                 {"MergedWithNext", TD_SPLIT_MERGED_WITH_NEXT},
                 {"Contiguous", TD_SPLIT_CONTIGUOUS}};
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (strcmp(s, table[i].name) == 0) {
            *b = table[i].b;
            return TD_OK;
        }
    return td_fail(TD_ERR_UNSUPPORTED, "%s: Split behavior \"%s\" is not supported", name, s);
}

static td_status add_split(td_tokenizer *tok, const char *pat, size_t len, int literal, td_split_behavior b,
                           int invert, const char *name) {
    if (tok->n_split == TD_MAX_SPLIT_STEPS)
        return td_fail(TD_ERR_UNSUPPORTED, "%s: more than %d Split pre-tokenizers", name, TD_MAX_SPLIT_STEPS);
    td_split_step *s = &tok->split[tok->n_split];
    td_status st = td_split_compile(pat, len, literal, &s->code);
    if (st != TD_OK) return td_fail_context(st, "%s", name);
    s->source = td_malloc(len + 1);
    if (!s->source) {
        td_split_free(s->code);
        return td_fail_nomem("a pattern");
    }
    memcpy(s->source, pat, len);
    s->source[len] = 0;
    s->literal = literal;
    s->behavior = b;
    s->invert = invert;
    tok->n_split++;
    return TD_OK;
}

static td_status load_pretokenizer(td_tokenizer *tok, const json_t *p, const char *name, int first) {
    if (!p || json_is_null(p)) return TD_OK;
    const char *type = NULL;
    td_status st = td_json_str(p, "type", 1, "tokenizer.json pre_tokenizer", &type);
    if (st != TD_OK) return td_fail_context(st, "%s", name);
    if (strcmp(type, "Sequence") == 0) {
        json_t *list = json_object_get(p, "pretokenizers");
        if (!json_is_array(list))
            return td_fail(TD_ERR_FORMAT, "%s: pre_tokenizer Sequence without a \"pretokenizers\" array", name);
        size_t i;
        json_t *it;
        json_array_foreach(list, i, it) {
            st = load_pretokenizer(tok, it, name, first && i == 0);
            if (st != TD_OK) return st;
        }
        return TD_OK;
    }
    if (strcmp(type, "Split") == 0) {
        json_t *pat = json_object_get(p, "pattern");
        json_t *re = json_object_get(pat, "Regex"), *lit = json_object_get(pat, "String");
        const char *behavior = "Isolated";
        int invert = 0;
        td_split_behavior b = TD_SPLIT_ISOLATED;
        if ((st = td_json_str(p, "behavior", 0, "pre_tokenizer Split", &behavior)) != TD_OK ||
            (st = td_json_bool(p, "invert", 0, "pre_tokenizer Split", &invert)) != TD_OK)
            return td_fail_context(st, "%s", name);
        if ((st = parse_behavior(behavior, &b, name)) != TD_OK) return st;
        if (json_is_string(re))
            return add_split(tok, json_string_value(re), json_string_length(re), 0, b, invert, name);
        if (json_is_string(lit))
            return add_split(tok, json_string_value(lit), json_string_length(lit), 1, b, invert, name);
        return td_fail(TD_ERR_FORMAT, "%s: Split pre_tokenizer needs pattern.Regex or pattern.String", name);
    }
    if (strcmp(type, "ByteLevel") == 0) {
        int use_regex = 1, prefix = 0;
        if ((st = td_json_bool(p, "use_regex", 0, "pre_tokenizer ByteLevel", &use_regex)) != TD_OK ||
            (st = td_json_bool(p, "add_prefix_space", 0, "pre_tokenizer ByteLevel", &prefix)) != TD_OK)
            return td_fail_context(st, "%s", name);
        if (prefix && !first)
            return td_fail(TD_ERR_UNSUPPORTED,
                           "%s: ByteLevel add_prefix_space after another pre-tokenizer is not supported", name);
        tok->byte_level = 1;
        tok->add_prefix_space = prefix;
        if (use_regex) return add_split(tok, gpt2_pattern, strlen(gpt2_pattern), 0, TD_SPLIT_ISOLATED, 0, name);
        return TD_OK;
    }
    return td_fail(TD_ERR_UNSUPPORTED, "%s: pre_tokenizer type \"%s\" is not supported", name, type);
}

/* Splits a merge entry ("a b" or ["a", "b"]) into its two halves (borrowed or pointing into `buf`). */
static td_status merge_parts(const json_t *m, size_t idx, const char *name, const char **a, size_t *alen,
                             const char **b, size_t *blen) {
    if (json_is_string(m)) {
        const char *s = json_string_value(m);
        size_t n = json_string_length(m);
        const char *sp = memchr(s, ' ', n);
        if (!sp || memchr(sp + 1, ' ', n - (size_t)(sp + 1 - s)))
            return td_fail(TD_ERR_FORMAT, "%s: merges[%zu] \"%s\" is not two tokens separated by one space", name,
                           idx, s);
        *a = s, *alen = (size_t)(sp - s), *b = sp + 1, *blen = n - *alen - 1;
        return TD_OK;
    }
    if (json_is_array(m) && json_array_size(m) == 2 && json_is_string(json_array_get(m, 0)) &&
        json_is_string(json_array_get(m, 1))) {
        *a = json_string_value(json_array_get(m, 0)), *alen = json_string_length(json_array_get(m, 0));
        *b = json_string_value(json_array_get(m, 1)), *blen = json_string_length(json_array_get(m, 1));
        return TD_OK;
    }
    return td_fail(TD_ERR_FORMAT, "%s: merges[%zu] must be \"a b\" or [\"a\", \"b\"]", name, idx);
}

static td_status load_model(td_tokenizer *tok, const json_t *model, const json_t *added, const char *name) {
    const char *type = "BPE";
    td_status st = td_json_str(model, "type", 0, "tokenizer.json model", &type);
    if (st != TD_OK) return td_fail_context(st, "%s", name);
    if (strcmp(type, "BPE") != 0)
        return td_fail(TD_ERR_UNSUPPORTED, "%s: model type \"%s\" is not supported (byte-level BPE only)", name,
                       type);
    if (!tok->byte_level)
        return td_fail(TD_ERR_UNSUPPORTED, "%s: only byte-level BPE (a ByteLevel pre_tokenizer) is supported", name);
    const char *s = "";
    json_t *v;
    if ((v = json_object_get(model, "dropout")) && !json_is_null(v) && !(json_is_number(v) && json_number_value(v) == 0))
        return td_fail(TD_ERR_UNSUPPORTED, "%s: BPE dropout is not supported", name);
    if ((st = td_json_str(model, "continuing_subword_prefix", 0, "model", &s)) != TD_OK || (s && *s))
        return st != TD_OK ? td_fail_context(st, "%s", name)
                           : td_fail(TD_ERR_UNSUPPORTED, "%s: continuing_subword_prefix is not supported", name);
    s = "";
    if ((st = td_json_str(model, "end_of_word_suffix", 0, "model", &s)) != TD_OK || (s && *s))
        return st != TD_OK ? td_fail_context(st, "%s", name)
                           : td_fail(TD_ERR_UNSUPPORTED, "%s: end_of_word_suffix is not supported", name);
    if ((st = td_json_bool(model, "ignore_merges", 0, "model", &tok->ignore_merges)) != TD_OK)
        return td_fail_context(st, "%s", name);

    json_t *vocab = json_object_get(model, "vocab");
    json_t *merges = json_object_get(model, "merges");
    if (!json_is_object(vocab)) return td_fail(TD_ERR_FORMAT, "%s: model.vocab must be an object", name);
    if (merges && !json_is_array(merges)) return td_fail(TD_ERR_FORMAT, "%s: model.merges must be an array", name);

    /* ids: vocab and added tokens together decide the id space */
    int64_t max_id = -1;
    size_t vocab_bytes = 0;
    const char *key;
    json_object_foreach((json_t *)vocab, key, v) {
        if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) >= MAX_TOKEN_ID)
            return td_fail(TD_ERR_FORMAT, "%s: model.vocab[\"%s\"] must be an id in 0..%d", name, key,
                           MAX_TOKEN_ID - 1);
        if (json_integer_value(v) > max_id) max_id = json_integer_value(v);
        vocab_bytes += strlen(key) + 1;
    }
    size_t n_added = json_is_array(added) ? json_array_size(added) : 0;
    if (added && !json_is_null(added) && !json_is_array(added))
        return td_fail(TD_ERR_FORMAT, "%s: added_tokens must be an array", name);
    tok->added = td_calloc(n_added ? n_added : 1, sizeof *tok->added);
    if (!tok->added) return td_fail_nomem("added tokens");
    for (size_t i = 0; i < n_added; i++) {
        json_t *a = json_array_get(added, i);
        td_added_token *t = &tok->added[tok->n_added];
        char where[64];
        snprintf(where, sizeof where, "added_tokens[%zu]", i);
        int64_t id = -1;
        const char *content = NULL;
        if (!json_is_object(a)) return td_fail(TD_ERR_FORMAT, "%s: %s must be an object", name, where);
        if ((st = td_json_int(a, "id", 1, where, &id)) != TD_OK ||
            (st = td_json_str(a, "content", 1, where, &content)) != TD_OK ||
            (st = td_json_bool(a, "special", 0, where, &t->special)) != TD_OK ||
            (st = td_json_bool(a, "normalized", 0, where, &t->normalized)) != TD_OK ||
            (st = td_json_bool(a, "lstrip", 0, where, &t->lstrip)) != TD_OK ||
            (st = td_json_bool(a, "rstrip", 0, where, &t->rstrip)) != TD_OK ||
            (st = td_json_bool(a, "single_word", 0, where, &t->single_word)) != TD_OK)
            return td_fail_context(st, "%s", name);
        if (id < 0 || id >= MAX_TOKEN_ID) return td_fail(TD_ERR_FORMAT, "%s: %s: id %lld out of range", name, where, (long long)id);
        size_t clen = json_string_length(json_object_get(a, "content"));
        if (clen == 0) return td_fail(TD_ERR_FORMAT, "%s: %s: empty content", name, where);
        if (td_utf8_invalid_at(content, clen) != (size_t)-1)
            return td_fail(TD_ERR_FORMAT, "%s: %s: content is not valid UTF-8", name, where);
        t->content = td_malloc(clen + 1);
        if (!t->content) return td_fail_nomem("an added token");
        memcpy(t->content, content, clen + 1);
        t->len = (uint32_t)clen;
        t->id = (int32_t)id;
        tok->n_added++;
        if (id > max_id) max_id = id;
        vocab_bytes += clen + 1;
    }
    if (max_id < 0) return td_fail(TD_ERR_FORMAT, "%s: the vocabulary is empty", name);
    tok->n_tokens = (int32_t)(max_id + 1);

    /* vocabulary strings, owned in one buffer, and the lookup map */
    size_t n_vocab = json_object_size(vocab);
    tok->vocab_strings = td_malloc(vocab_bytes ? vocab_bytes : 1);
    tok->is_token = td_calloc((size_t)tok->n_tokens, 1);
    const char **id_str = td_calloc((size_t)tok->n_tokens, sizeof *id_str);
    uint32_t *id_len = td_calloc((size_t)tok->n_tokens, sizeof *id_len);
    if (!tok->vocab_strings || !tok->is_token || !id_str || !id_len ||
        td_strmap_init(&tok->vocab, n_vocab + (size_t)tok->n_added)) {
        td_free(id_str);
        td_free(id_len);
        return td_fail_nomem("the vocabulary");
    }
    size_t off = 0;
    json_object_foreach((json_t *)vocab, key, v) {
        size_t klen = strlen(key);
        int32_t id = (int32_t)json_integer_value(v);
        char *dst = tok->vocab_strings + off;
        memcpy(dst, key, klen + 1);
        off += klen + 1;
        if (tok->is_token[id]) {
            st = td_fail(TD_ERR_FORMAT, "%s: id %d appears twice in model.vocab", name, id);
            goto fail;
        }
        tok->is_token[id] = 1;
        id_str[id] = dst;
        id_len[id] = (uint32_t)klen;
        td_strmap_put(&tok->vocab, dst, klen, id);
    }
    for (int i = 0; i < tok->n_added; i++) {
        td_added_token *t = &tok->added[i];
        char *dst = tok->vocab_strings + off;
        memcpy(dst, t->content, t->len + 1);
        off += t->len + 1;
        tok->is_token[t->id] = 2; /* 2: decodes to its content verbatim */
        id_str[t->id] = dst;
        id_len[t->id] = t->len;
        td_strmap_put(&tok->vocab, dst, t->len, t->id);
    }

    tok->str_off = td_malloc((size_t)tok->n_tokens * sizeof *tok->str_off);
    tok->str_len = td_malloc((size_t)tok->n_tokens * sizeof *tok->str_len);
    if (!tok->str_off || !tok->str_len) {
        st = td_fail_nomem("the vocabulary");
        goto fail;
    }
    for (int32_t id = 0; id < tok->n_tokens; id++) {
        tok->str_off[id] = id_str[id] ? (uint64_t)(id_str[id] - tok->vocab_strings) : UINT64_MAX;
        tok->str_len[id] = id_len[id];
    }

    /* raw bytes per id: byte-level characters map back to bytes; added tokens are their content */
    size_t total = 0;
    for (int32_t id = 0; id < tok->n_tokens; id++) total += id_len[id];
    tok->bytes = td_malloc(total ? total : 1);
    tok->bytes_off = td_malloc(((size_t)tok->n_tokens + 1) * sizeof *tok->bytes_off);
    if (!tok->bytes || !tok->bytes_off) {
        st = td_fail_nomem("token bytes");
        goto fail;
    }
    off = 0;
    for (int32_t id = 0; id < tok->n_tokens; id++) {
        tok->bytes_off[id] = off;
        const unsigned char *p = (const unsigned char *)id_str[id];
        size_t n = id_len[id], i = 0;
        if (tok->is_token[id] == 2 || !tok->byte_level) {
            memcpy(tok->bytes + off, p, n);
            off += n;
            continue;
        }
        while (i < n) {
            size_t at = i;
            int32_t cp = td_utf8_next(p, n, &i);
            if (cp < 0) {
                st = td_fail(TD_ERR_FORMAT, "%s: vocabulary entry of id %d is not valid UTF-8", name, id);
                goto fail;
            }
            int b = td_cp_to_byte((uint32_t)cp);
            if (b >= 0) tok->bytes[off++] = (char)b;
            else { /* outside the byte-level alphabet: keep the character's own bytes */
                memcpy(tok->bytes + off, p + at, i - at);
                off += i - at;
            }
        }
    }
    tok->bytes_off[tok->n_tokens] = off;

    /* the single-byte tokens every byte-level word starts from */
    for (int b = 0; b < 256; b++) {
        char buf[4];
        int n = td_utf8_put(tok->byte_level ? td_byte_to_cp((uint8_t)b) : (uint32_t)b, buf);
        tok->byte_token[b] = -1;
        if (!td_strmap_get(&tok->vocab, buf, (size_t)n, &tok->byte_token[b]) && tok->byte_level) {
            st = td_fail(TD_ERR_FORMAT, "%s: the vocabulary has no token for byte 0x%02x", name, b);
            goto fail;
        }
    }

    /* merges: (left, right) -> (rank, merged id) */
    size_t n_merges = merges ? json_array_size(merges) : 0;
    tok->merge_a = td_malloc((n_merges ? n_merges : 1) * sizeof *tok->merge_a);
    tok->merge_b = td_malloc((n_merges ? n_merges : 1) * sizeof *tok->merge_b);
    if (td_u64map_init(&tok->merges, n_merges) || !tok->merge_a || !tok->merge_b) {
        st = td_fail_nomem("the merge table");
        goto fail;
    }
    char *cat = NULL;
    size_t cat_cap = 0;
    for (size_t i = 0; i < n_merges; i++) {
        const char *a = NULL, *b = NULL;
        size_t alen = 0, blen = 0;
        int32_t ia, ib, im;
        if ((st = merge_parts(json_array_get(merges, i), i, name, &a, &alen, &b, &blen)) != TD_OK) break;
        if (!td_strmap_get(&tok->vocab, a, alen, &ia) || !td_strmap_get(&tok->vocab, b, blen, &ib)) {
            st = td_fail(TD_ERR_FORMAT, "%s: merges[%zu]: \"%.*s\" or \"%.*s\" is not in the vocabulary", name, i,
                         (int)alen, a, (int)blen, b);
            break;
        }
        if (alen + blen > cat_cap) {
            cat_cap = (alen + blen) * 2;
            char *nc = td_realloc(cat, cat_cap);
            if (!nc) {
                st = td_fail_nomem("a merge");
                break;
            }
            cat = nc;
        }
        memcpy(cat, a, alen);
        memcpy(cat + alen, b, blen);
        if (!td_strmap_get(&tok->vocab, cat, alen + blen, &im)) {
            st = td_fail(TD_ERR_FORMAT, "%s: merges[%zu]: the merged token \"%.*s\" is not in the vocabulary", name,
                         i, (int)(alen + blen), cat);
            break;
        }
        uint64_t k = ((uint64_t)(uint32_t)ia << 32) | (uint32_t)ib;
        tok->merge_a[tok->n_merges] = ia;
        tok->merge_b[tok->n_merges++] = ib;
        if (td_u64map_put(&tok->merges, k, ((uint64_t)i << 32) | (uint32_t)im) < 0) {
            st = td_fail_nomem("the merge table");
            break;
        }
    }
    td_free(cat);
fail:
    td_free(id_str);
    td_free(id_len);
    return st;
}

td_status td_tokenizer_load_bytes(const char *data, size_t len, const char *name, td_tokenizer **out) {
    if (!out || (!data && len)) return td_fail(TD_ERR_INVALID_ARG, "td_tokenizer_load_bytes: NULL argument");
    *out = NULL;
    if (!name) name = "tokenizer.json";
    uint64_t f0 = td_alloc_failures();
    json_t *root = NULL;
    td_status st = td_json_load_bytes(data, len, name, &root);
    if (st != TD_OK) return st;
    td_tokenizer *tok = td_calloc(1, sizeof *tok);
    if (!tok) {
        json_decref(root);
        return td_fail_nomem("a tokenizer");
    }
    json_t *model = json_object_get(root, "model");
    if (!json_is_object(root)) st = td_fail(TD_ERR_FORMAT, "%s: top level must be an object", name);
    else if (!json_is_object(model)) st = td_fail(TD_ERR_FORMAT, "%s: missing object \"model\"", name);
    if (st == TD_OK) st = load_normalizer(tok, json_object_get(root, "normalizer"), name);
    if (st == TD_OK) st = load_pretokenizer(tok, json_object_get(root, "pre_tokenizer"), name, 1);
    if (st == TD_OK) st = load_model(tok, model, json_object_get(root, "added_tokens"), name);
    json_decref(root);
    if (st == TD_OK && td_alloc_failures() != f0) /* a refusal PCRE2 or jansson took for something else */
        st = td_fail(TD_ERR_NOMEM, "%s: out of memory while loading", name);
    if (st != TD_OK) {
        td_tokenizer_free(tok);
        return st;
    }
    *out = tok;
    return TD_OK;
}

td_status td_tokenizer_load(const char *path, td_tokenizer **out) {
    if (!path || !out) return td_fail(TD_ERR_INVALID_ARG, "td_tokenizer_load: NULL argument");
    char *data;
    size_t len;
    *out = NULL;
    td_status st = td_read_file(path, &data, &len);
    if (st != TD_OK) return st;
    st = td_tokenizer_load_bytes(data, len, path, out);
    td_free(data);
    return st;
}
