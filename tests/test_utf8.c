/* src/util/utf8.{h,c}, the library's one UTF-8 module, against a reference built here from the definition alone:
 * every Unicode scalar value (0..10FFFF without D800..DFFF) encoded by the textbook bit layout, and the sets of
 * its encodings and their prefixes. Every 1-, 2- and 3-byte buffer is classified (td_utf8_char, td_utf8_subpart)
 * and compared with that reference, plus 4-byte buffers over every lead and second byte; then named cases (overlong
 * forms, surrogates, past U+10FFFF, characters cut at the end, every length) and the helpers built on the validator:
 * decoding, the first invalid byte, counting, boundaries, the cut of a growing text and lossy repair, whose
 * per-subpart outputs are Python's bytes.decode("utf-8", "replace") (the same rule as Rust's from_utf8_lossy). */
#include <stdlib.h>
#include <string.h>

#include "test_util.h"
#include "util/utf8.h"

/* The textbook encoder: the shortest form by code point range. */
static int ref_encode(uint32_t cp, unsigned char *o) {
    if (cp < 0x80) return o[0] = (unsigned char)cp, 1;
    if (cp < 0x800) return o[0] = (unsigned char)(0xc0 | cp >> 6), o[1] = (unsigned char)(0x80 | (cp & 0x3f)), 2;
    if (cp < 0x10000) {
        o[0] = (unsigned char)(0xe0 | cp >> 12), o[1] = (unsigned char)(0x80 | (cp >> 6 & 0x3f));
        o[2] = (unsigned char)(0x80 | (cp & 0x3f));
        return 3;
    }
    o[0] = (unsigned char)(0xf0 | cp >> 18), o[1] = (unsigned char)(0x80 | (cp >> 12 & 0x3f));
    o[2] = (unsigned char)(0x80 | (cp >> 6 & 0x3f)), o[3] = (unsigned char)(0x80 | (cp & 0x3f));
    return 4;
}

static int scalar(uint32_t cp) { return cp <= 0x10ffff && !(cp >= 0xd800 && cp <= 0xdfff); }

/* Bit sets over byte strings of length m (index: the bytes big-endian): prefix[m] holds every m-byte prefix of an
 * encoding, whole[m] every m-byte encoding; m = 4 is decided by decoding (a 2^32 set would be too large). */
static uint8_t *prefix[4], *whole[4];
static void set(uint8_t *b, uint32_t i) { b[i >> 3] |= (uint8_t)(1u << (i & 7)); }
static int get(const uint8_t *b, uint32_t i) { return b[i >> 3] >> (i & 7) & 1; }
static uint32_t key(const unsigned char *s, int m) {
    uint32_t k = 0;
    for (int i = 0; i < m; i++) k = k << 8 | s[i];
    return k;
}
static int is_whole4(const unsigned char *s) {
    if ((s[0] & 0xf8) != 0xf0) return 0;
    for (int i = 1; i < 4; i++)
        if ((s[i] & 0xc0) != 0x80) return 0;
    uint32_t cp = (uint32_t)(s[0] & 7) << 18 | (uint32_t)(s[1] & 0x3f) << 12 | (uint32_t)(s[2] & 0x3f) << 6 | (s[3] & 0x3f);
    unsigned char e[4];
    return scalar(cp) && ref_encode(cp, e) == 4; /* shortest form: it must encode back to 4 bytes */
}
static int ref_prefix(const unsigned char *s, int m) { return m == 4 ? is_whole4(s) : get(prefix[m], key(s, m)); }
static int ref_whole(const unsigned char *s, int m) { return m == 4 ? is_whole4(s) : get(whole[m], key(s, m)); }

/* The reference classification of s[0..n): *sub the maximal subpart; returns as td_utf8_char. */
static int ref_char(const unsigned char *s, size_t n, size_t *sub) {
    int m = 0;
    while (m < 4 && (size_t)m < n && ref_prefix(s, m + 1)) m++;
    if (m == 0) return *sub = 1, -1;
    *sub = (size_t)m;
    if (ref_whole(s, m)) return m;
    return (size_t)m == n ? 0 : -1;
}

