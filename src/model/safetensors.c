#include "model/safetensors.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/alloc.h"
#include "util/error.h"
#include "util/json.h"

#define MAX_HEADER (100u << 20) /* the limit the reference implementation uses */

static const struct {
    const char *name;
    td_dtype dtype;
    unsigned size;
} dtypes[] = {
    {"F32", TD_DTYPE_F32, 4},    {"F16", TD_DTYPE_F16, 2},      {"BF16", TD_DTYPE_BF16, 2},
    {"F64", TD_DTYPE_OTHER, 8},  {"I64", TD_DTYPE_OTHER, 8},    {"U64", TD_DTYPE_OTHER, 8},
    {"I32", TD_DTYPE_OTHER, 4},  {"U32", TD_DTYPE_OTHER, 4},    {"I16", TD_DTYPE_OTHER, 2},
    {"U16", TD_DTYPE_OTHER, 2},  {"I8", TD_DTYPE_OTHER, 1},     {"U8", TD_DTYPE_OTHER, 1},
    {"BOOL", TD_DTYPE_OTHER, 1}, {"F8_E4M3", TD_DTYPE_OTHER, 1}, {"F8_E5M2", TD_DTYPE_OTHER, 1},
};

static int cmp_begin(const void *a, const void *b) {
    const td_st_tensor *x = *(const td_st_tensor *const *)a, *y = *(const td_st_tensor *const *)b;
    return x->begin < y->begin ? -1 : x->begin > y->begin ? 1 : (x->end < y->end ? -1 : x->end > y->end);
}

void td_st_close(td_st_file *f) {
    if (!f) return;
    for (int i = 0; i < f->n_tensors; i++) td_free(f->tensors[i].name);
    td_free(f->tensors);
    td_unmap_file(&f->map);
    memset(f, 0, sizeof *f);
}

static td_status parse_tensor(const char *name, const char *key, json_t *v, uint64_t data_size, td_st_tensor *t) {
    if (!json_is_object(v)) return td_fail(TD_ERR_FORMAT, "%s: tensor %s: entry must be an object", name, key);
    json_t *dt = json_object_get(v, "dtype"), *shape = json_object_get(v, "shape");
    json_t *offs = json_object_get(v, "data_offsets");
    if (!json_is_string(dt)) return td_fail(TD_ERR_FORMAT, "%s: tensor %s: missing string \"dtype\"", name, key);
    unsigned esize = 0;
    for (size_t i = 0; i < sizeof dtypes / sizeof dtypes[0]; i++)
        if (strcmp(json_string_value(dt), dtypes[i].name) == 0) {
            t->dtype = dtypes[i].dtype;
            esize = dtypes[i].size;
            snprintf(t->dtype_name, sizeof t->dtype_name, "%s", dtypes[i].name);
        }
    if (!esize)
        return td_fail(TD_ERR_FORMAT, "%s: tensor %s: unknown dtype \"%.32s\"", name, key, json_string_value(dt));
    if (!json_is_array(shape) || json_array_size(shape) > TD_ST_MAX_DIMS)
        return td_fail(TD_ERR_FORMAT, "%s: tensor %s: \"shape\" must be an array of at most %d sizes", name, key,
                       TD_ST_MAX_DIMS);
    t->n_dims = (int)json_array_size(shape);
    uint64_t count = 1;
    for (int d = 0; d < t->n_dims; d++) {
        json_t *s = json_array_get(shape, (size_t)d);
        if (!json_is_integer(s) || json_integer_value(s) < 0 || json_integer_value(s) > (1ll << 40))
            return td_fail(TD_ERR_FORMAT, "%s: tensor %s: shape[%d] is not a valid size", name, key, d);
        t->shape[d] = json_integer_value(s);
        if (t->shape[d] && count > (1ull << 50) / (uint64_t)t->shape[d])
            return td_fail(TD_ERR_FORMAT, "%s: tensor %s: shape is absurdly large", name, key);
        count *= (uint64_t)t->shape[d];
    }
    if (!json_is_array(offs) || json_array_size(offs) != 2 || !json_is_integer(json_array_get(offs, 0)) ||
        !json_is_integer(json_array_get(offs, 1)))
        return td_fail(TD_ERR_FORMAT, "%s: tensor %s: \"data_offsets\" must be [begin, end]", name, key);
    json_int_t b = json_integer_value(json_array_get(offs, 0)), e = json_integer_value(json_array_get(offs, 1));
    if (b < 0 || e < b)
        return td_fail(TD_ERR_FORMAT, "%s: tensor %s: data_offsets [%lld, %lld] are not an increasing pair", name,
                       key, (long long)b, (long long)e);
    t->begin = (uint64_t)b;
    t->end = (uint64_t)e;
    if (t->end > data_size)
        return td_fail(TD_ERR_FORMAT,
                       "%s: tensor %s: data_offsets end %llu is past the end of the data (%llu bytes; file truncated?)",
                       name, key, (unsigned long long)t->end, (unsigned long long)data_size);
    if (t->end - t->begin != count * esize)
        return td_fail(TD_ERR_FORMAT, "%s: tensor %s: %llu bytes of data but shape x %s needs %llu", name, key,
                       (unsigned long long)(t->end - t->begin), t->dtype_name, (unsigned long long)(count * esize));
    t->name = td_strdup(key);
    if (!t->name) return td_fail_nomem("a tensor name");
    return TD_OK;
}

