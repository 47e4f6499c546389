#include "decide/letters.h"

#include <stdio.h>
#include <string.h>

#include "util/error.h"

/* The token `letter` adds after "Answer:" + sep, or -1 if that is not exactly one extra token. */
static int32_t probe(const td_tokenizer *tok, const int32_t *base, size_t n_base, const char *sep, char letter) {
    char text[16];
    snprintf(text, sizeof text, "Answer:%s%c", sep, letter);
    int32_t *ids = NULL;
    size_t n = 0;
    int32_t id = -1;
    if (td_tokenize(tok, text, strlen(text), 0, &ids, &n) == TD_OK && n == n_base + 1 &&
        memcmp(ids, base, n_base * sizeof *ids) == 0)
        id = ids[n_base];
    td_free(ids);
    return id;
}

td_status td_probe_letters(const td_tokenizer *tok, const char *letters, int32_t n, int32_t *ids, const char **sep) {
    int32_t *base = NULL;
    size_t n_base = 0;
    td_status st = td_tokenize(tok, "Answer:", 7, 0, &base, &n_base);
    if (st != TD_OK) return td_fail_context(st, "tokenising \"Answer:\"");
    static const char *const seps[] = {" ", ""};
    char bad = 0;
    *sep = NULL;
    for (int s = 0; s < 2 && !*sep; s++) {
        int ok = 1;
        for (int32_t i = 0; i < n && ok; i++) {
            ids[i] = probe(tok, base, n_base, seps[s], letters[i]);
            if (ids[i] < 0) {
                ok = 0;
                if (s == 0) bad = letters[i];
            }
            for (int32_t j = 0; j < i && ok; j++) ok = ids[j] != ids[i];
        }
        if (ok) *sep = seps[s];
    }
    td_free(base);
    if (!*sep) {
        char b = bad ? bad : letters[0];
        return td_fail(TD_ERR_UNSUPPORTED,
                       "letter '%c' is not a single token after \"Answer:\" in this tokenizer (tried \"Answer: %c\" "
                       "and \"Answer:%c\")",
                       b, b, b);
    }
    return TD_OK;
}
