/* td_grow (src/util/grow.h), the library's growable-array step: growth across many doublings keeps every element,
 * capacity doubles from `first` (and jumps to a large `need` at once), a size that would overflow fails without
 * touching the array, and a failing allocation leaves the array and its capacity as they were. */
#include <stdlib.h>
#include <string.h>

#include "test_util.h"
#include "typedecide.h"
#include "util/grow.h"

static int64_t calls, fail_at;

static void *t_malloc(void *user, size_t size) {
    (void)user;
    return ++calls == fail_at ? NULL : malloc(size);
}
static void *t_realloc(void *user, void *ptr, size_t size) {
    (void)user;
    return ++calls == fail_at ? NULL : realloc(ptr, size);
}
static void *t_aligned(void *user, size_t align, size_t size) {
    (void)user;
    return ++calls == fail_at ? NULL : aligned_alloc(align, size);
}
static void t_free(void *user, void *ptr) {
    (void)user;
    free(ptr);
}

int main(void) {
    /* 100,000 appends: every element kept, capacity a doubling of 16, few reallocations */
    {
        int64_t *v = NULL;
        size_t n = 0, cap = 0, last = 0;
        int grew = 0;
        for (int64_t i = 0; i < 100000; i++) {
            int64_t *nv = td_grow(v, &cap, n + 1, sizeof *v, 16);
            if (!nv) {
                CHECKF(0, "append %lld: allocation failed", (long long)i);
                break;
            }
            v = nv;
            v[n++] = i * 7 - 3;
            if (cap != last) grew++, last = cap;
        }
        int same = 1;
        for (size_t i = 0; i < n; i++) same &= v[i] == (int64_t)i * 7 - 3;
        CHECK(n == 100000 && same);
        CHECKF(cap == 131072 && grew == 14, "capacity %zu after %d reallocations: not doubling from 16", cap, grew);
        CHECK(td_grow(v, &cap, 5, sizeof *v, 16) == v && cap == 131072); /* room already: the same array */
        td_free(v);
    }
    /* a large need at once; need 0 still gives an array */
    {
        size_t cap = 0;
        char *p = td_grow(NULL, &cap, 1000, 1, 64);
        CHECK(p && cap == 1024);
        td_free(p);
        cap = 0;
        p = td_grow(NULL, &cap, 0, 1, 64);
        CHECK(p && cap == 64);
        td_free(p);
    }
    /* overflow: a count whose bytes do not fit a size_t, a capacity that cannot double */
    {
        size_t cap = 4;
        int32_t *v = td_grow(NULL, &cap, 4, sizeof *v, 4);
        CHECK(v && cap == 4);
        CHECK(td_grow(v, &cap, SIZE_MAX / 2, sizeof *v, 4) == NULL && cap == 4);
        CHECK(td_grow(v, &cap, SIZE_MAX, 1, 4) == NULL && cap == 4);
        td_free(v);
    }
    /* a failing allocation: NULL, the array and its capacity unchanged */
    {
        td_allocator a = {t_malloc, t_realloc, t_aligned, t_free, NULL};
        CHECK(td_set_allocator(&a) == TD_OK);
        size_t cap = 0;
        calls = 0, fail_at = 0;
        int *v = td_grow(NULL, &cap, 3, sizeof *v, 4);
        CHECK(v && cap == 4);
        v[0] = 1, v[1] = 2, v[2] = 3, v[3] = 4;
        fail_at = calls + 1;
        CHECK(td_grow(v, &cap, 5, sizeof *v, 4) == NULL && cap == 4);
        CHECK(v[0] == 1 && v[3] == 4);
        fail_at = 0;
        int *nv = td_grow(v, &cap, 5, sizeof *v, 4);
        CHECK(nv && cap == 8 && nv[0] == 1 && nv[3] == 4);
        td_free(nv);
        CHECK(td_set_allocator(NULL) == TD_OK);
    }
    return td_test_finish("test_grow");
}
