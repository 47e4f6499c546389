/* What the evaluation's files share inside the library. */
#ifndef TD_EVAL_INTERNAL_H
#define TD_EVAL_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

/* A probability vector the metrics accept: every value finite and in [0, 1], the sum 1 within 1e-3. Returns 0, or
 * -1 with the reason (naming the entry of `what`, e.g. "probs" or "rotations[2]") in why. */
int td_check_probs(const double *p, int32_t k, const char *what, char *why, size_t wn);

#endif
