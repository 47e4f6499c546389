/* The typed readout: the head is prefilled once per evidence (batch and serial modes), every criterion's suffix
 * runs from that prefix, and the decision is read from the option letters' logits at the last suffix position
 * (the head restricted to those K rows). Batches of criteria are planned against a memory budget. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "decide/decide_internal.h"
#include "util/alloc.h"
#include "util/clock.h"
#include "util/error.h"
#include "util/strbuf.h"
#include "util/utf8.h"

td_decide_params td_decide_default_params(void) {
    td_decide_params p;
    memset(&p, 0, sizeof p);
    p.mode = TD_DECIDE_BATCH;
    p.n_threads = 1;
    p.memory_mb = 0; /* automatic: td_decider_new */
    return p;
}

/* Forgets the heads td_decide_multi keeps; truncate: also empties their sequences (the context stays). */
static void drop_slots(td_decider *d, int truncate) {
    for (int32_t i = 0; i < TD_DECIDE_SLOTS; i++) {
        if (d->slot_head[i] && truncate && d->ctx) td_ctx_seq_truncate(d->ctx, i, 0);
        td_free(d->slot_head[i]);
        d->slot_head[i] = NULL;
        d->slot_n[i] = 0;
    }
}

void td_decider_free(td_decider *d) {
    if (!d) return;
    drop_slots(d, 0);
    td_suffix_cache_clear(&d->suffixes);
    td_ctx_free(d->ctx);
    td_batch_free(d->batch);
    td_free(d->cached_head);
    td_free(d->instruction);
    td_free(d->slot_map);
    td_free(d);
}

/* memory_mb 0: 1024 MB on the CPU; on a GPU a quarter of its free memory (at least 1024 MB), so that a batch of
 * criteria runs as one pass where the GPU holds it (144 criteria x 45 tokens over 256: ~1.1 GB, which 1024 MB cut
 * into two passes, 7% slower on the H100). */
static int64_t auto_budget_mb(int32_t device) {
    int64_t free_bytes = 0;
    if (device != TD_DEVICE_CUDA || td_device_free_bytes(TD_DEVICE_CUDA, &free_bytes) != TD_OK) return 1024;
    int64_t mb = free_bytes / 4 >> 20;
    return mb > 1024 ? mb : 1024;
}

td_status td_decider_new(const td_model *model, const td_decide_params *params, td_decider **out) {
    if (!model || !out) return td_fail(TD_ERR_INVALID_ARG, "td_decider_new: NULL argument");
    *out = NULL;
    td_decide_params p = params ? *params : td_decide_default_params();
    if (!td_model_tokenizer(model))
        return td_fail(TD_ERR_STATE, "%s: decisions need the model's tokenizer.json", td_model_path(model));
    if (p.mode != TD_DECIDE_BATCH && p.mode != TD_DECIDE_SERIAL && p.mode != TD_DECIDE_FRESH)
        return td_fail(TD_ERR_INVALID_ARG, "unknown decide mode %d", (int)p.mode);
    if (p.n_threads < 1) p.n_threads = 1;
    if (p.memory_mb < 0) return td_fail(TD_ERR_INVALID_ARG, "memory budget must be at least 1 MB (or 0: automatic)");
    if (p.memory_mb == 0) p.memory_mb = auto_budget_mb(p.device);
    if (p.max_batch < 0) return td_fail(TD_ERR_INVALID_ARG, "max_batch must be >= 0");
    if (p.allowed_mass && !td_model_can_generate(model))
        return td_fail(TD_ERR_STATE, "%s: the head was pruned to the option letters: there is no full softmax for "
                                     "allowed_mass", td_model_path(model));
    const char *letters = p.letters ? p.letters : "ABCDEFGHIJKLMNOPQRST";
    size_t nl = strlen(letters);
    if (nl < 1 || nl > TD_DECIDE_MAX_OPTIONS)
        return td_fail(TD_ERR_INVALID_ARG, "letters \"%s\": give 1 to %d letters", letters, TD_DECIDE_MAX_OPTIONS);
    for (size_t i = 0; i < nl; i++) {
        unsigned char c = (unsigned char)letters[i];
        if (c < 0x21 || c > 0x7e) return td_fail(TD_ERR_INVALID_ARG, "letters: character %zu is not a printable ASCII letter", i);
        for (size_t j = 0; j < i; j++)
            if (letters[j] == letters[i]) return td_fail(TD_ERR_INVALID_ARG, "letters: '%c' appears twice", letters[i]);
    }
    if (p.instruction && td_utf8_invalid_at(p.instruction, strlen(p.instruction)) != (size_t)-1)
        return td_fail(TD_ERR_FORMAT, "the instruction is not valid UTF-8 at byte %zu",
                       td_utf8_invalid_at(p.instruction, strlen(p.instruction)));
    td_decider *d = td_calloc(1, sizeof *d);
    if (!d) return td_fail_nomem("a decider");
    d->model = model;
    d->tok = td_model_tokenizer(model);
    d->p = p;
    d->max_token_bytes = 1;
    for (int32_t id = 0; d->tok && id < td_tokenizer_n_tokens(d->tok); id++) {
        size_t tb = 0;
        if (td_token_bytes(d->tok, id, &tb) && (int64_t)tb > d->max_token_bytes) d->max_token_bytes = (int32_t)tb;
    }
    memcpy(d->letters, letters, nl + 1);
    d->n_letters = (int32_t)nl;
    d->instruction = td_strdup(p.instruction ? p.instruction : td_decide_default_instruction());
    d->p.instruction = d->instruction;
    d->p.letters = d->letters;
    td_status st = d->instruction ? td_decide_probe_letters(d) : td_fail_nomem("the instruction");
    if (st != TD_OK) {
        td_decider_free(d);
        return st;
    }
    *out = d;
    return TD_OK;
}

const char *td_decider_slot_map(const td_decider *d) { return d ? d->slot_map : ""; }
const char *td_decider_letters(const td_decider *d) { return d ? d->letters : ""; }
td_decide_stats td_decider_stats(const td_decider *d) {
    td_decide_stats s;
    memset(&s, 0, sizeof s);
    if (!d) return s;
    s = d->stats;
    s.memory_mb = d->p.memory_mb;
    return s;
}

/* ---- planning ------------------------------------------------------------------------------------------------- */

/* Context parameters for a pass of `count` criteria holding `tokens` suffix tokens after an n_head-token head. */
static td_ctx_params plan_params(const td_decider *d, int32_t n_head, int32_t tokens, int32_t count) {
    td_ctx_params cp = td_ctx_default_params();
    int32_t head_chunk = n_head < 512 ? n_head : 512;
    cp.n_ctx = n_head + tokens;
    cp.n_batch = tokens > head_chunk ? tokens : head_chunk;
    if (cp.n_batch < 1) cp.n_batch = 1;
    cp.n_seq_max = 1 + count + count / 2; /* the head, the criteria, their stems (at most one per two) */
    cp.n_outputs_max = count;
    cp.n_threads = d->p.n_threads;
    cp.kv_f16 = d->p.kv_f16;
    cp.device = d->p.device;
    cp.precision = d->p.precision;
    return cp;
}

