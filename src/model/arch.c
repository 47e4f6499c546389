/* The architectures this build reads, and the one walk over a description's tensors that loading, export, synth,
 * adapters and inspection share. */
#include "model/arch.h"

#include <stdio.h>
#include <string.h>

#include "util/error.h"

extern const td_arch_desc td_arch_qwen3, td_arch_qwen35, td_arch_llama, td_arch_qwen2, td_arch_gemma3;

static const td_arch_desc *const archs[] = {&td_arch_qwen3, &td_arch_qwen35, &td_arch_llama, &td_arch_qwen2,
                                            &td_arch_gemma3};
#define N_ARCHS (sizeof archs / sizeof archs[0])

const td_arch_desc *td_arch_of_model_type(const char *model_type) {
    for (size_t i = 0; model_type && i < N_ARCHS; i++)
        for (const char *const *t = archs[i]->model_types; *t; t++)
            if (strcmp(*t, model_type) == 0) return archs[i];
    return NULL;
}

const td_arch_desc *td_arch_of_gguf(const char *arch, size_t len) {
    for (size_t i = 0; i < N_ARCHS; i++)
        if (strlen(archs[i]->gguf_arch) == len && memcmp(archs[i]->gguf_arch, arch, len) == 0) return archs[i];
    return NULL;
}

/* "a, b, c" of every name the archs give (model types or GGUF names), made once. */
static const char *list_of(int gguf, char *buf, size_t n) {
    if (buf[0]) return buf;
    size_t o = 0;
    for (size_t i = 0; i < N_ARCHS; i++) {
        if (gguf) o += (size_t)snprintf(buf + o, n - o, "%s%s", o ? ", " : "", archs[i]->gguf_arch);
        else
            for (const char *const *t = archs[i]->model_types; *t && o < n; t++)
                o += (size_t)snprintf(buf + o, n - o, "%s%s", o ? ", " : "", *t);
    }
    return buf;
}
static char model_type_list[256], gguf_list[256];
const char *td_arch_model_types(void) { return list_of(0, model_type_list, sizeof model_type_list); }
const char *td_arch_gguf_names(void) { return list_of(1, gguf_list, sizeof gguf_list); }

int64_t td_arch_dim(const td_config *c, td_dim d) {
    int64_t hd = c->head_dim, key_dim = (int64_t)c->lin_n_k_heads * c->lin_k_dim;
    int64_t value_dim = (int64_t)c->lin_n_v_heads * c->lin_v_dim;
    switch (d) {
    case TD_DIM_VOCAB: return c->n_vocab;
    case TD_DIM_EMBD: return c->n_embd;
    case TD_DIM_FF: return c->n_ff;
    case TD_DIM_HEAD: return hd;
    case TD_DIM_Q_ROWS: return (int64_t)c->n_head * hd * (c->attn_output_gate ? 2 : 1);
    case TD_DIM_KV_ROWS: return (int64_t)c->n_head_kv * hd;
    case TD_DIM_ATT: return (int64_t)c->n_head * hd;
    case TD_DIM_DN_CONV: return 2 * key_dim + value_dim;
    case TD_DIM_DN_VALUE: return value_dim;
    case TD_DIM_DN_HV: return c->lin_n_v_heads;
    case TD_DIM_DN_DV: return c->lin_v_dim;
    case TD_DIM_DN_KERNEL: return c->lin_conv_kernel;
    case TD_DIM_ONE: return 1;
    default: return 0;
    }
}

void td_arch_dim_why(const td_config *c, td_dim d, char *buf, size_t n) {
    switch (d) {
    case TD_DIM_VOCAB: snprintf(buf, n, "vocab_size %d", c->n_vocab); break;
    case TD_DIM_EMBD: snprintf(buf, n, "hidden_size %d", c->n_embd); break;
    case TD_DIM_FF: snprintf(buf, n, "intermediate_size %d", c->n_ff); break;
    case TD_DIM_HEAD: snprintf(buf, n, "head_dim %d", c->head_dim); break;
    case TD_DIM_Q_ROWS:
        snprintf(buf, n, "num_attention_heads %d x head_dim %d%s", c->n_head, c->head_dim,
                 c->attn_output_gate ? " x 2 (query and gate)" : "");
        break;
    case TD_DIM_KV_ROWS: snprintf(buf, n, "num_key_value_heads %d x head_dim %d", c->n_head_kv, c->head_dim); break;
    case TD_DIM_ATT: snprintf(buf, n, "num_attention_heads %d x head_dim %d", c->n_head, c->head_dim); break;
    case TD_DIM_DN_CONV:
        snprintf(buf, n,
                 "2 x linear_num_key_heads %d x linear_key_head_dim %d + linear_num_value_heads %d x "
                 "linear_value_head_dim %d",
                 c->lin_n_k_heads, c->lin_k_dim, c->lin_n_v_heads, c->lin_v_dim);
        break;
    case TD_DIM_DN_VALUE:
        snprintf(buf, n, "linear_num_value_heads %d x linear_value_head_dim %d", c->lin_n_v_heads, c->lin_v_dim);
        break;
    case TD_DIM_DN_HV: snprintf(buf, n, "linear_num_value_heads %d", c->lin_n_v_heads); break;
    case TD_DIM_DN_DV: snprintf(buf, n, "linear_value_head_dim %d", c->lin_v_dim); break;
    case TD_DIM_DN_KERNEL: snprintf(buf, n, "linear_conv_kernel_dim %d", c->lin_conv_kernel); break;
    default: snprintf(buf, n, "1"); break;
    }
}

