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
    td_free(tok->added); /* the contents live in vocab_strings */
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
    if (strcmp(type, "Replace") == 0) { /* SentencePiece's space: ' ' -> U+2581, the one Replace this library knows */
        const char *pat = json_string_value(json_object_get(json_object_get(n, "pattern"), "String"));
        const char *content = json_string_value(json_object_get(n, "content"));
        if (!pat || !content || strcmp(pat, " ") != 0 || strcmp(content, "\xe2\x96\x81") != 0)
            return td_fail(TD_ERR_UNSUPPORTED, "%s: normalizer Replace is supported only from \" \" to \"\u2581\"", name);
        tok->space_to_meta = 1;
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
    return td_fail(TD_ERR_UNSUPPORTED, "%s: normalizer type \"%s\" is not supported (NFC, Replace of the space, or none)",
                   name, type);
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
            return td_tok_add_split(tok, json_string_value(re), json_string_length(re), 0, b, invert, name);
        if (json_is_string(lit))
            return td_tok_add_split(tok, json_string_value(lit), json_string_length(lit), 1, b, invert, name);
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
        tok->byte_level_at = tok->n_split;
        tok->byte_level_regex = use_regex;
        if (use_regex) return td_tok_add_split(tok, gpt2_pattern, strlen(gpt2_pattern), 0, TD_SPLIT_ISOLATED, 0, name);
        return TD_OK;
    }
    return td_fail(TD_ERR_UNSUPPORTED, "%s: pre_tokenizer type \"%s\" is not supported", name, type);
}

/* The post-processor: what Hugging Face adds around a text with add_special_tokens=True. ByteLevel adds nothing
 * (its offsets are not ours to keep); TemplateProcessing's single-sequence template may put one special token before
 * the text (a BOS). Anything else would change the ids in a way this library does not reproduce: refused. */
static td_status load_post_processor(td_tokenizer *tok, const json_t *p, const char *name) {
    if (!p || json_is_null(p)) return TD_OK;
    const char *type = NULL;
    td_status st = td_json_str(p, "type", 1, "tokenizer.json post_processor", &type);
    if (st != TD_OK) return td_fail_context(st, "%s", name);
    if (strcmp(type, "ByteLevel") == 0) return TD_OK;
    if (strcmp(type, "Sequence") == 0) {
        json_t *list = json_object_get(p, "processors");
        if (!json_is_array(list))
            return td_fail(TD_ERR_FORMAT, "%s: post_processor Sequence without a \"processors\" array", name);
        size_t i;
        json_t *it;
        json_array_foreach(list, i, it) {
            if ((st = load_post_processor(tok, it, name)) != TD_OK) return st;
        }
        return TD_OK;
    }
    if (strcmp(type, "TemplateProcessing") != 0)
        return td_fail(TD_ERR_UNSUPPORTED, "%s: post_processor type \"%s\" is not supported (ByteLevel, "
                       "TemplateProcessing)", name, type);
    json_t *single = json_object_get(p, "single");
    if (!json_is_array(single))
        return td_fail(TD_ERR_FORMAT, "%s: post_processor TemplateProcessing without a \"single\" array", name);
    int seen_text = 0;
    for (size_t i = 0; i < json_array_size(single); i++) {
        json_t *it = json_array_get(single, i), *sp = json_object_get(it, "SpecialToken");
        if (json_is_object(json_object_get(it, "Sequence"))) {
            seen_text = 1;
            continue;
        }
        const char *content = json_string_value(json_object_get(sp, "id"));
        if (!content) return td_fail(TD_ERR_FORMAT, "%s: post_processor single[%zu] is neither a Sequence nor a SpecialToken", name, i);
        if (seen_text || tok->bos_id >= 0)
            return td_fail(TD_ERR_UNSUPPORTED, "%s: post_processor adds \"%s\" %s: only one token before the text is "
                           "supported", name, content, seen_text ? "after the text" : "as a second token");
        if ((tok->bos_id = td_token_lookup(tok, content)) < 0)
            return td_fail(TD_ERR_FORMAT, "%s: post_processor adds \"%s\", which is not in the vocabulary", name, content);
    }
    return TD_OK;
}

/* A merge entry ("a b" or ["a", "b"]) as its two halves (borrowed from the JSON). */
static td_status merge_parts(const json_t *m, size_t idx, const char *name, td_bpe_merge *out) {
    if (json_is_string(m)) {
        if (td_bpe_merge_split(json_string_value(m), json_string_length(m), out) != 0)
            return td_fail(TD_ERR_FORMAT, "%s: merges[%zu] \"%s\" is not two tokens separated by one space", name,
                           idx, json_string_value(m));
        return TD_OK;
    }
    if (json_is_array(m) && json_array_size(m) == 2 && json_is_string(json_array_get(m, 0)) &&
        json_is_string(json_array_get(m, 1))) {
        out->a = json_string_value(json_array_get(m, 0)), out->alen = json_string_length(json_array_get(m, 0));
        out->b = json_string_value(json_array_get(m, 1)), out->blen = json_string_length(json_array_get(m, 1));
        return TD_OK;
    }
    return td_fail(TD_ERR_FORMAT, "%s: merges[%zu] must be \"a b\" or [\"a\", \"b\"]", name, idx);
}

