/* typedecide evaluate: score a labelled fixture (readout or generation, with or without debiasing) and report
 * accuracy, calibration and order bias. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "typedecide_eval.h"
#include "commands.h"

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
    "                        (--out, --predictions and --plot are each written whole, beside themselves, then\n"
    "                        renamed; none may be an input or another of them)\n"
    "  --predictions FILE    predictions JSONL (the input of `typedecide metrics`)\n"
    "  --plot FILE.svg       reliability diagram and per-family accuracy bars\n"
    "  --bins B              ECE bins (default 15)\n"
    "  --skip-bad            report bad fixture rows and evaluate the rest (default: stop at the first)\n"
    "  --letters, --instruction, --threads, --memory, --batch-size, --kv   as for decide\n"
    "  --device cpu|cuda     where to compute (default cpu; cuda: a build with -DTD_CUDA=ON and an NVIDIA GPU)\n"
    CLI_PRECISION_HELP
    "  --max-tokens N        generation length in --mode generate (default 8)\n"
    "  --quiet               no progress on stderr\n"
    "Caps: the fixture and --shots-file 256 MiB each; --instruction 1 MiB; the model's config.json and\n"
    "tokenizer.json 256 MiB each.\n";

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

/* A report written whole: beside its path, then renamed (the old file stays until the new one is complete). */
static int write_text(const char *cmd, const char *path, const char *text) {
    return td_file_write(path, text, strlen(text), 0) == TD_OK ? 0 : cli_fail_msg(cmd);
}

static void progress(void *user, int32_t done, int32_t n_groups) {
    (void)user, (void)n_groups;
    fprintf(stderr, "\rtypedecide evaluate: %d evidence groups scored", done);
}

/* Rows of a fixture ('-' = stdin); NULL after printing the reason. */
static td_rows *load_rows(const char *path, unsigned flags) {
    size_t len;
    char *data = cli_read_input("evaluate", path, CLI_MAX_JSONL, "a fixture can be", &len);
    if (!data) return NULL;
    td_rows *rows = NULL;
    if (td_rows_parse(data, len, path, flags, &rows) != TD_OK) cli_fail_msg("evaluate");
    free(data);
    return rows;
}

