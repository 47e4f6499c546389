/* td_gen on the tiny Qwen3 and Qwen3.5 fixtures: a turn that reuses a cached session (Qwen3.5: a DeltaNet
 * snapshot) gives the same tokens and log-probability bits as the same prompt from scratch; a request alone and with
 * three others in its batches gives the same bits; LRU eviction under a small budget keeps results exact; prompt
 * logprobs equal the log-softmax of the context's logits; stop strings, max tokens and cancel end requests with the
 * right reason. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "test_util.h"
#include "typedecide.h"

#define MAXT 64

typedef struct result {
    int32_t tokens[MAXT];
    float lp[MAXT];
    int32_t n, n_reused, n_prompt;
    td_gen_finish finish;
    char text[4096];
    size_t n_text;
    float plp[512];
    int32_t n_plp;
} result;

static int32_t *tokenize(const td_model *m, const char *text, int32_t *n) {
    int32_t *ids = NULL;
    size_t k = 0;
    CHECK(td_tokenize(td_model_tokenizer(m), text, strlen(text), TD_TOKENIZE_PARSE_SPECIAL, &ids, &k) == TD_OK);
    *n = (int32_t)k;
    return ids;
}

static int32_t *chat(const td_model *m, const char *json, int32_t *n) {
    char *text = NULL;
    td_chat_params p = td_chat_default_params();
    p.enable_thinking = 0;
    td_status st = td_chat_render_json(m, json, strlen(json), &p, &text);
    CHECKF(st == TD_OK, "%s", td_last_error());
    int32_t *ids = tokenize(m, text ? text : "x", n);
    td_free(text);
    return ids;
}

/* Takes the events queued so far, filling res[k] for ids[k]. */
static void drain(td_gen *g, const int64_t *ids, result *res, int n) {
    td_gen_event ev;
    while (td_gen_next_event(g, &ev)) {
        int k = 0;
        while (k < n && ids[k] != ev.request) k++;
        if (k == n) continue;
        result *r = &res[k];
        if (ev.kind == TD_GEN_EVENT_PROMPT) {
            r->n_reused = ev.n_reused;
            r->n_prompt = ev.n_prompt;
            r->n_plp = ev.n_prompt_logprobs < 512 ? ev.n_prompt_logprobs : 512;
            for (int32_t i = 0; i < r->n_plp; i++) r->plp[i] = ev.prompt_logprobs[i];
        } else if (ev.kind == TD_GEN_EVENT_TOKEN && r->n < MAXT) {
            r->tokens[r->n] = ev.token;
            r->lp[r->n++] = ev.logprob;
        } else if (ev.kind == TD_GEN_EVENT_DONE) {
            r->finish = ev.finish;
        }
        if ((ev.kind == TD_GEN_EVENT_TOKEN || ev.kind == TD_GEN_EVENT_DONE) && r->n_text + ev.text_len < 4096) {
            memcpy(r->text + r->n_text, ev.text, ev.text_len);
            r->n_text += ev.text_len;
        }
    }
}

/* Runs every step until all requests end, filling res[k] for ids[k]. */
static void run_all(td_gen *g, const int64_t *ids, result *res, int n) {
    int32_t active = 1;
    while (active) {
        CHECK(td_gen_step(g, &active) == TD_OK);
        drain(g, ids, res, n);
    }
}

static td_gen_request request(const int32_t *p, int32_t n, int32_t max_tokens) {
    td_gen_request r = td_gen_default_request();
    r.prompt = p;
    r.n_prompt = n;
    r.max_tokens = max_tokens;
    r.logprobs = 3;
    return r;
}

static int same(const result *a, const result *b) {
    if (a->n != b->n || a->finish != b->finish) return 0;
    for (int32_t i = 0; i < a->n; i++)
        if (a->tokens[i] != b->tokens[i] || memcmp(&a->lp[i], &b->lp[i], sizeof(float)) != 0) return 0;
    return 1;
}

