/* Predictions JSONL: {"id", "family", "answer", "options": [ids in shown order], "probs": [same order],
 * "rotations": [[probs of each rotation, mapped back to the shown order], ...], "forwards", "suffix_tokens", "ms"}.
 * Written by evaluate, read by metrics. */
#ifndef TD_TOOLS_PREDS_H
#define TD_TOOLS_PREDS_H

#include "typedecide.h"

typedef struct preds {
    td_pred *v;
    int n;
    double forwards, suffix_tokens, ms; /* sums; negative when a line lacks the field */
    void *mem;                          /* owned strings and arrays */
} preds;

/* Reads path; prints "typedecide CMD: FILE:LINE: why" and returns 1 on a bad line. */
int preds_load(const char *cmd, const char *path, preds *out);
void preds_free(preds *p);

#endif
