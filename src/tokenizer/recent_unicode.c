/* td_regex_widen: the pre-tokenizer's property classes with the code points assigned after PCRE2's Unicode. */
#include "tokenizer/recent_unicode.h"

#include <stdio.h>
#include <string.h>

#include "util/error.h"
#include "util/strbuf.h"

/* The recent ranges of category `cat` (one letter: every category it starts; two: that one), as class items. */
static int put_ranges(td_strbuf *b, const char *cat, size_t cl) {
    int any = 0;
    for (size_t i = 0; i < td_n_recent_unicode; i++) {
        const td_unicode_range *r = &td_recent_unicode[i];
        if (r->cat[0] != cat[0] || (cl == 2 && r->cat[1] != cat[1])) continue;
        char item[40];
        int n = r->first == r->last ? snprintf(item, sizeof item, "\\x{%X}", (unsigned)r->first)
                                    : snprintf(item, sizeof item, "\\x{%X}-\\x{%X}", (unsigned)r->first, (unsigned)r->last);
        td_strbuf_put(b, item, (size_t)n);
        any = 1;
    }
    return any;
}

/* 1 for a general category this rewrite widens: one capital of L M N P S Z C, or it and a lower-case letter. */
static int is_category(const char *s, size_t n) {
    if (n < 1 || n > 2 || !strchr("LMNPSZC", s[0]) || !s[0]) return 0;
    return n == 1 || (s[1] >= 'a' && s[1] <= 'z');
}

td_status td_regex_widen(const char *p, size_t len, char **out, size_t *out_len) {
    td_strbuf b = TD_STRBUF_INIT;
    int in_class = 0;
    for (size_t i = 0; i < len;) {
        char c = p[i];
        if (c == '\\' && i + 1 < len && p[i + 1] == 'Q') { /* \Q...\E: literal text */
            const char *e = NULL;
            for (size_t k = i + 2; k + 1 < len; k++)
                if (p[k] == '\\' && p[k + 1] == 'E') {
                    e = p + k + 2;
                    break;
                }
            size_t n = e ? (size_t)(e - (p + i)) : len - i;
            td_strbuf_put(&b, p + i, n);
            i += n;
        } else if (c == '\\' && i + 1 < len && p[i + 1] == 'p') { /* \pX or \p{X} */
            const char *name = p + i + 2;
            size_t nl = 0, whole;
            if (i + 2 < len && p[i + 2] == '{') {
                const char *close = memchr(p + i + 3, '}', len - (i + 3));
                if (!close) { /* PCRE2 reports the error */
                    td_strbuf_put(&b, p + i, len - i);
                    break;
                }
                name = p + i + 3, nl = (size_t)(close - name), whole = (size_t)(close + 1 - (p + i));
            } else {
                nl = i + 2 < len ? 1 : 0, whole = 2 + nl;
            }
            if (!is_category(name, nl)) {
                td_strbuf_put(&b, p + i, whole);
            } else if (in_class) {
                td_strbuf_put(&b, p + i, whole);
                put_ranges(&b, name, nl);
            } else {
                td_strbuf_put(&b, "[", 1);
                td_strbuf_put(&b, p + i, whole);
                put_ranges(&b, name, nl);
                td_strbuf_put(&b, "]", 1);
            }
            i += whole;
        } else if (c == '\\') { /* any other escape: itself and the escaped character */
            size_t n = i + 1 < len ? 2 : 1;
            td_strbuf_put(&b, p + i, n);
            i += n;
        } else if (!in_class && c == '[') { /* a class opens; "]" first (after "^") is a literal */
            size_t k = i + 1;
            if (k < len && p[k] == '^') k++;
            if (k < len && p[k] == ']') k++;
            td_strbuf_put(&b, p + i, k - i);
            i = k;
            in_class = 1;
        } else if (in_class && c == '[' && i + 1 < len && p[i + 1] == ':') { /* [:alpha:] */
            const char *e = NULL;
            for (size_t k = i + 2; k + 1 < len; k++)
                if (p[k] == ':' && p[k + 1] == ']') {
                    e = p + k + 2;
                    break;
                }
            size_t n = e ? (size_t)(e - (p + i)) : 1;
            td_strbuf_put(&b, p + i, n);
            i += n;
        } else {
            if (in_class && c == ']') in_class = 0;
            td_strbuf_put(&b, p + i, 1);
            i++;
        }
    }
    *out = td_strbuf_finish(&b, out_len);
    return *out ? TD_OK : td_fail_nomem("the pre-tokenizer regex");
}
