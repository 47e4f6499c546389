#include "typedecide.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "model/arch.h"
#include "model/config.h"
#include "model/model.h"
#include "model/safetensors.h"
#include "util/alloc.h"
#include "util/error.h"
#include "util/fileio.h"
#include "util/grow.h"
#include "util/dtype.h"
#include "util/half.h"
#include "util/hashmap.h"

typedef struct spec_list {
    td_st_write_tensor *t;
    int n;
    size_t cap_t, cap_norm;
    int *is_norm; /* 0: not a norm; 1: a norm that scales by w; 2: one that scales by (1 + w) */
    td_dtype dtype;
} spec_list;

static const char *dtype_str(td_dtype t) { return t == TD_DTYPE_F32 ? "F32" : t == TD_DTYPE_F16 ? "F16" : "BF16"; }

static td_status collect(void *user, const td_tensor_spec *s) {
    spec_list *l = user;
    td_st_write_tensor *nt = td_grow(l->t, &l->cap_t, (size_t)l->n + 1, sizeof *nt, 256);
    if (nt) l->t = nt;
    int *nn = nt ? td_grow(l->is_norm, &l->cap_norm, (size_t)l->n + 1, sizeof *nn, 256) : NULL;
    if (nn) l->is_norm = nn;
    if (!nt || !nn) return td_fail_nomem("the tensor list");
    td_st_write_tensor *t = &l->t[l->n];
    memset(t, 0, sizeof *t);
    t->name = td_strdup(s->name);
    if (!t->name) return td_fail_nomem("a tensor name");
    t->dtype = dtype_str(l->dtype);
    t->n_dims = s->nd;
    uint64_t count = 1;
    for (int i = 0; i < s->nd; i++) {
        t->shape[i] = s->dims[i];
        count *= (uint64_t)s->dims[i];
    }
    t->nbytes = count * td_dtype_size(l->dtype);
    l->is_norm[l->n] = s->flags & TD_T_NORM ? (s->zero_centred ? 2 : 1) : 0;
    l->n++;
    return TD_OK;
}

