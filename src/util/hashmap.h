/* Two small open-addressing hash maps: byte strings -> int32 and uint64 -> uint64. Insert-only (the tokenizer
 * builds them once at load and then only reads them, from any number of threads). */
#ifndef TD_UTIL_HASHMAP_H
#define TD_UTIL_HASHMAP_H

#include <stddef.h>
#include <stdint.h>

typedef struct td_strmap {
    const char **keys; /* borrowed: the caller keeps key bytes alive as long as the map */
    uint32_t *lens;
    int32_t *vals;
    size_t cap;        /* power of two; 0 when empty */
    size_t count;
} td_strmap;

/* Sizes the map for `n` keys. Returns 0 on success, -1 on allocation failure. */
int td_strmap_init(td_strmap *m, size_t n);
void td_strmap_free(td_strmap *m);
/* Inserts or overwrites. Returns 0, or -1 when the map is full (it never grows past its initial size). */
int td_strmap_put(td_strmap *m, const char *key, size_t len, int32_t val);
/* Returns 1 and sets *val when found, else 0. */
int td_strmap_get(const td_strmap *m, const char *key, size_t len, int32_t *val);

typedef struct td_u64map {
    uint64_t *keys;
    uint64_t *vals;
    uint8_t *used;
    size_t cap;
    size_t count;
} td_u64map;

int td_u64map_init(td_u64map *m, size_t n);
void td_u64map_free(td_u64map *m);
/* Inserts if absent. Returns 1 if inserted, 0 if the key was already there (value unchanged), -1 if full. */
int td_u64map_put(td_u64map *m, uint64_t key, uint64_t val);
int td_u64map_get(const td_u64map *m, uint64_t key, uint64_t *val);

uint64_t td_hash_bytes(const void *data, size_t len);

#endif
