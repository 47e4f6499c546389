/* typedecide evaluate: score a labelled fixture (readout or generation, with or without debiasing) and report
 * accuracy, calibration and order bias. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "commands.h"
#include "rows.h"
#include "util/fileio.h"

static const char usage_text[] =
    "usage: typedecide evaluate FIXTURE.jsonl --model DIR [options]\n"
    "\n"
    "Scores every row of a labelled fixture ({\"id\", \"family\", \"evidence\", \"question\", \"options\",\n"
    "\"answer\"}) and reports accuracy, per-family balanced accuracy, Brier score, ECE, order stability and the\n"
    "spread of recall across answer letter positions (rstd), as a table on stdout and as JSON.\n"
    "\n"
    "  --model DIR           Hugging Face model directory with tokenizer.json\n"
    "  --adapter DIR         PEFT LoRA adapter, merged at load\n"
    "  --mode M              readout (default): option-letter probabilities; generate: greedy text after the same\n"
    "                        prompt, parsed for the first option letter (or description); unparseable answers are\n"
    "                        counted separately and as wrong\n"
    "  --shots N             N worked examples per evidence, drawn (seeded) from other rows of the same family,\n"
    "                        never from rows of that evidence; rendered in the shared head (default 0)\n"
    "  --shots-file FILE     draw the examples from FILE instead of the fixture\n"
    "  --debias D            none (default); cyclic: score all K cyclic rotations of the options and average per\n"
    "                        option id (a row is order-unstable when its argmax changes between rotations);\n"
    "                        prior: estimate a per-letter prior from all rotations on a seeded fraction of rows,\n"
    "                        then score the other rows once and divide by the prior\n"
    "  --prior-fraction F    share of rows used to estimate the prior (default 0.05, at least one row)\n"
    "  --seed S              seed for shots and the prior's rows (default 1)\n"
    "  --out FILE            results JSON: all metrics plus model, mode, shots, debias, seed, fixture hash\n"
    "  --predictions FILE    predictions JSONL (the input of `typedecide metrics`)\n"
    "  --plot FILE.svg       reliability diagram and per-family accuracy bars\n"
    "  --bins B              ECE bins (default 15)\n"
    "  --skip-bad            report bad fixture rows and evaluate the rest (default: stop at the first)\n"
    "  --letters, --instruction, --threads, --memory, --batch-size, --kv   as for decide\n"
    "  --max-tokens N        generation length in --mode generate (default 8)\n"
    "  --quiet               no progress on stderr\n";

typedef struct scored {
    double probs[TD_DECIDE_MAX_OPTIONS];
    double *rot; /* [n_rot][K] mapped back to the shown order */
    int n_rot;
    int unparsed;
    char *text; /* generate mode */
    const char *shot_ids[64]; /* ids of the worked examples in this row's head (borrowed) */
    int n_shots;
    int suffix_tokens;
    double ms;
} scored;

static uint64_t fnv1a(const char *s, size_t n) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 0x100000001b3ull;
    return h;
}

