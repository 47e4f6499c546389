/* SentencePiece vocabularies in GGUF: tokenizer.ggml.model "gemma4" (llama.cpp's name for Gemma's SentencePiece-
 * style BPE with its merges, which this library also writes) and "llama" (as llama.cpp's converter writes Gemma 3's
 * tokenizer.model: pieces, scores and token types, no merges). Hugging Face turns such a model into the BPE of its
 * tokenizer.json with the SentencePiece extractor's rule, and so does this file, so that a GGUF tokenizes as the
 * Hugging Face directory it came from:
 *   - every piece, in id order, contributes the merges (l, r) of its splits at a character boundary whose halves
 *     are both pieces, in the order of (id of l, id of r), each carrying the piece's score;
 *   - the merges are then ranked by score, then by the left half's length in characters, then the right half's,
 *     all descending, ties keeping that order (Python's stable sort with reverse=True).
 * Exporting goes the other way (td_spm_scores): a piece's score is minus the rank of the first merge that makes it,
 * which the rule above turns back into the same ranks when every split of a piece is a merge (Gemma's are).
 *
 * Token types: 1 NORMAL, 2 UNKNOWN, 3 CONTROL (special added tokens: <bos>, <start_of_turn>), 4 USER_DEFINED
 * (added tokens that are not special, also pieces: Gemma's runs of newlines), 5 UNUSED, 6 BYTE (<0xXX>). Every
 * piece is in the BPE vocabulary; types 2, 3 and 4 are also added tokens, matched in the text first. */
#include <stdlib.h>
#include <string.h>

#include "model/gguf.h"
#include "tokenizer/build.h"
#include "tokenizer/vocab.h"
#include "util/alloc.h"
#include "util/error.h"
#include "util/grow.h"
#include "util/utf8.h"

/* ---- pieces by string: open addressing over the ids ---------------------------------------------------------- */

typedef struct piece_map {
    const char *const *s;
    const size_t *len;
    int32_t *slot; /* -1: empty */
    size_t mask;
} piece_map;

static uint64_t hash(const char *s, size_t n) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
    return h;
}

static int map_init(piece_map *m, const char *const *s, const size_t *len, size_t n) {
    size_t cap = 16;
    while (cap < 2 * n) cap *= 2;
    m->s = s, m->len = len, m->mask = cap - 1;
    if (!(m->slot = td_malloc(cap * sizeof *m->slot))) return -1;
    memset(m->slot, 0xff, cap * sizeof *m->slot);
    for (size_t i = 0; i < n; i++) {
        size_t h = (size_t)hash(s[i], len[i]) & m->mask;
        while (m->slot[h] >= 0) {
            int32_t j = m->slot[h];
            if (len[j] == len[i] && memcmp(s[j], s[i], len[i]) == 0) break; /* a duplicate: the first id stays */
            h = (h + 1) & m->mask;
        }
        if (m->slot[h] < 0) m->slot[h] = (int32_t)i;
    }
    return 0;
}

static int32_t map_get(const piece_map *m, const char *s, size_t n) {
    for (size_t h = (size_t)hash(s, n) & m->mask; m->slot[h] >= 0; h = (h + 1) & m->mask) {
        int32_t j = m->slot[h];
        if (m->len[j] == n && memcmp(m->s[j], s, n) == 0) return j;
    }
    return -1;
}

static int32_t n_chars(const char *s, size_t n) { return (int32_t)td_utf8_count(s, n); }

/* ---- the extractor ------------------------------------------------------------------------------------------- */

typedef struct xmerge {
    int32_t l, r;
    float score;
    int32_t cl, cr; /* lengths of the halves in characters */
    int64_t seq;    /* the order before ranking */
} xmerge;

static int by_ids(const void *a, const void *b) {
    const xmerge *x = a, *y = b;
    if (x->l != y->l) return x->l < y->l ? -1 : 1;
    return (x->r > y->r) - (x->r < y->r);
}

static int by_rank(const void *a, const void *b) {
    const xmerge *x = a, *y = b;
    if (x->score != y->score) return x->score > y->score ? -1 : 1;
    if (x->cl != y->cl) return x->cl > y->cl ? -1 : 1;
    if (x->cr != y->cr) return x->cr > y->cr ? -1 : 1;
    return (x->seq > y->seq) - (x->seq < y->seq);
}

