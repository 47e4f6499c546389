/* typedecide metrics: the evaluation metrics from saved predictions alone. */
#include <stdio.h>
#include <string.h>
#include <stdlib.h>

#include "cli.h"
#include "typedecide_eval.h"
#include "commands.h"

static const char usage_text[] =
    "usage: typedecide metrics --predictions FILE.jsonl [--bins 15]\n"
    "\n"
    "Prints one JSON object computed from the predictions alone:\n"
    "  accuracy                       share of rows whose argmax option equals the answer (ties: first shown)\n"
    "  family_balanced_accuracy       per family, the mean recall over the answer ids present in it\n"
    "  mean_family_balanced_accuracy  their mean over families\n"
    "  brier                          mean over rows of sum over options of (p - [option == answer])^2\n"
    "  ece                            sum over equal-width bins (b/B, (b+1)/B] of the max probability of\n"
    "                                 n_bin/N * |accuracy_bin - confidence_bin| (ece_bins: the bins)\n"
    "  order_unstable                 rows whose rotations do not all have the same argmax option (ties: first\n"
    "                                 shown; compared with each other, not with probs; null without rotations)\n"
    "  order_consistency              1 - order_unstable / N\n"
    "  rstd                           population std (percent) of recall grouped by the answer's letter position\n"
    "  cost                           forwards, suffix tokens per row, seconds (when the lines carry them)\n"
    "  per_criterion                  id, family, answer, prediction, probs, correct, stable per row\n"
    "Prediction lines: {\"id\", \"family\", \"answer\", \"options\": [ids in shown order], \"probs\": [same order],\n"
    "\"rotations\": [[probs per rotation, mapped back to the shown order], ...]}.\n";

int cmd_metrics(int argc, char **argv) {
    const char *path = NULL, *bins_s = "15";
    const cli_opt opts[] = {{"predictions", 1, &path, NULL}, {"bins", 1, &bins_s, NULL}, {NULL, 0, NULL, NULL}};
    int r = cli_parse(argc, argv, opts, "metrics", NULL, 0, NULL);
    if (r == 1) {
        fputs(usage_text, stdout);
        return 0;
    }
    if (r) return r;
    if (!path) return cli_usage_error("metrics", "--predictions is required");
    long long bins;
    if (cli_int(bins_s, 1, 1000, &bins)) return cli_usage_error("metrics", "--bins must be in 1..1000");
    size_t len;
    char *data = cli_read_input("metrics", path, CLI_MAX_JSONL, "a predictions file can be", &len);
    if (!data) return 1;
    td_predictions *p = NULL;
    td_status st = td_predictions_parse(data, len, path, &p);
    free(data);
    if (st != TD_OK) return cli_fail_msg("metrics");
    if (td_predictions_count(p) == 0) { /* metrics of nothing are not a result */
        td_predictions_free(p);
        return cli_error("metrics", "%s: no prediction lines in it: nothing to score",
                         strcmp(path, "-") ? path : "standard input");
    }
    char *json = NULL;
    st = td_predictions_metrics_json(p, (int32_t)bins, &json);
    int rc = st == TD_OK ? (puts(json), 0) : cli_fail("metrics", st);
    td_free(json);
    td_predictions_free(p);
    return rc;
}
