/* The typed readout against transformers: for every reference under fixtures/readout/ (made by
 * scripts/readout_refs.py on the GPU machine from the checkpoints as saved: Hugging Face's tokenizer renders and
 * tokenises the prompt, transformers computes the letter logits in float64 and float32), `td_decide` on the same
 * model, evidence and criteria with this machine's DEFAULT kernels and precision must give every option's
 * probability within 1e-5 of float64 transformers, and the letters must be the reference's tokens. The reference's
 * own float32 distance is printed beside ours. Where the kernels have bf16 products, TD_PRECISION_BF16 (the user's
 * choice, not the default) is also run and its distance printed: what that choice costs on a real readout. */
#include <dirent.h>
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test_util.h"
#include "typedecide.h"

#define TOL_PROB 1e-5
#define MAX_CRITERIA 64

typedef struct crit_file {
    int n;
    td_criterion c[MAX_CRITERIA];
    json_t *rows;
} crit_file;

static int load_criteria(crit_file *cf) {
    json_error_t e;
    FILE *f = fopen(td_test_path("fixtures/readout/criteria.jsonl"), "r");
    if (!f) return -1;
    cf->rows = json_array();
    cf->n = 0;
    json_t *row;
    while (cf->n < MAX_CRITERIA && (row = json_loadf(f, JSON_DISABLE_EOF_CHECK, &e)) != NULL) {
        json_array_append_new(cf->rows, row);
        json_t *opts = json_object_get(row, "options");
        int k = (int)json_array_size(opts);
        const char **ids = calloc((size_t)k, sizeof *ids), **desc = calloc((size_t)k, sizeof *desc);
        for (int i = 0; i < k; i++) {
            ids[i] = json_string_value(json_object_get(json_array_get(opts, (size_t)i), "id"));
            desc[i] = json_string_value(json_object_get(json_array_get(opts, (size_t)i), "description"));
        }
        cf->c[cf->n++] = (td_criterion){json_string_value(json_object_get(row, "id")),
                                        json_string_value(json_object_get(row, "question")), k, ids, desc};
    }
    fclose(f);
    return 0;
}

/* The model a reference was made from: fixtures/models/NAME or models/NAME. */
static const char *model_dir(const char *name) {
    static char dir[700];
    snprintf(dir, sizeof dir, "%s/%s", td_test_path("fixtures/models"), name);
    if (access(dir, R_OK) == 0) return dir;
    snprintf(dir, sizeof dir, "%s/%s", td_test_path("models"), name);
    return dir;
}

/* Decides every criterion at `precision`; returns max |p - ref probs64| (and of the reference's own float32 in *r32),
 * or -1 when the run failed. */
static double run(td_model *m, const crit_file *cf, const char *evidence, size_t len, json_t *ref, int32_t precision,
                  double *r32) {
    td_decide_params dp = td_decide_default_params();
    dp.n_threads = 2;
    dp.precision = precision;
    dp.letters = "ABCDE"; /* the letters the criteria use, as the reference probed them (a truncated vocabulary may
                             lack " Q": probing all twenty would then choose the separator "" for every letter) */
    td_decider *d = NULL;
    td_decision out[MAX_CRITERIA];
    if (td_decider_new(m, &dp, &d) != TD_OK || td_decide(d, evidence, len, cf->c, cf->n, out) != TD_OK) {
        CHECKF(0, "%s: %s", td_model_path(m), td_last_error());
        td_decider_free(d);
        return -1;
    }
    json_t *slots = json_loads(td_decider_slot_map(d), 0, NULL), *keep = json_object_get(slots, "keep");
    json_t *want = json_object_get(ref, "letter_ids");
    CHECKF(json_array_size(want) >= 2 && json_array_size(keep) >= json_array_size(want), "%s: letters", td_model_path(m));
    for (size_t i = 0; i < json_array_size(want) && i < json_array_size(keep); i++) /* the letters the criteria use */
        CHECKF(json_integer_value(json_array_get(keep, i)) == json_integer_value(json_array_get(want, i)),
               "%s: letter %zu is token %lld, Hugging Face's probe says %lld", td_model_path(m), i,
               (long long)json_integer_value(json_array_get(keep, i)),
               (long long)json_integer_value(json_array_get(want, i)));
    json_decref(slots);
    double worst = 0, worst32 = 0;
    json_t *rows = json_object_get(ref, "criteria");
    CHECKF((int)json_array_size(rows) == cf->n, "%s: reference has %zu criteria, the file %d", td_model_path(m),
           json_array_size(rows), cf->n);
    for (int i = 0; i < cf->n && i < (int)json_array_size(rows); i++) {
        json_t *p64 = json_object_get(json_array_get(rows, (size_t)i), "probs64");
        json_t *p32 = json_object_get(json_array_get(rows, (size_t)i), "probs32");
        CHECKF((int)json_array_size(p64) == out[i].n_options, "%s: criterion %s has %d options, reference %zu",
               td_model_path(m), cf->c[i].id, out[i].n_options, json_array_size(p64));
        for (int k = 0; k < out[i].n_options && k < (int)json_array_size(p64); k++) {
            double r = json_real_value(json_array_get(p64, (size_t)k)), d64 = fabs(out[i].probs[k] - r);
            if (!(d64 <= worst)) worst = d64; /* NaN counts as the worst */
            double d32 = fabs(json_real_value(json_array_get(p32, (size_t)k)) - r);
            if (d32 > worst32) worst32 = d32;
        }
    }
    td_decider_free(d);
    *r32 = worst32;
    return worst;
}

