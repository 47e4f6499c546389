/* td_gen: many generation requests over one context, one td_ctx_decode per step (continuous batching), with cached
 * sessions and DeltaNet snapshots for prefix reuse, under an LRU memory budget.
 *
 * Sequence slots of the context are of three kinds: a running request's sequence, a cached entry (a finished
 * request's sequence, or a snapshot forked from a running request at a turn boundary; both remember their tokens),
 * or free. A new request forks from the entry with the longest usable common prefix: any prefix of an entry on an
 * all-attention model, only an entry's whole length on a hybrid one (its DeltaNet state is that of its end). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "generate/gen_internal.h"
#include "typedecide.h"
#include "util/alloc.h"
#include "util/clock.h"
#include "util/error.h"
#include "util/grow.h"

#define MAX_STOP_IDS 16
#define MAX_TOP 20
#define MAX_SNAPS 4
#define PLP_CHUNK 32 /* prompt tokens per step of a request that wants prompt logprobs (their outputs are kept) */

/* R_FOLLOW: a further choice of a request (td_gen_submit_n), admitted with its lead, waiting for the lead's prompt
 * to be read; then it forks the lead's sequence and samples from the same logits. */
typedef enum rstate { R_QUEUED, R_PREFILL, R_DECODE, R_FOLLOW } rstate;

typedef struct entry {
    int32_t seq;
    int32_t *tokens; /* [n] */
    int32_t n;
    uint64_t used; /* LRU clock */
    int snapshot;
} entry;

typedef struct req {
    int64_t id;
    rstate state;
    int32_t *prompt, n_prompt;
    td_gen_request p; /* copied scalars; pointers below are ours */
    int32_t stop_ids[MAX_STOP_IDS + 64];
    int32_t n_stop_ids;
    td_sampler *sampler;
    td_stopper *stopper;
    int32_t seq, n_past, n_reused, reserved;
    int64_t follows;   /* a further choice: the id of the request that reads the prompt (0: none) */
    int32_t *gen;      /* [max_tokens] generated ids */
    int32_t n_gen;
    int32_t pending;   /* sampled, not yet run (DECODE) */
    int32_t snaps[MAX_SNAPS], n_snaps, next_snap;
    float *plp;        /* prompt logprobs [n_prompt - 1] and tops */
    int32_t *plp_top;
    float *plp_top_lp;
    double t_submit, t_admit, t_prompt, t_first, t_last;
    /* this step */
    int32_t step_tokens, step_first_out, step_n_out;
} req;

typedef struct ev_store {
    td_gen_event ev;
    char *text;
    int32_t *top_ids;
    float *top_lp;
    float *plp;
    int32_t *ptop;
    float *ptop_lp;
    char *error;
} ev_store;

struct td_gen {
    const td_model *model;
    td_gen_params p;
    td_ctx *ctx;
    td_batch *batch;
    int32_t n_ctx, n_vocab, im_start;
    int hybrid;
    int64_t memory;
    uint8_t *slot_used; /* [max_sequences] */
    entry *entries;     /* [max_sequences] */
    int32_t n_entries;
    req **reqs;         /* queued and running, in submission order */
    int32_t n_reqs;
    size_t cap_reqs;
    ev_store *evq;
    int32_t ev_head, ev_n, ev_cap;
    ev_store cur;       /* the event handed out last (owned until the next call) */
    int64_t next_id;
    uint64_t clock;
    int64_t lost; /* events (or parts of them) and cache entries that could not be allocated */
    td_gen_stats st;
};

static void ev_release(ev_store *e) {
    td_free(e->text);
    td_free(e->top_ids);
    td_free(e->top_lp);
    td_free(e->plp);
    td_free(e->ptop);
    td_free(e->ptop_lp);
    td_free(e->error);
    memset(e, 0, sizeof *e);
}

td_gen_params td_gen_default_params(void) {
    td_gen_params p;
    memset(&p, 0, sizeof p);
    p.cache_bytes = (int64_t)1 << 30;
    p.max_sequences = 32;
    p.max_running = 8;
    p.n_batch = 512;
    p.n_threads = 1;
    p.max_queue = 256;
    return p;
}

td_gen_request td_gen_default_request(void) {
    td_gen_request r;
    memset(&r, 0, sizeof r);
    r.sampler = td_sampler_default_params();
    r.max_tokens = 16;
    r.logprobs = -1;
    r.prompt_logprobs = -1;
    r.cache = 1;
    return r;
}

const char *td_gen_finish_str(td_gen_finish f) {
    switch (f) {
    case TD_GEN_FINISH_STOP: return "stop";
    case TD_GEN_FINISH_LENGTH: return "length";
    case TD_GEN_FINISH_CANCELLED: return "cancelled";
    case TD_GEN_FINISH_ERROR: return "error";
    default: return "";
    }
}

static td_ctx_params ctx_params(const td_gen_params *p, int32_t n_ctx) {
    td_ctx_params cp = td_ctx_default_params();
    cp.n_ctx = n_ctx;
    cp.n_batch = p->n_batch;
    cp.n_seq_max = p->max_sequences;
    cp.n_threads = p->n_threads;
    cp.n_outputs_max = p->max_running + PLP_CHUNK < p->n_batch ? p->max_running + PLP_CHUNK : p->n_batch;
    cp.kv_f16 = p->kv_f16;
    cp.device = p->device;
    cp.precision = p->precision;
    return cp;
}

