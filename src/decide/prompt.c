/* Rendering the readout prompt and probing the option letters. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "decide/decide_internal.h"
#include "tokenizer/letters.h"
#include "util/alloc.h"
#include "util/error.h"
#include "util/strbuf.h"

static const char default_instruction[] =
    "You are a careful, impartial analyst. Read the evidence below. For each criterion, choose the single option "
    "that the evidence best supports and answer with its letter only.";

const char *td_decide_default_instruction(void) { return default_instruction; }

char *td_decide_render_head(const td_decider *d, const td_shot *shots, int32_t n_shots, const char *evidence,
                            size_t len, size_t *out_len) {
    td_strbuf b = TD_STRBUF_INIT;
    td_strbuf_puts(&b, d->instruction);
    for (int32_t i = 0; i < n_shots; i++) {
        size_t sl;
        char *s = td_decide_render_suffix(&shots[i].criterion, d->letters, &sl);
        if (!s) {
            b.oom = 1;
            break;
        }
        char tail[8];
        snprintf(tail, sizeof tail, "%s%c\n", d->separator, d->letters[shots[i].answer]);
        td_strbuf_puts(&b, "\nEvidence:\n");
        td_strbuf_put(&b, shots[i].evidence, shots[i].evidence_len);
        td_strbuf_put(&b, s, sl);
        td_strbuf_puts(&b, tail);
        td_free(s);
    }
    td_strbuf_puts(&b, "\nEvidence:\n");
    td_strbuf_put(&b, evidence, len);
    return td_strbuf_finish(&b, out_len);
}

char *td_decide_render_suffix(const td_criterion *c, const char *letters, size_t *out_len) {
    td_strbuf b = TD_STRBUF_INIT;
    td_strbuf_puts(&b, "\nCriterion: ");
    td_strbuf_puts(&b, c->question);
    td_strbuf_puts(&b, "\nOptions:");
    for (int32_t i = 0; i < c->n_options; i++) {
        char head[8];
        snprintf(head, sizeof head, "\n%c. ", letters[i]);
        td_strbuf_puts(&b, head);
        td_strbuf_puts(&b, c->descriptions[i]); /* descriptions only: option ids never reach the model */
    }
    td_strbuf_puts(&b, "\nAnswer:");
    return td_strbuf_finish(&b, out_len);
}

td_status td_decide_probe_letters(td_decider *d) {
    td_status st = td_probe_letters(d->tok, d->letters, d->n_letters, d->letter_ids, &d->separator);
    if (st != TD_OK) return st;
    d->slot_map = td_slot_map_json(td_model_path(d->model), d->separator, d->letters, d->letter_ids, d->n_letters);
    return d->slot_map ? TD_OK : td_fail_nomem("the slot map");
}
