/* The sampler chain on hand-computed cases (greedy, top_k, top_p, min_p, repetition / presence / frequency
 * penalties and their window), seed determinism, log-probabilities, the model's defaults from
 * generation_config.json, and stop strings across token boundaries with UTF-8 held back. */
#include <math.h>
#include <string.h>

#include "test_util.h"
#include "typedecide.h"

static td_sampler *make(td_sampler_params p, int32_t n) {
    td_sampler *s = NULL;
    CHECK(td_sampler_new(&p, n, &s) == TD_OK);
    return s;
}

/* The ids drawn in `draws` samples, as counts. */
static void counts(td_sampler_params p, const float *logits, int32_t n, int draws, int *c) {
    td_sampler *s = make(p, n);
    memset(c, 0, (size_t)n * sizeof *c);
    for (int i = 0; i < draws; i++) {
        int32_t id = td_sampler_sample(s, logits);
        CHECK(id >= 0 && id < n);
        if (id >= 0 && id < n) c[id]++;
    }
    td_sampler_free(s);
}

static void feed_all(td_stopper *s, const char *const *pieces, int n, char *out, int *matched) {
    size_t o = 0;
    *matched = 0;
    for (int i = 0; i <= n; i++) {
        const char *t;
        size_t l;
        int m = i < n ? td_stopper_feed(s, pieces[i], strlen(pieces[i]), 0, &t, &l)
                      : td_stopper_feed(s, NULL, 0, 1, &t, &l);
        memcpy(out + o, t, l);
        o += l;
        *matched |= m;
    }
    out[o] = 0;
}