td_status td_gen_new(const td_model *model, const td_gen_params *params, td_gen **out) {
    if (out) *out = NULL;
    if (!model || !out) return td_fail(TD_ERR_INVALID_ARG, "td_gen_new: NULL argument");
    if (!td_model_can_generate(model))
        return td_fail(TD_ERR_STATE, "%s: the output head was pruned to the option letters: the model cannot generate",
                       td_model_path(model));
    td_gen_params p = params ? *params : td_gen_default_params();
    if (p.max_sequences < 2 || p.max_sequences > 4096)
        return td_fail(TD_ERR_INVALID_ARG, "max_sequences must be in 2..4096 (got %d)", p.max_sequences);
    if (p.max_running < 1 || p.max_running >= p.max_sequences)
        return td_fail(TD_ERR_INVALID_ARG, "max_running must be in 1..max_sequences - 1 (got %d)", p.max_running);
    if (p.n_batch < p.max_running || p.n_batch > (1 << 16))
        return td_fail(TD_ERR_INVALID_ARG, "n_batch must be in max_running..65536 (got %d)", p.n_batch);
    if (p.n_threads < 1 || p.n_threads > 1024)
        return td_fail(TD_ERR_INVALID_ARG, "n_threads must be in 1..1024 (got %d)", p.n_threads);
    if (p.n_ctx < 0 || p.n_ctx > (1 << 24)) return td_fail(TD_ERR_INVALID_ARG, "n_ctx must be in 0..16777216");
    if (p.max_queue < 1) return td_fail(TD_ERR_INVALID_ARG, "max_queue must be >= 1");
    if (p.cache_bytes <= 0) return td_fail(TD_ERR_INVALID_ARG, "cache_bytes must be > 0");
    int32_t n_ctx = p.n_ctx;
    int64_t bytes = 0;
    td_status st;
    td_ctx_params cp;
    if (n_ctx == 0) { /* the most rows the budget holds: memory grows with n_ctx, so bisect */
        int32_t lo = 0, hi = 1 << 24;
        while (lo < hi) {
            int32_t mid = lo + (hi - lo + 1) / 2;
            cp = ctx_params(&p, mid);
            if (td_ctx_memory(model, &cp, &bytes) == TD_OK && bytes <= p.cache_bytes) lo = mid;
            else hi = mid - 1;
        }
        if (lo < 64)
            return td_fail(TD_ERR_NOMEM, "cache_bytes %lld holds fewer than 64 KV rows for this model",
                           (long long)p.cache_bytes);
        n_ctx = lo;
    }
    cp = ctx_params(&p, n_ctx);
    if ((st = td_ctx_memory(model, &cp, &bytes)) != TD_OK) return st;
    if (p.n_ctx && bytes > p.cache_bytes)
        return td_fail(TD_ERR_NOMEM, "n_ctx %d needs %lld bytes, beyond cache_bytes %lld", n_ctx, (long long)bytes,
                       (long long)p.cache_bytes);
    td_gen *g = td_calloc(1, sizeof *g);
    if (!g) return td_fail_nomem("a td_gen");
    g->model = model;
    g->p = p;
    g->n_ctx = n_ctx;
    g->memory = bytes;
    g->n_vocab = td_model_n_vocab(model);
    g->hybrid = td_model_is_hybrid(model);
    const td_tokenizer *tok = td_model_tokenizer(model);
    g->im_start = tok ? td_token_lookup(tok, "<|im_start|>") : -1;
    g->next_id = 1;
    g->slot_used = td_calloc((size_t)p.max_sequences, 1);
    g->entries = td_calloc((size_t)p.max_sequences, sizeof *g->entries);
    if (!g->slot_used || !g->entries) st = td_fail_nomem("a td_gen");
    if (st == TD_OK) st = td_ctx_new(model, &cp, &g->ctx);
    if (st == TD_OK) st = td_batch_new(p.n_batch, &g->batch);
    if (st != TD_OK) {
        td_gen_free(g);
        return st;
    }
    *out = g;
    return TD_OK;
}

static void req_free(req *r) {
    if (!r) return;
    td_free(r->prompt);
    td_free(r->gen);
    td_free(r->plp);
    td_free(r->plp_top);
    td_free(r->plp_top_lp);
    td_sampler_free(r->sampler);
    td_stopper_free(r->stopper);
    td_free(r);
}

void td_gen_free(td_gen *g) {
    if (!g) return;
    for (int32_t i = 0; i < g->n_reqs; i++) req_free(g->reqs[i]);
    td_free(g->reqs);
    for (int32_t i = 0; i < g->n_entries; i++) td_free(g->entries[i].tokens);
    td_free(g->entries);
    td_free(g->slot_used);
    for (int32_t i = 0; i < g->ev_n; i++) ev_release(&g->evq[(g->ev_head + i) % g->ev_cap]);
    td_free(g->evq);
    ev_release(&g->cur);
    td_batch_free(g->batch);
    td_ctx_free(g->ctx);
    td_free(g);
}

int32_t td_gen_n_ctx(const td_gen *g) { return g ? g->n_ctx : 0; }
int64_t td_gen_memory(const td_gen *g) { return g ? g->memory : 0; }

/* ---- events -------------------------------------------------------------------------------------------------- */

static ev_store *ev_push(td_gen *g) {
    if (g->ev_n == g->ev_cap) {
        int32_t cap = g->ev_cap ? g->ev_cap * 2 : 64;
        ev_store *q = td_calloc((size_t)cap, sizeof *q);
        if (!q) {
            g->lost++;
            return NULL;
        }
        for (int32_t i = 0; i < g->ev_n; i++) q[i] = g->evq[(g->ev_head + i) % g->ev_cap];
        td_free(g->evq);
        g->evq = q;
        g->ev_head = 0;
        g->ev_cap = cap;
    }
    ev_store *e = &g->evq[(g->ev_head + g->ev_n++) % g->ev_cap];
    memset(e, 0, sizeof *e);
    e->ev.stop_index = e->ev.stop_id = -1;
    e->ev.logprob = NAN;
    return e;
}

