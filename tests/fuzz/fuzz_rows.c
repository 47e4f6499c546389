/* libFuzzer target: the criteria / fixture row reader (td_rows_parse) under every flag set, then what decide and
 * evaluate do with the rows before a model is involved (evidence groups, the criterion views). */
#include <stdint.h>
#include <string.h>

#include "typedecide.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static const unsigned flag_sets[] = {0, TD_ROWS_ANSWER | TD_ROWS_EVIDENCE | TD_ROWS_UNIQUE_IDS,
                                         TD_ROWS_ANSWER | TD_ROWS_EVIDENCE | TD_ROWS_UNIQUE_IDS | TD_ROWS_SKIP_BAD};
    for (size_t f = 0; f < sizeof flag_sets / sizeof flag_sets[0]; f++) {
        td_rows *rows = NULL;
        if (td_rows_parse((const char *)data, size, "fuzz.jsonl", flag_sets[f], &rows) != TD_OK) {
            if (!td_last_error()[0]) __builtin_trap(); /* a failure always says why */
            continue;
        }
        int32_t n = td_rows_count(rows);
        const char *texts[64];
        size_t lens[64];
        int32_t group[64], order[64], n_groups = 0, k = n < 64 ? n : 64;
        for (int32_t i = 0; i < k; i++) {
            const td_row *r = td_rows_get(rows, i);
            texts[i] = r->evidence;
            lens[i] = r->evidence_len;
            size_t touched = strlen(r->criterion.id) + strlen(r->criterion.question);
            for (int32_t o = 0; o < r->criterion.n_options; o++)
                touched += strlen(r->criterion.option_ids[o]) + strlen(r->criterion.descriptions[o]);
            if (r->answer) touched += strlen(r->answer);
            if (r->family) touched += strlen(r->family);
            if (touched == (size_t)-1) __builtin_trap();
        }
        if (td_evidence_groups(texts, lens, k, group, order, &n_groups) != TD_OK) __builtin_trap();
        for (int32_t i = 0; i < td_rows_n_bad(rows); i++)
            if (!td_rows_bad(rows, i)) __builtin_trap();
        td_rows_free(rows);
    }
    return 0;
}
