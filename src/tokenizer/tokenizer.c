/* Encoding and decoding: added tokens are split out first (raw text, then normalized text for tokens marked
 * "normalized"), the remaining text is NFC-normalized, pre-tokenized and BPE-encoded. */
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "tokenizer/tokenizer_internal.h"
#include "util/alloc.h"
#include "util/error.h"
#include "util/strbuf.h"

int32_t td_tokenizer_n_tokens(const td_tokenizer *tok) { return tok ? tok->n_tokens : 0; }

const char *td_token_bytes(const td_tokenizer *tok, int32_t id, size_t *len) {
    if (!tok || id < 0 || id >= tok->n_tokens || !tok->is_token[id]) {
        if (len) *len = 0;
        return NULL;
    }
    if (len) *len = (size_t)(tok->bytes_off[id + 1] - tok->bytes_off[id]);
    return tok->bytes + tok->bytes_off[id];
}

int32_t td_token_lookup(const td_tokenizer *tok, const char *piece) {
    int32_t id;
    if (!tok || !piece) return -1;
    for (int i = 0; i < tok->n_added; i++)
        if (strcmp(tok->added[i].content, piece) == 0) return tok->added[i].id;
    return td_strmap_get(&tok->vocab, piece, strlen(piece), &id) ? id : -1;
}