static void ev_text(td_gen *g, ev_store *e, const char *t, size_t n) {
    e->text = td_malloc(n + 1);
    if (!e->text) g->lost++;
    if (e->text) {
        memcpy(e->text, t, n);
        e->text[n] = 0;
        e->ev.text_len = n;
    }
    e->ev.text = e->text ? e->text : "";
}

static td_status lost_check(td_gen *g, int64_t before, const char *what) {
    if (g->lost == before) return TD_OK;
    return td_fail(TD_ERR_NOMEM, "%s: out of memory: %lld event(s), parts of them (text, top log-probabilities) or "
                                 "cached sessions could not be made",
                   what, (long long)(g->lost - before));
}

int td_gen_next_event(td_gen *g, td_gen_event *ev) {
    if (!g || !ev) return 0;
    ev_release(&g->cur);
    if (!g->ev_n) {
        memset(ev, 0, sizeof *ev);
        ev->kind = TD_GEN_EVENT_NONE;
        return 0;
    }
    g->cur = g->evq[g->ev_head];
    g->ev_head = (g->ev_head + 1) % g->ev_cap;
    g->ev_n--;
    *ev = g->cur.ev;
    if (!ev->text) ev->text = "";
    return 1;
}

/* ---- cache entries and slots ---------------------------------------------------------------------------------- */

static int32_t free_slot(td_gen *g) {
    for (int32_t s = 0; s < g->p.max_sequences; s++)
        if (!g->slot_used[s]) return s;
    return -1;
}

static void entry_drop(td_gen *g, int32_t i) {
    td_ctx_seq_truncate(g->ctx, g->entries[i].seq, 0); /* cannot fail: 0 is always allowed */
    g->slot_used[g->entries[i].seq] = 0;
    td_free(g->entries[i].tokens);
    g->entries[i] = g->entries[--g->n_entries];
}

/* Evicts the least recently used entry other than `keep` (-1: none kept). Returns 0, or -1 when none is left. */
static int evict_lru(td_gen *g, int32_t keep_seq) {
    int32_t best = -1;
    for (int32_t i = 0; i < g->n_entries; i++)
        if (g->entries[i].seq != keep_seq && (best < 0 || g->entries[i].used < g->entries[best].used)) best = i;
    if (best < 0) return -1;
    entry_drop(g, best);
    g->st.evictions++;
    return 0;
}

/* Makes `seq` (holding tokens[0..n)) an entry, or drops it when an equal entry exists. */
static void entry_add(td_gen *g, int32_t seq, const int32_t *tokens, int32_t n, int snapshot) {
    for (int32_t i = 0; i < g->n_entries; i++) {
        entry *e = &g->entries[i];
        if (e->n == n && memcmp(e->tokens, tokens, (size_t)n * sizeof *tokens) == 0) {
            e->used = ++g->clock;
            td_ctx_seq_truncate(g->ctx, seq, 0);
            g->slot_used[seq] = 0;
            return;
        }
    }
    int32_t *t = n ? td_malloc((size_t)n * sizeof *t) : NULL;
    if ((n && !t) || n == 0 || g->n_entries == g->p.max_sequences) { /* nothing worth keeping, or no memory */
        if (n && !t) g->lost++;
        td_free(t);
        td_ctx_seq_truncate(g->ctx, seq, 0);
        g->slot_used[seq] = 0;
        return;
    }
    memcpy(t, tokens, (size_t)n * sizeof *t);
    if (!g->hybrid) /* an all-attention entry covers every prefix of it: shorter entries inside it are redundant */
        for (int32_t i = 0; i < g->n_entries;) {
            entry *e = &g->entries[i];
            if (e->n < n && memcmp(e->tokens, t, (size_t)e->n * sizeof *t) == 0) entry_drop(g, i);
            else i++;
        }
    entry *e = &g->entries[g->n_entries++];
    e->seq = seq;
    e->tokens = t;
    e->n = n;
    e->used = ++g->clock;
    e->snapshot = snapshot;
}

/* The entry to fork a prompt from and how many positions to take: the longest common prefix, at most n_prompt - 1
 * (the last prompt token must run for its logits); on a hybrid model only entries that are whole prefixes. */
static int32_t best_entry(const td_gen *g, const int32_t *prompt, int32_t n_prompt, int32_t *n_reuse) {
    int32_t best = -1, best_n = 0;
    for (int32_t i = 0; i < g->n_entries; i++) {
        const entry *e = &g->entries[i];
        int32_t lim = e->n < n_prompt - 1 ? e->n : n_prompt - 1, k = 0;
        while (k < lim && e->tokens[k] == prompt[k]) k++;
        if (g->hybrid && k != e->n) continue;
        if (k > best_n) best = i, best_n = k;
    }
    *n_reuse = best_n;
    return best;
}

/* Rows promised to running requests and not yet taken. */
static int64_t outstanding_rows(const td_gen *g) {
    int64_t o = 0;
    for (int32_t i = 0; i < g->n_reqs; i++) {
        const req *r = g->reqs[i];
        if (r->state == R_QUEUED) continue;
        int32_t used = r->n_past - (r->follows ? r->n_prompt : r->n_reused); /* a choice's prompt rows are shared */
        if (r->reserved > used) o += r->reserved - used;
    }
    return o;
}

/* ---- submit, cancel, finish ------------------------------------------------------------------------------------ */

