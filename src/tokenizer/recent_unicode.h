/* Unicode newer than PCRE2's tables. Hugging Face's tokenizers match the pre-tokenizer's \p{L} and \p{N} with the
 * Unicode of its regex engine; Debian 12's PCRE2 10.42 knows Unicode 14.0 and sees every later letter or digit (Kawi,
 * Garay, Nag Mundari, CJK extension I, ...) as unassigned. td_regex_widen adds those code points to the property
 * classes of a pattern, so the split is the one the newer Unicode gives. */
#ifndef TD_TOKENIZER_RECENT_UNICODE_H
#define TD_TOKENIZER_RECENT_UNICODE_H

#include <stddef.h>
#include <stdint.h>

#include "typedecide.h"

typedef struct td_unicode_range {
    uint32_t first, last;
    char cat[3]; /* general category, two letters */
} td_unicode_range;

extern const td_unicode_range td_recent_unicode[];
extern const size_t td_n_recent_unicode;

/* Rewrites a PCRE2 pattern so that \p{X} and \pX (X a general category of one or two letters) also match the recent
 * code points of that category: outside a class \p{L} becomes [\p{L}\x{...}-\x{...}...], inside one the ranges follow
 * it. Negations (\P, \p{^X}) and other properties stay as they are. *out: a new NUL-terminated pattern (td_free).
 * The rewrite changes nothing a pattern matches among the code points PCRE2 knows. */
td_status td_regex_widen(const char *pattern, size_t len, char **out, size_t *out_len);

#endif
