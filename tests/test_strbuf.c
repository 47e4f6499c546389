/* td_strbuf (src/util/strbuf.h), the library's growable string: appends of every kind, growth across many
 * doublings (against a reference built with plain arrays), printf that fits and printf that must grow, embedded
 * NULs, finish on an empty buffer, and allocation failure at every allocation of a build: the buffer reports it once
 * at the end (finish gives NULL), never writes past what it holds, and leaves nothing allocated. */
#include <stdlib.h>
#include <string.h>

#include "test_util.h"
#include "typedecide.h"
#include "util/alloc.h"
#include "util/strbuf.h"

static int64_t calls, fail_at, live;

static int refuse(void) { return ++calls == fail_at; }
static void *t_malloc(void *user, size_t size) {
    (void)user;
    if (refuse()) return NULL;
    void *p = malloc(size);
    if (p) live++;
    return p;
}
static void *t_realloc(void *user, void *ptr, size_t size) {
    (void)user;
    if (refuse()) return NULL;
    void *p = realloc(ptr, size);
    if (p && !ptr) live++;
    return p;
}
static void *t_aligned(void *user, size_t align, size_t size) {
    (void)user;
    if (refuse()) return NULL;
    void *p = aligned_alloc(align, size);
    if (p) live++;
    return p;
}
static void t_free(void *user, void *ptr) {
    (void)user;
    if (ptr) live--;
    free(ptr);
}

/* One build of every kind of append; 0 and the text in *out (td_free), or -1 where finish reported a failure. */
static int build(char **out, size_t *len) {
    td_strbuf b = TD_STRBUF_INIT;
    td_strbuf_puts(&b, "Criterion: ");
    for (int i = 0; i < 300; i++) td_strbuf_printf(&b, "[%d:%s]", i, i % 7 ? "x" : "a longer piece of text");
    td_strbuf_putc(&b, '\n');
    td_strbuf_put(&b, "a\0b", 3);
    *out = td_strbuf_finish(&b, len);
    CHECK(b.s == NULL && b.n == 0 && b.cap == 0 && b.oom == 0); /* finished: owns nothing */
    return *out ? 0 : -1;
}

int main(void) {
    /* growth: 100,000 appends of 1..13 bytes against the same bytes written to a plain array */
    {
        size_t total = 0, cap = 1 << 21;
        char *ref = malloc(cap);
        td_strbuf b = TD_STRBUF_INIT;
        uint64_t rng = 7;
        int grew = 0;
        size_t last_cap = 0;
        for (int i = 0; i < 100000; i++) {
            char piece[16];
            size_t n = 1 + td_test_rand(&rng) % 13;
            for (size_t k = 0; k < n; k++) piece[k] = (char)('a' + td_test_rand(&rng) % 26);
            td_strbuf_put(&b, piece, n);
            memcpy(ref + total, piece, n);
            total += n;
            if (b.cap != last_cap) grew++, last_cap = b.cap;
            if (b.n != total || b.s[b.n] != 0 || b.cap < b.n + 1) {
                CHECKF(0, "append %d: n %zu (want %zu), cap %zu", i, b.n, total, b.cap);
                break;
            }
        }
        CHECK(b.n == total && memcmp(b.s, ref, total) == 0);
        CHECKF(grew < 30, "%d reallocations for %zu bytes: capacity does not double", grew, total);
        td_strbuf_clear(&b);
        CHECK(b.n == 0 && b.s && b.s[0] == 0 && b.cap == last_cap); /* memory kept */
        td_strbuf_free(&b);
        CHECK(b.s == NULL && b.cap == 0);
        free(ref);
    }
    /* printf: one that fits the room left, one far longer than the buffer, %s of an empty string */
    {
        td_strbuf b = TD_STRBUF_INIT;
        td_strbuf_printf(&b, "%d-%s", 42, "ok");
        CHECK(b.n == 5 && strcmp(b.s, "42-ok") == 0 && b.cap == 64);
        char big[1000];
        memset(big, 'z', sizeof big - 1);
        big[sizeof big - 1] = 0;
        td_strbuf_printf(&b, "<%s>%s", big, "");
        CHECK(b.n == 5 + 1001 && b.s[5] == '<' && b.s[1005] == '>' && b.s[1006] == 0 && !b.oom);
        CHECK(strspn(b.s + 6, "z") == 999);
        size_t len = 0;
        char *s = td_strbuf_finish(&b, &len);
        CHECK(s && len == 1006 && strlen(s) == 1006);
        td_free(s);
    }
    /* embedded NULs count; an empty buffer finishes as "" (not NULL); puts of "" allocates a valid string */
    {
        td_strbuf b = TD_STRBUF_INIT;
        td_strbuf_put(&b, "a\0b", 3);
        td_strbuf_put(&b, NULL, 0);
        CHECK(b.n == 3 && memcmp(b.s, "a\0b", 4) == 0);
        td_strbuf_free(&b);
        size_t len = 99;
        char *s = td_strbuf_finish(&b, &len);
        CHECK(s && s[0] == 0 && len == 0);
        td_free(s);
        td_strbuf_puts(&b, "");
        CHECK(b.s && b.s[0] == 0 && b.n == 0);
        td_strbuf_free(&b);
    }
    /* a size that would overflow is an allocation failure, not a wrap */
    {
        td_strbuf b = TD_STRBUF_INIT;
        td_strbuf_puts(&b, "abc");
        CHECK(td_strbuf_reserve(&b, SIZE_MAX - 2) == -1 && b.oom);
        td_strbuf_puts(&b, "more"); /* no-op now */
        CHECK(b.n == 3);
        CHECK(td_strbuf_finish(&b, NULL) == NULL && b.s == NULL);
    }
    /* every allocation of a build made to fail in turn: NULL from finish, nothing left allocated */
    {
        td_allocator a = {t_malloc, t_realloc, t_aligned, t_free, NULL};
        CHECK(td_set_allocator(&a) == TD_OK);
        char *want = NULL, *got = NULL;
        size_t want_len = 0, len = 0;
        calls = 0, fail_at = 0;
        CHECK(build(&want, &want_len) == 0);
        int64_t n_alloc = calls;
        CHECKF(n_alloc >= 5 && n_alloc <= 12, "%lld allocations for a ~3.3 KB string", (long long)n_alloc);
        for (fail_at = 1; fail_at <= n_alloc; fail_at++) {
            calls = 0;
            int64_t before = live;
            int r = build(&got, &len);
            CHECKF(r == -1 && got == NULL, "allocation %lld failing: finish did not report it", (long long)fail_at);
            CHECKF(live == before, "allocation %lld failing: %lld blocks left", (long long)fail_at,
                   (long long)(live - before));
            if (got) td_free(got);
        }
        fail_at = 0;
        CHECK(build(&got, &len) == 0 && len == want_len && memcmp(got, want, len + 1) == 0);
        td_free(got);
        td_free(want);
        CHECK(live == 0);
        CHECK(td_set_allocator(NULL) == TD_OK);
    }
    return td_test_finish("test_strbuf");
}
