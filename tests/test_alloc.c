/* Allocation failures, every one: a run of load + decide + evaluate (+ predictions and metrics) through the public
 * API is repeated with its Nth allocation failing, for every N from 1 to the number of allocations the run makes
 * when nothing fails. Each run must return a status (TD_ERR_NOMEM, or an error that names an allocation) from the
 * call that needed the memory, never crash, and leave nothing allocated: the test's allocator counts live blocks,
 * and under ASan (the sanitizer build) LeakSanitizer checks everything at exit as well.
 * The same for a tokenizer alone: loaded from a GGUF file's metadata, used, written as tokenizer.json and read back,
 * and for generation: a chat rendered, two requests (stop strings, logprobs, prompt logprobs) run by td_gen.
 * Also: td_ctx_memory equals the bytes td_ctx_new allocates, for Qwen3 and Qwen3.5 at two context sizes and
 * several parameter sets. */
#include <execinfo.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "test_util.h"
#include "typedecide.h"
#include "typedecide_eval.h"
#include "typedecide_run.h"

/* ---- a counting allocator that can fail the Nth allocation ---------------------------------------------------- */

typedef struct counter {
    int64_t calls;     /* allocations so far */
    int64_t fail_at;   /* 1-based allocation to fail; 0: none */
    int64_t failed;    /* allocations refused */
    int64_t live;      /* blocks allocated and not freed */
    int64_t bytes;     /* bytes requested */
} counter;

static counter C;

static int64_t trace_at; /* TD_ALLOC_TRACE=N: print where allocation N of a failing run comes from */

static int refuse(void) {
    C.calls++;
    if (C.fail_at && C.calls == C.fail_at) {
        C.failed++;
        if (trace_at == C.fail_at) {
            void *frames[40];
            backtrace_symbols_fd(frames, backtrace(frames, 40), 2);
        }
        return 1;
    }
    return 0;
}

static void *t_malloc(void *user, size_t size) {
    (void)user;
    if (refuse()) return NULL;
    void *p = malloc(size);
    if (p) C.live++, C.bytes += (int64_t)size;
    return p;
}

static void *t_realloc(void *user, void *ptr, size_t size) {
    (void)user;
    if (refuse()) return NULL;
    void *p = realloc(ptr, size);
    if (p && !ptr) C.live++;
    if (p) C.bytes += (int64_t)size;
    return p;
}

static void *t_aligned(void *user, size_t align, size_t size) {
    (void)user;
    if (refuse()) return NULL;
    void *p = aligned_alloc(align, size);
    if (p) C.live++, C.bytes += (int64_t)size;
    return p;
}

static void t_free(void *user, void *ptr) {
    (void)user;
    if (ptr) C.live--;
    free(ptr);
}

static const td_allocator counting = {t_malloc, t_realloc, t_aligned, t_free, NULL};

/* ---- a small model to run it on ------------------------------------------------------------------------------
 * The fixtures' 2048-token tokenizer alone makes ~20,000 allocations to load, too many to fail one by one. Here: a
 * byte-level BPE tokenizer.json of the Qwen family (NFC, the Qwen3 Split regex, ByteLevel) with the 256 byte
 * tokens, 24 merges (" A" .. " T" become one token each, so the letters probe as decide needs) and three added
 * tokens, and random checkpoints of both architectures with that vocabulary. */

/* The byte-level alphabet: bytes 33-126, 161-172 and 174-255 stand for themselves, the other 68 map in order to
 * U+0100 onwards. Writes the UTF-8 of byte b's character, JSON-escaped, and returns its length. */
static int byte_char(int b, char *out) {
    int n = 0, cp = b;
    if (!((b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255))) {
        cp = 256;
        for (int x = 0; x < b; x++) cp += !((x >= 33 && x <= 126) || (x >= 161 && x <= 172) || (x >= 174 && x <= 255));
    }
    if (cp == '"' || cp == '\\') out[n++] = '\\';
    if (cp < 0x80) out[n++] = (char)cp;
    else out[n++] = (char)(0xc0 | (cp >> 6)), out[n++] = (char)(0x80 | (cp & 0x3f));
    out[n] = 0;
    return n;
}

