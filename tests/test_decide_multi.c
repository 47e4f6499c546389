/* td_decide_multi (the server's /v1/decide across clients): many evidences' criteria per pass, each result
 * bit-identical to td_decide on that group alone, on demo-qwen3 (four settings; the default under the sanitizers)
 * and, outside the sanitizer build, the hybrid demo-qwen35 (two): more distinct evidences than kept heads (LRU),
 * repeated evidences prefilled once, a second call finding its heads kept, failing groups among good ones, passes
 * split by a small memory budget and by max_batch, serial mode, td_decide calls interleaved with td_decide_multi
 * on one decider, and criteria of one evidence sharing a stem (the start of their suffixes, run once). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_util.h"
#include "typedecide.h"

#define N_EV 20
#define N_GROUPS 26
#define N_CRIT 7

static const char *const yn_ids[] = {"yes", "no"}, *const yn_desc[] = {"Yes", "No"};
static const char *const cat_ids[] = {"billing", "access", "bug", "feature"};
static const char *const cat_desc[] = {"Billing or payment problem", "Trouble logging in", "Software defect",
                                       "Request for new functionality"};
static const char *const tone_ids[] = {"calm", "annoyed", "angry"}, *const tone_desc[] = {"Calm", "Annoyed", "Angry"};
static const td_criterion crit[N_CRIT] = {
    {"category", "Which category does this support ticket belong to?", 4, cat_ids, cat_desc},
    {"refund", "Does the customer ask for a refund?", 2, yn_ids, yn_desc},
    {"several", "Are several people affected?", 2, yn_ids, yn_desc},
    {"tone", "What is the customer's tone?", 3, tone_ids, tone_desc},
    {"urgent", "Is the matter urgent?", 2, yn_ids, yn_desc},
    {"one", "Is this a single-option question?", 1, yn_ids, yn_desc},
    {"discount", "Does the customer ask for a discount?", 2, yn_ids, yn_desc}, /* a stem with "refund" */
};

static char ev[N_EV][400];

/* Equal bit for bit but the wall time (the options' entries; the arrays' rest is not written). */
static int same(const td_decision *a, const td_decision *b) {
    size_t n = a->n_options > 0 && a->n_options <= TD_DECIDE_MAX_OPTIONS ? (size_t)a->n_options : 0;
    return a->n_options == b->n_options && a->best == b->best && a->suffix_tokens == b->suffix_tokens &&
           memcmp(a->probs, b->probs, n * sizeof a->probs[0]) == 0 &&
           memcmp(a->logits, b->logits, n * sizeof a->logits[0]) == 0 &&
           memcmp(&a->allowed_mass, &b->allowed_mass, sizeof a->allowed_mass) == 0;
}

/* Group i: evidence i % N_EV (so 20..25 repeat 0..5), 1 to 5 criteria starting at i % N_CRIT. */
static void make_groups(td_decide_group *g, td_decision (*out)[N_CRIT], td_criterion (*cs)[N_CRIT]) {
    memset(g, 0, N_GROUPS * sizeof *g);
    for (int i = 0; i < N_GROUPS; i++) {
        int k = 1 + i % 5;
        for (int c = 0; c < k; c++) cs[i][c] = crit[(i + c) % N_CRIT];
        g[i].evidence = ev[i % N_EV];
        g[i].len = strlen(ev[i % N_EV]);
        g[i].criteria = cs[i];
        g[i].n = k;
        g[i].out = out[i];
    }
}