static void build_reference(void) {
    for (int m = 1; m < 4; m++) {
        prefix[m] = calloc((size_t)1 << (8 * m - 3), 1);
        whole[m] = calloc((size_t)1 << (8 * m - 3), 1);
    }
    for (uint32_t cp = 0; cp <= 0x10ffff; cp++) {
        if (!scalar(cp)) continue;
        unsigned char e[4];
        int len = ref_encode(cp, e);
        for (int m = 1; m <= len && m < 4; m++) set(prefix[m], key(e, m));
        if (len < 4) set(whole[len], key(e, len));
    }
}

static void check_buffer(const unsigned char *s, size_t n) {
    size_t sub;
    int want = ref_char(s, n, &sub);
    int got = td_utf8_char(s, n);
    size_t got_sub = td_utf8_subpart(s, n);
    if (got != want || got_sub != sub) {
        char hex[16] = "";
        for (size_t i = 0; i < n; i++) snprintf(hex + 2 * i, 3, "%02X", s[i]);
        CHECKF(0, "%s (%zu bytes): td_utf8_char %d (want %d), td_utf8_subpart %zu (want %zu)", hex, n, got, want,
               got_sub, sub);
    }
}

/* Every buffer of 1-3 bytes; 4-byte buffers over every lead and second byte with the last two from the bytes where
 * a range starts or ends. */
static void exhaustive(void) {
    unsigned char s[4];
    for (uint32_t v = 0; v < 256; v++) s[0] = (unsigned char)v, check_buffer(s, 1);
    for (uint32_t v = 0; v < 1u << 16; v++) s[0] = (unsigned char)(v >> 8), s[1] = (unsigned char)v, check_buffer(s, 2);
    for (uint32_t v = 0; v < 1u << 24; v++) {
        s[0] = (unsigned char)(v >> 16), s[1] = (unsigned char)(v >> 8), s[2] = (unsigned char)v;
        check_buffer(s, 3);
        if (td_test_failures > 20) return;
    }
    static const unsigned char edge[] = {0x00, 0x41, 0x7f, 0x80, 0x8f, 0x90, 0x9f, 0xa0, 0xbf, 0xc0, 0xf4, 0xff};
    for (uint32_t v = 0; v < 1u << 16; v++)
        for (size_t a = 0; a < sizeof edge; a++)
            for (size_t b = 0; b < sizeof edge; b++) {
                s[0] = (unsigned char)(v >> 8), s[1] = (unsigned char)v, s[2] = edge[a], s[3] = edge[b];
                check_buffer(s, 4);
            }
}

/* Every scalar value: td_utf8_put writes the textbook encoding, td_utf8_next decodes it back whole and refuses it
 * cut by the end at every shorter length. */
static void round_trip(void) {
    for (uint32_t cp = 0; cp <= 0x10ffff; cp++) {
        if (!scalar(cp)) continue;
        unsigned char e[4];
        char o[4];
        int len = ref_encode(cp, e);
        int n = td_utf8_put(cp, o);
        CHECKF(n == len && memcmp(o, e, (size_t)len) == 0, "td_utf8_put U+%04X", cp);
        size_t i = 0;
        int32_t d = td_utf8_next(e, (size_t)len, &i);
        CHECKF(d == (int32_t)cp && i == (size_t)len, "td_utf8_next U+%04X: %d, moved %zu", cp, d, i);
        for (int cut = 1; cut < len; cut++) {
            i = 0;
            CHECKF(td_utf8_next(e, (size_t)cut, &i) == -1 && i == 0, "U+%04X cut to %d bytes decoded", cp, cut);
            CHECKF(td_utf8_char(e, (size_t)cut) == 0, "U+%04X cut to %d bytes not 'unfinished'", cp, cut);
        }
        if (td_test_failures > 20) return;
    }
}

typedef struct {
    const char *s;
    int len;     /* td_utf8_char over the whole string */
    size_t sub;  /* td_utf8_subpart */
    const char *why;
} named;

