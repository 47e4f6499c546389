/* The one sampler chain: penalties over a window, greedy or temperature / top-k / top-p / min-p sampling, and the
 * model's defaults from generation_config.json. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "typedecide.h"
#include "util/alloc.h"
#include "util/error.h"

td_sampler_params td_sampler_default_params(void) {
    td_sampler_params p;
    memset(&p, 0, sizeof p);
    p.temperature = 0.0f;
    p.top_k = 0;
    p.top_p = 1.0f;
    p.seed = 1;
    p.min_p = 0.0f;
    p.repetition_penalty = 1.0f;
    p.presence_penalty = 0.0f;
    p.frequency_penalty = 0.0f;
    p.penalty_last_n = 64;
    return p;
}

td_sampler_params td_model_sampler_defaults(const td_model *model) {
    td_sampler_params p = td_sampler_default_params();
    const char *text = td_model_generation_config(model);
    if (!text) return p;
    json_t *root = json_loads(text, 0, NULL);
    if (!json_is_object(root)) {
        json_decref(root);
        return p; /* the loader already parsed it; a file changed under us keeps the library's defaults */
    }
    json_t *v;
    if (json_is_number(v = json_object_get(root, "temperature"))) p.temperature = (float)json_number_value(v);
    if (json_is_integer(v = json_object_get(root, "top_k"))) p.top_k = (int32_t)json_integer_value(v);
    if (json_is_number(v = json_object_get(root, "top_p"))) p.top_p = (float)json_number_value(v);
    if (json_is_number(v = json_object_get(root, "min_p"))) p.min_p = (float)json_number_value(v);
    if (json_is_number(v = json_object_get(root, "repetition_penalty")))
        p.repetition_penalty = (float)json_number_value(v);
    /* transformers: do_sample false (its default) is greedy whatever the temperature says */
    v = json_object_get(root, "do_sample");
    if (!json_is_true(v)) p.temperature = 0.0f;
    if (p.top_k < 0) p.top_k = 0;
    json_decref(root);
    return p;
}

td_status td_sampler_params_check(const td_sampler_params *p) {
    if (!p) return td_fail(TD_ERR_INVALID_ARG, "sampler parameters: NULL");
    if (!isfinite(p->temperature) || p->temperature < 0)
        return td_fail(TD_ERR_INVALID_ARG, "temperature must be a finite number >= 0 (got %g)", (double)p->temperature);
    if (p->top_k < 0) return td_fail(TD_ERR_INVALID_ARG, "top_k must be >= 0 (0 = off; got %d)", p->top_k);
    if (!(p->top_p > 0 && p->top_p <= 1))
        return td_fail(TD_ERR_INVALID_ARG, "top_p must be in (0, 1] (got %g)", (double)p->top_p);
    if (!(p->min_p >= 0 && p->min_p <= 1))
        return td_fail(TD_ERR_INVALID_ARG, "min_p must be in [0, 1] (got %g)", (double)p->min_p);
    if (!(p->repetition_penalty > 0 && p->repetition_penalty <= 100))
        return td_fail(TD_ERR_INVALID_ARG, "repetition_penalty must be in (0, 100] (got %g)",
                       (double)p->repetition_penalty);
    if (!(p->presence_penalty >= -2 && p->presence_penalty <= 2))
        return td_fail(TD_ERR_INVALID_ARG, "presence_penalty must be in [-2, 2] (got %g)", (double)p->presence_penalty);
    if (!(p->frequency_penalty >= -2 && p->frequency_penalty <= 2))
        return td_fail(TD_ERR_INVALID_ARG, "frequency_penalty must be in [-2, 2] (got %g)",
                       (double)p->frequency_penalty);
    if (p->penalty_last_n < -1)
        return td_fail(TD_ERR_INVALID_ARG, "penalty_last_n must be >= -1 (-1 = all; got %d)", p->penalty_last_n);
    return TD_OK;
}

