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
    if (!(s->flags & (TD_T_VHEAD_ROWS | TD_T_VHEAD_COLS)) || c->lin_n_v_heads == c->lin_n_k_heads) return;
    out->vhead_axis = s->flags & TD_T_VHEAD_COLS ? 1 : 0;
    out->vhead_size = s->flags & TD_T_VHEAD_UNIT ? 1 : c->lin_v_dim;
    if (s->flags & TD_T_VHEAD_V_PART) out->vhead_start = 2 * (int64_t)c->lin_n_k_heads * c->lin_k_dim; /* [q | k | v] */
}

int64_t td_gguf_vhead_src(const td_gguf_layout *l, const td_config *c, int64_t i, int to_gguf) {
    if (l->vhead_axis < 0 || i < l->vhead_start) return i;
    int64_t k = i - l->vhead_start, j = k / l->vhead_size, hk = c->lin_n_k_heads, r = c->lin_n_v_heads / hk;
    /* HF head g*R + r sits at GGUF head r*Hk + g */
    int64_t src = to_gguf ? (j % hk) * r + j / hk  /* GGUF head j = r*Hk + g comes from HF head g*R + r */
                          : (j % r) * hk + j / r;  /* HF head j = g*R + r comes from GGUF head r*Hk + g */
    return l->vhead_start + src * l->vhead_size + k % l->vhead_size;
}

static const char qwen2_regex[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
static const char qwen35_regex[] = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| "
                                   "?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

const char *td_gguf_pre_regex(const char *pre, size_t len) {
    if (len == 5 && memcmp(pre, "qwen2", 5) == 0) return qwen2_regex;
    if (len == 6 && memcmp(pre, "qwen35", 6) == 0) return qwen35_regex;
    return NULL;
}

const char *td_gguf_pre_of_regex(const char *regex) {
    if (strcmp(regex, qwen2_regex) == 0) return "qwen2";
    if (strcmp(regex, qwen35_regex) == 0) return "qwen35";
    return NULL;
}