static int64_t plan_bytes(const td_decider *d, const td_ctx_params *cp) {
    int64_t b = 0;
    td_ctx_memory(d->model, cp, &b);
    return b;
}

/* Sequence 0 no longer holds a cached head (it is about to change, or the context goes). */
static void forget_head(td_decider *d) {
    td_free(d->cached_head);
    d->cached_head = NULL;
    d->n_cached_head = 0;
}

/* cache_head: 1 when sequence 0 already holds exactly these head tokens. */
static int head_is_cached(const td_decider *d, const int32_t *head, int32_t n_head) {
    return d->p.cache_head && d->ctx && d->cached_head && d->n_cached_head == n_head &&
           td_ctx_seq_len(d->ctx, 0) == n_head &&
           (n_head == 0 || memcmp(d->cached_head, head, (size_t)n_head * sizeof *head) == 0);
}

/* Grows the context (and the batch) so that `need` fits; keeps them when they already do. */
static td_status ensure_ctx(td_decider *d, const td_ctx_params *need) {
    td_ctx_params *c = &d->cp;
    if (!d->ctx || c->n_ctx < need->n_ctx || c->n_batch < need->n_batch || c->n_seq_max < need->n_seq_max ||
        c->n_outputs_max < need->n_outputs_max) {
        td_ctx_params np = *need;
        if (d->ctx) { /* never shrink: a later call may need the old size again */
            if (np.n_ctx < c->n_ctx) np.n_ctx = c->n_ctx;
            if (np.n_batch < c->n_batch) np.n_batch = c->n_batch;
            if (np.n_seq_max < c->n_seq_max) np.n_seq_max = c->n_seq_max;
            if (np.n_outputs_max < c->n_outputs_max) np.n_outputs_max = c->n_outputs_max;
            if (plan_bytes(d, &np) > d->p.memory_mb * (1 << 20)) np = *need;
        }
        td_ctx_free(d->ctx);
        d->ctx = NULL;
        forget_head(d);
        drop_slots(d, 0);
        td_status st = td_ctx_new(d->model, &np, &d->ctx);
        if (st != TD_OK) return st;
        *c = np;
    }
    if (d->batch_cap < c->n_batch) {
        td_batch_free(d->batch);
        d->batch = NULL;
        td_status st = td_batch_new(c->n_batch, &d->batch);
        if (st != TD_OK) return st;
        d->batch_cap = c->n_batch;
    }
    return TD_OK;
}

/* ---- running ---------------------------------------------------------------------------------------------------- */

/* Appends tokens ids[0..n) of sequence seq at positions pos0.. to the context in n_batch-sized passes; the last
 * token asks for an output when want_last. */
static td_status run_tokens(td_decider *d, int32_t seq, const int32_t *ids, int32_t n, int32_t pos0, int want_last) {
    for (int32_t i = 0; i < n; i += d->cp.n_batch) {
        int32_t e = n - i < d->cp.n_batch ? n : i + d->cp.n_batch;
        td_batch_clear(d->batch);
        for (int32_t j = i; j < e; j++) td_batch_add(d->batch, ids[j], seq, pos0 + j, want_last && j == n - 1);
        td_status st = td_ctx_decode(d->ctx, d->batch);
        if (st != TD_OK) return st;
        d->stats.forwards++;
    }
    return TD_OK;
}

/* The suffixes of one pass over the head in sequence 0: criterion k in sequence 1 + k, stem s in 1 + count + s.
 * The stems run first, in one forward pass; then every criterion forks from its stem's end (or the head's) and
 * the rest of all suffixes runs in one forward pass, criterion k's last token giving output k. */
static td_status run_pass(td_decider *d, int32_t n_head, const int32_t *const *suffixes, const int32_t *n_suffix,
                          int32_t count) {
    td_stems stems;
    td_status st = td_stems_find(suffixes, n_suffix, count, &stems);
    if (st != TD_OK) return st;
    if (stems.n > 0) {
        td_batch_clear(d->batch);
        for (int32_t s = 0; s < stems.n && st == TD_OK; s++) {
            st = td_ctx_seq_fork(d->ctx, 0, 1 + count + s, n_head);
            for (int32_t j = 0; j < stems.len[s]; j++)
                td_batch_add(d->batch, suffixes[stems.rep[s]][j], 1 + count + s, n_head + j, 0);
        }
        if (st == TD_OK) st = td_ctx_decode(d->ctx, d->batch);
        d->stats.forwards++;
    }
    for (int32_t k = 0; k < count && st == TD_OK; k++) {
        int32_t s = stems.of[k];
        st = s < 0 ? td_ctx_seq_fork(d->ctx, 0, 1 + k, n_head) : td_ctx_seq_fork(d->ctx, 1 + count + s, 1 + k, n_head + stems.len[s]);
    }
    if (st == TD_OK) {
        td_batch_clear(d->batch);
        for (int32_t k = 0; k < count; k++) {
            int32_t from = stems.of[k] < 0 ? 0 : stems.len[stems.of[k]];
            d->stats.shared_tokens += from;
            for (int32_t j = from; j < n_suffix[k]; j++)
                td_batch_add(d->batch, suffixes[k][j], 1 + k, n_head + j, j == n_suffix[k] - 1);
        }
        for (int32_t s = 0; s < stems.n; s++) d->stats.shared_tokens -= stems.len[s]; /* each ran once */
        st = td_ctx_decode(d->ctx, d->batch);
        d->stats.forwards++;
    }
    td_stems_free(&stems);
    return st;
}

/* Reads the decision of output `o` of the last pass. */
static void read_decision(td_decider *d, int32_t o, int32_t n_options, td_decision *out) {
    const float *row = td_ctx_output(d->ctx, o);
    out->n_options = n_options;
    for (int32_t i = 0; i < n_options; i++) out->logits[i] = d->p.allowed_mass ? row[d->letter_ids[i]] : row[i];
    double mx = out->logits[0], sum = 0, e[TD_DECIDE_MAX_OPTIONS];
    for (int32_t i = 1; i < n_options; i++) mx = out->logits[i] > mx ? out->logits[i] : mx;
    for (int32_t i = 0; i < n_options; i++) sum += e[i] = exp((double)out->logits[i] - mx);
    out->best = 0;
    for (int32_t i = 0; i < n_options; i++) {
        out->probs[i] = (float)(e[i] / sum);
        if (out->probs[i] > out->probs[out->best]) out->best = i;
    }
    out->allowed_mass = -1.0f;
    if (d->p.allowed_mass) { /* the share of the full softmax that falls on this criterion's letters */
        int32_t V = td_model_n_vocab(d->model);
        double fmx = row[0], z = 0, on = 0;
        for (int32_t v = 1; v < V; v++) fmx = row[v] > fmx ? row[v] : fmx;
        for (int32_t v = 0; v < V; v++) z += exp((double)row[v] - fmx);
        for (int32_t i = 0; i < n_options; i++) on += exp((double)out->logits[i] - fmx);
        out->allowed_mass = (float)(on / z);
    }
}