/* Removes request i from the list without events (a submission undone). */
static void unlink_req(td_gen *g, int32_t i) {
    req_free(g->reqs[i]);
    memmove(&g->reqs[i], &g->reqs[i + 1], (size_t)(g->n_reqs - i - 1) * sizeof *g->reqs);
    g->n_reqs--;
    g->st.submitted--;
}

static td_status submit_one(td_gen *g, const td_gen_request *rq, uint64_t seed, int64_t follows, int64_t *id);

td_status td_gen_submit(td_gen *g, const td_gen_request *rq, int64_t *id) {
    return td_gen_submit_n(g, rq, 1, id);
}

td_status td_gen_submit_n(td_gen *g, const td_gen_request *rq, int32_t n, int64_t *ids) {
    for (int32_t k = 0; ids && k < n && k < TD_GEN_MAX_CHOICES; k++) ids[k] = 0;
    if (!g || !rq || !ids) return td_fail(TD_ERR_INVALID_ARG, "td_gen_submit: NULL argument");
    if (n < 1 || n > TD_GEN_MAX_CHOICES || n >= g->p.max_sequences)
        return td_fail(TD_ERR_INVALID_ARG, "n must be in 1..%d and below max_sequences (%d); got %d", TD_GEN_MAX_CHOICES,
                       g->p.max_sequences, n);
    if (rq->n_prompt < 1 || !rq->prompt) return td_fail(TD_ERR_INVALID_ARG, "prompt: empty");
    if (rq->max_tokens < 0) return td_fail(TD_ERR_INVALID_ARG, "max_tokens must be >= 0 (got %d)", rq->max_tokens);
    if (rq->logprobs < -1 || rq->logprobs > MAX_TOP)
        return td_fail(TD_ERR_INVALID_ARG, "logprobs must be in 0..%d (got %d)", MAX_TOP, rq->logprobs);
    if (rq->prompt_logprobs < -1 || rq->prompt_logprobs > MAX_TOP)
        return td_fail(TD_ERR_INVALID_ARG, "prompt_logprobs must be in 0..%d (got %d)", MAX_TOP, rq->prompt_logprobs);
    if (rq->n_stop_ids < 0 || rq->n_stop_ids > MAX_STOP_IDS || (rq->n_stop_ids && !rq->stop_ids))
        return td_fail(TD_ERR_INVALID_ARG, "stop_ids: at most %d ids", MAX_STOP_IDS);
    td_status st = td_sampler_params_check(&rq->sampler);
    if (st != TD_OK) return st;
    for (int32_t i = 0; i < rq->n_prompt; i++)
        if (rq->prompt[i] < 0 || rq->prompt[i] >= g->n_vocab)
            return td_fail(TD_ERR_RANGE, "prompt id %d (position %d) is outside the vocabulary 0..%d", rq->prompt[i], i,
                           g->n_vocab - 1);
    for (int32_t i = 0; i < rq->n_stop_ids; i++)
        if (rq->stop_ids[i] < 0 || rq->stop_ids[i] >= g->n_vocab)
            return td_fail(TD_ERR_RANGE, "stop_ids[%d] = %d is outside the vocabulary", i, rq->stop_ids[i]);
    if ((int64_t)rq->n_prompt + (int64_t)n * rq->max_tokens > g->n_ctx)
        return td_fail(TD_ERR_RANGE, "the prompt (%d tokens) + max_tokens (%d)%s exceed the context (%d rows)",
                       rq->n_prompt, rq->max_tokens, n > 1 ? " for each choice" : "", g->n_ctx);
    int32_t queued = 0;
    for (int32_t i = 0; i < g->n_reqs; i++) queued += g->reqs[i]->state == R_QUEUED;
    if (queued + n > g->p.max_queue)
        return td_fail(TD_ERR_STATE, "the queue is full (%d requests waiting)", queued);
    for (int32_t k = 0; k < n; k++) {
        td_gen_request one = *rq;
        if (k > 0) one.prompt_logprobs = -1; /* the lead reads the prompt (and scores it) for all */
        st = submit_one(g, &one, rq->sampler.seed + (uint64_t)k, k ? ids[0] : 0, &ids[k]);
        if (st != TD_OK) { /* undo the choices already queued: all or none */
            for (int32_t j = g->n_reqs - 1; j >= 0 && k > 0; j--)
                if (g->reqs[j]->id == ids[0] || g->reqs[j]->follows == ids[0]) unlink_req(g, j);
            for (int32_t j = 0; j < n; j++) ids[j] = 0;
            return st;
        }
    }
    return TD_OK;
}

