/* The decider's suffix tokens, kept by text. A corpus run, the server and `evaluate --debias cyclic` ask the same
 * criteria again and again, and tokenizing a 45-token suffix (NFC, the pre-tokenizer's regex, BPE merges) costs
 * ~0.1 ms of host time: beside a GPU pass of 144 suffixes (~15-20 ms at the speed aimed for) it would be most of a
 * call. Tokenization is a function of the text alone (the decider's tokenizer never changes), so a kept result is
 * the same ids, bit for bit: the cache changes time, never an answer.
 * Bounded: at most TD_SUFFIX_KEEP suffixes and TD_SUFFIX_KEEP_BYTES bytes of text and ids; when a new one would pass
 * either bound, everything kept is dropped (criteria sets repeat whole, so the set in use is kept again at once).
 * Memory for keeping a suffix that cannot be had fails the call (TD_ERR_NOMEM), as every allocation of the library
 * does: the installed allocator's refusals are reported, never absorbed. */
#include <string.h>

#include "decide/decide_internal.h"
#include "util/alloc.h"
#include "util/error.h"

#define TD_SUFFIX_KEEP 4096
#define TD_SUFFIX_KEEP_BYTES ((size_t)16 << 20)

void td_suffix_cache_clear(td_suffix_cache *c) {
    for (size_t i = 0; i < c->count; i++) {
        td_free(c->text[i]);
        td_free(c->ids[i]);
    }
    td_free(c->text);
    td_free(c->ids);
    td_free(c->n);
    td_strmap_free(&c->map);
    memset(c, 0, sizeof *c);
}

/* Room for TD_SUFFIX_KEEP entries (the map sized once: it never grows). 0, or -1 when memory is short. */
static int cache_open(td_suffix_cache *c) {
    if (c->text) return 0;
    c->text = td_calloc(TD_SUFFIX_KEEP, sizeof *c->text);
    c->ids = td_calloc(TD_SUFFIX_KEEP, sizeof *c->ids);
    c->n = td_calloc(TD_SUFFIX_KEEP, sizeof *c->n);
    if (!c->text || !c->ids || !c->n || td_strmap_init(&c->map, TD_SUFFIX_KEEP) != 0) {
        td_suffix_cache_clear(c);
        return -1;
    }
    return 0;
}

static td_status cache_keep(td_suffix_cache *c, const char *s, size_t len, const int32_t *ids, size_t n) {
    size_t bytes = len + 1 + n * sizeof *ids;
    if (c->count == TD_SUFFIX_KEEP || c->bytes + bytes > TD_SUFFIX_KEEP_BYTES) td_suffix_cache_clear(c);
    if (bytes > TD_SUFFIX_KEEP_BYTES) return TD_OK; /* too long to keep: tokenized every time */
    if (cache_open(c) != 0) return td_fail_nomem("the suffix cache");
    char *text = td_malloc(len + 1);
    int32_t *copy = td_malloc(n ? n * sizeof *ids : 1);
    if (!text || !copy) {
        td_free(text);
        td_free(copy);
        return td_fail_nomem("keeping a suffix's tokens");
    }
    memcpy(text, s, len);
    text[len] = 0;
    if (n) memcpy(copy, ids, n * sizeof *ids);
    if (td_strmap_put(&c->map, text, len, (int32_t)c->count) != 0) { /* cannot happen below TD_SUFFIX_KEEP keys */
        td_free(text);
        td_free(copy);
        return TD_OK;
    }
    c->text[c->count] = text;
    c->ids[c->count] = copy;
    c->n[c->count] = (int32_t)n;
    c->count++;
    c->bytes += bytes;
    return TD_OK;
}

td_status td_suffix_tokens(td_decider *d, const char *s, size_t len, int32_t **out, size_t *n_out) {
    td_suffix_cache *c = &d->suffixes;
    int32_t at;
    *out = NULL;
    *n_out = 0;
    if (c->count && td_strmap_get(&c->map, s, len, &at)) {
        size_t n = (size_t)c->n[at];
        int32_t *ids = td_malloc(n ? n * sizeof *ids : 1);
        if (!ids) return td_fail_nomem("a suffix's tokens");
        if (n) memcpy(ids, c->ids[at], n * sizeof *ids);
        *out = ids;
        *n_out = n;
        return TD_OK;
    }
    td_status st = td_tokenize(d->tok, s, len, 0, out, n_out);
    if (st == TD_OK && (st = cache_keep(c, s, len, *out, *n_out)) != TD_OK) {
        td_free(*out);
        *out = NULL;
        *n_out = 0;
    }
    return st;
}