td_status td_sampler_params_json(const td_sampler_params *p, char **json) {
    if (!p || !json) return td_fail(TD_ERR_INVALID_ARG, "td_sampler_params_json: NULL argument");
    char buf[512];
    snprintf(buf, sizeof buf,
             "{\"temperature\": %.9g, \"top_k\": %d, \"top_p\": %.9g, \"min_p\": %.9g, \"repetition_penalty\": %.9g, "
             "\"presence_penalty\": %.9g, \"frequency_penalty\": %.9g, \"penalty_last_n\": %d, \"seed\": %llu, "
             "\"greedy\": %s}",
             (double)p->temperature, p->top_k, (double)p->top_p, (double)p->min_p, (double)p->repetition_penalty,
             (double)p->presence_penalty, (double)p->frequency_penalty, p->penalty_last_n,
             (unsigned long long)p->seed, p->temperature <= 0 ? "true" : "false");
    *json = td_strdup(buf);
    return *json ? TD_OK : td_fail_nomem("sampler JSON");
}

static uint64_t next_u64(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* The lowest index of the largest value, NaN never winning (x[0] NaN: 0), as the scan `if (x[i] > x[best]) best = i`
 * gives it, in two passes the compiler vectorises: the maximum (16 running maxima), then the first index holding it.
 * The scan was a chain of dependent compares. */
static int32_t argmax(const float *x, int32_t n) {
    if (n <= 0 || isnan(x[0])) return 0;
    float lane[16], m;
    for (int k = 0; k < 16; k++) lane[k] = x[0];
    int32_t i = 0;
    for (; i + 16 <= n; i += 16)
        for (int k = 0; k < 16; k++) lane[k] = x[i + k] > lane[k] ? x[i + k] : lane[k];
    m = lane[0];
    for (int k = 1; k < 16; k++) m = lane[k] > m ? lane[k] : m;
    for (; i < n; i++) m = x[i] > m ? x[i] : m;
    for (i = 0; x[i] != m; i++) {} /* m is one of the values, and not NaN */
    return i;
}

typedef struct cand {
    float logit;
    int32_t id;
} cand;

/* Descending logit; ties: lower id first. */
static int cmp_desc(const void *a, const void *b) {
    const cand *x = a, *y = b;
    return x->logit > y->logit ? -1 : x->logit < y->logit ? 1 : (x->id < y->id ? -1 : x->id > y->id);
}

/* Steps 2-3 of the chain on `logits` (already penalised). c: n candidates of scratch. */
static int32_t sample_chain(const float *logits, int32_t n, const td_sampler_params *p, uint64_t *rng, cand *c,
                            double *prob) {
    if (n <= 0) return -1;
    if (p->temperature <= 0.0f) return argmax(logits, n);
    int32_t k = p->top_k > 0 && p->top_k < n ? p->top_k : n, m = 0;
    if (k < n) { /* the k best without sorting everything: a bounded insertion list (k is small in practice) */
        for (int32_t i = 0; i < n; i++) {
            cand x = {logits[i], i};
            if (m == k && cmp_desc(&x, &c[m - 1]) >= 0) continue;
            int32_t j = m < k ? m++ : k - 1;
            while (j > 0 && cmp_desc(&x, &c[j - 1]) < 0) {
                c[j] = c[j - 1];
                j--;
            }
            c[j] = x;
        }
    } else {
        for (int32_t i = 0; i < n; i++) c[i].logit = logits[i], c[i].id = i;
        qsort(c, (size_t)n, sizeof *c, cmp_desc);
        m = n;
    }
    double mx = c[0].logit, sum = 0.0;
    double *pr = prob ? prob : td_malloc((size_t)m * sizeof *pr);
    if (!pr) return c[0].id; /* no memory for the probabilities: the most likely id */
    for (int32_t i = 0; i < m; i++) {
        pr[i] = exp(((double)c[i].logit - mx) / (double)p->temperature);
        sum += pr[i];
    }
    int32_t keep = m;
    if (p->top_p < 1.0f) {
        double acc = 0.0;
        for (int32_t i = 0; i < m; i++) {
            acc += pr[i] / sum;
            if (acc >= (double)p->top_p) {
                keep = i + 1;
                break;
            }
        }
    }
    if (p->min_p > 0.0f) { /* pr[0] is the largest; compare against it (relative, so the normalisation cancels) */
        double floor_p = (double)p->min_p * pr[0];
        int32_t j = 1;
        while (j < keep && pr[j] >= floor_p) j++;
        keep = j;
    }
    double total = 0.0;
    for (int32_t i = 0; i < keep; i++) total += pr[i];
    double r = (double)(next_u64(rng) >> 11) * (1.0 / 9007199254740992.0) * total, acc = 0.0;
    int32_t pick = c[keep - 1].id;
    for (int32_t i = 0; i < keep; i++) {
        acc += pr[i];
        if (r < acc) {
            pick = c[i].id;
            break;
        }
    }
    if (pr != prob) td_free(pr);
    return pick;
}

int32_t td_sample(const float *logits, int32_t n, const td_sampler_params *p, uint64_t *rng, float *scratch) {
    if (n <= 0 || !logits) return -1;
    td_sampler_params d = td_sampler_default_params();
    if (!p) p = &d;
    return sample_chain(logits, n, p, rng, (cand *)(void *)scratch, NULL);
}

/* ---- the stateful sampler ------------------------------------------------------------------------------------- */

struct td_sampler {
    td_sampler_params p;
    int32_t n_vocab;
    uint64_t rng;
    int32_t *window; /* ring of the last `cap` accepted ids */
    int32_t cap, n, head;
    int32_t *count;  /* [n_vocab] occurrences in the window */
    float *work;     /* [n_vocab] penalised logits */
    cand *c;         /* [n_vocab] */
    double *prob;    /* [n_vocab] */
    int32_t *bias_ids; /* logit bias: n_bias distinct ids and what is added to their logits */
    float *bias;
    int32_t n_bias;
};

td_status td_sampler_new(const td_sampler_params *p, int32_t n_vocab, td_sampler **out) {
    if (out) *out = NULL;
    if (!p || !out || n_vocab < 1) return td_fail(TD_ERR_INVALID_ARG, "td_sampler_new: NULL argument or n_vocab < 1");
    td_status st = td_sampler_params_check(p);
    if (st != TD_OK) return st;
    td_sampler *s = td_calloc(1, sizeof *s);
    if (!s) return td_fail_nomem("a sampler");
    s->p = *p;
    s->n_vocab = n_vocab;
    s->rng = p->seed;
    s->cap = p->penalty_last_n < 0 ? 1 << 20 : p->penalty_last_n;
    int penalties = s->cap > 0 && (p->repetition_penalty != 1.0f || p->presence_penalty != 0.0f ||
                                   p->frequency_penalty != 0.0f);
    if (!penalties) s->cap = 0;
    if (s->cap > 0) {
        s->window = td_malloc((size_t)s->cap * sizeof *s->window);
        s->count = td_calloc((size_t)n_vocab, sizeof *s->count);
    }
    s->work = td_malloc((size_t)n_vocab * sizeof *s->work);
    s->c = td_malloc((size_t)n_vocab * sizeof *s->c);
    s->prob = td_malloc((size_t)n_vocab * sizeof *s->prob);
    if ((s->cap > 0 && (!s->window || !s->count)) || !s->work || !s->c || !s->prob) {
        td_sampler_free(s);
        return td_fail_nomem("a sampler");
    }
    *out = s;
    return TD_OK;
}

void td_sampler_free(td_sampler *s) {
    if (!s) return;
    td_free(s->window);
    td_free(s->count);
    td_free(s->work);
    td_free(s->c);
    td_free(s->prob);
    td_free(s->bias_ids);
    td_free(s->bias);
    td_free(s);
}

td_status td_sampler_set_logit_bias(td_sampler *s, const int32_t *ids, const float *bias, int32_t n) {
    if (!s || n < 0 || (n && (!ids || !bias))) return td_fail(TD_ERR_INVALID_ARG, "td_sampler_set_logit_bias: bad argument");
    for (int32_t i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= s->n_vocab)
            return td_fail(TD_ERR_RANGE, "logit bias %d: id %d is outside the vocabulary 0..%d", i, ids[i], s->n_vocab - 1);
        if (!isfinite(bias[i])) return td_fail(TD_ERR_INVALID_ARG, "logit bias %d (id %d) is not finite", i, ids[i]);
        for (int32_t j = 0; j < i; j++)
            if (ids[j] == ids[i]) return td_fail(TD_ERR_INVALID_ARG, "logit bias: id %d is given twice", ids[i]);
    }
    int32_t *ni = n ? td_malloc((size_t)n * sizeof *ni) : NULL;
    float *nb = n ? td_malloc((size_t)n * sizeof *nb) : NULL;
    if (n && (!ni || !nb)) {
        td_free(ni);
        td_free(nb);
        return td_fail_nomem("a logit bias");
    }
    if (n) memcpy(ni, ids, (size_t)n * sizeof *ni), memcpy(nb, bias, (size_t)n * sizeof *nb);
    td_free(s->bias_ids);
    td_free(s->bias);
    s->bias_ids = ni, s->bias = nb, s->n_bias = n;
    return TD_OK;
}

