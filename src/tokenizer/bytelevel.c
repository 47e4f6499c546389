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