static td_status load_model(td_tokenizer *tok, const json_t *model, const json_t *added, const char *name) {
    const char *type = "BPE";
    td_status st = td_json_str(model, "type", 0, "tokenizer.json model", &type);
    if (st != TD_OK) return td_fail_context(st, "%s", name);
    if (strcmp(type, "BPE") != 0)
        return td_fail(TD_ERR_UNSUPPORTED, "%s: model type \"%s\" is not supported (BPE only)", name, type);
    int byte_fallback = 0;
    if ((st = td_json_bool(model, "byte_fallback", 0, "model", &byte_fallback)) != TD_OK)
        return td_fail_context(st, "%s", name);
    if (!tok->byte_level && !(byte_fallback && tok->space_to_meta))
        return td_fail(TD_ERR_UNSUPPORTED, "%s: BPE is supported byte-level (a ByteLevel pre_tokenizer) or "
                       "SentencePiece-style (the space replaced by U+2581, byte_fallback)", name);
    tok->spm = !tok->byte_level;
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

    /* the parts, borrowed from the JSON; td_bpe_build_model checks and copies them */
    size_t n_vocab = json_object_size(vocab), n_added = json_is_array(added) ? json_array_size(added) : 0;
    size_t n_merges = merges ? json_array_size(merges) : 0;
    if (added && !json_is_null(added) && !json_is_array(added))
        return td_fail(TD_ERR_FORMAT, "%s: added_tokens must be an array", name);
    td_bpe_token *tv = td_malloc((n_vocab ? n_vocab : 1) * sizeof *tv);
    td_bpe_added *ta = td_calloc(n_added ? n_added : 1, sizeof *ta);
    td_bpe_merge *tm = td_malloc((n_merges ? n_merges : 1) * sizeof *tm);
    if (!tv || !ta || !tm) {
        st = td_fail_nomem("the vocabulary");
        goto done;
    }
    size_t k = 0;
    const char *key;
    json_object_foreach((json_t *)vocab, key, v) {
        if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) >= TD_MAX_TOKEN_ID) {
            st = td_fail(TD_ERR_FORMAT, "%s: model.vocab[\"%s\"] must be an id in 0..%d", name, key,
                         TD_MAX_TOKEN_ID - 1);
            goto done;
        }
        tv[k].s = key, tv[k].len = strlen(key), tv[k].id = (int32_t)json_integer_value(v);
        k++;
    }
    for (size_t i = 0; i < n_added; i++) {
        json_t *a = json_array_get(added, i);
        td_bpe_added *t = &ta[i];
        char where[64];
        snprintf(where, sizeof where, "added_tokens[%zu]", i);
        int64_t id = -1;
        const char *content = NULL;
        if (!json_is_object(a)) {
            st = td_fail(TD_ERR_FORMAT, "%s: %s must be an object", name, where);
            goto done;
        }
        if ((st = td_json_int(a, "id", 1, where, &id)) != TD_OK ||
            (st = td_json_str(a, "content", 1, where, &content)) != TD_OK ||
            (st = td_json_bool(a, "special", 0, where, &t->special)) != TD_OK ||
            (st = td_json_bool(a, "normalized", 0, where, &t->normalized)) != TD_OK ||
            (st = td_json_bool(a, "lstrip", 0, where, &t->lstrip)) != TD_OK ||
            (st = td_json_bool(a, "rstrip", 0, where, &t->rstrip)) != TD_OK ||
            (st = td_json_bool(a, "single_word", 0, where, &t->single_word)) != TD_OK) {
            st = td_fail_context(st, "%s", name);
            goto done;
        }
        if (id < 0 || id >= TD_MAX_TOKEN_ID) {
            st = td_fail(TD_ERR_FORMAT, "%s: %s: id %lld out of range", name, where, (long long)id);
            goto done;
        }
        t->content = content;
        t->len = json_string_length(json_object_get(a, "content"));
        t->id = (int32_t)id;
    }
    for (size_t i = 0; i < n_merges; i++)
        if ((st = merge_parts(json_array_get(merges, i), i, name, &tm[i])) != TD_OK) goto done;
    td_bpe_parts parts = {name, "model.vocab", "merges", tv, n_vocab, ta, n_added, tm, n_merges};
    st = td_bpe_build_model(tok, &parts);
    const char *unk = json_string_value(json_object_get(model, "unk_token"));
    if (st == TD_OK && unk && (tok->unk_id = td_token_lookup(tok, unk)) < 0)
        st = td_fail(TD_ERR_FORMAT, "%s: model.unk_token \"%s\" is not in the vocabulary", name, unk);
done:
    td_free(tv);
    td_free(ta);
    td_free(tm);
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
    tok->bos_id = -1;
    tok->unk_id = -1;
    if (st == TD_OK) st = load_model(tok, model, json_object_get(root, "added_tokens"), name);
    if (st == TD_OK) st = load_post_processor(tok, json_object_get(root, "post_processor"), name);
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
    if (len >= 4 && memcmp(data, "GGUF", 4) == 0)
        st = td_fail(TD_ERR_FORMAT, "%s: a GGUF file, not a tokenizer.json: load it with td_tokenizer_load_gguf", path);
    else st = td_tokenizer_load_bytes(data, len, path, out);
    td_free(data);
    return st;
}
