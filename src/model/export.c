/* GGUF export: llama.cpp's qwen3 / qwen35 metadata and tensor names (and, for qwen35, the converter's tensor
 * transforms), the tokenizer as tokenizer.ggml.* arrays, weights converted to the requested tier, and optionally a
 * head pruned to the option letters. */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/quant.h"
#include "model/arch.h"
#include "model/arch_gguf.h"
#include "model/gguf.h"
#include "model/gguf_names.h"
#include "model/model.h"
#include "tokenizer/letters.h"
#include "tokenizer/vocab.h"
#include "util/alloc.h"
#include "util/error.h"
#include "util/fileio.h"
#include "util/half.h"

td_export_params td_export_default_params(void) {
    td_export_params p;
    memset(&p, 0, sizeof p);
    p.quant = "f16";
    return p;
}

static int parse_tier(const char *s, td_dtype *t) {
    static const struct {
        const char *name;
        td_dtype t;
    } tiers[] = {{"f32", TD_DTYPE_F32}, {"f16", TD_DTYPE_F16}, {"bf16", TD_DTYPE_BF16}, {"q8_0", TD_DTYPE_Q8_0}, {"q4_0", TD_DTYPE_Q4_0}};
    for (size_t i = 0; s && i < sizeof tiers / sizeof tiers[0]; i++)
        if (strcmp(s, tiers[i].name) == 0) return *t = tiers[i].t, 0;
    return -1;
}

static int ggml_of(td_dtype t) {
    switch (t) {
    case TD_DTYPE_F32: return TD_GGML_F32;
    case TD_DTYPE_F16: return TD_GGML_F16;
    case TD_DTYPE_BF16: return TD_GGML_BF16;
    case TD_DTYPE_Q8_0: return TD_GGML_Q8_0;
    default: return TD_GGML_Q4_0;
    }
}

/* llama.cpp's general.file_type codes (LLAMA_FTYPE_*). */
static uint32_t file_type_of(td_dtype t) {
    switch (t) {
    case TD_DTYPE_F32: return 0;
    case TD_DTYPE_F16: return 1;
    case TD_DTYPE_Q4_0: return 2;
    case TD_DTYPE_Q8_0: return 7;
    default: return 32; /* BF16 */
    }
}

/* Converts rows of w (listed in `rows`, or all when NULL) to a new buffer of type t. With cl (a layout whose
 * value heads run along the columns), each row's value heads are first put in the GGUF order, in fp32, so that
 * the quantiser sees the row as llama.cpp's converter does. */
static void *convert_rows(const td_mat *w, const int32_t *rows, int64_t n_rows, td_dtype t, const td_gguf_layout *cl,
                          const td_config *c, uint64_t *nbytes) {
    size_t rb = td_dtype_row_bytes(t, w->cols);
    uint8_t *out = td_malloc((size_t)n_rows * rb + 1);
    float *f = td_malloc((size_t)w->cols * sizeof *f), *g = cl ? td_malloc((size_t)w->cols * sizeof *g) : NULL;
    if (!out || !f || (cl && !g)) {
        td_free(out);
        td_free(f);
        td_free(g);
        return NULL;
    }
    for (int64_t r = 0; r < n_rows; r++) {
        td_row_to_f32(f, w, rows ? rows[r] : r);
        if (cl) {
            for (int64_t k = 0; k < w->cols; k++) g[k] = f[td_gguf_vhead_src(cl, c, k, 1)];
            memcpy(f, g, (size_t)w->cols * sizeof *f);
        }
        uint8_t *dst = out + (size_t)r * rb;
        switch (t) {
        case TD_DTYPE_F32: memcpy(dst, f, rb); break;
        case TD_DTYPE_F16:
            for (int64_t k = 0; k < w->cols; k++) ((uint16_t *)(void *)dst)[k] = td_f32_to_f16(f[k]);
            break;
        case TD_DTYPE_BF16:
            for (int64_t k = 0; k < w->cols; k++) ((uint16_t *)(void *)dst)[k] = td_f32_to_bf16(f[k]);
            break;
        case TD_DTYPE_Q8_0: td_quantize_q8_0(f, (td_block_q8_0 *)(void *)dst, w->cols); break;
        default: td_quantize_q4_0(f, (td_block_q4_0 *)(void *)dst, w->cols); break;
        }
    }
    td_free(f);
    td_free(g);
    *nbytes = (uint64_t)n_rows * rb;
    return out;
}

