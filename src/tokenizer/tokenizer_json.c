/* A loaded tokenizer written back as a Hugging Face tokenizer.json, in the form `tokenizers` saves Qwen's: the keys
 * in its order, every flag spelled out, merges as pairs, pretty-printed with two spaces (jansson's indentation is
 * serde_json's PrettyFormatter for everything a byte-level vocabulary holds). */
#include <string.h>

#include "tokenizer/tokenizer_internal.h"
#include "util/alloc.h"
#include "util/error.h"
#include "util/json.h"

static const char *const behavior_names[] = {"Isolated", "Removed", "MergedWithPrevious", "MergedWithNext",
                                             "Contiguous"};

static json_t *byte_level(const td_tokenizer *tok, int use_regex) {
    json_t *o = json_object();
    json_object_set_new(o, "type", json_string("ByteLevel"));
    json_object_set_new(o, "add_prefix_space", json_boolean(tok->add_prefix_space));
    json_object_set_new(o, "trim_offsets", json_false());
    json_object_set_new(o, "use_regex", json_boolean(use_regex));
    return o;
}

static json_t *split(const td_split_step *s) {
    json_t *o = json_object(), *pat = json_object();
    json_object_set_new(pat, s->literal ? "String" : "Regex", json_string(s->source));
    json_object_set_new(o, "type", json_string("Split"));
    json_object_set_new(o, "pattern", pat);
    json_object_set_new(o, "behavior", json_string(behavior_names[s->behavior]));
    json_object_set_new(o, "invert", json_boolean(s->invert));
    return o;
}

/* The Split steps and ByteLevel in the order tokenizer.json had them; ByteLevel's own GPT-2 regex (use_regex) is
 * part of it, not a Split of its own. One step stands alone, several make a Sequence. */
static json_t *pre_tokenizer(const td_tokenizer *tok) {
    json_t *steps = json_array();
    for (int i = 0; i <= tok->n_split; i++) {
        if (tok->byte_level && i == tok->byte_level_at) {
            json_array_append_new(steps, byte_level(tok, tok->byte_level_regex));
            if (tok->byte_level_regex) continue;
        }
        if (i < tok->n_split) json_array_append_new(steps, split(&tok->split[i]));
    }
    if (json_array_size(steps) == 1) {
        json_t *one = json_incref(json_array_get(steps, 0));
        json_decref(steps);
        return one;
    }
    json_t *seq = json_object();
    json_object_set_new(seq, "type", json_string("Sequence"));
    json_object_set_new(seq, "pretokenizers", steps);
    return seq;
}

/* The post-processor: ByteLevel, and where the tokenizer puts a BOS before a text, the template that does it, as
 * Llama 3's tokenizer.json has them. */
static json_t *post_processor(const td_tokenizer *tok) {
    if (tok->bos_id < 0) return tok->spm ? json_null() : byte_level(tok, 0);
    const char *bos = tok->vocab_strings + tok->str_off[tok->bos_id];
    json_t *tp = json_object(), *single = json_array(), *pair = json_array(), *specials = json_object();
    for (int k = 0; k < 2; k++) {
        json_t *list = k ? pair : single;
        for (int part = 0; part < 1 + k; part++) {
            json_t *sp = json_object(), *st = json_object(), *sq = json_object(), *sv = json_object();
            json_object_set_new(st, "id", json_string(bos));
            json_object_set_new(st, "type_id", json_integer(part));
            json_object_set_new(sp, "SpecialToken", st);
            json_array_append_new(list, sp);
            json_object_set_new(sv, "id", json_string(part ? "B" : "A"));
            json_object_set_new(sv, "type_id", json_integer(part));
            json_object_set_new(sq, "Sequence", sv);
            json_array_append_new(list, sq);
        }
    }
    json_t *entry = json_object(), *ids = json_array(), *tokens = json_array();
    json_array_append_new(ids, json_integer(tok->bos_id));
    json_array_append_new(tokens, json_string(bos));
    json_object_set_new(entry, "id", json_string(bos));
    json_object_set_new(entry, "ids", ids);
    json_object_set_new(entry, "tokens", tokens);
    json_object_set_new(specials, bos, entry);
    json_object_set_new(tp, "type", json_string("TemplateProcessing"));
    json_object_set_new(tp, "single", single);
    json_object_set_new(tp, "pair", pair);
    json_object_set_new(tp, "special_tokens", specials);
    if (tok->spm) return tp; /* Gemma's: the template alone */
    json_t *seq = json_object(), *list = json_array();
    json_array_append_new(list, byte_level(tok, 0));
    json_array_append_new(list, tp);
    json_object_set_new(seq, "type", json_string("Sequence"));
    json_object_set_new(seq, "processors", list);
    return seq;
}

/* A Replace step (normalizer or decoder) of Gemma's tokenizer.json: the string `from` to `to`. */
static json_t *replace(const char *from, const char *to) {
    json_t *r = json_object(), *pat = json_object();
    json_object_set_new(r, "type", json_string("Replace"));
    json_object_set_new(pat, "String", json_string(from));
    json_object_set_new(r, "pattern", pat);
    json_object_set_new(r, "content", json_string(to));
    return r;
}