static int write_tokenizer(const char *path) {
    FILE *f = fopen(path, "w");
    if (!f) return -1;
    fputs("{\"version\": \"1.0\", \"added_tokens\": [", f);
    const char *added[] = {"<|endoftext|>", "<|im_start|>", "<|im_end|>"};
    for (int i = 0; i < 3; i++)
        fprintf(f, "%s{\"id\": %d, \"content\": \"%s\", \"single_word\": false, \"lstrip\": false, \"rstrip\": false, "
                   "\"normalized\": false, \"special\": true}", i ? ", " : "", 280 + i, added[i]);
    fputs("], \"normalizer\": {\"type\": \"NFC\"}, \"pre_tokenizer\": {\"type\": \"Sequence\", \"pretokenizers\": "
          "[{\"type\": \"Split\", \"pattern\": {\"Regex\": \"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\\\r\\\\n\\\\p{L}\\\\p{N}]?\\\\p{L}+|"
          "\\\\p{N}| ?[^\\\\s\\\\p{L}\\\\p{N}]+[\\\\r\\\\n]*|\\\\s*[\\\\r\\\\n]+|\\\\s+(?!\\\\S)|\\\\s+\"}, \"behavior\": \"Isolated\", "
          "\"invert\": false}, {\"type\": \"ByteLevel\", \"add_prefix_space\": false, \"trim_offsets\": false, "
          "\"use_regex\": false}]}, \"post_processor\": null, \"decoder\": {\"type\": \"ByteLevel\", "
          "\"add_prefix_space\": false, \"trim_offsets\": false, \"use_regex\": false}, \"model\": {\"type\": \"BPE\", "
          "\"dropout\": null, \"unk_token\": null, \"continuing_subword_prefix\": \"\", \"end_of_word_suffix\": \"\", "
          "\"fuse_unk\": false, \"byte_fallback\": false, \"ignore_merges\": false, \"vocab\": {", f);
    char ch[8], sp[8];
    for (int b = 0; b < 256; b++) {
        byte_char(b, ch);
        fprintf(f, "%s\"%s\": %d", b ? ", " : "", ch, b);
    }
    byte_char(' ', sp);
    for (int i = 0; i < 20; i++) fprintf(f, ", \"%s%c\": %d", sp, 'A' + i, 256 + i);
    fprintf(f, ", \"er\": 276, \"th\": 277, \"in\": 278, \"%st\": 279}, \"merges\": [", sp);
    for (int i = 0; i < 20; i++) fprintf(f, "%s[\"%s\", \"%c\"]", i ? ", " : "", sp, 'A' + i);
    fprintf(f, ", [\"e\", \"r\"], [\"t\", \"h\"], [\"i\", \"n\"], \"%s t\"]}}\n", sp); /* one merge as "a b" */
    return fclose(f);
}

static const char qwen3_config[] =
    "{\"model_type\": \"qwen3\", \"vocab_size\": 288, \"hidden_size\": 32, \"num_hidden_layers\": 2, "
    "\"num_attention_heads\": 4, \"num_key_value_heads\": 2, \"head_dim\": 16, \"intermediate_size\": 64, "
    "\"max_position_embeddings\": 2048, \"rms_norm_eps\": 1e-6, \"rope_theta\": 1000000, \"tie_word_embeddings\": true}";
static const char qwen35_config[] =
    "{\"model_type\": \"qwen3_5_text\", \"vocab_size\": 288, \"hidden_size\": 32, \"num_hidden_layers\": 2, "
    "\"layer_types\": [\"linear_attention\", \"full_attention\"], \"num_attention_heads\": 2, "
    "\"num_key_value_heads\": 1, \"head_dim\": 16, \"intermediate_size\": 64, \"max_position_embeddings\": 2048, "
    "\"rms_norm_eps\": 1e-6, \"linear_num_key_heads\": 2, \"linear_num_value_heads\": 4, \"linear_key_head_dim\": 8, "
    "\"linear_value_head_dim\": 8, \"linear_conv_kernel_dim\": 4, \"tie_word_embeddings\": false, "
    "\"rope_parameters\": {\"rope_type\": \"default\", \"rope_theta\": 10000000, \"partial_rotary_factor\": 0.25}}";