static result *one(const td_model *m, const td_gen_params *gp, const td_gen_request *rq) {
    result *res = calloc(1, sizeof *res);
    td_gen *g = NULL;
    CHECK(td_gen_new(m, gp, &g) == TD_OK);
    int64_t id = 0;
    CHECK(td_gen_submit(g, rq, &id) == TD_OK);
    run_all(g, &id, res, 1);
    td_gen_free(g);
    return res;
}

static void test_model(const char *dir) {
    td_model *m = NULL;
    td_model_params mp = td_model_default_params();
    CHECKF(td_model_load(dir, &mp, &m) == TD_OK, "%s: %s", dir, td_last_error());
    if (!m) return;
    int hybrid = td_model_is_hybrid(m);
    td_gen_params gp = td_gen_default_params();
    gp.n_ctx = 2048;
    gp.cache_bytes = (int64_t)1 << 30;

    /* 1. reuse: turn 2 after turn 1 equals turn 2 from scratch */
    int32_t n1, n2;
    int32_t *p1 = chat(m, "[{\"role\": \"system\", \"content\": \"You are terse.\"}, {\"role\": \"user\", \"content\": "
                          "\"Name three colours.\"}]", &n1);
    td_gen *g = NULL;
    CHECK(td_gen_new(m, &gp, &g) == TD_OK);
    result *r1 = calloc(1, sizeof *r1), *r2 = calloc(1, sizeof *r2);
    td_gen_request rq = request(p1, n1, 12);
    rq.ignore_eos = 1;
    int64_t id = 0;
    CHECK(td_gen_submit(g, &rq, &id) == TD_OK);
    run_all(g, &id, r1, 1);
    CHECK(r1->n == 12 && r1->finish == TD_GEN_FINISH_LENGTH && r1->n_reused == 0);
    char conv2[8192];
    char esc[4096];
    size_t e = 0;
    for (size_t i = 0; i < r1->n_text && e + 8 < sizeof esc; i++) { /* the answer as a JSON string */
        unsigned char c = (unsigned char)r1->text[i];
        if (c == '"' || c == '\\') esc[e++] = '\\', esc[e++] = (char)c;
        else if (c < 0x20) e += (size_t)snprintf(esc + e, 8, "\\u%04x", c);
        else esc[e++] = (char)c;
    }
    esc[e] = 0;
    snprintf(conv2, sizeof conv2,
             "[{\"role\": \"system\", \"content\": \"You are terse.\"}, {\"role\": \"user\", \"content\": \"Name three "
             "colours.\"}, {\"role\": \"assistant\", \"content\": \"%s\"}, {\"role\": \"user\", \"content\": \"And two "
             "more?\"}]",
             esc);
    int32_t *p2 = chat(m, conv2, &n2);
    rq = request(p2, n2, 10);
    rq.ignore_eos = 1;
    CHECK(td_gen_submit(g, &rq, &id) == TD_OK);
    run_all(g, &id, r2, 1);
    CHECKF(r2->n_reused > 10, "%s: turn 2 reused %d tokens", dir, r2->n_reused);
    result *fresh = one(m, &gp, &rq);
    CHECK(fresh->n_reused == 0);
    CHECKF(same(r2, fresh), "%s: the reused turn differs from the fresh one", dir);
    printf("%s: turn 2 (%d prompt tokens) reused %d tokens, same bits as from scratch\n", dir, n2, r2->n_reused);
    td_gen_stats s = td_gen_get_stats(g);
    if (hybrid) CHECKF(s.snapshots > 0, "%s: no DeltaNet snapshot kept", dir);

    /* 2. batch invariance: a sampled request alone, then with three others (one sharing its prefix) */
    td_gen_request x = request(p2, n2, 16);
    x.sampler.temperature = 0.8f;
    x.sampler.top_k = 10;
    x.sampler.seed = 3;
    x.sampler.repetition_penalty = 1.1f;
    x.cache = 0;
    result *alone = one(m, &gp, &x);
    td_gen *gb = NULL;
    CHECK(td_gen_new(m, &gp, &gb) == TD_OK);
    int64_t ids[4];
    result *rb = calloc(4, sizeof *rb);
    int32_t n3;
    int32_t *p3 = tokenize(m, "Once upon a time, in a land far away, there lived", &n3);
    td_gen_request o1 = request(p1, n1, 20), o2 = request(p3, n3, 5), o3 = request(p2, n2 - 3, 9);
    o1.sampler.temperature = 1.0f;
    o1.sampler.seed = 9;
    CHECK(td_gen_submit(gb, &o1, &ids[0]) == TD_OK);
    CHECK(td_gen_submit(gb, &o2, &ids[1]) == TD_OK);
    int32_t act;
    CHECK(td_gen_step(gb, &act) == TD_OK); /* x joins a batch already under way */
    CHECK(td_gen_submit(gb, &x, &ids[2]) == TD_OK);
    CHECK(td_gen_submit(gb, &o3, &ids[3]) == TD_OK);
    run_all(gb, ids, rb, 4);
    CHECKF(same(alone, &rb[2]), "%s: a request's tokens depend on its batch", dir);
    CHECK(alone->n == 16);
    td_gen_free(gb);

    /* 3. prompt logprobs equal the log-softmax of a plain context's logits, bit for bit */
    td_gen_request pl = request(p1, n1, 0);
    pl.prompt_logprobs = 2;
    result *rp = one(m, &gp, &pl);
    CHECK(rp->n_plp == n1 - 1 && rp->finish == TD_GEN_FINISH_LENGTH && rp->n == 0);
    td_ctx_params cp = td_ctx_default_params();
    cp.n_ctx = n1;
    cp.n_batch = n1;
    cp.n_outputs_max = n1;
    td_ctx *ctx = NULL;
    td_batch *b = NULL;
    CHECK(td_ctx_new(m, &cp, &ctx) == TD_OK && td_batch_new(n1, &b) == TD_OK);
    for (int32_t i = 0; i < n1; i++) td_batch_add(b, p1[i], 0, i, 1);
    CHECK(td_ctx_decode(ctx, b) == TD_OK);
    int plp_same = 1;
    for (int32_t i = 0; i + 1 < n1 && i < rp->n_plp; i++) {
        float want = td_logprob(td_ctx_output(ctx, i), td_model_n_vocab(m), p1[i + 1], 0, NULL, NULL);
        plp_same &= memcmp(&want, &rp->plp[i], sizeof want) == 0;
    }
    CHECKF(plp_same, "%s: prompt logprobs differ from the context's log-softmax", dir);
    td_batch_free(b);
    td_ctx_free(ctx);

    /* 4. a stop string ends the request before it; nothing of it is released */
    if (alone->n_text > 6) {
        char stop[8];
        memcpy(stop, alone->text + 3, 3);
        stop[3] = 0;
        if (!strchr(stop, '\xef') && strlen(stop) == 3 && memchr(alone->text, stop[0], 3) == NULL) {
            td_gen_request xs = x;
            const char *stops[1] = {stop};
            xs.stop = stops;
            xs.n_stop = 1;
            result *rs = one(m, &gp, &xs);
            CHECKF(rs->finish == TD_GEN_FINISH_STOP, "%s: stop string \"%s\" did not stop", dir, stop);
            CHECKF(rs->n_text == 3 && memcmp(rs->text, alone->text, 3) == 0, "%s: text before the stop: %.*s", dir,
                   (int)rs->n_text, rs->text);
            free(rs);
        }
    }

    /* 5. LRU eviction under a small budget: results stay exact, sessions get evicted */
    td_gen_params small = gp;
    small.n_ctx = 160;
    small.max_sequences = 3;
    small.max_running = 1;
    td_gen *gs = NULL;
    CHECK(td_gen_new(m, &small, &gs) == TD_OK);
    const char *texts[] = {"The quick brown fox jumps over the lazy dog again and again.",
                           "A completely different sentence about rivers and mountains.",
                           "Numbers: one two three four five six seven eight nine ten.",
                           "The quick brown fox jumps over the lazy dog again and again.",
                           "Yet another prompt, this one about the sea and the sky."};
    for (int k = 0; k < 5; k++) {
        int32_t np;
        int32_t *pp = tokenize(m, texts[k], &np);
        td_gen_request q = request(pp, np, 8);
        q.ignore_eos = 1;
        result *rs = calloc(1, sizeof *rs);
        int64_t qid;
        CHECK(td_gen_submit(gs, &q, &qid) == TD_OK);
        run_all(gs, &qid, rs, 1);
        result *rf = one(m, &small, &q);
        CHECKF(same(rs, rf), "%s: request %d under eviction differs from fresh", dir, k);
        free(rs);
        free(rf);
        td_free(pp);
    }
    s = td_gen_get_stats(gs);
    CHECKF(s.evictions > 0, "%s: no eviction under a 160-row budget", dir);
    CHECK(s.sessions + s.snapshots <= 3);
    td_gen_free(gs);

    /* 6. cancel, refusals */
    int64_t cid;
    td_gen_request cq = request(p1, n1, 30);
    CHECK(td_gen_submit(g, &cq, &cid) == TD_OK);
    CHECK(td_gen_step(g, &act) == TD_OK);
    CHECK(td_gen_cancel(g, cid) == TD_OK);
    td_gen_event ev;
    int cancelled = 0;
    while (td_gen_next_event(g, &ev))
        if (ev.kind == TD_GEN_EVENT_DONE && ev.request == cid) cancelled = ev.finish == TD_GEN_FINISH_CANCELLED;
    CHECK(cancelled);
    CHECK(td_gen_cancel(g, cid) == TD_ERR_INVALID_ARG);
    td_gen_request bad = request(p1, n1, -1);
    CHECK(td_gen_submit(g, &bad, &cid) == TD_ERR_INVALID_ARG);
    bad = request(p1, n1, 5000);
    CHECK(td_gen_submit(g, &bad, &cid) == TD_ERR_RANGE);
    int32_t oob = 1 << 30;
    bad = request(&oob, 1, 1);
    CHECK(td_gen_submit(g, &bad, &cid) == TD_ERR_RANGE);
    bad = request(p1, n1, 1);
    bad.sampler.top_p = 0;
    CHECK(td_gen_submit(g, &bad, &cid) == TD_ERR_INVALID_ARG);

    td_gen_free(g);
    free(r1);
    free(r2);
    free(fresh);
    free(alone);
    free(rb);
    free(rp);
    td_free(p1);
    td_free(p2);
    td_free(p3);
    td_model_free(m);
}

