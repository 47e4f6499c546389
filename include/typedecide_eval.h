/*
 * typedecide_eval.h — evaluation: criteria and fixture rows, metrics, td_evaluate, predictions.
 *
 * Rows read criteria and fixture files (JSONL) into td_criterion values ready for td_decide; td_evaluate scores a
 * fixture with a decider (shots, rotations and debiasing) and computes accuracy, calibration and order bias;
 * predictions are written and read back for td_metrics_json and plots. Implemented in src/eval/.
 * Part of libtypedecide, an application on top of the core: it includes typedecide.h, whose conventions
 * (td_status and td_last_error, ownership, td_free, threads) hold here too; see that header's guide for the layering.
 */
#ifndef TYPEDECIDE_EVAL_H
#define TYPEDECIDE_EVAL_H

#include "typedecide.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------------------------------------------ */
/* Evaluation metrics                                                                                            */
/* ------------------------------------------------------------------------------------------------------------ */

/* One scored row. probs and rotations are in the shown option order; rotations (n_rotations x n_options, may be
 * NULL) hold the probabilities of every cyclic rotation of the options, mapped back to the shown order. */
typedef struct td_pred {
    const char *id, *family, *answer;
    int32_t n_options;
    const char *const *option_ids;
    const double *probs;
    int32_t n_rotations;
    const double *rotations;
    int unparsed; /* generation mode: the answer named no option; counted wrong, probs uniform */
} td_pred;

/* What the scoring cost, for the "cost" key (negative fields are reported as null). */
typedef struct td_cost {
    double forwards, suffix_tokens, seconds;
} td_cost;

/* Computes the metrics as one JSON object (keys: accuracy, family_balanced_accuracy,
 * mean_family_balanced_accuracy, brier, ece, ece_bins, order_unstable, order_consistency, recall_by_position, rstd,
 * unparsed, cost, per_criterion).
 * Argmax ties go to the first option in shown order; ECE bin b holds max probability in (b/B, (b+1)/B]. A row is
 * order-unstable when the argmax option ids of its rotations are not all the same (order metrics are null unless
 * every row has rotations). *json is a new NUL-terminated string (td_free). Errors: TD_ERR_FORMAT for an answer
 * that is not among a row's options, TD_ERR_INVALID_ARG for bins < 1 or an incomplete row. */
TD_API td_status td_metrics_json(const td_pred *rows, int32_t n, int32_t bins, const td_cost *cost, char **json);

/* An SVG page from a metrics JSON object: the reliability diagram (accuracy against confidence per ECE bin, with
 * counts) and per-family balanced accuracy bars. *svg is a new string (td_free). TD_ERR_FORMAT when the JSON is
 * not a td_metrics_json object. */
TD_API td_status td_plot_svg(const char *metrics_json, const char *title, char **svg);

/* ------------------------------------------------------------------------------------------------------------ */
/* Evaluation                                                                                                    */
/* ------------------------------------------------------------------------------------------------------------ */

typedef enum td_eval_mode {
    TD_EVAL_READOUT = 0, /* option-letter probabilities (the typed readout) */
    TD_EVAL_GENERATE = 1 /* greedy free text after the same prompt, parsed with td_answer_parse (unparsed: wrong,
                            probabilities uniform) */
} td_eval_mode;

typedef enum td_debias {
    TD_DEBIAS_NONE = 0,
    TD_DEBIAS_CYCLIC = 1, /* score every cyclic rotation of the options, average per option id */
    TD_DEBIAS_PRIOR = 2   /* estimate a per-letter prior from all rotations of a seeded share of rows, divide the
                             other rows' probabilities by it */
} td_debias;

typedef struct td_eval_params {
    td_eval_mode mode;
    td_debias debias;          /* readout mode only */
    int32_t shots;             /* worked examples per evidence (0..64), drawn (seeded) from rows of the same family
                                  and another evidence, rendered in the shared head */
    const td_rows *shots_pool; /* where shots come from; NULL: the evaluated rows */
    double prior_fraction;     /* share of rows that estimate the prior, in (0, 1]; at least one row. 0.05 */
    uint64_t seed;             /* shots and the prior's rows. 1 */
    int32_t max_tokens;        /* generate mode: tokens per answer (1..4096). 8 */
    int32_t bins;              /* ECE bins (1..1000). 15 */
    const char *model_name, *adapter_name, *fixture_name; /* recorded in the results (NULL: null) */
    void (*progress)(void *user, int32_t groups_done, int32_t n_groups); /* after each evidence group; may be NULL */
    void *progress_user;
} td_eval_params;

TD_API td_eval_params td_eval_default_params(void);

typedef struct td_eval td_eval;

/* Scores every row with the decider (whose letters, instruction and mode apply): rows are grouped by evidence
 * (td_evidence_groups; one head prefill per group), then metrics and results are computed. The rows must have
 * evidence and an answer among their options (load them with TD_ROWS_EVIDENCE | TD_ROWS_ANSWER), else
 * TD_ERR_FORMAT naming the line; params out of range: TD_ERR_INVALID_ARG; decide errors pass through. The rows
 * (and the shots pool) must outlive the result. */
TD_API td_status td_evaluate(td_decider *d, const td_rows *rows, const td_eval_params *params, td_eval **out);
TD_API void td_eval_free(td_eval *e);
/* td_metrics_json of the scored rows (borrowed; lives as long as the result). */
TD_API const char *td_eval_metrics_json(const td_eval *e);
/* The results: the metrics (order stability null under the prior, which rotates only its calibration rows) and
 * model, adapter, fixture, fixture_hash, mode, shots, debias, seed, skipped_rows (td_rows_n_bad), evidence_groups,
 * head_prefills, head_tokens, shared_suffix_tokens, slot_map and, with the prior, "prior" (calibration rows, the
 * priors per option count, rows left uncorrected, their extra suffix tokens). Indented JSON, borrowed. */
TD_API const char *td_eval_results_json(const td_eval *e);
/* Writes the predictions JSONL (the input of td_predictions_load): per row id, family, answer, options (ids in
 * shown order), probs, rotations (when rotated), shots (ids of the worked examples), text and unparsed (generate
 * mode), forwards, suffix_tokens and ms. TD_ERR_IO when the file cannot be written completely. */
TD_API td_status td_eval_write_predictions(const td_eval *e, const char *path);

/* The option a generated text names: a leading option letter (after spaces, newlines, '(', '*' or '"'; not followed
 * by a letter or digit), else the longest option description it starts with (case-insensitive); -1 when neither.
 * letters: NULL for "ABCD...T". */
TD_API int32_t td_answer_parse(const char *text, const td_criterion *criterion, const char *letters);

/* Predictions read back (files of td_eval_write_predictions, or made elsewhere with at least id, answer, options
 * and probs per line). Errors name "SOURCE:LINE". */
typedef struct td_predictions td_predictions;
TD_API td_status td_predictions_load(const char *path, td_predictions **out);
TD_API td_status td_predictions_parse(const char *data, size_t len, const char *name, td_predictions **out);
TD_API void td_predictions_free(td_predictions *p);
TD_API int32_t td_predictions_count(const td_predictions *p);
TD_API const td_pred *td_predictions_get(const td_predictions *p, int32_t i);
/* td_metrics_json over the lines, with the cost summed from their forwards, suffix_tokens and ms (null when a line
 * lacks one). *json: td_free. */
TD_API td_status td_predictions_metrics_json(const td_predictions *p, int32_t bins, char **json);

#ifdef __cplusplus
}
#endif

#endif /* TYPEDECIDE_EVAL_H */
