/* Room in a growable array: the library's one doubling step for arrays of anything but text (text: strbuf.h).
 *
 *   int32_t *ids = NULL;
 *   size_t n = 0, cap = 0;
 *   int32_t *nv = td_grow(ids, &cap, n + 1, sizeof *ids, 64);
 *   if (!nv) return td_fail_nomem("the ids");   // ids is still valid (and still owned by the caller)
 *   ids = nv;
 *   ids[n++] = id;
 *
 * Returns p itself when *cap already holds `need` elements; else p reallocated (td_realloc, the installed
 * allocator) to a capacity doubled from *cap (from `first` when *cap is 0) until it holds `need`, *cap updated.
 * NULL when the allocation fails or the bytes would overflow a size_t: p is then untouched and *cap unchanged. A
 * `need` of 0 counts as 1, so that NULL always means a failure. */
#ifndef TD_UTIL_GROW_H
#define TD_UTIL_GROW_H

#include <stddef.h>
#include <stdint.h>

#include "util/alloc.h"

static inline void *td_grow(void *p, size_t *cap, size_t need, size_t size, size_t first) {
    if (need == 0) need = 1;
    if (p && need <= *cap) return p;
    size_t c = *cap ? *cap : first ? first : 1;
    while (c < need) {
        if (c > SIZE_MAX / 2) return NULL;
        c *= 2;
    }
    if (size && c > SIZE_MAX / size) return NULL;
    void *np = td_realloc(p, c * size);
    if (!np) return NULL;
    *cap = c;
    return np;
}

#endif