/* Queues one request (validated by the caller); seed: its sampler's; follows: the lead of its choices, or 0. */
static td_status submit_one(td_gen *g, const td_gen_request *rq, uint64_t seed, int64_t follows, int64_t *id) {
    td_status st = TD_OK;
    td_sampler_params sp = rq->sampler;
    sp.seed = seed;
    req *r = td_calloc(1, sizeof *r);
    if (!r) return td_fail_nomem("a request");
    r->p = *rq;
    r->p.prompt = NULL;
    r->p.stop = NULL;
    r->p.stop_ids = NULL;
    r->n_prompt = rq->n_prompt;
    r->prompt = td_malloc((size_t)rq->n_prompt * sizeof *r->prompt);
    r->gen = td_malloc(((size_t)rq->max_tokens + 1) * sizeof *r->gen);
    if (!r->prompt || !r->gen) st = td_fail_nomem("a request");
    if (st == TD_OK) st = td_sampler_new(&sp, g->n_vocab, &r->sampler);
    if (st == TD_OK) st = td_stopper_new(rq->stop, rq->n_stop, &r->stopper);
    if (st == TD_OK && rq->prompt_logprobs >= 0 && rq->n_prompt > 1) {
        size_t k = (size_t)rq->prompt_logprobs;
        r->plp = td_malloc((size_t)(rq->n_prompt - 1) * sizeof *r->plp);
        r->plp_top = td_malloc((size_t)(rq->n_prompt - 1) * (k ? k : 1) * sizeof *r->plp_top);
        r->plp_top_lp = td_malloc((size_t)(rq->n_prompt - 1) * (k ? k : 1) * sizeof *r->plp_top_lp);
        if (!r->plp || !r->plp_top || !r->plp_top_lp) st = td_fail_nomem("prompt logprobs");
    }
    if (st == TD_OK) {
        req **n = td_grow(g->reqs, &g->cap_reqs, (size_t)g->n_reqs + 1, sizeof *n, 16);
        if (!n) st = td_fail_nomem("the request list");
        else g->reqs = n;
    }
    if (st != TD_OK) {
        req_free(r);
        return st;
    }
    memcpy(r->prompt, rq->prompt, (size_t)rq->n_prompt * sizeof *r->prompt);
    if (!rq->ignore_eos) {
        int n;
        const int32_t *s = td_model_stop_ids(g->model, &n);
        for (int i = 0; i < n && r->n_stop_ids < 64; i++) r->stop_ids[r->n_stop_ids++] = s[i];
    }
    for (int32_t i = 0; i < rq->n_stop_ids; i++) r->stop_ids[r->n_stop_ids++] = rq->stop_ids[i];
    r->id = g->next_id++;
    r->follows = follows;
    r->state = R_QUEUED;
    r->seq = -1;
    r->pending = -1;
    r->t_submit = td_now_ms();
    g->reqs[g->n_reqs++] = r;
    g->st.submitted++;
    *id = r->id;
    return TD_OK;
}

/* Ends request i: the DONE event, its sequence cached (or dropped), the request removed. */
static void finish(td_gen *g, int32_t i, td_gen_finish how, int32_t stop_id, const char *error) {
    req *r = g->reqs[i];
    const char *rest = "";
    size_t n_rest = 0;
    if (how != TD_GEN_FINISH_STOP || td_stopper_matched(r->stopper) < 0) {
        int64_t oom0 = td_stopper_oom(r->stopper);
        td_stopper_feed(r->stopper, NULL, 0, 1, &rest, &n_rest); /* what was held back can no longer match */
        g->lost += td_stopper_oom(r->stopper) - oom0;
    }
    ev_store *e = ev_push(g);
    if (e) {
        e->ev.kind = TD_GEN_EVENT_DONE;
        e->ev.request = r->id;
        e->ev.finish = how;
        e->ev.n_generated = r->n_gen;
        e->ev.stop_index = how == TD_GEN_FINISH_STOP ? td_stopper_matched(r->stopper) : -1;
        e->ev.stop_id = stop_id;
        e->ev.n_prompt = r->n_prompt;
        e->ev.n_reused = r->n_reused;
        ev_text(g, e, rest, n_rest);
        if (error) {
            e->error = td_strdup(error);
            if (!e->error) g->lost++;
            e->ev.error = e->error ? e->error : "out of memory";
        }
        double t = td_now_ms();
        e->ev.ms_queue = (r->t_admit ? r->t_admit : t) - r->t_submit;
        e->ev.ms_prefill = r->t_prompt && r->t_admit ? r->t_prompt - r->t_admit : 0;
        e->ev.ms_first_token = r->t_first ? r->t_first - r->t_submit : 0;
        e->ev.ms_decode = r->t_first ? r->t_last - r->t_first : 0;
    }
    if (r->seq >= 0) {
        if (r->state != R_FOLLOW && r->p.cache && how != TD_GEN_FINISH_ERROR && r->n_past > 0) { /* (a choice that
                                                                       never forked holds nothing) */
            /* the sequence holds prompt[0..min(n_past, n_prompt)) then the generated ids that ran */
            int32_t n = r->n_past;
            int32_t *t = td_malloc((size_t)n * sizeof *t);
            if (t) {
                for (int32_t k = 0; k < n; k++) t[k] = k < r->n_prompt ? r->prompt[k] : r->gen[k - r->n_prompt];
                entry_add(g, r->seq, t, n, 0);
                td_free(t);
            } else {
                g->lost++;
                td_ctx_seq_truncate(g->ctx, r->seq, 0);
                g->slot_used[r->seq] = 0;
            }
        } else {
            td_ctx_seq_truncate(g->ctx, r->seq, 0);
            g->slot_used[r->seq] = 0;
        }
    }
    int64_t lead = r->id;
    req_free(r);
    memmove(&g->reqs[i], &g->reqs[i + 1], (size_t)(g->n_reqs - i - 1) * sizeof *g->reqs);
    g->n_reqs--;
    g->st.finished++;
    /* choices still waiting for this request's prompt end with it (they come after it in the list: the caller's
       index i stays valid) */
    for (int32_t j = i; j < g->n_reqs;) {
        req *f = g->reqs[j];
        if (f->follows == lead && (f->state == R_QUEUED || f->state == R_FOLLOW)) finish(g, j, how, -1, error);
        else j++;
    }
}

td_status td_gen_cancel(td_gen *g, int64_t id) {
    if (!g) return td_fail(TD_ERR_INVALID_ARG, "td_gen_cancel: NULL");
    for (int32_t i = 0; i < g->n_reqs; i++)
        if (g->reqs[i]->id == id) {
            int64_t lost0 = g->lost;
            finish(g, i, TD_GEN_FINISH_CANCELLED, -1, NULL);
            return lost_check(g, lost0, "td_gen_cancel");
        }
    return td_fail(TD_ERR_INVALID_ARG, "request %lld is not queued or running", (long long)id);
}