/* td_decide_ids' checks of its inputs; *max_opts: the most options of a criterion (at least 1). */
static td_status check_ids(const td_decider *d, const int32_t *head, int32_t n_head, const int32_t *const *suffixes,
                           const int32_t *n_suffix, const int32_t *n_options, int32_t n, int32_t *max_opts_out) {
    int32_t limit = td_model_n_ctx_train(d->model), V = td_model_n_vocab(d->model);
    int32_t max_opts = 1;
    for (int32_t i = 0; i < n; i++) {
        if (n_suffix[i] < 1 || !suffixes[i]) return td_fail(TD_ERR_INVALID_ARG, "criterion %d: empty suffix", i);
        if (n_options[i] < 1 || n_options[i] > d->n_letters)
            return td_fail(TD_ERR_INVALID_ARG, "criterion %d: %d options, but there are %d letters", i, n_options[i],
                           d->n_letters);
        if ((int64_t)n_head + n_suffix[i] > limit)
            return td_fail(TD_ERR_RANGE,
                           "criterion %d: evidence (%d tokens with the instruction) + suffix (%d tokens) exceeds the "
                           "model's context of %d tokens",
                           i, n_head, n_suffix[i], limit);
        for (int32_t j = 0; j < n_suffix[i]; j++)
            if (suffixes[i][j] < 0 || suffixes[i][j] >= V)
                return td_fail(TD_ERR_RANGE, "criterion %d: token id %d outside the vocabulary", i, suffixes[i][j]);
        if (n_options[i] > max_opts) max_opts = n_options[i];
    }
    for (int32_t j = 0; j < n_head; j++)
        if (head[j] < 0 || head[j] >= V) return td_fail(TD_ERR_RANGE, "head token id %d outside the vocabulary", head[j]);
    *max_opts_out = max_opts;
    return TD_OK;
}

td_status td_decide_ids(td_decider *d, const int32_t *head, int32_t n_head, const int32_t *const *suffixes,
                        const int32_t *n_suffix, const int32_t *n_options, int32_t n, td_decision *out) {
    if (!d || (!head && n_head) || n_head < 0 || n < 0 || (n && (!suffixes || !n_suffix || !n_options || !out)))
        return td_fail(TD_ERR_INVALID_ARG, "td_decide_ids: bad argument");
    int32_t max_opts = 1;
    td_status cst = check_ids(d, head, n_head, suffixes, n_suffix, n_options, n, &max_opts);
    if (cst != TD_OK) return cst;
    if (n == 0) return TD_OK;
    drop_slots(d, 1); /* td_decide_multi's heads: their sequences are this call's criteria */

    const int fresh = d->p.mode == TD_DECIDE_FRESH;
    const int64_t budget = d->p.memory_mb * (int64_t)(1 << 20);
    /* plan passes: consecutive criteria while the context for them fits the budget */
    int32_t *pass_end = td_malloc((size_t)n * sizeof *pass_end);
    if (!pass_end) return td_fail_nomem("the batch plan");
    int32_t n_pass = 0, max_tok = 0, max_cnt = 0;
    for (int32_t i = 0; i < n;) {
        int32_t tok = 0, cnt = 0, j = i;
        int32_t cap = d->p.mode == TD_DECIDE_BATCH ? (d->p.max_batch ? d->p.max_batch : n) : 1;
        while (j < n && cnt < cap) {
            td_ctx_params cp = plan_params(d, n_head, tok + n_suffix[j], cnt + 1);
            if (plan_bytes(d, &cp) > budget) break;
            tok += n_suffix[j++];
            cnt++;
        }
        if (cnt == 0) {
            td_ctx_params cp = plan_params(d, n_head, n_suffix[i], 1);
            td_free(pass_end);
            return td_fail(TD_ERR_RANGE, "criterion %d needs %lld MB of context (%d head + %d suffix tokens) but the "
                                         "memory budget is %lld MB",
                           i, (long long)(plan_bytes(d, &cp) >> 20) + 1, n_head, n_suffix[i], (long long)d->p.memory_mb);
        }
        pass_end[n_pass++] = j;
        if (tok > max_tok) max_tok = tok;
        if (cnt > max_cnt) max_cnt = cnt;
        i = j;
    }
    td_ctx_params need = plan_params(d, n_head, max_tok, max_cnt);
    int32_t *joined = fresh ? td_malloc((size_t)(n_head + max_tok) * sizeof *joined) : NULL;
    td_status st = fresh && !joined ? td_fail_nomem("a prompt") : ensure_ctx(d, &need);
    if (st == TD_OK) st = td_ctx_set_output_rows(d->ctx, d->letter_ids, d->p.allowed_mass ? 0 : max_opts);

    double t0 = td_now_ms(), head_ms = 0;
    if (st == TD_OK && !fresh && head_is_cached(d, head, n_head)) {
        d->stats.head_cached++; /* the same head as the last call's, still in sequence 0 */
    } else if (st == TD_OK && !fresh) { /* the shared head, once */
        forget_head(d);
        st = td_ctx_seq_truncate(d->ctx, 0, 0);
        if (st == TD_OK) st = run_tokens(d, 0, head, n_head, 0, 0);
        if (st == TD_ERR_NONFINITE) d->fault = -1;
        head_ms = td_now_ms() - t0;
        d->stats.head_prefills++;
        d->stats.head_tokens += n_head;
        d->stats.head_ms += head_ms;
        if (st == TD_OK && d->p.cache_head && (d->cached_head = td_malloc((size_t)(n_head ? n_head : 1) * sizeof *head))) {
            memcpy(d->cached_head, head, (size_t)n_head * sizeof *head); /* no memory for it: simply not cached */
            d->n_cached_head = n_head;
        }
    } else if (fresh) forget_head(d);
    int64_t macs0 = td_ctx_head_macs(d->ctx);
    for (int32_t p = 0, i0 = 0; st == TD_OK && p < n_pass; i0 = pass_end[p++]) {
        int32_t i1 = pass_end[p];
        double tp = td_now_ms();
        if (fresh) { /* from scratch: head + suffix as one sequence, in passes that cross the boundary */
            memcpy(joined, head, (size_t)n_head * sizeof *joined);
            memcpy(joined + n_head, suffixes[i0], (size_t)n_suffix[i0] * sizeof *joined);
            st = td_ctx_seq_truncate(d->ctx, 0, 0);
            if (st == TD_OK) st = run_tokens(d, 0, joined, n_head + n_suffix[i0], 0, 1);
            if (st == TD_ERR_NONFINITE) d->fault = i0;
            d->stats.head_prefills++;
            d->stats.head_tokens += n_head;
        } else {
            st = run_pass(d, n_head, suffixes + i0, n_suffix + i0, i1 - i0);
            int32_t seq;
            if (st == TD_ERR_NONFINITE && td_ctx_nonfinite(d->ctx, &seq, NULL, NULL) == 0)
                d->fault = seq >= 1 && seq <= i1 - i0 ? i0 + seq - 1 : -2; /* criterion k is sequence 1 + k */
        }
        double pass_ms = td_now_ms() - tp;
        d->stats.suffix_ms += pass_ms;
        for (int32_t i = i0; i < i1 && st == TD_OK; i++) {
            read_decision(d, i - i0, n_options[i], &out[i]);
            out[i].suffix_tokens = n_suffix[i];
            out[i].ms = pass_ms / (double)(i1 - i0) + head_ms / (double)n;
            d->stats.suffix_tokens += n_suffix[i];
            d->stats.criteria++;
        }
        for (int32_t s = 1; !fresh && s <= i1 - i0 + (i1 - i0) / 2; s++) { /* criteria, then stems */
            td_status st2 = td_ctx_seq_truncate(d->ctx, s, 0);
            if (st == TD_OK) st = st2;
        }
    }
    d->stats.head_macs += td_ctx_head_macs(d->ctx) - macs0;
    if (st != TD_OK) forget_head(d);
    if (st == TD_ERR_NONFINITE) {
        if (d->fault >= 0) td_fail_context(st, "criterion %d", d->fault);
        else td_fail_context(st, d->fault == -1 ? "the evidence (with the instruction)" : "the shared start of criteria");
    }
    td_free(pass_end);
    td_free(joined);
    return st;
}

