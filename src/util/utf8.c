/* UTF-8: the one validator (td_utf8_scan, table 3-7) and what is built on it: decoding and encoding one code point,
 * the first invalid byte, boundaries, counting, the cut at the end of a growing text and lossy repair. Shared by
 * the tokenizer, the readout, the GGUF reader and writer, the stopper, the chat renderer, the server and runs. */
#include <string.h>

#include "util/utf8.h"

/* Walks the character at s[0..n), n >= 1: returns how many bytes belong to it or could still have (the maximal
 * subpart, at least 1) and sets *need to the length a well-formed character with this lead byte has (0: the lead
 * byte starts nothing). The character is well-formed iff the return value equals *need. */
static size_t td_utf8_scan(const unsigned char *s, size_t n, size_t *need) {
    unsigned c = s[0], lo = 0x80, hi = 0xbf; /* the range of the first continuation byte */
    if (c < 0x80) {
        *need = 1;
        return 1;
    }
    if (c >= 0xc2 && c <= 0xdf) *need = 2;
    else if (c >= 0xe0 && c <= 0xef) {
        *need = 3;
        if (c == 0xe0) lo = 0xa0; /* E0 80-9F: overlong */
        if (c == 0xed) hi = 0x9f; /* ED A0-BF: surrogates D800-DFFF */
    } else if (c >= 0xf0 && c <= 0xf4) {
        *need = 4;
        if (c == 0xf0) lo = 0x90; /* F0 80-8F: overlong */
        if (c == 0xf4) hi = 0x8f; /* F4 90-BF: past U+10FFFF */
    } else {
        *need = 0; /* 80-BF stray continuation, C0-C1 overlong, F5-FF past U+10FFFF */
        return 1;
    }
    size_t k = 1;
    for (; k < *need && k < n; k++) {
        unsigned b = s[k];
        if (b < (k == 1 ? lo : 0x80) || b > (k == 1 ? hi : 0xbf)) break;
    }
    return k;
}

int td_utf8_char(const unsigned char *s, size_t n) {
    size_t need, k = td_utf8_scan(s, n, &need);
    if (k == need) return (int)k;
    return need && k == n ? 0 : -1; /* every byte there fit: only the end of the buffer cut it */
}

size_t td_utf8_subpart(const unsigned char *s, size_t n) {
    size_t need;
    return td_utf8_scan(s, n, &need);
}

int32_t td_utf8_next(const unsigned char *s, size_t len, size_t *i) {
    size_t p = *i;
    int k = td_utf8_char(s + p, len - p);
    if (k <= 0) return -1;
    uint32_t cp = k == 1 ? s[p] : s[p] & (0x7fu >> k); /* the lead byte's payload: 5, 4 or 3 bits */
    for (int j = 1; j < k; j++) cp = (cp << 6) | (s[p + (size_t)j] & 0x3fu);
    *i = p + (size_t)k;
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
    const unsigned char *u = (const unsigned char *)s;
    for (size_t i = 0; i < len;) {
        int k = td_utf8_char(u + i, len - i);
        if (k <= 0) return i;
        i += (size_t)k;
    }
    return (size_t)-1;
}

size_t td_utf8_count(const char *s, size_t n) {
    size_t c = 0;
    for (size_t i = 0; i < n; i++) c += !td_utf8_is_cont((unsigned char)s[i]);
    return c;
}

size_t td_utf8_start(const char *s, size_t lo, size_t i) {
    while (i > lo && td_utf8_is_cont((unsigned char)s[i])) i--;
    return i;
}

size_t td_utf8_next_start(const char *s, size_t n, size_t i) {
    for (i++; i < n && td_utf8_is_cont((unsigned char)s[i]); i++) {}
    return i;
}

size_t td_utf8_complete(const char *s, size_t n) {
    size_t i = n;
    while (i > 0 && n - i < 3 && td_utf8_is_cont((unsigned char)s[i - 1])) i--; /* an unfinished one has <= 2 */
    if (i == 0) return n;
    return td_utf8_char((const unsigned char *)s + i - 1, n - (i - 1)) == 0 ? i - 1 : n;
}

size_t td_utf8_lossy(const char *s, size_t n, td_utf8_repl how, char *out) {
    static const char repl[3] = {'\xef', '\xbf', '\xbd'};
    const unsigned char *u = (const unsigned char *)s;
    size_t w = 0;
    for (size_t i = 0; i < n;) {
        int k = td_utf8_char(u + i, n - i);
        if (k > 0) {
            if (out) memcpy(out + w, s + i, (size_t)k);
            w += (size_t)k;
            i += (size_t)k;
            continue;
        }
        if (out) memcpy(out + w, repl, 3);
        w += 3;
        i += how == TD_UTF8_PER_BYTE ? 1 : td_utf8_subpart(u + i, n - i);
    }
    return w;
}