/* ---- the run ------------------------------------------------------------------------------------------------- */

static const char fixture[] =
    "{\"id\": \"a\", \"family\": \"f\", \"evidence\": \"The parcel arrived broken.\", \"question\": \"Is it damaged?\", "
    "\"options\": [{\"id\": \"y\", \"description\": \"Yes\"}, {\"id\": \"n\", \"description\": \"No\"}], \"answer\": \"y\"}\n"
    "{\"id\": \"b\", \"family\": \"f\", \"evidence\": \"The parcel arrived broken.\", \"question\": \"Who writes?\", "
    "\"options\": [{\"id\": \"c\", \"description\": \"A customer\"}, {\"id\": \"s\", \"description\": \"Staff\"}, "
    "{\"id\": \"u\", \"description\": \"Unknown\"}], \"answer\": \"c\"}\n"
    "{\"id\": \"c\", \"family\": \"f\", \"evidence\": \"Refund me now.\", \"question\": \"Refund?\", "
    "\"options\": [{\"id\": \"y\", \"description\": \"Yes\"}, {\"id\": \"n\", \"description\": \"No\"}], \"answer\": \"y\"}\n";

/* A corpus for td_run: two documents (one with criteria of its own) and a bad line. */
static const char corpus[] =
    "{\"id\": \"d1\", \"evidence\": \"The parcel arrived broken.\"}\n"
    "{\"id\": \"d2\", \"evidence\": \"Refund me now.\", \"criteria\": [{\"id\": \"r\", \"question\": \"Refund?\", "
    "\"options\": [{\"id\": \"y\", \"description\": \"Yes\"}, {\"id\": \"n\", \"description\": \"No\"}]}]}\n"
    "{\"id\": \"d3\"}\n";
static const char *corpus_dir; /* set: the sweep also runs td_run (fresh, then resumed) and td_run_merge there */

static td_status run_corpus(td_decider *d) {
    char in[512], crit[512], out[512], merged[512];
    snprintf(in, sizeof in, "%s/docs.jsonl", corpus_dir);
    snprintf(crit, sizeof crit, "%s/crit.jsonl", corpus_dir);
    snprintf(out, sizeof out, "%s/out.jsonl", corpus_dir);
    snprintf(merged, sizeof merged, "%s/merged.jsonl", corpus_dir);
    td_run_params rp = td_run_default_params();
    rp.criteria_path = crit;
    rp.overwrite = 1;
    rp.sync = 0; /* thousands of runs: no fsync */
    td_status st = td_run(d, in, out, &rp, NULL);
    rp.resume = 1, rp.overwrite = 0;
    if (st == TD_OK) st = td_run(d, in, out, &rp, NULL);
    const char *parts[] = {out};
    if (st == TD_OK) st = td_run_merge(parts, 1, merged, NULL, TD_MERGE_NO_SYNC);
    return st;
}

/* Load, decide, evaluate (cyclic debias, one shot), predictions out and back, metrics; for one model a corpus run
 * too. Returns TD_OK or the first failing status. */
static td_status run(const char *model_dir, const char *pred_path) {
    td_model *m = NULL;
    td_decider *d = NULL;
    td_rows *rows = NULL;
    td_eval *ev = NULL;
    td_predictions *pr = NULL;
    char *json = NULL;
    td_status st = td_model_load(model_dir, NULL, &m);
    td_decide_params dp = td_decide_default_params();
    dp.n_threads = 1;
    dp.instruction = "Choose."; /* short prompts: the run is repeated thousands of times */
    if (st == TD_OK) st = td_decider_new(m, &dp, &d);
    if (st == TD_OK) {
        const char *ids[] = {"y", "n"}, *descs[] = {"Yes", "No"};
        td_criterion c = {"q", "Is it urgent?", 2, ids, descs};
        td_decision out[2];
        const td_criterion cs[2] = {c, c};
        st = td_decide(d, "Please hurry, the server is down.", 33, cs, 2, out);
    }
    if (st == TD_OK && corpus_dir) st = run_corpus(d);
    if (st == TD_OK) st = td_rows_parse(fixture, sizeof fixture - 1, "fixture", TD_ROWS_ANSWER | TD_ROWS_EVIDENCE, &rows);
    if (st == TD_OK) {
        td_eval_params ep = td_eval_default_params();
        ep.debias = TD_DEBIAS_CYCLIC;
        ep.shots = 1;
        st = td_evaluate(d, rows, &ep, &ev);
    }
    if (st == TD_OK) st = td_eval_write_predictions(ev, pred_path);
    if (st == TD_OK) st = td_predictions_load(pred_path, &pr);
    if (st == TD_OK) st = td_predictions_metrics_json(pr, 15, &json);
    td_free(json);
    td_predictions_free(pr);
    td_eval_free(ev);
    td_rows_free(rows);
    td_decider_free(d);
    td_model_free(m);
    return st;
}

