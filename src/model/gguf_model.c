/* Loading a model from a GGUF file: llama.cpp's metadata keys become the equivalent config.json (so one set of
 * checks serves both formats), llama.cpp's tensor names map onto the architecture's tensor table, and the
 * tokenizer comes from the tokenizer.ggml.* arrays (gguf_tokenizer.c). */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/arch.h"
#include "model/gguf.h"
#include "model/gguf_names.h"
#include "model/model.h"
#include "util/alloc.h"
#include "util/error.h"
#include "util/half.h"
#include "util/json.h"

static void log_msg(const td_model_params *p, int level, const char *msg) {
    if (p && p->log) p->log(p->log_user, level, msg);
}

/* block_count against the tensors: the highest blk.N in the file must be block_count - 1. A wrong count would
 * otherwise surface as a missing tensor, or as blocks silently skipped. */
static td_status check_blocks(const td_gguf *g, const char *key) {
    int64_t blocks = 0, top = -1;
    td_status st = td_gguf_get_int(g, key, 1, &blocks);
    if (st != TD_OK) return st;
    for (int64_t i = 0; i < g->n_tensors; i++) {
        const char *nm = g->tensors[i].name;
        char *end;
        if (strncmp(nm, "blk.", 4) != 0) continue;
        long b = strtol(nm + 4, &end, 10);
        if (end != nm + 4 && *end == '.' && b > top) top = b;
    }
    if (top + 1 != blocks)
        return td_fail(TD_ERR_FORMAT, "%s: metadata %s is %lld but the tensors are those of %lld blocks (blk.0 to blk.%lld)",
                       g->map.path, key, (long long)blocks, (long long)(top + 1), (long long)top);
    return TD_OK;
}

typedef struct binder {
    td_model *m;
    const td_gguf *g;
    uint8_t *used;
} binder;

/* The w with 1 + w == s in fp32 (the engine's (1 + w) then reproduces the stored norm bit for bit). fl(s - 1) is
 * it whenever s >= 0.5 (Sterbenz); otherwise the neighbours are tried. The converter computed s = fl(1 + w) in
 * fp32, so an exact w exists for its files (the original one); for any other s the nearest is fl(s - 1). */
static float undo_plus_one(float s) {
    float w = s - 1.0f;
    for (int k = 0; k <= 16; k++) {
        float lo = w, hi = w;
        for (int i = 0; i < k; i++) lo = nextafterf(lo, -INFINITY), hi = nextafterf(hi, INFINITY);
        if (1.0f + lo == s) return lo;
        if (1.0f + hi == s) return hi;
    }
    return w;
}

/* The A_log with -expf(A_log) == s, as the engine computes the decay rate (blk.N.ssm_a stores -exp(A_log)).
 * logf(-s) is within an ulp or two of it; when exp is many-to-one (|A_log| < 1) any preimage does. s must be
 * <= 0: llama.cpp multiplies by it directly, so a positive value would be a growth rate -exp cannot give. */
static int undo_neg_exp(float s, float *a) {
    if (!(s <= 0.0f)) return -1;
    float a0 = logf(-s);
    for (int k = 0; k <= 16; k++) {
        float lo = a0, hi = a0;
        for (int i = 0; i < k; i++) lo = nextafterf(lo, -INFINITY), hi = nextafterf(hi, INFINITY);
        if (-expf(lo) == s) return *a = lo, 0;
        if (-expf(hi) == s) return *a = hi, 0;
    }
    *a = a0;
    return 0;
}

/* A matrix whose rows or columns run over value heads in the GGUF's tiled order: a copy in the Hugging Face
 * order. Rows move whole. Columns move in blocks of one head; when a head is not a whole number of Q8_0/Q4_0
 * blocks (value heads narrower than 32, as in tiny test models), the converter permuted the fp32 row before
 * quantising it, so no byte shuffle can undo it: the rows are dequantised to F32 (exactly: q * d is an fp32
 * value) and permuted there. */
