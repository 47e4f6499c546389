/* The decider's suffix cache (src/decide/suffix_cache.c): a kept suffix gives the tokenizer's own ids, through
 * more distinct suffixes than it keeps (it drops everything and starts again) and a suffix too long to keep; and a
 * criterion decided again on the same decider (its tokens now from the cache) gives the same bits as on a fresh one.
 * On the real Qwen3 tokenizer through demo-qwen3, whose suffixes are the ones users send. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "decide/decide_internal.h"
#include "test_util.h"
#include "typedecide.h"
#include "util/alloc.h"

#define N_TEXTS 5000 /* past TD_SUFFIX_KEEP (4096): the cache is dropped once on the way */

static int same_ids(const int32_t *a, size_t na, const int32_t *b, size_t nb) {
    return na == nb && (na == 0 || memcmp(a, b, na * sizeof *a) == 0);
}

/* Each text tokenized through the cache (twice: kept, then found) against td_tokenize itself. */
static void check_ids(td_decider *d, const td_tokenizer *tok) {
    static char text[N_TEXTS][96];
    for (int i = 0; i < N_TEXTS; i++)
        snprintf(text[i], sizeof text[i], "\nCriterion: Is item %d (%s) late?\nOptions:\nA. Yes\nB. No \xc3\xa9t\xc3\xa9\nAnswer:",
                 i, i % 3 ? "parcel" : "letter");
    int64_t bad = 0;
    for (int round = 0; round < 2; round++)
        for (int i = 0; i < N_TEXTS; i++) {
            int32_t *a = NULL, *b = NULL;
            size_t na = 0, nb = 0;
            CHECKF(td_suffix_tokens(d, text[i], strlen(text[i]), &a, &na) == TD_OK, "%s", td_last_error());
            CHECKF(td_tokenize(tok, text[i], strlen(text[i]), 0, &b, &nb) == TD_OK, "%s", td_last_error());
            bad += !same_ids(a, na, b, nb);
            td_free(a);
            td_free(b);
        }
    CHECKF(bad == 0, "%lld of %d suffixes differ from the tokenizer's ids", (long long)bad, 2 * N_TEXTS);
    CHECKF(d->suffixes.count > 0 && d->suffixes.count < 4096, "the cache holds %zu suffixes after a drop",
           d->suffixes.count);
    /* a suffix longer than the cache's byte bound: tokenized, not kept */
    size_t big = (size_t)17 << 20;
    char *huge = malloc(big + 1);
    for (size_t i = 0; i < big; i++) huge[i] = "ab cd, "[i % 7];
    huge[big] = 0;
    size_t before = d->suffixes.count;
    int32_t *a = NULL;
    size_t na = 0;
    CHECKF(td_suffix_tokens(d, huge, big, &a, &na) == TD_OK && na > 0, "%s", td_last_error());
    CHECKF(d->suffixes.count == 0 || d->suffixes.count == before, "a suffix over the byte bound was kept");
    td_free(a);
    free(huge);
}

static int same(const td_decision *a, const td_decision *b) {
    size_t n = a->n_options > 0 && a->n_options <= TD_DECIDE_MAX_OPTIONS ? (size_t)a->n_options : 0;
    return a->n_options == b->n_options && a->best == b->best && a->suffix_tokens == b->suffix_tokens &&
           memcmp(a->probs, b->probs, n * sizeof a->probs[0]) == 0 &&
           memcmp(a->logits, b->logits, n * sizeof a->logits[0]) == 0;
}

static void check_decisions(const td_model *m) {
    static const char *const ids[] = {"yes", "no", "maybe"}, *const desc[] = {"Yes", "No", "It is not clear"};
    const td_criterion crit[3] = {{"late", "Is the parcel late?", 2, ids, desc},
                                  {"angry", "Is the customer angry?", 3, ids, desc},
                                  {"refund", "Does the customer ask for a refund?", 2, ids, desc}};
    const char *ev = "My parcel was due on Monday and it is Friday now. I want my money back, this is ridiculous.";
    td_decider *d = NULL, *fresh = NULL;
    CHECKF(td_decider_new(m, NULL, &d) == TD_OK, "%s", td_last_error());
    td_decision first[3], again[3], other[3], alone[3];
    CHECKF(td_decide(d, ev, strlen(ev), crit, 3, first) == TD_OK, "%s", td_last_error());
    CHECKF(td_decide(d, "Thanks, all good.", 17, crit, 3, other) == TD_OK, "%s", td_last_error());
    CHECKF(td_decide(d, ev, strlen(ev), crit, 3, again) == TD_OK, "%s", td_last_error());
    CHECKF(td_decider_new(m, NULL, &fresh) == TD_OK, "%s", td_last_error());
    CHECKF(td_decide(fresh, ev, strlen(ev), crit, 3, alone) == TD_OK, "%s", td_last_error());
    for (int k = 0; k < 3; k++) {
        CHECKF(same(&first[k], &alone[k]), "criterion %d: a second decider differs", k);
        CHECKF(same(&again[k], &alone[k]), "criterion %d: decided again (suffix from the cache) differs", k);
    }
    CHECKF(d->suffixes.count == 3, "3 distinct suffixes asked 3 times: %zu kept", d->suffixes.count);
    td_decider_free(d);
    td_decider_free(fresh);
}

int main(void) {
    td_model *m = NULL;
    CHECKF(td_model_load("models/demo-qwen3", NULL, &m) == TD_OK, "%s", td_last_error());
    if (!m) return td_test_finish("test_suffix_cache");
    td_decider *d = NULL;
    CHECKF(td_decider_new(m, NULL, &d) == TD_OK, "%s", td_last_error());
    check_ids(d, td_model_tokenizer(m));
    td_decider_free(d);
    check_decisions(m);
    td_model_free(m);
    return td_test_finish("test_suffix_cache");
}