/* A GGUF file's tokenizer alone: loaded, encoding and decoding, written as tokenizer.json and read back. */
static td_status run_tokenizer(const char *gguf, const char *unused) {
    (void)unused;
    td_tokenizer *t = NULL, *back = NULL;
    char *json = NULL, *text = NULL;
    int32_t *ids = NULL;
    size_t n = 0, len;
    static const char s[] = "Answer: A <|im_end|>caf\xc3\xa9";
    td_status st = td_tokenizer_load_gguf(gguf, 0, &t);
    if (st == TD_OK) st = td_tokenize(t, s, sizeof s - 1, TD_TOKENIZE_PARSE_SPECIAL, &ids, &n);
    if (st == TD_OK) st = td_detokenize(t, ids, n, &text, &len);
    if (st == TD_OK) st = td_tokenizer_to_json(t, &json);
    if (st == TD_OK) st = td_tokenizer_load_bytes(json, strlen(json), "export", &back);
    td_free(ids);
    td_free(text);
    td_free(json);
    td_tokenizer_free(t);
    td_tokenizer_free(back);
    return st;
}

/* Generation: the chat template, td_gen with two requests (one reusing the other's session), reasoning split. */
static td_status run_gen(const char *model_dir, const char *unused) {
    (void)unused;
    td_model *m = NULL;
    td_gen *g = NULL;
    char *text = NULL, *r = NULL, *c = NULL;
    int32_t *ids = NULL;
    size_t n = 0;
    td_status st = td_model_load(model_dir, NULL, &m);
    static const char msgs[] = "[{\"role\": \"system\", \"content\": \"Be brief.\"}, {\"role\": \"user\", "
                               "\"content\": [{\"type\": \"text\", \"text\": \"Hello\"}]}]";
    td_chat_params cp = td_chat_default_params();
    cp.tools_json = "[{\"type\": \"function\", \"function\": {\"name\": \"f\"}}]";
    if (st == TD_OK) st = td_chat_render_json(m, msgs, sizeof msgs - 1, &cp, &text);
    if (st == TD_OK) st = td_tokenize(td_model_tokenizer(m), text, strlen(text), TD_TOKENIZE_PARSE_SPECIAL, &ids, &n);
    td_gen_params gp = td_gen_default_params();
    gp.n_ctx = 256;
    gp.max_sequences = 4;
    gp.max_running = 2;
    gp.n_batch = 64;
    if (st == TD_OK) st = td_gen_new(m, &gp, &g);
    const char *stops[] = {"zzz"};
    for (int k = 0; k < 2 && st == TD_OK; k++) {
        td_gen_request rq = td_gen_default_request();
        rq.prompt = ids;
        rq.n_prompt = (int32_t)n - k; /* the second one is a prefix of the first: reuse */
        rq.max_tokens = 4;
        rq.ignore_eos = 1;
        rq.stop = stops;
        rq.n_stop = 1;
        rq.logprobs = 2;
        rq.prompt_logprobs = k ? 1 : -1;
        rq.sampler.temperature = 0.7f;
        rq.sampler.repetition_penalty = 1.2f;
        int64_t id;
        st = td_gen_submit(g, &rq, &id);
        int32_t active = 1;
        while (st == TD_OK && active) {
            st = td_gen_step(g, &active);
            td_gen_event ev;
            while (td_gen_next_event(g, &ev))
                if (ev.kind == TD_GEN_EVENT_DONE && ev.finish == TD_GEN_FINISH_ERROR && st == TD_OK)
                    st = TD_ERR_NOMEM; /* a request the engine ended in error: reported as the step's failure */
        }
    }
    if (st == TD_OK) st = td_chat_split_reasoning("<think>a</think>b", 17, 0, &r, &c);
    td_free(r);
    td_free(c);
    td_free(ids);
    td_free(text);
    td_gen_free(g);
    td_model_free(m);
    return st;
}

