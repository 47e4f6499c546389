/*
 * typedecide.h — the public C API of libtypedecide's core.
 *
 * typedecide runs Hugging Face Qwen3 and Qwen3.5 (hybrid Gated DeltaNet) checkpoints on the CPU exactly as
 * transformers does, from a Hugging Face directory (safetensors, single or sharded) or a GGUF file, with BF16,
 * F16, F32, Q8_0 or Q4_0 weights and fp32 arithmetic, and reads typed decisions from their logits: for every
 * criterion, a probability for each allowed answer. This header is the manual: every function states its contract,
 * who owns what, how it fails and from which threads it may be called.
 *
 * The headers (layered as Lua's lua.h / lauxlib.h / lualib.h: the core, and the applications on top of it)
 * ------------------------------------------------------------------------------------------------------------
 *   typedecide.h ......... THE CORE (this file): tokenizer, model, export, engine, typed readout, the criteria
 *                          reader (rows of a criteria or fixture JSONL file), files, synthetic checkpoints,
 *                          sampling, stop rules, chat templates, generation. It names nothing of the applications.
 *                          The core library (CMake's typedecide_core: src/util, kernels, model, tokenizer, engine,
 *                          decide, generate, and src/eval/rows.c) implements all of it and links only PCRE2,
 *                          utf8proc, jansson, threads and libm; the WebAssembly build (web/) is this core alone.
 *   typedecide_eval.h .... evaluation: metrics, td_evaluate, predictions, plots (src/eval/).
 *   typedecide_run.h ..... corpus runs: td_run, td_run_merge (src/run/).
 *   typedecide_server.h .. the HTTP server: td_server_* (src/server/; the only part that needs libmicrohttpd).
 * Each application header includes this one; a client includes the headers of what it uses and no other (the
 * command-line tool's `evaluate` includes typedecide_eval.h, `serve` typedecide_server.h, `decide` none but this
 * one; tests/test_layers.sh checks it). libtypedecide (static and shared) holds the core and the applications and
 * exports the TD_API functions of all four headers, which are installed side by side.
 * Why three application headers and not one: evaluation, corpus runs and the server are separate directories whose
 * functions and types never refer to one another (corpus runs and the server read criteria with the core's rows),
 * so a client of one needs nothing of the others. What every client shares is the core's: the rows
 * of a criteria file (what `decide`, the server's /v1/decide, corpus runs and the browser read criteria with; the
 * fixtures of td_evaluate are the same rows with an answer), td_evidence_groups, and the files (td_file_write,
 * td_outfile_*, td_paths_check, td_file_fingerprint: src/util implements them and the core's own export writes
 * through them).
 *
 * Public and internal names: every name of these four headers is td_* / TD_* and is the API. The headers under
 * src/ (src/engine/engine.h, src/util/strbuf.h, ...) are the library's internals: some of their names also begin
 * with td_ (an older convention; they are not renamed yet), but none of them is exported from the shared library
 * (tests/test_exports.sh), they may change in any commit, and only the library's own sources and its white-box
 * tests include them. A name is public if and only if it is declared in include/; a client that needs anything
 * under src/ is asking for a new public function.
 *
 * What is where (typedecide.h)
 * ----------------------------
 *   status codes, errors, version, allocator ........ td_status, td_last_error, td_version, td_set_allocator
 *   tokenizer (tokenizer.json or GGUF, and back) .... td_tokenizer_*, td_tokenize, td_detokenize
 *   model, export .................................... td_model_*, td_model_export_gguf
 *   batch and context (the engine's one entry point) . td_batch_*, td_ctx_*
 *   typed readout .................................... td_decider_*, td_decide*
 *   criteria and fixture rows, evidence groups ...... td_rows_*, td_evidence_groups
 *   files: safe outputs, aliasing, fingerprints ..... td_file_write, td_outfile_*, td_paths_check, td_file_*
 *   synthetic checkpoints ............................ td_synth_*, td_config_shape
 *   sampling, stop rules ............................. td_sampler_*, td_sample, td_logprob, td_stopper_*
 *   chat templates (ChatML family) ................... td_chat_*, td_model_chat_family
 *   generation (continuous batching, KV reuse) ....... td_gen_*
 *
 * Conventions
 * -----------
 * - Objects are opaque handles (td_model, td_tokenizer, td_ctx, td_batch, td_decider; the applications' td_rows,
 *   td_eval, td_predictions, td_server). Constructors return a td_status and hand the new object back through an
 *   out-parameter, which is set to NULL on failure. Every *_free(NULL) is a harmless no-op.
 * - Every fallible call returns td_status. On failure, td_last_error() returns a message that names the file,
 *   tensor, field, line or argument that is wrong. The message lives in thread-local storage: it is valid until
 *   the next failing call on the same thread (like dlerror()). Besides the errors each function lists, every call
 *   that allocates may fail with TD_ERR_NOMEM; a failed call leaks nothing and leaves its objects as they were
 *   (where a function says otherwise, it says what changed).
 * - NULL where a pointer is required is TD_ERR_INVALID_ARG (functions without a status return 0, -1 or NULL).
 * - Pointers returned by accessors are BORROWED: they stay valid until the object is freed or, where stated,
 *   until the next call that mutates the same object (for a context: the next td_ctx_decode()).
 * - Buffers the library allocates for the caller (token arrays, decoded text, JSON) are released with td_free().
 * - The library never prints and never exits. Diagnostics that are not errors (e.g. "skipped 12 tensors") go to
 *   the optional log callback in the params structs.
 *
 * These conventions hold for the application headers too.
 *
 * Threads (the applications' handles included)
 * -------
 *   td_tokenizer, td_model, td_rows, td_eval, td_predictions: immutable once made; any number of threads may read
 *     them at once (a model's tokenizer too). Free them after every user is done.
 *   td_ctx, td_batch, td_decider: one thread at a time (a decider owns a context). Different objects may be used
 *     from different threads at once, also over the same model. A context runs its own worker threads
 *     (n_threads) inside td_ctx_decode; results never depend on their number.
 *   td_sampler, td_stopper, td_gen: one thread at a time (the server runs a td_gen on its engine thread).
 *   td_run, td_run_merge (typedecide_run.h): one call at a time per decider and per set of files; separate runs (other deciders,
 *     other files) may go on at once in one process.
 *   td_last_error: per thread. td_set_allocator: process-wide, before anything else.
 */
#ifndef TYPEDECIDE_H
#define TYPEDECIDE_H

#include <stddef.h>
#include <stdint.h>

/* TD_API marks the functions of this header and of the application headers: the shared library is built with hidden
 * visibility and exports these names and nothing else (tests/test_exports.sh lists what it exports against what the
 * headers of include/ declare). Every new public function is declared with it. */
#ifndef TD_API
#if defined(__GNUC__) || defined(__clang__)
#define TD_API __attribute__((visibility("default")))
#else
#define TD_API
#endif
#endif

