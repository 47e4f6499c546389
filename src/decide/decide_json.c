/* The JSON of one decision: the one writer behind `typedecide decide`'s lines and the server's /v1/decide. */
#include <jansson.h>
#include <stdint.h>
#include <string.h>

#include "decide/decide_internal.h"
#include "util/alloc.h"
#include "util/error.h"
#include "util/json.h"

td_status td_decision_json(const td_criterion *c, const td_decision *dc, const char *letters, unsigned flags,
                           char **json) {
    if (json) *json = NULL;
    if (!c || !dc || !letters || !json || dc->best < 0 || dc->best >= c->n_options || c->n_options > TD_DECIDE_MAX_OPTIONS ||
        dc->n_options != c->n_options || (size_t)dc->best >= strlen(letters))
        return td_fail(TD_ERR_INVALID_ARG, "td_decision_json: bad argument");
    uint64_t f0 = td_alloc_failures();
    json_t *o = json_object(), *opts = json_array(), *probs = json_array();
    for (int k = 0; k < c->n_options; k++) {
        json_array_append_new(opts, json_string(c->option_ids[k]));
        json_array_append_new(probs, json_real((double)dc->probs[k]));
    }
    char letter[2] = {letters[dc->best], 0};
    json_object_set_new(o, "id", json_string(c->id ? c->id : ""));
    json_object_set_new(o, "answer", json_string(c->option_ids[dc->best]));
    json_object_set_new(o, "letter", json_string(letter));
    json_object_set_new(o, "options", opts);
    json_object_set_new(o, "probs", probs);
    if (flags & TD_DECISION_ALLOWED_MASS) json_object_set_new(o, "allowed_mass", json_real((double)dc->allowed_mass));
    if (flags & TD_DECISION_LOGITS) {
        json_t *lg = json_array();
        for (int k = 0; k < c->n_options; k++) json_array_append_new(lg, json_real((double)dc->logits[k]));
        json_object_set_new(o, "logits", lg);
    }
    json_object_set_new(o, "suffix_tokens", json_integer(dc->suffix_tokens));
    if (!(flags & TD_DECISION_NO_MS))
        json_object_set_new(o, "ms", json_real((double)(int64_t)(dc->ms * 1000.0 + 0.5) / 1000.0));
    *json = td_json_dumps_checked(o, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(9), f0);
    json_decref(o);
    return *json ? TD_OK : td_fail_nomem("a decision's JSON");
}
