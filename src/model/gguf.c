#include "model/gguf.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "util/alloc.h"
#include "util/error.h"
#include "util/fileio.h"
#include "util/utf8.h"
#include "util/grow.h"
#include "util/hashmap.h"
#include "util/strbuf.h"

#define MAX_STRING (1ull << 30)
#define MAX_ARRAY (1ull << 30)

/* ---- reading --------------------------------------------------------------------------------------------------- */

typedef struct cursor {
    const uint8_t *p, *end;
    const char *name;
} cursor;

static td_status need(cursor *c, uint64_t n, const char *what) {
    if ((uint64_t)(c->end - c->p) < n)
        return td_fail(TD_ERR_FORMAT, "%s: truncated: %s runs past the end of the file", c->name, what);
    return TD_OK;
}

static td_status rd_u32(cursor *c, uint32_t *v, const char *what) {
    td_status st = need(c, 4, what);
    if (st != TD_OK) return st;
    *v = (uint32_t)c->p[0] | (uint32_t)c->p[1] << 8 | (uint32_t)c->p[2] << 16 | (uint32_t)c->p[3] << 24;
    c->p += 4;
    return TD_OK;
}

static td_status rd_u64(cursor *c, uint64_t *v, const char *what) {
    td_status st = need(c, 8, what);
    if (st != TD_OK) return st;
    uint64_t x = 0;
    for (int i = 7; i >= 0; i--) x = x << 8 | c->p[i];
    *v = x;
    c->p += 8;
    return TD_OK;
}

static td_status rd_str(cursor *c, const char **s, uint64_t *len, const char *what) {
    td_status st = rd_u64(c, len, what);
    if (st != TD_OK) return st;
    if (*len > MAX_STRING) return td_fail(TD_ERR_FORMAT, "%s: %s: string length %llu is absurd", c->name, what, (unsigned long long)*len);
    if ((st = need(c, *len, what)) != TD_OK) return st;
    *s = (const char *)c->p;
    c->p += *len;
    return TD_OK;
}

static uint64_t scalar_size(uint32_t t) {
    static const uint8_t sz[13] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
    return t < 13 ? sz[t] : 0;
}

/* Skips a value of type t (not an array), checking bounds. */
static td_status skip_value(cursor *c, uint32_t t, const char *key) {
    if (t == TD_GGUF_STRING) {
        const char *s;
        uint64_t n;
        return rd_str(c, &s, &n, key);
    }
    uint64_t sz = scalar_size(t);
    if (!sz) return td_fail(TD_ERR_FORMAT, "%s: %s: unknown value type %u", c->name, key, t); /* key: "metadata KEY" */
    td_status st = need(c, sz, key);
    if (st == TD_OK) c->p += sz;
    return st;
}

typedef struct ggml_type_info {
    int id;
    const char *name;
    uint32_t block, size;
} ggml_type_info;

static const ggml_type_info ggml_types[] = {
    {0, "F32", 1, 4},      {1, "F16", 1, 2},      {2, "Q4_0", 32, 18},   {3, "Q4_1", 32, 20},
    {6, "Q5_0", 32, 22},   {7, "Q5_1", 32, 24},   {8, "Q8_0", 32, 34},   {9, "Q8_1", 32, 36},
    {10, "Q2_K", 256, 84}, {11, "Q3_K", 256, 110}, {12, "Q4_K", 256, 144}, {13, "Q5_K", 256, 176},
    {14, "Q6_K", 256, 210}, {15, "Q8_K", 256, 292}, {24, "I8", 1, 1},      {25, "I16", 1, 2},
    {26, "I32", 1, 4},     {27, "I64", 1, 8},     {28, "F64", 1, 8},     {30, "BF16", 1, 2},
};

static const ggml_type_info *type_info(int id) {
    for (size_t i = 0; i < sizeof ggml_types / sizeof ggml_types[0]; i++)
        if (ggml_types[i].id == id) return &ggml_types[i];
    return NULL;
}

static td_dtype dtype_of(int ggml) {
    switch (ggml) {
    case TD_GGML_F32: return TD_DTYPE_F32;
    case TD_GGML_F16: return TD_DTYPE_F16;
    case TD_GGML_BF16: return TD_DTYPE_BF16;
    case TD_GGML_Q8_0: return TD_DTYPE_Q8_0;
    case TD_GGML_Q4_0: return TD_DTYPE_Q4_0;
    default: return TD_DTYPE_OTHER;
    }
}