typedef struct exporter {
    const td_model *m;
    td_gguf_writer *w;
    td_dtype quant, embed_quant;
    int pruned;
    const int32_t *keep;
    int32_t n_keep;
    void *embed_data, *head_data; /* kept for the checks before writing */
    uint64_t embed_bytes;
} exporter;

static td_status add_spec(void *user, const td_tensor_spec *s) {
    exporter *x = user;
    const td_config *c = &x->m->cfg;
    const char *gname = s->gguf;
    td_gguf_layout lay; /* what the converter does to this tensor (gguf_names.h) */
    td_gguf_layout_of(s, c, &lay);
    int64_t ne[3];
    int nd = 0;
    for (int d = s->nd - 1; d >= 0; d--)
        if (!(lay.squeeze && s->dims[d] == 1)) ne[nd++] = s->dims[d];
    if (!s->mat) { /* norms and other vectors stay F32, as llama.cpp's converter writes them */
        int64_t n = 1;
        for (int d = 0; d < s->nd; d++) n *= s->dims[d];
        float *v = td_malloc((size_t)n * sizeof *v);
        if (!v) return td_fail_nomem("a tensor");
        int64_t per = n / s->dims[0]; /* [Hv], or conv1d [C, K]: rows of the outer dim */
        for (int64_t r = 0; r < s->dims[0]; r++)
            memcpy(v + r * per, *s->vec + td_gguf_vhead_src(&lay, c, r, 1) * per, (size_t)per * sizeof *v);
        /* in fp32, as the converter computes them (from bf16 too: it widens first); the loader undoes both exactly */
        for (int64_t i = 0; lay.plus_one && i < n; i++) v[i] = 1.0f + v[i];
        for (int64_t i = 0; lay.neg_exp && i < n; i++) v[i] = -expf(v[i]);
        return td_gguf_add_tensor(x->w, gname, TD_GGML_F32, nd, ne, v, (uint64_t)n * sizeof *v);
    }
    const td_mat *w = s->mat;
    int is_embed = w == &x->m->embed, is_head = strcmp(s->name, "lm_head.weight") == 0;
    td_dtype t = is_embed ? x->embed_quant : x->quant;
    if (is_head && x->pruned && c->tied) t = x->embed_quant; /* the unpruned model's head is the embedding */
    if (td_dtype_is_block(t) && w->cols % 32)
        return td_fail(TD_ERR_UNSUPPORTED, "tensor %s: rows of %lld values cannot be stored as %s (blocks of 32)", s->name,
                       (long long)w->cols, td_dtype_name(t));
    uint64_t nb;
    const td_mat *src = is_head && x->pruned ? &x->m->head : w;
    int64_t n_rows = is_head && x->pruned ? x->n_keep : w->rows;
    const int32_t *rows = is_head && x->pruned ? x->keep : NULL;
    int32_t *perm = NULL;
    if (lay.vhead_axis == 0) { /* value-head rows in the GGUF's tiled order */
        if (!(perm = td_malloc((size_t)w->rows * sizeof *perm))) return td_fail_nomem("a row order");
        for (int64_t r = 0; r < w->rows; r++) perm[r] = (int32_t)td_gguf_vhead_src(&lay, c, r, 1);
        rows = perm;
    }
    void *data = convert_rows(src, rows, n_rows, t, lay.vhead_axis == 1 ? &lay : NULL, c, &nb);
    td_free(perm);
    if (!data) return td_fail_nomem("a converted tensor");
    if (is_head && x->pruned) ne[1] = x->n_keep;
    if (is_embed) x->embed_data = data, x->embed_bytes = nb;
    if (is_head) x->head_data = data;
    return td_gguf_add_tensor(x->w, gname, ggml_of(t), nd, ne, data, nb);
}

/* rope_freqs.weight, llama.cpp's form of Llama 3.1's RoPE scaling: per rotated pair the factor its frequency is
 * divided by, computed as the converter does (conversion/llama.py, generate_extra_tensors: fp32 tensors, Python
 * scalars rounded to them); a GGUF source's own factors as they are. Nothing for other RoPE. */
