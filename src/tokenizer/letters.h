/* Which token an option letter becomes right after "Answer:" in a tokenizer, and the slot map that records it.
 * The one place for both: the readout (decide) and export (a head pruned to the letters) use them. */
#ifndef TD_TOKENIZER_LETTERS_H
#define TD_TOKENIZER_LETTERS_H

#include "typedecide.h"

/* For each of the n letters, the single token that "Answer:" + sep + letter adds to the tokens of "Answer:",
 * trying sep = " " and then sep = "" for all letters together. Fails (TD_ERR_UNSUPPORTED) naming a letter that
 * is not one token either way, or when two letters share a token. *sep receives a static string. */
td_status td_probe_letters(const td_tokenizer *tok, const char *letters, int32_t n, int32_t *ids, const char **sep);

/* The slot map as one compact JSON object {"version": 1, "model", "separator", "letters", "keep": [token of each
 * row], "token_to_row": {token: row}}: row i of a readout (or of a pruned head) is letter i, token keep[i]. A new
 * string (td_free), NULL when out of memory. */
char *td_slot_map_json(const char *model, const char *sep, const char *letters, const int32_t *keep, int32_t n);

#endif