static int cmp_offset(const void *a, const void *b) {
    const td_gguf_tensor *x = *(const td_gguf_tensor *const *)a, *y = *(const td_gguf_tensor *const *)b;
    return x->offset < y->offset ? -1 : x->offset > y->offset;
}

void td_gguf_close(td_gguf *g) {
    if (!g) return;
    td_free(g->kv);
    td_free(g->tensors);
    if (g->buffer == TD_GGUF_BUFFER_OWNED) td_free(g->map.data);
    if (g->buffer) g->map.data = NULL; /* a buffer is not a mapping: only the path is left to free */
    td_unmap_file(&g->map);
    memset(g, 0, sizeof *g);
}

td_status td_gguf_parse(const uint8_t *buf, size_t size, const char *name, td_gguf *out) {
    memset(out, 0, sizeof *out);
    cursor c = {buf, buf + size, name};
    uint32_t magic, version;
    uint64_t n_tensors, n_kv;
    td_status st;
    if ((st = rd_u32(&c, &magic, "the magic")) != TD_OK) return st;
    if (magic != 0x46554747u) return td_fail(TD_ERR_FORMAT, "%s: not a GGUF file (bad magic)", name);
    if ((st = rd_u32(&c, &version, "the version")) != TD_OK) return st;
    if (version != 2 && version != 3)
        return td_fail(TD_ERR_UNSUPPORTED, "%s: GGUF version %u is not supported (2 or 3)", name, version);
    if ((st = rd_u64(&c, &n_tensors, "the tensor count")) != TD_OK || (st = rd_u64(&c, &n_kv, "the metadata count")) != TD_OK)
        return st;
    /* every entry takes at least 12 (metadata) or 24 (tensor info) bytes: counts beyond that are lies */
    if (n_kv > size / 12 || n_tensors > size / 24 || n_tensors > (1u << 20))
        return td_fail(TD_ERR_FORMAT, "%s: absurd counts (%llu tensors, %llu metadata entries) for a %zu-byte file",
                       name, (unsigned long long)n_tensors, (unsigned long long)n_kv, size);
    out->version = version;
    out->kv = td_calloc(n_kv ? n_kv : 1, sizeof *out->kv);
    out->tensors = td_calloc(n_tensors ? n_tensors : 1, sizeof *out->tensors);
    if (!out->kv || !out->tensors) {
        td_gguf_close(out);
        return td_fail_nomem("the GGUF tables");
    }
    out->alignment = 32;
    for (uint64_t i = 0; i < n_kv && st == TD_OK; i++) {
        td_gguf_kv *kv = &out->kv[i];
        const char *key;
        uint32_t t;
        if ((st = rd_str(&c, &key, &kv->key_len, "a metadata key")) != TD_OK) break;
        kv->key = key;
        char kname[128];
        snprintf(kname, sizeof kname, "metadata %.*s", (int)(kv->key_len < 100 ? kv->key_len : 100), key);
        if (kv->key_len == 0) {
            st = td_fail(TD_ERR_FORMAT, "%s: empty metadata key", name);
            break;
        }
        for (uint64_t j = 0; j < i; j++)
            if (out->kv[j].key_len == kv->key_len && memcmp(out->kv[j].key, key, kv->key_len) == 0) {
                st = td_fail(TD_ERR_FORMAT, "%s: duplicate %s", name, kname);
                break;
            }
        if (st != TD_OK || (st = rd_u32(&c, &t, kname)) != TD_OK) break;
        kv->type = (td_gguf_vtype)t;
        if (t == TD_GGUF_ARRAY) {
            uint32_t et;
            if ((st = rd_u32(&c, &et, kname)) != TD_OK || (st = rd_u64(&c, &kv->n, kname)) != TD_OK) break;
            if (et == TD_GGUF_ARRAY || et > 12 || kv->n > MAX_ARRAY) {
                st = td_fail(TD_ERR_FORMAT, "%s: %s: bad array (element type %u, %llu elements)", name, kname, et,
                             (unsigned long long)kv->n);
                break;
            }
            kv->elem_type = (td_gguf_vtype)et;
            kv->value = c.p;
            if (et == TD_GGUF_STRING) {
                for (uint64_t k = 0; k < kv->n && st == TD_OK; k++) st = skip_value(&c, et, kname);
            } else if ((st = need(&c, kv->n * scalar_size(et), kname)) == TD_OK) {
                c.p += kv->n * scalar_size(et);
            }
        } else {
            if (t == TD_GGUF_STRING) {
                const char *s;
                if ((st = rd_str(&c, &s, &kv->n, kname)) == TD_OK) kv->value = (const uint8_t *)s;
            } else {
                kv->value = c.p;
                st = skip_value(&c, t, kname);
            }
        }
        out->n_kv++;
    }
    if (st == TD_OK) {
        const td_gguf_kv *al = td_gguf_find(out, "general.alignment");
        if (al) {
            uint32_t a = 0;
            if (al->type == TD_GGUF_U32) memcpy(&a, al->value, 4);
            if (al->type != TD_GGUF_U32 || a == 0 || (a & (a - 1)))
                st = td_fail(TD_ERR_FORMAT, "%s: general.alignment must be a nonzero power of two (u32)", name);
            else out->alignment = a;
        }
    }
    td_strmap names = {0};
    if (st == TD_OK && td_strmap_init(&names, n_tensors)) st = td_fail_nomem("the tensor names");
    for (uint64_t i = 0; i < n_tensors && st == TD_OK; i++) {
        td_gguf_tensor *t = &out->tensors[i];
        const char *nm;
        uint64_t nl;
        uint32_t nd, type;
        if ((st = rd_str(&c, &nm, &nl, "a tensor name")) != TD_OK) break;
        if (nl == 0 || nl >= sizeof t->name) {
            st = td_fail(TD_ERR_FORMAT, "%s: tensor %llu: name of %llu bytes (1 to 63 allowed)", name,
                         (unsigned long long)i, (unsigned long long)nl);
            break;
        }
        memcpy(t->name, nm, nl);
        t->name[nl] = 0;
        if (strlen(t->name) != nl) {
            st = td_fail(TD_ERR_FORMAT, "%s: tensor %llu: name contains a NUL byte", name, (unsigned long long)i);
            break;
        }
        int32_t dup;
        if (td_strmap_get(&names, t->name, nl, &dup)) {
            st = td_fail(TD_ERR_FORMAT, "%s: tensor %s appears twice", name, t->name);
            break;
        }
        td_strmap_put(&names, t->name, nl, (int32_t)i);
        if ((st = rd_u32(&c, &nd, t->name)) != TD_OK) break;
        if (nd < 1 || nd > 4) {
            st = td_fail(TD_ERR_FORMAT, "%s: tensor %s: %u dimensions (1 to 4 allowed)", name, t->name, nd);
            break;
        }
        t->n_dims = (int)nd;
        uint64_t count = 1;
        for (int d = 0; d < 4; d++) t->ne[d] = 1;
        for (uint32_t d = 0; d < nd && st == TD_OK; d++) {
            uint64_t ne;
            if ((st = rd_u64(&c, &ne, t->name)) != TD_OK) break;
            if (ne > (1ull << 40) || (ne && count > (1ull << 50) / ne)) {
                st = td_fail(TD_ERR_FORMAT, "%s: tensor %s: absurd dimension %llu", name, t->name, (unsigned long long)ne);
                break;
            }
            t->ne[d] = (int64_t)ne;
            count *= ne;
        }
        if (st != TD_OK || (st = rd_u32(&c, &type, t->name)) != TD_OK || (st = rd_u64(&c, &t->offset, t->name)) != TD_OK)
            break;
        const ggml_type_info *ti = type_info((int)type);
        if (!ti) {
            st = td_fail(TD_ERR_FORMAT, "%s: tensor %s: unknown ggml type %u", name, t->name, type);
            break;
        }
        if (t->ne[0] % ti->block) {
            st = td_fail(TD_ERR_FORMAT, "%s: tensor %s: row length %lld is not a multiple of the %s block (%u)", name,
                         t->name, (long long)t->ne[0], ti->name, ti->block);
            break;
        }
        t->ggml_type = (int)type;
        t->dtype = dtype_of((int)type);
        t->nbytes = count / ti->block * ti->size;
        out->n_tensors++;
    }
    td_strmap_free(&names);
    if (st != TD_OK) {
        td_gguf_close(out);
        return st;
    }
    uint64_t header = (uint64_t)(c.p - buf), start = (header + out->alignment - 1) / out->alignment * out->alignment;
    if (out->n_tensors > 0 && start > size)
        st = td_fail(TD_ERR_FORMAT, "%s: truncated: the data section would start past the end of the file", name);
    uint64_t data_size = start <= size ? size - start : 0;
    td_gguf_tensor **order = td_calloc((size_t)(out->n_tensors ? out->n_tensors : 1), sizeof *order);
    if (!order && st == TD_OK) st = td_fail_nomem("the tensor table");
    for (int64_t i = 0; i < out->n_tensors && st == TD_OK; i++) {
        td_gguf_tensor *t = &out->tensors[i];
        if (t->offset % out->alignment)
            st = td_fail(TD_ERR_FORMAT, "%s: tensor %s: offset %llu is not aligned to %u bytes", name, t->name,
                         (unsigned long long)t->offset, out->alignment);
        else if (t->offset > data_size || t->nbytes > data_size - t->offset)
            st = td_fail(TD_ERR_FORMAT, "%s: tensor %s: data (offset %llu, %llu bytes) runs past the end of the file "
                                        "(truncated?)",
                         name, t->name, (unsigned long long)t->offset, (unsigned long long)t->nbytes);
        else t->data = buf + start + t->offset;
        order[i] = t;
    }
    if (st == TD_OK && out->n_tensors > 1) {
        qsort(order, (size_t)out->n_tensors, sizeof *order, cmp_offset);
        for (int64_t i = 1; i < out->n_tensors && st == TD_OK; i++)
            if (order[i - 1]->nbytes && order[i]->offset < order[i - 1]->offset + order[i - 1]->nbytes)
                st = td_fail(TD_ERR_FORMAT, "%s: tensors %s and %s overlap", name, order[i - 1]->name, order[i]->name);
    }
    td_free(order);
    if (st != TD_OK) td_gguf_close(out);
    return st;
}

