/* UTF-8 (RFC 3629: no overlong forms, no surrogates, nothing past U+10FFFF). */
#ifndef TD_UTIL_UTF8_H
#define TD_UTIL_UTF8_H

#include <stddef.h>
#include <stdint.h>

/* Decodes one UTF-8 code point at s[*i] (len bytes total), advancing *i. Returns -1 on invalid UTF-8. */
int32_t td_utf8_next(const unsigned char *s, size_t len, size_t *i);
/* Encodes cp as UTF-8 into out (at least 4 bytes); returns the byte count. */
int td_utf8_put(uint32_t cp, char *out);
/* Offset of the first invalid UTF-8 byte, or (size_t)-1 if valid. */
size_t td_utf8_invalid_at(const char *s, size_t len);

#endif