/* The merges of n pieces with their scores, ranked (*out: td_free). */
static td_status extract(const char *const *s, const size_t *len, const float *score, size_t n, xmerge **out,
                         size_t *n_out, const char *path) {
    piece_map m;
    if (map_init(&m, s, len, n) != 0) return td_fail_nomem("the SentencePiece vocabulary");
    size_t cap = n + 16, k = 0;
    xmerge *v = td_malloc(cap * sizeof *v);
    td_status st = v ? TD_OK : td_fail_nomem("the merges");
    for (size_t i = 0; st == TD_OK && i < n; i++) {
        size_t first = k;
        for (size_t c = 1; c < len[i]; c++) {
            if (td_utf8_is_cont((unsigned char)s[i][c])) continue; /* not a character boundary */
            int32_t l = map_get(&m, s[i], c), r = map_get(&m, s[i] + c, len[i] - c);
            if (l < 0 || r < 0) continue;
            xmerge *nv = td_grow(v, &cap, k + 1, sizeof *v, 0);
            if (!nv) {
                st = td_fail_nomem("the merges");
                break;
            }
            v = nv;
            v[k++] = (xmerge){l, r, score[i], n_chars(s[i], c), n_chars(s[i] + c, len[i] - c), 0};
        }
        qsort(v + first, k - first, sizeof *v, by_ids);
        for (size_t j = first; j < k; j++) v[j].seq = (int64_t)j;
    }
    td_free(m.slot);
    if (st != TD_OK) {
        td_free(v);
        return st;
    }
    for (size_t i = 0; i < n; i++)
        if (score[i] != score[i]) {
            td_free(v);
            return td_fail(TD_ERR_FORMAT, "%s: tokenizer.ggml.scores[%zu] is NaN", path, i);
        }
    qsort(v, k, sizeof *v, by_rank);
    *out = v;
    *n_out = k;
    return TD_OK;
}

td_status td_gguf_spm_tokenizer(const td_gguf *g, int with_merges, int32_t bos, td_tokenizer **out) {
    const char *path = g->map.path ? g->map.path : "gguf";
    const td_gguf_kv *toks = td_gguf_find(g, "tokenizer.ggml.tokens"), *types = td_gguf_find(g, "tokenizer.ggml.token_type");
    const td_gguf_kv *scores = td_gguf_find(g, "tokenizer.ggml.scores"), *merges = NULL;
    if (with_merges) {
        merges = td_gguf_find(g, "tokenizer.ggml.merges");
        if (!merges || merges->type != TD_GGUF_ARRAY || merges->elem_type != TD_GGUF_STRING)
            return td_fail(TD_ERR_FORMAT, "%s: tokenizer.ggml.merges must be an array of strings (\"gemma4\" is BPE)", path);
    }
    int prefix = 1; /* llama.cpp's default for SentencePiece */
    td_status st = td_gguf_get_bool(g, "tokenizer.ggml.add_space_prefix", 0, &prefix);
    if (st != TD_OK) return st;
    if (prefix)
        return td_fail(TD_ERR_UNSUPPORTED, "%s: a SentencePiece tokenizer that adds a space prefix (tokenizer.ggml."
                       "add_space_prefix true or absent, as Llama 2's) is not supported; Gemma 3's sets it false", path);
    if (!toks || toks->type != TD_GGUF_ARRAY || toks->elem_type != TD_GGUF_STRING || toks->n == 0)
        return td_fail(TD_ERR_FORMAT, "%s: tokenizer.ggml.tokens must be a non-empty array of strings", path);
    if (toks->n > TD_MAX_TOKEN_ID)
        return td_fail(TD_ERR_FORMAT, "%s: tokenizer.ggml.tokens has %llu entries, more than %d", path,
                       (unsigned long long)toks->n, TD_MAX_TOKEN_ID);
    if (!types || types->type != TD_GGUF_ARRAY || types->n != toks->n ||
        !(types->elem_type <= TD_GGUF_I32 || types->elem_type == TD_GGUF_U64 || types->elem_type == TD_GGUF_I64))
        return td_fail(TD_ERR_FORMAT, "%s: tokenizer.ggml.token_type must be an array of integers, one per token (%llu)",
                       path, (unsigned long long)toks->n);
    if (!merges && (!scores || scores->type != TD_GGUF_ARRAY || scores->elem_type != TD_GGUF_F32 || scores->n != toks->n))
        return td_fail(TD_ERR_FORMAT, "%s: tokenizer.ggml.scores must be an array of floats, one per token (%llu): a "
                       "SentencePiece vocabulary ranks its merges by them", path, (unsigned long long)toks->n);
    size_t n = (size_t)toks->n, n_added = 0;
    int32_t unk = -1;
    for (size_t i = 0; i < n; i++) {
        int64_t t = td_gguf_array_int(types, i);
        if (t < 1 || t > 6)
            return td_fail(TD_ERR_UNSUPPORTED, "%s: tokenizer.ggml.token_type[%zu] is %lld (SentencePiece's are 1 to 6)",
                           path, i, (long long)t);
        n_added += t == 2 || t == 3 || t == 4;
        if (t == 2 && unk < 0) unk = (int32_t)i;
    }
    const char **s = td_malloc(n * sizeof *s);
    size_t *len = td_malloc(n * sizeof *len);
    float *sc = td_malloc(n * sizeof *sc);
    td_bpe_token *vocab = td_malloc(n * sizeof *vocab);
    td_bpe_added *added = td_calloc(n_added ? n_added : 1, sizeof *added);
    xmerge *xm = NULL;
    td_bpe_merge *mv = NULL;
    size_t nm = 0, na = 0;
    st = s && len && sc && vocab && added ? TD_OK : td_fail_nomem("the vocabulary");
    const uint8_t *it = NULL;
    for (size_t i = 0; st == TD_OK && i < n; i++) {
        uint64_t l;
        td_gguf_next_str(toks, &it, &s[i], &l);
        len[i] = (size_t)l;
        sc[i] = merges ? 0.0f : td_gguf_array_f32(scores, i);
        vocab[i] = (td_bpe_token){s[i], len[i], (int32_t)i};
        int64_t t = td_gguf_array_int(types, i);
        if (t == 2 || t == 3 || t == 4) added[na++] = (td_bpe_added){s[i], len[i], (int32_t)i, t != 4, 0, 0, 0, 0};
    }
    if (merges) { /* "gemma4": the merges as written */
        nm = (size_t)merges->n;
        if (st == TD_OK && !(mv = td_malloc((nm ? nm : 1) * sizeof *mv))) st = td_fail_nomem("the merges");
        it = NULL;
        for (size_t i = 0; st == TD_OK && i < nm; i++) {
            const char *m;
            uint64_t l;
            td_gguf_next_str(merges, &it, &m, &l);
            if (td_bpe_merge_split(m, (size_t)l, &mv[i]) != 0)
                st = td_fail(TD_ERR_FORMAT, "%s: tokenizer.ggml.merges[%zu] \"%.*s\" is not two tokens separated by one "
                             "space", path, i, (int)(l < 64 ? l : 64), m);
        }
    } else { /* "llama": the merges from the scores */
        if (st == TD_OK) st = extract(s, len, sc, n, &xm, &nm, path);
        if (st == TD_OK && !(mv = td_malloc((nm ? nm : 1) * sizeof *mv))) st = td_fail_nomem("the merges");
        for (size_t i = 0; st == TD_OK && i < nm; i++)
            mv[i] = (td_bpe_merge){s[xm[i].l], s[xm[i].r], len[xm[i].l], len[xm[i].r]};
    }
    if (st == TD_OK) {
        td_bpe_parts parts = {path, "tokenizer.ggml.tokens", merges ? "tokenizer.ggml.merges" : "tokenizer.ggml.scores",
                              vocab, n, added, na, mv, nm};
        td_bpe_options opt = {0, 0, bos, 1, unk};
        st = td_tokenizer_build(&parts, &opt, NULL, out);
    }
    td_free(s), td_free(len), td_free(sc), td_free(vocab), td_free(added), td_free(xm), td_free(mv);
    return st;
}