td_status td_gguf_open(const char *path, td_gguf *out) {
    td_mapped_file m;
    td_status st = td_map_file(path, &m);
    if (st != TD_OK) return st;
    st = td_gguf_parse(m.data, m.size, path, out);
    if (st != TD_OK) {
        td_unmap_file(&m);
        return st;
    }
    out->map = m;
    return TD_OK;
}

td_status td_gguf_open_buffer(void *data, size_t size, const char *name, int how, td_gguf *out) {
    char *path = td_strdup(name);
    td_status st = path ? td_gguf_parse(data, size, name, out) : td_fail_nomem("a name");
    if (st != TD_OK) {
        td_free(path);
        if (how == TD_GGUF_BUFFER_OWNED) td_free(data);
        return st;
    }
    out->map.data = data;
    out->map.size = size;
    out->map.path = path;
    out->buffer = how;
    return TD_OK;
}

int td_gguf_sniff(const char *path) {
    FILE *f = fopen(path, "rb");
    unsigned char b[4] = {0};
    int ok = f && fread(b, 1, 4, f) == 4 && memcmp(b, "GGUF", 4) == 0;
    if (f) fclose(f);
    return ok;
}

const td_gguf_kv *td_gguf_find(const td_gguf *g, const char *key) {
    size_t kl = strlen(key);
    for (int64_t i = 0; i < g->n_kv; i++)
        if (g->kv[i].key_len == kl && memcmp(g->kv[i].key, key, kl) == 0) return &g->kv[i];
    return NULL;
}