int cmd_evaluate(int argc, char **argv) {
    const char *model_dir = NULL, *adapter = NULL, *mode_s = "readout", *shots_s = "0", *shots_file = NULL,
               *debias_s = "none", *seed_s = "1", *out_path = NULL, *pred_path = NULL, *plot_path = NULL,
               *bins_s = "15", *letters = NULL, *instr = NULL, *threads_s = NULL, *mem_s = NULL, *bs_s = NULL,
               *frac_s = "0.05", *maxtok_s = "8", *kv_s = NULL,
               *device_s = NULL, *precision_s = NULL;
    int skip_bad = 0, quiet = 0;
    const cli_opt opts[] = {
        {"model", 1, &model_dir, NULL},      {"adapter", 1, &adapter, NULL},    {"mode", 1, &mode_s, NULL},
        {"shots", 1, &shots_s, NULL},        {"shots-file", 1, &shots_file, NULL}, {"debias", 1, &debias_s, NULL},
        {"seed", 1, &seed_s, NULL},          {"out", 1, &out_path, NULL},       {"predictions", 1, &pred_path, NULL},
        {"plot", 1, &plot_path, NULL},       {"bins", 1, &bins_s, NULL},        {"letters", 1, &letters, NULL},
        {"instruction", 1, &instr, NULL},    {"threads", 1, &threads_s, NULL},  {"memory", 1, &mem_s, NULL},
        {"batch-size", 1, &bs_s, NULL},      {"prior-fraction", 1, &frac_s, NULL}, {"max-tokens", 1, &maxtok_s, NULL},
        {"skip-bad", 0, NULL, &skip_bad},    {"quiet", 0, NULL, &quiet},        {"kv", 1, &kv_s, NULL},
        {"device", 1, &device_s, NULL},      {"precision", 1, &precision_s, NULL},
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
    td_eval_params ep = td_eval_default_params();
    if (strcmp(mode_s, "readout") == 0) ep.mode = TD_EVAL_READOUT;
    else if (strcmp(mode_s, "generate") == 0) ep.mode = TD_EVAL_GENERATE;
    else return cli_usage_error("evaluate", "--mode must be readout or generate");
    if (strcmp(debias_s, "none") == 0) ep.debias = TD_DEBIAS_NONE;
    else if (strcmp(debias_s, "cyclic") == 0) ep.debias = TD_DEBIAS_CYCLIC;
    else if (strcmp(debias_s, "prior") == 0) ep.debias = TD_DEBIAS_PRIOR;
    else return cli_usage_error("evaluate", "--debias must be none, cyclic or prior");
    if (ep.mode == TD_EVAL_GENERATE && ep.debias != TD_DEBIAS_NONE)
        return cli_usage_error("evaluate", "--debias applies to --mode readout");
    long long v, seed, bins;
    double frac;
    if (cli_int(shots_s, 0, 64, &v)) return cli_usage_error("evaluate", "--shots must be in 0..64");
    ep.shots = (int32_t)v;
    if (cli_int(seed_s, 0, INT64_MAX, &seed)) return cli_usage_error("evaluate", "--seed must be an integer >= 0");
    if (cli_int(bins_s, 1, 1000, &bins)) return cli_usage_error("evaluate", "--bins must be in 1..1000");
    if (cli_double(frac_s, &frac) || frac <= 0 || frac > 1) return cli_usage_error("evaluate", "--prior-fraction must be in (0, 1]");
    if (cli_int(maxtok_s, 1, 256, &v)) return cli_usage_error("evaluate", "--max-tokens must be in 1..256");
    ep.max_tokens = (int32_t)v;
    ep.seed = (uint64_t)seed;
    ep.bins = (int32_t)bins;
    ep.prior_fraction = frac;
    ep.model_name = model_dir;
    ep.adapter_name = adapter;
    ep.fixture_name = fixture;
    ep.progress = quiet ? NULL : progress;
    td_decide_params p = td_decide_default_params();
    p.letters = letters;
    if (cli_kv("evaluate", kv_s, &p.kv_f16)) return 2;
    p.n_threads = cli_default_threads();
    if (threads_s) {
        if (cli_int(threads_s, 1, 1024, &v)) return cli_usage_error("evaluate", "--threads must be in 1..1024");
        p.n_threads = (int32_t)v;
    }
    if (mem_s) {
        if (cli_int(mem_s, 1, 1 << 24, &v)) return cli_usage_error("evaluate", "--memory must be in 1..16777216 (MB)");
        p.memory_mb = v;
    }
    if (bs_s) {
        if (cli_int(bs_s, 1, 1 << 20, &v)) return cli_usage_error("evaluate", "--batch-size must be in 1..1048576");
        p.max_batch = (int32_t)v;
    }
    if ((r = cli_device("evaluate", device_s, precision_s, &p.device, &p.precision, NULL, 0)) != 0) return r;

    unsigned flags = TD_ROWS_ANSWER | TD_ROWS_EVIDENCE | TD_ROWS_UNIQUE_IDS | (skip_bad ? TD_ROWS_SKIP_BAD : 0);
    td_rows *rows = load_rows(fixture, flags), *pool = NULL;
    if (!rows) return 1;
    for (int32_t i = 0; i < td_rows_n_bad(rows); i++) fprintf(stderr, "typedecide evaluate: %s\n", td_rows_bad(rows, i));
    if (td_rows_n_bad(rows)) fprintf(stderr, "typedecide evaluate: skipped %d bad row(s)\n", td_rows_n_bad(rows));
    if (td_rows_count(rows) == 0) {
        td_rows_free(rows);
        return cli_error("evaluate", "%s: no rows to evaluate", fixture);
    }
    if (shots_file && !(pool = load_rows(shots_file, TD_ROWS_ANSWER))) {
        td_rows_free(rows);
        return 1;
    }
    ep.shots_pool = pool;
    int rc = 0;
    char *instruction = NULL;
    td_model *m = NULL;
    td_decider *d = NULL;
    td_eval *ev = NULL;
    json_t *res = NULL;
    const char *inputs[] = {fixture, shots_file, instr && cli_is_file(instr) ? instr : NULL, model_dir, adapter};
    const char *outputs[] = {out_path, pred_path, plot_path};
    if (cli_check_paths("evaluate", inputs, 5, outputs, 3)) { /* nor one output over another */
        rc = 1;
        goto done;
    }
    if (instr && !(instruction = cli_instruction("evaluate", instr))) {
        rc = 1;
        goto done;
    }
    p.instruction = instruction;
    td_status st = cli_load_model(model_dir, 1, quiet, adapter, &m);
    if (st == TD_OK) st = td_decider_new(m, &p, &d);
    if (st == TD_OK) st = td_evaluate(d, rows, &ep, &ev);
    if (!quiet) fputc('\n', stderr);
    if (st != TD_OK) {
        rc = cli_fail("evaluate", st);
        goto done;
    }
    if (!(res = json_loads(td_eval_results_json(ev), 0, NULL))) {
        rc = cli_error("evaluate", "out of memory");
        goto done;
    }
    print_table(res, fixture);
    if (out_path) rc = write_text("evaluate", out_path, td_eval_results_json(ev));
    if (rc == 0 && pred_path && (st = td_eval_write_predictions(ev, pred_path)) != TD_OK) rc = cli_fail_msg("evaluate");
    if (rc == 0 && plot_path) {
        char title[512], *svg = NULL;
        snprintf(title, sizeof title, "%s on %s (%s, shots %d, debias %s)", model_dir, fixture, mode_s, ep.shots, debias_s);
        st = td_plot_svg(td_eval_metrics_json(ev), title, &svg);
        rc = st == TD_OK ? write_text("evaluate", plot_path, svg) : cli_fail("evaluate", st);
        td_free(svg);
    }
done:
    json_decref(res);
    td_eval_free(ev);
    free(instruction);
    td_decider_free(d);
    td_model_free(m);
    td_rows_free(rows);
    td_rows_free(pool);
    return rc;
}
