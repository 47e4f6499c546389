/* Several evidences in one pass (the server's /v1/decide batch across clients): the library's internal entry point
 * next to td_decide, not part of the public API. */
#ifndef TD_DECIDE_MULTI_H
#define TD_DECIDE_MULTI_H

#include "typedecide.h"

/* Heads a decider keeps prefilled by content for td_decide_multi (sequences 0 .. TD_DECIDE_SLOTS - 1). */
#define TD_DECIDE_SLOTS 16

/* One evidence and its criteria: the arguments of one td_decide call and what it gave. */
typedef struct td_decide_group {
    const char *evidence; /* len bytes of UTF-8 (NULL with len 0: the empty text) */
    size_t len;
    const td_criterion *criteria;
    int32_t n;
    td_decision *out;       /* [n]: written when status is TD_OK */
    td_status status;       /* out: td_decide's status for this group alone */
    char error[512];        /* out: td_last_error() of a failed group, its own criteria numbered as td_decide does */
    int32_t prefill_tokens; /* out: head tokens this group prefilled (0: its evidence was already prefilled) */
    int32_t head_cached;    /* out: 1 when its head was found prefilled (kept from an earlier call or this pass) */
} td_decide_group;

/* td_decide for each group, many groups per forward pass: each distinct head (instruction + evidence) is prefilled
 * once, in one batch with the pass's other new heads, and kept by content for later calls (least recently used
 * evicted); then every criterion of the pass forks from its head and all their suffixes run in one forward pass.
 * A pass holds the groups, in order, whose heads and suffixes fit the decider's memory budget (and max_batch
 * criteria); the rest go to the next pass. Each decision is bit-identical to td_decide's for that group alone (the
 * engine's batch invariance). A group that fails (its evidence or a criterion refused, or a pass that failed, which
 * is then run group by group) gets td_decide's status and message and never changes another group's result.
 * Returns TD_OK (each group's own status in it), or TD_ERR_NOMEM / TD_ERR_INVALID_ARG for the call itself. */
td_status td_decide_multi(td_decider *d, td_decide_group *groups, int32_t n_groups);

#endif
