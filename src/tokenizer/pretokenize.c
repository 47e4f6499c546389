/* The pre-tokenizer: the Split regex from tokenizer.json (PCRE2 with UTF + UCP, JIT-compiled), then the
 * byte-level step, then BPE on each piece. Pieces are byte ranges of the (already normalized) text. */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "tokenizer/recent_unicode.h"
#include "tokenizer/tokenizer_internal.h"
#include "util/alloc.h"
#include "util/error.h"
#include "util/grow.h"

/* PCRE2 allocates through the library's hook too (util/alloc.h): a general context per use. */
static void *pcre_malloc(PCRE2_SIZE size, void *data) {
    (void)data;
    return td_malloc(size);
}
static void pcre_free(void *ptr, void *data) {
    (void)data;
    td_free(ptr);
}

static pcre2_code *compile(const char *pattern, size_t len, uint32_t opts, int *err, PCRE2_SIZE *off, int *oom) {
    pcre2_general_context *g = pcre2_general_context_create(pcre_malloc, pcre_free, NULL);
    pcre2_compile_context *cc = g ? pcre2_compile_context_create(g) : NULL;
    pcre2_code *c = cc ? pcre2_compile((PCRE2_SPTR)pattern, len, opts, err, off, cc) : NULL;
    pcre2_compile_context_free(cc);
    pcre2_general_context_free(g);
    *oom = !cc || (!c && *err == PCRE2_ERROR_HEAP_FAILED);
    return c;
}

td_status td_split_compile(const char *pattern, size_t len, int is_literal, void **code) {
    int err, oom;
    PCRE2_SIZE off;
    uint32_t opts = PCRE2_UTF | (is_literal ? PCRE2_LITERAL : PCRE2_UCP); /* UCP is not allowed with LITERAL */
    pcre2_code *c;
    if (is_literal) {
        c = compile(pattern, len, opts, &err, &off, &oom);
    } else { /* with the letters and digits of Unicode newer than PCRE2's (recent_unicode.h) */
        char *wide;
        size_t wide_len;
        td_status st = td_regex_widen(pattern, len, &wide, &wide_len);
        if (st != TD_OK) return st;
        c = compile(wide, wide_len, opts, &err, &off, &oom);
        td_free(wide);
        if (!c && !oom) c = compile(pattern, len, opts, &err, &off, &oom); /* the error's offset in the pattern given */
    }
    if (oom) return td_fail_nomem("the pre-tokenizer regex");
    if (!c) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(err, msg, sizeof msg);
        return td_fail(TD_ERR_UNSUPPORTED, "pre-tokenizer regex does not compile at offset %zu: %s", (size_t)off,
                       (const char *)msg);
    }
    (void)pcre2_jit_compile(c, PCRE2_JIT_COMPLETE); /* the interpreter is the fallback when JIT is unavailable */
    *code = c;
    return TD_OK;
}

void td_split_free(void *code) { pcre2_code_free((pcre2_code *)code); }

typedef struct span {
    size_t start, len;
} span;

typedef struct spanvec {
    span *v;
    size_t n, cap;
} spanvec;

static int span_push(spanvec *s, size_t start, size_t len) {
    if (len == 0) return 0; /* empty pieces are dropped, as in Hugging Face */
    span *nv = td_grow(s->v, &s->cap, s->n + 1, sizeof *nv, 64);
    if (!nv) return -1;
    s->v = nv;
    s->v[s->n].start = start;
    s->v[s->n].len = len;
    s->n++;
    return 0;
}

typedef struct segment {
    size_t start, len;
    int is_match;
} segment;

typedef struct segvec {
    segment *v;
    size_t n, cap;
} segvec;

static int seg_push(segvec *s, size_t start, size_t len, int is_match) {
    segment *nv = td_grow(s->v, &s->cap, s->n + 1, sizeof *nv, 64);
    if (!nv) return -1;
    s->v = nv;
    s->v[s->n].start = start;
    s->v[s->n].len = len;
    s->v[s->n].is_match = is_match;
    s->n++;
    return 0;
}

/* Turns the gap/match segments of one piece into pieces, following Hugging Face's SplitDelimiterBehavior folds
 * exactly (including how runs of adjacent delimiters are treated). Works in place on segs. */