/* kv_f16 halves a KV row, so the same budget caches more rows (the sequences' tables, the activations and the CPU's
 * attention scratch do not shrink): on the demo model (6 layers) at least 1.5x the free rows of f32. */
static void test_kv_f16_rows(void) {
    td_model *m = NULL;
    CHECKF(td_model_load(td_test_path("models/demo-qwen3"), NULL, &m) == TD_OK, "%s", td_last_error());
    if (!m) return;
    int32_t rows[2] = {0, 0};
    for (int f16 = 0; f16 < 2; f16++) {
        td_gen_params gp = td_gen_default_params();
        gp.cache_bytes = (int64_t)64 << 20;
        gp.kv_f16 = f16;
        td_gen *g = NULL;
        CHECKF(td_gen_new(m, &gp, &g) == TD_OK, "%s", td_last_error());
        if (g) rows[f16] = td_gen_get_stats(g).free_rows;
        td_gen_free(g);
    }
    CHECKF(rows[1] >= rows[0] * 3 / 2, "kv_f16: %d free rows against %d in f32 (64 MB)", rows[1], rows[0]);
    printf("kv_f16: %d free rows in 64 MB against %d in f32\n", rows[1], rows[0]);
    td_model_free(m);
}

/* n choices of one request (td_gen_submit_n): choice k equals the same request alone with seed + k, bit for bit
 * (tokens and log-probabilities), on an all-attention and a hybrid model (the fork copies the DeltaNet state), also
 * beside another request and beyond max_running; the prompt is prefilled once; a cancelled lead ends the choices
 * waiting for it; refusals queue nothing; a logit bias set on a request forces its tokens. */
