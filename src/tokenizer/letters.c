#include "tokenizer/letters.h"

#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "util/alloc.h"
#include "util/error.h"
#include "util/json.h"

/* The token `letter` adds after "Answer:" + sep into *id, or -1 if that is not exactly one extra token. */
static td_status probe(const td_tokenizer *tok, const int32_t *base, size_t n_base, const char *sep, char letter,
                       int32_t *id) {
    char text[16];
    snprintf(text, sizeof text, "Answer:%s%c", sep, letter);
    int32_t *ids = NULL;
    size_t n = 0;
    *id = -1;
    td_status st = td_tokenize(tok, text, strlen(text), 0, &ids, &n);
    if (st == TD_OK && n == n_base + 1 && memcmp(ids, base, n_base * sizeof *ids) == 0) *id = ids[n_base];
    td_free(ids);
    return st;
}

td_status td_probe_letters(const td_tokenizer *tok, const char *letters, int32_t n, int32_t *ids, const char **sep) {
    for (int32_t i = 0; i < n; i++) { /* what a letter can be, before asking the tokenizer what it becomes */
        unsigned char c = (unsigned char)letters[i];
        if (c < 0x21 || c > 0x7e)
            return td_fail(TD_ERR_INVALID_ARG, "letters \"%.*s\": character %d is not a printable ASCII character", n,
                           letters, i + 1);
        for (int32_t j = 0; j < i; j++)
            if (letters[j] == letters[i])
                return td_fail(TD_ERR_INVALID_ARG, "letters \"%.*s\": '%c' appears twice", n, letters, letters[i]);
    }
    int32_t *base = NULL;
    size_t n_base = 0;
    td_status st = td_tokenize(tok, "Answer:", 7, 0, &base, &n_base);
    if (st != TD_OK) return td_fail_context(st, "tokenising \"Answer:\"");
    static const char *const seps[] = {" ", ""};
    char bad = 0;
    *sep = NULL;
    for (int s = 0; s < 2 && !*sep && st == TD_OK; s++) {
        int ok = 1;
        for (int32_t i = 0; i < n && ok && st == TD_OK; i++) {
            st = probe(tok, base, n_base, seps[s], letters[i], &ids[i]);
            if (ids[i] < 0) {
                ok = 0;
                if (s == 0) bad = letters[i];
            }
            for (int32_t j = 0; j < i && ok; j++) ok = ids[j] != ids[i];
        }
        if (ok && st == TD_OK) *sep = seps[s];
    }
    td_free(base);
    if (st != TD_OK) return td_fail_context(st, "probing the option letters");
    if (!*sep) {
        char b = bad ? bad : letters[0];
        return td_fail(TD_ERR_UNSUPPORTED,
                       "letter '%c' is not a single token after \"Answer:\" in this tokenizer (tried \"Answer: %c\" "
                       "and \"Answer:%c\")",
                       b, b, b);
    }
    return TD_OK;
}

char *td_slot_map_json(const char *model, const char *sep, const char *letters, const int32_t *keep, int32_t n) {
    uint64_t f0 = td_alloc_failures();
    json_t *o = json_object(), *kj = json_array(), *t2r = json_object();
    for (int32_t i = 0; i < n; i++) {
        char key[16];
        json_array_append_new(kj, json_integer(keep[i]));
        snprintf(key, sizeof key, "%d", keep[i]);
        json_object_set_new(t2r, key, json_integer(i));
    }
    json_object_set_new(o, "version", json_integer(1));
    json_object_set_new(o, "model", json_string(model));
    json_object_set_new(o, "separator", json_string(sep));
    json_object_set_new(o, "letters", json_stringn(letters, (size_t)n));
    json_object_set_new(o, "keep", kj);
    json_object_set_new(o, "token_to_row", t2r);
    char *s = td_json_dumps_checked(o, JSON_COMPACT | JSON_PRESERVE_ORDER, f0);
    json_decref(o);
    return s;
}