/* ---- text level --------------------------------------------------------------------------------------------------- */

/* Text that reaches the tokenizer must be UTF-8: the error names the user's field and byte, not the prompt's. */
static td_status check_utf8(const char *s, size_t len, const char *what) {
    size_t bad = td_utf8_invalid_at(s, len);
    if (bad == (size_t)-1) return TD_OK;
    return td_fail(TD_ERR_FORMAT, "%s is not valid UTF-8 at byte %zu (of %zu)", what, bad, len);
}

static td_status check_criterion(const td_decider *d, const td_criterion *c, int32_t i) {
    const char *id = c->id && *c->id ? c->id : "(no id)";
    char what[256];
    if (!c->question) return td_fail(TD_ERR_INVALID_ARG, "criterion %d (%s): no question", i, id);
    snprintf(what, sizeof what, "criterion %d (%s): the question", i, id);
    if (check_utf8(c->question, strlen(c->question), what) != TD_OK) return TD_ERR_FORMAT;
    if (c->n_options < 1) return td_fail(TD_ERR_INVALID_ARG, "criterion %d (%s): no options", i, id);
    if (c->n_options > d->n_letters)
        return td_fail(TD_ERR_INVALID_ARG, "criterion %d (%s): %d options, but only %d letters (%s) are available", i,
                       id, c->n_options, d->n_letters, d->letters);
    for (int32_t k = 0; k < c->n_options; k++) {
        if (!c->option_ids || !c->option_ids[k] || !*c->option_ids[k])
            return td_fail(TD_ERR_INVALID_ARG, "criterion %d (%s): option %d has no id", i, id, k);
        if (!c->descriptions || !c->descriptions[k])
            return td_fail(TD_ERR_INVALID_ARG, "criterion %d (%s): option \"%s\" has no description", i, id,
                           c->option_ids[k]);
        snprintf(what, sizeof what, "criterion %d (%s): the description of option \"%s\"", i, id, c->option_ids[k]);
        if (check_utf8(c->descriptions[k], strlen(c->descriptions[k]), what) != TD_OK) return TD_ERR_FORMAT;
        for (int32_t j = 0; j < k; j++)
            if (strcmp(c->option_ids[j], c->option_ids[k]) == 0)
                return td_fail(TD_ERR_INVALID_ARG, "criterion %d (%s): duplicate option id \"%s\"", i, id,
                               c->option_ids[k]);
    }
    return TD_OK;
}

/* Head and suffixes of one call, tokenised. */
typedef struct prepared {
    int32_t *head;
    int32_t n_head;
    int32_t **suf;
    int32_t *n_suf, *n_opt;
    int32_t n;
} prepared;

static void prepared_free(prepared *p) {
    for (int32_t i = 0; p->suf && i < p->n; i++) td_free(p->suf[i]);
    td_free(p->suf);
    td_free(p->n_suf);
    td_free(p->n_opt);
    td_free(p->head);
    memset(p, 0, sizeof *p);
}

