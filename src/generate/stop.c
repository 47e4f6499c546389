/* Stop strings on decoded text: matched across token boundaries, text that may still start one held back, release
 * by complete UTF-8 characters only. */
#include <string.h>

#include "generate/gen_internal.h"
#include "typedecide.h"
#include "util/alloc.h"
#include "util/error.h"

#define MAX_STOPS 16
#define MAX_STOP_LEN 256

struct td_stopper {
    char *stops[MAX_STOPS];
    size_t lens[MAX_STOPS];
    int32_t n;
    char *held; /* bytes fed and not released */
    size_t n_held, cap_held;
    char *out;  /* the last release */
    size_t n_out, cap_out;
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
    td_free(s->held);
    td_free(s->out);
    td_free(s);
}

int32_t td_stopper_matched(const td_stopper *s) { return s ? s->matched : -1; }

static int grow(char **buf, size_t *cap, size_t need) {
    if (need <= *cap) return 0;
    size_t c = *cap ? *cap : 64;
    while (c < need) c *= 2;
    char *n = td_realloc(*buf, c);
    if (!n) return -1;
    *buf = n;
    *cap = c;
    return 0;
}

/* Length of a valid UTF-8 character at s (n bytes available): > 0 valid, 0 incomplete (could still become valid),
 * -1 invalid. */
int td_gen_utf8_char(const unsigned char *s, size_t n) {
    unsigned c = s[0];
    if (c < 0x80) return 1;
    int need = c >= 0xc2 && c <= 0xdf ? 1 : c >= 0xe0 && c <= 0xef ? 2 : c >= 0xf0 && c <= 0xf4 ? 3 : -1;
    if (need < 0) return -1;
    unsigned lo = c == 0xe0 ? 0xa0 : c == 0xf0 ? 0x90 : 0x80, hi = c == 0xed ? 0x9f : c == 0xf4 ? 0x8f : 0xbf;
    for (int k = 1; k <= need; k++) {
        if ((size_t)k >= n) return 0;
        unsigned b = s[k];
        if (b < (k == 1 ? lo : 0x80) || b > (k == 1 ? hi : 0xbf)) return -1;
    }
    return need + 1;
}

/* Moves up to `limit` held bytes to the output as valid UTF-8 (invalid bytes become U+FFFD); an incomplete
 * character at the end stays held unless final. */
static int release(td_stopper *s, size_t limit, int final) {
    const unsigned char *u = (const unsigned char *)s->held;
    size_t i = 0;
    while (i < limit) {
        int k = td_gen_utf8_char(u + i, s->n_held - i);
        if (k == 0 && !final) break;                 /* unfinished: wait for the next token */
        if (k > 0 && i + (size_t)k > limit) break;   /* it reaches into the held-back tail */
        if (grow(&s->out, &s->cap_out, s->n_out + 4)) {
            s->oom++;
            return -1;
        }
        if (k <= 0) {
            memcpy(s->out + s->n_out, "\xef\xbf\xbd", 3);
            s->n_out += 3;
            i++;
        } else {
            memcpy(s->out + s->n_out, s->held + i, (size_t)k);
            s->n_out += (size_t)k;
            i += (size_t)k;
        }
    }
    if (i && s->n_held > i) memmove(s->held, s->held + i, s->n_held - i);
    s->n_held -= i;
    return 0;
}

int td_stopper_feed(td_stopper *s, const char *bytes, size_t len, int final, const char **out, size_t *out_len) {
    static const char empty[] = "";
    if (out) *out = empty;
    if (out_len) *out_len = 0;
    if (!s) return 0;
    s->n_out = 0;
    if (s->done) return s->matched >= 0;
    if (len && bytes) {
        if (grow(&s->held, &s->cap_held, s->n_held + len + 1)) { /* out of memory: this text is lost (counted) */
            s->oom++;
            return 0;
        }
        memcpy(s->held + s->n_held, bytes, len);
        s->n_held += len;
    }
    /* the earliest full match of any stop string (the first listed wins at one position) */
    size_t best = (size_t)-1;
    int32_t which = -1;
    for (int32_t j = 0; j < s->n; j++) {
        if (s->lens[j] > s->n_held) continue;
        for (size_t i = 0; i + s->lens[j] <= s->n_held && i < best; i++)
            if (memcmp(s->held + i, s->stops[j], s->lens[j]) == 0) {
                best = i, which = j;
                break;
            }
    }
    if (which >= 0) {
        s->n_held = best; /* the stop string and what follows are dropped */
        release(s, s->n_held, 1);
        s->matched = which;
        s->done = 1;
        s->n_held = 0;
    } else {
        size_t hold = 0; /* the longest tail of the held text that is a proper prefix of a stop string */
        if (!final)
            for (int32_t j = 0; j < s->n; j++)
                for (size_t l = s->lens[j] - 1; l > hold; l--)
                    if (l <= s->n_held && memcmp(s->held + s->n_held - l, s->stops[j], l) == 0) {
                        hold = l;
                        break;
                    }
        release(s, s->n_held - hold, final);
        if (final) s->done = 1;
    }
    if (out) *out = s->n_out ? s->out : empty;
    if (out_len) *out_len = s->n_out;
    return s->matched >= 0;
}