static void named_cases(void) {
    static const named cases[] = {
        {"a", 1, 1, "1 byte"},
        {"\xc3\xa9", 2, 2, "2 bytes: U+00E9"},
        {"\xe4\xbd\xa0", 3, 3, "3 bytes: U+4F60"},
        {"\xf0\x9f\x98\x80", 4, 4, "4 bytes: U+1F600"},
        {"\xc2\x80", 2, 2, "smallest 2-byte"},
        {"\xe0\xa0\x80", 3, 3, "smallest 3-byte"},
        {"\xf0\x90\x80\x80", 4, 4, "smallest 4-byte"},
        {"\xf4\x8f\xbf\xbf", 4, 4, "U+10FFFF"},
        {"\xef\xbf\xbd", 3, 3, "U+FFFD"},
        {"\xc0\xaf", -1, 1, "overlong '/' (C0)"},
        {"\xc1\xbf", -1, 1, "overlong (C1)"},
        {"\xe0\x80\xaf", -1, 1, "overlong 3-byte"},
        {"\xe0\x9f\xbf", -1, 1, "overlong 3-byte, largest"},
        {"\xf0\x80\x80\xaf", -1, 1, "overlong 4-byte"},
        {"\xf0\x8f\xbf\xbf", -1, 1, "overlong 4-byte, largest"},
        {"\xed\xa0\x80", -1, 1, "surrogate U+D800"},
        {"\xed\xbf\xbf", -1, 1, "surrogate U+DFFF"},
        {"\xed\x9f\xbf", 3, 3, "U+D7FF, below the surrogates"},
        {"\xf4\x90\x80\x80", -1, 1, "U+110000"},
        {"\xf5\x80\x80\x80", -1, 1, "lead F5"},
        {"\xff", -1, 1, "FF"},
        {"\x80", -1, 1, "a stray continuation byte"},
        {"\xe4\xbd", 0, 2, "3-byte cut after 2"},
        {"\xe4", 0, 1, "3-byte cut after 1"},
        {"\xf0\x9f\x98", 0, 3, "4-byte cut after 3"},
        {"\xf4\x8f\xbf", 0, 3, "U+10FFFF cut after 3"},
        {"\xe4\xbdx", -1, 2, "3-byte broken by an ASCII byte"},
        {"\xc3\xc3\xa9", -1, 1, "a lead byte followed by another lead"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const named *c = &cases[i];
        const unsigned char *u = (const unsigned char *)c->s;
        size_t n = strlen(c->s);
        CHECKF(td_utf8_char(u, n) == c->len, "%s: td_utf8_char %d, want %d", c->why, td_utf8_char(u, n), c->len);
        CHECKF(td_utf8_subpart(u, n) == c->sub, "%s: td_utf8_subpart %zu, want %zu", c->why, td_utf8_subpart(u, n),
               c->sub);
        size_t at = td_utf8_invalid_at(c->s, n);
        CHECKF(c->len > 0 ? at == (size_t)-1 : at == 0, "%s: td_utf8_invalid_at %zu", c->why, at);
    }
}

static void check_lossy(const char *in, size_t n, td_utf8_repl how, const char *want) {
    size_t wn = strlen(want), len = td_utf8_lossy(in, n, how, NULL);
    char *out = malloc(3 * n + 1);
    size_t w = td_utf8_lossy(in, n, how, out);
    CHECKF(len == wn && w == wn && memcmp(out, want, wn) == 0, "td_utf8_lossy(%s) of a %zu-byte input: %zu bytes",
           how == TD_UTF8_PER_BYTE ? "per byte" : "per subpart", n, w);
    free(out);
}

#define FFFD "\xef\xbf\xbd"
static void helpers(void) {
    /* decoding past the first character, and the first invalid byte of a longer text */
    const unsigned char *t = (const unsigned char *)"a\xc3\xa9\xe4\xbd\xa0\xf0\x9f\x98\x80";
    size_t i = 0, n = strlen((const char *)t);
    int32_t cps[4], k = 0;
    while (i < n && k < 4) cps[k++] = td_utf8_next(t, n, &i);
    CHECK(k == 4 && cps[0] == 'a' && cps[1] == 0xe9 && cps[2] == 0x4f60 && cps[3] == 0x1f600 && i == n);
    CHECK(td_utf8_invalid_at("ab\xe4\xbd", 4) == 2);
    CHECK(td_utf8_invalid_at("ab\xe4\xbd\xa0", 5) == (size_t)-1);
    CHECK(td_utf8_invalid_at("", 0) == (size_t)-1);
    CHECK(td_utf8_invalid_at("ok\xed\xa0\x80", 5) == 2);

    /* counting and boundaries */
    CHECK(td_utf8_count((const char *)t, n) == 4);
    CHECK(td_utf8_count("", 0) == 0);
    CHECK(td_utf8_start((const char *)t, 0, 9) == 6);  /* the last byte of U+1F600 */
    CHECK(td_utf8_start((const char *)t, 0, 6) == 6);
    CHECK(td_utf8_start((const char *)t, 0, 2) == 1);
    CHECK(td_utf8_start((const char *)t, 8, 9) == 8);  /* never below lo */
    CHECK(td_utf8_start("\x80\x80", 0, 1) == 0);
    CHECK(td_utf8_next_start((const char *)t, n, 0) == 1);
    CHECK(td_utf8_next_start((const char *)t, n, 1) == 3);
    CHECK(td_utf8_next_start((const char *)t, n, 6) == 10);
    CHECK(td_utf8_next_start((const char *)t, 8, 6) == 8); /* never past n */
    for (size_t j = 0; j < 26; j++) { /* td_utf8_is_cont matches the bit pattern */
        unsigned char b = (unsigned char)(j * 10);
        CHECK(td_utf8_is_cont(b) == (b >= 0x80 && b <= 0xbf));
    }

    /* the cut of a growing text: only an unfinished character at the end goes */
    CHECK(td_utf8_complete("", 0) == 0);
    CHECK(td_utf8_complete("ab", 2) == 2);
    CHECK(td_utf8_complete("a\xe4", 2) == 1);
    CHECK(td_utf8_complete("a\xe4\xbd", 3) == 1);
    CHECK(td_utf8_complete("a\xe4\xbd\xa0", 4) == 4);
    CHECK(td_utf8_complete("a\xf0\x9f\x98", 4) == 1);
    CHECK(td_utf8_complete("\xf0\x9f\x98\x80", 4) == 4);
    CHECK(td_utf8_complete("\xe4\xbd", 2) == 0);
    CHECK(td_utf8_complete("a\xc0", 2) == 2);         /* ill-formed: no more bytes can help, kept */
    CHECK(td_utf8_complete("a\xe0\x80", 3) == 3);     /* an overlong start: kept */
    CHECK(td_utf8_complete("a\x80\x80\x80", 4) == 4); /* stray continuation bytes: kept */

    /* lossy repair: per subpart as Python's decode(errors="replace"), per byte as the server's */
    static const struct {
        const char *in;
        size_t n;
        const char *per_subpart, *per_byte;
    } r[] = {
        {"", 0, "", ""},
        {"plain \xc3\xa9", 8, "plain \xc3\xa9", "plain \xc3\xa9"},
        {"\xe4\xbd", 2, FFFD, FFFD FFFD},
        {"a\xc3", 2, "a" FFFD, "a" FFFD},
        {"\xf0\x80\x80", 3, FFFD FFFD FFFD, FFFD FFFD FFFD},
        {"\xed\xa0\x80", 3, FFFD FFFD FFFD, FFFD FFFD FFFD},
        {"\xf4\x8f\xbf", 3, FFFD, FFFD FFFD FFFD},
        {"\xf4\x90\x80\x80", 4, FFFD FFFD FFFD FFFD, FFFD FFFD FFFD FFFD},
        {"\xc0\xaf", 2, FFFD FFFD, FFFD FFFD},
        {"\xf0\x9f\x98\x80\xff\xe4\xbdx", 8, "\xf0\x9f\x98\x80" FFFD FFFD "x", "\xf0\x9f\x98\x80" FFFD FFFD FFFD "x"},
    };
    for (size_t j = 0; j < sizeof r / sizeof r[0]; j++) {
        check_lossy(r[j].in, r[j].n, TD_UTF8_PER_SUBPART, r[j].per_subpart);
        check_lossy(r[j].in, r[j].n, TD_UTF8_PER_BYTE, r[j].per_byte);
    }
}

int main(void) {
    build_reference();
    named_cases();
    helpers();
    round_trip();
    exhaustive();
    for (int m = 1; m < 4; m++) free(prefix[m]), free(whole[m]);
    return td_test_finish("test_utf8");
}