/* small_mb: a budget that fits one small group but not a whole pass; n_cfg: how many of the settings below */
static void run_model(const char *rel, int32_t small_mb, size_t n_cfg) {
    td_model *m = NULL;
    CHECKF(td_model_load(td_test_path(rel), NULL, &m) == TD_OK, "%s", td_last_error());
    if (!m) return;
    for (int i = 0; i < N_EV; i++)
        snprintf(ev[i], sizeof ev[i],
                 "Ticket %d. Since the update %s %s. %s I would like an answer %s. Regards, customer %d.", 100 + i,
                 i % 3 ? "the app" : "the invoice page", i % 4 ? "crashes" : "charges me twice",
                 i % 2 ? "Two colleagues see it too." : "", i % 5 ? "this week" : "today", i * 7);
    static td_decision ref[N_GROUPS][N_CRIT], out[N_GROUPS][N_CRIT];
    static td_criterion cs[N_GROUPS][N_CRIT];
    td_decide_group g[N_GROUPS];
    make_groups(g, out, cs);
    /* the reference: each group alone on its own decider */
    td_decide_params p = td_decide_default_params();
    p.n_threads = 2;
    td_decider *alone = NULL, *d = NULL;
    CHECKF(td_decider_new(m, &p, &alone) == TD_OK, "%s", td_last_error());
    for (int i = 0; alone && i < N_GROUPS; i++)
        CHECKF(td_decide(alone, g[i].evidence, g[i].len, g[i].criteria, g[i].n, ref[i]) == TD_OK, "%s", td_last_error());

    struct {
        const char *what;
        int32_t memory_mb, max_batch;
        td_decide_mode mode;
    } cfg[] = {{"default", 1024, 0, TD_DECIDE_BATCH},
               {"small memory (passes split, large groups alone)", small_mb, 0, TD_DECIDE_BATCH},
               {"max_batch 4", 1024, 4, TD_DECIDE_BATCH},
               {"serial", 1024, 0, TD_DECIDE_SERIAL}};
    for (size_t c = 0; c < sizeof cfg / sizeof cfg[0] && c < n_cfg; c++) {
        td_decide_params q = p;
        q.cache_head = 1;
        q.memory_mb = cfg[c].memory_mb;
        q.max_batch = cfg[c].max_batch;
        q.mode = cfg[c].mode;
        CHECKF(td_decider_new(m, &q, &d) == TD_OK, "%s", td_last_error());
        if (!d) continue;
        for (int call = 0; call < 2; call++) {
            memset(out, 0, sizeof out);
            td_decide_stats s0 = td_decider_stats(d);
            CHECKF(td_decide_multi(d, g, N_GROUPS) == TD_OK, "%s", td_last_error());
            td_decide_stats s1 = td_decider_stats(d);
            int diff = 0, prefilled = 0;
            for (int i = 0; i < N_GROUPS; i++) {
                CHECKF(g[i].status == TD_OK, "%s %s call %d group %d: %s", rel, cfg[c].what, call, i, g[i].error);
                for (int k = 0; k < g[i].n; k++) diff += !same(&out[i][k], &ref[i][k]);
                prefilled += g[i].prefill_tokens > 0;
            }
            CHECKF(diff == 0, "%s %s call %d: %d decisions differ from td_decide alone", rel, cfg[c].what, call, diff);
            long long heads = (long long)(s1.head_prefills - s0.head_prefills);
            if (c == 0 && call == 0) /* 20 distinct evidences, more than the 16 kept: each prefilled once */
                CHECKF(heads == N_EV && prefilled == N_EV, "%s: %lld heads prefilled (%d groups say so), want %d", rel,
                       heads, prefilled, N_EV);
            if (c == 0) /* "refund" and "discount" over one evidence share their question's start: run once */
                CHECKF(s1.shared_tokens > s0.shared_tokens, "%s call %d: no suffix tokens shared (stems)", rel, call);
            if (c == 0 && call == 1) /* the second call finds most of its heads kept */
                CHECKF(heads > 0 && heads < N_EV, "%s second call: %lld heads prefilled, want fewer than %d", rel,
                       heads, N_EV);
            printf("%s, %s, call %d: %d groups (%d distinct evidences) equal td_decide alone; %lld heads prefilled, "
                   "%lld forward passes\n", rel, cfg[c].what, call, N_GROUPS, N_EV, heads,
                   (long long)(s1.forwards - s0.forwards));
        }
        /* td_decide on the same decider in between, then td_decide_multi again: both still exact */
        td_decision one[N_CRIT];
        CHECKF(td_decide(d, g[3].evidence, g[3].len, g[3].criteria, g[3].n, one) == TD_OK, "%s", td_last_error());
        for (int k = 0; k < g[3].n; k++) CHECKF(same(&one[k], &ref[3][k]), "%s %s: td_decide after td_decide_multi", rel, cfg[c].what);
        for (int again = 0; again < 2; again++) { /* td_decide dropped the kept heads; then they are kept again */
            CHECKF(td_decide_multi(d, g + 3, 2) == TD_OK, "%s", td_last_error());
            for (int i = 3; i < 5; i++)
                for (int k = 0; k < g[i].n; k++)
                    CHECKF(same(&out[i][k], &ref[i][k]), "%s %s: td_decide_multi after td_decide, group %d", rel,
                           cfg[c].what, i);
            if (c == 0)
                CHECKF(again ? g[4].head_cached == 1 && g[4].prefill_tokens == 0
                             : g[4].head_cached == 0 && g[4].prefill_tokens > 0,
                       "%s, call %d after td_decide: head_cached %d, prefill_tokens %d", rel, again, g[4].head_cached,
                       g[4].prefill_tokens);
        }
        td_decider_free(d);
        d = NULL;
    }

    /* failing groups among good ones: each fails alone, with td_decide's message; the others stay exact */
    CHECKF(td_decider_new(m, &p, &d) == TD_OK, "%s", td_last_error());
    if (d) {
        static char bad_utf8[] = "caf\xc3 au lait";
        static char *longev;
        longev = malloc(200000);
        if (longev) {
            memset(longev, 'x', 199999);
            for (int i = 0; i < 199999; i += 6) longev[i] = ' ';
            longev[199999] = 0;
        }
        td_criterion no_opts = crit[1];
        no_opts.n_options = 0;
        make_groups(g, out, cs);
        g[2].evidence = bad_utf8, g[2].len = strlen(bad_utf8);
        g[5].criteria = &no_opts, g[5].n = 1;
        if (longev) g[9].evidence = longev, g[9].len = strlen(longev);
        CHECKF(td_decide_multi(d, g, N_GROUPS) == TD_OK, "%s", td_last_error());
        CHECKF(g[2].status == TD_ERR_FORMAT && strstr(g[2].error, "UTF-8"), "%s: bad UTF-8: %d %s", rel, g[2].status, g[2].error);
        CHECKF(g[5].status == TD_ERR_INVALID_ARG && strstr(g[5].error, "no options"), "%s: no options: %d %s", rel,
               g[5].status, g[5].error);
        if (longev)
            CHECKF(g[9].status == TD_ERR_RANGE && strstr(g[9].error, "context"), "%s: long evidence: %d %s", rel,
                   g[9].status, g[9].error);
        int diff = 0;
        for (int i = 0; i < N_GROUPS; i++) {
            if (i == 2 || i == 5 || i == 9) continue;
            CHECKF(g[i].status == TD_OK, "%s: group %d beside failing ones: %s", rel, i, g[i].error);
            for (int k = 0; k < g[i].n; k++) diff += !same(&out[i][k], &ref[i][k]);
        }
        CHECKF(diff == 0, "%s: %d decisions beside failing groups differ", rel, diff);
        CHECK(td_decide_multi(d, NULL, 1) == TD_ERR_INVALID_ARG);
        CHECK(td_decide_multi(d, g, 0) == TD_OK);
        free(longev);
        td_decider_free(d);
    }
    td_decider_free(alone);
    td_model_free(m);
}

int main(void) {
    run_model("models/demo-qwen3", 2, td_test_sanitized() ? 1 : 4);
    if (!td_test_sanitized()) run_model("models/demo-qwen35", 4, 2); /* the hybrid: kept heads and split passes */
    return td_test_finish("test_decide_multi");
}