static void test_choices(const char *dir) {
    td_model *m = NULL;
    CHECKF(td_model_load(dir, NULL, &m) == TD_OK, "%s: %s", dir, td_last_error());
    if (!m) return;
    td_gen_params gp = td_gen_default_params();
    gp.n_ctx = 1024;
    gp.max_running = 2; /* a request of 4 choices runs alone, beyond it */
    gp.max_sequences = 12;
    int32_t n_p = 0, n_o = 0;
    int32_t *p = chat(m, "[{\"role\": \"user\", \"content\": \"Write a short poem about the sea.\"}]", &n_p);
    int32_t *other = chat(m, "[{\"role\": \"user\", \"content\": \"Count to five.\"}]", &n_o);
    td_gen_request rq = request(p, n_p, 10);
    rq.ignore_eos = 1;
    rq.sampler.temperature = 1;
    rq.sampler.seed = 77;
    result *alone = calloc(4, sizeof *alone), *res = calloc(5, sizeof *res);
    for (int k = 0; k < 4; k++) { /* each choice's reference: the request alone, seed + k, on a fresh engine */
        td_gen_request a = rq;
        a.sampler.seed = 77 + (uint64_t)k;
        result *r = one(m, &gp, &a);
        alone[k] = *r;
        free(r);
    }
    int distinct = 0;
    for (int k = 1; k < 4; k++) distinct += !same(&alone[k], &alone[0]);
    CHECKF(distinct >= 2, "%s: the 4 seeds gave %d replies other than seed 77's (temperature 1)", dir, distinct);
    for (int beside = 0; beside < 2; beside++) {
        gp.max_running = beside ? 8 : 2;
        td_gen *g = NULL;
        CHECK(td_gen_new(m, &gp, &g) == TD_OK);
        if (!g) break;
        int64_t ids[5] = {0};
        if (beside) { /* another request first: the choices share their steps with it */
            td_gen_request o = request(other, n_o, 6);
            o.ignore_eos = 1;
            CHECK(td_gen_submit(g, &o, &ids[4]) == TD_OK);
        }
        memset(res, 0, 5 * sizeof *res);
        CHECKF(td_gen_submit_n(g, &rq, 4, ids) == TD_OK, "%s", td_last_error());
        CHECK(ids[0] > 0 && ids[1] == ids[0] + 1 && ids[3] == ids[0] + 3);
        run_all(g, ids, res, beside ? 5 : 4);
        for (int k = 0; k < 4; k++) {
            CHECKF(same(&res[k], &alone[k]), "%s: choice %d (beside another request: %d) differs from the request "
                   "alone with seed %d (%d tokens against %d)", dir, k, beside, 77 + k, res[k].n, alone[k].n);
            CHECK(res[k].n == 10 && res[k].finish == TD_GEN_FINISH_LENGTH && res[k].n_prompt == n_p);
        }
        td_gen_stats st = td_gen_get_stats(g);
        int64_t want = n_p - res[0].n_reused + (beside ? n_o : 0);
        CHECKF(st.prefill_tokens == want, "%s: %lld prompt tokens prefilled for 4 choices of a %d-token prompt "
               "(want %lld: once)", dir, (long long)st.prefill_tokens, n_p, (long long)want);
        CHECK(st.finished == st.submitted && st.running == 0 && st.queued == 0);
        td_gen_free(g);
    }
    gp.max_running = 2;
    td_gen *g = NULL;
    CHECK(td_gen_new(m, &gp, &g) == TD_OK);
    if (g) {
        int64_t ids[TD_GEN_MAX_CHOICES];
        /* refusals: nothing queued */
        CHECK(td_gen_submit_n(g, &rq, 0, ids) == TD_ERR_INVALID_ARG);
        CHECK(td_gen_submit_n(g, &rq, TD_GEN_MAX_CHOICES + 1, ids) == TD_ERR_INVALID_ARG);
        CHECK(td_gen_submit_n(g, &rq, 12, ids) == TD_ERR_INVALID_ARG && strstr(td_last_error(), "max_sequences"));
        td_gen_request big = rq;
        big.max_tokens = (1024 - n_p) / 3 + 1; /* one choice fits, three do not */
        CHECK(td_gen_submit_n(g, &big, 3, ids) == TD_ERR_RANGE && strstr(td_last_error(), "each choice"));
        CHECK(td_gen_get_stats(g).queued == 0 && td_gen_get_stats(g).submitted == 0);
        /* a lead cancelled before its prompt is read ends its choices too */
        memset(res, 0, 4 * sizeof *res);
        CHECK(td_gen_submit_n(g, &rq, 4, ids) == TD_OK);
        CHECK(td_gen_cancel(g, ids[0]) == TD_OK);
        run_all(g, ids, res, 4);
        for (int k = 0; k < 4; k++) CHECK(res[k].finish == TD_GEN_FINISH_CANCELLED && res[k].n == 0);
        CHECK(td_gen_get_stats(g).queued == 0 && td_gen_get_stats(g).running == 0);
        /* ... and after it (admitted, waiting for the prompt): a step reads the prompt and samples one token each */
        memset(res, 0, 4 * sizeof *res);
        CHECK(td_gen_submit_n(g, &rq, 3, ids) == TD_OK);
        for (int it = 0; it < 100 && res[1].n == 0; it++) { /* steps until the prompt is read (several on a hybrid) */
            CHECK(td_gen_step(g, NULL) == TD_OK);
            drain(g, ids, res, 3);
        }
        CHECK(res[0].n == 1 && res[1].n == 1 && res[2].n == 1);
        CHECK(td_gen_cancel(g, ids[0]) == TD_OK); /* the others run on: their prompt rows are theirs too */
        run_all(g, ids, res, 3);
        CHECK(res[0].finish == TD_GEN_FINISH_CANCELLED);
        CHECKF(res[1].finish == TD_GEN_FINISH_LENGTH && same(&res[1], &alone[1]) && same(&res[2], &alone[2]),
               "%s: choices 1 and 2 after their lead was cancelled: finish %d %d, %d %d tokens", dir, res[1].finish,
               res[2].finish, res[1].n, res[2].n);
        /* a logit bias of +100 on one token: every token is that one (whatever the sampler would draw) */
        const td_tokenizer *tk = td_model_tokenizer(m);
        int32_t forced = td_token_lookup(tk, "Hello");
        if (forced < 0) forced = 42;
        float up = 100;
        memset(res, 0, sizeof *res);
        CHECK(td_gen_submit(g, &rq, &ids[0]) == TD_OK);
        CHECK(td_gen_set_logit_bias(g, ids[0], &forced, &up, 1) == TD_OK);
        run_all(g, ids, res, 1);
        int all = res[0].n == 10;
        for (int i = 0; i < res[0].n; i++) all &= res[0].tokens[i] == forced;
        CHECKF(all, "%s: a bias of +100 on token %d: %d tokens, not all of them it", dir, forced, res[0].n);
        CHECK(td_gen_set_logit_bias(g, ids[0], &forced, &up, 1) == TD_ERR_INVALID_ARG); /* finished */
        td_gen_free(g);
    }
    free(alone);
    free(res);
    td_free(p);
    td_free(other);
    td_model_free(m);
}

int main(void) {
    test_kv_f16_rows();
    test_model("fixtures/models/qwen3-tiny-tied");
    test_model("fixtures/models/qwen35-tiny-text");
    test_choices("fixtures/models/qwen3-tiny-tied");
    test_choices("fixtures/models/qwen35-tiny-text");
    return td_test_finish("test_gen");
}