td_status td_st_parse(const uint8_t *buf, size_t size, const char *name, td_st_file *out) {
    memset(out, 0, sizeof *out);
    if (size < 8) return td_fail(TD_ERR_FORMAT, "%s: truncated: %zu bytes, not even the header length", name, size);
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--) n = (n << 8) | buf[i];
    if (n > size - 8)
        return td_fail(TD_ERR_FORMAT, "%s: header length %llu runs past the end of the file (%zu bytes)", name,
                       (unsigned long long)n, size);
    if (n > MAX_HEADER) return td_fail(TD_ERR_FORMAT, "%s: header length %llu exceeds 100 MiB", name, (unsigned long long)n);
    json_error_t e;
    int oom;
    json_t *root = td_json_loadb((const char *)buf + 8, (size_t)n, JSON_REJECT_DUPLICATES, &e, &oom);
    if (!root && oom) return td_fail(TD_ERR_NOMEM, "%s: out of memory reading the header", name);
    if (!root)
        return td_fail(TD_ERR_FORMAT, "%s: header JSON:%d:%d: %s", name, e.line, e.column, e.text);
    if (!json_is_object(root)) {
        json_decref(root);
        return td_fail(TD_ERR_FORMAT, "%s: header must be a JSON object", name);
    }
    out->data = buf + 8 + n;
    out->data_size = size - 8 - n;
    size_t cap = json_object_size(root);
    out->tensors = td_calloc(cap ? cap : 1, sizeof *out->tensors);
    td_st_tensor **order = td_calloc(cap ? cap : 1, sizeof *order);
    td_status st = TD_OK;
    if (!out->tensors || !order) st = td_fail_nomem("the tensor table");
    const char *key;
    json_t *v;
    json_object_foreach(root, key, v) {
        if (st != TD_OK) break;
        if (strcmp(key, "__metadata__") == 0) {
            if (!json_is_object(v)) st = td_fail(TD_ERR_FORMAT, "%s: __metadata__ must be an object", name);
            continue;
        }
        td_st_tensor *t = &out->tensors[out->n_tensors];
        st = parse_tensor(name, key, v, out->data_size, t);
        if (st == TD_OK) order[out->n_tensors++] = t;
    }
    if (st == TD_OK) { /* the format: tensors tile the data buffer, no two share a byte and no byte is left over */
        qsort(order, (size_t)out->n_tensors, sizeof *order, cmp_begin);
        const td_st_tensor *reach = NULL; /* the non-empty tensor reaching furthest so far */
        for (int i = 0; i < out->n_tensors && st == TD_OK; i++) {
            const td_st_tensor *t = order[i];
            if (t->end == t->begin) continue;
            uint64_t covered = reach ? reach->end : 0;
            if (reach && t->begin < reach->end)
                st = td_fail(TD_ERR_FORMAT, "%s: tensors %s and %s overlap (bytes %llu..%llu and %llu..%llu)", name,
                             reach->name, t->name, (unsigned long long)reach->begin, (unsigned long long)reach->end,
                             (unsigned long long)t->begin, (unsigned long long)t->end);
            else if (t->begin > covered)
                st = td_fail(TD_ERR_FORMAT, "%s: bytes %llu..%llu of the data buffer belong to no tensor (before %s): "
                                            "the format indexes every byte",
                             name, (unsigned long long)covered, (unsigned long long)t->begin, t->name);
            if (!reach || t->end > reach->end) reach = t;
        }
        uint64_t covered = reach ? reach->end : 0;
        if (st == TD_OK && covered != out->data_size)
            st = td_fail(TD_ERR_FORMAT, "%s: bytes %llu..%llu of the data buffer belong to no tensor (after the last): "
                                        "the format indexes every byte",
                         name, (unsigned long long)covered, (unsigned long long)out->data_size);
    }
    td_free(order);
    json_decref(root);
    if (st != TD_OK) td_st_close(out);
    return st;
}