static int apply_behavior(td_split_behavior b, segvec *segs, spanvec *out) {
    segment *v = segs->v;
    size_t n = segs->n, m = 0;
    int prev_match = 0;
    switch (b) {
    case TD_SPLIT_ISOLATED:
        for (size_t i = 0; i < n; i++)
            if (span_push(out, v[i].start, v[i].len)) return -1;
        return 0;
    case TD_SPLIT_REMOVED:
        for (size_t i = 0; i < n; i++)
            if (!v[i].is_match && span_push(out, v[i].start, v[i].len)) return -1;
        return 0;
    case TD_SPLIT_MERGED_WITH_PREVIOUS: /* a delimiter joins the segment before it unless that was one too */
    case TD_SPLIT_CONTIGUOUS:           /* runs of equal kind join */
        for (size_t i = 0; i < n; i++) {
            int glue = b == TD_SPLIT_CONTIGUOUS ? v[i].is_match == prev_match : (v[i].is_match && !prev_match);
            if (glue && m > 0) v[m - 1].len = v[i].start + v[i].len - v[m - 1].start;
            else v[m++] = v[i];
            prev_match = v[i].is_match;
        }
        break;
    case TD_SPLIT_MERGED_WITH_NEXT: /* folded from the end: a delimiter joins the segment after it */
        for (size_t k = n; k-- > 0;) {
            int glue = v[k].is_match && !prev_match;
            prev_match = v[k].is_match;
            if (glue && m > 0) {
                size_t end = v[n - m].start + v[n - m].len;
                v[n - m].start = v[k].start;
                v[n - m].len = end - v[k].start;
            } else {
                v[n - 1 - m] = v[k];
                m++;
            }
        }
        for (size_t i = n - m; i < n; i++)
            if (span_push(out, v[i].start, v[i].len)) return -1;
        return 0;
    }
    for (size_t i = 0; i < m; i++)
        if (span_push(out, v[i].start, v[i].len)) return -1;
    return 0;
}

/* One call's match state. The JIT matches on 32 KB of the thread's own stack until a match needs more; only then is
 * a JIT stack (up to 1 MB) made and the match repeated with it: the same match, since the stack's size only decides
 * whether a match can finish. Making one for every call cost an mmap and a munmap each (with their page faults
 * and TLB flushes: most of a short text's tokenizing time on this project's VMs). */
typedef struct matcher {
    pcre2_general_context *g;
    pcre2_match_data *md;
    pcre2_match_context *mctx;
    pcre2_jit_stack *jit;
} matcher;

static int match(matcher *m, const td_split_step *step, const unsigned char *subj, size_t len, size_t search) {
    int rc = pcre2_match((const pcre2_code *)step->code, subj, len, search, PCRE2_NO_UTF_CHECK, m->md, m->mctx);
    if (rc != PCRE2_ERROR_JIT_STACKLIMIT || m->jit) return rc;
    if (!(m->jit = pcre2_jit_stack_create(32 * 1024, 1024 * 1024, m->g))) return PCRE2_ERROR_NOMEMORY;
    pcre2_jit_stack_assign(m->mctx, NULL, m->jit);
    return pcre2_match((const pcre2_code *)step->code, subj, len, search, PCRE2_NO_UTF_CHECK, m->md, m->mctx);
}