const td_gguf_tensor *td_gguf_tensor_find(const td_gguf *g, const char *name) {
    for (int64_t i = 0; i < g->n_tensors; i++)
        if (strcmp(g->tensors[i].name, name) == 0) return &g->tensors[i];
    return NULL;
}

static int64_t int_at(td_gguf_vtype t, const uint8_t *p, int *ok) {
    int64_t v = 0;
    *ok = 1;
    switch (t) {
    case TD_GGUF_U8: return p[0];
    case TD_GGUF_I8: return (int8_t)p[0];
    case TD_GGUF_U16: return (uint16_t)(p[0] | p[1] << 8);
    case TD_GGUF_I16: return (int16_t)(p[0] | p[1] << 8);
    case TD_GGUF_U32: {
        uint32_t u;
        memcpy(&u, p, 4);
        return u;
    }
    case TD_GGUF_I32: {
        int32_t i;
        memcpy(&i, p, 4);
        return i;
    }
    case TD_GGUF_U64: {
        uint64_t u;
        memcpy(&u, p, 8);
        if (u > (uint64_t)INT64_MAX) *ok = 0;
        return (int64_t)u;
    }
    case TD_GGUF_I64: memcpy(&v, p, 8); return v;
    case TD_GGUF_BOOL: return p[0] != 0;
    default: *ok = 0; return 0;
    }
}

