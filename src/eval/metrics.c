/* Evaluation metrics from scored rows: accuracy, per-family balanced accuracy, Brier score, expected calibration
 * error, order stability under rotation, and the spread of recall across answer letter positions. Sums run in
 * row order in double precision, so the same predictions always give the same bits. */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "typedecide_eval.h"
#include "util/alloc.h"
#include "util/error.h"
#include "util/json.h"
#include "eval/eval_internal.h"

static int32_t argmax(const double *p, int32_t k) {
    int32_t b = 0;
    for (int32_t i = 1; i < k; i++)
        if (p[i] > p[b]) b = i; /* strict: the first of equal maxima wins */
    return b;
}

static int32_t answer_index(const td_pred *r) {
    for (int32_t i = 0; i < r->n_options; i++)
        if (strcmp(r->option_ids[i], r->answer) == 0) return i;
    return -1;
}

/* Bin of a confidence in (b/B, (b+1)/B], decided with the same comparisons as the definition. */
static int32_t bin_of(double conf, int32_t B) {
    int32_t b = (int32_t)ceil(conf * B) - 1;
    if (b < 0) b = 0;
    if (b > B - 1) b = B - 1;
    while (b > 0 && conf <= (double)b / B) b--;
    while (b < B - 1 && conf > (double)(b + 1) / B) b++;
    return b;
}

static json_t *num_or_null(double v, int valid) { return valid ? json_real(v) : json_null(); }

/* A probability vector as the metrics need it: every value finite and in [0, 1], the sum 1 within 1e-3. Writes the
 * reason into why (naming the entry, `what` says which vector) and returns -1 otherwise. */
int td_check_probs(const double *p, int32_t k, const char *what, char *why, size_t wn) {
    double sum = 0;
    for (int32_t i = 0; i < k; i++) {
        if (!isfinite(p[i]) || p[i] < 0 || p[i] > 1)
            return snprintf(why, wn, "%s[%d] is %g: a probability must be a number in [0, 1]", what, i, p[i]), -1;
        sum += p[i];
    }
    if (fabs(sum - 1.0) > 1e-3) return snprintf(why, wn, "%s sum to %.9g: they must sum to 1 (within 0.001)", what, sum), -1;
    return 0;
}

