/* Which token an option letter becomes right after "Answer:" in a tokenizer. Shared by the readout and by export
 * (a head pruned to the letters). */
#ifndef TD_DECIDE_LETTERS_H
#define TD_DECIDE_LETTERS_H

#include "typedecide.h"

/* For each of the n letters, the single token that "Answer:" + sep + letter adds to the tokens of "Answer:",
 * trying sep = " " and then sep = "" for all letters together. Fails (TD_ERR_UNSUPPORTED) naming a letter that
 * is not one token either way, or when two letters share a token. *sep receives a static string. */
td_status td_probe_letters(const td_tokenizer *tok, const char *letters, int32_t n, int32_t *ids, const char **sep);

#endif
