/* Rendering the readout prompt and probing the option letters. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "decide/decide_internal.h"
#include "tokenizer/letters.h"
#include "util/alloc.h"
#include "util/error.h"

static const char default_instruction[] =
    "You are a careful, impartial analyst. Read the evidence below. For each criterion, choose the single option "
    "that the evidence best supports and answer with its letter only.";

const char *td_decide_default_instruction(void) { return default_instruction; }

typedef struct sbuf {
    char *s;
    size_t n, cap;
    int oom;
} sbuf;

static void put(sbuf *b, const char *s, size_t n) {
    if (b->oom) return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n + 1) cap *= 2;
        char *ns = td_realloc(b->s, cap);
        if (!ns) {
            b->oom = 1;
            return;
        }
        b->s = ns;
        b->cap = cap;
    }
    memcpy(b->s + b->n, s, n);
    b->n += n;
    b->s[b->n] = 0;
}

static void puts_(sbuf *b, const char *s) { put(b, s, strlen(s)); }

static char *finish(sbuf *b, size_t *out_len) {
    if (b->oom) {
        td_free(b->s);
        return NULL;
    }
    if (!b->s) put(b, "", 0);
    if (out_len) *out_len = b->n;
    return b->s;
}

char *td_decide_render_head(const td_decider *d, const td_shot *shots, int32_t n_shots, const char *evidence,
                            size_t len, size_t *out_len) {
    sbuf b = {0};
    puts_(&b, d->instruction);
    for (int32_t i = 0; i < n_shots; i++) {
        size_t sl;
        char *s = td_decide_render_suffix(&shots[i].criterion, d->letters, &sl);
        if (!s) {
            b.oom = 1;
            break;
        }
        char tail[8];
        snprintf(tail, sizeof tail, "%s%c\n", d->separator, d->letters[shots[i].answer]);
        puts_(&b, "\nEvidence:\n");
        put(&b, shots[i].evidence, shots[i].evidence_len);
        put(&b, s, sl);
        puts_(&b, tail);
        td_free(s);
    }
    puts_(&b, "\nEvidence:\n");
    put(&b, evidence, len);
    return finish(&b, out_len);
}

char *td_decide_render_suffix(const td_criterion *c, const char *letters, size_t *out_len) {
    sbuf b = {0};
    puts_(&b, "\nCriterion: ");
    puts_(&b, c->question);
    puts_(&b, "\nOptions:");
    for (int32_t i = 0; i < c->n_options; i++) {
        char head[8];
        snprintf(head, sizeof head, "\n%c. ", letters[i]);
        puts_(&b, head);
        puts_(&b, c->descriptions[i]); /* descriptions only: option ids never reach the model */
    }
    puts_(&b, "\nAnswer:");
    return finish(&b, out_len);
}

td_status td_decide_probe_letters(td_decider *d) {
    td_status st = td_probe_letters(d->tok, d->letters, d->n_letters, d->letter_ids, &d->separator);
    if (st != TD_OK) return st;
    d->slot_map = td_slot_map_json(td_model_path(d->model), d->separator, d->letters, d->letter_ids, d->n_letters);
    return d->slot_map ? TD_OK : td_fail_nomem("the slot map");
}