td_status td_spm_scores(const td_tokenizer *tok, float **out) {
    *out = NULL;
    int32_t n = td_tokenizer_n_tokens(tok);
    int64_t nm = td_vocab_n_merges(tok);
    float *sc = td_malloc((size_t)(n ? n : 1) * sizeof *sc);
    piece_map m = {0};
    const char **s = td_malloc((size_t)(n ? n : 1) * sizeof *s);
    size_t *len = td_malloc((size_t)(n ? n : 1) * sizeof *len);
    if (!sc || !s || !len) goto oom;
    for (int32_t i = 0; i < n; i++) {
        td_piece_kind kind;
        s[i] = td_vocab_piece(tok, i, &len[i], &kind);
        if (!s[i]) s[i] = "", len[i] = 0;
        sc[i] = -(float)(nm + i); /* made by no merge: below every merge */
    }
    if (map_init(&m, s, len, (size_t)n) != 0) goto oom;
    for (int64_t r = nm - 1; r >= 0; r--) { /* the first merge that makes a piece gives its score */
        int32_t a, b;
        td_vocab_merge(tok, r, &a, &b);
        size_t la = len[a], lb = len[b];
        char buf[512];
        if (la + lb > sizeof buf) continue; /* no piece is that long */
        memcpy(buf, s[a], la), memcpy(buf + la, s[b], lb);
        int32_t p = map_get(&m, buf, la + lb);
        if (p >= 0) sc[p] = -(float)r;
    }
    td_free(m.slot), td_free(s), td_free(len);
    *out = sc;
    return TD_OK;
oom:
    td_free(m.slot), td_free(s), td_free(len), td_free(sc);
    return td_fail_nomem("the SentencePiece scores");
}
