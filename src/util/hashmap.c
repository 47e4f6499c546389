#include "util/alloc.h"
#include "util/hashmap.h"

#include <stdlib.h>
#include <string.h>

/* FNV-1a with a final avalanche (splitmix64): short keys, quality good enough for linear probing. */
uint64_t td_hash_bytes(const void *data, size_t len) {
    const unsigned char *p = data;
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < len; i++) h = (h ^ p[i]) * 0x100000001b3ull;
    h ^= h >> 30;
    h *= 0xbf58476d1ce4e5b9ull;
    h ^= h >> 27;
    h *= 0x94d049bb133111ebull;
    return h ^ (h >> 31);
}

static uint64_t hash_u64(uint64_t x) {
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static size_t capacity_for(size_t n) {
    size_t cap = 16;
    while (cap < n * 2 + 1) cap <<= 1; /* load factor <= 0.5 */
    return cap;
}

int td_strmap_init(td_strmap *m, size_t n) {
    memset(m, 0, sizeof *m);
    m->cap = capacity_for(n);
    m->keys = td_calloc(m->cap, sizeof *m->keys);
    m->lens = td_calloc(m->cap, sizeof *m->lens);
    m->vals = td_calloc(m->cap, sizeof *m->vals);
    if (!m->keys || !m->lens || !m->vals) {
        td_strmap_free(m);
        return -1;
    }
    return 0;
}

void td_strmap_free(td_strmap *m) {
    td_free(m->keys);
    td_free(m->lens);
    td_free(m->vals);
    memset(m, 0, sizeof *m);
}

int td_strmap_put(td_strmap *m, const char *key, size_t len, int32_t val) {
    if (m->cap == 0) return -1;
    size_t mask = m->cap - 1, i = (size_t)td_hash_bytes(key, len) & mask;
    for (size_t probes = 0; probes < m->cap; probes++, i = (i + 1) & mask) {
        if (!m->keys[i]) {
            if ((m->count + 1) * 2 > m->cap) return -1;
            m->keys[i] = key;
            m->lens[i] = (uint32_t)len;
            m->vals[i] = val;
            m->count++;
            return 0;
        }
        if (m->lens[i] == len && memcmp(m->keys[i], key, len) == 0) {
            m->vals[i] = val;
            return 0;
        }
    }
    return -1;
}

int td_strmap_get(const td_strmap *m, const char *key, size_t len, int32_t *val) {
    if (m->cap == 0) return 0;
    size_t mask = m->cap - 1, i = (size_t)td_hash_bytes(key, len) & mask;
    for (;; i = (i + 1) & mask) { /* terminates: the map is at most half full */
        if (!m->keys[i]) return 0;
        if (m->lens[i] == len && memcmp(m->keys[i], key, len) == 0) {
            *val = m->vals[i];
            return 1;
        }
    }
}

int td_u64map_init(td_u64map *m, size_t n) {
    memset(m, 0, sizeof *m);
    m->cap = capacity_for(n);
    m->keys = td_malloc(m->cap * sizeof *m->keys);
    m->vals = td_malloc(m->cap * sizeof *m->vals);
    m->used = td_calloc(m->cap, 1);
    if (!m->keys || !m->vals || !m->used) {
        td_u64map_free(m);
        return -1;
    }
    return 0;
}

void td_u64map_free(td_u64map *m) {
    td_free(m->keys);
    td_free(m->vals);
    td_free(m->used);
    memset(m, 0, sizeof *m);
}

int td_u64map_put(td_u64map *m, uint64_t key, uint64_t val) {
    if (m->cap == 0) return -1;
    size_t mask = m->cap - 1, i = (size_t)hash_u64(key) & mask;
    for (size_t probes = 0; probes < m->cap; probes++, i = (i + 1) & mask) {
        if (!m->used[i]) {
            if ((m->count + 1) * 2 > m->cap) return -1;
            m->used[i] = 1;
            m->keys[i] = key;
            m->vals[i] = val;
            m->count++;
            return 1;
        }
        if (m->keys[i] == key) return 0;
    }
    return -1;
}

int td_u64map_get(const td_u64map *m, uint64_t key, uint64_t *val) {
    if (m->cap == 0) return 0;
    size_t mask = m->cap - 1, i = (size_t)hash_u64(key) & mask;
    for (;; i = (i + 1) & mask) {
        if (!m->used[i]) return 0;
        if (m->keys[i] == key) {
            *val = m->vals[i];
            return 1;
        }
    }
}