void td_sampler_accept(td_sampler *s, int32_t id) {
    if (!s || s->cap == 0 || id < 0 || id >= s->n_vocab) return;
    if (s->n == s->cap) { /* the oldest leaves the window */
        s->count[s->window[s->head]]--;
        s->window[s->head] = id;
        s->head = (s->head + 1) % s->cap;
    } else {
        s->window[(s->head + s->n) % s->cap] = id;
        s->n++;
    }
    s->count[id]++;
}

void td_sampler_reset(td_sampler *s) {
    if (!s) return;
    s->rng = s->p.seed;
    if (s->cap) memset(s->count, 0, (size_t)s->n_vocab * sizeof *s->count);
    s->n = s->head = 0;
}

int32_t td_sampler_sample(td_sampler *s, const float *logits) {
    if (!s || !logits) return -1;
    const float *x = logits;
    if (s->n_bias || (s->cap && s->n)) {
        memcpy(s->work, logits, (size_t)s->n_vocab * sizeof *s->work);
        x = s->work;
    }
    for (int32_t i = 0; i < s->n_bias; i++) s->work[s->bias_ids[i]] += s->bias[i]; /* step 0: the logit bias */
    if (s->cap && s->n) {
        float r = s->p.repetition_penalty;
        /* each distinct id of the window once: walk the window, act on an id when its count is still positive and
           mark it done by negating the count, then restore the counts */
        for (int32_t i = 0; i < s->n; i++) {
            int32_t id = s->window[(s->head + i) % s->cap];
            int32_t c = s->count[id];
            if (c <= 0) continue;
            float l = s->work[id];
            if (r != 1.0f) l = l > 0 ? l / r : l * r;
            l -= s->p.presence_penalty + s->p.frequency_penalty * (float)c;
            s->work[id] = l;
            s->count[id] = -c;
        }
        for (int32_t i = 0; i < s->n; i++) {
            int32_t id = s->window[(s->head + i) % s->cap];
            if (s->count[id] < 0) s->count[id] = -s->count[id];
        }
    }
    return sample_chain(x, s->n_vocab, &s->p, &s->rng, s->c, s->prob);
}