static td_status reorder_mat(binder *b, const td_gguf_layout *l, td_mat *w) {
    const td_config *c = &b->m->cfg;
    size_t hb = l->vhead_axis == 1 ? td_dtype_row_bytes(w->type, l->vhead_size) : 0;
    int widen = l->vhead_axis == 1 && (!hb || (size_t)(w->cols / l->vhead_size) * hb != w->row_bytes);
    size_t rb = widen ? (size_t)w->cols * sizeof(float) : w->row_bytes, nb = (size_t)w->rows * rb;
    uint8_t *d = td_aligned_alloc(64, (nb + 63) & ~(size_t)63);
    float *f = widen ? td_malloc((size_t)w->cols * sizeof *f) : NULL;
    if (!d || (widen && !f) || td_model_own(b->m, d)) {
        td_free(d);
        td_free(f);
        return td_fail_nomem("a reordered tensor");
    }
    const uint8_t *src = w->data;
    for (int64_t r = 0; r < w->rows; r++) {
        uint8_t *dst = d + (size_t)r * rb;
        if (l->vhead_axis == 0) {
            memcpy(dst, src + (size_t)td_gguf_vhead_src(l, c, r, 0) * rb, rb);
        } else if (widen) {
            td_row_to_f32(f, w, r);
            for (int64_t k = 0; k < w->cols; k++) ((float *)(void *)dst)[k] = f[td_gguf_vhead_src(l, c, k, 0)];
        } else {
            for (int64_t h = 0; h < w->cols / l->vhead_size; h++) {
                int64_t from = td_gguf_vhead_src(l, c, h * l->vhead_size, 0) / l->vhead_size;
                memcpy(dst + (size_t)h * hb, src + (size_t)r * w->row_bytes + (size_t)from * hb, hb);
            }
        }
    }
    td_free(f);
    if (widen) w->type = TD_DTYPE_F32, w->row_bytes = rb;
    w->data = d;
    return TD_OK;
}