typedef td_status (*run_fn)(const char *path, const char *pred_path);

/* Every allocation of the run fails once, in turn. Returns the number of allocations of a clean run. */
static int64_t sweep(run_fn run_it, const char *model_dir, const char *pred_path, int64_t stride) {
    memset(&C, 0, sizeof C);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    td_status st = run_it(model_dir, pred_path);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    fprintf(stderr, "test_alloc: %s: a clean run makes %lld allocations in %.1f ms\n", model_dir, (long long)C.calls,
            1e3 * (double)(t1.tv_sec - t0.tv_sec) + 1e-6 * (double)(t1.tv_nsec - t0.tv_nsec));
    CHECKF(st == TD_OK, "%s: the clean run failed: %s", model_dir, td_last_error());
    CHECKF(C.live == 0, "%s: the clean run leaves %lld blocks allocated", model_dir, (long long)C.live);
    int64_t total = C.calls, bad = 0;
    for (int64_t n = 1; n <= total && bad < 10; n += stride) {
        memset(&C, 0, sizeof C);
        C.fail_at = n;
        st = run_it(model_dir, pred_path);
        if (C.failed && st == TD_OK) { /* a refusal that nobody noticed is a refusal handled as success */
            CHECKF(0, "%s: allocation %lld failed but the run reported success", model_dir, (long long)n);
            bad++;
        }
        if (C.failed && st != TD_OK && st != TD_ERR_NOMEM && !strstr(td_last_error(), "memory")) {
            CHECKF(0, "%s: allocation %lld failed and the run reported %s: %s", model_dir, (long long)n,
                   td_status_str(st), td_last_error());
            bad++;
        }
        if (C.live != 0) {
            CHECKF(0, "%s: allocation %lld failed and %lld blocks leaked (%s)", model_dir, (long long)n,
                   (long long)C.live, td_last_error());
            bad++;
        }
    }
    return total;
}

/* ---- td_ctx_memory against the bytes allocated ------------------------------------------------------------------ */

static void memory_matches(const char *model_dir) {
    td_model *m = NULL;
    td_model_params mp = td_model_default_params();
    mp.load_tokenizer = 0;
    CHECK(td_model_load(td_test_path(model_dir), &mp, &m) == TD_OK);
    if (!m) return;
    struct {
        int32_t n_ctx, n_batch, n_seq_max, n_threads, n_out, kv_f16, chunked;
    } cases[] = {{64, 16, 1, 1, 0, 0, 0}, {1000, 300, 9, 2, 7, 1, 1}, {4096, 512, 1, 3, 512, 0, 0}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        td_ctx_params p = td_ctx_default_params();
        p.n_ctx = cases[i].n_ctx, p.n_batch = cases[i].n_batch, p.n_seq_max = cases[i].n_seq_max;
        p.n_threads = cases[i].n_threads, p.n_outputs_max = cases[i].n_out, p.kv_f16 = cases[i].kv_f16;
        p.deltanet_chunked = cases[i].chunked;
        int64_t promised = -1;
        CHECK(td_ctx_memory(m, &p, &promised) == TD_OK);
        memset(&C, 0, sizeof C);
        td_ctx *ctx = NULL;
        CHECK(td_ctx_new(m, &p, &ctx) == TD_OK);
        CHECKF(C.bytes == promised, "%s, n_ctx %d: td_ctx_memory says %lld bytes, td_ctx_new allocated %lld",
               model_dir, p.n_ctx, (long long)promised, (long long)C.bytes);
        td_ctx_free(ctx);
        CHECK(C.live == 0);
    }
    td_model_free(m);
}

