/* Shared token prefixes ("stems") among the suffixes of one batched pass. Rotations of one criterion (cyclic
 * debiasing) share everything up to their options, criteria with one question and different options share the
 * question: such a prefix is run once in a sequence of its own and the criteria fork from its end. A token's
 * result depends only on the tokens before it, so this changes no bit of any decision; it only skips work. */
#include <stdlib.h>
#include <string.h>

#include "decide/decide_internal.h"
#include "util/alloc.h"
#include "util/error.h"

typedef struct order_ctx {
    const int32_t *const *s;
    const int32_t *n;
} order_ctx;

/* Lexicographic order of two suffixes (a proper prefix first). */
static int before(const order_ctx *c, int32_t a, int32_t b) {
    int32_t n = c->n[a] < c->n[b] ? c->n[a] : c->n[b];
    for (int32_t j = 0; j < n; j++)
        if (c->s[a][j] != c->s[b][j]) return c->s[a][j] < c->s[b][j];
    return c->n[a] < c->n[b];
}

/* Stable merge sort of idx[0..n) (tmp has room for n). */
static void sort_idx(const order_ctx *c, int32_t *idx, int32_t *tmp, int32_t n) {
    if (n < 2) return;
    int32_t h = n / 2;
    sort_idx(c, idx, tmp, h);
    sort_idx(c, idx + h, tmp, n - h);
    int32_t i = 0, j = h, k = 0;
    while (i < h && j < n) tmp[k++] = before(c, idx[j], idx[i]) ? idx[j++] : idx[i++];
    while (i < h) tmp[k++] = idx[i++];
    while (j < n) tmp[k++] = idx[j++];
    memcpy(idx, tmp, (size_t)n * sizeof *idx);
}

static int32_t common_prefix(const order_ctx *c, int32_t a, int32_t b) {
    int32_t n = c->n[a] < c->n[b] ? c->n[a] : c->n[b], j = 0;
    while (j < n && c->s[a][j] == c->s[b][j]) j++;
    return j;
}

/* The best single-level plan for the sorted criteria idx[a..b): either one stem for them all (what all of them
 * share, short of each one's last token) or the best plans of the parts left when the range is cut where its
 * neighbours share least. Returns the tokens saved; records the choice in out when `commit`. */
static int64_t plan(const order_ctx *c, const int32_t *idx, const int32_t *lcp, int32_t a, int32_t b, int commit,
                    td_stems *out) {
    if (b - a < 2) return 0;
    int32_t m = lcp[a + 1], len;
    for (int32_t k = a + 2; k < b; k++) m = lcp[k] < m ? lcp[k] : m;
    len = m;
    for (int32_t k = a; k < b; k++) len = c->n[idx[k]] - 1 < len ? c->n[idx[k]] - 1 : len;
    int64_t one = len >= TD_STEM_MIN ? (int64_t)len * (b - a - 1) : 0, parts = 0;
    int32_t cuts = 0;
    for (int32_t k = a + 1, from = a; k <= b; k++)
        if (k == b || lcp[k] == m) {
            if (k < b) cuts++;
            parts += plan(c, idx, lcp, from, k, 0, NULL);
            from = k;
        }
    if (!commit) return one >= parts ? one : parts;
    if (one > 0 && one >= parts) {
        int32_t s = out->n++;
        out->len[s] = len;
        out->rep[s] = idx[a];
        for (int32_t k = a; k < b; k++) out->of[idx[k]] = s;
        return one;
    }
    if (cuts == 0) return 0; /* all neighbours share m tokens, too few (or a member has no token to spare) */
    for (int32_t k = a + 1, from = a; k <= b; k++)
        if (k == b || lcp[k] == m) {
            plan(c, idx, lcp, from, k, 1, out);
            from = k;
        }
    return parts;
}

td_status td_stems_find(const int32_t *const *suffixes, const int32_t *n_suffix, int32_t count, td_stems *out) {
    memset(out, 0, sizeof *out);
    size_t sz = (size_t)(count > 0 ? count : 1) * sizeof(int32_t);
    int32_t *idx = td_malloc(sz), *tmp = td_malloc(sz), *lcp = td_malloc(sz);
    out->of = td_malloc(sz), out->len = td_malloc(sz), out->rep = td_malloc(sz);
    if (!idx || !tmp || !lcp || !out->of || !out->len || !out->rep) {
        td_free(idx), td_free(tmp), td_free(lcp), td_stems_free(out);
        return td_fail_nomem("the stem plan");
    }
    order_ctx c = {suffixes, n_suffix};
    for (int32_t i = 0; i < count; i++) idx[i] = i, out->of[i] = -1;
    sort_idx(&c, idx, tmp, count);
    lcp[0] = 0;
    for (int32_t k = 1; k < count; k++) lcp[k] = common_prefix(&c, idx[k - 1], idx[k]);
    /* ranges of neighbours sharing at least TD_STEM_MIN tokens, each planned on its own */
    for (int32_t a = 0; a < count;) {
        int32_t b = a + 1;
        while (b < count && lcp[b] >= TD_STEM_MIN) b++;
        plan(&c, idx, lcp, a, b, 1, out);
        a = b;
    }
    td_free(idx), td_free(tmp), td_free(lcp);
    return TD_OK;
}

void td_stems_free(td_stems *s) {
    td_free(s->of), td_free(s->len), td_free(s->rep);
    memset(s, 0, sizeof *s);
}