static td_status add_rope_freqs(td_gguf_writer *w, const td_model *m) {
    const td_config *c = &m->cfg;
    const td_rope_params *p = &c->rope[0];
    if (!m->rope_freqs && p->type != TD_ROPE_LLAMA3) return TD_OK;
    int64_t n = c->rotary_dim / 2;
    float *f = td_malloc((size_t)n * sizeof *f);
    if (!f) return td_fail_nomem("the RoPE factors");
    if (m->rope_freqs) memcpy(f, m->rope_freqs, (size_t)n * sizeof *f);
    else {
        td_rope_inv_freq(f, c->rotary_dim, p->theta);
        const float low_wl = (float)(p->original_ctx / p->low_freq_factor);
        const float high_wl = (float)(p->original_ctx / p->high_freq_factor), factor = (float)p->factor;
        for (int64_t i = 0; i < n; i++) {
            float wavelen = (float)(2 * M_PI) / f[i];
            if (wavelen < high_wl) f[i] = 1.0f;
            else if (wavelen > low_wl) f[i] = factor;
            else {
                float smooth = ((float)p->original_ctx / wavelen - (float)p->low_freq_factor) /
                               (float)(p->high_freq_factor - p->low_freq_factor);
                f[i] = 1.0f / ((1.0f - smooth) / factor + smooth);
            }
        }
    }
    int64_t ne[1] = {n};
    return td_gguf_add_tensor(w, "rope_freqs.weight", TD_GGML_F32, 1, ne, f, (uint64_t)n * sizeof *f);
}

/* tokenizer.ggml.* from the loaded tokenizer: byte-level strings, types, merges, the pre-tokenizer's name; a
 * SentencePiece-style one (Gemma) as llama.cpp's "gemma4" model: its pieces, BYTE / UNKNOWN types, merges, scores
 * that rank them (td_spm_scores) and no space prefix. */