int64_t td_gguf_array_int(const td_gguf_kv *kv, uint64_t i) {
    int ok;
    return int_at(kv->elem_type, kv->value + i * scalar_size(kv->elem_type), &ok);
}

float td_gguf_array_f32(const td_gguf_kv *kv, uint64_t i) {
    float v;
    memcpy(&v, kv->value + i * 4, 4); /* little-endian, as the file and every host this builds for */
    return v;
}

void td_gguf_next_str(const td_gguf_kv *kv, const uint8_t **it, const char **s, uint64_t *len) {
    const uint8_t *p = *it ? *it : kv->value;
    uint64_t n = 0;
    for (int b = 7; b >= 0; b--) n = n << 8 | p[b];
    *s = (const char *)p + 8;
    *len = n;
    *it = p + 8 + n;
}

td_status td_gguf_get_int(const td_gguf *g, const char *key, int required, int64_t *out) {
    const td_gguf_kv *kv = td_gguf_find(g, key);
    if (!kv) return required ? td_fail(TD_ERR_FORMAT, "%s: missing metadata %s", g->map.path ? g->map.path : "gguf", key) : TD_OK;
    int ok;
    int64_t v = int_at(kv->type, kv->value, &ok);
    if (!ok || kv->type == TD_GGUF_BOOL)
        return td_fail(TD_ERR_FORMAT, "%s: metadata %s must be an integer", g->map.path ? g->map.path : "gguf", key);
    *out = v;
    return TD_OK;
}

td_status td_gguf_get_bool(const td_gguf *g, const char *key, int required, int *out) {
    const td_gguf_kv *kv = td_gguf_find(g, key);
    if (!kv) return required ? td_fail(TD_ERR_FORMAT, "%s: missing metadata %s", g->map.path ? g->map.path : "gguf", key) : TD_OK;
    if (kv->type != TD_GGUF_BOOL)
        return td_fail(TD_ERR_FORMAT, "%s: metadata %s must be a bool", g->map.path ? g->map.path : "gguf", key);
    *out = kv->value[0] != 0;
    return TD_OK;
}

td_status td_gguf_get_f32(const td_gguf *g, const char *key, int required, float *out) {
    const td_gguf_kv *kv = td_gguf_find(g, key);
    if (!kv) return required ? td_fail(TD_ERR_FORMAT, "%s: missing metadata %s", g->map.path ? g->map.path : "gguf", key) : TD_OK;
    if (kv->type == TD_GGUF_F32) memcpy(out, kv->value, 4);
    else if (kv->type == TD_GGUF_F64) {
        double d;
        memcpy(&d, kv->value, 8);
        *out = (float)d;
    } else return td_fail(TD_ERR_FORMAT, "%s: metadata %s must be a float", g->map.path ? g->map.path : "gguf", key);
    return TD_OK;
}

td_status td_gguf_get_str(const td_gguf *g, const char *key, int required, const char **s, uint64_t *len) {
    const td_gguf_kv *kv = td_gguf_find(g, key);
    if (!kv) return required ? td_fail(TD_ERR_FORMAT, "%s: missing metadata %s", g->map.path ? g->map.path : "gguf", key) : TD_OK;
    if (kv->type != TD_GGUF_STRING)
        return td_fail(TD_ERR_FORMAT, "%s: metadata %s must be a string", g->map.path ? g->map.path : "gguf", key);
    *s = (const char *)kv->value;
    *len = kv->n;
    return TD_OK;
}

/* ---- writing ------------------------------------------------------------------------------------------------------ */

typedef struct wtensor {
    char name[64];
    int type, n_dims;
    int64_t ne[4];
    void *data;
    uint64_t nbytes;
} wtensor;

struct td_gguf_writer {
    td_strbuf kv; /* the metadata's bytes (kv.oom: an allocation failed, reported by the next call) */
    uint64_t n_kv;
    wtensor *t;
    int64_t n_t;
    size_t cap_t;
};