static td_status prepare(td_decider *d, const td_shot *shots, int32_t n_shots, const char *evidence, size_t len,
                         const td_criterion *criteria, int32_t n, prepared *p) {
    memset(p, 0, sizeof *p);
    if (!d || (!evidence && len) || n < 0 || n_shots < 0 || (n && (!criteria)) || (n_shots && !shots))
        return td_fail(TD_ERR_INVALID_ARG, "td_decide: bad argument");
    for (int32_t i = 0; i < n; i++) {
        td_status st = check_criterion(d, &criteria[i], i);
        if (st != TD_OK) return st;
    }
    for (int32_t i = 0; i < n_shots; i++) {
        td_status st = check_criterion(d, &shots[i].criterion, i);
        if (st != TD_OK) return td_fail_context(st, "shot %d", i);
        if (shots[i].answer < 0 || shots[i].answer >= shots[i].criterion.n_options || (!shots[i].evidence && shots[i].evidence_len))
            return td_fail(TD_ERR_INVALID_ARG, "shot %d: answer index %d is not one of its %d options", i, shots[i].answer,
                           shots[i].criterion.n_options);
        char what[64];
        snprintf(what, sizeof what, "shot %d: the evidence", i);
        if ((st = check_utf8(shots[i].evidence ? shots[i].evidence : "", shots[i].evidence_len, what)) != TD_OK) return st;
    }
    /* Evidence that cannot fit is refused from its length, before tokenizing it (megabytes take seconds and
     * gigabytes): a token covers at most max_token_bytes bytes, and NFC shortens a text at most 3-fold (Hangul jamo
     * compose 9 bytes into 3), so the evidence alone is at least len / (3 * max_token_bytes) tokens. */
    int64_t at_least = (int64_t)(len / (3 * (size_t)d->max_token_bytes));
    if (at_least > td_model_n_ctx_train(d->model))
        return td_fail(TD_ERR_RANGE, "the evidence (%zu bytes: at least %lld tokens, a token being at most %d bytes) "
                                     "exceeds the model's context of %d tokens (not tokenized)",
                       len, (long long)at_least, d->max_token_bytes, td_model_n_ctx_train(d->model));
    td_status est = check_utf8(evidence ? evidence : "", len, "the evidence");
    if (est != TD_OK) return est;
    size_t hl, nh = 0;
    char *head_text = td_decide_render_head(d, shots, n_shots, evidence ? evidence : "", len, &hl);
    p->n = n;
    p->suf = td_calloc((size_t)(n ? n : 1), sizeof *p->suf);
    p->n_suf = td_calloc((size_t)(n ? n : 1), sizeof *p->n_suf);
    p->n_opt = td_calloc((size_t)(n ? n : 1), sizeof *p->n_opt);
    td_status st = head_text && p->suf && p->n_suf && p->n_opt ? TD_OK : td_fail_nomem("the prompts");
    if (st == TD_OK && (st = td_tokenize(d->tok, head_text, hl, TD_TOKENIZE_ADD_BOS, &p->head, &nh)) != TD_OK)
        td_fail_context(st, "evidence"); /* a tokenizer with a BOS (Llama, Gemma) starts the head with it */
    p->n_head = (int32_t)nh;
    for (int32_t i = 0; i < n && st == TD_OK; i++) {
        size_t sl, ns = 0;
        char *s = td_decide_render_suffix(&criteria[i], d->letters, &sl);
        if (!s) st = td_fail_nomem("a suffix");
        else if ((st = td_suffix_tokens(d, s, sl, &p->suf[i], &ns)) != TD_OK)
            td_fail_context(st, "criterion %d (%s)", i, criteria[i].id ? criteria[i].id : "");
        td_free(s);
        p->n_suf[i] = (int32_t)ns;
        p->n_opt[i] = criteria[i].n_options;
    }
    td_free(head_text);
    if (st != TD_OK) prepared_free(p);
    return st;
}

td_status td_decide_shots(td_decider *d, const td_shot *shots, int32_t n_shots, const char *evidence, size_t len,
                          const td_criterion *criteria, int32_t n, td_decision *out) {
    if (n && !out) return td_fail(TD_ERR_INVALID_ARG, "td_decide: NULL output");
    prepared p;
    td_status st = prepare(d, shots, n_shots, evidence, len, criteria, n, &p);
    if (st != TD_OK) return st;
    st = td_decide_ids(d, p.head, p.n_head, (const int32_t *const *)p.suf, p.n_suf, p.n_opt, n, out);
    if (st == TD_ERR_NONFINITE && d->fault >= 0 && d->fault < n && criteria[d->fault].id)
        td_fail_context(st, "\"%s\"", criteria[d->fault].id);
    prepared_free(&p);
    return st;
}

td_status td_decide(td_decider *d, const char *evidence, size_t len, const td_criterion *criteria, int32_t n,
                    td_decision *out) {
    return td_decide_shots(d, NULL, 0, evidence, len, criteria, n, out);
}

/* ---- several evidences per pass (td_decide_multi) ----------------------------------------------------------------- */

static void group_fail(td_decide_group *g, td_status st) {
    g->status = st;
    snprintf(g->error, sizeof g->error, "%s", td_last_error());
}

/* One group alone, through td_decide_ids (a group too large to share a pass, a decider not in batch mode, or a
 * shared pass that failed: then each of its groups runs alone so that one group's fault stays its own). */
static void group_alone(td_decider *d, td_decide_group *g, const prepared *p) {
    drop_slots(d, 1);
    forget_head(d);
    td_decide_stats s0 = d->stats;
    td_status st = td_decide_ids(d, p->head, p->n_head, (const int32_t *const *)p->suf, p->n_suf, p->n_opt, g->n, g->out);
    if (st == TD_ERR_NONFINITE && d->fault >= 0 && d->fault < g->n && g->criteria[d->fault].id)
        td_fail_context(st, "\"%s\"", g->criteria[d->fault].id);
    if (st != TD_OK) group_fail(g, st);
    g->prefill_tokens = (int32_t)(d->stats.head_tokens - s0.head_tokens);
    g->head_cached = d->stats.head_cached > s0.head_cached;
    forget_head(d); /* sequence 0 is a slot again for the next pass: emptied, so that passes plan every row */
    if (d->ctx) td_ctx_seq_truncate(d->ctx, 0, 0);
}

static int same_head(const prepared *a, const int32_t *head, int32_t n_head) {
    return a->n_head == n_head && memcmp(a->head, head, (size_t)n_head * sizeof *head) == 0;
}

static int slot_holds(const td_decider *d, int32_t s, const int32_t *head, int32_t n_head) {
    return d->slot_head[s] && d->slot_n[s] == n_head && memcmp(d->slot_head[s], head, (size_t)n_head * sizeof *head) == 0;
}

/* The context for a pass: `rows` KV rows of heads, `tok` suffix tokens of `count` criteria (and their stems: at most
 * one per two criteria). */
static td_ctx_params multi_params(const td_decider *d, int32_t rows, int32_t tok, int32_t count) {
    td_ctx_params cp = plan_params(d, rows, tok, count);
    cp.n_seq_max = TD_DECIDE_SLOTS + count + count / 2;
    return cp;
}

/* The stems of a shared pass (stems.c), found among the criteria of each head apart (a stem continues one head):
 * criterion o (the pass's output order) of[o] (-1: none); stem i is the first len[i] tokens of tok[i] (a member's
 * suffix), after the head of slot[i], which is head[i] tokens long. */
typedef struct multi_stems {
    int32_t n, *of, *len, *slot, *head;
    const int32_t **tok;
} multi_stems;

static void multi_stems_free(multi_stems *m) {
    td_free(m->of);
    td_free(m->len);
    td_free(m->slot);
    td_free(m->head);
    td_free(m->tok);
    memset(m, 0, sizeof *m);
}