int main(void) {
    const float lg[4] = {1, 2, 3, 4}; /* softmax: 0.0321 0.0871 0.2369 0.6439 */
    int c[4];
    td_sampler_params p = td_sampler_default_params();
    CHECK(p.temperature == 0 && p.top_k == 0 && p.top_p == 1 && p.min_p == 0 && p.repetition_penalty == 1);

    /* greedy: argmax, lowest id on ties */
    counts(p, lg, 4, 10, c);
    CHECK(c[3] == 10);
    const float tie[3] = {5, 7, 7};
    counts(p, tie, 3, 3, c);
    CHECK(c[1] == 3);
    /* greedy over long rows (the vectorised scan's blocks of 16 and its tail): the lowest id of the largest value,
     * NaN never winning (a NaN first logit gives id 0, as a plain `x[i] > x[best]` scan does), -0 equal to +0 */
    const float pool[9] = {0.0f, -0.0f, 1, -1, NAN, INFINITY, -INFINITY, 2, 2};
    float row[70];
    uint64_t r = 1;
    for (int it = 0; it < 20000; it++) {
        int32_t n = 1 + (int32_t)(it % 70), want = 0;
        for (int32_t i = 0; i < n; i++) {
            r = r * 6364136223846793005ull + 1442695040888963407ull;
            row[i] = pool[(r >> 33) % 9];
            if (row[i] > row[want]) want = i;
        }
        td_sampler *s = make(p, n);
        int32_t got = td_sampler_sample(s, row);
        td_sampler_free(s);
        if (got != want) {
            CHECKF(0, "greedy over %d logits: id %d, want %d", n, got, want);
            break;
        }
    }

    p.temperature = 1;
    p.top_k = 1; /* top_k 1 is greedy whatever the seed */
    counts(p, lg, 4, 200, c);
    CHECK(c[3] == 200);
    p.top_k = 2; /* only ids 2 and 3; P(3) = e^4 / (e^3 + e^4) = 0.731 */
    counts(p, lg, 4, 4000, c);
    CHECK(c[0] == 0 && c[1] == 0);
    CHECKF(fabs(c[3] / 4000.0 - 0.731) < 0.03, "top_k 2: P(3) = %g", c[3] / 4000.0);
    p.top_k = 0; /* off: every id can come */
    counts(p, lg, 4, 4000, c);
    CHECK(c[0] > 60 && c[1] > 200);

    p.top_p = 0.6f; /* 0.6439 reaches 0.6: only id 3 */
    counts(p, lg, 4, 300, c);
    CHECK(c[3] == 300);
    p.top_p = 0.85f; /* 0.6439 + 0.2369 = 0.8808: ids 3 and 2 */
    counts(p, lg, 4, 4000, c);
    CHECK(c[0] == 0 && c[1] == 0 && c[2] > 0);
    CHECKF(fabs(c[3] / 4000.0 - 0.731) < 0.03, "top_p 0.85: P(3) = %g", c[3] / 4000.0);
    p.top_p = 0.9f; /* + 0.0871 = 0.9679: ids 3, 2, 1 */
    counts(p, lg, 4, 4000, c);
    CHECK(c[0] == 0 && c[1] > 0);
    p.top_p = 1;

    p.min_p = 0.3f; /* threshold 0.193: 0.2369 stays, 0.0871 goes */
    counts(p, lg, 4, 2000, c);
    CHECK(c[0] == 0 && c[1] == 0 && c[2] > 0);
    p.min_p = 0.4f; /* threshold 0.2576: only id 3 */
    counts(p, lg, 4, 300, c);
    CHECK(c[3] == 300);
    p.min_p = 0;

    /* seeds: the same seed gives the same draws, another seed others */
    td_sampler *a = make(p, 4), *b = make(p, 4);
    p.seed = 2;
    td_sampler *d = make(p, 4);
    int same_ab = 1, same_ad = 1;
    for (int i = 0; i < 200; i++) {
        int32_t x = td_sampler_sample(a, lg), y = td_sampler_sample(b, lg), z = td_sampler_sample(d, lg);
        same_ab &= x == y;
        same_ad &= x == z;
    }
    CHECK(same_ab && !same_ad);
    td_sampler_reset(a);
    td_sampler_reset(b);
    CHECK(td_sampler_sample(a, lg) == td_sampler_sample(b, lg));
    td_sampler_free(a);
    td_sampler_free(b);
    td_sampler_free(d);

    /* penalties (greedy reads the penalised logits) */
    td_sampler_params q = td_sampler_default_params();
    const float pen[4] = {1, 2, -1, 1.5f};
    q.repetition_penalty = 2; /* id 1: 2 / 2 = 1, id 2: -1 * 2 = -2 -> argmax id 3 (1.5) */
    td_sampler *s = make(q, 4);
    CHECK(td_sampler_sample(s, pen) == 1);
    td_sampler_accept(s, 1);
    td_sampler_accept(s, 2);
    CHECK(td_sampler_sample(s, pen) == 3);
    td_sampler_free(s);
    const float pr[3] = {1, 1.2f, 0};
    q = td_sampler_default_params();
    q.presence_penalty = 0.5f; /* id 1: 1.2 - 0.5 = 0.7 < 1 */
    s = make(q, 3);
    td_sampler_accept(s, 1);
    td_sampler_accept(s, 1);
    CHECK(td_sampler_sample(s, pr) == 0);
    td_sampler_free(s);
    q = td_sampler_default_params();
    q.frequency_penalty = 0.1f; /* once: 1.1 > 1; three times: 0.9 < 1 */
    s = make(q, 3);
    td_sampler_accept(s, 1);
    CHECK(td_sampler_sample(s, pr) == 1);
    td_sampler_accept(s, 1);
    td_sampler_accept(s, 1);
    CHECK(td_sampler_sample(s, pr) == 0);
    td_sampler_free(s);
    q.penalty_last_n = 2; /* the window holds the last two tokens */
    q.frequency_penalty = 0.15f;
    s = make(q, 3);
    td_sampler_accept(s, 1);
    td_sampler_accept(s, 1);
    td_sampler_accept(s, 1);
    CHECK(td_sampler_sample(s, pr) == 0); /* id 1 twice in the window: 1.2 - 0.3 = 0.9 < 1 */
    td_sampler_accept(s, 0);
    td_sampler_accept(s, 2);
    CHECK(td_sampler_sample(s, pr) == 1); /* id 1 left the window; id 0 is penalised */
    td_sampler_free(s);
    q = td_sampler_default_params();
    q.penalty_last_n = 0; /* 0 = penalties off */
    q.repetition_penalty = 100;
    s = make(q, 4);
    td_sampler_accept(s, 3);
    CHECK(td_sampler_sample(s, lg) == 3);
    td_sampler_free(s);

    /* log-probabilities */
    const float two[2] = {0, (float)log(3.0)};
    int32_t top[2];
    float tlp[2];
    float l1 = td_logprob(two, 2, 1, 2, top, tlp);
    CHECK(fabs(l1 - log(0.75)) < 1e-6 && top[0] == 1 && top[1] == 0 && fabs(tlp[1] - log(0.25)) < 1e-6);
    CHECK(isinf(td_logprob(two, 2, 5, 0, NULL, NULL)));

    /* logit bias (OpenAI's logit_bias): step 0, on the raw logits, greedy included */
    {
        const int32_t id0 = 0, id3 = 3, id1 = 1;
        const float up = 100, down = -100, three = 3;
        q = td_sampler_default_params(); /* greedy */
        s = make(q, 4);
        CHECK(td_sampler_set_logit_bias(s, &id0, &up, 1) == TD_OK);
        CHECK(td_sampler_sample(s, lg) == 0); /* +100 forces id 0 (logit 1 -> 101) */
        CHECK(lg[0] == 1 && lg[3] == 4);     /* the caller's logits are not modified */
        CHECK(td_sampler_set_logit_bias(s, &id3, &down, 1) == TD_OK); /* replaces the earlier bias */
        CHECK(td_sampler_sample(s, lg) == 2); /* -100 bans id 3: the argmax is id 2 */
        td_sampler_reset(s);                  /* the bias stays across a reset */
        CHECK(td_sampler_sample(s, lg) == 2);
        CHECK(td_sampler_set_logit_bias(s, NULL, NULL, 0) == TD_OK); /* n = 0 removes it */
        CHECK(td_sampler_sample(s, lg) == 3);
        td_sampler_free(s);
        q.temperature = 1; /* sampled: every draw is the forced id, the banned id never comes */
        s = make(q, 4);
        CHECK(td_sampler_set_logit_bias(s, &id0, &up, 1) == TD_OK);
        int all0 = 1;
        for (int i = 0; i < 2000; i++) all0 &= td_sampler_sample(s, lg) == 0;
        CHECK(all0);
        td_sampler_free(s);
        s = make(q, 4);
        CHECK(td_sampler_set_logit_bias(s, &id3, &down, 1) == TD_OK);
        int n3 = 0, n2 = 0;
        for (int i = 0; i < 4000; i++) {
            int32_t x = td_sampler_sample(s, lg);
            n3 += x == 3, n2 += x == 2;
        }
        CHECKF(n3 == 0 && n2 > 2000, "bias -100 on id 3: %d draws of id 3, %d of id 2", n3, n2);
        td_sampler_free(s);
        /* before the penalties: id 1 (2 + 3 = 5) repeated under repetition_penalty 2 gives 2.5 < 4 (after them it
           would be 2 / 2 + 3 = 4, a tie that greedy breaks toward id 1) */
        q = td_sampler_default_params();
        q.repetition_penalty = 2;
        s = make(q, 4);
        CHECK(td_sampler_set_logit_bias(s, &id1, &three, 1) == TD_OK);
        CHECK(td_sampler_sample(s, lg) == 1);
        td_sampler_accept(s, 1);
        CHECK(td_sampler_sample(s, lg) == 3);
        /* refusals leave the sampler as it was */
        const int32_t bad_id = 4, twice[2] = {1, 1};
        const float nan1 = NAN, two_b[2] = {1, 2};
        CHECK(td_sampler_set_logit_bias(s, &bad_id, &up, 1) == TD_ERR_RANGE && strstr(td_last_error(), "id 4"));
        CHECK(td_sampler_set_logit_bias(s, &id0, &nan1, 1) == TD_ERR_INVALID_ARG && strstr(td_last_error(), "finite"));
        CHECK(td_sampler_set_logit_bias(s, twice, two_b, 2) == TD_ERR_INVALID_ARG && strstr(td_last_error(), "twice"));
        CHECK(td_sampler_set_logit_bias(s, NULL, &up, 1) == TD_ERR_INVALID_ARG);
        td_sampler_reset(s);
        CHECK(td_sampler_sample(s, lg) == 1); /* still +3 on id 1 */
        td_sampler_free(s);
    }

    /* refusals name the field */
    q = td_sampler_default_params();
    q.top_p = 0;
    CHECK(td_sampler_params_check(&q) == TD_ERR_INVALID_ARG && strstr(td_last_error(), "top_p"));
    q = td_sampler_default_params();
    q.temperature = NAN;
    CHECK(td_sampler_params_check(&q) == TD_ERR_INVALID_ARG && strstr(td_last_error(), "temperature"));
    q = td_sampler_default_params();
    q.top_k = -1;
    CHECK(td_sampler_params_check(&q) == TD_ERR_INVALID_ARG && strstr(td_last_error(), "top_k"));
    q = td_sampler_default_params();
    q.presence_penalty = 3;
    CHECK(td_sampler_params_check(&q) == TD_ERR_INVALID_ARG);

    /* the model's defaults come from its generation_config.json */
    td_model *m = NULL;
    td_model_params mp = td_model_default_params();
    CHECK(td_model_load("fixtures/models/qwen3-tiny-tied", &mp, &m) == TD_OK);
    td_sampler_params md = td_model_sampler_defaults(m);
    CHECK(fabsf(md.temperature - 0.6f) < 1e-7f && md.top_k == 20 && fabsf(md.top_p - 0.95f) < 1e-7f);
    char *json = NULL;
    CHECK(td_sampler_params_json(&md, &json) == TD_OK);
    CHECK(json && strstr(json, "\"top_k\": 20") && strstr(json, "\"temperature\": 0.600000024"));
    td_free(json);
    int n_stop;
    const int32_t *stops = td_model_stop_ids(m, &n_stop);
    CHECK(n_stop == 2 && stops[0] == 2050 && stops[1] == 2048);
    td_model_free(m);

    /* stop strings across token boundaries */
    const char *stops2[2] = {"</s>", "STOP"};
    td_stopper *st = NULL;
    CHECK(td_stopper_new(stops2, 2, &st) == TD_OK);
    const char *t;
    size_t l;
    CHECK(td_stopper_feed(st, "Hello <", 7, 0, &t, &l) == 0 && l == 6 && memcmp(t, "Hello ", 6) == 0);
    CHECK(td_stopper_feed(st, "/", 1, 0, &t, &l) == 0 && l == 0);
    CHECK(td_stopper_feed(st, "s> tail", 7, 0, &t, &l) == 1 && l == 0);
    CHECK(td_stopper_matched(st) == 0);
    CHECK(td_stopper_feed(st, "more", 4, 0, &t, &l) == 1 && l == 0);
    td_stopper_free(st);
    char out[256];
    int matched;
    CHECK(td_stopper_new(stops2, 2, &st) == TD_OK);
    const char *p1[] = {"a <", "x ST", "OR", "E ", "S", "TO", "P!"};
    feed_all(st, p1, 7, out, &matched);
    CHECK(matched && strcmp(out, "a <x STORE ") == 0 && td_stopper_matched(st) == 1);
    td_stopper_free(st);
    CHECK(td_stopper_new(stops2, 2, &st) == TD_OK);
    const char *p2[] = {"caf\xc3", "\xa9 S", "T"}; /* é split over two tokens; "ST" held to the end */
    CHECK(td_stopper_feed(st, p2[0], strlen(p2[0]), 0, &t, &l) == 0 && l == 3 && memcmp(t, "caf", 3) == 0);
    CHECK(td_stopper_feed(st, p2[1], strlen(p2[1]), 0, &t, &l) == 0 && l == 3 && memcmp(t, "\xc3\xa9 ", 3) == 0);
    CHECK(td_stopper_feed(st, p2[2], 1, 0, &t, &l) == 0 && l == 0);
    CHECK(td_stopper_feed(st, NULL, 0, 1, &t, &l) == 0 && l == 2 && memcmp(t, "ST", 2) == 0);
    td_stopper_free(st);
    CHECK(td_stopper_new(NULL, 0, &st) == TD_OK); /* no stops: bytes that never form a character become U+FFFD */
    const char *p3[] = {"a\xff", "b\xe2\x82"};
    feed_all(st, p3, 2, out, &matched);
    CHECK(!matched && strcmp(out, "a\xef\xbf\xbd" "b\xef\xbf\xbd\xef\xbf\xbd") == 0);
    td_stopper_free(st);
    const char *empty[1] = {""};
    CHECK(td_stopper_new(empty, 1, &st) == TD_ERR_INVALID_ARG);
    return td_test_finish("test_sampler");
}