static void put(td_gguf_writer *w, const void *p, size_t n) {
    if (n) td_strbuf_put(&w->kv, p, n);
}

static void put_u32(td_gguf_writer *w, uint32_t v) {
    uint8_t b[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
    put(w, b, 4);
}

static void put_u64(td_gguf_writer *w, uint64_t v) {
    uint8_t b[8];
    for (int i = 0; i < 8; i++) b[i] = (uint8_t)(v >> (8 * i));
    put(w, b, 8);
}

static void put_str(td_gguf_writer *w, const char *s, size_t n) {
    put_u64(w, n);
    put(w, s, n);
}

static td_status key_type(td_gguf_writer *w, const char *key, uint32_t t) {
    put_str(w, key, strlen(key));
    put_u32(w, t);
    w->n_kv++;
    return w->kv.oom ? td_fail_nomem("GGUF metadata") : TD_OK;
}

td_status td_gguf_writer_new(td_gguf_writer **out) {
    *out = td_calloc(1, sizeof **out);
    return *out ? TD_OK : td_fail_nomem("a GGUF writer");
}

void td_gguf_writer_free(td_gguf_writer *w) {
    if (!w) return;
    for (int64_t i = 0; i < w->n_t; i++) td_free(w->t[i].data);
    td_free(w->t);
    td_strbuf_free(&w->kv);
    td_free(w);
}

td_status td_gguf_add_u32(td_gguf_writer *w, const char *key, uint32_t v) {
    key_type(w, key, TD_GGUF_U32);
    put_u32(w, v);
    return w->kv.oom ? td_fail_nomem("GGUF metadata") : TD_OK;
}

td_status td_gguf_add_i32(td_gguf_writer *w, const char *key, int32_t v) {
    key_type(w, key, TD_GGUF_I32);
    put_u32(w, (uint32_t)v);
    return w->kv.oom ? td_fail_nomem("GGUF metadata") : TD_OK;
}

td_status td_gguf_add_f32(td_gguf_writer *w, const char *key, float v) {
    uint32_t u;
    memcpy(&u, &v, 4);
    key_type(w, key, TD_GGUF_F32);
    put_u32(w, u);
    return w->kv.oom ? td_fail_nomem("GGUF metadata") : TD_OK;
}

td_status td_gguf_add_bool(td_gguf_writer *w, const char *key, int v) {
    uint8_t b = v != 0;
    key_type(w, key, TD_GGUF_BOOL);
    put(w, &b, 1);
    return w->kv.oom ? td_fail_nomem("GGUF metadata") : TD_OK;
}

/* GGUF strings are UTF-8: a value that is not is refused, naming the key and the byte. */
static td_status check_utf8(const char *key, const char *s, size_t len, uint64_t index, int in_array) {
    size_t bad = td_utf8_invalid_at(s, len);
    if (bad == (size_t)-1) return TD_OK;
    if (in_array)
        return td_fail(TD_ERR_FORMAT, "GGUF %s[%llu] is not valid UTF-8 at byte %zu", key, (unsigned long long)index, bad);
    return td_fail(TD_ERR_FORMAT, "GGUF %s is not valid UTF-8 at byte %zu", key, bad);
}

td_status td_gguf_add_str(td_gguf_writer *w, const char *key, const char *s, size_t len) {
    td_status st = check_utf8(key, s, len, 0, 0);
    if (st != TD_OK) return st;
    key_type(w, key, TD_GGUF_STRING);
    put_str(w, s, len);
    return w->kv.oom ? td_fail_nomem("GGUF metadata") : TD_OK;
}

td_status td_gguf_add_str_array(td_gguf_writer *w, const char *key, const char *const *s, const size_t *len, uint64_t n) {
    for (uint64_t i = 0; i < n; i++) {
        td_status st = check_utf8(key, s[i], len[i], i, 1);
        if (st != TD_OK) return st;
    }
    key_type(w, key, TD_GGUF_ARRAY);
    put_u32(w, TD_GGUF_STRING);
    put_u64(w, n);
    for (uint64_t i = 0; i < n; i++) put_str(w, s[i], len[i]);
    return w->kv.oom ? td_fail_nomem("GGUF metadata") : TD_OK;
}

td_status td_gguf_add_i32_array(td_gguf_writer *w, const char *key, const int32_t *v, uint64_t n) {
    key_type(w, key, TD_GGUF_ARRAY);
    put_u32(w, TD_GGUF_I32);
    put_u64(w, n);
    for (uint64_t i = 0; i < n; i++) put_u32(w, (uint32_t)v[i]);
    return w->kv.oom ? td_fail_nomem("GGUF metadata") : TD_OK;
}

td_status td_gguf_add_f32_array(td_gguf_writer *w, const char *key, const float *v, uint64_t n) {
    key_type(w, key, TD_GGUF_ARRAY);
    put_u32(w, TD_GGUF_F32);
    put_u64(w, n);
    for (uint64_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &v[i], 4);
        put_u32(w, u);
    }
    return w->kv.oom ? td_fail_nomem("GGUF metadata") : TD_OK;
}