#ifdef __cplusplus
extern "C" {
#endif

#define TD_VERSION_STRING "0.1.0"

/* ------------------------------------------------------------------------------------------------------------ */
/* Status codes                                                                                                  */
/* ------------------------------------------------------------------------------------------------------------ */

typedef enum td_status {
    TD_OK = 0,
    TD_ERR_INVALID_ARG = 1,  /* the caller passed an argument that cannot be right (NULL, negative size, ...) */
    TD_ERR_IO = 2,           /* a file could not be opened, read, written or mapped */
    TD_ERR_FORMAT = 3,       /* a file or request is malformed: bad JSON, truncated data, wrong shape, ... */
    TD_ERR_UNSUPPORTED = 4,  /* well-formed but not supported: unknown architecture, dtype, option */
    TD_ERR_NOMEM = 5,        /* an allocation failed */
    TD_ERR_RANGE = 6,        /* a value is out of range: token id outside the vocabulary, context full */
    TD_ERR_STATE = 7,        /* the call is not valid in the object's current state */
    TD_ERR_NONFINITE = 8,    /* a computation gave NaN or infinity: a weight or adapter holds one, or the activations
                                overflowed; the message names the layer, the sequence and the position */
    TD_ERR_DEVICE = 9        /* the GPU failed a call (the message has the CUDA runtime's words); the context's device
                                state is then unknown: free it */
} td_status;

/* A short constant name for a status ("format error"). Never NULL. */
TD_API const char *td_status_str(td_status status);

/* The message of the last failing call on this thread, or "" if none failed yet. Never NULL. */
TD_API const char *td_last_error(void);

/* Releases a buffer that the library allocated for the caller. td_free(NULL) is a no-op. */
TD_API void td_free(void *ptr);

/* The library's version, "MAJOR.MINOR.PATCH", at run time (TD_VERSION_STRING is the header's). Static string. */
TD_API const char *td_version(void);

/* The allocation hook. Every allocation the library makes goes through these four functions; the default is the
 * C library's. A failing allocation makes the call that needed it return TD_ERR_NOMEM (or, where a call has no
 * status, its documented failure value) and leak nothing. aligned_fn receives a power-of-two alignment and a size
 * that is a multiple of it. Memory from any of them is released with free_fn. Process-wide: set it before any
 * other call of the library, never while another thread uses it; NULL restores the C library's.
 * TD_ERR_INVALID_ARG when a function is missing. Not through the hook: the short-lived allocations of jansson (the
 * JSON library, whose parser aborts when one of its allocations fails, so none may be made to fail) and of
 * utf8proc (NFC), and PCRE2's JIT code pages. The library detects when one of those fails and reports
 * TD_ERR_NOMEM rather than a malformed file. This function also installs that detection into jansson, which keeps
 * one allocator per process (the C library's malloc and free, wrapped). */
typedef struct td_allocator {
    void *(*malloc_fn)(void *user, size_t size);
    void *(*realloc_fn)(void *user, void *ptr, size_t size);
    void *(*aligned_fn)(void *user, size_t align, size_t size);
    void (*free_fn)(void *user, void *ptr);
    void *user;
} td_allocator;
TD_API td_status td_set_allocator(const td_allocator *allocator);

/* The CPU kernels a model loaded now would use: "amx", "avx512bf16", "avx512vnni", "avx2" or "scalar", the fastest
 * set this CPU runs (docs and bench/kernel_sets.sh: the measurements behind the choice). Every set computes exactly
 * by default (td_precision); they differ in speed and in how Q8_0 / Q4_0 products quantise their activations. The
 * environment variable TD_KERNELS forces another set this CPU runs (TD_KERNELS=avx2, avx512vnni, scalar, ...); a
 * name that is no set (TD_ERR_INVALID_ARG) or a set this CPU cannot run (TD_ERR_UNSUPPORTED) makes td_model_load
 * fail with a message that lists the sets this CPU runs (here it names the default then; an empty TD_KERNELS is no
 * choice). Static string. td_model_kernels says what a loaded model uses. */
TD_API const char *td_cpu_kernels(void);
/* 1 when the kernels td_cpu_kernels() names have bf16 products (vdpbf16ps: avx512bf16, avx512r16, amx), so that
 * TD_PRECISION_BF16 changes a CPU context's arithmetic for BF16 weights; 0 when such a context computes in fp32. */
TD_API int td_cpu_bf16_products(void);

/* Logging for diagnostics that are not errors. level: 0 = info, 1 = warning. */
typedef void (*td_log_fn)(void *user, int level, const char *message);

/* ------------------------------------------------------------------------------------------------------------ */
/* Tokenizer                                                                                                     */
/* ------------------------------------------------------------------------------------------------------------ */

typedef struct td_tokenizer td_tokenizer;

/* Loads a Hugging Face tokenizer.json (byte-level BPE). Fails with TD_ERR_IO if the file cannot be read,
 * TD_ERR_FORMAT for malformed JSON (the message gives line and column) or inconsistent contents, or for a GGUF
 * file (the message says to use td_tokenizer_load_gguf), and TD_ERR_UNSUPPORTED for a model or pre-tokenizer type
 * this library does not implement. */
TD_API td_status td_tokenizer_load(const char *tokenizer_json_path, td_tokenizer **out);

/* Flags for td_tokenizer_load_gguf(). */
#define TD_TOKENIZER_NO_NFC 1u /* leave out the NFC normalizer, as llama.cpp does (it never normalizes): the ids are
                                  then llama.cpp's, which differ from Hugging Face's only on text not in NFC */

/* Loads the tokenizer of a GGUF file from its tokenizer.ggml.* metadata (llama.cpp's keys), whatever the file's
 * architecture and whether or not it holds tensors: a model, or a vocabulary-only file such as llama.cpp's
 * models/ggml-vocab-qwen35.gguf. Supported: tokenizer.ggml.model "gpt2" (byte-level BPE) with a pre-tokenizer
 * this library knows by its tokenizer.ggml.pre name: "qwen2" (the Split regex of Qwen2 and Qwen3) or "qwen35"
 * (Qwen3.5's, which adds \p{M}). The pipeline is Hugging Face's for Qwen (NFC, the Split regex, ByteLevel, BPE),
 * so a GGUF converted from a Qwen tokenizer.json encodes as that file does; llama.cpp itself skips NFC (see
 * TD_TOKENIZER_NO_NFC). Token types: NORMAL (1) tokens are the BPE vocabulary, CONTROL (3) tokens special added
 * tokens, USER_DEFINED (4) added tokens that are not special (matched in text as Hugging Face matches <think>),
 * UNUSED (5) holes in the id space. flags: 0 or TD_TOKENIZER_NO_NFC. The file is mapped while loading and
 * released before the call returns; the tokenizer owns copies.
 * Errors: TD_ERR_IO (cannot open or map), TD_ERR_FORMAT naming the file and key (not a GGUF file, no
 * tokenizer.ggml.model / .pre / .tokens / .merges, tokens that are not strings, a token_type array of another
 * length, a merge that is not "a b", an id or string twice, a merge outside the vocabulary, a byte with no token),
 * TD_ERR_UNSUPPORTED (a tokenizer model other than "gpt2", a pre-tokenizer name other than those above, UNKNOWN or
 * BYTE tokens), TD_ERR_INVALID_ARG (NULL, unknown flags). */
TD_API td_status td_tokenizer_load_gguf(const char *gguf_path, unsigned flags, td_tokenizer **out);

/* Writes the tokenizer as a Hugging Face tokenizer.json, in the form Hugging Face's `tokenizers` saves Qwen's:
 * "version", "truncation", "padding", "added_tokens" (by id, with all six flags), "normalizer" ({"type": "NFC"}
 * or null), "pre_tokenizer" (the Split steps and ByteLevel in their order; a Sequence when there are several),
 * "post_processor" and "decoder" (ByteLevel), "model" (BPE: the vocabulary by id, the merges as ["a", "b"] pairs
 * by rank); two-space indentation, no trailing newline. td_tokenizer_load and Hugging Face's tokenizers read it
 * back to a tokenizer that gives the same ids as `tok` for every text, and Qwen3's own tokenizer.json comes back
 * byte for byte. Not kept, as they change no id: a post-processor other than ByteLevel (this library adds no
 * BOS/EOS), offset trimming, a normalizer Sequence (written as the NFC it amounts to). *json is a new
 * NUL-terminated string (td_free). Errors: TD_ERR_INVALID_ARG, TD_ERR_NOMEM. Safe from any thread. */
TD_API td_status td_tokenizer_to_json(const td_tokenizer *tok, char **json);

/* Loads a tokenizer from tokenizer.json bytes in memory (not necessarily NUL-terminated). `name` is used in
 * error messages. */
TD_API td_status td_tokenizer_load_bytes(const char *json, size_t len, const char *name, td_tokenizer **out);

TD_API void td_tokenizer_free(td_tokenizer *tok);

/* Flags for td_tokenize(). */
#define TD_TOKENIZE_PARSE_SPECIAL 1u /* split out added tokens (<|im_start|>, <think>, ...) as their own ids */
#define TD_TOKENIZE_ADD_BOS 2u       /* put the tokenizer's BOS first, where it has one (td_tokenizer_bos): what
                                        Hugging Face's add_special_tokens=True does to a text */

/* Encodes `len` bytes of UTF-8 `text` into token ids, exactly as Hugging Face `tokenizers` does (without adding
 * BOS/EOS: Qwen's tokenizers add none). On success *ids is a new array (release with td_free(); NULL when
 * *n_ids is 0). Invalid UTF-8 is an error (TD_ERR_FORMAT) naming the byte offset. */
TD_API td_status td_tokenize(const td_tokenizer *tok, const char *text, size_t len, unsigned flags, int32_t **ids,
                             size_t *n_ids);
/* td_tokenize of a text assembled from trusted and untrusted parts (a chat template and the messages in it): with
 * TD_TOKENIZE_PARSE_SPECIAL an added token is split out only where its match lies inside one of the n_spans spans
 * [special_spans[2i], special_spans[2i + 1]) (ascending byte offsets); the same string elsewhere is encoded as
 * plain text. Exception: an added token that is not special and is also in the model's vocabulary (Gemma's runs of
 * newlines, its HTML tags) is taken wherever it occurs, as Hugging Face's tokenizer does; it marks nothing. Text without added tokens outside the spans gives exactly td_tokenize's ids. TD_ERR_INVALID_ARG for
 * a span outside the text. */
TD_API td_status td_tokenize_spans(const td_tokenizer *tok, const char *text, size_t len, unsigned flags,
                                   const size_t *special_spans, size_t n_spans, int32_t **ids, size_t *n_ids);

/* Decodes ids back to UTF-8 text. Added tokens decode to their content. *text is a new NUL-terminated buffer
 * (release with td_free()); *len excludes the NUL. Ids outside the vocabulary fail with TD_ERR_RANGE. */
TD_API td_status td_detokenize(const td_tokenizer *tok, const int32_t *ids, size_t n_ids, char **text, size_t *len);

/* The raw bytes one token stands for (for streaming output). Returns NULL for ids outside the vocabulary.
 * The pointer is borrowed from the tokenizer; *len receives the byte count. The bytes of a single token may be
 * an incomplete UTF-8 sequence. */
TD_API const char *td_token_bytes(const td_tokenizer *tok, int32_t id, size_t *len);

/* The id of a token given by its exact vocabulary string (e.g. "<|im_end|>"), or -1. */
TD_API int32_t td_token_lookup(const td_tokenizer *tok, const char *piece);

/* Number of ids the tokenizer can produce (vocabulary plus added tokens); all ids are < this. */
TD_API int32_t td_tokenizer_n_tokens(const td_tokenizer *tok);

/* The token the tokenizer puts before a text (tokenizer.json's post_processor template, a GGUF's add_bos_token:
 * Llama 3's <|begin_of_text|>, Gemma's <bos>), or -1 when it puts none (Qwen). The readout's head and a plain
 * prompt start with it (TD_TOKENIZE_ADD_BOS); chat templates write it themselves. */
TD_API int32_t td_tokenizer_bos(const td_tokenizer *tok);

/* ------------------------------------------------------------------------------------------------------------ */
/* Model                                                                                                         */
/* ------------------------------------------------------------------------------------------------------------ */

typedef struct td_model td_model;

typedef struct td_model_params {
    int load_tokenizer;  /* 1 (default): load tokenizer.json when present; 0: skip it */
    const char *adapter; /* optional PEFT LoRA adapter directory, merged into the weights at load */
    td_log_fn log;       /* optional diagnostics sink; NULL = silent */
    void *log_user;
} td_model_params;

TD_API td_model_params td_model_default_params(void);

/* Loads a model from a Hugging Face directory (config.json, model.safetensors or model.safetensors.index.json
 * with its shards, optional tokenizer.json, tokenizer_config.json, generation_config.json) or from a GGUF file
 * (llama.cpp's qwen3 or qwen35 layout; the tokenizer comes from its metadata). Qwen3 (model_type "qwen3") and
 * Qwen3.5 ("qwen3_5", text-only "qwen3_5_text"; vision-language checkpoints load their text model and skip
 * model.visual.* and mtp.*). Weights are mapped read-only from the files, not copied (except tensors whose data is
 * not aligned to their element size, and the packed copies of Q8_0 / Q4_0 matrices the CPU kernels use).
 * The head is tied to the embedding as transformers 5.17 ties it: config's tie_word_embeddings (the top-level one
 * for a vision-language config), except that a file storing both tables with different values is never tied.
 * Errors: TD_ERR_IO (a file cannot be opened or mapped), TD_ERR_FORMAT naming the file and tensor or field (a
 * missing tensor, a wrong shape or dtype, offsets outside the file or overlapping, malformed JSON, a stop id
 * outside the vocabulary), TD_ERR_UNSUPPORTED (an architecture, rope scaling or dtype not implemented).
 * A directory without tokenizer files loads fine; td_model_tokenizer() then returns NULL. */
TD_API td_status td_model_load(const char *path, const td_model_params *params, td_model **out);

TD_API void td_model_free(td_model *model);

/* Flags for td_model_load_buffer(). */
#define TD_MODEL_BUFFER_TAKE 1u /* the model takes the buffer (from td_model_buffer_new) and frees it */

/* A buffer for td_model_load_buffer(..., TD_MODEL_BUFFER_TAKE): size bytes, 64-byte aligned, from the library's
 * allocator (td_set_allocator), uninitialised; NULL when memory is short or size is 0. Fill it, then hand it over;
 * a buffer that is not handed over is released with td_free(). */
TD_API void *td_model_buffer_new(size_t size);

/* Loads a model from a GGUF image in memory (size bytes at data), exactly as td_model_load loads the same bytes from
 * a GGUF file (the same weights, tokenizer, template, stop ids and results): for a caller that holds the bytes
 * already (a download in a browser, an embedded model), with no second copy. A Hugging Face directory (several
 * files) loads only from files (td_model_load). `name` (NULL: "<buffer>") stands for the path in messages and in
 * td_model_path(); params as td_model_load's (an adapter directory is read from disk).
 * Ownership: with TD_MODEL_BUFFER_TAKE, data must come from td_model_buffer_new() and belongs to the library from
 * this call on, whatever it returns (freed with the model, or here on failure: the caller never frees it).
 * Without it the buffer is borrowed: the library never writes to it nor frees it, and it must stay alive and
 * unchanged until td_model_free(). The weights point into the buffer (except the copies td_model_load makes too:
 * unaligned tensors, packed Q8_0 / Q4_0 matrices).
 * Errors: TD_ERR_INVALID_ARG (NULL data or out, size 0, an unknown flag), TD_ERR_FORMAT for bytes that are not a
 * GGUF image ("not a GGUF image (bad magic)") and td_model_load's GGUF errors naming `name`, TD_ERR_UNSUPPORTED,
 * TD_ERR_NOMEM. */
TD_API td_status td_model_load_buffer(void *data, size_t size, const char *name, unsigned flags,
                                      const td_model_params *params, td_model **out);

/* The model's tokenizer (borrowed, lives as long as the model) or NULL when the directory had none. */
TD_API const td_tokenizer *td_model_tokenizer(const td_model *model);

/* Rows of the output head: logits have this many entries (config.json's vocab_size). */
TD_API int32_t td_model_n_vocab(const td_model *model);
/* Hidden size of the residual stream. */
TD_API int32_t td_model_n_embd(const td_model *model);
/* Total parameter count of the text model (a tied head counted once). */
TD_API int64_t td_model_n_params(const td_model *model);
/* Architecture name as in config.json ("qwen3"). Borrowed. */
TD_API const char *td_model_arch(const td_model *model);
/* The CPU kernel set the model was loaded for (td_cpu_kernels() at load time): its packed copies of quantised
 * weights and its activation formats fix the model's arithmetic, and every context of the model uses it. Static. */
TD_API const char *td_model_kernels(const td_model *model);
/* 1 when some layers carry a recurrent state (Qwen3.5's Gated DeltaNet): the hybrid rules of td_ctx_seq_fork and
 * td_ctx_seq_truncate apply. 0 for an all-attention model or NULL. */
TD_API int td_model_is_hybrid(const td_model *model);
/* Position limit from config.json (max_position_embeddings). */
TD_API int32_t td_model_n_ctx_train(const td_model *model);
/* The path the model was loaded from. Borrowed. */
TD_API const char *td_model_path(const td_model *model);

/* Stop token ids: generation_config.json's eos_token_id (an id or a list) and tokenizer_config.json's eos_token
 * (GGUF: typedecide.stop_ids, else tokenizer.ggml.eos_token_id and eot_token_id), each once. An id outside the
 * vocabulary fails the load (TD_ERR_FORMAT naming the file). Borrowed array; *n receives the count (may be 0). */
TD_API const int32_t *td_model_stop_ids(const td_model *model, int *n);

/* The chat template text (tokenizer_config.json's chat_template, or a GGUF file's tokenizer.chat_template), or
 * NULL when there is none; *source (may be NULL) receives the file it came from. Borrowed. */
TD_API const char *td_model_chat_template(const td_model *model, const char **source);
/* The text of generation_config.json, or NULL when the model has none (GGUF files have none). Borrowed. */
TD_API const char *td_model_generation_config(const td_model *model);

/* Rows of the output head: td_model_n_vocab(), or K for a head pruned to the option letters. Full outputs of a
 * context have this many values. */
TD_API int32_t td_model_head_rows(const td_model *model);
/* 0 for a model whose head was pruned to the option letters: it can decide, not generate. */
TD_API int td_model_can_generate(const td_model *model);
/* The slot map of a pruned head (JSON, borrowed) or NULL. */
TD_API const char *td_model_slot_map(const td_model *model);
/* A description of the model as JSON (architecture, parameters, tied or not, every tensor's type, shape and bytes,
 * skipped tensors, slot map): a new string (td_free). */
TD_API td_status td_model_describe(const td_model *model, char **json);

/* ------------------------------------------------------------------------------------------------------------ */
/* Export                                                                                                        */
/* ------------------------------------------------------------------------------------------------------------ */

typedef struct td_export_params {
    const char *quant;         /* weight matrices: "f32", "f16", "bf16", "q8_0" or "q4_0" (default "f16") */
    const char *embed_quant;   /* the input embedding; NULL: as quant */
    const char *prune_letters; /* e.g. "ABCD": keep only these letters' rows of the head (untied), slot map in the
                                  metadata; NULL: the full head */
    const char *name;          /* general.name; NULL: from the model path */
    td_log_fn log;
    void *log_user;
} td_export_params;

TD_API td_export_params td_export_default_params(void);

/* Writes the model as a GGUF v3 file with llama.cpp's qwen3 or qwen35 (Qwen3.5) metadata, tensor names and
 * tokenizer, in the layout llama.cpp's own converter writes (Qwen3.5: norms stored as 1 + w, A_log as -exp(A_log),
 * value heads regrouped when Hv > Hk, no MTP block). With
 * prune_letters, the head keeps only the letters' rows (probed as the readout does), in letter order; a tied
 * embedding is kept whole and the new head shares no storage with it; everything is verified before the file is
 * written, and *slot_map (if not NULL) receives the slot map JSON (td_free). Errors: TD_ERR_INVALID_ARG for an
 * unknown tier or a bad letter list, TD_ERR_UNSUPPORTED for a letter that is not one token or a matrix whose rows
 * are not whole blocks of the tier, TD_ERR_STATE without a tokenizer, TD_ERR_IO when the file cannot be written
 * completely (a partial file is removed). */
TD_API td_status td_model_export_gguf(const td_model *model, const td_export_params *params, const char *path,
                                      char **slot_map);

/* ------------------------------------------------------------------------------------------------------------ */
/* Batches: tokens tagged (sequence, position, wants-output)                                                     */
/* ------------------------------------------------------------------------------------------------------------ */

typedef struct td_batch td_batch;

/* A batch with room for `capacity` tokens (>= 1, else TD_ERR_INVALID_ARG). */
TD_API td_status td_batch_new(int32_t capacity, td_batch **out);
TD_API void td_batch_free(td_batch *batch);
TD_API void td_batch_clear(td_batch *batch);
/* Appends one token. `pos` must be the next position of sequence `seq` (its current length, plus the tokens of
 * that sequence already in this batch): sequences grow at the end only; td_ctx_decode() checks this.
 * `want_output` != 0 asks for this token's output (logits or restricted rows). Fails with TD_ERR_RANGE when full. */
TD_API td_status td_batch_add(td_batch *batch, int32_t token, int32_t seq, int32_t pos, int want_output);
TD_API int32_t td_batch_n_tokens(const td_batch *batch);

/* ------------------------------------------------------------------------------------------------------------ */
/* Context: activations, KV cache, sequences                                                                     */
/* ------------------------------------------------------------------------------------------------------------ */

typedef struct td_ctx td_ctx;

typedef struct td_ctx_params {
    int32_t n_ctx;     /* KV rows shared by all sequences (a forked prefix is stored once). Default 4096. */
    int32_t n_batch;   /* most tokens in one td_ctx_decode(). Default 512. */
    int32_t n_seq_max; /* sequence ids are 0 .. n_seq_max-1. Default 1. */
    int32_t n_threads; /* worker threads including the caller. Default 1. Results do not depend on it. */
    int32_t n_outputs_max; /* most tokens per decode that want an output; their logits are kept in the context.
                              0 (default) = 1. Full-vocabulary outputs cost n_outputs_max x n_vocab floats. */
    int32_t kv_f16;    /* 1: store the KV cache as f16 (half the memory; attention converts on the fly) */
    int32_t deltanet_chunked; /* Qwen3.5: 0 (default) runs the DeltaNet recurrence token by token, which is exact
                                 however the tokens are split into calls; 1 uses the chunked form (chunks of 64 from
                                 the first token of each call), equal within fp32 rounding but not bit-identical
                                 across different splits. CPU only: a CUDA context always runs the exact form. */
    int32_t device;           /* td_device: TD_DEVICE_CPU (default) or TD_DEVICE_CUDA */
    int32_t precision;        /* td_precision: TD_PRECISION_FP32 (default) or TD_PRECISION_BF16 */
} td_ctx_params;

TD_API td_ctx_params td_ctx_default_params(void);

/* The arithmetic of a context's matrix products. Exact by default, on every device: F32, F16 and BF16 weights are
 * multiplied with fp32 activations and fp32 sums, so logits match transformers' fp32 within 1e-4 on any CPU and on
 * CUDA. TD_PRECISION_BF16 is the faster, less exact choice: the activations of a product are rounded to bf16 before
 * the multiply (sums stay fp32). On CUDA that holds for every product; on the CPU for the products over BF16 weights,
 * with the kernel sets that have bf16 products (AVX-512 BF16, AMX: td_cpu_bf16_products); elsewhere the CPU computes
 * fp32 as by default. Q8_0 / Q4_0 weights always take quantised activations (that is what those formats are, as in
 * llama.cpp), whatever the precision. */
typedef enum td_precision { TD_PRECISION_FP32 = 0, TD_PRECISION_BF16 = 1 } td_precision;
/* "fp32" -> TD_PRECISION_FP32, "bf16" -> TD_PRECISION_BF16; -1 for anything else. */
TD_API int td_precision_parse(const char *name);

/* Where a context computes. A CUDA context keeps the weights (uploaded once per model, as stored: F32, F16, BF16,
 * Q8_0, Q4_0), the KV cache, the DeltaNet states and the activations on the GPU; per td_ctx_decode only the batch
 * goes in and only the requested outputs come out. Its results obey the same invariants as the CPU's (prefix reuse,
 * batch and sequence invariance: bit-identical whatever else is in the batch); they equal the CPU's within fp32
 * rounding (precision: within bf16 rounding of the products' inputs), not bit for bit. */
typedef enum td_device { TD_DEVICE_CPU = 0, TD_DEVICE_CUDA = 1 } td_device;

/* Whether contexts on `device` can be created here: TD_OK with a description of the device in desc (e.g.
 * "NVIDIA H200, 140 GiB"), or TD_ERR_UNSUPPORTED saying why (a build without the CUDA backend, no usable GPU). desc
 * may be NULL. Safe from any thread. */
TD_API td_status td_device_probe(td_device device, char *desc, size_t desc_len);
/* "cpu" -> TD_DEVICE_CPU, "cuda" -> TD_DEVICE_CUDA; -1 for anything else. */
TD_API int td_device_parse(const char *name);
/* The memory free on `device` now, in bytes, into *free_bytes: on CUDA the GPU's (what its driver reports; other
 * processes' use included). TD_ERR_UNSUPPORTED (and 0) for the CPU, whose budgets are the caller's, and where
 * td_device_probe fails. Safe from any thread. */
TD_API td_status td_device_free_bytes(td_device device, int64_t *free_bytes);

/* Creates a context: all activation buffers, the KV cache and the sequences' states are allocated here, once
 * (td_ctx_memory says how many bytes); td_ctx_decode() does not allocate. The model must outlive the context.
 * Errors: TD_ERR_INVALID_ARG for sizes below 1 or absurdly large (n_ctx > 2^24, n_seq_max > 2^16,
 * n_batch > 2^20), TD_ERR_NOMEM naming what to reduce (host or GPU memory), TD_ERR_UNSUPPORTED for a device this
 * build or machine does not have (td_device_probe's reason). */
TD_API td_status td_ctx_new(const td_model *model, const td_ctx_params *params, td_ctx **out);
TD_API void td_ctx_free(td_ctx *ctx);

/* Runs the model on every token of the batch. A token of sequence s at position p attends to positions 0..p of
 * s (its own earlier tokens and any prefix it was forked from). Each token's result is bit-identical whatever
 * else is in the batch and whatever the thread count.
 * Errors: TD_ERR_RANGE for a token id outside the vocabulary, a sequence id outside 0..n_seq_max-1, more tokens
 * than n_batch or a full KV cache; TD_ERR_INVALID_ARG for a position that is not the sequence's next one: then
 * nothing is written to the cache. TD_ERR_NONFINITE when a token's hidden state or output became NaN or infinite
 * (a weight or adapter holds one, or the activations overflowed; td_ctx_nonfinite says where): the batch's positions
 * are taken back, but on a hybrid model the DeltaNet state of the batch's sequences has seen them, so truncate those
 * sequences to 0 before using them again. */
TD_API td_status td_ctx_decode(td_ctx *ctx, const td_batch *batch);

/* After td_ctx_decode failed with TD_ERR_NONFINITE: the sequence and position of the first token that went
 * non-finite and the layer (-1: the input embedding; the layer count: the final norm and head). Returns 0, or -1
 * when the last decode did not stop on a non-finite value. */
TD_API int td_ctx_nonfinite(const td_ctx *ctx, int32_t *seq, int32_t *pos, int32_t *layer);

/* Number of outputs of the last decode (tokens that asked for one, in batch order). */
TD_API int32_t td_ctx_n_outputs(const td_ctx *ctx);
/* Output i of the last decode: td_model_n_vocab() logits, or td_ctx_set_output_rows()'s k values.
 * Borrowed until the next td_ctx_decode(). NULL if i is out of range. */
TD_API const float *td_ctx_output(const td_ctx *ctx, int32_t i);

/* Restricts outputs to the given rows of the head (e.g. the K option-letter tokens), in the given order: the
 * final norm and only those dot products run. n = 0 restores full logits. The ids are copied (4n bytes, beyond
 * td_ctx_memory). Each value equals, bit for bit, the same row of the full logits. Errors: TD_ERR_RANGE for more
 * rows than the head has, an id outside the vocabulary, or (pruned head) a token the head did not keep. */
TD_API td_status td_ctx_set_output_rows(td_ctx *ctx, const int32_t *rows, int32_t n);

/* Sequences and the hybrid rules.
 * A sequence of a Qwen3 (all attention) model is its KV rows: forking shares any prefix of them and truncating
 * drops any suffix. A Qwen3.5 model's Gated DeltaNet layers also carry a recurrent state per sequence (the conv
 * window and the matrix S, constant size, updated by every token), which holds the whole history and cannot be
 * rolled back. So on a hybrid model: a fork copies that state and is allowed only at the source's end
 * (n_pos == its length), and a truncation only to 0 (empty) or to the present length. To come back to a
 * position later, keep a snapshot: fork into a spare sequence when the source is there (decide keeps the head
 * this way, and every criterion forks from it). Sequence ids are 0 .. n_seq_max - 1 (else TD_ERR_RANGE). */

/* Current length (positions) of a sequence; 0 for an empty or unknown one. */
TD_API int32_t td_ctx_seq_len(const td_ctx *ctx, int32_t seq);
/* Makes `dst` (which must be empty, else TD_ERR_STATE) share the first n_pos positions of `src` without copying
 * their KV rows (the DeltaNet state is copied). Errors: TD_ERR_RANGE when src is shorter than n_pos,
 * TD_ERR_INVALID_ARG when src == dst, TD_ERR_STATE on a hybrid model when n_pos is not src's length. */
TD_API td_status td_ctx_seq_fork(td_ctx *ctx, int32_t src, int32_t dst, int32_t n_pos);
/* Shortens a sequence to n_pos positions (n_pos = 0 empties it and zeroes its DeltaNet state), releasing rows no
 * other sequence uses. Errors: TD_ERR_RANGE when n_pos is beyond its length, TD_ERR_STATE on a hybrid model for
 * any n_pos other than 0 and the length. */
TD_API td_status td_ctx_seq_truncate(td_ctx *ctx, int32_t seq, int32_t n_pos);
/* Free KV rows left in the context. */
TD_API int32_t td_ctx_n_free_rows(const td_ctx *ctx);
/* Multiply-adds spent in the output head since the context was created (n_outputs x rows x hidden size). */
TD_API int64_t td_ctx_head_macs(const td_ctx *ctx);
/* Jobs the context's worker threads took part in since it was created (each a wake-up and a wait for the
 * slowest thread; 0 with one thread): a measure of the synchronisation a pass costs. */
TD_API int64_t td_ctx_pool_jobs(const td_ctx *ctx);
/* Exactly the bytes td_ctx_new() allocates for these parameters through the allocator (the context, its thread
 * pool, KV cache, activations, sequence states, outputs, per-thread scratch; the worker threads' stacks are the
 * system's): both follow one plan. For a CUDA context the same plan's KV cache, states and activations are GPU
 * memory (and the model's weights, uploaded once, are not counted). TD_ERR_INVALID_ARG for parameters td_ctx_new
 * would refuse. */
TD_API td_status td_ctx_memory(const td_model *model, const td_ctx_params *params, int64_t *bytes);

/* ------------------------------------------------------------------------------------------------------------ */
/* Typed readout: decide criteria over shared evidence                                                           */
/* ------------------------------------------------------------------------------------------------------------ */

/* Prompt: head = instruction + "\nEvidence:\n" + evidence; per criterion, suffix =
 * "\nCriterion: {question}\nOptions:\nA. {description}\nB. ...\nAnswer:". Head and suffix are tokenised separately
 * (no special tokens parsed or added) and their ids concatenated, so every criterion shares the head's tokens. The
 * decision is the softmax over the logits of the option letters' tokens at the last suffix position. */

#define TD_DECIDE_MAX_OPTIONS 20

typedef enum td_decide_mode {
    TD_DECIDE_BATCH = 0,  /* head once, then all suffixes in one forward pass over the shared prefix (default);
                             suffixes that begin with the same tokens (rotations of one criterion, one question with
                             other options) run those tokens once and fork from them: the same bits, less work */
    TD_DECIDE_SERIAL = 1, /* head once, then each suffix from the snapshot, one at a time */
    TD_DECIDE_FRESH = 2   /* every criterion from scratch: head + suffix, nothing reused (the reference) */
} td_decide_mode;

typedef struct td_decide_params {
    const char *instruction;   /* NULL: td_decide_default_instruction() */
    const char *letters;       /* option letters in order, one character each; NULL: "ABCDEFGHIJKLMNOPQRST" */
    td_decide_mode mode;
    int allowed_mass;          /* 1: also compute the full-vocabulary softmax and report the letters' share */
    int32_t n_threads;         /* default 1; results do not depend on it */
    int64_t memory_mb;         /* budget for the KV cache, activations and sequence states, in MB; 0 (the
                                  default): 1024 on the CPU, on CUDA a quarter of the GPU's free memory when the
                                  decider is made (at least 1024). It sets how many criteria share a pass, never
                                  a result */
    int32_t max_batch;         /* most criteria in one forward pass (0: as many as the budget allows) */
    int32_t kv_f16;            /* 1: the KV cache in f16 (td_ctx_params.kv_f16) */
    int cache_head;            /* 1: keep the last call's head prefilled; a call (batch or serial mode) whose head
                                  tokens are the same runs none of them again (td_decide_stats.head_cached counts
                                  these). The probabilities are the same bits either way (prefix reuse is exact). */
    int32_t device;            /* td_device of the decider's contexts (td_ctx_params.device); default CPU */
    int32_t precision;       /* td_precision of the contexts (td_ctx_params.precision); default FP32 */
} td_decide_params;

TD_API td_decide_params td_decide_default_params(void);
/* The built-in instruction (borrowed, static). */
TD_API const char *td_decide_default_instruction(void);

typedef struct td_decider td_decider;

/* Prepares decisions on a model that has a tokenizer: probes which token each letter becomes right after
 * "Answer:" (with or without a separating space); its context is sized, within the memory budget, by the first
 * call that needs it. Fails with TD_ERR_UNSUPPORTED naming a letter that is not a single token (or two letters
 * that share one), TD_ERR_STATE without a tokenizer or with allowed_mass on a pruned head, TD_ERR_INVALID_ARG for
 * bad params (letters: 1 to 20 distinct printable ASCII characters; memory_mb >= 0). A decider is used by one
 * thread at a time; the model must outlive it. */
TD_API td_status td_decider_new(const td_model *model, const td_decide_params *params, td_decider **out);
TD_API void td_decider_free(td_decider *d);

/* The slot map as one JSON object {"version", "model", "separator", "letters", "keep", "token_to_row"}:
 * row i of the readout is letter i, token keep[i]. Borrowed; lives as long as the decider. */
TD_API const char *td_decider_slot_map(const td_decider *d);
/* The option letters in order ("ABCD..."; params.letters or the default). Borrowed; lives as long as the decider. */
TD_API const char *td_decider_letters(const td_decider *d);

typedef struct td_criterion {
    const char *id;                   /* for messages */
    const char *question;
    int32_t n_options;                /* 1 .. min(TD_DECIDE_MAX_OPTIONS, number of letters) */
    const char *const *option_ids;    /* n_options distinct ids */
    const char *const *descriptions;  /* n_options texts, rendered after "A. ", "B. ", ... */
} td_criterion;

typedef struct td_decision {
    int32_t n_options;
    float probs[TD_DECIDE_MAX_OPTIONS]; /* in option order: softmax over the option letters' logits */
    float logits[TD_DECIDE_MAX_OPTIONS];
    int32_t best;                       /* index of the largest probability (the first on ties) */
    float allowed_mass;                 /* share of the full softmax on the letters (when asked; else -1) */
    int32_t suffix_tokens;
    double ms;                          /* wall time of this criterion's share of the work */
} td_decision;

/* Decides n criteria over one evidence text (len bytes of UTF-8). out[i] answers criteria[i]. Errors name the
 * criterion: TD_ERR_INVALID_ARG for no options, more than the letters, duplicate option ids, an empty id or text;
 * TD_ERR_FORMAT for text that is not UTF-8; TD_ERR_RANGE when evidence + suffix exceed the model's context or a
 * criterion does not fit the memory budget. Nothing is written to out on error. The probabilities are the same
 * bits in every mode (batch, serial, fresh), whatever the thread count and whichever criteria share the call. */
TD_API td_status td_decide(td_decider *d, const char *evidence, size_t len, const td_criterion *criteria, int32_t n,
                           td_decision *out);

/* A worked example shown before the evidence ("few-shot"): its evidence, its criterion and the index of the
 * correct option (shown as "{suffix} {letter}\n"). */
typedef struct td_shot {
    const char *evidence;
    size_t evidence_len;
    td_criterion criterion;
    int32_t answer;
} td_shot;

/* td_decide with worked examples: head = instruction + for each shot "\nEvidence:\n{evidence}{suffix}{sep}{letter}\n"
 * + "\nEvidence:\n" + evidence. The shots are part of the shared head: paid once per call. */
TD_API td_status td_decide_shots(td_decider *d, const td_shot *shots, int32_t n_shots, const char *evidence, size_t len,
                                 const td_criterion *criteria, int32_t n, td_decision *out);

/* Free-text answers for comparison with the readout: after the same prompt (head once, each suffix from it),
 * generates greedily up to max_tokens tokens per criterion, stopping at a stop token or a newline after text.
 * texts[i] receives a new NUL-terminated UTF-8 string (td_free). Counts in the decider's stats. Errors as
 * td_decide's, and TD_ERR_STATE on a pruned head (it cannot generate). On error no text is left allocated. */
TD_API td_status td_decide_generate(td_decider *d, const td_shot *shots, int32_t n_shots, const char *evidence, size_t len,
                                    const td_criterion *criteria, int32_t n, int32_t max_tokens, char **texts);

/* The same on token ids: head (instruction + evidence) and one suffix per criterion, already tokenised.
 * TD_ERR_RANGE for an id outside the vocabulary or a prompt beyond the model's context, TD_ERR_INVALID_ARG for an
 * empty suffix or more options than letters. */
TD_API td_status td_decide_ids(td_decider *d, const int32_t *head, int32_t n_head, const int32_t *const *suffixes,
                               const int32_t *n_suffix, const int32_t *n_options, int32_t n, td_decision *out);

/* Several evidences in one pass (the server's /v1/decide across clients). Heads a decider keeps prefilled by content
 * for td_decide_multi (its sequences 0 .. TD_DECIDE_SLOTS - 1). */
#define TD_DECIDE_SLOTS 16

/* One evidence and its criteria: the arguments of one td_decide call and what it gave. */
typedef struct td_decide_group {
    const char *evidence; /* len bytes of UTF-8 (NULL with len 0: the empty text); borrowed for the call */
    size_t len;
    const td_criterion *criteria; /* [n], borrowed for the call */
    int32_t n;
    td_decision *out;       /* [n]: written when status is TD_OK */
    td_status status;       /* out: td_decide's status for this group alone */
    char error[512];        /* out: td_last_error() of a failed group, its own criteria numbered as td_decide does */
    int32_t prefill_tokens; /* out: head tokens this group prefilled (0: its evidence was already prefilled) */
    int32_t head_cached;    /* out: 1 when its head was found prefilled (kept from an earlier call or this pass) */
} td_decide_group;

/* td_decide for each group, many groups per forward pass: each distinct head (instruction + evidence) is prefilled
 * once, in one batch with the pass's other new heads, and kept by content for later calls (least recently used
 * evicted); then every criterion of the pass forks from its head and all their suffixes run in one forward pass.
 * A pass holds the groups, in order, whose heads and suffixes fit the decider's memory budget (and max_batch
 * criteria); the rest go to the next pass. Each decision is bit-identical to td_decide's for that group alone (the
 * engine's batch invariance). A group that fails (its evidence or a criterion refused, or a pass that failed, which
 * is then run group by group) gets td_decide's status and message and never changes another group's result.
 * td_decide on the same decider drops the kept heads. Not thread-safe on one decider (as td_decide).
 * Returns TD_OK (each group's own status in it), or TD_ERR_NOMEM / TD_ERR_INVALID_ARG for the call itself. */
TD_API td_status td_decide_multi(td_decider *d, td_decide_group *groups, int32_t n_groups);

/* Readout statistics of the decider since creation: forward passes, heads prefilled (once per call of
 * td_decide*, or once per criterion with TD_DECIDE_FRESH) and their tokens, suffix tokens (each criterion's whole
 * suffix, whether or not part of it was shared), multiply-adds spent in
 * the output head (K per criterion and per hidden unit with the restricted head), and wall time spent on the shared
 * evidence (head_ms) and on the criteria's suffixes and readout (suffix_ms) by td_decide / td_decide_ids. */
typedef struct td_decide_stats {
    int64_t forwards, head_prefills, head_tokens, suffix_tokens, head_macs, criteria;
    int64_t shared_tokens; /* suffix tokens not run because criteria of a batch share them (a common stem) */
    int64_t head_cached;   /* calls whose head was already prefilled (cache_head): not counted in head_prefills */
    double head_ms, suffix_ms;
    int64_t memory_mb;     /* the memory budget in use (td_decide_params.memory_mb; 0 there: the one chosen) */
} td_decide_stats;
TD_API td_decide_stats td_decider_stats(const td_decider *d);

/* Flags for td_decision_json(). */
#define TD_DECISION_ALLOWED_MASS 1u /* "allowed_mass" (the decider was made with allowed_mass) */
#define TD_DECISION_LOGITS 2u       /* "logits": the option letters' raw logits, in option order */
#define TD_DECISION_NO_MS 4u        /* leave out "ms" (wall time: the one member that differs between runs) */

/* One decision as one compact JSON object, the line `typedecide decide` prints and the server's /v1/decide returns:
 *   {"id", "answer": option id, "letter", "options": [ids in shown order], "probs": [same order],
 *    "allowed_mass" (flag), "logits" (flag), "suffix_tokens", "ms" (rounded to 1 us; unless TD_DECISION_NO_MS)}
 * Floats with 9 significant digits (exact for a float). letters: td_decider_letters(). *json: td_free.
 * Errors: TD_ERR_INVALID_ARG (NULL, a decision that does not belong to the criterion). Safe from any thread. */
TD_API td_status td_decision_json(const td_criterion *criterion, const td_decision *decision, const char *letters,
                                  unsigned flags, char **json);

/* ------------------------------------------------------------------------------------------------------------ */
/* Criteria and fixture rows (JSONL)                                                                             */
/* ------------------------------------------------------------------------------------------------------------ */

/* One line of a criteria or fixture file: {"id", "family", "evidence", "question", "options": [{"id",
 * "description"}, ...], "answer"}. Ids may be JSON strings or integers; family, evidence and answer may be absent
 * (NULL). Borrowed: every pointer lives as long as the td_rows it came from. */
typedef struct td_row {
    int32_t line;             /* 1-based line in the source */
    const char *family;       /* NULL when absent */
    const char *answer;       /* an option id (checked with TD_ROWS_ANSWER), or NULL when absent */
    const char *evidence;     /* NULL when absent; may hold NUL bytes (evidence_len counts them) */
    size_t evidence_len;
    td_criterion criterion;   /* the row's id, question and options, ready for td_decide */
} td_row;

typedef struct td_rows td_rows;

/* Flags for td_rows_load / td_rows_parse. */
#define TD_ROWS_ANSWER 1u     /* every row needs an "answer" naming one of its options */
#define TD_ROWS_EVIDENCE 2u   /* every row needs its own "evidence" */
#define TD_ROWS_UNIQUE_IDS 4u /* a repeated row id is a bad row (the first one stays) */
#define TD_ROWS_SKIP_BAD 8u   /* record bad rows (td_rows_bad) and keep the others; without it the first bad row
                                 fails the load with TD_ERR_FORMAT and the message "SOURCE:LINE: what is wrong" */

/* Reads a whole JSONL file (blank lines skipped). Errors: TD_ERR_IO (cannot open or read), TD_ERR_FORMAT (a bad
 * row, see TD_ROWS_SKIP_BAD), TD_ERR_NOMEM. A row is bad when it is not a JSON object, lacks an id, a string
 * question or a non-empty options array, has more than TD_DECIDE_MAX_OPTIONS options, an option without an id or
 * a string description, two options with one id, or breaks what the flags require. */
TD_API td_status td_rows_load(const char *path, unsigned flags, td_rows **out);
/* The same from len bytes in memory; `name` stands for the source in messages. */
TD_API td_status td_rows_parse(const char *data, size_t len, const char *name, unsigned flags, td_rows **out);
TD_API void td_rows_free(td_rows *rows);
TD_API int32_t td_rows_count(const td_rows *rows);
/* Row i (0-based, in file order), or NULL when out of range. Borrowed. */
TD_API const td_row *td_rows_get(const td_rows *rows, int32_t i);
/* The bad rows recorded under TD_ROWS_SKIP_BAD, in the order found (parse errors, then repeated ids): message i
 * is "SOURCE:LINE: what is wrong" (borrowed), NULL when out of range. */
TD_API int32_t td_rows_n_bad(const td_rows *rows);
TD_API const char *td_rows_bad(const td_rows *rows, int32_t i);
/* FNV-1a 64 of every byte read (identifies the fixture in results). */
TD_API uint64_t td_rows_hash(const td_rows *rows);

/* Evidence groups: criteria whose evidence texts are byte-identical share one head. group[i] receives the group
 * of text i; groups are numbered 0 .. *n_groups - 1 in order of first appearance (a NULL text is the empty text).
 * order (n entries, may be NULL) receives the indices group by group: group 0's in increasing order, then group
 * 1's, and so on. Decide, evaluate and every other client group criteria with this one function. */
TD_API td_status td_evidence_groups(const char *const *texts, const size_t *lens, int32_t n, int32_t *group,
                                    int32_t *order, int32_t *n_groups);

/* ------------------------------------------------------------------------------------------------------------ */
/* Files: outputs that never destroy what they replace                                                           */
/* ------------------------------------------------------------------------------------------------------------ */

/* Every file the library writes whole (a GGUF export, predictions, a merged results file) follows one discipline,
 * which these functions offer to clients: the file is written under a temporary name in the target's own directory
 * (the target's real directory when the target is a symbolic link), synced and renamed over the target, so that a
 * reader, or a crash, sees the old file or the whole new one and never a part; a failed write removes only that
 * temporary file; a target that exists and is not a regular file (a directory, a device such as /dev/full, a pipe)
 * is refused and left alone. Files the library reads whole (config.json, tokenizer.json, criteria) must be regular
 * files of at most 256 MiB; the refusal names the file and the cap. */
#define TD_FILE_NO_REPLACE 1u /* an existing target is TD_ERR_STATE ("PATH exists") instead of being replaced */
#define TD_FILE_NO_SYNC 2u    /* no fsync of the file and its directory (scratch files) */

/* Writes n bytes as the whole file at path. Errors: TD_ERR_IO naming the path and the reason (a missing directory,
 * a full disk, a target that is not a regular file), TD_ERR_STATE (TD_FILE_NO_REPLACE and it exists). */
TD_API td_status td_file_write(const char *path, const void *data, size_t n, unsigned flags);

/* The same, streamed: open, write any number of times, then commit or abort. One thread per handle. */
typedef struct td_outfile td_outfile;
TD_API td_status td_outfile_open(const char *path, unsigned flags, td_outfile **out);
/* After a failed write every later write and the commit fail with the same reason. */
TD_API td_status td_outfile_write(td_outfile *f, const void *data, size_t n);
/* Syncs and renames into place; frees f whatever happens (on failure the target is as it was). */
TD_API td_status td_outfile_commit(td_outfile *f);
/* Removes the temporary file and frees f; the target is untouched. NULL: no-op. */
TD_API void td_outfile_abort(td_outfile *f);

/* Refuses outputs that would destroy an input or each other, by file identity (device and inode after symbolic and
 * hard links; a path that does not exist yet by its directory and name, so that "./o/x" and "o/x" are one file):
 * TD_ERR_INVALID_ARG "OUT: refusing to write over an input of this command (IN)" when an output is an input, "OUT:
 * refusing to write over a file of the model IN" when it is an existing file inside an input directory (a model),
 * "OUT1 and OUT2 are the same file: ..." for two outputs; TD_ERR_IO "OUT: a directory, not a regular file: ..."
 * for an output that exists and is not a regular file, or whose directory does not exist. NULL entries and "-"
 * (standard input or output) are skipped. */
TD_API td_status td_paths_check(const char *const *inputs, int32_t n_inputs, const char *const *outputs,
                                int32_t n_outputs);

/* A 64-bit fingerprint of a model for provenance records: of a file, its size and 1 MiB of its content sampled
 * across it; of a directory, the names and fingerprints of its model files (config.json, generation_config.json,
 * tokenizer.json, tokenizer_config.json, adapter_config.json, *.safetensors, *.safetensors.index.json, *.gguf).
 * It changes when a model is replaced or retrained, not when it is copied or moved. TD_ERR_IO naming the file. */
TD_API td_status td_file_fingerprint(const char *path, uint64_t *fingerprint);

/* ------------------------------------------------------------------------------------------------------------ */
/* Synthetic checkpoints and shapes                                                                              */
/* ------------------------------------------------------------------------------------------------------------ */

/* Published shapes of the supported families: config.json text of a preset ("qwen3-0.6b", ...; static), or NULL
 * when unknown; and the comma-separated list of names (static). */
TD_API const char *td_synth_preset_config(const char *name);
TD_API const char *td_synth_preset_names(void);

typedef struct td_synth_params {
    const char *tokenizer_json; /* copied beside the weights (with the tokenizer_config.json next to it); NULL: none */
    uint64_t seed;              /* 1 */
    const char *dtype;          /* "bf16" (default), "f16" or "f32" */
    void (*progress)(void *user, double fraction); /* may be NULL */
    void *progress_user;
} td_synth_params;

TD_API td_synth_params td_synth_default_params(void);

/* Writes out_dir/{config.json, model.safetensors, generation_config.json} (and the tokenizer files): random weights
 * in the exact tensor layout of the architecture config_json describes, for benchmarks and tests (the weights mean
 * nothing). Uniform in +-sqrt(3 / fan_in); norms near 1 (near 0 when the architecture scales by 1 + w). Creates
 * out_dir if missing. Errors: the config's (TD_ERR_FORMAT / TD_ERR_UNSUPPORTED), TD_ERR_IO naming the file. */
TD_API td_status td_synth_write(const char *out_dir, const char *config_json, const td_synth_params *params);

/* What a config.json implies without any weights: the parameter count of the text model (a tied head counted once),
 * the vocabulary, the hidden size and whether the head is tied. `name` stands for the source in messages. */
TD_API td_status td_config_shape(const char *config_json, size_t len, const char *name, int64_t *n_params, int32_t *n_vocab,
                                 int32_t *n_embd, int *tied);

/* ------------------------------------------------------------------------------------------------------------ */
/* Sampling: one chain for every path (generate, chat, the server, decide's generate mode)                       */
/* ------------------------------------------------------------------------------------------------------------ */

/* The chain, in this order, over one row of logits:
 *   0. the logit bias (td_sampler_set_logit_bias: OpenAI's logit_bias), added to the raw logits;
 *   1. penalties over the last penalty_last_n tokens the sampler was shown (td_sampler_accept: the prompt, then
 *      each generated token): repetition (Hugging Face's / CTRL's: a logit l of a token in the window becomes
 *      l / r when l > 0, l * r otherwise), then presence and frequency (OpenAI's: l - presence * [count > 0]
 *      - frequency * count);
 *   2. temperature <= 0: greedy, the argmax of the penalised logits (the lowest id wins ties); the rest is skipped;
 *   3. top_k (0 = off: every id stays), then softmax at the temperature (in double), then top_p (the smallest set
 *      of most likely ids whose probability reaches top_p; 1 = off), then min_p (ids below min_p times the
 *      largest probability go; 0 = off), then one draw from what is left, renormalised.
 * Candidates are ordered by logit, ties by id, so a seed gives the same tokens on every machine and thread count.
 * td_model_sampler_defaults() gives the model's own values (generation_config.json); a caller overrides only the
 * fields the user set, so a global default never shadows the model's. */
typedef struct td_sampler_params {
    float temperature;        /* <= 0: greedy (argmax; the lowest id wins ties) */
    int32_t top_k;            /* keep the k most likely ids (0 = off: all ids) */
    float top_p;              /* then the smallest set whose probability reaches top_p (1 = off) */
    uint64_t seed;
    float min_p;              /* then drop ids whose probability is below min_p x the top one (0 = off) */
    float repetition_penalty; /* 1 = off; > 0 */
    float presence_penalty;   /* 0 = off; -2..2 as OpenAI's */
    float frequency_penalty;  /* 0 = off; -2..2 */
    int32_t penalty_last_n;   /* the penalties' window in accepted tokens: -1 = all of them, 0 = penalties off;
                                 default 64 */
} td_sampler_params;

/* The library's defaults: greedy (temperature 0), top_k 0 (off), top_p 1, min_p 0, repetition 1, presence and
 * frequency 0, penalty_last_n 64, seed 1. */
TD_API td_sampler_params td_sampler_default_params(void);

/* The model's sampling defaults: td_sampler_default_params() overridden by the model's generation_config.json
 * (temperature, top_k, top_p, min_p, repetition_penalty; do_sample false means greedy, temperature 0). A model
 * without that file (or a GGUF file) gets the library's defaults. */
TD_API td_sampler_params td_model_sampler_defaults(const td_model *model);

/* Checks the fields: temperature finite and >= 0, top_k >= 0, top_p in (0, 1], min_p in [0, 1], repetition in
 * (0, 100], presence and frequency in [-2, 2], penalty_last_n >= -1. TD_ERR_INVALID_ARG naming the field. */
TD_API td_status td_sampler_params_check(const td_sampler_params *p);

/* The effective values as one JSON object {"temperature", "top_k", "top_p", "min_p", "repetition_penalty",
 * "presence_penalty", "frequency_penalty", "penalty_last_n", "seed", "greedy"} (floats with 9 digits).
 * *json: td_free. */
TD_API td_status td_sampler_params_json(const td_sampler_params *p, char **json);

/* Stateless sampling without penalties: picks the next id from n logits with steps 2-3 of the chain.
 * *rng_state carries the random stream between calls (initialise it to the seed). `scratch` must hold 2 * n
 * floats. Deterministic for a given state. Returns -1 when n <= 0. */
TD_API int32_t td_sample(const float *logits, int32_t n, const td_sampler_params *p, uint64_t *rng_state, float *scratch);

/* A sampler with state: the parameters, the random stream (started at the seed) and the penalty window.
 * One thread at a time; different samplers on different threads at once. */
typedef struct td_sampler td_sampler;

/* n_vocab: the logits' length (>= 1). Errors: td_sampler_params_check's, TD_ERR_INVALID_ARG. */
TD_API td_status td_sampler_new(const td_sampler_params *p, int32_t n_vocab, td_sampler **out);
TD_API void td_sampler_free(td_sampler *s);
/* Shows the sampler a token of the context (prompt or generated): it enters the penalty window. Ids outside
 * 0..n_vocab-1 are ignored. */
TD_API void td_sampler_accept(td_sampler *s, int32_t id);
/* Empties the window and restarts the random stream at the seed. */
TD_API void td_sampler_reset(td_sampler *s);
/* Sets the logit bias (step 0 of the chain; replaces any earlier one): bias[i] is added to the logit of ids[i]
 * before every other step (greedy included), as OpenAI's logit_bias (-100 in effect bans a token, +100 forces it).
 * n = 0 removes it. Errors: TD_ERR_RANGE for an id outside 0..n_vocab-1, TD_ERR_INVALID_ARG for a bias that is not
 * finite or an id given twice, TD_ERR_NOMEM; the sampler is unchanged on error. */
TD_API td_status td_sampler_set_logit_bias(td_sampler *s, const int32_t *ids, const float *bias, int32_t n);
/* Runs the whole chain on n_vocab logits (not modified) and returns the id (it is NOT accepted: call
 * td_sampler_accept when it joins the context). Deterministic for a given state. */
TD_API int32_t td_sampler_sample(td_sampler *s, const float *logits);

/* log-softmax of n logits at position id (the raw model's log-probability, before any sampler step), in double
 * internally. Also the top n_top ids by logit (ties: lower id first) and their log-probabilities when top_ids /
 * top_logprobs are not NULL. Returns the log-probability of id (-INFINITY when id is out of range). */
TD_API float td_logprob(const float *logits, int32_t n, int32_t id, int32_t n_top, int32_t *top_ids, float *top_logprobs);

/* ------------------------------------------------------------------------------------------------------------ */
/* Stop rules                                                                                                    */
/* ------------------------------------------------------------------------------------------------------------ */

/* Stop strings are matched on the decoded text of the generated tokens, across token boundaries. Text that could
 * still be the beginning of a stop string is held back and released only when it can no longer match; the stop
 * string and everything after it are never released. Stop ids (the model's td_model_stop_ids unless ignore_eos,
 * plus a request's own) end generation without adding their text. Release is by complete UTF-8 characters only: a
 * token that ends inside a character waits for the next; bytes that can never form one become U+FFFD at the end.
 * td_gen applies these rules; td_stopper exposes the same matcher on text. */
typedef struct td_stopper td_stopper;

/* stops: n strings (each 1..256 bytes, copied; n <= 16). TD_ERR_INVALID_ARG for an empty or longer string. */
TD_API td_status td_stopper_new(const char *const *stops, int32_t n, td_stopper **out);
TD_API void td_stopper_free(td_stopper *s);
/* Feeds len bytes of generated text. *out / *out_len receive the text that may be released now (borrowed until
 * the next call). Returns 1 when a stop string matched (nothing after its start is ever released; further calls
 * release nothing), else 0. final = 1: no more text will come: releases everything held that did not match. */
TD_API int td_stopper_feed(td_stopper *s, const char *bytes, size_t len, int final, const char **out, size_t *out_len);
/* Index of the stop string that matched, or -1. */
TD_API int32_t td_stopper_matched(const td_stopper *s);

/* ------------------------------------------------------------------------------------------------------------ */
/* Chat templates (the ChatML family, rendered natively)                                                         */
/* ------------------------------------------------------------------------------------------------------------ */

/* A model's chat template comes from tokenizer_config.json's chat_template (or a GGUF file's
 * tokenizer.chat_template). It is not interpreted: it is recognised as one of the supported families and that
 * family is rendered by C code that gives the same text as transformers' apply_chat_template (checked in the
 * suite against references made with transformers 5.17):
 *   "qwen3"   Qwen3's template (Qwen3-0.6B .. 8B): system, user, assistant (reasoning_content, or <think>..</think>
 *             inside content; the reasoning of assistant turns before the last user query is dropped), tool calls
 *             as <tool_call>{"name", "arguments"}</tool_call>, tool results as <tool_response> in a user turn,
 *             a tools list in the system turn; with enable_thinking false the generation prompt ends with
 *             "<think>\n\n</think>\n\n".
 *   "qwen3.5" Qwen3.5's: contents trimmed, tool calls as <function=..><parameter=..>, and the generation prompt
 *             opens "<think>\n" with thinking on (closed "<think>\n\n</think>\n\n" with it off).
 * Anything else is TD_ERR_UNSUPPORTED with a message that says so and names the source file. */

typedef struct td_chat_message {
    const char *role;              /* "system", "user", "assistant" or "tool" */
    const char *content;           /* UTF-8; NULL = empty */
    const char *reasoning_content; /* assistant only; NULL = none (then <think>..</think> in content is split) */
    const char *tool_calls_json;   /* assistant only: a JSON array of OpenAI tool calls
                                      [{"type": "function", "function": {"name", "arguments"}}] where arguments is
                                      a JSON object or a string holding one; NULL = none */
} td_chat_message;

typedef struct td_chat_params {
    int add_generation_prompt; /* 1 (default): end with the assistant's opening */
    int enable_thinking;       /* 1 (default); 0 = chat_template_kwargs {"enable_thinking": false} */
    const char *tools_json;    /* a JSON array of tool definitions (OpenAI's {"type": "function", "function": ..})
                                  rendered with Python's json.dumps spacing in the system turn; NULL = none */
} td_chat_params;

TD_API td_chat_params td_chat_default_params(void);

/* The family of the model's chat template: "qwen3" or "qwen3.5" (static string), or NULL with TD_ERR_UNSUPPORTED
 * (the message says why: no template, or one this library does not render) in *status when status != NULL. */
TD_API const char *td_model_chat_family(const td_model *model, td_status *status);

/* Renders n messages with the model's template. *text: a new NUL-terminated string (td_free). To tokenize it,
 * prefer td_chat_tokenize: the text alone cannot tell the template's special tokens from the same strings inside a
 * message. Errors: TD_ERR_UNSUPPORTED (see td_model_chat_family), TD_ERR_INVALID_ARG naming the message (unknown
 * role, a system message not first, no messages, a tool call without a name, Qwen3.5: no user message),
 * TD_ERR_FORMAT for tools_json / tool_calls_json that are not the JSON described. Safe from any thread. */
TD_API td_status td_chat_render(const td_model *model, const td_chat_message *messages, int32_t n,
                                const td_chat_params *params, char **text);

/* Flags for td_chat_tokenize(). */
#define TD_CHAT_ALLOW_SPECIAL 1u /* special-token text inside a message (e.g. "<|im_start|>system") becomes those
                                    tokens, as Hugging Face's apply_chat_template followed by the tokenizer does */
/* td_chat_render, then its token ids: the template's own special tokens (<|im_start|>, <|im_end|>, <think>, ...)
 * are parsed as such, and everything that comes from the messages (contents, reasoning, tool call names and
 * arguments, the tools list) is tokenized as plain text, so that a user cannot forge a turn of another role by
 * typing its markers. TD_CHAT_ALLOW_SPECIAL restores Hugging Face's behaviour (only for trusted messages). Where no
 * message holds an added token's text, the ids are Hugging Face's either way. *text (may be NULL: not wanted) and
 * *ids: new buffers (td_free). Errors: td_chat_render's and td_tokenize's. */
TD_API td_status td_chat_tokenize(const td_model *model, const td_chat_message *messages, int32_t n,
                                  const td_chat_params *params, unsigned flags, char **text, int32_t **ids,
                                  size_t *n_ids);

/* The same from OpenAI's messages JSON array (len bytes): role, content (a string, null, or an array of
 * {"type": "text", "text"} parts, joined), reasoning_content, tool_calls; other members are ignored.
 * TD_ERR_FORMAT naming the member (e.g. "messages[2].role") for anything else. */
TD_API td_status td_chat_render_json(const td_model *model, const char *messages_json, size_t len,
                                     const td_chat_params *params, char **text);

/* Splits a generated assistant text into reasoning and content, as the templates read them back: the reasoning is
 * what precedes the first "</think>" (after an optional leading "<think>", newlines stripped at both ends), the
 * content what follows it (leading newlines stripped). Without "</think>": when thinking_open (the prompt opened
 * "<think>\n": Qwen3.5 with thinking on) all of it is reasoning still open, else a text that starts with "<think>"
 * is open reasoning and any other text is all content. *reasoning and *content: new strings (td_free), either may
 * be "" (never NULL on success). Works on a partial text (streaming: split the text so far). */
TD_API td_status td_chat_split_reasoning(const char *text, size_t len, int thinking_open, char **reasoning,
                                         char **content);

/* ------------------------------------------------------------------------------------------------------------ */
/* Generation: continuous batching with sessions and KV reuse                                                    */
/* ------------------------------------------------------------------------------------------------------------ */

/* A td_gen runs many generation requests over one model and ONE context that holds all their sequences. Each
 * td_gen_step() makes one td_ctx_decode() over every active request: one new token for each request that is
 * generating, plus prefill chunks of requests that are reading their prompt (continuous batching: requests join
 * and leave between steps). A request's tokens and log-probabilities never depend on what else is in the batch
 * (the engine computes every row independently): a request alone and with others gives the same bits.
 *
 * Sessions and reuse. When a request finishes, its sequence (prompt + the generated tokens that were run) stays in
 * the context as a cached session, keyed by its token ids. A new request is matched against EVERY cached session
 * (and the prefilled part of running ones) for the longest common token prefix; it forks from it (the KV rows are
 * shared, not copied) and prefills only the rest; the event reports how many tokens were reused. At least the last
 * prompt token is always run (its logits are needed).
 * Qwen3.5 (hybrid): the DeltaNet state cannot be rolled back, so only an exact prefix that is a sequence's END can
 * be resumed. The engine keeps snapshots (forks, sharing the KV rows, copying the constant-size DeltaNet state) at
 * turn boundaries: before each "<|im_start|>" token of a prompt's unreused part (the last 4), at the end of the
 * prompt (where the answer starts) and at the end of every finished request; a new request resumes from the
 * longest snapshot that is a prefix of its prompt.
 * Memory: one KV pool of n_ctx rows and max_sequences sequence slots (requests, sessions, snapshots). A request is
 * admitted (queued until then, FIFO) when a slot and the rows it may need (unreused prompt + max_tokens) are free;
 * to make room, cached sessions and snapshots are evicted, least recently used first. Running requests are never
 * evicted.
 *
 * Thread safety: a td_gen is used by one thread at a time (the server's engine thread). Events and their arrays
 * are borrowed until the next td_gen_* call on the same object. The model must outlive it. */
typedef struct td_gen td_gen;

typedef struct td_gen_params {
    int32_t n_ctx;         /* KV rows for all requests and sessions together. 0 (default): as many as cache_bytes
                              allows */
    int64_t cache_bytes;   /* budget for the context (KV cache, states, activations): default 1 GiB; used when
                              n_ctx is 0 (else only checked: TD_ERR_NOMEM when n_ctx does not fit) */
    int32_t max_sequences; /* sequence slots: running requests + cached sessions + snapshots (2..4096). Default 32.
                              On a hybrid model every slot holds a DeltaNet state (~20 MB on Qwen3.5-0.8B) */
    int32_t max_running;   /* most requests generating at once, < max_sequences (the rest wait in the queue).
                              Default 8 */
    int32_t n_batch;       /* most tokens per step (decode tokens + prefill chunks). Default 512 */
    int32_t n_threads;     /* default 1; results do not depend on it */
    int32_t kv_f16;        /* 1: KV cache in f16 (half the memory per row) */
    int32_t device;        /* td_device of the context (td_ctx_params.device); default CPU */
    int32_t precision;   /* td_precision of the contexts (td_ctx_params.precision); default FP32 */
    int32_t max_queue;     /* most requests waiting; td_gen_submit fails with TD_ERR_STATE beyond. Default 256 */
    td_log_fn log;
    void *log_user;
} td_gen_params;

TD_API td_gen_params td_gen_default_params(void);

/* Errors: TD_ERR_STATE for a model that cannot generate (pruned head), TD_ERR_INVALID_ARG for bad params,
 * TD_ERR_NOMEM when the budget cannot hold n_ctx rows (or 64 rows). */
TD_API td_status td_gen_new(const td_model *model, const td_gen_params *params, td_gen **out);
TD_API void td_gen_free(td_gen *g);
/* KV rows of the pool (after sizing from cache_bytes) and bytes the context took. */
TD_API int32_t td_gen_n_ctx(const td_gen *g);
TD_API int64_t td_gen_memory(const td_gen *g);

typedef struct td_gen_request {
    const int32_t *prompt;      /* n_prompt >= 1 ids (copied) */
    int32_t n_prompt;
    td_sampler_params sampler;  /* start from td_model_sampler_defaults() */
    int32_t max_tokens;         /* tokens to generate, >= 0 (0: only the prompt, e.g. for prompt_logprobs; it ends
                                   "length"). Default 16 */
    const char *const *stop;    /* stop strings (copied), n_stop <= 16 */
    int32_t n_stop;
    const int32_t *stop_ids;    /* extra stop ids (copied), n_stop_ids <= 16 */
    int32_t n_stop_ids;
    int ignore_eos;             /* 1: the model's stop ids do not stop (the request's own still do) */
    int32_t logprobs;           /* -1 (default): none; 0..20: each token's log-probability and this many top
                                   alternatives (raw log-softmax of the logits, before the sampler) */
    int32_t prompt_logprobs;    /* -1 (default): none; 0..20: the log-probability of every prompt token after the
                                   first given those before it, with top alternatives (the echo of
                                   /v1/completions). Needs every prompt position's logits, so nothing is reused */
    int cache;                  /* 1 (default): keep the finished sequence as a cached session; 0: drop it */
} td_gen_request;

TD_API td_gen_request td_gen_default_request(void);

/* Queues a request; *id receives its id (> 0, increasing). Nothing runs until td_gen_step. Errors:
 * TD_ERR_INVALID_ARG naming the field (empty prompt, bad sampler, max_tokens < 0, too many or empty stop strings,
 * logprobs out of 0..20), TD_ERR_RANGE for an id outside the vocabulary or prompt + max_tokens beyond the pool's
 * rows (positions beyond the model's trained context are not refused here: clients check td_model_n_ctx_train),
 * TD_ERR_STATE when the queue is full (try later). */
TD_API td_status td_gen_submit(td_gen *g, const td_gen_request *req, int64_t *id);

/* Most choices of one request (td_gen_submit_n). */
#define TD_GEN_MAX_CHOICES 16
/* Queues n choices of one request (OpenAI's n): ids[0..n) receive their ids; each is an ordinary request with its
 * own events, but the prompt is read once: the first choice prefills it, the others are admitted with it (n
 * slots, the rows of every choice's max_tokens) and fork its sequence at the prompt's end (the prompt's KV rows are
 * shared, not copied), drawing their first tokens from the same logits. Choice k samples with seed + k, so choice 0
 * equals the same request submitted alone. Only choice 0 computes prompt_logprobs (the others' PROMPT events carry
 * none). A request of n choices runs n sequences: it waits until n fit under max_running (or runs alone). When
 * choice 0 ends before its prompt is read (cancelled, failed), the others end the same way. n = 1 is
 * td_gen_submit. Errors: td_gen_submit's (prompt + n x max_tokens beyond the pool: TD_ERR_RANGE; fewer than n
 * free places in the queue: TD_ERR_STATE), TD_ERR_INVALID_ARG for n outside 1..TD_GEN_MAX_CHOICES or not below
 * max_sequences. All or none are queued. */
TD_API td_status td_gen_submit_n(td_gen *g, const td_gen_request *req, int32_t n, int64_t *ids);

/* Sets the logit bias of a queued or running request's sampler (td_sampler_set_logit_bias; set it before the
 * next td_gen_step to have it from the first token). Errors: td_sampler_set_logit_bias's, TD_ERR_INVALID_ARG for
 * an unknown or finished id. */
TD_API td_status td_gen_set_logit_bias(td_gen *g, int64_t id, const int32_t *ids, const float *bias, int32_t n);

/* Cancels a queued or running request: it ends with TD_GEN_FINISH_CANCELLED (its event comes from the next
 * td_gen_next_event) and its rows are released (its prefix stays as a session when cache is on). Unknown or
 * finished ids: TD_ERR_INVALID_ARG; TD_ERR_NOMEM when its DONE event could not be queued (it is cancelled all the
 * same). */
TD_API td_status td_gen_cancel(td_gen *g, int64_t id);

/* One batched step: admits queued requests that fit, then runs one td_ctx_decode over all active requests, samples
 * the next token of each that finished its prompt, applies the stop rules and queues the events. *n_active (may
 * be NULL) receives the requests still queued or running afterwards. A step with nothing to do returns TD_OK at
 * once. Errors of the decode (TD_ERR_NONFINITE, TD_ERR_NOMEM) end the requests of the batch with
 * TD_GEN_FINISH_ERROR (their events carry the message) and the call still returns TD_OK. TD_ERR_NOMEM when an
 * event (or its text or top log-probabilities) could not be allocated: the step's work is done and the events
 * that could be made are queued, but a client cannot trust the stream of the requests concerned (cancel them).
 * A session or snapshot that cannot be cached for lack of memory is dropped (the results stay exact; later
 * requests reuse less) and also makes the call return TD_ERR_NOMEM. */
TD_API td_status td_gen_step(td_gen *g, int32_t *n_active);

typedef enum td_gen_event_kind {
    TD_GEN_EVENT_NONE = 0,   /* no event pending */
    TD_GEN_EVENT_PROMPT = 1, /* the prompt was read: n_reused, prompt logprobs when asked, ms_prefill */
    TD_GEN_EVENT_TOKEN = 2,  /* one generated token */
    TD_GEN_EVENT_DONE = 3    /* the request ended: finish, text held back and released now, counts, timings */
} td_gen_event_kind;

typedef enum td_gen_finish {
    TD_GEN_FINISH_NONE = 0,
    TD_GEN_FINISH_STOP = 1,      /* a stop id or stop string ("stop") */
    TD_GEN_FINISH_LENGTH = 2,    /* max_tokens reached ("length") */
    TD_GEN_FINISH_CANCELLED = 3, /* td_gen_cancel */
    TD_GEN_FINISH_ERROR = 4      /* the engine failed on this request (message in the event) */
} td_gen_finish;

/* "stop", "length", "cancelled", "error" or "" (static). */
TD_API const char *td_gen_finish_str(td_gen_finish f);

typedef struct td_gen_event {
    td_gen_event_kind kind;
    int64_t request;
    /* TOKEN */
    int32_t token;            /* the id (a stop id ends the request: it comes as TOKEN with its text empty, then
                                 DONE) */
    int32_t index;            /* 0-based index among the generated tokens */
    float logprob;            /* raw log-softmax (NAN unless the request asked for logprobs) */
    int32_t n_top;            /* top alternatives (request.logprobs) */
    const int32_t *top_ids;   /* [n_top] */
    const float *top_logprobs;
    const char *text;         /* text released with this event (TOKEN or DONE): complete UTF-8, stop strings held
                                 back until they cannot match; may be empty */
    size_t text_len;
    /* PROMPT */
    int32_t n_prompt, n_reused;       /* prompt tokens and those taken from a cached session */
    int32_t n_prompt_logprobs;        /* n_prompt - 1 when asked, else 0 */
    const float *prompt_logprobs;     /* [n_prompt_logprobs]: of prompt token i + 1 */
    const int32_t *prompt_top_ids;    /* [n_prompt_logprobs * n_prompt_top] */
    const float *prompt_top_logprobs; /* same shape */
    int32_t n_prompt_top;
    /* DONE */
    td_gen_finish finish;
    int32_t n_generated;              /* tokens generated (a final stop id counted) */
    int32_t stop_index;               /* the stop string that matched, or -1 */
    int32_t stop_id;                  /* the stop id that ended it, or -1 */
    const char *error;                /* TD_GEN_FINISH_ERROR: the message */
    double ms_queue, ms_prefill, ms_first_token, ms_decode; /* waiting, reading the prompt, submit to first token,
                                                               first to last token */
} td_gen_event;

/* Takes the next pending event into *ev (borrowed until the next td_gen_* call). Returns 1 when there was one,
 * 0 when none (ev->kind = TD_GEN_EVENT_NONE). Events of one request come in order: PROMPT, TOKEN..., DONE. */
TD_API int td_gen_next_event(td_gen *g, td_gen_event *ev);

/* Counters since creation. */
typedef struct td_gen_stats {
    int64_t submitted, finished, steps, decoded_tokens, prefill_tokens, reused_tokens, evictions;
    int32_t running, queued, sessions, snapshots, free_rows;
} td_gen_stats;
TD_API td_gen_stats td_gen_get_stats(const td_gen *g);

/* Drops every cached session and snapshot (not the running requests). */
TD_API void td_gen_clear_cache(td_gen *g);

#ifdef __cplusplus
}
#endif

#endif /* TYPEDECIDE_H */
