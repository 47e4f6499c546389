/* Parity with Hugging Face transformers: for every reference fixture under fixtures/models (tiny random
 * checkpoints made by scripts/make_fixtures.py on the GPU machine), the logits of every position must be within
 * 1e-4 of transformers' fp32 logits, and the greedy continuation must be identical. Where the fixture also carries
 * transformers' float64 logits of the same checkpoint (Qwen3.5), ours must be within 1e-4 of those too: that is
 * the check that does not depend on how either side rounds. TD_CHUNKED=1 runs the chunked DeltaNet form. */
#include <dirent.h>
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "test_util.h"
#include "typedecide.h"

#define TOL 1e-4

static void check_model(const char *name) {
    char dir[512], path[600];
    snprintf(dir, sizeof dir, "%s", td_test_path("fixtures/models"));
    snprintf(dir + strlen(dir), sizeof dir - strlen(dir), "/%s", name);
    snprintf(path, sizeof path, "%s/ref.json", dir);
    json_error_t e;
    json_t *ref = json_load_file(path, 0, &e);
    if (!ref) return; /* not a model fixture */
    td_model *m = NULL;
    td_model_params mp = td_model_default_params();
    char base[600];
    const char *model_dir = dir;
    if (json_is_string(json_object_get(ref, "base"))) { /* a PEFT adapter over another fixture: merged at load */
        snprintf(base, sizeof base, "%s/%s", td_test_path("fixtures/models"), json_string_value(json_object_get(ref, "base")));
        model_dir = base;
        mp.adapter = dir;
    }
    td_status st = td_model_load(model_dir, &mp, &m);
    CHECKF(st == TD_OK, "%s: load: %s", name, td_last_error());
    if (st != TD_OK) {
        json_decref(ref);
        return;
    }
    int32_t V = td_model_n_vocab(m);
    CHECKF(V == json_integer_value(json_object_get(ref, "vocab_size")), "%s: vocab size", name);
    json_t *prompts = json_object_get(ref, "prompts"), *files = json_object_get(ref, "logits_files");
    json_t *greedy = json_object_get(ref, "greedy");
    int n_new = (int)json_integer_value(json_object_get(ref, "greedy_new_tokens"));
    double worst = 0, worst64 = -1;
    for (size_t p = 0; p < json_array_size(prompts); p++) {
        json_t *pr = json_array_get(prompts, p);
        int n = (int)json_array_size(pr);
        snprintf(path, sizeof path, "%s/%s", dir, json_string_value(json_array_get(files, p)));
        size_t len;
        float *want = td_test_read(path, &len);
        CHECKF(want && len == (size_t)n * V * 4, "%s: %s has %zu bytes, want %d x %d floats", name, path, len, n, V);
        if (!want || len != (size_t)n * V * 4) {
            free(want);
            continue;
        }
        td_ctx_params cp = td_ctx_default_params();
        cp.n_ctx = n + n_new + 1;
        cp.n_batch = n;
        cp.n_outputs_max = n;
        cp.n_threads = 2;
        cp.deltanet_chunked = getenv("TD_CHUNKED") != NULL;
        td_ctx *ctx;
        td_batch *b;
        CHECK(td_ctx_new(m, &cp, &ctx) == TD_OK);
        CHECK(td_batch_new(n, &b) == TD_OK);
        for (int i = 0; i < n; i++) td_batch_add(b, (int32_t)json_integer_value(json_array_get(pr, (size_t)i)), 0, i, 1);
        CHECKF(td_ctx_decode(ctx, b) == TD_OK, "%s: decode: %s", name, td_last_error());
        double max_diff = 0;
        int at_pos = -1;
        for (int i = 0; i < n; i++) {
            const float *got = td_ctx_output(ctx, i);
            for (int32_t v = 0; v < V; v++) {
                double d = fabs((double)got[v] - want[(size_t)i * V + v]);
                if (!(d <= max_diff)) max_diff = d, at_pos = i; /* NaN counts as the worst */
            }
        }
        if (max_diff > worst) worst = max_diff;
        CHECKF(max_diff <= TOL, "%s prompt %zu: max |logit - transformers| = %g at position %d", name, p, max_diff, at_pos);
        json_t *f64 = json_array_get(json_object_get(ref, "logits64_files"), p);
        if (f64) {
            snprintf(path, sizeof path, "%s/%s", dir, json_string_value(f64));
            float *exact = td_test_read(path, &len);
            CHECKF(exact && len == (size_t)n * V * 4, "%s: %s missing or of the wrong size", name, path);
            double d64 = 0;
            for (int i = 0; exact && len == (size_t)n * V * 4 && i < n; i++) {
                const float *got = td_ctx_output(ctx, i);
                for (int32_t v = 0; v < V; v++) {
                    double d = fabs((double)got[v] - exact[(size_t)i * V + v]);
                    if (!(d <= d64)) d64 = d;
                }
            }
            CHECKF(d64 <= TOL, "%s prompt %zu: max |logit - transformers fp64| = %g", name, p, d64);
            if (d64 > worst64) worst64 = d64;
            free(exact);
        }
        /* greedy continuation, one token at a time through the cache */
        json_t *g = json_array_get(greedy, p);
        const float *last = td_ctx_output(ctx, n - 1);
        for (int k = 0; k < n_new; k++) {
            int32_t best = 0;
            for (int32_t v = 1; v < V; v++)
                if (last[v] > last[best]) best = v;
            int32_t expect = (int32_t)json_integer_value(json_array_get(g, (size_t)k));
            CHECKF(best == expect, "%s prompt %zu: greedy token %d is %d, transformers says %d", name, p, k, best, expect);
            if (best != expect) break;
            td_batch_clear(b);
            td_batch_add(b, best, 0, n + k, 1);
            CHECK(td_ctx_decode(ctx, b) == TD_OK);
            last = td_ctx_output(ctx, 0);
        }
        td_batch_free(b);
        td_ctx_free(ctx);
        free(want);
    }
    printf("%-20s %-13s max |logit - transformers fp32| %.3g", name, mp.adapter ? "qwen3+lora" : td_model_arch(m), worst);
    if (worst64 >= 0) printf(", fp64 %.3g", worst64);
    printf(" over %zu prompts; greedy %d tokens equal\n", json_array_size(prompts), n_new);
    td_model_free(m);
    json_decref(ref);
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

int main(void) {
    DIR *d = opendir(td_test_path("fixtures/models"));
    CHECKF(d != NULL, "fixtures/models is missing");
    if (!d) return td_test_finish("test_fixtures");
    char *names[256];
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d)) && n < 256)
        if (de->d_name[0] != '.') names[n++] = strdup(de->d_name);
    closedir(d);
    qsort(names, (size_t)n, sizeof *names, cmp_str);
    CHECKF(n >= 5, "expected at least 5 fixture models, found %d", n);
    for (int i = 0; i < n; i++) {
        check_model(names[i]);
        free(names[i]);
    }
    return td_test_finish("test_fixtures");
}
