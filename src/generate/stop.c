/* Stop strings on decoded text: matched across token boundaries, text that may still start one held back, release
 * by complete UTF-8 characters only. */
#include <string.h>

#include "generate/gen_internal.h"
#include "typedecide.h"
#include "util/alloc.h"
#include "util/error.h"
#include "util/strbuf.h"
#include "util/utf8.h"

#define MAX_STOPS 16
#define MAX_STOP_LEN 256

struct td_stopper {
    char *stops[MAX_STOPS];
    size_t lens[MAX_STOPS];
    int32_t n;
    td_strbuf held; /* bytes fed and not released */
    td_strbuf out;  /* the last release */
    int32_t matched;
    int done;
    int64_t oom; /* feeds whose text could not be kept or released for lack of memory */
};

int64_t td_stopper_oom(const td_stopper *s) { return s ? s->oom : 0; }

td_status td_stopper_new(const char *const *stops, int32_t n, td_stopper **out) {
    if (out) *out = NULL;
    if (!out || n < 0 || (n > 0 && !stops)) return td_fail(TD_ERR_INVALID_ARG, "td_stopper_new: bad arguments");
    if (n > MAX_STOPS) return td_fail(TD_ERR_INVALID_ARG, "stop: at most %d stop strings (got %d)", MAX_STOPS, n);
    for (int32_t i = 0; i < n; i++) {
        size_t l = stops[i] ? strlen(stops[i]) : 0;
        if (l == 0) return td_fail(TD_ERR_INVALID_ARG, "stop[%d] is empty", i);
        if (l > MAX_STOP_LEN)
            return td_fail(TD_ERR_INVALID_ARG, "stop[%d] is longer than %d bytes (%zu)", i, MAX_STOP_LEN, l);
    }
    td_stopper *s = td_calloc(1, sizeof *s);
    if (!s) return td_fail_nomem("a stopper");
    s->matched = -1;
    for (int32_t i = 0; i < n; i++) {
        s->lens[i] = strlen(stops[i]);
        if (!(s->stops[i] = td_strdup(stops[i]))) {
            td_stopper_free(s);
            return td_fail_nomem("stop strings");
        }
        s->n++;
    }
    *out = s;
    return TD_OK;
}

void td_stopper_free(td_stopper *s) {
    if (!s) return;
    for (int32_t i = 0; i < s->n; i++) td_free(s->stops[i]);
    td_strbuf_free(&s->held);
    td_strbuf_free(&s->out);
    td_free(s);
}

int32_t td_stopper_matched(const td_stopper *s) { return s ? s->matched : -1; }

/* A buffer's failed append, counted in s->oom. The buffer's own flag is cleared: the text of that feed is lost, and
 * the next feed tries again (td_strbuf's flag would make every later append a no-op). */
static int lost(td_stopper *s, td_strbuf *b) {
    b->oom = 0;
    s->oom++;
    return -1;
}

/* Keeps the first n bytes of the held text. */
static void held_keep(td_stopper *s, size_t n) {
    s->held.n = n;
    if (s->held.s) s->held.s[n] = 0;
}

/* Moves up to `limit` held bytes to the output as valid UTF-8 (invalid bytes become U+FFFD); an incomplete
 * character at the end stays held unless final. */
static int release(td_stopper *s, size_t limit, int final) {
    const unsigned char *u = (const unsigned char *)s->held.s;
    size_t i = 0;
    while (i < limit) {
        int k = td_utf8_char(u + i, s->held.n - i);
        if (k == 0 && !final) break;                 /* unfinished: wait for the next token */
        if (k > 0 && i + (size_t)k > limit) break;   /* it reaches into the held-back tail */
        if (k <= 0) td_strbuf_put(&s->out, "\xef\xbf\xbd", 3);
        else td_strbuf_put(&s->out, s->held.s + i, (size_t)k);
        if (s->out.oom) return lost(s, &s->out);
        i += k <= 0 ? 1 : (size_t)k;
    }
    if (i && s->held.n > i) memmove(s->held.s, s->held.s + i, s->held.n - i);
    held_keep(s, s->held.n - i);
    return 0;
}

int td_stopper_feed(td_stopper *s, const char *bytes, size_t len, int final, const char **out, size_t *out_len) {
    static const char empty[] = "";
    if (out) *out = empty;
    if (out_len) *out_len = 0;
    if (!s) return 0;
    td_strbuf_clear(&s->out);
    if (s->done) return s->matched >= 0;
    if (len && bytes) {
        td_strbuf_put(&s->held, bytes, len);
        if (s->held.oom) { /* out of memory: this text is lost (counted) */
            lost(s, &s->held);
            return 0;
        }
    }
    /* the earliest full match of any stop string (the first listed wins at one position) */
    size_t best = (size_t)-1;
    int32_t which = -1;
    for (int32_t j = 0; j < s->n; j++) {
        if (s->lens[j] > s->held.n) continue;
        for (size_t i = 0; i + s->lens[j] <= s->held.n && i < best; i++)
            if (memcmp(s->held.s + i, s->stops[j], s->lens[j]) == 0) {
                best = i, which = j;
                break;
            }
    }
    if (which >= 0) {
        held_keep(s, best); /* the stop string and what follows are dropped */
        release(s, s->held.n, 1);
        s->matched = which;
        s->done = 1;
        td_strbuf_clear(&s->held);
    } else {
        size_t hold = 0; /* the longest tail of the held text that is a proper prefix of a stop string */
        if (!final)
            for (int32_t j = 0; j < s->n; j++)
                for (size_t l = s->lens[j] - 1; l > hold; l--)
                    if (l <= s->held.n && memcmp(s->held.s + s->held.n - l, s->stops[j], l) == 0) {
                        hold = l;
                        break;
                    }
        release(s, s->held.n - hold, final);
        if (final) s->done = 1;
    }
    if (out) *out = s->out.n ? s->out.s : empty;
    if (out_len) *out_len = s->out.n;
    return s->matched >= 0;
}
