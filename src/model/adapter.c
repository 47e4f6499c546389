#define _GNU_SOURCE /* memrchr */
#include "model/adapter.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model/arch.h"
#include "util/alloc.h"
#include "util/error.h"
#include "util/fileio.h"
#include "util/half.h"
#include "util/json.h"

typedef struct find_job {
    const char *name; /* "model.layers.0.self_attn.q_proj.weight" */
    td_mat *mat;
} find_job;

static td_status find_mat(void *user, const td_tensor_spec *s) {
    find_job *j = user;
    if (s->mat && strcmp(s->name, j->name) == 0) j->mat = s->mat;
    return TD_OK;
}

static float elem(const td_st_file *f, const td_st_tensor *t, int64_t i) {
    const uint8_t *p = f->data + t->begin;
    uint16_t h;
    float v;
    switch (t->dtype) {
    case TD_DTYPE_F32: memcpy(&v, p + 4 * i, 4); return v;
    case TD_DTYPE_F16: memcpy(&h, p + 2 * i, 2); return td_f16_to_f32(h);
    default: memcpy(&h, p + 2 * i, 2); return td_bf16_to_f32(h);
    }
}

static const td_st_tensor *lookup(const td_st_file *f, const char *name) {
    for (int i = 0; i < f->n_tensors; i++)
        if (strcmp(f->tensors[i].name, name) == 0) return &f->tensors[i];
    return NULL;
}

/* Fields of adapter_config.json that change what an adapter computes and are not supported here. */
static td_status check_config(const json_t *c, const char *path) {
    const char *flags[] = {"use_dora", "fan_in_fan_out", "lora_bias"};
    for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++)
        if (json_is_true(json_object_get(c, flags[i])))
            return td_fail(TD_ERR_UNSUPPORTED, "%s: \"%s\": true is not supported", path, flags[i]);
    const char *nulls[] = {"modules_to_save", "layers_to_transform", "layer_replication", "trainable_token_indices",
                           "target_parameters"};
    for (size_t i = 0; i < sizeof nulls / sizeof nulls[0]; i++) {
        json_t *v = json_object_get(c, nulls[i]);
        if (v && !json_is_null(v) && !(json_is_array(v) && json_array_size(v) == 0))
            return td_fail(TD_ERR_UNSUPPORTED, "%s: \"%s\" is not supported", path, nulls[i]);
    }
    const char *empty[] = {"rank_pattern", "alpha_pattern"};
    for (size_t i = 0; i < 2; i++) {
        json_t *v = json_object_get(c, empty[i]);
        if (v && json_is_object(v) && json_object_size(v) > 0)
            return td_fail(TD_ERR_UNSUPPORTED, "%s: per-module \"%s\" is not supported", path, empty[i]);
    }
    const char *bias = "none", *type = "LORA";
    td_status st;
    if ((st = td_json_str(c, "bias", 0, path, &bias)) != TD_OK || (st = td_json_str(c, "peft_type", 0, path, &type)) != TD_OK)
        return st;
    if (strcmp(bias, "none") != 0) return td_fail(TD_ERR_UNSUPPORTED, "%s: \"bias\": \"%s\" is not supported", path, bias);
    if (strcmp(type, "LORA") != 0) return td_fail(TD_ERR_UNSUPPORTED, "%s: peft_type \"%s\" is not supported (LORA)", path, type);
    return TD_OK;
}

static int is_target(const json_t *targets, const char *module) {
    size_t i;
    json_t *t;
    json_array_foreach(targets, i, t) if (strcmp(json_string_value(t), module) == 0) return 1;
    return 0;
}

