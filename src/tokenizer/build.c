/* The tables of a byte-level BPE tokenizer from its parts (build.h): the tokenizer.json loader and the GGUF
 * loader (model/) both end here, so the two sources are checked alike and decode alike. */
#include "tokenizer/build.h"

#include <stdio.h>
#include <string.h>

#include "tokenizer/tokenizer_internal.h"
#include "util/alloc.h"
#include "util/error.h"
#include "util/strbuf.h"

int td_bpe_merge_split(const char *s, size_t len, td_bpe_merge *out) {
    const char *sp = memchr(s, ' ', len);
    if (!sp || memchr(sp + 1, ' ', len - (size_t)(sp + 1 - s))) return -1;
    out->a = s, out->alen = (size_t)(sp - s), out->b = sp + 1, out->blen = len - out->alen - 1;
    return 0;
}

td_status td_tok_add_split(td_tokenizer *tok, const char *pat, size_t len, int literal, td_split_behavior b, int invert,
                           const char *name) {
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

/* Appends len bytes and a NUL to the string buffer; returns the offset of the copy. */
static uint64_t put_string(td_tokenizer *tok, size_t *off, const char *s, size_t len) {
    uint64_t at = *off;
    memcpy(tok->vocab_strings + at, s, len);
    tok->vocab_strings[at + len] = 0;
    *off += len + 1;
    return at;
}

/* The byte a SentencePiece byte-fallback token "<0xXX>" stands for, or -1. */
static int spm_byte(const char *s, size_t n) {
    static const char hex[] = "0123456789ABCDEF";
    if (n != 6 || memcmp(s, "<0x", 3) != 0 || s[5] != '>') return -1;
    const char *h = strchr(hex, s[3]), *l = strchr(hex, s[4]);
    return h && l && s[3] && s[4] ? (int)((h - hex) * 16 + (l - hex)) : -1;
}

td_status td_bpe_build_model(td_tokenizer *tok, const td_bpe_parts *p) {
    const char *name = p->name;
    td_status st = TD_OK;

    /* ids: vocabulary and added tokens together decide the id space */
    int64_t max_id = -1;
    size_t bytes = 0;
    for (size_t i = 0; i < p->n_vocab; i++) {
        const td_bpe_token *t = &p->vocab[i];
        if (t->id < 0 || t->id >= TD_MAX_TOKEN_ID)
            return td_fail(TD_ERR_FORMAT, "%s: %s: id %d of \"%.*s\" is not in 0..%d", name, p->vocab_key, t->id,
                           (int)(t->len < 64 ? t->len : 64), t->s, TD_MAX_TOKEN_ID - 1);
        if (t->id > max_id) max_id = t->id;
        bytes += t->len + 1;
    }
    for (size_t i = 0; i < p->n_added; i++) {
        const td_bpe_added *a = &p->added[i];
        if (a->id < 0 || a->id >= TD_MAX_TOKEN_ID)
            return td_fail(TD_ERR_FORMAT, "%s: added token %zu: id %d out of range", name, i, a->id);
        if (a->len == 0) return td_fail(TD_ERR_FORMAT, "%s: added token %d: empty content", name, a->id);
        if (memchr(a->content, 0, a->len) || td_utf8_invalid_at(a->content, a->len) != (size_t)-1)
            return td_fail(TD_ERR_FORMAT, "%s: added token %d: content is not valid UTF-8 without NUL bytes", name,
                           a->id);
        if (a->id > max_id) max_id = a->id;
        bytes += a->len + 1;
    }
    if (max_id < 0) return td_fail(TD_ERR_FORMAT, "%s: the vocabulary is empty", name);
    tok->n_tokens = (int32_t)(max_id + 1);
    size_t n_tok = (size_t)tok->n_tokens;

    tok->added = td_calloc(p->n_added ? p->n_added : 1, sizeof *tok->added);
    tok->vocab_strings = td_malloc(bytes ? bytes : 1);
    tok->is_token = td_calloc(n_tok, 1);
    tok->str_off = td_malloc(n_tok * sizeof *tok->str_off);
    tok->str_len = td_calloc(n_tok, sizeof *tok->str_len);
    /* per id, the text its bytes come from: the vocabulary string, or an added token's content */
    const char **id_str = td_calloc(n_tok, sizeof *id_str);
    uint32_t *id_len = td_calloc(n_tok, sizeof *id_len);
    if (!tok->added || !tok->vocab_strings || !tok->is_token || !tok->str_off || !tok->str_len || !id_str || !id_len ||
        td_strmap_init(&tok->vocab, p->n_vocab + p->n_added)) {
        st = td_fail_nomem("the vocabulary");
        goto done;
    }
    for (size_t id = 0; id < n_tok; id++) tok->str_off[id] = UINT64_MAX;

    size_t off = 0;
    for (size_t i = 0; i < p->n_vocab; i++) {
        const td_bpe_token *t = &p->vocab[i];
        int32_t other;
        if (tok->is_token[t->id]) {
            st = td_fail(TD_ERR_FORMAT, "%s: id %d appears twice in %s", name, t->id, p->vocab_key);
            goto done;
        }
        if (memchr(t->s, 0, t->len)) {
            st = td_fail(TD_ERR_FORMAT, "%s: %s: the string of id %d contains a NUL byte", name, p->vocab_key, t->id);
            goto done;
        }
        if (td_strmap_get(&tok->vocab, t->s, t->len, &other)) {
            st = td_fail(TD_ERR_FORMAT, "%s: %s: ids %d and %d have the same string \"%.*s\"", name, p->vocab_key, other,
                         t->id, (int)(t->len < 64 ? t->len : 64), t->s);
            goto done;
        }
        tok->str_off[t->id] = put_string(tok, &off, t->s, t->len);
        tok->str_len[t->id] = (uint32_t)t->len;
        tok->is_token[t->id] = 1;
        id_str[t->id] = tok->vocab_strings + tok->str_off[t->id];
        id_len[t->id] = (uint32_t)t->len;
        td_strmap_put(&tok->vocab, id_str[t->id], t->len, t->id);
    }
    for (size_t i = 0; i < p->n_added; i++) {
        const td_bpe_added *a = &p->added[i];
        if (tok->is_token[a->id] & 2) { /* the same token listed twice is harmless; two tokens on one id are not */
            if (id_len[a->id] == a->len && memcmp(id_str[a->id], a->content, a->len) == 0) continue;
            st = td_fail(TD_ERR_FORMAT, "%s: id %d is two different added tokens", name, a->id);
            goto done;
        }
        td_added_token *t = &tok->added[tok->n_added++];
        uint64_t at = put_string(tok, &off, a->content, a->len);
        t->content = tok->vocab_strings + at;
        t->len = (uint32_t)a->len;
        t->id = a->id;
        t->special = a->special, t->normalized = a->normalized, t->lstrip = a->lstrip, t->rstrip = a->rstrip;
        t->single_word = a->single_word;
        if (!tok->is_token[a->id]) tok->str_off[a->id] = at, tok->str_len[a->id] = t->len;
        tok->is_token[a->id] |= 2; /* decodes to its content verbatim */
        id_str[a->id] = t->content;
        id_len[a->id] = t->len;
        td_strmap_put(&tok->vocab, t->content, t->len, t->id);
    }

    /* raw bytes per id: byte-level characters map back to bytes; added tokens are their content */
    size_t total = 0;
    for (size_t id = 0; id < n_tok; id++) total += id_len[id];
    tok->bytes = td_malloc(total ? total : 1);
    tok->bytes_off = td_malloc((n_tok + 1) * sizeof *tok->bytes_off);
    if (!tok->bytes || !tok->bytes_off) {
        st = td_fail_nomem("token bytes");
        goto done;
    }
    off = 0;
    for (size_t id = 0; id < n_tok; id++) {
        tok->bytes_off[id] = off;
        const unsigned char *s = (const unsigned char *)id_str[id];
        size_t n = id_len[id], i = 0;
        int fb = spm_byte(id_str[id], n);
        /* SentencePiece-style: the decoder (Replace U+2581 -> ' ', ByteFallback) reads every token, added ones too */
        if (tok->spm && fb >= 0) { /* <0xXX>: the byte itself */
            tok->bytes[off++] = (char)fb;
            continue;
        }
        if (tok->spm) { /* U+2581 is the space */
            while (i < n)
                if (i + 3 <= n && memcmp(s + i, "\xe2\x96\x81", 3) == 0) tok->bytes[off++] = ' ', i += 3;
                else tok->bytes[off++] = (char)s[i++];
            continue;
        }
        if ((tok->is_token[id] & 2) || !tok->byte_level) {
            memcpy(tok->bytes + off, s, n);
            off += n;
            continue;
        }
        while (i < n) {
            size_t at = i;
            int32_t cp = td_utf8_next(s, n, &i);
            if (cp < 0) {
                st = td_fail(TD_ERR_FORMAT, "%s: vocabulary entry of id %zu is not valid UTF-8", name, id);
                goto done;
            }
            int b = td_cp_to_byte((uint32_t)cp);
            if (b >= 0) tok->bytes[off++] = (char)b;
            else { /* outside the byte-level alphabet: keep the character's own bytes */
                memcpy(tok->bytes + off, s + at, i - at);
                off += i - at;
            }
        }
    }
    tok->bytes_off[n_tok] = off;

    /* the single-byte tokens every byte-level word starts from; SentencePiece's byte-fallback tokens <0xXX> */
    for (int b = 0; b < 256; b++) {
        char buf[8];
        int n = tok->spm ? snprintf(buf, sizeof buf, "<0x%02X>", b)
                         : td_utf8_put(tok->byte_level ? td_byte_to_cp((uint8_t)b) : (uint32_t)b, buf);
        tok->byte_token[b] = -1;
        if (!td_strmap_get(&tok->vocab, buf, (size_t)n, &tok->byte_token[b]) && (tok->byte_level || tok->spm)) {
            st = td_fail(TD_ERR_FORMAT, "%s: the vocabulary has no token for byte 0x%02x%s", name, b,
                         tok->spm ? " (byte_fallback needs <0x00> .. <0xFF>)" : "");
            goto done;
        }
    }

    /* merges: (left, right) -> (rank, merged id) */
    tok->merge_a = td_malloc((p->n_merges ? p->n_merges : 1) * sizeof *tok->merge_a);
    tok->merge_b = td_malloc((p->n_merges ? p->n_merges : 1) * sizeof *tok->merge_b);
    if (td_u64map_init(&tok->merges, p->n_merges) || !tok->merge_a || !tok->merge_b) {
        st = td_fail_nomem("the merge table");
        goto done;
    }
    td_strbuf cat = TD_STRBUF_INIT; /* left + right, the merged token's text */
    for (size_t i = 0; i < p->n_merges; i++) {
        const td_bpe_merge *m = &p->merges[i];
        int32_t ia, ib, im;
        if (!td_strmap_get(&tok->vocab, m->a, m->alen, &ia) || !td_strmap_get(&tok->vocab, m->b, m->blen, &ib)) {
            st = td_fail(TD_ERR_FORMAT, "%s: %s[%zu]: \"%.*s\" or \"%.*s\" is not in the vocabulary", name, p->merges_key,
                         i, (int)m->alen, m->a, (int)m->blen, m->b);
            break;
        }
        td_strbuf_clear(&cat);
        td_strbuf_put(&cat, m->a, m->alen);
        td_strbuf_put(&cat, m->b, m->blen);
        if (cat.oom) {
            st = td_fail_nomem("a merge");
            break;
        }
        if (!td_strmap_get(&tok->vocab, cat.s, cat.n, &im)) {
            st = td_fail(TD_ERR_FORMAT, "%s: %s[%zu]: the merged token \"%.*s\" is not in the vocabulary", name,
                         p->merges_key, i, (int)cat.n, cat.s);
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
    td_strbuf_free(&cat);
done:
    td_free(id_str);
    td_free(id_len);
    return st;
}

td_status td_tokenizer_build(const td_bpe_parts *parts, const td_bpe_options *opt, const char *split_regex,
                             td_tokenizer **out) {
    if (!parts || !opt || (!split_regex && !opt->spm) || !out)
        return td_fail(TD_ERR_INVALID_ARG, "td_tokenizer_build: NULL argument");
    *out = NULL;
    uint64_t f0 = td_alloc_failures();
    td_tokenizer *tok = td_calloc(1, sizeof *tok);
    if (!tok) return td_fail_nomem("a tokenizer");
    tok->nfc = opt->nfc;
    tok->ignore_merges = opt->ignore_merges;
    tok->bos_id = -1;
    tok->unk_id = -1;
    tok->byte_level = !opt->spm;
    tok->spm = tok->space_to_meta = opt->spm != 0;
    td_status st = opt->spm ? td_tok_add_split(tok, " ", 1, 1, TD_SPLIT_MERGED_WITH_PREVIOUS, 0, parts->name)
                            : td_tok_add_split(tok, split_regex, strlen(split_regex), 0, TD_SPLIT_ISOLATED, 0, parts->name);
    tok->byte_level_at = tok->n_split;
    if (st == TD_OK) st = td_bpe_build_model(tok, parts);
    if (st == TD_OK && opt->spm && opt->unk_id >= 0) {
        if (opt->unk_id >= tok->n_tokens || !tok->is_token[opt->unk_id])
            st = td_fail(TD_ERR_FORMAT, "%s: the unknown token id %d is not a token", parts->name, opt->unk_id);
        else tok->unk_id = opt->unk_id;
    }
    if (st == TD_OK && opt->bos_id >= 0) {
        if (opt->bos_id >= tok->n_tokens || !tok->is_token[opt->bos_id])
            st = td_fail(TD_ERR_FORMAT, "%s: the BOS token id %d is not a token", parts->name, opt->bos_id);
        else tok->bos_id = opt->bos_id;
    }
    if (st == TD_OK && td_alloc_failures() != f0) /* a refusal PCRE2 took for something else */
        st = td_fail(TD_ERR_NOMEM, "%s: out of memory while loading the tokenizer", parts->name);
    if (st != TD_OK) {
        td_tokenizer_free(tok);
        return st;
    }
    *out = tok;
    return TD_OK;
}
