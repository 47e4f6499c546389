/* td_strbuf: see strbuf.h. */
#include "util/strbuf.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "util/alloc.h"

int td_strbuf_reserve(td_strbuf *b, size_t extra) {
    if (b->oom) return -1;
    if (extra > SIZE_MAX / 2 - 1 - b->n) { /* n + extra + 1, doubled below, must not wrap */
        b->oom = 1;
        return -1;
    }
    size_t need = b->n + extra + 1;
    if (need <= b->cap) return 0;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < need) cap *= 2;
    char *s = td_realloc(b->s, cap);
    if (!s) {
        b->oom = 1;
        return -1;
    }
    if (!b->s) s[0] = 0;
    b->s = s;
    b->cap = cap;
    return 0;
}

void td_strbuf_put(td_strbuf *b, const void *s, size_t n) {
    if (td_strbuf_reserve(b, n)) return;
    if (n) memcpy(b->s + b->n, s, n);
    b->n += n;
    b->s[b->n] = 0;
}

void td_strbuf_puts(td_strbuf *b, const char *s) { td_strbuf_put(b, s, strlen(s)); }

void td_strbuf_putc(td_strbuf *b, char c) { td_strbuf_put(b, &c, 1); }

void td_strbuf_vprintf(td_strbuf *b, const char *fmt, va_list ap) {
    if (b->oom) return;
    va_list again;
    va_copy(again, ap);
    size_t room = b->s ? b->cap - b->n : 0;
    int w = vsnprintf(room ? b->s + b->n : NULL, room, fmt, ap);
    if (w < 0) {
        b->oom = 1;
    } else if ((size_t)w < room) {
        b->n += (size_t)w;
    } else if (td_strbuf_reserve(b, (size_t)w) == 0) {
        vsnprintf(b->s + b->n, (size_t)w + 1, fmt, again);
        b->n += (size_t)w;
    } else if (b->s) {
        b->s[b->n] = 0; /* the first try may have written a truncated tail */
    }
    va_end(again);
}

void td_strbuf_printf(td_strbuf *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    td_strbuf_vprintf(b, fmt, ap);
    va_end(ap);
}

void td_strbuf_clear(td_strbuf *b) {
    b->n = 0;
    if (b->s) b->s[0] = 0;
}

char *td_strbuf_finish(td_strbuf *b, size_t *len) {
    if (!b->oom && !b->s) td_strbuf_reserve(b, 0);
    char *s = b->oom ? NULL : b->s;
    if (len) *len = s ? b->n : 0;
    if (!s) td_free(b->s);
    *b = (td_strbuf)TD_STRBUF_INIT;
    return s;
}

void td_strbuf_free(td_strbuf *b) {
    td_free(b->s);
    *b = (td_strbuf)TD_STRBUF_INIT;
}