void td_gen_clear_cache(td_gen *g) {
    if (!g) return;
    while (g->n_entries) entry_drop(g, g->n_entries - 1);
}

td_status td_gen_set_logit_bias(td_gen *g, int64_t id, const int32_t *ids, const float *bias, int32_t n) {
    if (!g) return td_fail(TD_ERR_INVALID_ARG, "td_gen_set_logit_bias: NULL");
    for (int32_t i = 0; i < g->n_reqs; i++)
        if (g->reqs[i]->id == id) return td_sampler_set_logit_bias(g->reqs[i]->sampler, ids, bias, n);
    return td_fail(TD_ERR_INVALID_ARG, "request %lld is not queued or running", (long long)id);
}

td_gen_stats td_gen_get_stats(const td_gen *g) {
    td_gen_stats s;
    memset(&s, 0, sizeof s);
    if (!g) return s;
    s = g->st;
    for (int32_t i = 0; i < g->n_reqs; i++) {
        if (g->reqs[i]->state == R_QUEUED) s.queued++;
        else s.running++;
    }
    for (int32_t i = 0; i < g->n_entries; i++) {
        if (g->entries[i].snapshot) s.snapshots++;
        else s.sessions++;
    }
    s.free_rows = td_ctx_n_free_rows(g->ctx);
    return s;
}

/* ---- admission ------------------------------------------------------------------------------------------------ */

/* Tries to start queued request r: a slot, the rows it may need, the fork from the best entry. 1 when started,
 * 0 when it must wait. */
static int32_t n_free_slots(const td_gen *g) {
    int32_t n = 0;
    for (int32_t s = 0; s < g->p.max_sequences; s++) n += !g->slot_used[s];
    return n;
}

/* The queued choices that follow request r (td_gen_submit_n). */
static int32_t n_followers(const td_gen *g, const req *r) {
    int32_t n = 0;
    for (int32_t i = 0; i < g->n_reqs; i++) n += g->reqs[i]->follows == r->id && g->reqs[i]->state == R_QUEUED;
    return n;
}

static int admit(td_gen *g, req *r, int any_running) {
    int32_t reuse = 0, nf = n_followers(g, r);
    int32_t src = r->p.prompt_logprobs >= 0 ? -1 : best_entry(g, r->prompt, r->n_prompt, &reuse);
    if (src < 0) reuse = 0;
    int32_t src_seq = src >= 0 ? g->entries[src].seq : -1;
    int64_t need = (int64_t)r->n_prompt - reuse + r->p.max_tokens, need_choices = (int64_t)nf * r->p.max_tokens;
    for (;;) {
        int64_t avail = td_ctx_n_free_rows(g->ctx) - outstanding_rows(g) - need_choices;
        int slot_ok = n_free_slots(g) >= 1 + nf;
        if (avail >= need && slot_ok) break;
        if (evict_lru(g, src_seq) == 0) continue;
        if (any_running) return 0; /* wait for running requests to finish */
        if (src_seq >= 0) {        /* alone and still short: give up the reuse too */
            src_seq = -1;
            src = -1;
            reuse = 0;
            need = (int64_t)r->n_prompt + r->p.max_tokens;
            continue;
        }
        return 0;
    }
    if (src_seq >= 0) { /* find the entry again: evictions reorder the table */
        src = -1;
        for (int32_t i = 0; i < g->n_entries; i++)
            if (g->entries[i].seq == src_seq) src = i;
    }
    int32_t seq = free_slot(g);
    if (src >= 0 && reuse > 0) {
        if (td_ctx_seq_fork(g->ctx, src_seq, seq, reuse) != TD_OK) reuse = 0;
        else g->entries[src].used = ++g->clock;
    }
    g->slot_used[seq] = 1;
    r->seq = seq;
    r->n_past = reuse;
    r->n_reused = reuse;
    r->reserved = (int32_t)need;
    r->state = R_PREFILL;
    r->t_admit = td_now_ms();
    for (int32_t i = 0; i < g->n_reqs; i++) { /* its further choices: a slot and their rows each, now */
        req *f = g->reqs[i];
        if (f->follows != r->id || f->state != R_QUEUED) continue;
        f->seq = free_slot(g);
        g->slot_used[f->seq] = 1;
        f->state = R_FOLLOW;
        f->n_past = f->n_reused = f->n_prompt;
        f->reserved = f->p.max_tokens;
        f->t_admit = r->t_admit;
    }
    g->st.reused_tokens += reuse;
    for (int32_t k = 0; k < reuse; k++) td_sampler_accept(r->sampler, r->prompt[k]);
    /* turn boundaries ahead (hybrid): the positions just before the last few <|im_start|> of the unreused part */
    if (g->hybrid && g->im_start >= 0 && r->p.cache) {
        int32_t pos[MAX_SNAPS], n = 0;
        for (int32_t k = r->n_prompt - 1; k > reuse && n < MAX_SNAPS; k--)
            if (r->prompt[k] == g->im_start) pos[n++] = k;
        for (int32_t k = 0; k < n; k++) r->snaps[k] = pos[n - 1 - k];
        r->n_snaps = n;
    }
    return 1;
}

/* ---- one step --------------------------------------------------------------------------------------------------- */

/* Samples request i's next token from its logits and applies the stop rules. Returns 1 when the request finished
 * (removed from the list). */
