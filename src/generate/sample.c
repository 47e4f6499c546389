/* Greedy and temperature / top-k / top-p sampling over one row of logits. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "typedecide.h"

td_sampler_params td_sampler_default_params(void) {
    td_sampler_params p;
    memset(&p, 0, sizeof p);
    p.temperature = 0.0f;
    p.top_k = 0;
    p.top_p = 1.0f;
    p.seed = 1;
    return p;
}

static uint64_t next_u64(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static int32_t argmax(const float *x, int32_t n) {
    int32_t best = 0;
    for (int32_t i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
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

int32_t td_sample(const float *logits, int32_t n, const td_sampler_params *p, uint64_t *rng, float *scratch) {
    if (n <= 0) return -1;
    if (!p || p->temperature <= 0.0f) return argmax(logits, n);
    cand *c = (cand *)(void *)scratch; /* 2n floats hold n (logit, id) pairs */
    for (int32_t i = 0; i < n; i++) c[i].logit = logits[i], c[i].id = i;
    int32_t k = p->top_k > 0 && p->top_k < n ? p->top_k : n;
    qsort(c, (size_t)n, sizeof *c, cmp_desc);
    double mx = c[0].logit, sum = 0.0;
    for (int32_t i = 0; i < k; i++) { /* probabilities overwrite the logits in place */
        c[i].logit = (float)exp(((double)c[i].logit - mx) / (double)p->temperature);
        sum += c[i].logit;
    }
    int32_t keep = k;
    if (p->top_p < 1.0f) {
        double acc = 0.0;
        for (int32_t i = 0; i < k; i++) {
            acc += c[i].logit / sum;
            if (acc >= (double)p->top_p) {
                keep = i + 1;
                break;
            }
        }
        sum = 0.0;
        for (int32_t i = 0; i < keep; i++) sum += c[i].logit;
    }
    double r = (double)(next_u64(rng) >> 11) * (1.0 / 9007199254740992.0) * sum, acc = 0.0;
    for (int32_t i = 0; i < keep; i++) {
        acc += c[i].logit;
        if (r < acc) return c[i].id;
    }
    return c[keep - 1].id;
}