td_status td_gguf_add_tensor(td_gguf_writer *w, const char *name, int type, int n_dims, const int64_t *ne, void *data,
                             uint64_t nbytes) {
    if (strlen(name) >= 64 || n_dims < 1 || n_dims > 4) {
        td_free(data);
        return td_fail(TD_ERR_INVALID_ARG, "GGUF tensor %s: name too long or bad dimensions", name);
    }
    wtensor *nt = td_grow(w->t, &w->cap_t, (size_t)w->n_t + 1, sizeof *nt, 64);
    if (!nt) {
        td_free(data);
        return td_fail_nomem("GGUF tensors");
    }
    w->t = nt;
    wtensor *t = &w->t[w->n_t++];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);
    t->type = type;
    t->n_dims = n_dims;
    for (int d = 0; d < n_dims; d++) t->ne[d] = ne[d];
    t->data = data;
    t->nbytes = nbytes;
    return TD_OK;
}

td_status td_gguf_write(td_gguf_writer *w, const char *path) {
    if (w->kv.oom) return td_fail_nomem("GGUF metadata");
    const uint64_t A = 32;
    td_gguf_writer hdr = {0}; /* header and tensor infos, built with the same helpers */
    put_u32(&hdr, 0x46554747u);
    put_u32(&hdr, 3);
    put_u64(&hdr, (uint64_t)w->n_t);
    put_u64(&hdr, w->n_kv);
    put(&hdr, w->kv.s, w->kv.n);
    uint64_t off = 0;
    for (int64_t i = 0; i < w->n_t; i++) { /* offsets strictly sequential, each tensor padded to the alignment */
        const wtensor *t = &w->t[i];
        put_str(&hdr, t->name, strlen(t->name));
        put_u32(&hdr, (uint32_t)t->n_dims);
        for (int d = 0; d < t->n_dims; d++) put_u64(&hdr, (uint64_t)t->ne[d]);
        put_u32(&hdr, (uint32_t)t->type);
        put_u64(&hdr, off);
        off += (t->nbytes + A - 1) / A * A;
    }
    static const uint8_t zeros[32] = {0};
    size_t pad = (size_t)((A - hdr.kv.n % A) % A);
    put(&hdr, zeros, pad);
    if (hdr.kv.oom) {
        td_strbuf_free(&hdr.kv);
        return td_fail_nomem("the GGUF header");
    }
    /* written beside the target and renamed over it: no half-written model, and whatever was at path before (a
     * model, a device node) is never removed when a write fails */
    td_wfile f;
    td_status st = td_wfile_open(&f, path, 0);
    if (st != TD_OK) {
        td_strbuf_free(&hdr.kv);
        return st;
    }
    int ok = fwrite(hdr.kv.s, 1, hdr.kv.n, f.f) == hdr.kv.n;
    td_strbuf_free(&hdr.kv);
    for (int64_t i = 0; ok && i < w->n_t; i++) {
        const wtensor *t = &w->t[i];
        ok = fwrite(t->data, 1, t->nbytes, f.f) == t->nbytes;
        size_t tp = (size_t)((A - t->nbytes % A) % A);
        if (ok && tp) ok = fwrite(zeros, 1, tp, f.f) == tp;
    }
    if (!ok) {
        int e = errno;
        td_wfile_abort(&f);
        return td_fail(TD_ERR_IO, "%s: write failed: %s", path, strerror(e));
    }
    return td_wfile_commit(&f);
}