static int take_token(td_gen *g, int32_t i, const float *logits) {
    req *r = g->reqs[i];
    int32_t tok = td_sampler_sample(r->sampler, logits);
    td_sampler_accept(r->sampler, tok);
    double t = td_now_ms();
    if (!r->t_first) r->t_first = t;
    r->t_last = t;
    r->gen[r->n_gen++] = tok;
    int is_stop = 0;
    for (int32_t k = 0; k < r->n_stop_ids; k++) is_stop |= tok == r->stop_ids[k];
    const char *text = "";
    size_t n_text = 0;
    int matched = 0;
    if (!is_stop) {
        size_t len = 0;
        const td_tokenizer *tk = td_model_tokenizer(g->model);
        const char *bytes = tk ? td_token_bytes(tk, tok, &len) : NULL;
        int64_t oom0 = td_stopper_oom(r->stopper);
        matched = td_stopper_feed(r->stopper, bytes, bytes ? len : 0, 0, &text, &n_text);
        g->lost += td_stopper_oom(r->stopper) - oom0;
    }
    ev_store *e = ev_push(g);
    if (e) {
        e->ev.kind = TD_GEN_EVENT_TOKEN;
        e->ev.request = r->id;
        e->ev.token = tok;
        e->ev.index = r->n_gen - 1;
        ev_text(g, e, text, n_text);
        if (r->p.logprobs >= 0) {
            int32_t k = r->p.logprobs;
            if (k) {
                e->top_ids = td_malloc((size_t)k * sizeof *e->top_ids);
                e->top_lp = td_malloc((size_t)k * sizeof *e->top_lp);
            }
            int have = k && e->top_ids && e->top_lp;
            if (k && !have) g->lost++;
            e->ev.logprob = td_logprob(logits, g->n_vocab, tok, have ? k : 0, e->top_ids, e->top_lp);
            e->ev.n_top = have ? k : 0;
            e->ev.top_ids = e->top_ids;
            e->ev.top_logprobs = e->top_lp;
        }
    }
    g->st.decoded_tokens++;
    if (is_stop) {
        finish(g, i, TD_GEN_FINISH_STOP, tok, NULL);
        return 1;
    }
    if (matched) {
        finish(g, i, TD_GEN_FINISH_STOP, -1, NULL);
        return 1;
    }
    if (r->n_gen >= r->p.max_tokens) {
        finish(g, i, TD_GEN_FINISH_LENGTH, -1, NULL);
        return 1;
    }
    r->pending = tok;
    r->state = R_DECODE;
    return 0;
}

static void prompt_done(td_gen *g, req *r) {
    r->t_prompt = td_now_ms();
    ev_store *e = ev_push(g);
    if (!e) return;
    e->ev.kind = TD_GEN_EVENT_PROMPT;
    e->ev.request = r->id;
    e->ev.n_prompt = r->n_prompt;
    e->ev.n_reused = r->n_reused;
    e->ev.ms_prefill = r->t_prompt - r->t_admit;
    e->ev.ms_queue = r->t_admit - r->t_submit;
    if (r->plp) { /* the event takes the arrays over */
        e->plp = r->plp;
        e->ptop = r->plp_top;
        e->ptop_lp = r->plp_top_lp;
        r->plp = NULL;
        r->plp_top = NULL;
        r->plp_top_lp = NULL;
        e->ev.n_prompt_logprobs = r->n_prompt - 1;
        e->ev.prompt_logprobs = e->plp;
        e->ev.n_prompt_top = r->p.prompt_logprobs;
        e->ev.prompt_top_ids = e->ptop;
        e->ev.prompt_top_logprobs = e->ptop_lp;
    }
}

/* The lead r has read the prompt: each of its further choices forks the lead's sequence (the prompt's KV rows are
 * shared, not copied; a DeltaNet state is copied) and draws its first token from the same logits. */
static void start_followers(td_gen *g, req *r, const float *logits) {
    for (int32_t j = 0; j < g->n_reqs;) {
        req *f = g->reqs[j];
        if (f->follows != r->id || f->state != R_FOLLOW) {
            j++;
            continue;
        }
        td_status st = td_ctx_seq_fork(g->ctx, r->seq, f->seq, r->n_past);
        if (st != TD_OK) {
            char msg[512];
            snprintf(msg, sizeof msg, "%s: %s", td_status_str(st), td_last_error());
            finish(g, j, TD_GEN_FINISH_ERROR, -1, msg);
            continue;
        }
        f->n_reused = r->n_reused;
        for (int32_t k = 0; k < f->n_prompt; k++) td_sampler_accept(f->sampler, f->prompt[k]);
        f->t_admit = r->t_admit;
        prompt_done(g, f);
        if (f->p.max_tokens == 0) {
            finish(g, j, TD_GEN_FINISH_LENGTH, -1, NULL);
            continue;
        }
        if (!take_token(g, j, logits)) j++;
    }
}

