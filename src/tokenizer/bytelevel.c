/* The GPT-2 byte-level alphabet and small UTF-8 helpers.
 * Bytes 33-126, 161-172 and 174-255 stand for the code point of the same value; the remaining 68 bytes, in
 * increasing order, stand for U+0100, U+0101, ... (so space 0x20 is U+0120 "Ġ" and newline 0x0A is U+010A "Ċ"). */
#include "tokenizer/tokenizer_internal.h"

static int printable(unsigned b) { return (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174); }

uint32_t td_byte_to_cp(uint8_t b) {
    if (printable(b)) return b;
    /* count the non-printable bytes below b: 0..32 (33 of them), 127..160 (34), 173 (1) */
    unsigned n;
    if (b <= 32) n = b;
    else if (b <= 160) n = 33 + (b - 127u);
    else n = 33 + 34; /* b == 173 */
    return 256u + n;
}

int td_cp_to_byte(uint32_t cp) {
    if (cp < 256) return printable(cp) ? (int)cp : -1;
    if (cp >= 256 + 68) return -1;
    unsigned n = cp - 256;
    if (n < 33) return (int)n;
    if (n < 67) return (int)(127 + (n - 33));
    return 173;
}

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
