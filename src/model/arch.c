#include "model/arch.h"

#include <stdio.h>
#include <string.h>

#include "util/error.h"

typedef struct emitter {
    const td_config *c;
    td_spec_fn fn;
    void *user;
    td_tensor_spec s;
} emitter;

static td_status emit(emitter *e, td_mat *mat, float **vec, int is_norm, int nd, int64_t d0, int64_t d1, int64_t d2,
                      const char *why) {
    e->s.nd = nd;
    e->s.dims[0] = d0;
    e->s.dims[1] = d1;
    e->s.dims[2] = d2;
    snprintf(e->s.why, sizeof e->s.why, "%s", why);
    e->s.is_norm = is_norm;
    e->s.mat = mat;
    e->s.vec = vec;
    return e->fn(e->user, &e->s);
}

#define NAME(...) snprintf(e->s.name, sizeof e->s.name, __VA_ARGS__)
#define TRY(x)                                                                                                   \
    do {                                                                                                         \
        td_status st_ = (x);                                                                                     \
        if (st_ != TD_OK) return st_;                                                                            \
    } while (0)

static td_status attention_tensors(emitter *e, int il, td_attn_weights *a) {
    const td_config *c = e->c;
    const char *px = c->tensor_prefix;
    char why[200];
    int64_t d = c->n_embd, hd = c->head_dim, q_rows = (int64_t)c->n_head * hd * (c->attn_output_gate ? 2 : 1);
    snprintf(why, sizeof why, "num_attention_heads %d x head_dim %d%s, hidden_size %d", c->n_head, c->head_dim,
             c->attn_output_gate ? " x 2 (query and gate)" : "", c->n_embd);
    NAME("%slayers.%d.self_attn.q_proj.weight", px, il);
    TRY(emit(e, a ? &a->wq : NULL, NULL, 0, 2, q_rows, d, 0, why));
    snprintf(why, sizeof why, "num_key_value_heads %d x head_dim %d, hidden_size %d", c->n_head_kv, c->head_dim,
             c->n_embd);
    NAME("%slayers.%d.self_attn.k_proj.weight", px, il);
    TRY(emit(e, a ? &a->wk : NULL, NULL, 0, 2, (int64_t)c->n_head_kv * hd, d, 0, why));
    NAME("%slayers.%d.self_attn.v_proj.weight", px, il);
    TRY(emit(e, a ? &a->wv : NULL, NULL, 0, 2, (int64_t)c->n_head_kv * hd, d, 0, why));
    snprintf(why, sizeof why, "hidden_size %d, num_attention_heads %d x head_dim %d", c->n_embd, c->n_head,
             c->head_dim);
    NAME("%slayers.%d.self_attn.o_proj.weight", px, il);
    TRY(emit(e, a ? &a->wo : NULL, NULL, 0, 2, d, (int64_t)c->n_head * hd, 0, why));
    NAME("%slayers.%d.self_attn.q_norm.weight", px, il);
    TRY(emit(e, NULL, a ? &a->q_norm : NULL, 1, 1, hd, 0, 0, "head_dim"));
    NAME("%slayers.%d.self_attn.k_norm.weight", px, il);
    return emit(e, NULL, a ? &a->k_norm : NULL, 1, 1, hd, 0, 0, "head_dim");
}