/* SentencePiece-style decoding: U+2581 back to spaces, <0xXX> to bytes, the pieces joined. */
static json_t *spm_decoder(void) {
    json_t *seq = json_object(), *list = json_array(), *bf = json_object(), *fuse = json_object();
    json_array_append_new(list, replace("\xe2\x96\x81", " "));
    json_object_set_new(bf, "type", json_string("ByteFallback"));
    json_array_append_new(list, bf);
    json_object_set_new(fuse, "type", json_string("Fuse"));
    json_array_append_new(list, fuse);
    json_object_set_new(seq, "type", json_string("Sequence"));
    json_object_set_new(seq, "decoders", list);
    return seq;
}

/* The string a merge names for id: its vocabulary string, or an added token's content. */
static json_t *piece(const td_tokenizer *tok, int32_t id) {
    if (tok->is_token[id] & 1) return json_stringn_nocheck(tok->vocab_strings + tok->str_off[id], tok->str_len[id]);
    for (int k = 0; k < tok->n_added; k++)
        if (tok->added[k].id == id) return json_stringn_nocheck(tok->added[k].content, tok->added[k].len);
    return json_null(); /* the builder resolved every merge to an id that is one or the other */
}

td_status td_tokenizer_to_json(const td_tokenizer *tok, char **json) {
    if (json) *json = NULL;
    if (!tok || !json) return td_fail(TD_ERR_INVALID_ARG, "td_tokenizer_to_json: NULL argument");
    int *order = td_malloc((size_t)(tok->n_added ? tok->n_added : 1) * sizeof *order);
    if (!order) return td_fail_nomem("the added tokens");
    for (int i = 0; i < tok->n_added; i++) { /* by id, as tokenizers writes them; insertion sort (a few hundred) */
        int j = i;
        while (j > 0 && tok->added[order[j - 1]].id > tok->added[i].id) order[j] = order[j - 1], j--;
        order[j] = i;
    }
    uint64_t f0 = td_alloc_failures();
    json_t *root = json_object(), *added = json_array(), *vocab = json_object(), *merges = json_array();
    json_object_set_new(root, "version", json_string("1.0"));
    json_object_set_new(root, "truncation", json_null());
    json_object_set_new(root, "padding", json_null());
    for (int i = 0; i < tok->n_added; i++) {
        const td_added_token *t = &tok->added[order[i]];
        json_t *a = json_object();
        json_object_set_new(a, "id", json_integer(t->id));
        json_object_set_new(a, "content", json_stringn_nocheck(t->content, t->len));
        json_object_set_new(a, "single_word", json_boolean(t->single_word));
        json_object_set_new(a, "lstrip", json_boolean(t->lstrip));
        json_object_set_new(a, "rstrip", json_boolean(t->rstrip));
        json_object_set_new(a, "normalized", json_boolean(t->normalized));
        json_object_set_new(a, "special", json_boolean(t->special));
        json_array_append_new(added, a);
    }
    td_free(order);
    json_object_set_new(root, "added_tokens", added);
    json_t *nfc = json_object();
    json_object_set_new(nfc, "type", json_string("NFC"));
    if (tok->nfc) json_object_set_new(root, "normalizer", nfc);
    else if (tok->spm) json_decref(nfc), json_object_set_new(root, "normalizer", replace(" ", "\xe2\x96\x81"));
    else json_decref(nfc), json_object_set_new(root, "normalizer", json_null());
    json_object_set_new(root, "pre_tokenizer", pre_tokenizer(tok));
    json_object_set_new(root, "post_processor", post_processor(tok));
    json_object_set_new(root, "decoder", tok->spm ? spm_decoder() : byte_level(tok, 0));
    json_t *model = json_object();
    json_object_set_new(model, "type", json_string("BPE"));
    json_object_set_new(model, "dropout", json_null());
    if (tok->spm && tok->unk_id >= 0)
        json_object_set_new(model, "unk_token", json_stringn_nocheck(tok->vocab_strings + tok->str_off[tok->unk_id],
                                                                     tok->str_len[tok->unk_id]));
    else json_object_set_new(model, "unk_token", json_null());
    json_object_set_new(model, "continuing_subword_prefix", tok->spm ? json_null() : json_string(""));
    json_object_set_new(model, "end_of_word_suffix", tok->spm ? json_null() : json_string(""));
    json_object_set_new(model, "fuse_unk", json_boolean(tok->spm));
    json_object_set_new(model, "byte_fallback", json_boolean(tok->spm));
    json_object_set_new(model, "ignore_merges", json_boolean(tok->ignore_merges));
    /* vocabulary strings were checked to be UTF-8 without NUL bytes when the tokenizer was built */
    for (int32_t id = 0; id < tok->n_tokens; id++)
        if (tok->is_token[id] & 1)
            json_object_set_new_nocheck(vocab, tok->vocab_strings + tok->str_off[id], json_integer(id));
    for (int64_t i = 0; i < tok->n_merges; i++) {
        json_t *pair = json_array();
        json_array_append_new(pair, piece(tok, tok->merge_a[i]));
        json_array_append_new(pair, piece(tok, tok->merge_b[i]));
        json_array_append_new(merges, pair);
    }
    json_object_set_new(model, "vocab", vocab);
    json_object_set_new(model, "merges", merges);
    json_object_set_new(root, "model", model);
    *json = td_json_dumps_checked(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER, f0);
    json_decref(root);
    return *json ? TD_OK : td_fail_nomem("the tokenizer.json text");
}
