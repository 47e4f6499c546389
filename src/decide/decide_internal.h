/* The decider's private state and the prompt pieces shared by its files. */
#ifndef TD_DECIDE_INTERNAL_H
#define TD_DECIDE_INTERNAL_H

#include "typedecide.h"
#include "util/hashmap.h"

/* Suffix tokens kept by their text (suffix_cache.c). */
typedef struct td_suffix_cache {
    td_strmap map; /* text -> index */
    char **text;   /* [TD_SUFFIX_KEEP] owned: the keys of map */
    int32_t **ids;
    int32_t *n;
    size_t count, bytes;
} td_suffix_cache;

struct td_decider {
    const td_model *model;
    const td_tokenizer *tok;
    td_decide_params p;
    char *instruction;          /* owned copy */
    char letters[TD_DECIDE_MAX_OPTIONS + 1];
    int32_t n_letters;
    int32_t letter_ids[TD_DECIDE_MAX_OPTIONS]; /* token of each letter right after "Answer:" (slot map: keep) */
    const char *separator;      /* " " or "" between "Answer:" and the letter */
    char *slot_map;             /* JSON */
    td_ctx *ctx;                /* sized for the largest plan so far */
    td_ctx_params cp;
    td_batch *batch;
    int32_t batch_cap;
    td_decide_stats stats;
    int32_t *cached_head;       /* cache_head: the head tokens sequence 0 holds, or NULL when it holds no head */
    int32_t n_cached_head;
    int32_t max_token_bytes;    /* the longest token's bytes: how many tokens a text is at least */
    /* td_decide_multi: heads kept by content in sequences 0 .. TD_DECIDE_SLOTS-1, least recently used evicted */
    int32_t *slot_head[TD_DECIDE_SLOTS]; /* the head tokens the slot's sequence holds; NULL: none */
    int32_t slot_n[TD_DECIDE_SLOTS];
    uint64_t slot_used[TD_DECIDE_SLOTS]; /* slot_clock at its last use */
    uint64_t slot_clock;
    int32_t fault; /* after TD_ERR_NONFINITE: the criterion (index in the call) whose pass met it, -1 the shared head,
                      -2 a stem several criteria share */
    td_suffix_cache suffixes;
};

/* Shared token prefixes among the suffixes of one batched pass (stems.c): criteria whose suffixes begin with the
 * same TD_STEM_MIN or more tokens form a group (neighbours in lexicographic order), and the group's common prefix,
 * short of each member's last token, is its stem: run once, forked by every member. */
#define TD_STEM_MIN 4
typedef struct td_stems {
    int32_t n;    /* stems found */
    int32_t *of;  /* [count] each criterion's stem, -1: none */
    int32_t *len; /* [n] tokens of each stem */
    int32_t *rep; /* [n] a member whose suffix starts with the stem's tokens */
} td_stems;
td_status td_stems_find(const int32_t *const *suffixes, const int32_t *n_suffix, int32_t count, td_stems *out);
void td_stems_free(td_stems *s);

/* Finds the token each letter becomes right after "Answer:" (trying " " then "" as separator) and writes the
 * slot map. */
td_status td_decide_probe_letters(td_decider *d);

/* head = instruction + shots + "\nEvidence:\n" + evidence, as a new string; each shot is
 * "\nEvidence:\n{evidence}{suffix}{separator}{letter}\n". */
char *td_decide_render_head(const td_decider *d, const td_shot *shots, int32_t n_shots, const char *evidence,
                            size_t len, size_t *out_len);
/* suffix = "\nCriterion: {question}\nOptions:\nA. {d0}\nB. {d1}...\nAnswer:", as a new string. */
char *td_decide_render_suffix(const td_criterion *c, const char *letters, size_t *out_len);

/* A suffix's tokens (*out: td_free), from the decider's cache when this text was tokenized before: the same ids as
 * td_tokenize(d->tok, s, len, 0, ...) whatever was kept. Errors: td_tokenize's, TD_ERR_NOMEM. */
td_status td_suffix_tokens(td_decider *d, const char *s, size_t len, int32_t **out, size_t *n_out);
void td_suffix_cache_clear(td_suffix_cache *c);

#endif