float td_logprob(const float *logits, int32_t n, int32_t id, int32_t n_top, int32_t *top_ids, float *top_logprobs) {
    if (!logits || n <= 0) return -INFINITY;
    double mx = logits[0];
    for (int32_t i = 1; i < n; i++)
        if (logits[i] > mx) mx = logits[i];
    double sum = 0.0;
    for (int32_t i = 0; i < n; i++) sum += exp((double)logits[i] - mx);
    double lse = mx + log(sum);
    if (n_top > 0 && top_ids) {
        if (n_top > n) n_top = n;
        int32_t m = 0;
        for (int32_t i = 0; i < n; i++) { /* insertion into the n_top best, ties: lower id first */
            if (m == n_top && !(logits[i] > logits[top_ids[m - 1]])) continue;
            int32_t j = m < n_top ? m++ : n_top - 1;
            while (j > 0 && logits[i] > logits[top_ids[j - 1]]) {
                top_ids[j] = top_ids[j - 1];
                j--;
            }
            top_ids[j] = i;
        }
        if (top_logprobs)
            for (int32_t j = 0; j < n_top; j++) top_logprobs[j] = (float)((double)logits[top_ids[j]] - lse);
    }
    return id >= 0 && id < n ? (float)((double)logits[id] - lse) : -INFINITY;
}