static td_status add_tokenizer(td_gguf_writer *w, const td_model *m, const char *pre, int32_t bos) {
    const td_tokenizer *t = m->tok;
    int32_t V = m->cfg.n_vocab, spm = td_vocab_spm(t);
    const char **s = td_calloc((size_t)V, sizeof *s);
    size_t *l = td_calloc((size_t)V, sizeof *l);
    int32_t *types = td_calloc((size_t)V, sizeof *types);
    char *pads = td_malloc((size_t)V * 16);
    td_status st = s && l && types && pads ? TD_OK : td_fail_nomem("the vocabulary");
    for (int32_t id = 0; st == TD_OK && id < V; id++) {
        td_piece_kind kind;
        if ((s[id] = td_vocab_piece(t, id, &l[id], &kind))) {
            types[id] = kind == TD_PIECE_SPECIAL ? 3 : kind == TD_PIECE_ADDED ? 4 : 1; /* CONTROL, USER_DEFINED, NORMAL */
            if (spm && id == td_vocab_unk(t)) types[id] = 2; /* UNKNOWN */
            else if (spm && kind == TD_PIECE_NORMAL && l[id] == 6 && memcmp(s[id], "<0x", 3) == 0 && s[id][5] == '>')
                types[id] = 6; /* BYTE: <0xXX> */
        } else { /* rows of the embedding past the tokenizer's ids */
            char *p = pads + (size_t)id * 16;
            l[id] = (size_t)snprintf(p, 16, "[PAD%d]", id);
            s[id] = p;
            types[id] = 5; /* UNUSED */
        }
    }
    int64_t nm = td_vocab_n_merges(t);
    char **ms = td_calloc((size_t)(nm ? nm : 1), sizeof *ms);
    size_t *ml = td_calloc((size_t)(nm ? nm : 1), sizeof *ml);
    if (st == TD_OK && (!ms || !ml)) st = td_fail_nomem("the merges");
    for (int64_t i = 0; st == TD_OK && i < nm; i++) {
        int32_t a, b;
        td_piece_kind ka, kb;
        td_vocab_merge(t, i, &a, &b);
        size_t la, lb;
        const char *sa = td_vocab_piece(t, a, &la, &ka), *sb = td_vocab_piece(t, b, &lb, &kb);
        if (!(ms[i] = td_malloc(la + lb + 2))) {
            st = td_fail_nomem("a merge");
            break;
        }
        memcpy(ms[i], sa, la);
        ms[i][la] = ' ';
        memcpy(ms[i] + la + 1, sb, lb);
        ml[i] = la + lb + 1;
    }
    if (st == TD_OK) st = spm ? td_gguf_add_str(w, "tokenizer.ggml.model", "gemma4", 6)
                              : td_gguf_add_str(w, "tokenizer.ggml.model", "gpt2", 4);
    if (st == TD_OK && !spm) st = td_gguf_add_str(w, "tokenizer.ggml.pre", pre, strlen(pre));
    if (st == TD_OK) st = td_gguf_add_str_array(w, "tokenizer.ggml.tokens", s, l, (uint64_t)V);
    if (st == TD_OK && spm) {
        float *scores = NULL;
        st = td_spm_scores(t, &scores);
        if (st == TD_OK && td_tokenizer_n_tokens(t) < V) { /* [PADn] rows: none here, but the array is one per row */
            float *grown = td_realloc(scores, (size_t)V * sizeof *grown);
            if (!grown) st = td_fail_nomem("the scores");
            else
                for (int32_t id = td_tokenizer_n_tokens(t); id < V; id++) (scores = grown)[id] = -1e9f;
        }
        if (st == TD_OK) st = td_gguf_add_f32_array(w, "tokenizer.ggml.scores", scores, (uint64_t)V);
        td_free(scores);
    }
    if (st == TD_OK) st = td_gguf_add_i32_array(w, "tokenizer.ggml.token_type", types, (uint64_t)V);
    if (st == TD_OK) st = td_gguf_add_str_array(w, "tokenizer.ggml.merges", (const char *const *)ms, ml, (uint64_t)nm);
    if (st == TD_OK && spm) st = td_gguf_add_bool(w, "tokenizer.ggml.add_space_prefix", 0);
    if (st == TD_OK && spm && td_vocab_unk(t) >= 0)
        st = td_gguf_add_u32(w, "tokenizer.ggml.unknown_token_id", (uint32_t)td_vocab_unk(t));
    /* special ids as llama.cpp's converter writes them for Qwen: bos (see bos_id), pad <|endoftext|> (Gemma: <pad>),
     * eos the first stop id */
    int32_t eot = td_token_lookup(t, spm ? "<pad>" : "<|endoftext|>");
    if (st == TD_OK && bos >= 0) st = td_gguf_add_u32(w, "tokenizer.ggml.bos_token_id", (uint32_t)bos);
    if (st == TD_OK && m->n_stop) st = td_gguf_add_u32(w, "tokenizer.ggml.eos_token_id", (uint32_t)m->stop_ids[0]);
    if (st == TD_OK && eot >= 0) st = td_gguf_add_u32(w, "tokenizer.ggml.padding_token_id", (uint32_t)eot);
    if (st == TD_OK) st = td_gguf_add_bool(w, "tokenizer.ggml.add_bos_token", td_tokenizer_bos(t) >= 0);
    if (st == TD_OK && m->n_stop) st = td_gguf_add_i32_array(w, "typedecide.stop_ids", m->stop_ids, (uint64_t)m->n_stop);
    for (int64_t i = 0; ms && i < nm; i++) td_free(ms[i]);
    td_free(ms), td_free(ml), td_free(s), td_free(l), td_free(types), td_free(pads);
    return st;
}

/* tokenizer.ggml.bos_token_id: the architecture's fixed one (Qwen3: <|endoftext|>, which is what the converter
 * finds for Qwen3 checkpoints), else the converter's rule: tokenizer_config.json's bos_token (matched against the
 * added tokens), else config.json's bos_token_id (top level, then text_config); Qwen3.5 checkpoints name no bos
 * (bos_token null, bos_token_id null), and the converter then writes none. -1: none. */
static int32_t bos_id(const td_model *m) {
    if (td_tokenizer_bos(m->tok) >= 0) return td_tokenizer_bos(m->tok); /* the one it puts before a text */
    if (m->cfg.arch->gguf_bos) return td_token_lookup(m->tok, m->cfg.arch->gguf_bos);
    if (m->gguf) {
        int64_t id = -1;
        return td_gguf_get_int(m->gguf, "tokenizer.ggml.bos_token_id", 0, &id) == TD_OK && id >= 0 && id < m->cfg.n_vocab
                   ? (int32_t)id : -1;
    }
    int32_t id = -1;
    json_t *tc = td_arch_dir_json(m->path, "tokenizer_config.json"), *cfg = td_arch_dir_json(m->path, "config.json");
    json_t *b = json_object_get(tc, "bos_token");
    const char *s = json_is_string(b) ? json_string_value(b) : json_string_value(json_object_get(b, "content"));
    if (s) id = td_token_lookup(m->tok, s);
    json_t *ci = json_object_get(cfg, "bos_token_id");
    if (!json_is_integer(ci)) ci = json_object_get(td_arch_text_config(cfg), "bos_token_id");
    if (id < 0 && json_is_integer(ci) && json_integer_value(ci) >= 0 && json_integer_value(ci) < m->cfg.n_vocab)
        id = (int32_t)json_integer_value(ci);
    json_decref(tc);
    json_decref(cfg);
    return id;
}