static td_status multi_stems_find(const prepared *pp, int32_t n, const int32_t *uniq, int32_t n_u,
                                  const int32_t *slot_of, int32_t count, multi_stems *m) {
    memset(m, 0, sizeof *m);
    size_t c1 = (size_t)(count ? count : 1);
    const int32_t **suf = td_malloc(c1 * sizeof *suf);
    int32_t *len = td_malloc(c1 * sizeof *len), *outs = td_malloc(c1 * sizeof *outs);
    m->of = td_malloc(c1 * sizeof *m->of);
    m->len = td_malloc(c1 * sizeof *m->len), m->slot = td_malloc(c1 * sizeof *m->slot);
    m->head = td_malloc(c1 * sizeof *m->head), m->tok = td_malloc(c1 * sizeof *m->tok);
    td_status st = suf && len && outs && m->of && m->len && m->slot && m->head && m->tok ? TD_OK
                                                                                        : td_fail_nomem("the stems");
    for (int32_t u = 0; u < n_u && st == TD_OK; u++) {
        int32_t c = 0, n_head = 0; /* head u's criteria, in output order */
        for (int32_t k = 0, o = 0; k < n; o += pp[k].n, k++) {
            if (uniq[k] == u) n_head = pp[k].n_head;
            for (int32_t j = 0; j < pp[k].n && uniq[k] == u; j++) {
                suf[c] = pp[k].suf[j], len[c] = pp[k].n_suf[j];
                outs[c++] = o + j;
            }
        }
        td_stems st_u;
        if ((st = td_stems_find(suf, len, c, &st_u)) != TD_OK) break;
        for (int32_t i = 0; i < c; i++) m->of[outs[i]] = st_u.of[i] < 0 ? -1 : m->n + st_u.of[i];
        for (int32_t i = 0; i < st_u.n; i++) {
            m->len[m->n + i] = st_u.len[i];
            m->tok[m->n + i] = suf[st_u.rep[i]];
            m->slot[m->n + i] = slot_of[u];
            m->head[m->n + i] = n_head;
        }
        m->n += st_u.n;
        td_stems_free(&st_u);
    }
    td_free(suf);
    td_free(len);
    td_free(outs);
    if (st != TD_OK) multi_stems_free(m);
    return st;
}

/* New heads' tokens per forward pass: as td_decide's head chunks (larger passes do not run faster on the CPU). */
#ifndef HEAD_CHUNK
#define HEAD_CHUNK 512
#endif
/* Groups in one shared pass at most. */
#define PASS_GROUPS (4 * TD_DECIDE_SLOTS)

