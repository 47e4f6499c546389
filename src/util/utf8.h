/* UTF-8 (RFC 3629: no overlong forms, no surrogates, nothing past U+10FFFF): the one place that knows how a
 * character is laid out in bytes. Well-formed means Unicode 3.9 table 3-7 (lead C2-DF; E0 A0-BF; E1-EC and EE-EF;
 * ED 80-9F; F0 90-BF; F1-F3; F4 80-8F; each followed by its continuation bytes 80-BF). */
#ifndef TD_UTIL_UTF8_H
#define TD_UTIL_UTF8_H

#include <stddef.h>
#include <stdint.h>

/* 1 if b is a continuation byte (10xxxxxx), which never starts a character. */
static inline int td_utf8_is_cont(unsigned char b) { return (b & 0xc0) == 0x80; }

/* The character at s[0..n), n >= 1: its length 1-4 if s starts with a well-formed character; 0 if s[0..n) is a
 * proper prefix of a well-formed character cut by the end of the buffer (more bytes could still complete it); -1 if
 * nothing that follows could make it well-formed (a stray continuation byte, C0, C1, F5-FF, an overlong form, a
 * surrogate, a code point past U+10FFFF, a lead byte followed by a byte that cannot continue it). */
int td_utf8_char(const unsigned char *s, size_t n);

/* Length (1 to min(n, 4)) of the maximal subpart at s[0..n), n >= 1 (Unicode 3.9 section 3.9, "U+FFFD substitution
 * of maximal subparts"): the character's length where s starts with a well-formed one; otherwise the lead byte with
 * the continuation bytes that could still have belonged to it, 1 for a byte that starts nothing. This is what one
 * U+FFFD replaces in Rust's String::from_utf8_lossy (Hugging Face's decode) and Python's errors="replace". */
size_t td_utf8_subpart(const unsigned char *s, size_t n);

/* Decodes the character at s[*i] (*i < len) and moves *i past it. Returns its code point, or -1 (*i unchanged) if
 * td_utf8_char() would not give a length there (ill-formed, or cut by the end at len). */
int32_t td_utf8_next(const unsigned char *s, size_t len, size_t *i);

/* Encodes cp (at most U+10FFFF; surrogates are not refused) as UTF-8 into out (room for 4 bytes); returns the byte
 * count. */
int td_utf8_put(uint32_t cp, char *out);

/* Offset of the first byte of s[0..len) that does not begin a well-formed character (a sequence cut at the end
 * included), or (size_t)-1 if all of it is well-formed. */
size_t td_utf8_invalid_at(const char *s, size_t len);

/* Characters in s[0..n), counted as the bytes that are not continuation bytes: the code point count of well-formed
 * text (ill-formed text is not checked). */
size_t td_utf8_count(const char *s, size_t n);

/* Where the character holding byte i starts: i moved back over continuation bytes, never below lo (lo <= i).
 * For well-formed text, the start of that character. */
size_t td_utf8_start(const char *s, size_t lo, size_t i);

/* The next place after byte i (i < n) where a character may start: i + 1 moved on over continuation bytes, at most
 * to n. */
size_t td_utf8_next_start(const char *s, size_t n, size_t i);

/* Length of the longest prefix of s[0..n) that does not end inside an unfinished character: a trailing proper prefix
 * of a well-formed character (the tail where td_utf8_char() gives 0) is cut off; anything else, ill-formed bytes
 * included, is kept. For text that is still growing, as a stream of tokens. */
size_t td_utf8_complete(const char *s, size_t n);

/* How td_utf8_lossy replaces what is not UTF-8: one U+FFFD per maximal subpart (as td_utf8_subpart: Rust's
 * from_utf8_lossy, Hugging Face, Python) or one per byte (a cut 3-byte character gives two). */
typedef enum { TD_UTF8_PER_SUBPART, TD_UTF8_PER_BYTE } td_utf8_repl;

/* Copies s[0..n) to out with every ill-formed part replaced by U+FFFD (EF BF BD), as `how` says; a character cut by
 * the end of the buffer is ill-formed. Returns the bytes written; out NULL writes nothing and returns the length the
 * copy would have. 3 * n bytes always suffice. No terminating NUL is written. */
size_t td_utf8_lossy(const char *s, size_t n, td_utf8_repl how, char *out);

#endif