void td_arch_set_kinds(const td_config *cfg, td_model *m) {
    for (int il = 0; il < cfg->n_layer; il++) m->layers[il].kind = (td_layer_kind)cfg->layer_kind[il];
}

const td_layer_steps *td_arch_layer_steps(const td_config *cfg, int il) {
    return &cfg->arch->layers[cfg->layer_kind[il]];
}

/* One spec: names, dims and where it goes. */
static td_status emit(const td_config *c, td_model *m, const td_tensor_def *t, int il, td_spec_fn fn, void *user) {
    td_tensor_spec s;
    memset(&s, 0, sizeof s);
    const char *px = c->tensor_prefix;
    if (il >= 0) {
        snprintf(s.name, sizeof s.name, "%slayers.%d.%s", px, il, t->hf);
        snprintf(s.gguf, sizeof s.gguf, "blk.%d.%s", il, t->gguf);
    } else {
        snprintf(s.name, sizeof s.name, "%s%s", t->slot == TD_T_HEAD ? "" : px, t->hf);
        snprintf(s.gguf, sizeof s.gguf, "%s", t->gguf);
    }
    size_t o = 0;
    for (int d = 0; d < 3 && t->dims[d] != TD_DIM_NONE; d++) {
        s.dims[s.nd++] = td_arch_dim(c, (td_dim)t->dims[d]);
        if (t->dims[d] == TD_DIM_ONE) continue;
        char w[160];
        td_arch_dim_why(c, (td_dim)t->dims[d], w, sizeof w);
        o += (size_t)snprintf(s.why + o, o < sizeof s.why ? sizeof s.why - o : 0, "%s%s", o ? ", " : "", w);
    }
    if (t->slot == TD_T_HEAD && c->head_rows) {
        s.dims[0] = c->head_rows;
        snprintf(s.why, sizeof s.why, "a head pruned to %d letters, hidden_size %d", c->head_rows, c->n_embd);
    } else if (t->slot == TD_T_HEAD) {
        snprintf(s.why, sizeof s.why, "vocab_size %d, hidden_size %d (tie_word_embeddings is false or absent)",
                 c->n_vocab, c->n_embd);
    }
    s.flags = t->flags;
    s.layer = il;
    s.zero_centred = (t->flags & TD_T_NORM) && c->zero_centred_norms && !(t->flags & TD_T_PLAIN_NORM);
    if (m) {
        if (t->slot == TD_T_EMBED) s.mat = &m->embed;
        else if (t->slot == TD_T_HEAD) s.mat = &m->head;
        else if (t->slot == TD_T_FINAL_NORM) s.vec = &m->final_norm;
        else if (t->flags & TD_T_VECTOR) s.vec = &m->layers[il].v[t->slot];
        else s.mat = &m->layers[il].w[t->slot];
    }
    return fn(user, &s);
}

#define TRY(x)                                                                                                   \
    do {                                                                                                         \
        td_status st_ = (x);                                                                                     \
        if (st_ != TD_OK) return st_;                                                                            \
    } while (0)

td_status td_arch_tensors(const td_config *c, td_model *m, td_spec_fn fn, void *user) {
    const td_arch_desc *a = c->arch;
    const td_tensor_def *t = a->tensors, *end = a->tensors + a->n_tensors;
    for (; t < end && t->kinds == 0 && t->slot != TD_T_FINAL_NORM && t->slot != TD_T_HEAD; t++) /* the embedding */
        TRY(emit(c, m, t, -1, fn, user));
    const td_tensor_def *layer0 = t;
    for (int il = 0; il < c->n_layer; il++) {
        for (t = layer0; t < end && t->kinds != 0; t++)
            if (t->kinds & (1u << c->layer_kind[il])) TRY(emit(c, m, t, il, fn, user));
    }
    for (; t < end; t++) /* the final norm and the head */
        if (t->slot != TD_T_HEAD || !c->tied) TRY(emit(c, m, t, -1, fn, user));
    return TD_OK;
}

static td_status count_params(void *user, const td_tensor_spec *s) {
    int64_t n = 1;
    for (int d = 0; d < s->nd; d++) n *= s->dims[d];
    *(int64_t *)user += n;
    return TD_OK;
}

td_status td_config_shape(const char *config_json, size_t len, const char *name, int64_t *n_params, int32_t *n_vocab,
                          int32_t *n_embd, int *tied) {
    if (!config_json || !n_params || !n_vocab || !n_embd || !tied)
        return td_fail(TD_ERR_INVALID_ARG, "td_config_shape: NULL argument");
    td_config c;
    td_status st = td_config_parse(config_json, len, name ? name : "config.json", &c);
    if (st != TD_OK) return st;
    *n_params = 0;
    if ((st = td_arch_tensors(&c, NULL, count_params, n_params)) != TD_OK) return st;
    *n_vocab = c.n_vocab;
    *n_embd = c.n_embd;
    *tied = c.tied;
    return TD_OK;
}
