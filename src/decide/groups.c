/* Evidence groups: criteria whose evidence is byte-identical share one head (one prefill). The one grouping that
 * decide, evaluate and every later client use, so that they batch the same criteria together. */
#include <string.h>

#include "typedecide.h"
#include "util/alloc.h"
#include "util/error.h"
#include "util/hashmap.h"

td_status td_evidence_groups(const char *const *texts, const size_t *lens, int32_t n, int32_t *group,
                             int32_t *order, int32_t *n_groups) {
    if (n < 0 || (n > 0 && (!texts || !lens || !group)) || !n_groups)
        return td_fail(TD_ERR_INVALID_ARG, "td_evidence_groups: bad argument");
    *n_groups = 0;
    td_strmap first; /* text -> its group */
    if (td_strmap_init(&first, (size_t)n + 1) != 0) return td_fail_nomem("the evidence groups");
    for (int32_t i = 0; i < n; i++) {
        const char *t = texts[i] ? texts[i] : "";
        size_t len = texts[i] ? lens[i] : 0;
        if (len > UINT32_MAX) {
            td_strmap_free(&first);
            return td_fail(TD_ERR_RANGE, "evidence %d is longer than 4 GB", i);
        }
        int32_t g;
        if (!td_strmap_get(&first, t, len, &g)) {
            g = (*n_groups)++;
            td_strmap_put(&first, t, len, g); /* sized for n keys: never full */
        }
        group[i] = g;
    }
    td_strmap_free(&first);
    if (!order) return TD_OK;
    /* a stable counting sort by group: order[] lists group 0's rows, then group 1's, ... each in row order */
    int32_t *at = td_calloc((size_t)*n_groups + 1, sizeof *at);
    if (!at) return td_fail_nomem("the evidence groups");
    for (int32_t i = 0; i < n; i++) at[group[i] + 1]++;
    for (int32_t g = 0; g < *n_groups; g++) at[g + 1] += at[g];
    for (int32_t i = 0; i < n; i++) order[at[group[i]]++] = i;
    td_free(at);
    return TD_OK;
}
