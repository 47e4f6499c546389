/* A growable string: the library's one buffer for text built piece by piece (prompts, chat templates, regexes,
 * SVG). Appends never fail loudly: an allocation that fails (or a size that would overflow) sets `oom`, which is
 * sticky, and every later append does nothing, so a builder appends freely and checks once at the end
 * (td_strbuf_finish returns NULL). The text is NUL-terminated after every append; capacity doubles (64 bytes first).
 *
 *   td_strbuf b = TD_STRBUF_INIT;
 *   td_strbuf_puts(&b, "Evidence:\n");
 *   td_strbuf_printf(&b, "%d criteria", n);
 *   size_t len;
 *   char *s = td_strbuf_finish(&b, &len);   // NULL: out of memory (the buffer is freed either way)
 *
 * Memory comes from td_realloc (the installed allocator): the finished string is released with td_free. */
#ifndef TD_UTIL_STRBUF_H
#define TD_UTIL_STRBUF_H

#include <stdarg.h>
#include <stddef.h>

#include "util/error.h"

typedef struct td_strbuf {
    char *s;    /* the text, NUL-terminated; NULL until something was appended (or reserved) */
    size_t n;   /* bytes of text (the NUL excluded) */
    size_t cap; /* bytes allocated */
    int oom;    /* an allocation failed: later appends are no-ops and td_strbuf_finish returns NULL */
} td_strbuf;

#define TD_STRBUF_INIT {NULL, 0, 0, 0}

/* Room for `extra` more bytes of text (and the NUL) without another allocation. 0, or -1 with oom set. */
int td_strbuf_reserve(td_strbuf *b, size_t extra);
/* Appends n bytes (which may hold NULs; s may be NULL when n is 0). */
void td_strbuf_put(td_strbuf *b, const void *s, size_t n);
void td_strbuf_puts(td_strbuf *b, const char *s);
void td_strbuf_putc(td_strbuf *b, char c);
/* Appends formatted text (a format vsnprintf cannot write sets oom too). */
void td_strbuf_printf(td_strbuf *b, const char *fmt, ...) TD_PRINTF(2, 3);
void td_strbuf_vprintf(td_strbuf *b, const char *fmt, va_list ap) TD_PRINTF(2, 0);
/* Forgets the text, keeps the memory. */
void td_strbuf_clear(td_strbuf *b);
/* Hands the text over (for td_free), "" for a buffer nothing was appended to, and *len its length when len is not
 * NULL; NULL after an allocation failure. Either way the buffer is left empty (TD_STRBUF_INIT) and owns nothing. */
char *td_strbuf_finish(td_strbuf *b, size_t *len);
/* Frees the text; the buffer is left empty and may be used again. */
void td_strbuf_free(td_strbuf *b);

#endif