td_status td_st_open(const char *path, td_st_file *out) {
    td_mapped_file m;
    td_status st = td_map_file(path, &m);
    if (st != TD_OK) return st;
    st = td_st_parse(m.data, m.size, path, out);
    if (st != TD_OK) {
        td_unmap_file(&m);
        return st;
    }
    out->map = m;
    return TD_OK;
}

td_status td_st_write_header(void *stream, const char *path, const td_st_write_tensor *tensors, int n) {
    FILE *f = stream;
    uint64_t f0 = td_alloc_failures();
    json_t *hdr = json_object();
    uint64_t off = 0;
    for (int i = 0; i < n && hdr; i++) {
        json_t *shape = json_array(), *offs = json_array(), *t = json_object();
        for (int d = 0; d < tensors[i].n_dims; d++) json_array_append_new(shape, json_integer(tensors[i].shape[d]));
        json_array_append_new(offs, json_integer((json_int_t)off));
        json_array_append_new(offs, json_integer((json_int_t)(off + tensors[i].nbytes)));
        json_object_set_new(t, "dtype", json_string(tensors[i].dtype));
        json_object_set_new(t, "shape", shape);
        json_object_set_new(t, "data_offsets", offs);
        json_object_set_new(hdr, tensors[i].name, t);
        off += tensors[i].nbytes;
    }
    json_t *meta = json_object();
    json_object_set_new(meta, "format", json_string("pt"));
    json_object_set_new(hdr, "__metadata__", meta);
    char *text = td_json_dumps_checked(hdr, JSON_COMPACT | JSON_PRESERVE_ORDER, f0);
    json_decref(hdr);
    if (!text) return td_fail_nomem("a safetensors header");
    size_t hl = strlen(text), padded = (hl + 7) & ~(size_t)7; /* keep the data section 8-byte aligned */
    uint8_t len8[8];
    for (int i = 0; i < 8; i++) len8[i] = (uint8_t)((uint64_t)padded >> (8 * i));
    int ok = fwrite(len8, 1, 8, f) == 8 && fwrite(text, 1, hl, f) == hl;
    for (size_t i = hl; i < padded && ok; i++) ok = fputc(' ', f) != EOF;
    td_free(text);
    return ok ? TD_OK : td_fail(TD_ERR_IO, "%s: write failed (disk full?)", path);
}

td_status td_st_write(const char *path, const td_st_write_tensor *tensors, int n) {
    FILE *f = fopen(path, "wb");
    if (!f) return td_fail(TD_ERR_IO, "%s: cannot create", path);
    td_status st = td_st_write_header(f, path, tensors, n);
    int ok = st == TD_OK;
    for (int i = 0; i < n && ok; i++)
        ok = tensors[i].nbytes == 0 || fwrite(tensors[i].data, 1, tensors[i].nbytes, f) == tensors[i].nbytes;
    if (fclose(f) != 0) ok = 0;
    if (st != TD_OK) return st;
    if (!ok) return td_fail(TD_ERR_IO, "%s: write failed (disk full?)", path);
    return TD_OK;
}