static uint64_t splitmix(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static float uniform01(uint64_t *s) { return (float)(splitmix(s) >> 40) * (1.0f / 16777216.0f); }

static int ends_with(const char *s, const char *suffix) {
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcmp(s + a - b, suffix) == 0;
}

/* Value of element i of a tensor: chosen so that activations keep unit scale through the network. */
static float init_value(const td_st_write_tensor *t, int is_norm, uint64_t *rng) {
    float u = uniform01(rng) * 2.0f - 1.0f;
    if (is_norm) return is_norm == 2 ? 0.1f * u : 1.0f + 0.1f * u;
    if (ends_with(t->name, "A_log")) return logf(1.0f + 15.0f * uniform01(rng));
    if (ends_with(t->name, "dt_bias")) return 0.5f * u;
    if (strstr(t->name, "embed_tokens") || strcmp(t->name, "lm_head.weight") == 0) return 0.05f * u;
    int64_t fan_in = t->n_dims >= 2 ? t->shape[t->n_dims - 1] : 1;
    return u * sqrtf(3.0f / (float)fan_in);
}

static td_status copy_file(const char *src, const char *dst) {
    char *data;
    size_t n;
    td_status st = td_read_file(src, &data, &n);
    if (st != TD_OK) return st;
    FILE *f = fopen(dst, "wb");
    int ok = f && fwrite(data, 1, n, f) == n;
    if (f && fclose(f) != 0) ok = 0;
    td_free(data);
    return ok ? TD_OK : td_fail(TD_ERR_IO, "%s: cannot write", dst);
}

static td_status write_text(const char *dir, const char *name, const char *text) {
    char *p = td_path_join(dir, name);
    if (!p) return td_fail_nomem("a path");
    FILE *f = fopen(p, "wb");
    int ok = f && fputs(text, f) >= 0;
    if (f && fclose(f) != 0) ok = 0;
    td_status st = ok ? TD_OK : td_fail(TD_ERR_IO, "%s: cannot write", p);
    td_free(p);
    return st;
}

/* Copies the tokenizer (and tokenizer_config.json beside it) and writes generation_config.json with its stop ids. */
static td_status write_tokenizer_files(const char *out_dir, const char *tokenizer_json, const td_config *cfg) {
    char gen[256] = "{\n  \"eos_token_id\": []\n}\n";
    td_status st = TD_OK;
    if (tokenizer_json) {
        td_tokenizer *tok;
        if ((st = td_tokenizer_load(tokenizer_json, &tok)) != TD_OK) return st;
        if ((st = td_model_check_vocab(tok, cfg->n_vocab, tokenizer_json)) != TD_OK) {
            td_tokenizer_free(tok);
            return st;
        }
        int32_t im_end = td_token_lookup(tok, "<|im_end|>"), eot = td_token_lookup(tok, "<|endoftext|>");
        td_tokenizer_free(tok);
        if (im_end >= 0 && eot >= 0)
            snprintf(gen, sizeof gen,
                     "{\n  \"eos_token_id\": [%d, %d],\n  \"do_sample\": true,\n  \"temperature\": 0.6,\n"
                     "  \"top_k\": 20,\n  \"top_p\": 0.95\n}\n",
                     im_end, eot);
        char *dst = td_path_join(out_dir, "tokenizer.json");
        if (!dst) return td_fail_nomem("a path");
        st = copy_file(tokenizer_json, dst);
        td_free(dst);
        if (st != TD_OK) return st;
        /* tokenizer_config.json beside the source, if any */
        const char *slash = strrchr(tokenizer_json, '/');
        char src_tc[4096];
        snprintf(src_tc, sizeof src_tc, "%.*stokenizer_config.json", slash ? (int)(slash - tokenizer_json + 1) : 0,
                 tokenizer_json);
        if (td_file_exists(src_tc)) {
            dst = td_path_join(out_dir, "tokenizer_config.json");
            if (!dst) return td_fail_nomem("a path");
            st = copy_file(src_tc, dst);
            td_free(dst);
            if (st != TD_OK) return st;
        }
    }
    return write_text(out_dir, "generation_config.json", gen);
}

td_synth_params td_synth_default_params(void) {
    td_synth_params p;
    memset(&p, 0, sizeof p);
    p.seed = 1;
    p.dtype = "bf16";
    return p;
}

td_status td_synth_write(const char *out_dir, const char *config_json, const td_synth_params *params) {
    if (!out_dir || !config_json) return td_fail(TD_ERR_INVALID_ARG, "td_synth_write: NULL argument");
    td_synth_params p = params ? *params : td_synth_default_params();
    td_dtype dtype;
    const char *dt = p.dtype ? p.dtype : "bf16";
    if (strcmp(dt, "bf16") == 0) dtype = TD_DTYPE_BF16;
    else if (strcmp(dt, "f16") == 0) dtype = TD_DTYPE_F16;
    else if (strcmp(dt, "f32") == 0) dtype = TD_DTYPE_F32;
    else return td_fail(TD_ERR_INVALID_ARG, "synth: dtype must be bf16, f16 or f32, not \"%s\"", dt);
    const char *tokenizer_json = p.tokenizer_json;
    uint64_t seed = p.seed;
    td_config cfg;
    td_status st = td_config_parse(config_json, strlen(config_json), "synth config", &cfg);
    if (st != TD_OK) return st;
    if (mkdir(out_dir, 0755) != 0 && errno != EEXIST) return td_fail(TD_ERR_IO, "%s: cannot create directory", out_dir);
    if (!td_is_dir(out_dir)) return td_fail(TD_ERR_IO, "%s: not a directory", out_dir);
    if ((st = write_text(out_dir, "config.json", config_json)) != TD_OK) return st;
    if ((st = write_tokenizer_files(out_dir, tokenizer_json, &cfg)) != TD_OK) return st;

    spec_list l;
    memset(&l, 0, sizeof l);
    l.dtype = dtype;
    char *path = td_path_join(out_dir, "model.safetensors");
    FILE *f = NULL;
    size_t cap = 1 << 22; /* elements generated per write */
    void *buf = td_malloc(cap * 4);
    if (!path || !buf) {
        st = td_fail_nomem("synth buffers");
        goto done;
    }
    if ((st = td_arch_tensors(&cfg, NULL, collect, &l)) != TD_OK) goto done;
    if (!(f = fopen(path, "wb"))) {
        st = td_fail(TD_ERR_IO, "%s: cannot create", path);
        goto done;
    }
    if ((st = td_st_write_header(f, path, l.t, l.n)) != TD_OK) goto done;
    uint64_t total = 0, written = 0;
    for (int i = 0; i < l.n; i++) total += l.t[i].nbytes;
    for (int i = 0; i < l.n && st == TD_OK; i++) {
        const td_st_write_tensor *t = &l.t[i];
        uint64_t rng = seed ^ td_hash_bytes(t->name, strlen(t->name));
        uint64_t count = t->nbytes / td_dtype_size(dtype);
        for (uint64_t o = 0; o < count && st == TD_OK; o += cap) {
            size_t m = count - o < cap ? (size_t)(count - o) : cap;
            for (size_t k = 0; k < m; k++) {
                float v = init_value(t, l.is_norm[i], &rng);
                if (dtype == TD_DTYPE_F32) ((float *)buf)[k] = v;
                else if (dtype == TD_DTYPE_F16) ((uint16_t *)buf)[k] = td_f32_to_f16(v);
                else ((uint16_t *)buf)[k] = td_f32_to_bf16(v);
            }
            size_t bytes = m * td_dtype_size(dtype);
            if (fwrite(buf, 1, bytes, f) != bytes) st = td_fail(TD_ERR_IO, "%s: write failed (disk full?)", path);
            written += bytes;
            if (p.progress) p.progress(p.progress_user, (double)written / (double)(total ? total : 1));
        }
    }
done:
    if (f && fclose(f) != 0 && st == TD_OK) st = td_fail(TD_ERR_IO, "%s: write failed", path);
    for (int i = 0; i < l.n; i++) td_free((char *)l.t[i].name);
    td_free(l.t);
    td_free(l.is_norm);
    td_free(buf);
    td_free(path);
    return st;
}