static int is_space_byte(unsigned char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

/* A "word" character for single_word added tokens: letters, marks, numbers and '_'. */
static int is_word_cp(int32_t cp) {
    if (cp == '_') return 1;
    utf8proc_category_t c = utf8proc_category(cp);
    return (c >= UTF8PROC_CATEGORY_LU && c <= UTF8PROC_CATEGORY_NO);
}

/* Finds the leftmost-longest added-token match in text[from, len) among tokens whose `normalized` flag equals
 * `normalized`. Returns the token index or -1; ms and me receive the match (widened by lstrip/rstrip). */
static int find_added(const td_tokenizer *tok, const char *text, size_t len, size_t from, int normalized,
                      size_t *ms, size_t *me) {
    for (size_t p = from; p < len; p++) {
        int best = -1;
        for (int i = 0; i < tok->n_added; i++) {
            const td_added_token *t = &tok->added[i];
            if (t->normalized != normalized || t->len > len - p || text[p] != t->content[0]) continue;
            if (memcmp(text + p, t->content, t->len) != 0) continue;
            if (t->single_word) {
                size_t q = p;
                if (p > 0) { /* the character before must not be a word character */
                    size_t kk = td_utf8_start(text, 0, p - 1);
                    if (is_word_cp(td_utf8_next((const unsigned char *)text, len, &kk))) continue;
                }
                q = p + t->len;
                if (q < len && is_word_cp(td_utf8_next((const unsigned char *)text, len, &q))) continue;
            }
            if (best < 0 || t->len > tok->added[best].len) best = i;
        }
        if (best >= 0) {
            const td_added_token *t = &tok->added[best];
            size_t s = p, e = p + t->len;
            if (t->lstrip)
                while (s > from && is_space_byte((unsigned char)text[s - 1])) s--;
            if (t->rstrip)
                while (e < len && is_space_byte((unsigned char)text[e])) e++;
            *ms = s;
            *me = e;
            return best;
        }
    }
    return -1;
}

static int has_normalized_added(const td_tokenizer *tok) {
    for (int i = 0; i < tok->n_added; i++)
        if (tok->added[i].normalized) return 1;
    return 0;
}

/* Normalizes one stretch of raw text, splits out "normalized" added tokens, encodes the rest. */
static td_status encode_segment(const td_tokenizer *tok, const char *text, size_t len, int split_added,
                                td_idvec *out) {
    if (len == 0) return TD_OK;
    char *norm = NULL;
    const char *t = text;
    size_t n = len;
    if (tok->nfc) {
        int ascii = 1;
        for (size_t i = 0; i < len && ascii; i++) ascii = (unsigned char)text[i] < 0x80;
        if (!ascii) {
            utf8proc_uint8_t *o = NULL;
            utf8proc_ssize_t r = utf8proc_map((const utf8proc_uint8_t *)text, (utf8proc_ssize_t)len, &o,
                                              UTF8PROC_STABLE | UTF8PROC_COMPOSE);
            if (r < 0) return td_fail(TD_ERR_FORMAT, "NFC normalization failed: %s", utf8proc_errmsg(r));
            norm = (char *)o;
            t = norm;
            n = (size_t)r;
        }
    }
    if (tok->space_to_meta && memchr(t, ' ', n)) { /* SentencePiece's space: U+2581 (3 bytes) */
        size_t spaces = 0;
        for (size_t i = 0; i < n; i++) spaces += t[i] == ' ';
        char *m = malloc(n + 2 * spaces + 1);
        if (!m) {
            free(norm);
            return td_fail_nomem("the normalized text");
        }
        size_t o = 0;
        for (size_t i = 0; i < n; i++)
            if (t[i] == ' ') memcpy(m + o, "\xe2\x96\x81", 3), o += 3;
            else m[o++] = t[i];
        free(norm);
        norm = m;
        t = m;
        n = o;
    }
    td_status st = TD_OK;
    if (split_added && has_normalized_added(tok)) {
        size_t pos = 0, ms, me;
        int k;
        while (st == TD_OK && (k = find_added(tok, t, n, pos, 1, &ms, &me)) >= 0) {
            st = td_pretokenize_and_encode(tok, t + pos, ms - pos, out);
            if (st == TD_OK && td_idvec_push(out, tok->added[k].id)) st = td_fail_nomem("token ids");
            pos = me;
        }
        if (st == TD_OK) st = td_pretokenize_and_encode(tok, t + pos, n - pos, out);
    } else {
        st = td_pretokenize_and_encode(tok, t, n, out);
    }
    free(norm); /* utf8proc allocates with the C library's malloc */
    return st;
}

/* 1 when [s, e) lies inside one of the spans (pairs [start, end)); spans == NULL: everywhere. */
static int inside_spans(const size_t *spans, size_t n_spans, size_t s, size_t e) {
    if (!spans) return 1;
    for (size_t i = 0; i < n_spans; i++)
        if (spans[2 * i] <= s && e <= spans[2 * i + 1]) return 1;
    return 0;
}

td_status td_tokenize(const td_tokenizer *tok, const char *text, size_t len, unsigned flags, int32_t **ids,
                      size_t *n_ids) {
    return td_tokenize_spans(tok, text, len, flags, NULL, 0, ids, n_ids);
}

td_status td_tokenize_spans(const td_tokenizer *tok, const char *text, size_t len, unsigned flags,
                            const size_t *special_spans, size_t n_spans, int32_t **ids, size_t *n_ids) {
    if (!tok || !ids || !n_ids || (!text && len) || (n_spans && !special_spans))
        return td_fail(TD_ERR_INVALID_ARG, "td_tokenize: NULL argument");
    for (size_t i = 0; i < n_spans; i++)
        if (special_spans[2 * i] > special_spans[2 * i + 1] || special_spans[2 * i + 1] > len)
            return td_fail(TD_ERR_INVALID_ARG, "td_tokenize_spans: span %zu is not within the text", i);
    *ids = NULL;
    *n_ids = 0;
    size_t bad = td_utf8_invalid_at(text, len);
    if (bad != (size_t)-1) return td_fail(TD_ERR_FORMAT, "text is not valid UTF-8 (byte offset %zu)", bad);
    if (flags & ~(TD_TOKENIZE_PARSE_SPECIAL | TD_TOKENIZE_ADD_BOS))
        return td_fail(TD_ERR_INVALID_ARG, "td_tokenize: unknown flags 0x%x", flags);
    td_idvec out = {0};
    td_status st = TD_OK;
    if ((flags & TD_TOKENIZE_ADD_BOS) && tok->bos_id >= 0 && td_idvec_push(&out, tok->bos_id))
        return td_fail_nomem("token ids");
    int split_added = (flags & TD_TOKENIZE_PARSE_SPECIAL) != 0;
    if (split_added) {
        /* with spans, a match outside them is text: the search goes on past its start, the segment stays open */
        size_t pos = 0, from = 0, ms, me;
        int k;
        while (st == TD_OK && (k = find_added(tok, text, len, from, 0, &ms, &me)) >= 0) {
            /* outside the spans: text, except an added token that is not special and is also in the model's
             * vocabulary (Gemma's runs of newlines or U+2581, its HTML tags): those Hugging Face's tokenizer takes
             * wherever they occur, and they mark nothing */
            const td_added_token *at = &tok->added[k];
            if (!inside_spans(special_spans, n_spans, ms, me) && (at->special || !(tok->is_token[at->id] & 1))) {
                from = ms + 1;
                continue;
            }
            st = encode_segment(tok, text + pos, ms - pos, inside_spans(special_spans, n_spans, pos, ms), &out);
            if (st == TD_OK && td_idvec_push(&out, tok->added[k].id)) st = td_fail_nomem("token ids");
            pos = from = me;
        }
        if (st == TD_OK)
            st = encode_segment(tok, text + pos, len - pos, inside_spans(special_spans, n_spans, pos, len), &out);
    } else {
        st = encode_segment(tok, text, len, 0, &out);
    }
    if (st != TD_OK) {
        td_free(out.v);
        return st;
    }
    *ids = out.v;
    *n_ids = out.n;
    return TD_OK;
}

td_status td_detokenize(const td_tokenizer *tok, const int32_t *ids, size_t n_ids, char **text, size_t *len) {
    if (!tok || !text || (!ids && n_ids)) return td_fail(TD_ERR_INVALID_ARG, "td_detokenize: NULL argument");
    *text = NULL;
    if (len) *len = 0;
    td_strbuf raw = TD_STRBUF_INIT;
    for (size_t i = 0; i < n_ids; i++) {
        if (ids[i] < 0) {
            td_strbuf_free(&raw);
            return td_fail(TD_ERR_RANGE, "token id %d at index %zu is negative", ids[i], i);
        }
        size_t blen;
        const char *b = td_token_bytes(tok, ids[i], &blen); /* ids without a token decode to nothing, as in HF */
        if (b) td_strbuf_put(&raw, b, blen);
        if (raw.oom) {
            td_strbuf_free(&raw);
            return td_fail_nomem("decoded text");
        }
    }
    /* Invalid UTF-8 (a token sequence cut inside a character) becomes U+FFFD, one per maximal invalid
     * subpart, as Rust's String::from_utf8_lossy (and so Hugging Face's decode) does. */
    size_t on = td_utf8_lossy(raw.s, raw.n, TD_UTF8_PER_SUBPART, NULL);
    char *t = td_malloc(on + 1);
    if (t) {
        td_utf8_lossy(raw.s, raw.n, TD_UTF8_PER_SUBPART, t);
        t[on] = 0;
    }
    td_strbuf_free(&raw);
    if (!t) return td_fail_nomem("decoded text");
    *text = t;
    if (len) *len = on;
    return TD_OK;
}

int32_t td_tokenizer_bos(const td_tokenizer *tok) { return tok ? tok->bos_id : -1; }
