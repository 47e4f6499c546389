/* The allocation hook. One process-wide allocator, like sqlite3_config(SQLITE_CONFIG_MALLOC): set before the
 * library is used, never while it runs. jansson's allocations stay with the C library: its lexer does not survive
 * a failing allocation (jansson 2.14's lex_save ignores strbuffer_append_byte's failure and lex_scan_string then
 * reaches assert(0)), so no hook may make them fail. They are counted when they fail, though (td_alloc_failures),
 * and strings jansson makes are copied into ours before they reach a caller (td_json_dumps_checked). */
#include "util/alloc.h"

#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"

static void *libc_malloc(void *user, size_t size) {
    (void)user;
    return malloc(size ? size : 1);
}
static void *libc_realloc(void *user, void *ptr, size_t size) {
    (void)user;
    return realloc(ptr, size ? size : 1);
}
static void *libc_aligned(void *user, size_t align, size_t size) {
    (void)user;
    return aligned_alloc(align, size);
}
static void libc_free(void *user, void *ptr) {
    (void)user;
    free(ptr);
}

static td_allocator current = {libc_malloc, libc_realloc, libc_aligned, libc_free, NULL};

/* Allocations refused on this thread. jansson reports some of its own as syntax errors and builds objects without
 * the values it could not allocate; the callers compare this count before and after to tell (td_alloc_failures). */
static _Thread_local uint64_t refused;

static void *counted(void *p) {
    if (!p) refused++;
    return p;
}

uint64_t td_alloc_failures(void) { return refused; }

static void *json_malloc(size_t size) { return counted(malloc(size)); }

td_status td_set_allocator(const td_allocator *a) {
    if (a && (!a->malloc_fn || !a->realloc_fn || !a->aligned_fn || !a->free_fn))
        return td_fail(TD_ERR_INVALID_ARG, "td_set_allocator: all four functions are required");
    if (a) current = *a;
    else current = (td_allocator){libc_malloc, libc_realloc, libc_aligned, libc_free, NULL};
    json_set_alloc_funcs(json_malloc, free); /* the C library's, counted (see the top of this file) */
    return TD_OK;
}

void *td_malloc(size_t size) { return counted(current.malloc_fn(current.user, size ? size : 1)); }

void *td_calloc(size_t n, size_t size) {
    if (size && n > SIZE_MAX / size) return counted(NULL);
    size_t bytes = n * size;
    if (bytes == 0) bytes = 1;
    void *p = counted(current.malloc_fn(current.user, bytes));
    if (p) memset(p, 0, bytes);
    return p;
}

void *td_realloc(void *ptr, size_t size) { return counted(current.realloc_fn(current.user, ptr, size ? size : 1)); }

void *td_aligned_alloc(size_t align, size_t size) {
    if (size > SIZE_MAX - align) return counted(NULL);
    size_t rounded = (size + align - 1) & ~(align - 1);
    return counted(current.aligned_fn(current.user, align, rounded ? rounded : align));
}

char *td_strndup(const char *s, size_t n) {
    size_t len = strnlen(s, n);
    char *d = td_malloc(len + 1);
    if (!d) return NULL;
    memcpy(d, s, len);
    d[len] = 0;
    return d;
}

char *td_strdup(const char *s) { return td_strndup(s, SIZE_MAX); }

void td_free(void *ptr) {
    if (ptr) current.free_fn(current.user, ptr);
}