td_status td_metrics_json(const td_pred *rows, int32_t n, int32_t bins, const td_cost *cost, char **json) {
    if (!json || n < 0 || (n && !rows) || bins < 1) return td_fail(TD_ERR_INVALID_ARG, "td_metrics_json: bad argument");
    *json = NULL;
    uint64_t f0 = td_alloc_failures();
    for (int32_t i = 0; i < n; i++) {
        const td_pred *r = &rows[i];
        if (r->n_options < 1 || !r->probs || !r->option_ids || !r->answer || !r->id)
            return td_fail(TD_ERR_INVALID_ARG, "row %d: incomplete prediction", i);
        if (answer_index(r) < 0)
            return td_fail(TD_ERR_FORMAT, "row %d (%s): answer \"%s\" is not among its options", i, r->id, r->answer);
        char why[256], what[32];
        if (td_check_probs(r->probs, r->n_options, "probs", why, sizeof why))
            return td_fail(TD_ERR_FORMAT, "row %d (%s): %s", i, r->id, why);
        for (int32_t q = 0; r->rotations && q < r->n_rotations; q++) {
            snprintf(what, sizeof what, "rotations[%d]", q);
            if (td_check_probs(r->rotations + (size_t)q * r->n_options, r->n_options, what, why, sizeof why))
                return td_fail(TD_ERR_FORMAT, "row %d (%s): %s", i, r->id, why);
        }
    }
    int32_t *pred = td_calloc((size_t)(n ? n : 1), sizeof *pred), *ans = td_calloc((size_t)(n ? n : 1), sizeof *ans);
    int *stable = td_calloc((size_t)(n ? n : 1), sizeof *stable);
    double *conf_sum = td_calloc((size_t)bins, sizeof *conf_sum), *acc_sum = td_calloc((size_t)bins, sizeof *acc_sum);
    int64_t *bin_n = td_calloc((size_t)bins, sizeof *bin_n);
    if (!pred || !ans || !stable || !conf_sum || !acc_sum || !bin_n) {
        td_free(pred), td_free(ans), td_free(stable), td_free(conf_sum), td_free(acc_sum), td_free(bin_n);
        return td_fail_nomem("metrics");
    }
    double correct = 0, brier = 0;
    int64_t n_unparsed = 0;
    int have_rot = n > 0, max_k = 1;
    int64_t unstable = 0;
    for (int32_t i = 0; i < n; i++) {
        const td_pred *r = &rows[i];
        pred[i] = r->unparsed ? -1 : argmax(r->probs, r->n_options);
        ans[i] = answer_index(r);
        n_unparsed += r->unparsed != 0;
        if (r->n_options > max_k) max_k = r->n_options;
        int ok = pred[i] == ans[i];
        correct += ok;
        for (int32_t k = 0; k < r->n_options; k++) {
            double t = r->probs[k] - (k == ans[i] ? 1.0 : 0.0);
            brier += t * t;
        }
        double conf = pred[i] >= 0 ? r->probs[pred[i]] : 1.0 / r->n_options;
        int32_t b = bin_of(conf, bins);
        bin_n[b]++;
        conf_sum[b] += conf;
        acc_sum[b] += ok;
        if (r->n_rotations > 0 && r->rotations) {
            /* Order-unstable means the rotations' argmax option ids are not all equal. They are compared with each
             * other, never with the argmax of probs: a file made elsewhere need not hold the rotation average in
             * probs. Ties within a rotation go to the first option in shown order, as for every argmax here;
             * rotations are mapped back to the shown order, so equal indices are equal option ids. */
            int32_t first = argmax(r->rotations, r->n_options);
            stable[i] = 1;
            for (int32_t q = 1; q < r->n_rotations; q++)
                if (argmax(r->rotations + (size_t)q * r->n_options, r->n_options) != first) stable[i] = 0;
            unstable += !stable[i];
        } else {
            have_rot = 0;
        }
    }
    double ece = 0;
    json_t *ebins = json_array();
    for (int32_t b = 0; b < bins; b++) {
        json_t *o = json_object();
        json_object_set_new(o, "n", json_integer(bin_n[b]));
        if (bin_n[b]) {
            double acc = acc_sum[b] / (double)bin_n[b], mc = conf_sum[b] / (double)bin_n[b];
            ece += (double)bin_n[b] / n * fabs(acc - mc);
            json_object_set_new(o, "accuracy", json_real(acc));
            json_object_set_new(o, "confidence", json_real(mc));
        }
        json_array_append_new(ebins, o);
    }

    /* per family: mean over the answer ids present of each one's recall */
    json_t *fam = json_object();
    double fam_sum = 0;
    int n_fam = 0;
    for (int32_t i = 0; i < n; i++) {
        const char *f = rows[i].family ? rows[i].family : "";
        int seen = 0;
        for (int32_t j = 0; j < i && !seen; j++) seen = strcmp(rows[j].family ? rows[j].family : "", f) == 0;
        if (seen) continue;
        double rec_sum = 0;
        int n_cls = 0;
        for (int32_t j = i; j < n; j++) { /* each answer id of this family, at its first occurrence */
            if (strcmp(rows[j].family ? rows[j].family : "", f) != 0) continue;
            int dup = 0;
            for (int32_t k = i; k < j && !dup; k++)
                dup = strcmp(rows[k].family ? rows[k].family : "", f) == 0 && strcmp(rows[k].answer, rows[j].answer) == 0;
            if (dup) continue;
            double hit = 0, tot = 0;
            for (int32_t k = j; k < n; k++)
                if (strcmp(rows[k].family ? rows[k].family : "", f) == 0 && strcmp(rows[k].answer, rows[j].answer) == 0) {
                    tot++;
                    hit += pred[k] == ans[k];
                }
            rec_sum += hit / tot;
            n_cls++;
        }
        double bal = rec_sum / n_cls;
        json_object_set_new(fam, f, json_real(bal));
        fam_sum += bal;
        n_fam++;
    }

    /* recall by the answer's letter position, and its population standard deviation in percent */
    double pos_rec[TD_DECIDE_MAX_OPTIONS];
    int n_pos = 0;
    json_t *by_pos = json_object();
    for (int32_t pos = 0; pos < max_k; pos++) {
        double hit = 0, tot = 0;
        for (int32_t i = 0; i < n; i++)
            if (ans[i] == pos) tot++, hit += pred[i] == pos;
        if (tot == 0) continue;
        pos_rec[n_pos++] = hit / tot;
        char key[8];
        snprintf(key, sizeof key, "%c", 'A' + pos);
        json_object_set_new(by_pos, key, json_real(hit / tot));
    }
    double mean = 0, var = 0;
    for (int i = 0; i < n_pos; i++) mean += pos_rec[i];
    mean /= n_pos ? n_pos : 1;
    for (int i = 0; i < n_pos; i++) var += (pos_rec[i] - mean) * (pos_rec[i] - mean);
    var /= n_pos ? n_pos : 1;

    json_t *per = json_array();
    for (int32_t i = 0; i < n; i++) {
        const td_pred *r = &rows[i];
        json_t *o = json_object(), *pr = json_array();
        for (int32_t k = 0; k < r->n_options; k++) json_array_append_new(pr, json_real(r->probs[k]));
        json_object_set_new(o, "id", json_string(r->id));
        json_object_set_new(o, "family", r->family ? json_string(r->family) : json_null());
        json_object_set_new(o, "answer", json_string(r->answer));
        json_object_set_new(o, "prediction", pred[i] >= 0 ? json_string(r->option_ids[pred[i]]) : json_null());
        json_object_set_new(o, "probs", pr);
        json_object_set_new(o, "correct", json_boolean(pred[i] == ans[i]));
        json_object_set_new(o, "stable", r->n_rotations > 0 && r->rotations ? json_boolean(stable[i]) : json_null());
        json_array_append_new(per, o);
    }

    json_t *root = json_object();
    json_object_set_new(root, "n", json_integer(n));
    json_object_set_new(root, "accuracy", num_or_null(correct / n, n > 0));
    json_object_set_new(root, "family_balanced_accuracy", fam);
    json_object_set_new(root, "mean_family_balanced_accuracy", num_or_null(fam_sum / n_fam, n_fam > 0));
    json_object_set_new(root, "brier", num_or_null(brier / n, n > 0));
    json_object_set_new(root, "ece", num_or_null(ece, n > 0));
    json_object_set_new(root, "ece_bins", ebins);
    json_object_set_new(root, "order_unstable", have_rot ? json_integer(unstable) : json_null());
    json_object_set_new(root, "order_consistency", num_or_null(1.0 - (double)unstable / n, have_rot));
    json_object_set_new(root, "recall_by_position", by_pos);
    json_object_set_new(root, "rstd", num_or_null(100.0 * sqrt(var), n_pos > 0));
    json_object_set_new(root, "unparsed", json_integer(n_unparsed));
    json_t *c = json_object();
    int hc = cost && n > 0;
    json_object_set_new(c, "forwards_per_row", num_or_null(hc ? cost->forwards / n : 0, hc && cost->forwards >= 0));
    json_object_set_new(c, "suffix_tokens_per_row",
                        num_or_null(hc ? cost->suffix_tokens / n : 0, hc && cost->suffix_tokens >= 0));
    json_object_set_new(c, "wall_seconds", num_or_null(hc ? cost->seconds : 0, hc && cost->seconds >= 0));
    json_object_set_new(c, "rows_per_second",
                        num_or_null(hc && cost->seconds > 0 ? n / cost->seconds : 0, hc && cost->seconds > 0));
    json_object_set_new(root, "cost", c);
    json_object_set_new(root, "per_criterion", per);
    *json = td_json_dumps_checked(root, JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(17), f0);
    json_decref(root);
    td_free(pred), td_free(ans), td_free(stable), td_free(conf_sum), td_free(acc_sum), td_free(bin_n);
    return *json ? TD_OK : td_fail_nomem("the metrics JSON");
}