static td_status bind(void *user, const td_tensor_spec *s) {
    binder *b = user;
    const char *gname = s->gguf;
    td_gguf_layout lay;
    td_gguf_layout_of(s, &b->m->cfg, &lay);
    int64_t want[3];
    int nd = 0;
    for (int d = 0; d < s->nd; d++)
        if (!(lay.squeeze && s->dims[d] == 1)) want[nd++] = s->dims[d];
    const td_gguf_tensor *t = td_gguf_tensor_find(b->g, gname);
    if (!t && (s->flags & TD_T_OPTIONAL)) return TD_OK;
    if (!t) {
        char hint[256] = "";
        long il = strncmp(gname, "blk.", 4) == 0 ? strtol(gname + 4, NULL, 10) : -1;
        if (td_model_is_hybrid(b->m) && il >= 0 && il < b->m->cfg.n_layer) /* which keys made it expected */
            snprintf(hint, sizeof hint,
                     " (text layer %ld of %d = %s.block_count - nextn_predict_layers; %s by "
                     "%s.full_attention_interval / attention.recurrent_layers)",
                     il, b->m->cfg.n_layer, b->m->cfg.arch->gguf_arch,
                     b->m->cfg.layer_kind[il] == TD_LAYER_DELTANET ? "Gated DeltaNet" : "full attention",
                     b->m->cfg.arch->gguf_arch);
        return td_fail(TD_ERR_FORMAT, "%s: missing tensor %s%s", b->g->map.path, gname, hint);
    }
    b->used[t - b->g->tensors] = 1;
    /* GGUF lists dims innermost first: HF [rows, cols] is ne {cols, rows} */
    int ok = 1;
    for (int d = 0; d < nd; d++) ok = ok && t->ne[d] == want[nd - 1 - d];
    for (int d = nd; d < 4; d++) ok = ok && t->ne[d] == 1;
    if (!ok) {
        char have[96], wants[96];
        int o = snprintf(have, sizeof have, "[");
        for (int d = t->n_dims - 1; d >= 0; d--) o += snprintf(have + o, sizeof have - (size_t)o, "%lld%s", (long long)t->ne[d], d ? ", " : "]");
        o = snprintf(wants, sizeof wants, "[");
        for (int d = 0; d < nd; d++) o += snprintf(wants + o, sizeof wants - (size_t)o, "%lld%s", (long long)want[d], d + 1 < nd ? ", " : "]");
        return td_fail(TD_ERR_FORMAT, "%s: tensor %s has shape %s but the metadata implies %s (%s)", b->g->map.path, gname,
                       have, wants, s->why);
    }
    if (t->dtype == TD_DTYPE_OTHER)
        return td_fail(TD_ERR_UNSUPPORTED, "%s: tensor %s has ggml type %d; supported: F32, F16, BF16, Q8_0, Q4_0",
                       b->g->map.path, gname, t->ggml_type);
    int64_t n = 1;
    for (int d = 0; d < s->nd; d++) n *= s->dims[d];
    b->m->n_params += n;
    if (s->mat) {
        s->mat->type = t->dtype;
        s->mat->rows = s->dims[0];
        s->mat->cols = s->dims[1];
        s->mat->row_bytes = td_dtype_row_bytes(t->dtype, s->dims[1]);
        s->mat->data = t->data;
        return lay.vhead_axis >= 0 ? reorder_mat(b, &lay, s->mat) : TD_OK;
    }
    if (td_dtype_is_block(t->dtype))
        return td_fail(TD_ERR_UNSUPPORTED, "%s: tensor %s: a quantised vector is not supported", b->g->map.path, gname);
    float *v = td_malloc((size_t)n * sizeof *v), *tmp = lay.vhead_axis >= 0 ? td_malloc((size_t)n * sizeof *tmp) : NULL;
    if (!v || (lay.vhead_axis >= 0 && !tmp) || td_model_own(b->m, v)) {
        td_free(v);
        td_free(tmp);
        return td_fail_nomem("a weight vector");
    }
    td_mat row = {t->dtype, 1, n, td_dtype_row_bytes(t->dtype, n), t->data, NULL};
    td_row_to_f32(lay.vhead_axis >= 0 ? tmp : v, &row, 0);
    if (lay.vhead_axis >= 0) { /* [Hv] or conv1d [C, K]: the outer dim's value-head part is tiled */
        int64_t per = n / s->dims[0];
        for (int64_t r = 0; r < s->dims[0]; r++)
            memcpy(v + r * per, tmp + td_gguf_vhead_src(&lay, &b->m->cfg, r, 0) * per, (size_t)per * sizeof *v);
        td_free(tmp);
    }
    for (int64_t i = 0; lay.plus_one && i < n; i++) v[i] = undo_plus_one(v[i]);
    for (int64_t i = 0; lay.neg_exp && i < n; i++)
        if (undo_neg_exp(v[i], &v[i]) != 0)
            return td_fail(TD_ERR_FORMAT, "%s: tensor %s[%lld] = %g: a decay rate -exp(A_log) must be <= 0",
                           b->g->map.path, gname, (long long)i, (double)v[i]);
    *s->vec = v;
    return TD_OK;
}

/* llama.cpp's rope_freqs.weight: the factors its converter stores for Llama 3.1's RoPE scaling, one per rotated pair
 * (the frequencies are divided by them). */
static td_status bind_rope_freqs(td_model *m, const td_gguf *g, uint8_t *used) {
    const td_gguf_tensor *t = td_gguf_tensor_find(g, "rope_freqs.weight");
    if (!t) return TD_OK;
    used[t - g->tensors] = 1;
    int64_t n = m->cfg.rotary_dim / 2;
    if (t->dtype != TD_DTYPE_F32 || t->n_dims != 1 || t->ne[0] != n)
        return td_fail(TD_ERR_FORMAT, "%s: rope_freqs.weight must be %lld F32 values (rotary dims / 2)", g->map.path,
                       (long long)n);
    float *f = td_malloc((size_t)n * sizeof *f);
    if (!f || td_model_own(m, f)) {
        td_free(f);
        return td_fail_nomem("the RoPE factors");
    }
    memcpy(f, t->data, (size_t)n * sizeof *f);
    for (int64_t i = 0; i < n; i++)
        if (!(f[i] > 0 && f[i] < 1e30f))
            return td_fail(TD_ERR_FORMAT, "%s: rope_freqs.weight[%lld] = %g is not a positive factor", g->map.path,
                           (long long)i, (double)f[i]);
    m->rope_freqs = f;
    return TD_OK;
}