/* One shared pass over groups g[0..n) (all valid, 1 <= n <= PASS_GROUPS, at most TD_DECIDE_SLOTS distinct heads). */
static td_status multi_pass(td_decider *d, td_decide_group *g, const prepared *pp, int32_t n, int32_t rows, int32_t tok,
                            int32_t count) {
    const int64_t budget = d->p.memory_mb * (int64_t)(1 << 20);
    int32_t slot_of[TD_DECIDE_SLOTS], first[TD_DECIDE_SLOTS], n_u = 0, uniq[PASS_GROUPS], max_opts = 1;
    int hit[TD_DECIDE_SLOTS];
    for (int32_t k = 0; k < n; k++) { /* the pass's distinct heads, each with the group that brought it first */
        int32_t u = 0;
        while (u < n_u && !same_head(&pp[first[u]], pp[k].head, pp[k].n_head)) u++;
        if (u == n_u) first[n_u++] = k;
        uniq[k] = u;
        for (int32_t c = 0; c < pp[k].n; c++) max_opts = pp[k].n_opt[c] > max_opts ? pp[k].n_opt[c] : max_opts;
    }
    for (int32_t u = 0; u < n_u; u++) { /* kept from an earlier pass? */
        slot_of[u] = -1;
        for (int32_t s = 0; s < TD_DECIDE_SLOTS && slot_of[u] < 0; s++)
            if (slot_holds(d, s, pp[first[u]].head, pp[first[u]].n_head)) slot_of[u] = s;
    }
    td_ctx_params need = multi_params(d, rows, tok, count);
    const td_ctx_params *have = &d->cp;
    if (d->ctx && have->n_ctx >= need.n_ctx && have->n_batch >= need.n_batch && have->n_seq_max >= need.n_seq_max &&
        have->n_outputs_max >= need.n_outputs_max) {
        /* the context holds the pass: kept heads it does not use make room, least recently used first */
        int32_t new_rows = tok;
        for (int32_t u = 0; u < n_u; u++) new_rows += slot_of[u] < 0 ? pp[first[u]].n_head : 0;
        while (td_ctx_n_free_rows(d->ctx) < new_rows) {
            int32_t lru = -1;
            for (int32_t s = 0; s < TD_DECIDE_SLOTS; s++) {
                int used = 0;
                for (int32_t u = 0; u < n_u; u++) used |= slot_of[u] == s;
                if (d->slot_head[s] && !used && (lru < 0 || d->slot_used[s] < d->slot_used[lru])) lru = s;
            }
            if (lru < 0) break;
            td_ctx_seq_truncate(d->ctx, lru, 0);
            td_free(d->slot_head[lru]);
            d->slot_head[lru] = NULL;
        }
    } else { /* a new context (the kept heads go with the old one): room for twice this pass if the budget allows */
        td_ctx_params big = multi_params(d, 2 * rows + tok, tok, 2 * count);
        if (plan_bytes(d, &big) <= budget) need = big;
    }
    forget_head(d);
    td_status st = ensure_ctx(d, &need); /* a new context forgets every kept head */
    if (st == TD_OK) st = td_ctx_set_output_rows(d->ctx, d->letter_ids, d->p.allowed_mass ? 0 : max_opts);
    if (st != TD_OK) return st;
    for (int32_t u = 0; u < n_u; u++) {
        if (slot_of[u] >= 0 && !d->slot_head[slot_of[u]]) slot_of[u] = -1;
        hit[u] = slot_of[u] >= 0;
        if (hit[u]) d->slot_used[slot_of[u]] = ++d->slot_clock;
    }
    double t0 = td_now_ms();
    td_batch_clear(d->batch);
    int32_t nb = 0, new_heads = 0, head_chunk = d->cp.n_batch < HEAD_CHUNK ? d->cp.n_batch : HEAD_CHUNK;
    for (int32_t u = 0; u < n_u && st == TD_OK; u++) { /* the new heads: a free slot, else the least recently used */
        if (hit[u]) continue;
        int32_t best = -1;
        for (int32_t s = 0; s < TD_DECIDE_SLOTS; s++) {
            int taken = 0;
            for (int32_t v = 0; v < n_u; v++) taken |= slot_of[v] == s;
            if (taken) continue;
            if (!d->slot_head[s]) {
                best = s;
                break;
            }
            if (best < 0 || d->slot_used[s] < d->slot_used[best]) best = s;
        }
        slot_of[u] = best; /* n_u <= TD_DECIDE_SLOTS: always found */
        td_free(d->slot_head[best]);
        d->slot_head[best] = NULL;
        st = td_ctx_seq_truncate(d->ctx, best, 0);
        const prepared *p = &pp[first[u]];
        for (int32_t t = 0; t < p->n_head && st == TD_OK; t++) {
            if (nb == head_chunk) {
                st = td_ctx_decode(d->ctx, d->batch);
                d->stats.forwards++;
                td_batch_clear(d->batch);
                nb = 0;
            }
            if (st == TD_OK) st = td_batch_add(d->batch, p->head[t], best, t, 0);
            nb++;
        }
        new_heads++;
        d->stats.head_prefills++;
        d->stats.head_tokens += p->n_head;
    }
    if (st == TD_OK && nb) {
        st = td_ctx_decode(d->ctx, d->batch);
        d->stats.forwards++;
    }
    for (int32_t u = 0; u < n_u && st == TD_OK; u++) {
        int32_t s = slot_of[u];
        if (hit[u]) continue;
        d->slot_head[s] = td_malloc((size_t)pp[first[u]].n_head * sizeof(int32_t) + 1);
        if (d->slot_head[s]) { /* no memory for the copy: simply not kept */
            memcpy(d->slot_head[s], pp[first[u]].head, (size_t)pp[first[u]].n_head * sizeof(int32_t));
            d->slot_n[s] = pp[first[u]].n_head;
            d->slot_used[s] = ++d->slot_clock;
        } else td_ctx_seq_truncate(d->ctx, s, 0);
    }
    double head_ms = td_now_ms() - t0;
    d->stats.head_ms += head_ms;
    /* the stems (a token prefix criteria of one head share: run once, in sequence TD_DECIDE_SLOTS + count + i), then
     * every criterion forks from its stem's end or its head (sequence TD_DECIDE_SLOTS + its output) and the rest of
     * all suffixes runs at once, as td_decide's run_pass does for one head */
    double tp = td_now_ms();
    multi_stems ms = {0};
    if (st == TD_OK) st = multi_stems_find(pp, n, uniq, n_u, slot_of, count, &ms);
    if (st == TD_OK && ms.n > 0) {
        td_batch_clear(d->batch);
        for (int32_t i = 0; i < ms.n && st == TD_OK; i++) {
            int32_t seq = TD_DECIDE_SLOTS + count + i, h = ms.head[i];
            st = td_ctx_seq_fork(d->ctx, ms.slot[i], seq, h);
            for (int32_t j = 0; j < ms.len[i] && st == TD_OK; j++)
                st = td_batch_add(d->batch, ms.tok[i][j], seq, h + j, 0);
        }
        if (st == TD_OK) st = td_ctx_decode(d->ctx, d->batch);
        d->stats.forwards++;
    }
    if (st == TD_OK) td_batch_clear(d->batch);
    for (int32_t k = 0, o = 0; k < n && st == TD_OK; k++) {
        int32_t s = slot_of[uniq[k]];
        for (int32_t c = 0; c < pp[k].n && st == TD_OK; c++, o++) {
            int32_t stem = ms.of[o], from = stem < 0 ? 0 : ms.len[stem];
            st = stem < 0 ? td_ctx_seq_fork(d->ctx, s, TD_DECIDE_SLOTS + o, pp[k].n_head)
                          : td_ctx_seq_fork(d->ctx, TD_DECIDE_SLOTS + count + stem, TD_DECIDE_SLOTS + o, pp[k].n_head + from);
            d->stats.shared_tokens += from;
            for (int32_t j = from; j < pp[k].n_suf[c] && st == TD_OK; j++)
                st = td_batch_add(d->batch, pp[k].suf[c][j], TD_DECIDE_SLOTS + o, pp[k].n_head + j, j == pp[k].n_suf[c] - 1);
        }
    }
    for (int32_t i = 0; i < ms.n; i++) d->stats.shared_tokens -= ms.len[i]; /* each ran once */
    int64_t macs0 = d->ctx ? td_ctx_head_macs(d->ctx) : 0;
    if (st == TD_OK) {
        st = td_ctx_decode(d->ctx, d->batch);
        d->stats.forwards++;
    }
    double pass_ms = td_now_ms() - tp;
    d->stats.suffix_ms += pass_ms;
    for (int32_t k = 0, o = 0; k < n && st == TD_OK; k++) {
        g[k].prefill_tokens = !hit[uniq[k]] && first[uniq[k]] == k ? pp[k].n_head : 0;
        g[k].head_cached = g[k].prefill_tokens == 0;
        if (g[k].head_cached) d->stats.head_cached++;
        for (int32_t c = 0; c < pp[k].n; c++, o++) {
            read_decision(d, o, pp[k].n_opt[c], &g[k].out[c]);
            g[k].out[c].suffix_tokens = pp[k].n_suf[c];
            g[k].out[c].ms = pass_ms / (double)count + (new_heads ? head_ms / (double)count : 0);
            d->stats.suffix_tokens += pp[k].n_suf[c];
            d->stats.criteria++;
        }
    }
    if (d->ctx) d->stats.head_macs += td_ctx_head_macs(d->ctx) - macs0;
    for (int32_t o = 0; d->ctx && o < count + ms.n; o++) td_ctx_seq_truncate(d->ctx, TD_DECIDE_SLOTS + o, 0);
    multi_stems_free(&ms);
    if (st != TD_OK) drop_slots(d, 1);
    return st;
}