/* The chat template: a Hugging Face directory's tokenizer_config.json, or a GGUF source's own (new string or NULL). */
static char *chat_template(const td_model *m) {
    const char *t;
    uint64_t l;
    if (m->gguf)
        return td_gguf_find(m->gguf, "tokenizer.chat_template") &&
                       td_gguf_get_str(m->gguf, "tokenizer.chat_template", 1, &t, &l) == TD_OK
                   ? td_strndup(t, (size_t)l)
                   : NULL;
    json_t *o = td_arch_dir_json(m->path, "tokenizer_config.json");
    json_t *ct = json_object_get(o, "chat_template");
    char *s = json_is_string(ct) ? td_strndup(json_string_value(ct), json_string_length(ct)) : NULL;
    json_decref(o);
    return s;
}

td_status td_model_export_gguf(const td_model *m, const td_export_params *params, const char *path, char **slot_map) {
    if (!m || !path) return td_fail(TD_ERR_INVALID_ARG, "td_model_export_gguf: NULL argument");
    td_export_params p = params ? *params : td_export_default_params();
    if (slot_map) *slot_map = NULL;
    uint64_t f0 = td_alloc_failures(); /* a refusal anywhere means an incomplete file: it is not written */
    exporter x;
    memset(&x, 0, sizeof x);
    x.m = m;
    if (parse_tier(p.quant ? p.quant : "f16", &x.quant))
        return td_fail(TD_ERR_INVALID_ARG, "unknown quantisation \"%s\" (f32, f16, bf16, q8_0, q4_0)", p.quant);
    x.embed_quant = x.quant;
    if (p.embed_quant && parse_tier(p.embed_quant, &x.embed_quant))
        return td_fail(TD_ERR_INVALID_ARG, "unknown embedding quantisation \"%s\"", p.embed_quant);
    if (!m->cfg.arch->gguf_keys)
        return td_fail(TD_ERR_UNSUPPORTED, "%s: GGUF export does not support %s (it supports %s)", m->path,
                       m->cfg.model_type, td_arch_gguf_names());
    if (!m->tok) return td_fail(TD_ERR_STATE, "%s: export needs the tokenizer (tokenizer.json)", m->path);
    if (m->pruned) return td_fail(TD_ERR_STATE, "%s: the head is already pruned", m->path);
    const td_gguf_pre *pt =
        td_gguf_pre_of(td_vocab_split_regex(m->tok), td_vocab_nfc(m->tok), td_vocab_ignore_merges(m->tok));
    if (!pt && !td_vocab_spm(m->tok)) /* SentencePiece-style BPE has no pre-tokenizer name ("gemma4") */
        return td_fail(TD_ERR_UNSUPPORTED, "%s: the tokenizer's pre-tokenizer is not one llama.cpp knows (%s)", m->path,
                       td_gguf_pre_names());
    const char *pre = pt ? pt->name : "";

    /* pruning: the letters' tokens, probed exactly as the readout does */
    int32_t keep[TD_DECIDE_MAX_OPTIONS];
    const char *sep = NULL;
    char *smap = NULL;
    if (p.prune_letters) {
        int32_t k = (int32_t)strlen(p.prune_letters);
        if (k < 1 || k > TD_DECIDE_MAX_OPTIONS)
            return td_fail(TD_ERR_INVALID_ARG, "--prune-head: give 1 to %d letters", TD_DECIDE_MAX_OPTIONS);
        td_status st = td_probe_letters(m->tok, p.prune_letters, k, keep, &sep);
        if (st != TD_OK) return st;
        x.pruned = 1;
        x.keep = keep;
        x.n_keep = k;
        if (!(smap = td_slot_map_json(m->path, sep, p.prune_letters, keep, k))) return td_fail_nomem("the slot map");
    }

    td_status st = td_gguf_writer_new(&x.w);
    const td_config *c = &m->cfg;
    char name[256];
    const char *base = strrchr(m->path, '/');
    snprintf(name, sizeof name, "%s", p.name ? p.name : base && base[1] ? base + 1 : m->path);
    const char *arch = c->arch->gguf_arch;
    if (st == TD_OK) st = td_gguf_add_str(x.w, "general.architecture", arch, strlen(arch));
    if (st == TD_OK) st = td_gguf_add_str(x.w, "general.type", "model", 5);
    if (st == TD_OK) st = td_gguf_add_str(x.w, "general.name", name, strlen(name));
    if (st == TD_OK) st = c->arch->gguf_keys(x.w, m, file_type_of(x.quant));
    if (st == TD_OK) st = add_tokenizer(x.w, m, pre, bos_id(m));
    char *tmpl = chat_template(m);
    if (st == TD_OK && tmpl) st = td_gguf_add_str(x.w, "tokenizer.chat_template", tmpl, strlen(tmpl));
    td_free(tmpl);
    if (st == TD_OK && x.pruned) {
        st = td_gguf_add_bool(x.w, "typedecide.pruned_head", 1);
        if (st == TD_OK) st = td_gguf_add_bool(x.w, "typedecide.can_generate", 0);
        if (st == TD_OK) st = td_gguf_add_str(x.w, "typedecide.slot_map", smap, strlen(smap));
    }
    /* tensors: Llama 3.1's RoPE factors first, as the converter yields them; then the architecture's, in its order (a
     * pruned head is untied: output.weight holds the K letter rows) */
    if (st == TD_OK) st = add_rope_freqs(x.w, m);
    if (st == TD_OK) {
        td_config cfg = m->cfg;
        if (x.pruned) cfg.tied = 0, cfg.head_rows = x.n_keep;
        st = td_arch_tensors(&cfg, (td_model *)m, add_spec, &x);
    }
    /* checks before anything is written */
    if (st == TD_OK && x.pruned) {
        td_dtype ht = m->cfg.tied ? x.embed_quant : x.quant;
        size_t rb = td_dtype_row_bytes(ht, c->n_embd);
        uint64_t nb;
        void *again = convert_rows(&m->head, keep, x.n_keep, ht, NULL, c, &nb); /* the rows the unpruned model would have */
        if (!again) st = td_fail_nomem("a check");
        else if (!x.head_data || x.head_data == x.embed_data || memcmp(again, x.head_data, (size_t)x.n_keep * rb) != 0)
            st = td_fail(TD_ERR_STATE, "pruned head rows differ from the full head's rows (refusing to write)");
        else if (m->cfg.tied && x.embed_quant == ht &&
                 memcmp((const uint8_t *)x.embed_data + (size_t)keep[0] * rb, x.head_data, rb) != 0)
            st = td_fail(TD_ERR_STATE, "pruned head row 0 differs from its embedding row (refusing to write)");
        else if (x.embed_bytes != (uint64_t)c->n_vocab * td_dtype_row_bytes(x.embed_quant, c->n_embd))
            st = td_fail(TD_ERR_STATE, "the input embedding lost rows (refusing to write)");
        td_free(again);
        json_t *o = st == TD_OK ? json_loads(smap, 0, NULL) : NULL; /* both directions of the slot map agree */
        for (int32_t i = 0; o && i < x.n_keep && st == TD_OK; i++) {
            char key[16];
            snprintf(key, sizeof key, "%d", keep[i]);
            if (json_integer_value(json_array_get(json_object_get(o, "keep"), (size_t)i)) != keep[i] ||
                json_integer_value(json_object_get(json_object_get(o, "token_to_row"), key)) != i)
                st = td_fail(TD_ERR_STATE, "slot map directions disagree at row %d (refusing to write)", i);
        }
        json_decref(o);
    }
    if (st == TD_OK && td_alloc_failures() != f0) st = td_fail(TD_ERR_NOMEM, "%s: out of memory while exporting", path);
    if (st == TD_OK) st = td_gguf_write(x.w, path);
    td_gguf_writer_free(x.w);
    if (st == TD_OK && slot_map) *slot_map = smap;
    else td_free(smap);
    return st;
}