/* tokenizer.ggml.* (gguf_tokenizer.c), one id per row of the embedding */
static td_status load_tokenizer(td_model *m, const td_gguf *g, td_tokenizer **out) {
    const td_gguf_kv *toks = td_gguf_find(g, "tokenizer.ggml.tokens");
    if (toks && toks->type == TD_GGUF_ARRAY && (int64_t)toks->n != m->cfg.n_vocab)
        return td_fail(TD_ERR_FORMAT, "%s: %llu tokens but token_embd.weight has %d rows", g->map.path,
                       (unsigned long long)toks->n, m->cfg.n_vocab);
    return td_gguf_tokenizer(g, 0, out);
}

static td_status load_pruned(td_model *m, const td_gguf *g) {
    const char *s;
    uint64_t l;
    td_status st = td_gguf_get_str(g, "typedecide.slot_map", 1, &s, &l);
    if (st != TD_OK) return st;
    json_t *o;
    if ((st = td_json_load_bytes(s, (size_t)l, "typedecide.slot_map", &o)) != TD_OK) return st;
    json_t *keep = json_object_get(o, "keep");
    if (!json_is_array(keep) || (int32_t)json_array_size(keep) != m->head.rows) {
        json_decref(o);
        return td_fail(TD_ERR_FORMAT, "%s: the slot map's keep list must name one token per head row (%lld)", g->map.path,
                       (long long)m->head.rows);
    }
    m->keep = td_malloc((size_t)m->head.rows * sizeof *m->keep);
    m->slot_map = td_strndup(s, (size_t)l);
    if (!m->keep || !m->slot_map) st = td_fail_nomem("the slot map");
    for (size_t i = 0; st == TD_OK && i < json_array_size(keep); i++) {
        json_int_t id = json_integer_value(json_array_get(keep, i));
        if (!json_is_integer(json_array_get(keep, i)) || id < 0 || id >= m->cfg.n_vocab)
            st = td_fail(TD_ERR_FORMAT, "%s: slot map keep[%zu] is not a token id", g->map.path, i);
        else m->keep[i] = (int32_t)id;
    }
    m->n_keep = (int32_t)m->head.rows;
    m->pruned = 1;
    json_decref(o);
    return st;
}

