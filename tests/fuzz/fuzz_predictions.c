/* libFuzzer target: the predictions reader (td_predictions_parse), then the metrics and the reliability plot of what
 * it accepted: whatever the bytes, a status, never a crash, and accepted rows always give finite metrics. */
#include <stdint.h>
#include <string.h>

#include "typedecide_eval.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    td_predictions *p = NULL;
    if (td_predictions_parse((const char *)data, size, "fuzz.jsonl", &p) != TD_OK) {
        if (!td_last_error()[0]) __builtin_trap();
        return 0;
    }
    char *json = NULL, *svg = NULL;
    if (td_predictions_metrics_json(p, 15, &json) == TD_OK) {
        /* validated rows give numbers: a NaN would make jansson drop the key */
        if (td_predictions_count(p) > 0 && (!strstr(json, "\"brier\": ") || !strstr(json, "\"ece\": "))) __builtin_trap();
        if (td_plot_svg(json, "fuzz", &svg) != TD_OK) __builtin_trap();
    }
    td_free(svg);
    td_free(json);
    td_predictions_free(p);
    return 0;
}
