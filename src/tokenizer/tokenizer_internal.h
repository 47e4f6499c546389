/* The tokenizer's private layout and the pieces of the encode pipeline:
 *   text -> split out added tokens -> NFC -> Split regex (PCRE2) -> byte-level map -> BPE merges -> ids. */
#ifndef TD_TOKENIZER_INTERNAL_H
#define TD_TOKENIZER_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "tokenizer/build.h"
#include "typedecide.h"
#include "util/hashmap.h"
#include "util/utf8.h"

typedef struct td_added_token {
    const char *content; /* exact text that is matched (NUL-terminated, in the tokenizer's vocab_strings) */
    uint32_t len;
    int32_t id;
    int special;
    int normalized;  /* matched against normalized text instead of raw text */
    int lstrip, rstrip, single_word;
} td_added_token;

/* What the Split pre-tokenizer does with its matches (Hugging Face's SplitDelimiterBehavior). */
typedef enum td_split_behavior {
    TD_SPLIT_ISOLATED,
    TD_SPLIT_REMOVED,
    TD_SPLIT_MERGED_WITH_PREVIOUS,
    TD_SPLIT_MERGED_WITH_NEXT,
    TD_SPLIT_CONTIGUOUS
} td_split_behavior;

/* One regex split step of the pre-tokenizer (PCRE2 code, JIT-compiled where available). */
typedef struct td_split_step {
    void *code; /* pcre2_code_8 */
    char *source; /* the pattern as written in tokenizer.json */
    int literal;
    td_split_behavior behavior;
    int invert;
} td_split_step;

#define TD_MAX_SPLIT_STEPS 4

struct td_tokenizer {
    int32_t n_tokens; /* max id + 1 */

    /* Per id: the raw bytes the token stands for (byte-level chars mapped back to bytes; an added token's
     * content). Holes in the id space have length 0 and is_token 0. */
    char *bytes;
    uint64_t *bytes_off; /* [n_tokens + 1] */
    uint8_t *is_token;   /* [n_tokens] bit 1: in the BPE vocabulary; bit 2: an added token (decodes verbatim) */

    /* Vocabulary strings as written in tokenizer.json (byte-level alphabet), then the added tokens' contents, each
     * NUL-terminated, for lookups and export. */
    char *vocab_strings;
    uint64_t *str_off; /* [n_tokens] offset of id's vocabulary string, or of its content for an id that is only an
                          added token (UINT64_MAX: no token) */
    uint32_t *str_len;
    td_strmap vocab;
    int32_t *merge_a, *merge_b; /* the merges in rank order */
    int64_t n_merges;

    /* (left id << 32 | right id) -> (rank << 32 | merged id) */
    td_u64map merges;
    int32_t byte_token[256]; /* id of the single-byte token of each byte value */
    int ignore_merges;

    td_added_token *added;
    int n_added;

    int nfc;
    td_split_step split[TD_MAX_SPLIT_STEPS];
    int n_split;
    int byte_level;          /* the ByteLevel pre-tokenizer is present */
    int add_prefix_space;
    int byte_level_at;       /* how many Split steps precede ByteLevel in the pre-tokenizer sequence */
    int byte_level_regex;    /* ByteLevel's use_regex: split[byte_level_at] is its GPT-2 pattern */
    int spm;                 /* SentencePiece-style BPE (Gemma's tokenizer.json): not byte-level; a word starts from its
                                characters, and a character outside the vocabulary from its bytes' <0xXX> tokens
                                (byte_fallback); the vocabulary writes a space as U+2581 */
    int space_to_meta;       /* the normalizer replaces ' ' by U+2581 (Gemma's "Replace") */
    int32_t unk_id;          /* the model's unk_token, -1: none */
    int32_t bos_id;          /* the token the post-processor puts before a text (Llama 3's <|begin_of_text|>, Gemma's
                                <bos>; Hugging Face's add_special_tokens=True), -1: none (Qwen) */
};

/* The byte-level alphabet: byte value -> unicode code point, and back (-1 for code points outside it). */
uint32_t td_byte_to_cp(uint8_t b);
int td_cp_to_byte(uint32_t cp);


/* Growable id array used by the encode pipeline. */
typedef struct td_idvec {
    int32_t *v;
    size_t n, cap;
} td_idvec;
int td_idvec_push(td_idvec *vec, int32_t id);

/* BPE over one pre-token's bytes; appends ids. */
td_status td_bpe_encode_word(const struct td_tokenizer *tok, const unsigned char *bytes, size_t len, td_idvec *out);

/* Pre-tokens of a normalized text: byte ranges of `text` (which is the input, or an owned copy with the
 * ByteLevel prefix space). */
typedef struct td_pieces {
    const char *text;
    char *owned;
    size_t *start, *len;
    size_t n;
} td_pieces;
td_status td_pretokenize(const struct td_tokenizer *tok, const char *text, size_t len, td_pieces *out);
void td_pieces_free(td_pieces *p);

/* Splits text into pre-tokens and BPE-encodes each. */
td_status td_pretokenize_and_encode(const struct td_tokenizer *tok, const char *text, size_t len, td_idvec *out);

/* Adds a Split step to the pre-tokenizer (compiled; the pattern copied). `name` prefixes messages. */
td_status td_tok_add_split(td_tokenizer *tok, const char *pat, size_t len, int literal, td_split_behavior b, int invert,
                           const char *name);

/* Fills the vocabulary, added tokens, bytes per id and merges of a tokenizer whose normalizer and pre-tokenizer are
 * set (build.h says what is checked). */
td_status td_bpe_build_model(td_tokenizer *tok, const td_bpe_parts *parts);

/* Compiles a Split pattern (a regex, or a literal string when is_literal). Returns code or NULL with error set. */
td_status td_split_compile(const char *pattern, size_t len, int is_literal, void **code);
void td_split_free(void *code);

#endif