static uint64_t rng_next(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static int same_evidence(const row *a, const row *b) {
    return a->evidence_len == b->evidence_len && memcmp(a->evidence, b->evidence, a->evidence_len) == 0;
}

static int answer_index(const row *r) {
    for (int k = 0; k < r->n_options; k++)
        if (strcmp(r->option_ids[k], r->answer) == 0) return k;
    return 0;
}

/* The option a generated text names: a leading option letter (not followed by a letter or digit), else an option
 * description it starts with (case-insensitive, longest first); -1 when neither. */
static int parse_answer(const char *text, const row *r, const char *letters) {
    const char *t = text;
    while (*t == ' ' || *t == '\n' || *t == '\t' || *t == '(' || *t == '*' || *t == '"') t++;
    for (int k = 0; k < r->n_options; k++)
        if (*t == letters[k]) {
            char nx = t[1];
            int alnum = (nx >= 'a' && nx <= 'z') || (nx >= 'A' && nx <= 'Z') || (nx >= '0' && nx <= '9');
            if (!alnum) return k;
        }
    int best = -1;
    size_t best_len = 0;
    for (int k = 0; k < r->n_options; k++) {
        size_t l = strlen(r->descriptions[k]);
        if (l > best_len && l > 0 && strncasecmp(t, r->descriptions[k], l) == 0) best = k, best_len = l;
    }
    return best;
}

typedef struct eval {
    const char *cmd;
    rows rs, pool;           /* fixture rows; the shots pool (the fixture, or --shots-file) */
    td_decider *d;
    const char *letters;
    int shots, mode_generate, debias; /* debias: 0 none, 1 cyclic, 2 prior */
    int max_tokens;
    uint64_t rng;
    char *calib;             /* prior: rows scored with every rotation */
    scored *sc;
} eval;

/* Builds the criterion of a row shown in rotation r: position j shows original option (j + r) % K. */
static void rotated(const row *r, int rot, const char **ids, const char **descs, td_criterion *c) {
    for (int j = 0; j < r->n_options; j++) {
        int o = (j + rot) % r->n_options;
        ids[j] = r->option_ids[o];
        descs[j] = r->descriptions[o];
    }
    c->id = r->id;
    c->question = r->question;
    c->n_options = r->n_options;
    c->option_ids = ids;
    c->descriptions = descs;
}

/* Draws the shots of a group: rows of the pool with the group's family and another evidence. */
static int pick_shots(eval *ev, const row *first, td_shot *out) {
    int *cand = malloc((size_t)(ev->pool.n ? ev->pool.n : 1) * sizeof *cand), nc = 0;
    if (!cand) return 0;
    for (int i = 0; i < ev->pool.n; i++) {
        const row *p = &ev->pool.v[i];
        int fam = (!p->family && !first->family) || (p->family && first->family && strcmp(p->family, first->family) == 0);
        if (fam && !same_evidence(p, first) && p->answer) cand[nc++] = i;
    }
    int k = 0;
    for (; k < ev->shots && nc > 0; k++) { /* without replacement */
        int j = (int)(rng_next(&ev->rng) % (uint64_t)nc);
        const row *p = &ev->pool.v[cand[j]];
        cand[j] = cand[--nc];
        out[k].evidence = p->evidence;
        out[k].evidence_len = p->evidence_len;
        out[k].criterion = row_criterion(p);
        out[k].answer = answer_index(p);
    }
    free(cand);
    return k;
}

/* Scores one evidence group (row indices idx[0..n)). */
static int score_group(eval *ev, const int *idx, int n) {
    const row *first = &ev->rs.v[idx[0]];
    td_shot shots[64];
    int n_shots = ev->shots ? pick_shots(ev, first, shots) : 0;
    for (int i = 0; i < n; i++) {
        ev->sc[idx[i]].n_shots = n_shots;
        for (int k = 0; k < n_shots; k++) ev->sc[idx[i]].shot_ids[k] = shots[k].criterion.id;
    }
    if (ev->mode_generate) {
        td_criterion *cs = calloc((size_t)n, sizeof *cs);
        char **texts = calloc((size_t)n, sizeof *texts);
        if (!cs || !texts) return cli_error(ev->cmd, "out of memory");
        for (int i = 0; i < n; i++) cs[i] = row_criterion(&ev->rs.v[idx[i]]);
        td_status st = td_decide_generate(ev->d, shots, n_shots, first->evidence, first->evidence_len, cs, n,
                                          ev->max_tokens, texts);
        if (st != TD_OK) {
            free(cs), free(texts);
            return cli_fail(ev->cmd, st);
        }
        for (int i = 0; i < n; i++) {
            const row *r = &ev->rs.v[idx[i]];
            scored *s = &ev->sc[idx[i]];
            int k = parse_answer(texts[i], r, ev->letters);
            s->text = texts[i];
            s->unparsed = k < 0;
            for (int j = 0; j < r->n_options; j++) s->probs[j] = k < 0 ? 1.0 / r->n_options : (j == k ? 1.0 : 0.0);
        }
        free(cs), free(texts);
        return 0;
    }
    /* readout: each row once, or in every rotation (cyclic, and the prior's calibration rows) */
    int total = 0;
    for (int i = 0; i < n; i++) {
        int all = ev->debias == 1 || (ev->debias == 2 && ev->calib[idx[i]]);
        total += all ? ev->rs.v[idx[i]].n_options : 1;
    }
    td_criterion *cs = calloc((size_t)total, sizeof *cs);
    const char **ids = calloc((size_t)total * TD_DECIDE_MAX_OPTIONS, sizeof *ids);
    const char **descs = calloc((size_t)total * TD_DECIDE_MAX_OPTIONS, sizeof *descs);
    td_decision *dec = calloc((size_t)total, sizeof *dec);
    if (!cs || !ids || !descs || !dec) {
        free(cs), free(ids), free(descs), free(dec);
        return cli_error(ev->cmd, "out of memory");
    }
    int c = 0;
    for (int i = 0; i < n; i++) {
        const row *r = &ev->rs.v[idx[i]];
        int nrot = ev->debias == 1 || (ev->debias == 2 && ev->calib[idx[i]]) ? r->n_options : 1;
        for (int q = 0; q < nrot; q++, c++)
            rotated(r, q, ids + (size_t)c * TD_DECIDE_MAX_OPTIONS, descs + (size_t)c * TD_DECIDE_MAX_OPTIONS, &cs[c]);
    }
    td_status st = td_decide_shots(ev->d, shots, n_shots, first->evidence, first->evidence_len, cs, total, dec);
    int rc = st == TD_OK ? 0 : cli_fail(ev->cmd, st);
    c = 0;
    for (int i = 0; i < n && rc == 0; i++) {
        const row *r = &ev->rs.v[idx[i]];
        scored *s = &ev->sc[idx[i]];
        int K = r->n_options, nrot = ev->debias == 1 || (ev->debias == 2 && ev->calib[idx[i]]) ? K : 1;
        if (nrot > 1 && !(s->rot = calloc((size_t)(nrot * K), sizeof *s->rot))) {
            rc = cli_error(ev->cmd, "out of memory");
            break;
        }
        s->n_rot = nrot > 1 ? nrot : 0;
        for (int j = 0; j < K; j++) s->probs[j] = 0;
        for (int q = 0; q < nrot; q++, c++) {
            for (int j = 0; j < K; j++) { /* shown position j of rotation q is original option (j + q) % K */
                int o = (j + q) % K;
                if (s->rot) s->rot[q * K + o] = dec[c].probs[j];
                s->probs[o] += (double)dec[c].probs[j] / nrot;
            }
            s->suffix_tokens += dec[c].suffix_tokens;
            s->ms += dec[c].ms;
        }
    }
    free(cs), free(ids), free(descs), free(dec);
    return rc;
}

/* Permutation-prior debiasing: the prior of letter position i for K options is the mean over calibration rows of
 * softmax_i(mean over rotations of log p(position i)); every other row's probabilities are divided by it. */
static void apply_prior(eval *ev, json_t *report) {
    double prior[TD_DECIDE_MAX_OPTIONS + 1][TD_DECIDE_MAX_OPTIONS];
    int count[TD_DECIDE_MAX_OPTIONS + 1] = {0};
    memset(prior, 0, sizeof prior);
    for (int i = 0; i < ev->rs.n; i++) {
        if (!ev->calib[i]) continue;
        const row *r = &ev->rs.v[i];
        const scored *s = &ev->sc[i];
        int K = r->n_options;
        double lp[TD_DECIDE_MAX_OPTIONS] = {0}, mx = -INFINITY, z = 0;
        for (int q = 0; q < s->n_rot; q++)
            for (int o = 0; o < K; o++) {
                int pos = (o - q + K) % K; /* where option o was shown in rotation q */
                lp[pos] += log(fmax(s->rot[q * K + o], 1e-30)) / s->n_rot;
            }
        for (int p = 0; p < K; p++) mx = fmax(mx, lp[p]);
        for (int p = 0; p < K; p++) z += exp(lp[p] - mx);
        for (int p = 0; p < K; p++) prior[K][p] += exp(lp[p] - mx) / z;
        count[K]++;
    }
    json_t *pj = json_object();
    for (int K = 1; K <= TD_DECIDE_MAX_OPTIONS; K++) {
        if (!count[K]) continue;
        json_t *a = json_array();
        for (int p = 0; p < K; p++) json_array_append_new(a, json_real(prior[K][p] /= count[K]));
        char key[8];
        snprintf(key, sizeof key, "%d", K);
        json_object_set_new(pj, key, a);
    }
    int uncorrected = 0;
    for (int i = 0; i < ev->rs.n; i++) {
        if (ev->calib[i]) continue;
        int K = ev->rs.v[i].n_options;
        if (!count[K]) { /* no calibration row with this many options: left as scored */
            uncorrected++;
            continue;
        }
        double z = 0;
        for (int p = 0; p < K; p++) z += ev->sc[i].probs[p] /= prior[K][p];
        for (int p = 0; p < K; p++) ev->sc[i].probs[p] /= z;
    }
    json_object_set_new(report, "priors", pj);
    json_object_set_new(report, "rows_without_prior", json_integer(uncorrected));
}

static void print_table(const json_t *res, const char *fixture) {
    json_t *fam = json_object_get(res, "family_balanced_accuracy"), *cost = json_object_get(res, "cost");
    printf("typedecide evaluate: %s: %lld rows, %zu families; mode %s, shots %lld, debias %s\n", fixture,
           (long long)json_integer_value(json_object_get(res, "n")), json_object_size(fam),
           json_string_value(json_object_get(res, "mode")), (long long)json_integer_value(json_object_get(res, "shots")),
           json_string_value(json_object_get(res, "debias")));
    const char *keys[] = {"accuracy", "mean_family_balanced_accuracy", "brier", "ece", "order_consistency", "rstd"};
    const char *names[] = {"accuracy", "mean family balanced accuracy", "Brier score", "ECE", "order consistency",
                           "rstd (recall by letter, %)"};
    for (int i = 0; i < 6; i++) {
        json_t *v = json_object_get(res, keys[i]);
        if (json_is_number(v)) printf("  %-32s %8.4f\n", names[i], json_number_value(v));
        else printf("  %-32s %8s\n", names[i], "n/a");
    }
    json_t *un = json_object_get(res, "order_unstable");
    if (json_is_integer(un)) printf("  %-32s %8lld\n", "order-unstable rows", (long long)json_integer_value(un));
    if (json_integer_value(json_object_get(res, "unparsed")))
        printf("  %-32s %8lld\n", "unparseable answers", (long long)json_integer_value(json_object_get(res, "unparsed")));
    printf("  cost: %.3f forwards/row, %.1f suffix tokens/row, %.2f s, %.2f rows/s\n",
           json_number_value(json_object_get(cost, "forwards_per_row")),
           json_number_value(json_object_get(cost, "suffix_tokens_per_row")),
           json_number_value(json_object_get(cost, "wall_seconds")),
           json_number_value(json_object_get(cost, "rows_per_second")));
    printf("  %-24s %s\n", "family", "balanced accuracy");
    const char *k;
    json_t *v;
    json_object_foreach(fam, k, v) printf("  %-24s %8.4f\n", k, json_number_value(v));
}

static int write_text(const char *cmd, const char *path, const char *text) {
    FILE *f = fopen(path, "wb");
    if (!f || fputs(text, f) < 0 || fclose(f) != 0) return cli_error(cmd, "%s: cannot write", path);
    return 0;
}

int cmd_evaluate(int argc, char **argv) {
    const char *model_dir = NULL, *adapter = NULL, *mode_s = "readout", *shots_s = "0", *shots_file = NULL,
               *debias_s = "none", *seed_s = "1", *out_path = NULL, *pred_path = NULL, *plot_path = NULL,
               *bins_s = "15", *letters = NULL, *instr = NULL, *threads_s = NULL, *mem_s = NULL, *bs_s = NULL,
               *frac_s = "0.05", *maxtok_s = "8", *kv_s = NULL;
    int skip_bad = 0, quiet = 0;
    const cli_opt opts[] = {
        {"model", 1, &model_dir, NULL},      {"adapter", 1, &adapter, NULL},    {"mode", 1, &mode_s, NULL},
        {"shots", 1, &shots_s, NULL},        {"shots-file", 1, &shots_file, NULL}, {"debias", 1, &debias_s, NULL},
        {"seed", 1, &seed_s, NULL},          {"out", 1, &out_path, NULL},       {"predictions", 1, &pred_path, NULL},
        {"plot", 1, &plot_path, NULL},       {"bins", 1, &bins_s, NULL},        {"letters", 1, &letters, NULL},
        {"instruction", 1, &instr, NULL},    {"threads", 1, &threads_s, NULL},  {"memory", 1, &mem_s, NULL},
        {"batch-size", 1, &bs_s, NULL},      {"prior-fraction", 1, &frac_s, NULL}, {"max-tokens", 1, &maxtok_s, NULL},
        {"skip-bad", 0, NULL, &skip_bad},    {"quiet", 0, NULL, &quiet},        {"kv", 1, &kv_s, NULL},
        {NULL, 0, NULL, NULL}};
    const char *pos[1];
    int np = 0;
    int r = cli_parse(argc, argv, opts, "evaluate", pos, 1, &np);
    if (r == 1) {
        fputs(usage_text, stdout);
        return 0;
    }
    if (r) return r;
    if (np != 1) return cli_usage_error("evaluate", "give the fixture file");
    if (!model_dir) return cli_usage_error("evaluate", "--model is required");
    const char *fixture = pos[0];
    eval ev;
    memset(&ev, 0, sizeof ev);
    ev.cmd = "evaluate";
    ev.letters = letters ? letters : "ABCDEFGHIJKLMNOPQRST";
    if (strcmp(mode_s, "readout") == 0) ev.mode_generate = 0;
    else if (strcmp(mode_s, "generate") == 0) ev.mode_generate = 1;
    else return cli_usage_error("evaluate", "--mode must be readout or generate");
    if (strcmp(debias_s, "none") == 0) ev.debias = 0;
    else if (strcmp(debias_s, "cyclic") == 0) ev.debias = 1;
    else if (strcmp(debias_s, "prior") == 0) ev.debias = 2;
    else return cli_usage_error("evaluate", "--debias must be none, cyclic or prior");
    if (ev.mode_generate && ev.debias) return cli_usage_error("evaluate", "--debias applies to --mode readout");
    long long v, seed, bins;
    double frac;
    if (cli_int(shots_s, 0, 64, &v)) return cli_usage_error("evaluate", "--shots must be in 0..64");
    ev.shots = (int)v;
    if (cli_int(seed_s, 0, INT64_MAX, &seed)) return cli_usage_error("evaluate", "--seed must be an integer >= 0");
    if (cli_int(bins_s, 1, 1000, &bins)) return cli_usage_error("evaluate", "--bins must be in 1..1000");
    if (cli_double(frac_s, &frac) || frac <= 0 || frac > 1) return cli_usage_error("evaluate", "--prior-fraction must be in (0, 1]");
    if (cli_int(maxtok_s, 1, 256, &v)) return cli_usage_error("evaluate", "--max-tokens must be in 1..256");
    ev.max_tokens = (int)v;
    td_decide_params p = td_decide_default_params();
    p.letters = letters;
    if (cli_kv("evaluate", kv_s, &p.kv_f16)) return 2;
    p.n_threads = cli_default_threads();
    if (threads_s) {
        if (cli_int(threads_s, 1, 1024, &v)) return cli_usage_error("evaluate", "--threads must be in 1..1024");
        p.n_threads = (int32_t)v;
    }
    if (mem_s) {
        if (cli_int(mem_s, 1, 1 << 24, &v)) return cli_usage_error("evaluate", "--memory must be >= 1 (MB)");
        p.memory_mb = v;
    }
    if (bs_s) {
        if (cli_int(bs_s, 1, 1 << 20, &v)) return cli_usage_error("evaluate", "--batch-size must be >= 1");
        p.max_batch = (int32_t)v;
    }

    int skipped = 0, rc = 0;
    if (rows_load("evaluate", fixture, 1, skip_bad, &ev.rs, &skipped)) return 1;
    for (int i = 1; i < ev.rs.n; i++) /* a row id names one row: a repeat is a bad row */
        for (int j = 0; j < i; j++)
            if (strcmp(ev.rs.v[i].id, ev.rs.v[j].id) == 0) {
                fprintf(stderr, "typedecide evaluate: %s:%d: duplicate row id \"%s\" (first on line %d)\n", fixture,
                        ev.rs.v[i].line, ev.rs.v[i].id, ev.rs.v[j].line);
                if (!skip_bad) {
                    rows_free(&ev.rs);
                    return 1;
                }
                row_free(&ev.rs.v[i]);
                memmove(&ev.rs.v[i], &ev.rs.v[i + 1], (size_t)(ev.rs.n - i - 1) * sizeof *ev.rs.v);
                ev.rs.n--;
                skipped++;
                i--;
                break;
            }
    if (skipped) fprintf(stderr, "typedecide evaluate: skipped %d bad row(s)\n", skipped);
    for (int i = 0; i < ev.rs.n; i++)
        if (!ev.rs.v[i].evidence) {
            rows_free(&ev.rs);
            return cli_error("evaluate", "%s:%d: row \"%s\" has no \"evidence\"", fixture, ev.rs.v[i].line, ev.rs.v[i].id);
        }
    if (ev.rs.n == 0) {
        rows_free(&ev.rs);
        return cli_error("evaluate", "%s: no rows to evaluate", fixture);
    }
    if (shots_file && rows_load("evaluate", shots_file, 1, 0, &ev.pool, NULL)) {
        rows_free(&ev.rs);
        return 1;
    }
    const rows *pool_view = shots_file ? &ev.pool : &ev.rs;
    rows pool_keep = ev.pool;
    ev.pool = *pool_view;

    char *instruction = NULL, *fixture_bytes = NULL;
    size_t fixture_len = 0;
    td_model *m = NULL;
    int *group = calloc((size_t)ev.rs.n, sizeof *group), *idx = calloc((size_t)ev.rs.n, sizeof *idx);
    ev.sc = calloc((size_t)ev.rs.n, sizeof *ev.sc);
    ev.calib = calloc((size_t)ev.rs.n, 1);
    json_t *res = NULL, *prior_report = json_object();
    char *mjson = NULL;
    if (!group || !idx || !ev.sc || !ev.calib) {
        rc = cli_error("evaluate", "out of memory");
        goto done;
    }
    if (instr) {
        if (td_file_exists(instr)) td_read_file(instr, &instruction, NULL);
        else instruction = strdup(instr);
        p.instruction = instruction;
    }
    td_read_file(fixture, &fixture_bytes, &fixture_len);
    ev.rng = (uint64_t)seed;
    td_status st = cli_load_model(model_dir, 1, quiet, adapter, &m);
    if (st == TD_OK) st = td_decider_new(m, &p, &ev.d);
    if (st != TD_OK) {
        rc = cli_fail("evaluate", st);
        goto done;
    }
    if (ev.debias == 2) { /* a seeded choice of calibration rows */
        int want = (int)ceil(frac * ev.rs.n);
        if (want < 1) want = 1;
        uint64_t s = (uint64_t)seed ^ 0x5eedull;
        int *perm = malloc((size_t)ev.rs.n * sizeof *perm);
        if (!perm) {
            rc = cli_error("evaluate", "out of memory");
            goto done;
        }
        for (int i = 0; i < ev.rs.n; i++) perm[i] = i;
        for (int i = ev.rs.n - 1; i > 0; i--) {
            int j = (int)(rng_next(&s) % (uint64_t)(i + 1)), t = perm[i];
            perm[i] = perm[j];
            perm[j] = t;
        }
        for (int i = 0; i < want; i++) ev.calib[perm[i]] = 1;
        free(perm);
        json_object_set_new(prior_report, "calibration_rows", json_integer(want));
    }

    /* evidence groups: rows with byte-identical evidence share one head (instruction + shots + evidence) */
    double t0 = cli_now();
    td_decide_stats s0 = td_decider_stats(ev.d);
    int n_groups = 0;
    for (int i = 0; i < ev.rs.n; i++) group[i] = -1;
    for (int i = 0; i < ev.rs.n && rc == 0; i++) {
        if (group[i] >= 0) continue;
        int k = 0;
        for (int j = i; j < ev.rs.n; j++)
            if (group[j] < 0 && same_evidence(&ev.rs.v[j], &ev.rs.v[i])) group[j] = n_groups, idx[k++] = j;
        n_groups++;
        rc = score_group(&ev, idx, k);
        if (!quiet) fprintf(stderr, "\rtypedecide evaluate: %d evidence groups scored", n_groups);
    }
    if (!quiet) fputc('\n', stderr);
    if (rc) goto done;
    double seconds = cli_now() - t0;
    td_decide_stats s1 = td_decider_stats(ev.d);
    if (ev.debias == 2) {
        apply_prior(&ev, prior_report);
        int64_t extra = 0;
        for (int i = 0; i < ev.rs.n; i++)
            if (ev.calib[i]) extra += ev.sc[i].suffix_tokens;
        json_object_set_new(prior_report, "calibration_suffix_tokens", json_integer(extra));
    }

    /* metrics */
    td_pred *pr = calloc((size_t)ev.rs.n, sizeof *pr);
    if (!pr) {
        rc = cli_error("evaluate", "out of memory");
        goto done;
    }
    for (int i = 0; i < ev.rs.n; i++) {
        const row *rw = &ev.rs.v[i];
        pr[i].id = rw->id;
        pr[i].family = rw->family;
        pr[i].answer = rw->answer;
        pr[i].n_options = rw->n_options;
        pr[i].option_ids = (const char *const *)rw->option_ids;
        pr[i].probs = ev.sc[i].probs;
        pr[i].n_rotations = ev.sc[i].n_rot;
        pr[i].rotations = ev.sc[i].rot;
        pr[i].unparsed = ev.sc[i].unparsed;
    }
    td_cost cost = {(double)(s1.forwards - s0.forwards), (double)(s1.suffix_tokens - s0.suffix_tokens), seconds};
    st = td_metrics_json(pr, ev.rs.n, (int32_t)bins, &cost, &mjson);
    free(pr);
    if (st != TD_OK) {
        rc = cli_fail("evaluate", st);
        goto done;
    }
    res = json_loads(mjson, 0, NULL);
    if (ev.debias == 2) { /* only the calibration rows were rotated: order stability is not measured */

        json_object_set_new(res, "order_unstable", json_null());
        json_object_set_new(res, "order_consistency", json_null());
    }
    char hash[32];
    snprintf(hash, sizeof hash, "fnv1a64:%016llx", (unsigned long long)fnv1a(fixture_bytes ? fixture_bytes : "", fixture_len));
    json_object_set_new(res, "model", json_string(model_dir));
    json_object_set_new(res, "adapter", adapter ? json_string(adapter) : json_null());
    json_object_set_new(res, "fixture", json_string(fixture));
    json_object_set_new(res, "fixture_hash", json_string(hash));
    json_object_set_new(res, "mode", json_string(mode_s));
    json_object_set_new(res, "shots", json_integer(ev.shots));
    json_object_set_new(res, "debias", json_string(debias_s));
    json_object_set_new(res, "seed", json_integer(seed));
    json_object_set_new(res, "skipped_rows", json_integer(skipped));
    json_object_set_new(res, "evidence_groups", json_integer(n_groups));
    json_object_set_new(res, "head_prefills", json_integer(s1.head_prefills - s0.head_prefills));
    json_object_set_new(res, "head_tokens", json_integer(s1.head_tokens - s0.head_tokens));
    json_object_set_new(res, "shared_suffix_tokens", json_integer(s1.shared_tokens - s0.shared_tokens));
    json_object_set_new(res, "slot_map", json_loads(td_decider_slot_map(ev.d), 0, NULL));
    if (ev.debias == 2) json_object_set_new(res, "prior", json_incref(prior_report));
    print_table(res, fixture);
    if (out_path) {
        char *txt = json_dumps(res, JSON_INDENT(1) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(17));
        rc = txt ? write_text("evaluate", out_path, txt) : cli_error("evaluate", "out of memory");
        free(txt);
    }
    if (rc == 0 && pred_path) {
        FILE *f = fopen(pred_path, "wb");
        if (!f) rc = cli_error("evaluate", "%s: cannot write", pred_path);
        double fw_per_row = cost.forwards / ev.rs.n;
        for (int i = 0; f && i < ev.rs.n; i++) {
            const row *rw = &ev.rs.v[i];
            const scored *s = &ev.sc[i];
            json_t *o = json_object(), *ids = json_array(), *probs = json_array();
            for (int k = 0; k < rw->n_options; k++) {
                json_array_append_new(ids, json_string(rw->option_ids[k]));
                json_array_append_new(probs, json_real(s->probs[k]));
            }
            json_object_set_new(o, "id", json_string(rw->id));
            json_object_set_new(o, "family", rw->family ? json_string(rw->family) : json_null());
            json_object_set_new(o, "answer", json_string(rw->answer));
            json_object_set_new(o, "options", ids);
            json_object_set_new(o, "probs", probs);
            if (s->n_rot) {
                json_t *rot = json_array();
                for (int q = 0; q < s->n_rot; q++) {
                    json_t *a = json_array();
                    for (int k = 0; k < rw->n_options; k++) json_array_append_new(a, json_real(s->rot[q * rw->n_options + k]));
                    json_array_append_new(rot, a);
                }
                json_object_set_new(o, "rotations", rot);
            }
            if (s->n_shots) {
                json_t *sh = json_array();
                for (int k = 0; k < s->n_shots; k++) json_array_append_new(sh, json_string(s->shot_ids[k]));
                json_object_set_new(o, "shots", sh);
            }
            if (ev.mode_generate) {
                json_object_set_new(o, "text", json_string(s->text ? s->text : ""));
                json_object_set_new(o, "unparsed", json_boolean(s->unparsed));
            }
            json_object_set_new(o, "forwards", json_real(fw_per_row));
            json_object_set_new(o, "suffix_tokens", json_integer(s->suffix_tokens));
            json_object_set_new(o, "ms", json_real(ev.mode_generate ? 1e3 * seconds / ev.rs.n : s->ms));
            char *line = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(17));
            if (line) fprintf(f, "%s\n", line);
            free(line);
            json_decref(o);
        }
        if (f && fclose(f) != 0) rc = cli_error("evaluate", "%s: write failed", pred_path);
    }
    if (rc == 0 && plot_path) {
        char title[512], *svg = NULL;
        snprintf(title, sizeof title, "%s on %s (%s, shots %d, debias %s)", model_dir, fixture, mode_s, ev.shots, debias_s);
        st = td_plot_svg(mjson, title, &svg);
        rc = st == TD_OK ? write_text("evaluate", plot_path, svg) : cli_fail("evaluate", st);
        td_free(svg);
    }
done:
    json_decref(res);
    json_decref(prior_report);
    td_free(mjson);
    for (int i = 0; ev.sc && i < ev.rs.n; i++) {
        free(ev.sc[i].rot);
        td_free(ev.sc[i].text);
    }
    free(ev.sc);
    free(ev.calib);
    free(group);
    free(idx);
    free(instruction);
    free(fixture_bytes);
    td_decider_free(ev.d);
    td_model_free(m);
    rows_free(&ev.rs);
    rows_free(&pool_keep);
    return rc;
}
