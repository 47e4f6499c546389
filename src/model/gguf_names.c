#include "model/gguf_names.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void td_gguf_layout_of(const td_tensor_spec *s, const td_config *c, td_gguf_layout *out) {
    memset(out, 0, sizeof *out);
    out->vhead_axis = -1;
    out->plus_one = (s->flags & TD_T_GGUF_PLUS_ONE) != 0;
    out->neg_exp = (s->flags & TD_T_GGUF_NEG_EXP) != 0;
    out->squeeze = (s->flags & TD_T_GGUF_SQUEEZE) != 0;
    if (s->flags & TD_T_GGUF_ROPE_PERM) {
        out->vhead_axis = 0;
        out->rope_hd = c->head_dim;
        out->rope_heads = s->dims[0] / c->head_dim; /* q: the query heads, k: the key/value heads */
        return;
    }
    if (!(s->flags & (TD_T_VHEAD_ROWS | TD_T_VHEAD_COLS)) || c->lin_n_v_heads == c->lin_n_k_heads) return;
    out->vhead_axis = s->flags & TD_T_VHEAD_COLS ? 1 : 0;
    out->vhead_size = s->flags & TD_T_VHEAD_UNIT ? 1 : c->lin_v_dim;
    if (s->flags & TD_T_VHEAD_V_PART) out->vhead_start = 2 * (int64_t)c->lin_n_k_heads * c->lin_k_dim; /* [q | k | v] */
}

int64_t td_gguf_vhead_src(const td_gguf_layout *l, const td_config *c, int64_t i, int to_gguf) {
    if (l->rope_heads) { /* within a head: GGUF row 2i + j is HF row j * half + i */
        int64_t half = l->rope_hd / 2, h = i / l->rope_hd, r = i % l->rope_hd;
        return h * l->rope_hd + (to_gguf ? (r % 2) * half + r / 2 : (r % half) * 2 + r / half);
    }
    if (l->vhead_axis < 0 || i < l->vhead_start) return i;
    int64_t k = i - l->vhead_start, j = k / l->vhead_size, hk = c->lin_n_k_heads, r = c->lin_n_v_heads / hk;
    /* HF head g*R + r sits at GGUF head r*Hk + g */
    int64_t src = to_gguf ? (j % hk) * r + j / hk  /* GGUF head j = r*Hk + g comes from HF head g*R + r */
                          : (j % r) * hk + j / r;  /* HF head j = g*R + r comes from GGUF head r*Hk + g */
    return l->vhead_start + src * l->vhead_size + k % l->vhead_size;
}

static const td_gguf_pre pres[] = {
    {"qwen2",
     "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
     1, 0},
    {"qwen35",
     "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|\\s*["
     "\\r\\n]+|\\s+(?!\\S)|\\s+",
     1, 0},
    {"llama-bpe",
     "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|"
     "\\s+",
     0, 1},
};

const td_gguf_pre *td_gguf_pre_named(const char *name, size_t len) {
    for (size_t i = 0; i < sizeof pres / sizeof pres[0]; i++)
        if (strlen(pres[i].name) == len && memcmp(pres[i].name, name, len) == 0) return &pres[i];
    return NULL;
}

const td_gguf_pre *td_gguf_pre_of(const char *regex, int nfc, int ignore_merges) {
    for (size_t i = 0; regex && i < sizeof pres / sizeof pres[0]; i++)
        if (strcmp(regex, pres[i].regex) == 0 && !pres[i].nfc == !nfc && !pres[i].ignore_merges == !ignore_merges)
            return &pres[i];
    return NULL;
}

const char *td_gguf_pre_names(void) { return "qwen2, qwen35, llama-bpe"; }
