/* Evaluation of a labelled fixture: rows grouped by evidence (one head each), worked examples drawn per group,
 * every row scored once or in each cyclic rotation of its options (cyclic debias, and the prior's calibration
 * rows), the prior applied, generated answers parsed, then the metrics, the results JSON and the predictions. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "typedecide_eval.h"
#include "util/alloc.h"
#include "util/clock.h"
#include "util/error.h"
#include "util/fileio.h"
#include "util/json.h"

#define MAX_SHOTS 64

/* One row's result. */
typedef struct scored {
    double probs[TD_DECIDE_MAX_OPTIONS];
    double *rot; /* [n_rot][K] mapped back to the shown order */
    int32_t n_rot;
    int unparsed;
    char *text;  /* generate mode */
    const char *shot_ids[MAX_SHOTS]; /* ids of the worked examples in this row's head (borrowed from the pool) */
    int32_t n_shots;
    int32_t suffix_tokens;
    double ms;
} scored;

struct td_eval {
    const td_rows *rows;     /* borrowed for the evaluation; the predictions keep their own copies of nothing */
    td_eval_params p;
    const td_rows *pool;     /* shots pool */
    const char *letters;
    td_decider *d;
    uint64_t rng;
    char *calib;             /* prior: rows scored with every rotation */
    scored *sc;
    int32_t n;
    double seconds;
    double forwards;
    char *metrics;           /* td_metrics_json */
    char *results;           /* metrics + run facts, indented */
};

td_eval_params td_eval_default_params(void) {
    td_eval_params p;
    memset(&p, 0, sizeof p);
    p.mode = TD_EVAL_READOUT;
    p.debias = TD_DEBIAS_NONE;
    p.prior_fraction = 0.05;
    p.seed = 1;
    p.max_tokens = 8;
    p.bins = 15;
    return p;
}

static const char *mode_name(td_eval_mode m) { return m == TD_EVAL_GENERATE ? "generate" : "readout"; }
static const char *debias_name(td_debias d) {
    return d == TD_DEBIAS_CYCLIC ? "cyclic" : d == TD_DEBIAS_PRIOR ? "prior" : "none";
}