/* Applies one Split step to piece [start, start+len) of text, appending the resulting pieces to out. */
static td_status split_piece(const td_split_step *step, const char *text, size_t start, size_t len, matcher *m,
                             segvec *segs, spanvec *out) {
    const unsigned char *subj = (const unsigned char *)text + start;
    size_t pos = 0, search = 0;
    int inv = step->invert;
    segs->n = 0;
    while (search <= len) {
        int rc = match(m, step, subj, len, search);
        if (rc == PCRE2_ERROR_NOMATCH) break;
        if (rc == PCRE2_ERROR_NOMEMORY || rc == PCRE2_ERROR_HEAPLIMIT) return td_fail_nomem("the pre-tokenizer's match");
        if (rc < 0) {
            PCRE2_UCHAR msg[256];
            pcre2_get_error_message(rc, msg, sizeof msg);
            return td_fail(TD_ERR_FORMAT, "pre-tokenizer regex failed at byte %zu: %s", start + search,
                           (const char *)msg);
        }
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(m->md);
        size_t ms = ov[0], me = ov[1];
        if (me == ms) { /* empty match: no split here; move on by one character */
            if (ms >= len) break;
            search = td_utf8_next_start((const char *)subj, len, ms);
            continue;
        }
        if (ms > pos && seg_push(segs, start + pos, ms - pos, inv)) goto nomem;
        if (seg_push(segs, start + ms, me - ms, !inv)) goto nomem;
        pos = search = me;
    }
    if (pos < len && seg_push(segs, start + pos, len - pos, inv)) goto nomem;
    if (apply_behavior(step->behavior, segs, out)) goto nomem;
    return TD_OK;
nomem:
    return td_fail_nomem("pre-token pieces");
}

void td_pieces_free(td_pieces *p) {
    td_free(p->owned);
    td_free(p->start);
    td_free(p->len);
    memset(p, 0, sizeof *p);
}

td_status td_pretokenize(const struct td_tokenizer *tok, const char *text, size_t len, td_pieces *out) {
    memset(out, 0, sizeof *out);
    out->text = text;
    if (len == 0) return TD_OK;
    if (tok->byte_level && tok->add_prefix_space && text[0] != ' ') { /* ByteLevel(add_prefix_space) comes first */
        out->owned = td_malloc(len + 1);
        if (!out->owned) return td_fail_nomem("a pre-token");
        out->owned[0] = ' ';
        memcpy(out->owned + 1, text, len);
        out->text = out->owned;
        len++;
    }
    td_status st = TD_OK;
    spanvec a = {0}, b = {0};
    segvec segs = {0};
    matcher m = {0}; /* a PCRE2 without JIT (the WebAssembly build's) matches with the interpreter, with m.mctx */
    if (span_push(&a, 0, len)) {
        st = td_fail_nomem("pre-token pieces");
        goto done;
    }
    if (tok->n_split > 0) {
        m.g = pcre2_general_context_create(pcre_malloc, pcre_free, NULL);
        m.md = m.g ? pcre2_match_data_create(4, m.g) : NULL;
        m.mctx = m.g ? pcre2_match_context_create(m.g) : NULL;
        if (!m.md || !m.mctx) {
            st = td_fail_nomem("regex match data");
            goto done;
        }
    }
    for (int k = 0; k < tok->n_split; k++) {
        b.n = 0;
        for (size_t i = 0; i < a.n; i++) {
            st = split_piece(&tok->split[k], out->text, a.v[i].start, a.v[i].len, &m, &segs, &b);
            if (st != TD_OK) goto done;
        }
        spanvec t = a;
        a = b;
        b = t;
    }
    out->n = a.n;
    out->start = td_malloc((a.n ? a.n : 1) * sizeof *out->start);
    out->len = td_malloc((a.n ? a.n : 1) * sizeof *out->len);
    if (!out->start || !out->len) {
        st = td_fail_nomem("pre-token pieces");
        goto done;
    }
    for (size_t i = 0; i < a.n; i++) out->start[i] = a.v[i].start, out->len[i] = a.v[i].len;
done:
    td_free(a.v);
    td_free(b.v);
    td_free(segs.v);
    if (m.jit) pcre2_jit_stack_free(m.jit);
    if (m.mctx) pcre2_match_context_free(m.mctx);
    if (m.md) pcre2_match_data_free(m.md);
    pcre2_general_context_free(m.g);
    if (st != TD_OK) td_pieces_free(out);
    return st;
}

td_status td_pretokenize_and_encode(const struct td_tokenizer *tok, const char *text, size_t len, td_idvec *out) {
    td_pieces pc;
    td_status st = td_pretokenize(tok, text, len, &pc);
    for (size_t i = 0; st == TD_OK && i < pc.n; i++)
        st = td_bpe_encode_word(tok, (const unsigned char *)pc.text + pc.start[i], pc.len[i], out);
    td_pieces_free(&pc);
    return st;
}