td_status td_adapter_apply(td_model *m, const char *dir, int *n_merged, double *scaling_out) {
    char *cfg_path = td_path_join(dir, "adapter_config.json"), *st_path = td_path_join(dir, "adapter_model.safetensors");
    json_t *cfg = NULL;
    td_st_file f;
    memset(&f, 0, sizeof f);
    int merged = 0;
    uint8_t *target_used = NULL;
    td_status st = cfg_path && st_path ? TD_OK : td_fail_nomem("a path");
    if (st == TD_OK) st = td_json_load_file(cfg_path, &cfg);
    if (st == TD_OK) st = check_config(cfg, cfg_path);
    int64_t r = 0;
    double alpha = 0;
    int rslora = 0;
    json_t *targets = cfg ? json_object_get(cfg, "target_modules") : NULL;
    if (st == TD_OK && ((st = td_json_int(cfg, "r", 1, cfg_path, &r)) != TD_OK ||
                        (st = td_json_num(cfg, "lora_alpha", 1, cfg_path, &alpha)) != TD_OK ||
                        (st = td_json_bool(cfg, "use_rslora", 0, cfg_path, &rslora)) != TD_OK)) {
    }
    if (st == TD_OK && r < 1) st = td_fail(TD_ERR_FORMAT, "%s: \"r\" must be >= 1", cfg_path);
    if (st == TD_OK && !json_is_array(targets))
        st = td_fail(TD_ERR_UNSUPPORTED, "%s: \"target_modules\" must be a list of module names", cfg_path);
    for (size_t i = 0; st == TD_OK && i < json_array_size(targets); i++)
        if (!json_is_string(json_array_get(targets, i)))
            st = td_fail(TD_ERR_FORMAT, "%s: target_modules[%zu] must be a string", cfg_path, i);
    double scaling = rslora ? alpha / sqrt((double)r) : alpha / (double)r;
    if (st == TD_OK && !isfinite(scaling))
        st = td_fail(TD_ERR_FORMAT, "%s: lora_alpha %g over r %lld gives a non-finite scaling", cfg_path, alpha, (long long)r);
    if (st == TD_OK) st = td_st_open(st_path, &f);
    if (st == TD_OK && !(target_used = td_calloc(json_array_size(targets) + 1, 1))) st = td_fail_nomem("adapter targets");

    for (int i = 0; st == TD_OK && i < f.n_tensors; i++) {
        const td_st_tensor *ta = &f.tensors[i];
        const char *suffix = strstr(ta->name, ".lora_A.weight");
        if (!suffix || suffix[strlen(".lora_A.weight")] != 0) {
            const char *bs = strstr(ta->name, ".lora_B.weight");
            if (!bs || bs[strlen(".lora_B.weight")] != 0)
                st = td_fail(TD_ERR_UNSUPPORTED, "%s: tensor %s is not a lora_A/lora_B weight (embedding adapters and "
                                                 "other kinds are not supported)", st_path, ta->name);
            else { /* a lora_B is merged with its lora_A, so one without it would be dropped in silence */
                char a_name[512];
                snprintf(a_name, sizeof a_name, "%.*s.lora_A.weight", (int)(bs - ta->name), ta->name);
                if (!lookup(&f, a_name))
                    st = td_fail(TD_ERR_FORMAT, "%s: tensor %s has no matching %s (an orphan lora_B)", st_path,
                                 ta->name, a_name);
            }
            continue;
        }
        /* base_model.model.<module>.lora_A.weight -> <module>.weight, <module>.lora_B.weight */
        const char *module = ta->name;
        if (strncmp(module, "base_model.model.", 17) == 0) module += 17;
        size_t mlen = (size_t)(suffix - module);
        char base_name[512], b_name[512], leaf[128];
        snprintf(base_name, sizeof base_name, "%.*s.weight", (int)mlen, module);
        snprintf(b_name, sizeof b_name, "%.*s.lora_B.weight", (int)(suffix - ta->name), ta->name);
        const char *dot = memrchr(module, '.', mlen);
        snprintf(leaf, sizeof leaf, "%.*s", (int)(mlen - (size_t)(dot ? dot + 1 - module : 0)), dot ? dot + 1 : module);
        if (!is_target(targets, leaf)) {
            st = td_fail(TD_ERR_FORMAT, "%s: tensor %s adapts \"%s\", which is not in target_modules", st_path,
                         ta->name, leaf);
            break;
        }
        for (size_t k = 0; k < json_array_size(targets); k++)
            if (strcmp(json_string_value(json_array_get(targets, k)), leaf) == 0) target_used[k] = 1;
        find_job job = {base_name, NULL};
        td_arch_tensors(&m->cfg, m, find_mat, &job);
        if (!job.mat) {
            st = td_fail(TD_ERR_FORMAT, "%s: tensor %s: the model has no linear weight %s", st_path, ta->name, base_name);
            break;
        }
        if (job.mat == &m->embed || job.mat == &m->head) {
            st = td_fail(TD_ERR_UNSUPPORTED, "%s: adapting %s (embedding or output head) is not supported", st_path,
                         base_name);
            break;
        }
        const td_st_tensor *tb = lookup(&f, b_name);
        td_mat *w = job.mat;
        if (!tb) st = td_fail(TD_ERR_FORMAT, "%s: %s has no matching %s", st_path, ta->name, b_name);
        else if (ta->dtype == TD_DTYPE_OTHER || tb->dtype == TD_DTYPE_OTHER)
            st = td_fail(TD_ERR_UNSUPPORTED, "%s: %s: dtype %s is not supported", st_path, ta->name, ta->dtype_name);
        else if (ta->n_dims != 2 || ta->shape[0] != r || ta->shape[1] != w->cols)
            st = td_fail(TD_ERR_FORMAT, "%s: tensor %s must have shape [%lld, %lld] (r, in features of %s)", st_path,
                         ta->name, (long long)r, (long long)w->cols, base_name);
        else if (tb->n_dims != 2 || tb->shape[0] != w->rows || tb->shape[1] != r)
            st = td_fail(TD_ERR_FORMAT, "%s: tensor %s must have shape [%lld, %lld] (out features of %s, r)", st_path,
                         tb->name, (long long)w->rows, (long long)r, base_name);
        if (st != TD_OK) break;
        /* merged fp32 weight: W + scaling * B A */
        float *nw = td_malloc((size_t)(w->rows * w->cols) * sizeof *nw);
        if (!nw) {
            st = td_fail_nomem("a merged weight");
            break;
        }
        for (int64_t o = 0; o < w->rows && st == TD_OK; o++) {
            td_row_to_f32(nw + o * w->cols, w, o);
            for (int64_t c = 0; c < w->cols; c++) {
                double d = 0;
                for (int64_t k = 0; k < r; k++) d += (double)elem(&f, tb, o * r + k) * elem(&f, ta, k * w->cols + c);
                nw[o * w->cols + c] = (float)((double)nw[o * w->cols + c] + scaling * d);
                if (!isfinite(nw[o * w->cols + c])) { /* a NaN in lora_A/B, or an overflow of the merge */
                    st = td_fail(TD_ERR_NONFINITE,
                                 "%s: merging %s and its lora_B into %s gives a non-finite weight at [%lld, %lld] "
                                 "(scaling %g): the adapter holds NaN or infinity, or its values overflow",
                                 st_path, ta->name, base_name, (long long)o, (long long)c, scaling);
                    break;
                }
            }
        }
        if (st != TD_OK) {
            td_free(nw);
            break;
        }
        if (td_model_own(m, nw)) {
            td_free(nw);
            st = td_fail_nomem("a merged weight");
            break;
        }
        w->type = TD_DTYPE_F32;
        w->row_bytes = (size_t)w->cols * sizeof(float);
        w->data = nw;
        merged++;
    }
    for (size_t k = 0; st == TD_OK && k < json_array_size(targets); k++)
        if (!target_used[k])
            st = td_fail(TD_ERR_FORMAT, "%s: target module \"%s\" matches no lora tensor of the adapter", cfg_path,
                         json_string_value(json_array_get(targets, k)));
    if (st == TD_OK && merged == 0) st = td_fail(TD_ERR_FORMAT, "%s: no lora_A/lora_B pairs", st_path);
    td_free(target_used);
    td_st_close(&f);
    json_decref(cfg);
    td_free(cfg_path);
    td_free(st_path);
    if (n_merged) *n_merged = merged;
    if (scaling_out) *scaling_out = scaling;
    return st;
}
