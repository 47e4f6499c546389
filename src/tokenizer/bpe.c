/* BPE over one pre-token: start from one symbol per byte (byte-level) or per character (SentencePiece-style: a
 * character outside the vocabulary becomes its bytes' <0xXX> tokens) and repeatedly merge the adjacent pair with the
 * lowest merge rank (ties: leftmost first), exactly as Hugging Face's Word::merge_all does. A binary heap of
 * candidate pairs keeps long words O(n log n); stale heap entries are skipped when popped. */
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tokenizer_internal.h"
#include "util/alloc.h"
#include "util/error.h"
#include "util/grow.h"

typedef struct cand {
    uint32_t rank;
    int32_t pos;    /* index of the left symbol */
    int32_t merged; /* id the pair merges into */
} cand;

static int cand_less(const cand *a, const cand *b) {
    return a->rank != b->rank ? a->rank < b->rank : a->pos < b->pos;
}

static void heap_push(cand *h, size_t *n, cand c) {
    size_t i = (*n)++;
    h[i] = c;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!cand_less(&h[i], &h[p])) break;
        cand t = h[i];
        h[i] = h[p];
        h[p] = t;
        i = p;
    }
}

static cand heap_pop(cand *h, size_t *n) {
    cand top = h[0];
    h[0] = h[--*n];
    size_t i = 0;
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < *n && cand_less(&h[l], &h[m])) m = l;
        if (r < *n && cand_less(&h[r], &h[m])) m = r;
        if (m == i) break;
        cand t = h[i];
        h[i] = h[m];
        h[m] = t;
        i = m;
    }
    return top;
}

static int lookup_merge(const struct td_tokenizer *tok, int32_t a, int32_t b, uint32_t *rank, int32_t *merged) {
    uint64_t v;
    if (!td_u64map_get(&tok->merges, ((uint64_t)(uint32_t)a << 32) | (uint32_t)b, &v)) return 0;
    *rank = (uint32_t)(v >> 32);
    *merged = (int32_t)(uint32_t)v;
    return 1;
}

int td_idvec_push(td_idvec *vec, int32_t id) {
    int32_t *nv = td_grow(vec->v, &vec->cap, vec->n + 1, sizeof *nv, 64);
    if (!nv) return -1;
    vec->v = nv;
    vec->v[vec->n++] = id;
    return 0;
}

td_status td_bpe_encode_word(const struct td_tokenizer *tok, const unsigned char *bytes, size_t len, td_idvec *out) {
    if (len == 0) return TD_OK;
    if (tok->ignore_merges && tok->spm) {
        int32_t id;
        if (td_strmap_get(&tok->vocab, (const char *)bytes, len, &id) && (tok->is_token[id] & 1))
            return td_idvec_push(out, id) ? td_fail_nomem("token ids") : TD_OK;
    } else if (tok->ignore_merges) { /* a word that is itself in the vocabulary is taken whole */
        char buf[256 * 2];
        if (len <= 128) {
            size_t n = 0;
            for (size_t i = 0; i < len; i++) n += (size_t)td_utf8_put(td_byte_to_cp(bytes[i]), buf + n);
            int32_t id;
            if (td_strmap_get(&tok->vocab, buf, n, &id)) {
                return td_idvec_push(out, id) ? td_fail_nomem("token ids") : TD_OK;
            }
        }
    }
    if (len == 1 && !tok->spm) return td_idvec_push(out, tok->byte_token[bytes[0]]) ? td_fail_nomem("token ids") : TD_OK;

    /* Each merge pushes at most 2 candidates and the start pushes at most len-1: 3*len bounds the heap. */
    enum { SMALL = 64 };
    int32_t sid_s[SMALL], prev_s[SMALL], next_s[SMALL];
    cand heap_s[SMALL * 3];
    int32_t *sid = sid_s, *prev = prev_s, *next = next_s;
    cand *heap = heap_s;
    void *big = NULL;
    if (len > SMALL) {
        big = td_malloc(len * 3 * sizeof(int32_t) + 3 * len * sizeof(cand));
        if (!big) return td_fail_nomem("a BPE word");
        sid = big;
        prev = sid + len;
        next = prev + len;
        heap = (cand *)(next + len);
    }

    size_t ns = 0; /* symbols: at most one per byte */
    if (tok->spm) {
        for (size_t i = 0; i < len;) {
            size_t at = i;
            int32_t id;
            if (td_utf8_next(bytes, len, &i) < 0) i = at + 1; /* validated before: cannot happen */
            if (td_strmap_get(&tok->vocab, (const char *)bytes + at, i - at, &id) && (tok->is_token[id] & 1))
                sid[ns++] = id;
            else
                for (size_t k = at; k < i; k++) sid[ns++] = tok->byte_token[bytes[k]];
        }
    } else {
        for (size_t i = 0; i < len; i++) sid[ns++] = tok->byte_token[bytes[i]];
    }
    for (size_t i = 0; i < ns; i++) {
        prev[i] = (int32_t)i - 1;
        next[i] = i + 1 < ns ? (int32_t)i + 1 : -1;
    }
    size_t hn = 0;
    for (size_t i = 0; i + 1 < ns; i++) {
        cand c;
        c.pos = (int32_t)i;
        if (lookup_merge(tok, sid[i], sid[i + 1], &c.rank, &c.merged)) heap_push(heap, &hn, c);
    }
    while (hn > 0) {
        cand c = heap_pop(heap, &hn);
        int32_t p = c.pos;
        if (sid[p] < 0) continue; /* symbol was absorbed */
        int32_t q = next[p];
        if (q < 0) continue;
        uint32_t rank;
        int32_t merged;
        if (!lookup_merge(tok, sid[p], sid[q], &rank, &merged) || merged != c.merged || rank != c.rank)
            continue; /* stale: one side changed since this candidate was pushed */
        sid[p] = merged;
        sid[q] = -1;
        next[p] = next[q];
        if (next[q] >= 0) prev[next[q]] = p;
        if (prev[p] >= 0) {
            cand n;
            n.pos = prev[p];
            if (lookup_merge(tok, sid[prev[p]], sid[p], &n.rank, &n.merged)) heap_push(heap, &hn, n);
        }
        if (next[p] >= 0) {
            cand n;
            n.pos = p;
            if (lookup_merge(tok, sid[p], sid[next[p]], &n.rank, &n.merged)) heap_push(heap, &hn, n);
        }
    }
    td_status st = TD_OK;
    for (int32_t i = 0; i >= 0; i = next[i]) {
        if (td_idvec_push(out, sid[i])) {
            st = td_fail_nomem("token ids");
            break;
        }
    }
    td_free(big);
    return st;
}
