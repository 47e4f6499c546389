/* Read access to a loaded tokenizer's vocabulary, merges and pre-tokenizer for the layers above (vocab.h). */
#include "tokenizer/vocab.h"

#include "tokenizer/tokenizer_internal.h"

const char *td_vocab_piece(const td_tokenizer *t, int32_t id, size_t *len, td_piece_kind *kind) {
    *len = 0;
    *kind = TD_PIECE_NONE;
    if (id < 0 || id >= t->n_tokens || t->str_off[id] == UINT64_MAX) return NULL;
    if (t->is_token[id] & 2) /* an added token: its content, also when the vocabulary has the id too */
        for (int k = 0; k < t->n_added; k++)
            if (t->added[k].id == id) {
                *len = t->added[k].len;
                *kind = t->added[k].special ? TD_PIECE_SPECIAL : TD_PIECE_ADDED;
                return t->added[k].content;
            }
    *len = t->str_len[id];
    *kind = TD_PIECE_NORMAL;
    return t->vocab_strings + t->str_off[id];
}

int64_t td_vocab_n_merges(const td_tokenizer *t) { return t->n_merges; }

void td_vocab_merge(const td_tokenizer *t, int64_t i, int32_t *a, int32_t *b) {
    *a = t->merge_a[i];
    *b = t->merge_b[i];
}

const char *td_vocab_split_regex(const td_tokenizer *t) {
    return t->n_split == 1 && !t->split[0].literal ? t->split[0].source : NULL;
}

int td_vocab_nfc(const td_tokenizer *t) { return t->nfc; }
int td_vocab_ignore_merges(const td_tokenizer *t) { return t->ignore_merges; }
int td_vocab_spm(const td_tokenizer *t) { return t->spm; }
int32_t td_vocab_unk(const td_tokenizer *t) { return t->unk_id; }