td_status td_decide_multi(td_decider *d, td_decide_group *g, int32_t n_groups) {
    if (!d || n_groups < 0 || (n_groups && !g)) return td_fail(TD_ERR_INVALID_ARG, "td_decide_multi: bad argument");
    prepared *pp = td_calloc((size_t)(n_groups ? n_groups : 1), sizeof *pp);
    if (!pp) return td_fail_nomem("the groups");
    const int64_t budget = d->p.memory_mb * (int64_t)(1 << 20);
    if (d->cached_head && d->ctx) td_ctx_seq_truncate(d->ctx, 0, 0); /* td_decide's head: sequence 0 is a slot */
    forget_head(d);
    for (int32_t i = 0; i < n_groups; i++) {
        td_decide_group *gi = &g[i];
        gi->status = TD_OK;
        gi->error[0] = 0;
        gi->prefill_tokens = 0;
        gi->head_cached = 0;
        td_status st = gi->n < 0 || (gi->n && (!gi->criteria || !gi->out))
                           ? td_fail(TD_ERR_INVALID_ARG, "td_decide_multi: group %d: bad argument", i)
                           : prepare(d, NULL, 0, gi->evidence, gi->len, gi->criteria, gi->n, &pp[i]);
        int32_t mo;
        if (st == TD_OK)
            st = check_ids(d, pp[i].head, pp[i].n_head, (const int32_t *const *)pp[i].suf, pp[i].n_suf, pp[i].n_opt,
                           gi->n, &mo);
        if (st != TD_OK) {
            group_fail(gi, st);
            prepared_free(&pp[i]);
        }
    }
    int32_t cap = d->p.max_batch ? d->p.max_batch : INT32_MAX;
    for (int32_t i = 0; i < n_groups;) {
        if (g[i].status != TD_OK || g[i].n == 0) {
            i++;
            continue;
        }
        if (d->p.mode != TD_DECIDE_BATCH) {
            group_alone(d, &g[i], &pp[i]);
            i++;
            continue;
        }
        /* the pass: groups i.. in order while their distinct heads fit the slots and everything fits the budget */
        int32_t j = i, rows = 0, tok = 0, count = 0, n_u = 0, n_pass = 0;
        const prepared *u_of[TD_DECIDE_SLOTS];
        while (j < n_groups && n_pass < PASS_GROUPS) {
            if (g[j].status != TD_OK || g[j].n == 0) break; /* failed or empty groups end a pass (kept in order) */
            int32_t u = 0, t = 0;
            while (u < n_u && !same_head(u_of[u], pp[j].head, pp[j].n_head)) u++;
            if (u == n_u && n_u == TD_DECIDE_SLOTS) break;
            for (int32_t c = 0; c < g[j].n; c++) t += pp[j].n_suf[c];
            int32_t nrows = rows + (u == n_u ? pp[j].n_head : 0);
            td_ctx_params cp = multi_params(d, nrows, tok + t, count + g[j].n);
            if (count + g[j].n > cap || plan_bytes(d, &cp) > budget) break;
            if (u == n_u) u_of[n_u++] = &pp[j];
            rows = nrows, tok += t, count += g[j].n;
            n_pass++, j++;
        }
        if (n_pass == 0) { /* too large to share a pass: alone, in td_decide_ids' own passes */
            group_alone(d, &g[i], &pp[i]);
            i++;
            continue;
        }
        td_status st = multi_pass(d, g + i, pp + i, n_pass, rows, tok, count);
        if (st != TD_OK) /* one group's fault (a non-finite value) or memory: each group alone */
            for (int32_t k = i; k < j; k++) group_alone(d, &g[k], &pp[k]);
        i = j;
    }
    for (int32_t i = 0; i < n_groups; i++) prepared_free(&pp[i]);
    td_free(pp);
    return TD_OK;
}

td_status td_decide_generate(td_decider *d, const td_shot *shots, int32_t n_shots, const char *evidence, size_t len,
                             const td_criterion *criteria, int32_t n, int32_t max_tokens, char **texts) {
    if (n && !texts) return td_fail(TD_ERR_INVALID_ARG, "td_decide_generate: NULL output");
    if (max_tokens < 1) return td_fail(TD_ERR_INVALID_ARG, "td_decide_generate: max_tokens must be >= 1");
    if (d && !td_model_can_generate(d->model))
        return td_fail(TD_ERR_STATE, "%s: the head was pruned to the option letters: it cannot generate",
                       td_model_path(d->model));
    prepared p;
    td_status st = prepare(d, shots, n_shots, evidence, len, criteria, n, &p);
    if (st != TD_OK) return st;
    int32_t limit = td_model_n_ctx_train(d->model), V = td_model_n_vocab(d->model), max_suf = 1;
    for (int32_t i = 0; i < n; i++) max_suf = p.n_suf[i] > max_suf ? p.n_suf[i] : max_suf;
    if ((int64_t)p.n_head + max_suf + max_tokens > limit)
        st = td_fail(TD_ERR_RANGE, "evidence (%d tokens) + suffix (%d) + answer (%d) exceeds the model's context of %d",
                     p.n_head, max_suf, max_tokens, limit);
    td_ctx_params need = plan_params(d, p.n_head, max_suf + max_tokens, 1);
    if (st == TD_OK) st = ensure_ctx(d, &need);
    if (st == TD_OK) st = td_ctx_set_output_rows(d->ctx, NULL, 0); /* free text needs the whole vocabulary */
    forget_head(d);
    if (st == TD_OK) st = td_ctx_seq_truncate(d->ctx, 0, 0);
    if (st == TD_OK) st = run_tokens(d, 0, p.head, p.n_head, 0, 0);
    d->stats.head_prefills++;
    d->stats.head_tokens += p.n_head;
    int n_stop = 0;
    const int32_t *stops = td_model_stop_ids(d->model, &n_stop);
    td_sampler_params greedy = td_sampler_default_params();
    uint64_t rng = greedy.seed;
    for (int32_t i = 0; i < n; i++) texts[i] = NULL;
    for (int32_t i = 0; i < n && st == TD_OK; i++) {
        td_strbuf txt = TD_STRBUF_INIT;
        if (td_strbuf_reserve(&txt, 0)) st = td_fail_nomem("an answer");
        if (st == TD_OK) st = td_ctx_seq_fork(d->ctx, 0, 1, p.n_head);
        if (st == TD_OK) st = run_tokens(d, 1, p.suf[i], p.n_suf[i], p.n_head, 1);
        d->stats.suffix_tokens += p.n_suf[i];
        int32_t pos = p.n_head + p.n_suf[i];
        for (int32_t k = 0; k < max_tokens && st == TD_OK; k++) {
            const float *lg = td_ctx_output(d->ctx, 0);
            int32_t best = td_sample(lg, V, &greedy, &rng, NULL); /* the one sampler chain, greedy */
            int stop = 0;
            for (int s = 0; s < n_stop; s++) stop |= best == stops[s];
            if (stop) break;
            size_t bl;
            const char *b = td_token_bytes(d->tok, best, &bl);
            if (b) td_strbuf_put(&txt, b, bl);
            if (txt.oom) st = td_fail_nomem("an answer");
            const char *t = txt.s;
            size_t tl = txt.n;
            int has_text = 0;
            for (size_t c = 0; c < tl && !has_text; c++) has_text = t[c] != ' ' && t[c] != '\n' && t[c] != '\t';
            if (has_text && memchr(t, '\n', tl) && t[tl - 1] == '\n') break; /* a line of answer is enough */
            if (k + 1 == max_tokens || st != TD_OK) break;
            td_batch_clear(d->batch);
            td_batch_add(d->batch, best, 1, pos++, 1);
            st = td_ctx_decode(d->ctx, d->batch);
            d->stats.forwards++;
        }
        texts[i] = td_strbuf_finish(&txt, NULL); /* NULL when out of memory (st says so) */
        d->stats.criteria++;
        td_status st2 = td_ctx_seq_truncate(d->ctx, 1, 0);
        if (st == TD_OK) st = st2;
    }
    if (st != TD_OK)
        for (int32_t i = 0; i < n; i++) {
            td_free(texts[i]);
            texts[i] = NULL;
        }
    prepared_free(&p);
    return st;
}