static td_status deltanet_tensors(emitter *e, int il, td_deltanet_weights *w) {
    const td_config *c = e->c;
    const char *px = c->tensor_prefix;
    char why[200];
    int64_t d = c->n_embd, key_dim = (int64_t)c->lin_n_k_heads * c->lin_k_dim;
    int64_t value_dim = (int64_t)c->lin_n_v_heads * c->lin_v_dim, conv_dim = 2 * key_dim + value_dim;
    snprintf(why, sizeof why,
             "2 x linear_num_key_heads %d x linear_key_head_dim %d + linear_num_value_heads %d x "
             "linear_value_head_dim %d, hidden_size %d",
             c->lin_n_k_heads, c->lin_k_dim, c->lin_n_v_heads, c->lin_v_dim, c->n_embd);
    NAME("%slayers.%d.linear_attn.in_proj_qkv.weight", px, il);
    TRY(emit(e, w ? &w->in_qkv : NULL, NULL, 0, 2, conv_dim, d, 0, why));
    snprintf(why, sizeof why, "linear_num_value_heads %d x linear_value_head_dim %d, hidden_size %d",
             c->lin_n_v_heads, c->lin_v_dim, c->n_embd);
    NAME("%slayers.%d.linear_attn.in_proj_z.weight", px, il);
    TRY(emit(e, w ? &w->in_z : NULL, NULL, 0, 2, value_dim, d, 0, why));
    snprintf(why, sizeof why, "linear_num_value_heads %d, hidden_size %d", c->lin_n_v_heads, c->n_embd);
    NAME("%slayers.%d.linear_attn.in_proj_b.weight", px, il);
    TRY(emit(e, w ? &w->in_b : NULL, NULL, 0, 2, c->lin_n_v_heads, d, 0, why));
    NAME("%slayers.%d.linear_attn.in_proj_a.weight", px, il);
    TRY(emit(e, w ? &w->in_a : NULL, NULL, 0, 2, c->lin_n_v_heads, d, 0, why));
    snprintf(why, sizeof why, "conv channels %lld, linear_conv_kernel_dim %d", (long long)conv_dim,
             c->lin_conv_kernel);
    NAME("%slayers.%d.linear_attn.conv1d.weight", px, il);
    TRY(emit(e, NULL, w ? &w->conv_w : NULL, 0, 3, conv_dim, 1, c->lin_conv_kernel, why));
    NAME("%slayers.%d.linear_attn.dt_bias", px, il);
    TRY(emit(e, NULL, w ? &w->dt_bias : NULL, 0, 1, c->lin_n_v_heads, 0, 0, "linear_num_value_heads"));
    NAME("%slayers.%d.linear_attn.A_log", px, il);
    TRY(emit(e, NULL, w ? &w->a_log : NULL, 0, 1, c->lin_n_v_heads, 0, 0, "linear_num_value_heads"));
    NAME("%slayers.%d.linear_attn.norm.weight", px, il);
    TRY(emit(e, NULL, w ? &w->norm_w : NULL, 1, 1, c->lin_v_dim, 0, 0, "linear_value_head_dim"));
    snprintf(why, sizeof why, "hidden_size %d, linear_num_value_heads %d x linear_value_head_dim %d", c->n_embd,
             c->lin_n_v_heads, c->lin_v_dim);
    NAME("%slayers.%d.linear_attn.out_proj.weight", px, il);
    return emit(e, w ? &w->out : NULL, NULL, 0, 2, d, value_dim, 0, why);
}

td_status td_arch_tensors(const td_config *c, td_model *m, td_spec_fn fn, void *user) {
    emitter em, *e = &em;
    memset(&em, 0, sizeof em);
    em.c = c;
    em.fn = fn;
    em.user = user;
    const char *px = c->tensor_prefix;
    char why[200];
    int64_t d = c->n_embd;
    snprintf(why, sizeof why, "vocab_size %d, hidden_size %d", c->n_vocab, c->n_embd);
    NAME("%sembed_tokens.weight", px);
    TRY(emit(e, m ? &m->embed : NULL, NULL, 0, 2, c->n_vocab, d, 0, why));
    for (int il = 0; il < c->n_layer; il++) {
        td_layer *ly = m ? &m->layers[il] : NULL;
        int is_attn = c->arch != TD_ARCH_QWEN35 || c->layer_kind[il] == TD_LAYER_ATTENTION;
        if (ly) ly->kind = is_attn ? TD_LAYER_ATTENTION : TD_LAYER_DELTANET;
        NAME("%slayers.%d.input_layernorm.weight", px, il);
        TRY(emit(e, NULL, ly ? &ly->attn_norm : NULL, 1, 1, d, 0, 0, "hidden_size"));
        TRY(is_attn ? attention_tensors(e, il, ly ? &ly->attn : NULL) : deltanet_tensors(e, il, ly ? &ly->dn : NULL));
        snprintf(why, sizeof why, "intermediate_size %d, hidden_size %d", c->n_ff, c->n_embd);
        NAME("%slayers.%d.mlp.gate_proj.weight", px, il);
        TRY(emit(e, ly ? &ly->w_gate : NULL, NULL, 0, 2, c->n_ff, d, 0, why));
        NAME("%slayers.%d.mlp.up_proj.weight", px, il);
        TRY(emit(e, ly ? &ly->w_up : NULL, NULL, 0, 2, c->n_ff, d, 0, why));
        snprintf(why, sizeof why, "hidden_size %d, intermediate_size %d", c->n_embd, c->n_ff);
        NAME("%slayers.%d.mlp.down_proj.weight", px, il);
        TRY(emit(e, ly ? &ly->w_down : NULL, NULL, 0, 2, d, c->n_ff, 0, why));
        NAME("%slayers.%d.post_attention_layernorm.weight", px, il);
        TRY(emit(e, NULL, ly ? &ly->ffn_norm : NULL, 1, 1, d, 0, 0, "hidden_size"));
    }
    NAME("%snorm.weight", px);
    TRY(emit(e, NULL, m ? &m->final_norm : NULL, 1, 1, d, 0, 0, "hidden_size"));
    if (!c->tied) {
        int32_t rows = c->head_rows ? c->head_rows : c->n_vocab;
        if (c->head_rows) snprintf(why, sizeof why, "a head pruned to %d letters, hidden_size %d", rows, c->n_embd);
        else snprintf(why, sizeof why, "vocab_size %d, hidden_size %d (tie_word_embeddings is false or absent)", c->n_vocab, c->n_embd);
        NAME("lm_head.weight");
        TRY(emit(e, m ? &m->head : NULL, NULL, 0, 2, rows, d, 0, why));
    }
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