int main(void) {
    crit_file cf;
    CHECKF(load_criteria(&cf) == 0 && cf.n == 12, "fixtures/readout/criteria.jsonl: expected 12 criteria");
    size_t ev_len = 0;
    char *evidence = td_test_read(td_test_path("fixtures/readout/ticket.txt"), &ev_len);
    CHECKF(evidence != NULL, "fixtures/readout/ticket.txt is missing");
    DIR *dir = opendir(td_test_path("fixtures/readout"));
    CHECKF(dir != NULL, "fixtures/readout is missing");
    int n_refs = 0;
    struct dirent *de;
    while (evidence && dir && (de = readdir(dir)) != NULL) {
        size_t nl = strlen(de->d_name);
        if (nl < 6 || strcmp(de->d_name + nl - 5, ".json") != 0) continue;
        char path[700];
        snprintf(path, sizeof path, "%s/%s", td_test_path("fixtures/readout"), de->d_name);
        json_t *ref = json_load_file(path, 0, NULL);
        CHECKF(ref != NULL, "%s: not JSON", path);
        if (!ref) continue;
        const char *name = json_string_value(json_object_get(ref, "model"));
        td_model *m = NULL;
        td_status st = td_model_load(model_dir(name), NULL, &m);
        CHECKF(st == TD_OK, "%s: %s", name, td_last_error());
        if (st == TD_OK) {
            double r32 = 0, r32b = 0;
            double ours = run(m, &cf, evidence, ev_len, ref, TD_PRECISION_FP32, &r32);
            CHECKF(ours >= 0 && ours <= TOL_PROB, "%s (%s kernels): readout max |p - transformers fp64| = %g (bound %g)",
                   name, td_model_kernels(m), ours, TOL_PROB);
            printf("%-22s %-10s readout of %d criteria: max |p - transformers fp64| %.3g (transformers fp32: %.3g)",
                   name, td_model_kernels(m), cf.n, ours, r32);
            if (td_cpu_bf16_products()) {
                double b = run(m, &cf, evidence, ev_len, ref, TD_PRECISION_BF16, &r32b);
                printf("; --precision bf16: %.3g", b);
            }
            printf("\n");
            n_refs++;
        }
        td_model_free(m);
        json_decref(ref);
    }
    if (dir) closedir(dir);
    CHECKF(n_refs >= 4, "expected readout references for at least 4 models under fixtures/readout, found %d", n_refs);
    for (int i = 0; i < cf.n; i++) {
        free((void *)cf.c[i].option_ids);
        free((void *)cf.c[i].descriptions);
    }
    json_decref(cf.rows);
    free(evidence);
    return td_test_finish("test_readout_parity");
}