static uint64_t rng_next(uint64_t *s) { /* splitmix64 */
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static int same_evidence(const td_row *a, const td_row *b) {
    return a->evidence_len == b->evidence_len && memcmp(a->evidence, b->evidence, a->evidence_len) == 0;
}

/* The index of the row's answer among its options, -1 when it is not one. */
static int32_t answer_index(const td_row *r) {
    for (int32_t k = 0; k < r->criterion.n_options; k++)
        if (strcmp(r->criterion.option_ids[k], r->answer) == 0) return k;
    return -1;
}

int32_t td_answer_parse(const char *text, const td_criterion *c, const char *letters) {
    if (!text || !c) return -1;
    if (!letters) letters = "ABCDEFGHIJKLMNOPQRST";
    const char *t = text;
    while (*t == ' ' || *t == '\n' || *t == '\t' || *t == '(' || *t == '*' || *t == '"') t++;
    for (int32_t k = 0; k < c->n_options && letters[k]; k++)
        if (*t == letters[k]) {
            char nx = t[1];
            int alnum = (nx >= 'a' && nx <= 'z') || (nx >= 'A' && nx <= 'Z') || (nx >= '0' && nx <= '9');
            if (!alnum) return k;
        }
    int32_t best = -1;
    size_t best_len = 0;
    for (int32_t k = 0; k < c->n_options; k++) {
        size_t l = strlen(c->descriptions[k]);
        if (l > best_len && l > 0 && strncasecmp(t, c->descriptions[k], l) == 0) best = k, best_len = l;
    }
    return best;
}

/* The criterion of a row shown in rotation rot: position j shows original option (j + rot) % K. */
static void rotated(const td_row *r, int32_t rot, const char **ids, const char **descs, td_criterion *c) {
    int32_t K = r->criterion.n_options;
    for (int32_t j = 0; j < K; j++) {
        int32_t o = (j + rot) % K;
        ids[j] = r->criterion.option_ids[o];
        descs[j] = r->criterion.descriptions[o];
    }
    *c = r->criterion;
    c->option_ids = ids;
    c->descriptions = descs;
}

/* Draws the shots of a group: rows of the pool with the group's family and another evidence. */
static td_status pick_shots(td_eval *ev, const td_row *first, td_shot *out, int32_t *n_out) {
    int32_t n_pool = td_rows_count(ev->pool), nc = 0;
    int32_t *cand = td_malloc((size_t)(n_pool ? n_pool : 1) * sizeof *cand);
    if (!cand) return td_fail_nomem("the shot candidates");
    for (int32_t i = 0; i < n_pool; i++) {
        const td_row *p = td_rows_get(ev->pool, i);
        int fam = (!p->family && !first->family) || (p->family && first->family && strcmp(p->family, first->family) == 0);
        if (p->evidence && fam && !same_evidence(p, first) && p->answer && answer_index(p) >= 0) cand[nc++] = i;
    }
    int32_t k = 0;
    for (; k < ev->p.shots && nc > 0; k++) { /* without replacement */
        int32_t j = (int32_t)(rng_next(&ev->rng) % (uint64_t)nc);
        const td_row *p = td_rows_get(ev->pool, cand[j]);
        cand[j] = cand[--nc];
        out[k].evidence = p->evidence;
        out[k].evidence_len = p->evidence_len;
        out[k].criterion = p->criterion;
        out[k].answer = answer_index(p);
    }
    td_free(cand);
    *n_out = k;
    return TD_OK;
}

static int32_t rotations_of(const td_eval *ev, int32_t i) {
    int all = ev->p.debias == TD_DEBIAS_CYCLIC || (ev->p.debias == TD_DEBIAS_PRIOR && ev->calib[i]);
    return all ? td_rows_get(ev->rows, i)->criterion.n_options : 1;
}

static td_status score_generate(td_eval *ev, const td_shot *shots, int32_t n_shots, const int32_t *idx, int32_t n) {
    const td_row *first = td_rows_get(ev->rows, idx[0]);
    td_criterion *cs = td_calloc((size_t)n, sizeof *cs);
    char **texts = td_calloc((size_t)n, sizeof *texts);
    td_status st = cs && texts ? TD_OK : td_fail_nomem("the generated answers");
    for (int32_t i = 0; st == TD_OK && i < n; i++) cs[i] = td_rows_get(ev->rows, idx[i])->criterion;
    if (st == TD_OK)
        st = td_decide_generate(ev->d, shots, n_shots, first->evidence, first->evidence_len, cs, n, ev->p.max_tokens,
                                texts);
    for (int32_t i = 0; st == TD_OK && i < n; i++) {
        const td_row *r = td_rows_get(ev->rows, idx[i]);
        scored *s = &ev->sc[idx[i]];
        int32_t K = r->criterion.n_options, k = td_answer_parse(texts[i], &r->criterion, ev->letters);
        s->text = texts[i];
        texts[i] = NULL;
        s->unparsed = k < 0;
        for (int32_t j = 0; j < K; j++) s->probs[j] = k < 0 ? 1.0 / K : (j == k ? 1.0 : 0.0);
    }
    td_free(cs);
    td_free(texts);
    return st;
}

static td_status score_readout(td_eval *ev, const td_shot *shots, int32_t n_shots, const int32_t *idx, int32_t n) {
    const td_row *first = td_rows_get(ev->rows, idx[0]);
    int32_t total = 0;
    for (int32_t i = 0; i < n; i++) total += rotations_of(ev, idx[i]);
    td_criterion *cs = td_calloc((size_t)total, sizeof *cs);
    const char **ids = td_calloc((size_t)total * TD_DECIDE_MAX_OPTIONS, sizeof *ids);
    const char **descs = td_calloc((size_t)total * TD_DECIDE_MAX_OPTIONS, sizeof *descs);
    td_decision *dec = td_calloc((size_t)total, sizeof *dec);
    td_status st = cs && ids && descs && dec ? TD_OK : td_fail_nomem("the rotated criteria");
    for (int32_t i = 0, c = 0; st == TD_OK && i < n; i++) {
        const td_row *r = td_rows_get(ev->rows, idx[i]);
        for (int32_t q = 0; q < rotations_of(ev, idx[i]); q++, c++)
            rotated(r, q, ids + (size_t)c * TD_DECIDE_MAX_OPTIONS, descs + (size_t)c * TD_DECIDE_MAX_OPTIONS, &cs[c]);
    }
    if (st == TD_OK) st = td_decide_shots(ev->d, shots, n_shots, first->evidence, first->evidence_len, cs, total, dec);
    for (int32_t i = 0, c = 0; st == TD_OK && i < n; i++) {
        scored *s = &ev->sc[idx[i]];
        int32_t K = td_rows_get(ev->rows, idx[i])->criterion.n_options, nrot = rotations_of(ev, idx[i]);
        if (nrot > 1 && !(s->rot = td_calloc((size_t)(nrot * K), sizeof *s->rot))) {
            st = td_fail_nomem("the rotations");
            break;
        }
        s->n_rot = nrot > 1 ? nrot : 0;
        for (int32_t j = 0; j < K; j++) s->probs[j] = 0;
        for (int32_t q = 0; q < nrot; q++, c++) {
            for (int32_t j = 0; j < K; j++) { /* shown position j of rotation q is original option (j + q) % K */
                int32_t o = (j + q) % K;
                if (s->rot) s->rot[q * K + o] = dec[c].probs[j];
                s->probs[o] += (double)dec[c].probs[j] / nrot;
            }
            s->suffix_tokens += dec[c].suffix_tokens;
            s->ms += dec[c].ms;
        }
    }
    td_free(cs), td_free(ids), td_free(descs), td_free(dec);
    return st;
}

/* Scores one evidence group (row indices idx[0..n)). */
static td_status score_group(td_eval *ev, const int32_t *idx, int32_t n) {
    td_shot shots[MAX_SHOTS];
    int32_t n_shots = 0;
    if (ev->p.shots) {
        td_status st = pick_shots(ev, td_rows_get(ev->rows, idx[0]), shots, &n_shots);
        if (st != TD_OK) return st;
    }
    for (int32_t i = 0; i < n; i++) {
        ev->sc[idx[i]].n_shots = n_shots;
        for (int32_t k = 0; k < n_shots; k++) ev->sc[idx[i]].shot_ids[k] = shots[k].criterion.id;
    }
    return ev->p.mode == TD_EVAL_GENERATE ? score_generate(ev, shots, n_shots, idx, n)
                                          : score_readout(ev, shots, n_shots, idx, n);
}

/* Permutation-prior debiasing: the prior of letter position i for K options is the mean over calibration rows of
 * softmax_i(mean over rotations of log p(position i)); every other row's probabilities are divided by it. */
static json_t *apply_prior(td_eval *ev) { /* NULL when out of memory (a value of the report was refused) */
    double prior[TD_DECIDE_MAX_OPTIONS + 1][TD_DECIDE_MAX_OPTIONS];
    int count[TD_DECIDE_MAX_OPTIONS + 1] = {0};
    memset(prior, 0, sizeof prior);
    for (int32_t i = 0; i < ev->n; i++) {
        if (!ev->calib[i]) continue;
        const scored *s = &ev->sc[i];
        int32_t K = td_rows_get(ev->rows, i)->criterion.n_options;
        double lp[TD_DECIDE_MAX_OPTIONS] = {0}, mx = -INFINITY, z = 0;
        for (int32_t q = 0; q < s->n_rot; q++)
            for (int32_t o = 0; o < K; o++) {
                int32_t pos = (o - q + K) % K; /* where option o was shown in rotation q */
                lp[pos] += log(fmax(s->rot[q * K + o], 1e-30)) / s->n_rot;
            }
        for (int32_t p = 0; p < K; p++) mx = fmax(mx, lp[p]);
        for (int32_t p = 0; p < K; p++) z += exp(lp[p] - mx);
        for (int32_t p = 0; p < K; p++) prior[K][p] += exp(lp[p] - mx) / z;
        count[K]++;
    }
    uint64_t f0 = td_alloc_failures();
    json_t *report = json_object(), *pj = json_object();
    for (int32_t K = 1; K <= TD_DECIDE_MAX_OPTIONS; K++) {
        if (!count[K]) continue;
        json_t *a = json_array();
        for (int32_t p = 0; p < K; p++) json_array_append_new(a, json_real(prior[K][p] /= count[K]));
        char key[8];
        snprintf(key, sizeof key, "%d", K);
        json_object_set_new(pj, key, a);
    }
    int64_t uncorrected = 0, extra = 0;
    for (int32_t i = 0; i < ev->n; i++) {
        if (ev->calib[i]) {
            extra += ev->sc[i].suffix_tokens;
            continue;
        }
        int32_t K = td_rows_get(ev->rows, i)->criterion.n_options;
        if (!count[K]) { /* no calibration row with this many options: left as scored */
            uncorrected++;
            continue;
        }
        double z = 0;
        for (int32_t p = 0; p < K; p++) z += ev->sc[i].probs[p] /= prior[K][p];
        for (int32_t p = 0; p < K; p++) ev->sc[i].probs[p] /= z;
    }
    int64_t calib_rows = 0;
    for (int32_t i = 0; i < ev->n; i++) calib_rows += ev->calib[i] != 0;
    json_object_set_new(report, "calibration_rows", json_integer(calib_rows));
    json_object_set_new(report, "priors", pj);
    json_object_set_new(report, "rows_without_prior", json_integer(uncorrected));
    json_object_set_new(report, "calibration_suffix_tokens", json_integer(extra));
    if (td_alloc_failures() != f0) {
        json_decref(report);
        return NULL;
    }
    return report;
}

/* A seeded choice of the prior's calibration rows: ceil(fraction * n), at least one. */
static td_status choose_calibration(td_eval *ev) {
    int32_t want = (int32_t)ceil(ev->p.prior_fraction * ev->n);
    if (want < 1) want = 1;
    uint64_t s = ev->p.seed ^ 0x5eedull;
    int32_t *perm = td_malloc((size_t)ev->n * sizeof *perm);
    if (!perm) return td_fail_nomem("the calibration rows");
    for (int32_t i = 0; i < ev->n; i++) perm[i] = i;
    for (int32_t i = ev->n - 1; i > 0; i--) {
        int32_t j = (int32_t)(rng_next(&s) % (uint64_t)(i + 1)), t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    for (int32_t i = 0; i < want; i++) ev->calib[perm[i]] = 1;
    td_free(perm);
    return TD_OK;
}

static json_t *str_or_null(const char *s) { return s ? json_string(s) : json_null(); }

/* The metrics of the scored rows, then the results: the metrics plus what was run and what it cost. */
static td_status summarise(td_eval *ev, const td_decide_stats *s0, const td_decide_stats *s1, int32_t n_groups,
                           json_t *prior_report) {
    td_pred *pr = td_calloc((size_t)ev->n, sizeof *pr);
    if (!pr) return td_fail_nomem("the predictions");
    for (int32_t i = 0; i < ev->n; i++) {
        const td_row *rw = td_rows_get(ev->rows, i);
        pr[i].id = rw->criterion.id;
        pr[i].family = rw->family;
        pr[i].answer = rw->answer;
        pr[i].n_options = rw->criterion.n_options;
        pr[i].option_ids = rw->criterion.option_ids;
        pr[i].probs = ev->sc[i].probs;
        pr[i].n_rotations = ev->sc[i].n_rot;
        pr[i].rotations = ev->sc[i].rot;
        pr[i].unparsed = ev->sc[i].unparsed;
    }
    ev->forwards = (double)(s1->forwards - s0->forwards);
    td_cost cost = {ev->forwards, (double)(s1->suffix_tokens - s0->suffix_tokens), ev->seconds};
    td_status st = td_metrics_json(pr, ev->n, ev->p.bins, &cost, &ev->metrics);
    td_free(pr);
    if (st != TD_OK) return st;
    uint64_t f0 = td_alloc_failures();
    json_t *res = json_loads(ev->metrics, 0, NULL);
    if (!res) return td_fail_nomem("the results");
    if (ev->p.debias == TD_DEBIAS_PRIOR) { /* only the calibration rows were rotated: order stability not measured */
        json_object_set_new(res, "order_unstable", json_null());
        json_object_set_new(res, "order_consistency", json_null());
    }
    char hash[32];
    snprintf(hash, sizeof hash, "fnv1a64:%016llx", (unsigned long long)td_rows_hash(ev->rows));
    json_object_set_new(res, "model", str_or_null(ev->p.model_name));
    json_object_set_new(res, "adapter", str_or_null(ev->p.adapter_name));
    json_object_set_new(res, "fixture", str_or_null(ev->p.fixture_name));
    json_object_set_new(res, "fixture_hash", json_string(hash));
    json_object_set_new(res, "mode", json_string(mode_name(ev->p.mode)));
    json_object_set_new(res, "shots", json_integer(ev->p.shots));
    json_object_set_new(res, "debias", json_string(debias_name(ev->p.debias)));
    json_object_set_new(res, "seed", json_integer((json_int_t)ev->p.seed));
    json_object_set_new(res, "skipped_rows", json_integer(td_rows_n_bad(ev->rows)));
    json_object_set_new(res, "evidence_groups", json_integer(n_groups));
    json_object_set_new(res, "head_prefills", json_integer(s1->head_prefills - s0->head_prefills));
    json_object_set_new(res, "head_tokens", json_integer(s1->head_tokens - s0->head_tokens));
    json_object_set_new(res, "shared_suffix_tokens", json_integer(s1->shared_tokens - s0->shared_tokens));
    json_object_set_new(res, "slot_map", json_loads(td_decider_slot_map(ev->d), 0, NULL));
    if (prior_report) json_object_set_new(res, "prior", json_incref(prior_report));
    ev->results = td_json_dumps_checked(res, JSON_INDENT(1) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(17), f0);
    json_decref(res);
    return ev->results ? TD_OK : td_fail_nomem("the results");
}

void td_eval_free(td_eval *ev) {
    if (!ev) return;
    for (int32_t i = 0; ev->sc && i < ev->n; i++) {
        td_free(ev->sc[i].rot);
        td_free(ev->sc[i].text);
    }
    td_free(ev->sc);
    td_free(ev->calib);
    td_free(ev->metrics);
    td_free(ev->results);
    td_free(ev);
}

static td_status check_params(const td_eval_params *p) {
    if (p->mode != TD_EVAL_READOUT && p->mode != TD_EVAL_GENERATE)
        return td_fail(TD_ERR_INVALID_ARG, "evaluate: unknown mode %d", (int)p->mode);
    if (p->debias != TD_DEBIAS_NONE && p->debias != TD_DEBIAS_CYCLIC && p->debias != TD_DEBIAS_PRIOR)
        return td_fail(TD_ERR_INVALID_ARG, "evaluate: unknown debias %d", (int)p->debias);
    if (p->mode == TD_EVAL_GENERATE && p->debias != TD_DEBIAS_NONE)
        return td_fail(TD_ERR_INVALID_ARG, "evaluate: debiasing applies to the readout mode");
    if (p->shots < 0 || p->shots > MAX_SHOTS)
        return td_fail(TD_ERR_INVALID_ARG, "evaluate: shots must be in 0..%d", MAX_SHOTS);
    if (!(p->prior_fraction > 0 && p->prior_fraction <= 1))
        return td_fail(TD_ERR_INVALID_ARG, "evaluate: the prior fraction must be in (0, 1]");
    if (p->max_tokens < 1 || p->max_tokens > 4096)
        return td_fail(TD_ERR_INVALID_ARG, "evaluate: max_tokens must be in 1..4096");
    if (p->bins < 1 || p->bins > 1000) return td_fail(TD_ERR_INVALID_ARG, "evaluate: bins must be in 1..1000");
    return TD_OK;
}

td_status td_evaluate(td_decider *d, const td_rows *rows, const td_eval_params *params, td_eval **out) {
    if (!d || !rows || !out) return td_fail(TD_ERR_INVALID_ARG, "td_evaluate: NULL argument");
    *out = NULL;
    td_eval_params p = params ? *params : td_eval_default_params();
    td_status st = check_params(&p);
    if (st != TD_OK) return st;
    int32_t n = td_rows_count(rows);
    if (n == 0) return td_fail(TD_ERR_INVALID_ARG, "evaluate: no rows to evaluate");
    for (int32_t i = 0; i < n; i++) { /* what td_rows_load checks with TD_ROWS_EVIDENCE | TD_ROWS_ANSWER */
        const td_row *r = td_rows_get(rows, i);
        if (!r->evidence) return td_fail(TD_ERR_FORMAT, "line %d: row \"%s\" has no \"evidence\"", r->line, r->criterion.id);
        if (!r->answer) return td_fail(TD_ERR_FORMAT, "line %d: row \"%s\": missing \"answer\"", r->line, r->criterion.id);
        if (answer_index(r) < 0)
            return td_fail(TD_ERR_FORMAT, "line %d: row \"%s\": answer \"%s\" is not among the options", r->line,
                           r->criterion.id, r->answer);
    }
    td_eval *ev = td_calloc(1, sizeof *ev);
    if (!ev) return td_fail_nomem("an evaluation");
    ev->rows = rows;
    ev->p = p;
    ev->pool = p.shots_pool ? p.shots_pool : rows;
    ev->letters = td_decider_letters(d);
    ev->d = d;
    ev->n = n;
    ev->rng = p.seed;
    ev->sc = td_calloc((size_t)n, sizeof *ev->sc);
    ev->calib = td_calloc((size_t)n, 1);
    const char **texts = td_calloc((size_t)n, sizeof *texts);
    size_t *lens = td_calloc((size_t)n, sizeof *lens);
    int32_t *group = td_calloc((size_t)n, sizeof *group), *idx = td_calloc((size_t)n, sizeof *idx), n_groups = 0;
    json_t *prior_report = NULL;
    st = ev->sc && ev->calib && texts && lens && group && idx ? TD_OK : td_fail_nomem("an evaluation");
    if (st == TD_OK && p.debias == TD_DEBIAS_PRIOR) st = choose_calibration(ev);
    for (int32_t i = 0; st == TD_OK && i < n; i++) {
        texts[i] = td_rows_get(rows, i)->evidence;
        lens[i] = td_rows_get(rows, i)->evidence_len;
    }
    /* evidence groups: rows with byte-identical evidence share one head (instruction + shots + evidence) */
    if (st == TD_OK) st = td_evidence_groups(texts, lens, n, group, idx, &n_groups);
    double t0 = td_now_s();
    td_decide_stats s0 = td_decider_stats(d);
    for (int32_t at = 0, g = 0; st == TD_OK && at < n; g++) { /* idx[] lists the rows group by group */
        int32_t k = 0;
        while (at + k < n && group[idx[at + k]] == g) k++;
        st = score_group(ev, idx + at, k);
        at += k;
        if (st == TD_OK && p.progress) p.progress(p.progress_user, g + 1, n_groups);
    }
    ev->seconds = td_now_s() - t0;
    td_decide_stats s1 = td_decider_stats(d);
    if (st == TD_OK && p.debias == TD_DEBIAS_PRIOR && !(prior_report = apply_prior(ev)))
        st = td_fail_nomem("the prior");
    if (st == TD_OK) st = summarise(ev, &s0, &s1, n_groups, prior_report);
    json_decref(prior_report);
    td_free(texts), td_free(lens), td_free(group), td_free(idx);
    if (st != TD_OK) {
        td_eval_free(ev);
        return st;
    }
    *out = ev;
    return TD_OK;
}

const char *td_eval_metrics_json(const td_eval *ev) { return ev ? ev->metrics : NULL; }
const char *td_eval_results_json(const td_eval *ev) { return ev ? ev->results : NULL; }

/* One predictions line (compact JSON, round-trippable doubles), or NULL when out of memory. */
static char *prediction_line(const td_eval *ev, int32_t i) {
    const td_row *rw = td_rows_get(ev->rows, i);
    const scored *s = &ev->sc[i];
    int32_t K = rw->criterion.n_options;
    uint64_t f0 = td_alloc_failures();
    json_t *o = json_object(), *ids = json_array(), *probs = json_array();
    for (int32_t k = 0; k < K; k++) {
        json_array_append_new(ids, json_string(rw->criterion.option_ids[k]));
        json_array_append_new(probs, json_real(s->probs[k]));
    }
    json_object_set_new(o, "id", json_string(rw->criterion.id));
    json_object_set_new(o, "family", str_or_null(rw->family));
    json_object_set_new(o, "answer", json_string(rw->answer));
    json_object_set_new(o, "options", ids);
    json_object_set_new(o, "probs", probs);
    if (s->n_rot) {
        json_t *rot = json_array();
        for (int32_t q = 0; q < s->n_rot; q++) {
            json_t *a = json_array();
            for (int32_t k = 0; k < K; k++) json_array_append_new(a, json_real(s->rot[q * K + k]));
            json_array_append_new(rot, a);
        }
        json_object_set_new(o, "rotations", rot);
    }
    if (s->n_shots) {
        json_t *sh = json_array();
        for (int32_t k = 0; k < s->n_shots; k++) json_array_append_new(sh, json_string(s->shot_ids[k]));
        json_object_set_new(o, "shots", sh);
    }
    int gen = ev->p.mode == TD_EVAL_GENERATE;
    if (gen) {
        json_object_set_new(o, "text", json_string(s->text ? s->text : ""));
        json_object_set_new(o, "unparsed", json_boolean(s->unparsed));
    }
    json_object_set_new(o, "forwards", json_real(ev->forwards / ev->n));
    json_object_set_new(o, "suffix_tokens", json_integer(s->suffix_tokens));
    json_object_set_new(o, "ms", json_real(gen ? 1e3 * ev->seconds / ev->n : s->ms));
    char *line = td_json_dumps_checked(o, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(17), f0);
    json_decref(o);
    return line;
}

td_status td_eval_write_predictions(const td_eval *ev, const char *path) {
    if (!ev || !path) return td_fail(TD_ERR_INVALID_ARG, "td_eval_write_predictions: NULL argument");
    td_wfile f; /* written beside the target and renamed: the old file stays whole until the new one is */
    td_status st = td_wfile_open(&f, path, 0);
    for (int32_t i = 0; i < ev->n && st == TD_OK; i++) {
        char *line = prediction_line(ev, i);
        if (!line) st = td_fail_nomem("a predictions line");
        else if (fprintf(f.f, "%s\n", line) < 0) st = td_fail(TD_ERR_IO, "%s: write failed", path);
        td_free(line);
    }
    if (st == TD_OK) return td_wfile_commit(&f);
    td_wfile_abort(&f);
    return st;
}