td_status td_gen_step(td_gen *g, int32_t *n_active) {
    if (n_active) *n_active = 0;
    if (!g) return td_fail(TD_ERR_INVALID_ARG, "td_gen_step: NULL");
    int64_t lost0 = g->lost;
    /* admit in order while there is room */
    int32_t running = 0;
    for (int32_t i = 0; i < g->n_reqs; i++) running += g->reqs[i]->state != R_QUEUED;
    for (int32_t i = 0; i < g->n_reqs && running < g->p.max_running; i++) {
        req *r = g->reqs[i];
        if (r->state != R_QUEUED || r->follows) continue;
        int32_t size = 1 + n_followers(g, r); /* a request of n choices runs n sequences: alone, it may exceed */
        if (running > 0 && running + size > g->p.max_running) break;
        if (!admit(g, r, running > 0)) break;
        running += size;
    }
    /* the batch: one token per decoding request first, then prefill chunks in submission order */
    td_batch_clear(g->batch);
    int32_t budget = g->p.n_batch, n_out = 0;
    int32_t outs_left = g->p.max_running + PLP_CHUNK < g->p.n_batch ? g->p.max_running + PLP_CHUNK : g->p.n_batch;
    for (int32_t i = 0; i < g->n_reqs; i++) {
        req *r = g->reqs[i];
        r->step_tokens = 0;
        r->step_n_out = 0;
        if (r->state != R_DECODE) continue;
        r->step_first_out = n_out;
        td_batch_add(g->batch, r->pending, r->seq, r->n_past, 1);
        r->step_tokens = 1;
        r->step_n_out = 1;
        n_out++;
        outs_left--;
        budget--;
    }
    for (int32_t i = 0; i < g->n_reqs && budget > 0; i++) {
        req *r = g->reqs[i];
        if (r->state != R_PREFILL) continue;
        int32_t end = r->n_prompt;
        if (end - r->n_past > budget) end = r->n_past + budget;
        while (r->next_snap < r->n_snaps && r->snaps[r->next_snap] <= r->n_past) r->next_snap++;
        if (r->next_snap < r->n_snaps && r->snaps[r->next_snap] < end) end = r->snaps[r->next_snap];
        int all = r->p.prompt_logprobs >= 0;
        if (all) {
            if (outs_left <= 0) continue;
            if (end - r->n_past > outs_left) end = r->n_past + outs_left;
        } else if (end == r->n_prompt && outs_left <= 0) {
            if (end - 1 <= r->n_past) continue;
            end--; /* the last prompt token waits for an output slot */
        }
        r->step_first_out = n_out;
        for (int32_t k = r->n_past; k < end; k++) {
            int want = all || k == r->n_prompt - 1;
            td_batch_add(g->batch, r->prompt[k], r->seq, k, want);
            if (want) n_out++, outs_left--, r->step_n_out++;
        }
        r->step_tokens = end - r->n_past;
        budget -= r->step_tokens;
    }
    int32_t n_tok = td_batch_n_tokens(g->batch);
    if (n_tok == 0) {
        if (n_active) *n_active = g->n_reqs;
        return TD_OK;
    }
    td_status st = td_ctx_decode(g->ctx, g->batch);
    g->st.steps++;
    if (st != TD_OK) { /* the requests of this batch end with the error; their sequences are emptied */
        char msg[512];
        snprintf(msg, sizeof msg, "%s: %s", td_status_str(st), td_last_error());
        for (int32_t i = 0; i < g->n_reqs;) {
            req *r = g->reqs[i];
            if (r->step_tokens > 0) finish(g, i, TD_GEN_FINISH_ERROR, -1, msg);
            else i++;
        }
        if (n_active) *n_active = g->n_reqs;
        return lost_check(g, lost0, "td_gen_step");
    }
    for (int32_t i = 0; i < g->n_reqs;) {
        req *r = g->reqs[i];
        if (r->step_tokens == 0) {
            i++;
            continue;
        }
        if (r->state == R_DECODE) {
            r->n_past++;
            if (!take_token(g, i, td_ctx_output(g->ctx, r->step_first_out))) i++;
            continue;
        }
        /* prefill */
        int32_t start = r->n_past;
        r->n_past += r->step_tokens;
        g->st.prefill_tokens += r->step_tokens;
        for (int32_t k = start; k < r->n_past; k++) td_sampler_accept(r->sampler, r->prompt[k]);
        if (r->p.prompt_logprobs >= 0 && r->plp) {
            int32_t kk = r->p.prompt_logprobs;
            for (int32_t k = start; k < r->n_past && k + 1 < r->n_prompt; k++) {
                const float *lg = td_ctx_output(g->ctx, r->step_first_out + (k - start));
                r->plp[k] = td_logprob(lg, g->n_vocab, r->prompt[k + 1], kk, r->plp_top + (size_t)k * (size_t)kk,
                                       r->plp_top_lp + (size_t)k * (size_t)kk);
            }
        }
        /* a snapshot at a turn boundary (hybrid): fork the sequence, which is at its end */
        if (r->next_snap < r->n_snaps && r->n_past == r->snaps[r->next_snap]) {
            r->next_snap++;
            int32_t s = free_slot(g);
            if (s < 0 && evict_lru(g, -1) == 0) s = free_slot(g);
            if (s >= 0 && td_ctx_seq_fork(g->ctx, r->seq, s, r->n_past) == TD_OK) {
                g->slot_used[s] = 1;
                entry_add(g, s, r->prompt, r->n_past, 1);
            }
        }
        if (r->n_past < r->n_prompt) {
            i++;
            continue;
        }
        /* hybrid: the end of the prompt (the generation prompt's boundary) is a snapshot too, unless the request
           itself ends here and leaves its sequence as the session */
        if (g->hybrid && r->p.cache && r->p.max_tokens > 0 && r->n_reused < r->n_prompt) {
            int32_t s = free_slot(g);
            if (s < 0 && evict_lru(g, -1) == 0) s = free_slot(g);
            if (s >= 0 && td_ctx_seq_fork(g->ctx, r->seq, s, r->n_past) == TD_OK) {
                g->slot_used[s] = 1;
                entry_add(g, s, r->prompt, r->n_past, 1);
            }
        }
        prompt_done(g, r);
        const float *lg = td_ctx_output(g->ctx, r->step_first_out + r->step_n_out - 1);
        start_followers(g, r, lg); /* they come after request i: it keeps its index */
        if (r->p.max_tokens == 0) {
            finish(g, i, TD_GEN_FINISH_LENGTH, -1, NULL);
            continue;
        }
        if (!take_token(g, i, lg)) i++;
    }
    if (n_active) *n_active = g->n_reqs;
    return lost_check(g, lost0, "td_gen_step");
}