td_status td_model_load_gguf(td_model *m, const char *path, const td_model_params *params) {
    td_gguf *g = m->gguf; /* already open when the image is a buffer (td_model_load_buffer) */
    td_status st;
    if (!g) {
        if (!(g = td_calloc(1, sizeof *g))) return td_fail_nomem("a GGUF file");
        m->gguf = g;
        if ((st = td_gguf_open(path, g)) != TD_OK) return st;
    }
    if (g->n_tensors == 0)
        return td_fail(TD_ERR_FORMAT, "%s: no tensors: a vocabulary-only GGUF file holds a tokenizer (td_tokenizer_load_gguf, "
                       "typedecide tokenize) but no model", path);
    const char *arch;
    uint64_t al;
    if ((st = td_gguf_get_str(g, "general.architecture", 1, &arch, &al)) != TD_OK) return st;
    const td_arch_desc *desc = td_arch_of_gguf(arch, (size_t)al);
    if (!desc)
        return td_fail(TD_ERR_UNSUPPORTED, "%s: GGUF architecture \"%.*s\" is not supported here (%s)", path, (int)al,
                       arch, td_arch_gguf_names());
    const td_gguf_tensor *embd = td_gguf_tensor_find(g, "token_embd.weight"), *out = td_gguf_tensor_find(g, "output.weight");
    if (!embd || embd->n_dims != 2) return td_fail(TD_ERR_FORMAT, "%s: missing 2-D tensor token_embd.weight", path);
    int pruned = 0;
    if ((st = td_gguf_get_bool(g, "typedecide.pruned_head", 0, &pruned)) != TD_OK) return st;
    uint64_t f0 = td_alloc_failures();
    json_t *cfg = json_object();
    int32_t n_rot = 0;
    char blocks_key[96];
    snprintf(blocks_key, sizeof blocks_key, "%s.block_count", desc->gguf_arch);
    st = check_blocks(g, blocks_key);
    if (st == TD_OK) st = desc->gguf_config(g, embd->ne[1], embd->ne[0], out == NULL, cfg, &n_rot);
    char *cfg_text = st == TD_OK ? td_json_dumps_checked(cfg, JSON_COMPACT, f0) : NULL;
    json_decref(cfg);
    if (st == TD_OK && !cfg_text) st = td_fail_nomem("a config");
    if (st == TD_OK) st = td_config_parse(cfg_text, strlen(cfg_text), path, &m->cfg);
    td_free(cfg_text);
    if (st != TD_OK) return st;
    if (n_rot) m->cfg.rotary_dim = n_rot; /* exact: the factor in the config JSON only stood in for it */
    if (pruned) {
        if (!out || out->n_dims != 2) return td_fail(TD_ERR_FORMAT, "%s: a pruned head needs output.weight", path);
        m->cfg.head_rows = (int32_t)out->ne[1];
    }
    m->layers = td_calloc((size_t)m->cfg.n_layer, sizeof *m->layers);
    binder b = {m, g, td_calloc((size_t)(g->n_tensors ? g->n_tensors : 1), 1)};
    if (!m->layers || !b.used) {
        td_free(b.used);
        return td_fail_nomem("the layer table");
    }
    td_arch_set_kinds(&m->cfg, m);
    st = td_arch_tensors(&m->cfg, m, bind, &b);
    if (st == TD_OK && m->cfg.tied) m->head = m->embed;
    if (st == TD_OK) st = bind_rope_freqs(m, g, b.used);
    int skipped = 0;
    for (int64_t i = 0; i < g->n_tensors; i++) skipped += !b.used[i];
    td_free(b.used);
    if (st != TD_OK) return st;
    m->n_skipped = skipped;
    if (skipped) {
        char msg[128];
        snprintf(msg, sizeof msg, "skipped %d tensors of %s not used by the text model", skipped, path);
        log_msg(params, 0, msg);
    }
    if (pruned && (st = load_pruned(m, g)) != TD_OK) return st;
    if (params->load_tokenizer && td_gguf_find(g, "tokenizer.ggml.model") && (st = load_tokenizer(m, g, &m->tok)) != TD_OK)
        return st;
    if (td_gguf_find(g, "tokenizer.chat_template")) {
        const char *t;
        uint64_t l;
        if ((st = td_gguf_get_str(g, "tokenizer.chat_template", 1, &t, &l)) != TD_OK) return st;
        m->chat_template = td_strndup(t, (size_t)l);
        m->chat_template_source = td_strdup(path);
        if (!m->chat_template || !m->chat_template_source) return td_fail_nomem("the chat template");
    }
    const td_gguf_kv *stops = td_gguf_find(g, "typedecide.stop_ids");
    if (stops && stops->type == TD_GGUF_ARRAY && stops->elem_type != TD_GGUF_STRING) {
        for (uint64_t i = 0; i < stops->n && st == TD_OK; i++) st = td_model_add_stop(m, td_gguf_array_int(stops, i), path);
    } else {
        int64_t eos = -1, eot = -1;
        if ((st = td_gguf_get_int(g, "tokenizer.ggml.eos_token_id", 0, &eos)) == TD_OK &&
            (st = td_gguf_get_int(g, "tokenizer.ggml.eot_token_id", 0, &eot)) == TD_OK) {
            if (eos >= 0) st = td_model_add_stop(m, eos, path);
            if (st == TD_OK && eot >= 0) st = td_model_add_stop(m, eot, path);
        }
    }
    return st;
}