int main(void) {
    char dir[] = "/tmp/td_alloc_XXXXXX", tok[256], m3[256], m35[256], pred[256], gguf[256];
    if (!mkdtemp(dir)) return 1;
    snprintf(tok, sizeof tok, "%s/tokenizer.json", dir);
    snprintf(m3, sizeof m3, "%s/qwen3", dir);
    snprintf(m35, sizeof m35, "%s/qwen35", dir);
    snprintf(pred, sizeof pred, "%s/predictions.jsonl", dir);
    snprintf(gguf, sizeof gguf, "%s/qwen3.gguf", dir);
    CHECK(write_tokenizer(tok) == 0);
    td_synth_params sp = td_synth_default_params();
    sp.tokenizer_json = tok;
    CHECK(td_synth_write(m3, qwen3_config, &sp) == TD_OK);
    CHECK(td_synth_write(m35, qwen35_config, &sp) == TD_OK);
    td_model *m = NULL; /* the synthetic Qwen3 as GGUF: its tokenizer as tokenizer.ggml.* metadata */
    td_export_params xp = td_export_default_params();
    xp.quant = "f32";
    CHECK(td_model_load(m3, NULL, &m) == TD_OK && td_model_export_gguf(m, &xp, gguf, NULL) == TD_OK);
    td_model_free(m);
    char docs[256], crit[256];
    snprintf(docs, sizeof docs, "%s/docs.jsonl", dir);
    snprintf(crit, sizeof crit, "%s/crit.jsonl", dir);
    FILE *f = fopen(docs, "w");
    CHECK(f && fputs(corpus, f) >= 0 && fclose(f) == 0);
    f = fopen(crit, "w");
    CHECK(f && fputs("{\"id\": \"q\", \"question\": \"Is it damaged?\", \"options\": [{\"id\": \"y\", \"description\": "
                     "\"Yes\"}, {\"id\": \"n\", \"description\": \"No\"}]}\n", f) >= 0 && fclose(f) == 0);

    CHECK(td_set_allocator(&counting) == TD_OK);
    memory_matches("fixtures/models/qwen3-tiny-tied");
    memory_matches("fixtures/models/qwen35-tiny-vl");
    memory_matches("fixtures/gguf/qwen3-tiny-tied-q8_0.gguf");

    /* the stride is 1 (every allocation); TD_ALLOC_STRIDE can thin it out when investigating */
    trace_at = getenv("TD_ALLOC_TRACE") ? atoll(getenv("TD_ALLOC_TRACE")) : 0;
    const char *s = getenv("TD_ALLOC_STRIDE");
    int64_t stride = s && atoll(s) > 0 ? atoll(s) : 1;
    /* the synthetic Qwen3 and Qwen3.5 directories, a vision-language checkpoint, a Q8_0 GGUF (packed weights) */
    int64_t n;
    const char *models[] = {m3, m35, "fixtures/models/qwen35-tiny-vl", "fixtures/gguf/qwen3-tiny-tied-q8_0.gguf"};
    for (int i = 0; i < 4; i++) {
        char path[512];
        snprintf(path, sizeof path, "%s", i < 2 ? models[i] : td_test_path(models[i]));
        corpus_dir = i == 0 ? dir : NULL; /* the corpus runner on the first model */
        n = sweep(run, path, pred, stride);
        fprintf(stderr, "test_alloc: %s: failed each of its %lld allocations in turn\n", path, (long long)n);
    }
    char gen_model[512];
    snprintf(gen_model, sizeof gen_model, "%s", td_test_path("fixtures/models/qwen35-tiny-text"));
    n = sweep(run_gen, gen_model, NULL, stride);
    fprintf(stderr, "test_alloc: generation on qwen35-tiny-text: failed each of its %lld allocations in turn\n",
            (long long)n);
    n = sweep(run_tokenizer, gguf, NULL, stride);
    fprintf(stderr, "test_alloc: the tokenizer of %s: failed each of its %lld allocations in turn\n", gguf, (long long)n);
    CHECK(td_set_allocator(NULL) == TD_OK);
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (getenv("TD_ALLOC_KEEP")) fprintf(stderr, "test_alloc: kept %s\n", dir); /* for investigating */
    else CHECK(system(cmd) == 0);
    return td_test_finish("test_alloc");
}
