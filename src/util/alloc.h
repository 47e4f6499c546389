/* Every allocation of the library goes through these, and so through the allocator installed with
 * td_set_allocator() (the C library's by default): a test can count the bytes a call allocates or make the Nth
 * allocation fail. Memory from any of them is released with td_free(). */
#ifndef TD_UTIL_ALLOC_H
#define TD_UTIL_ALLOC_H

#include <stddef.h>
#include <stdint.h>

#include "typedecide.h"

void *td_malloc(size_t size);
/* Zeroed; NULL when n * size overflows. */
void *td_calloc(size_t n, size_t size);
void *td_realloc(void *ptr, size_t size);
/* `align` a power of two that is a multiple of sizeof(void *); size rounded up to a multiple of align here. */
void *td_aligned_alloc(size_t align, size_t size);
char *td_strdup(const char *s);
char *td_strndup(const char *s, size_t n);

/* How many allocations were refused on this thread so far. A call that hands work to a library which hides its
 * allocation failures (jansson reports some as syntax errors, and builds objects without the values it could not
 * allocate) compares the count before and after: a change means TD_ERR_NOMEM, not a bad file or a good result. */
uint64_t td_alloc_failures(void);

#endif
