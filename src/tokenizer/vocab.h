/* What other layers may read of a loaded tokenizer beyond the public API: its vocabulary as written in
 * tokenizer.json, its merges and its pre-tokenizer regex (the GGUF writer stores them). */
#ifndef TD_TOKENIZER_VOCAB_H
#define TD_TOKENIZER_VOCAB_H

#include <stddef.h>
#include <stdint.h>

#include "typedecide.h"

typedef enum td_piece_kind {
    TD_PIECE_NONE = 0,    /* no token has this id (a hole in the id space) */
    TD_PIECE_NORMAL = 1,  /* a vocabulary entry */
    TD_PIECE_SPECIAL = 2, /* an added token marked special (<|im_end|>) */
    TD_PIECE_ADDED = 3    /* an added token that is not special (<think>) */
} td_piece_kind;

/* Id's string as tokenizer.json writes it (byte-level alphabet for the vocabulary; an added token's content),
 * borrowed, and its kind; NULL (TD_PIECE_NONE) for a hole or an id outside 0 .. td_tokenizer_n_tokens - 1. */
const char *td_vocab_piece(const td_tokenizer *tok, int32_t id, size_t *len, td_piece_kind *kind);
/* The merges in rank order: merge i joins the tokens *a and *b. */
int64_t td_vocab_n_merges(const td_tokenizer *tok);
void td_vocab_merge(const td_tokenizer *tok, int64_t i, int32_t *a, int32_t *b);
/* The pre-tokenizer's regex when it is one Split regex (not a literal), else NULL. Borrowed. */
const char *td_vocab_split_regex(const td_tokenizer *tok);
/* Whether the pipeline normalises to NFC, and ignores merges for pre-tokens in the vocabulary (export's pre name). */
int td_vocab_nfc(const td_tokenizer *tok);
int td_vocab_ignore_merges(const td_tokenizer *tok);
/* Whether it is SentencePiece-style BPE (Gemma's: U+2581 spaces, byte fallback), and its unknown token (-1: none). */
int td_vocab_spm(const td_tokenizer *tok);
int32_t td_vocab_unk(const td_tokenizer *tok);

#endif
