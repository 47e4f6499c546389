/* Building a byte-level BPE tokenizer from its parts: the one place where a vocabulary, added tokens and merges
 * become a td_tokenizer, whatever file they came from (tokenizer.json in this layer, GGUF metadata in model/).
 * Every check of the tables happens here: ids in range and unique, strings valid UTF-8 without NUL bytes, a token
 * for every byte, both halves and the result of every merge in the vocabulary. */
#ifndef TD_TOKENIZER_BUILD_H
#define TD_TOKENIZER_BUILD_H

#include <stddef.h>
#include <stdint.h>

#include "typedecide.h"

#define TD_MAX_TOKEN_ID (1 << 24) /* token ids are below this */

/* Strings are borrowed for the call and copied; they need not be NUL-terminated. */
typedef struct td_bpe_token {
    const char *s; /* in the byte-level alphabet, as tokenizer.json's model.vocab writes it */
    size_t len;
    int32_t id;
} td_bpe_token;

typedef struct td_bpe_added {
    const char *content; /* the raw text the token stands for and is matched against */
    size_t len;
    int32_t id;
    int special, normalized, lstrip, rstrip, single_word; /* Hugging Face's AddedToken flags */
} td_bpe_added;

typedef struct td_bpe_merge {
    const char *a, *b;
    size_t alen, blen;
} td_bpe_merge;

typedef struct td_bpe_parts {
    const char *name;                   /* the source, in messages ("model.gguf") */
    const char *vocab_key, *merges_key; /* what the source calls its tables, in messages ("model.vocab") */
    const td_bpe_token *vocab;
    size_t n_vocab;
    const td_bpe_added *added;
    size_t n_added;
    const td_bpe_merge *merges; /* in rank order */
    size_t n_merges;
} td_bpe_parts;

/* How a byte-level BPE tokenizer built from parts treats text besides its Split regex. */
typedef struct td_bpe_options {
    int nfc;           /* the NFC normalizer (Qwen's tokenizers) */
    int ignore_merges; /* a pre-token that is itself in the vocabulary is one token (Llama 3's tokenizer) */
    int32_t bos_id;    /* the token put before a text with TD_TOKENIZE_ADD_BOS (Llama 3), -1: none */
    int spm;           /* SentencePiece-style BPE (Gemma 3): the space written U+2581, words from characters, byte
                          fallback <0xXX>; split_regex is then unused (Gemma's Split on " " after the normalizer has
                          replaced every space splits nothing) */
    int32_t unk_id;    /* spm: the unknown token, -1: none */
} td_bpe_options;

/* The pipeline of Qwen's and Llama 3's tokenizer.json files over `parts`: NFC when opt->nfc, one Split
 * pre-tokenizer with split_regex (behavior Isolated), ByteLevel without a prefix space or a regex of its own, BPE.
 * With opt->spm, Gemma 3's: the normalizer's space to U+2581, a Split on " " (MergedWithPrevious), BPE with byte
 * fallback.
 * Errors:
 * TD_ERR_FORMAT naming parts->name and the table (an id twice, a string twice, a missing byte token, a merge of
 * strings outside the vocabulary, ...), TD_ERR_UNSUPPORTED when the regex does not compile, TD_ERR_NOMEM. */
td_status td_tokenizer_build(const td_bpe_parts *parts, const td_bpe_options *opt, const char *split_regex,
                             td_tokenizer **out);

/* Splits a merge written "a b" (one space) into its halves, pointing into s. Returns 0, or -1 when s is not two
 * non-empty strings separated by exactly one space. */
int td_bpe_merge_split(const char *s, size_t len, td_bpe_merge *out);

#endif
