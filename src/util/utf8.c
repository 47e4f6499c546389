/* UTF-8: decoding one code point, encoding one, finding the first invalid byte. Shared by the tokenizer, the
 * readout (which names the byte of the user's text that is wrong) and the GGUF writer. */
#include "util/utf8.h"

int32_t td_utf8_next(const unsigned char *s, size_t len, size_t *i) {
    size_t p = *i;
    unsigned c = s[p];
    uint32_t cp;
    int n;
    if (c < 0x80) {
        *i = p + 1;
        return (int32_t)c;
    } else if ((c & 0xe0) == 0xc0) {
        cp = c & 0x1f;
        n = 1;
        if (c < 0xc2) return -1; /* overlong */
    } else if ((c & 0xf0) == 0xe0) {
        cp = c & 0x0f;
        n = 2;
    } else if ((c & 0xf8) == 0xf0 && c <= 0xf4) {
        cp = c & 0x07;
        n = 3;
    } else {
        return -1;
    }
    if (p + (size_t)n >= len) return -1; /* truncated sequence */
    for (int k = 1; k <= n; k++) {
        unsigned cc = s[p + (size_t)k];
        if ((cc & 0xc0) != 0x80) return -1;
        cp = (cp << 6) | (cc & 0x3f);
    }
    if (n == 2 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) return -1;
    if (n == 3 && (cp < 0x10000 || cp > 0x10ffff)) return -1;
    *i = p + (size_t)n + 1;
    return (int32_t)cp;
}

int td_utf8_put(uint32_t cp, char *out) {
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xc0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3f));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xe0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
        out[2] = (char)(0x80 | (cp & 0x3f));
        return 3;
    }
    out[0] = (char)(0xf0 | (cp >> 18));
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
    out[3] = (char)(0x80 | (cp & 0x3f));
    return 4;
}

size_t td_utf8_invalid_at(const char *s, size_t len) {
    size_t i = 0;
    while (i < len) {
        size_t at = i;
        if (td_utf8_next((const unsigned char *)s, len, &i) < 0) return at;
    }
    return (size_t)-1;
}
