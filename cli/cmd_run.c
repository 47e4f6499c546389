/* typedecide run: decisions over a whole JSONL corpus (td_run), with progress, shards and an MPI mode;
 * typedecide merge: shards' results back into input order (td_run_merge). */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "typedecide_run.h"
#include "commands.h"
#include "run_mpi.h"

static const char usage_text[] =
    "usage: typedecide run --model M --input docs.jsonl --out results.jsonl [--criteria C.jsonl] [options]\n"
    "       mpirun -n K typedecide run ...   (each rank takes a share; rank 0 merges the results)\n"
    "\n"
    "Decides every document of a JSONL corpus. Input lines: {\"id\", \"evidence\", \"criteria\" (optional), ...};\n"
    "a document's criteria are the --criteria file's, then its own. Output: one line per document, in input order,\n"
    "written whole when the document is done:\n"
    "  {\"id\", \"line\", \"decisions\": [{\"id\", \"answer\", \"letter\", \"options\", \"probs\", \"allowed_mass\" (with\n"
    "   --allowed-mass), \"suffix_tokens\"}, ...], \"ms\", \"doc_hash\", \"check\"}\n"
    "Every results and errors line ends with \"doc_hash\" (a 64-bit hash of its input line's bytes: --resume keeps a\n"
    "line only when it is its input line's) and \"check\" (the hash of the line's bytes before it: an edited line is\n"
    "decided again by --resume and refused by merge); non-cryptographic, against accidents (docs/data-safety.md).\n"
    "The probabilities are bit for bit those of `typedecide decide` on the same evidence and criteria.\n"
    "Bad lines (malformed JSON, no id or evidence, an id holding NUL, bad criteria, evidence beyond the context, a\n"
    "line over 64 MiB) go to the errors file with their line number and are skipped; repeated ids stop the run\n"
    "before anything is written.\n"
    "OUT.provenance.json records what the results are of (the input's size and hash, the criteria's, the model's\n"
    "fingerprint and the settings that change results, the shard); --resume continues only that run, and refuses\n"
    "anything else with the reason, changing nothing. While a run writes OUT it holds OUT's lock: a second run on\n"
    "the same files is refused.\n"
    "\n"
    "  --model M            Hugging Face model directory or GGUF file\n"
    "  --input FILE         the corpus (JSONL): a regular file (it is read twice; save a stream to a file first)\n"
    "  --criteria FILE      criteria for every document (JSONL, as for decide, without evidence; at most 256 MiB)\n"
    "  --out FILE           results (JSONL); the files are fsync'ed at every checkpoint\n"
    "  --errors FILE        bad lines (JSONL: line, id, error); default OUT.errors\n"
    "  --resume             continue OUT: repair a torn last line, drop duplicated or out-of-order lines (counted\n"
    "                       on stderr), skip the documents already there\n"
    "  --force              replace existing OUT and errors files (without --resume they are refused): the run\n"
    "                       writes OUT.partial (ERRORS.partial, OUT.partial.provenance.json) and renames them over\n"
    "                       the old files when it completes; after a failure or a kill OUT is unchanged and\n"
    "                       --resume continues the partial run\n"
    "  --strict             a bad line stops the run (after it is recorded)\n"
    "  --shard I/N          decide only share I of N (0 <= I < N): the k-th document goes to shard k %% N;\n"
    "                       `typedecide merge` joins the shards' files into one run's\n"
    "  --device cpu|cuda    where to compute (default cpu; cuda: a build with -DTD_CUDA=ON and an NVIDIA GPU)\n"
    CLI_PRECISION_HELP
    "  --threads N          worker threads (default: all cores; under MPI, the cores / ranks on the machine)\n"
    "  --memory MB          memory budget of the decider's context (default 1024; with --device cuda a quarter\n"
    "                       of the GPU's free memory)\n"
    "  --batch-size N       at most N criteria per forward pass\n"
    "  --docs-per-pass N    decide N documents together: read ahead, one multi-evidence call (their heads\n"
    "                       prefilled in one pass, their criteria in shared passes), lines written in input order;\n"
    "                       the same bytes for every N (with --no-timing; \"ms\" is then the call's time / its\n"
    "                       documents), and --resume may change N. Default 16 with --device cuda (small passes are\n"
    "                       bound by launches there), 1 on the CPU (measured: no gain; passes there are\n"
    "                       compute-bound). Holds N documents in memory at once (at most N x 64 MiB of text)\n"
    "  --kv f32|f16         KV cache precision (default f32)\n"
    "  --letters ABCD...    option letters (default A..T)\n"
    "  --instruction T      instruction text, or a file holding it (at most 1 MiB; a path that names no file is an\n"
    "                       error)\n"
    "  --allowed-mass       also report the share of the full softmax on the letters\n"
    "  --adapter DIR        PEFT LoRA adapter, merged at load\n"
    "  --no-timing          leave \"ms\" out: every byte of the output is then deterministic\n"
    "  --checkpoint N       fsync every N documents (default 64; and every 10 s)\n"
    "  --summary FILE       write the final summary as JSON (counts, rates, peak RSS of this process); '-':\n"
    "                       standard output\n"
    "  --mpi                MPI mode even when no launcher is recognised (mpirun, mpiexec, srun, ...)\n"
    "  --quiet              no progress line and no summary on stderr\n"
    "Caps: a document line 64 MiB (longer: a bad line); the criteria file 256 MiB; the model's config.json and\n"
    "tokenizer.json 256 MiB each; a results or errors line read back by --resume 256 MiB.\n"
    "A progress line (documents/s, criteria/s, ETA) is shown on stderr when it is a terminal (under MPI, rank 0's).\n"
    "MPI: every rank writes OUT.part-R-of-K (and the errors' part), resumable on its own; when all ranks are done\n"
    "rank 0 merges them (after the OUT of an earlier run, with --resume) into OUT and removes the parts. MPI mode\n"
    "needs a launcher among this process's parents (or --mpi): MPI variables in the environment alone are ignored.\n"
    "This build: MPI %s.\n";

typedef struct progress_state {
    int tty;
    double last;
    const char *prefix;
} progress_state;

static void fmt_eta(double s, char *buf, size_t n) {
    if (s < 0 || s > 1e8) snprintf(buf, n, "?");
    else if (s >= 3600) snprintf(buf, n, "%dh%02dm", (int)(s / 3600), (int)(s / 60) % 60);
    else if (s >= 60) snprintf(buf, n, "%dm%02ds", (int)(s / 60), (int)s % 60);
    else snprintf(buf, n, "%ds", (int)s);
}

static void on_progress(void *user, const td_run_stats *s) {
    progress_state *ps = user;
    double t = cli_now();
    int64_t seen = s->docs_done + s->docs_skipped + s->docs_failed;
    if (!ps->tty || (t - ps->last < 0.5 && seen != s->docs_total)) return;
    ps->last = t;
    double rate = s->seconds > 0 ? (double)s->docs_done / s->seconds : 0;
    char eta[32];
    fmt_eta(rate > 0 ? (double)(s->docs_total - seen) / rate : -1, eta, sizeof eta);
    fprintf(stderr, "\r%s%lld/%lld documents (%.1f%%), %.2f documents/s, %.1f criteria/s, ETA %s, %lld failed\033[K",
            ps->prefix, (long long)seen, (long long)s->docs_total,
            s->docs_total ? 100.0 * (double)seen / (double)s->docs_total : 100.0, rate,
            s->seconds > 0 ? (double)s->criteria / s->seconds : 0.0, eta, (long long)s->docs_failed);
}

static void log_note(void *user, int level, const char *msg) {
    (void)user;
    fprintf(stderr, "typedecide run: %s%s\n", level ? "warning: " : "", msg);
}

static int parse_shard(const char *s, int32_t *i, int32_t *n) {
    char *end;
    long a = strtol(s, &end, 10);
    if (end == s || *end != '/') return -1;
    const char *b = end + 1;
    long c = strtol(b, &end, 10);
    if (end == b || *end || c < 1 || c > 1000000 || a < 0 || a >= c) return -1;
    *i = (int32_t)a, *n = (int32_t)c;
    return 0;
}

static int exists_nonempty(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0 && sb.st_size > 0;
}

static char *str_cat(const char *a, const char *b) {
    char *s = malloc(strlen(a) + strlen(b) + 1);
    if (s) sprintf(s, "%s%s", a, b);
    return s;
}

/* Rank 0 of an MPI run: the earlier OUT (when resuming) and every rank's part, in input order, into OUT (their
 * errors files into the errors file, named by each part's provenance); then the parts go. */
static int merge_parts(const char *out, const char *err, int size, int resume) {
    int rc = 0;
    const char **in = calloc((size_t)size + 1, sizeof *in);
    char **parts = calloc((size_t)size * 3, sizeof *parts);
    int n = 0;
    if (!in || !parts) rc = cli_error("run", "out of memory");
    if (!rc && resume) in[n++] = out;
    for (int r = 0; r < size && !rc; r++) {
        char suffix[64];
        snprintf(suffix, sizeof suffix, ".part-%d-of-%d", r, size);
        parts[3 * r] = str_cat(out, suffix);
        parts[3 * r + 1] = str_cat(err, suffix);
        parts[3 * r + 2] = parts[3 * r] ? str_cat(parts[3 * r], ".provenance.json") : NULL;
        if (!parts[3 * r] || !parts[3 * r + 1] || !parts[3 * r + 2]) rc = cli_error("run", "out of memory");
        in[n++] = parts[3 * r];
    }
    td_status st = TD_OK;
    if (!rc && (st = td_run_merge(in, n, out, err, TD_MERGE_MISSING_OK | TD_MERGE_INTO_INPUT)) != TD_OK)
        rc = cli_fail("run", st);
    for (int i = 0; i < 3 * size && !rc; i++) unlink(parts[i]); /* this run's own parts, merged */
    for (int i = 0; parts && i < 3 * size; i++) free(parts[i]);
    free(parts), free((void *)in);
    return rc;
}

static int write_summary(const char *path, const td_run_stats *s, const char *model, int threads, int ranks,
                         const char *device, int32_t precision) {
    double sec = s->seconds > 0 ? s->seconds : 1e-9;
    struct rusage ru;
    long rss_kb = getrusage(RUSAGE_SELF, &ru) == 0 ? ru.ru_maxrss : -1; /* Linux: kilobytes */
    char *m = cli_json_string(model);
    char text[2048];
    int n = snprintf(text, sizeof text,
                     "{\"documents\": %lld, \"skipped\": %lld, \"failed\": %lld, \"criteria\": %lld, \"seconds\": %.3f, "
                     "\"documents_per_s\": %.4f, \"criteria_per_s\": %.4f, \"model\": %.1024s, \"threads\": %d, "
                     "\"ranks\": %d, \"kernels\": \"%s\", \"device\": \"%s\", \"precision\": \"%s\", "
                     "\"peak_rss_kb\": %ld}\n",
                     (long long)s->docs_done, (long long)s->docs_skipped, (long long)s->docs_failed,
                     (long long)s->criteria, s->seconds, (double)s->docs_done / sec, (double)s->criteria / sec,
                     m ? m : "null", threads, ranks, td_cpu_kernels(), device, cli_precision_name(precision), rss_kb);
    free(m);
    if (n < 0 || (size_t)n >= sizeof text) return cli_error("run", "%s: the summary does not fit", path);
    if (strcmp(path, "-") == 0) return fputs(text, stdout) < 0 ? cli_error("run", "writing the summary failed") : 0;
    if (td_file_write(path, text, (size_t)n, 0) != TD_OK) return cli_error("run", "--summary %s", td_last_error());
    return 0;
}

/* A short hash of a text, for the identity (an instruction may be a megabyte). */
static unsigned long long text_hash(const char *s) {
    unsigned long long h = 0xcbf29ce484222325ull;
    for (; s && *s; s++) h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
    return h;
}

/* What the results depend on besides the input and the criteria: the model and adapter (fingerprints: a model
 * moved keeps them, one retrained does not), the decider's settings and the kernels (a quantised model's bits
 * depend on the set). Thread count, memory and batch size are left out: results never depend on them. */
static char *run_identity(const char *model_dir, const char *adapter, const td_model *m, const td_decide_params *dp,
                          int timing) {
    uint64_t fm = 0, fa = 0;
    if (td_file_fingerprint(model_dir, &fm) != TD_OK) return NULL;
    if (adapter && td_file_fingerprint(adapter, &fa) != TD_OK) return NULL;
    char *id = malloc(512);
    if (!id) return NULL;
    char fa_s[24] = "none";
    if (adapter) snprintf(fa_s, sizeof fa_s, "%016llx", (unsigned long long)fa);
    snprintf(id, 512,
             "model %016llx, adapter %s, letters %s, instruction %016llx, kernels %s, device %s, precision %s, kv %s, "
             "allowed_mass %d, timing %d",
             (unsigned long long)fm, fa_s, dp->letters ? dp->letters : "default",
             dp->instruction ? text_hash(dp->instruction) : 0ull, td_model_kernels(m),
             dp->device == TD_DEVICE_CPU ? "cpu" : "cuda", cli_precision_name(dp->precision), dp->kv_f16 ? "f16" : "f32",
             dp->allowed_mass, timing);
    return id;
}

int cmd_run(int argc, char **argv) {
    const char *model_dir = NULL, *input = NULL, *crit = NULL, *out = NULL, *errors = NULL, *shard_s = NULL,
               *device_s = NULL, *precision_s = NULL, *threads_s = NULL, *mem_s = NULL, *bs_s = NULL, *kv_s = NULL,
               *letters = NULL, *instr = NULL, *adapter = NULL, *ckpt_s = NULL, *summary = NULL, *dpp_s = NULL;
    int resume = 0, force = 0, strict = 0, allowed = 0, no_timing = 0, quiet = 0, mpi_flag = 0;
    const cli_opt opts[] = {{"model", 1, &model_dir, NULL},     {"input", 1, &input, NULL},
                            {"criteria", 1, &crit, NULL},       {"out", 1, &out, NULL},
                            {"errors", 1, &errors, NULL},       {"shard", 1, &shard_s, NULL},
                            {"device", 1, &device_s, NULL},     {"precision", 1, &precision_s, NULL},
                            {"threads", 1, &threads_s, NULL},   {"memory", 1, &mem_s, NULL},
                            {"batch-size", 1, &bs_s, NULL},     {"kv", 1, &kv_s, NULL},
                            {"letters", 1, &letters, NULL},     {"instruction", 1, &instr, NULL},
                            {"adapter", 1, &adapter, NULL},     {"checkpoint", 1, &ckpt_s, NULL},
                            {"summary", 1, &summary, NULL},     {"docs-per-pass", 1, &dpp_s, NULL},
                            {"resume", 0, NULL, &resume},
                            {"force", 0, NULL, &force},         {"strict", 0, NULL, &strict},
                            {"allowed-mass", 0, NULL, &allowed}, {"no-timing", 0, NULL, &no_timing},
                            {"quiet", 0, NULL, &quiet},         {"mpi", 0, NULL, &mpi_flag},
                            {NULL, 0, NULL, NULL}};
    int r = cli_parse(argc, argv, opts, "run", NULL, 0, NULL);
    if (r == 1) {
        printf(usage_text, cli_mpi_built() ? cli_mpi_version() : "no (typedecide was built without it)");
        return 0;
    }
    if (r) return r;
    if (!model_dir || !input || !out) return cli_usage_error("run", "--model, --input and --out are required");
    if (strcmp(input, "-") == 0)
        return cli_usage_error("run", "--input -: standard input is a stream, and a corpus run reads its input twice "
                                      "(the ids first, then the documents) and --resume reads it again: save it to a "
                                      "file and give that");
    if (strcmp(out, "-") == 0)
        return cli_usage_error("run", "--out -: the results go to a file (resume and merge read it back)");
    if (!*out || !*input) return cli_usage_error("run", "%s is an empty path", *out ? "--input" : "--out");
    td_run_params rp = td_run_default_params();
    td_decide_params dp = td_decide_default_params();
    long long v;
    if (shard_s && parse_shard(shard_s, &rp.shard, &rp.n_shards))
        return cli_usage_error("run", "--shard must be I/N with 0 <= I < N, not '%s'", shard_s);
    if (threads_s && cli_int(threads_s, 1, 1024, &v)) return cli_usage_error("run", "--threads must be in 1..1024");
    if (threads_s) dp.n_threads = (int32_t)v;
    if (mem_s && cli_int(mem_s, 1, 1 << 24, &v)) return cli_usage_error("run", "--memory must be a size in MB >= 1");
    if (mem_s) dp.memory_mb = v;
    if (bs_s && cli_int(bs_s, 1, 1 << 20, &v)) return cli_usage_error("run", "--batch-size must be >= 1");
    if (bs_s) dp.max_batch = (int32_t)v;
    if (ckpt_s && cli_int(ckpt_s, 1, 1 << 30, &v)) return cli_usage_error("run", "--checkpoint must be >= 1");
    if (ckpt_s) rp.checkpoint_docs = (int32_t)v;
    if (dpp_s && cli_int(dpp_s, 1, TD_RUN_MAX_DOCS_PER_PASS, &v))
        return cli_usage_error("run", "--docs-per-pass must be in 1..%d", TD_RUN_MAX_DOCS_PER_PASS);
    int32_t dpp = dpp_s ? (int32_t)v : 0;
    if (cli_kv("run", kv_s, &dp.kv_f16)) return 2;
    if (resume && force) return cli_usage_error("run", "--resume continues the files, --force replaces them: one");
    char device_desc[256];
    if ((r = cli_device("run", device_s, precision_s, &dp.device, &dp.precision, device_desc, sizeof device_desc)))
        return r;
    dp.letters = letters;
    dp.allowed_mass = allowed;
    /* not part of the identity: the bytes do not depend on it */
    rp.docs_per_pass = dpp ? dpp : dp.device == TD_DEVICE_CPU ? 1 : 16;

    int mpi = mpi_flag || cli_mpi_launched(), rank = 0, size = 1, local = 1;
    if (!mpi && cli_mpi_env())
        fprintf(stderr, "typedecide run: note: %s is set but no MPI launcher started this process: running without "
                        "MPI (--mpi asks for MPI mode)\n", cli_mpi_env());
    if (mpi && shard_s) return cli_usage_error("run", "under MPI each rank takes its share: leave out --shard");
    if (mpi && cli_mpi_init(&rank, &size, &local)) return 1;
    if (!threads_s) {
        dp.n_threads = cli_default_threads() / (local > 0 ? local : 1);
        if (dp.n_threads < 1) dp.n_threads = 1;
    }
    char prefix[64] = "typedecide run: ";
    if (mpi) snprintf(prefix, sizeof prefix, "typedecide run [rank %d of %d]: ", rank, size);

    char *err_default = errors ? NULL : str_cat(out, ".errors"), *out_part = NULL, *err_part = NULL,
         *instruction = NULL;
    const char *err = errors ? errors : err_default;
    int rc = err ? 0 : cli_error("run", "out of memory");
    if (!rc && mpi) { /* this rank's files */
        char suffix[64];
        snprintf(suffix, sizeof suffix, ".part-%d-of-%d", rank, size);
        out_part = str_cat(out, suffix), err_part = str_cat(err, suffix);
        if (!out_part || !err_part) rc = cli_error("run", "out of memory");
        if (!rc && !resume && !force && (exists_nonempty(out) || exists_nonempty(err)))
            rc = cli_error("run", "%s exists: --resume continues it, --force replaces it", exists_nonempty(out) ? out : err);
    }
    char *prov = str_cat(out, ".provenance.json");
    if (!prov && !rc) rc = cli_error("run", "out of memory");
    const char *inputs[] = {input, crit, instr && cli_is_file(instr) ? instr : NULL, model_dir, adapter},
               *outputs[] = {out, err, prov, summary};
    if (!rc && cli_check_paths("run", inputs, 5, outputs, 4)) rc = 1;
    if (!rc && instr && !(instruction = cli_instruction("run", instr))) rc = 1;
    dp.instruction = instruction;

    td_model *m = NULL;
    td_decider *d = NULL;
    char *identity = NULL;
    td_run_stats s;
    memset(&s, 0, sizeof s);
    td_status st = TD_OK;
    if (!rc) {
        st = cli_load_model(model_dir, 1, quiet || rank > 0, adapter, &m);
        if (st == TD_OK) st = td_decider_new(m, &dp, &d);
        if (st != TD_OK) rc = cli_fail("run", st);
        else if (!(identity = run_identity(model_dir, adapter, m, &dp, !no_timing))) rc = cli_fail_msg("run");
    }
    progress_state ps = {isatty(2) && !quiet && rank == 0, 0, prefix}; /* under MPI: rank 0's share speaks */
    if (!rc) {
        rp.criteria_path = crit;
        rp.errors_path = mpi ? err_part : err;
        rp.resume = resume, rp.overwrite = force, rp.strict = strict, rp.timing = !no_timing;
        if (mpi) {
            rp.shard = rank, rp.n_shards = size;
            if (resume) rp.prior_out = out, rp.prior_errors = err;
        }
        rp.progress = on_progress, rp.progress_user = &ps;
        rp.log = log_note;
        rp.identity = identity;
        st = td_run(d, input, mpi ? out_part : out, &rp, &s);
        if (ps.tty && ps.last > 0) fputc('\n', stderr);
        if (st != TD_OK) rc = cli_fail_msg("run");
    }
    if (!quiet && (st == TD_OK || s.docs_done + s.docs_failed > 0)) {
        double sec = s.seconds > 0 ? s.seconds : 1e-9;
        fprintf(stderr, "%s%lld documents decided (%lld criteria) in %.1f s: %.2f documents/s, %.1f criteria/s; %lld "
                        "failed (%s); %lld already done\n",
                prefix, (long long)s.docs_done, (long long)s.criteria, s.seconds, (double)s.docs_done / sec,
                (double)s.criteria / sec, (long long)s.docs_failed, mpi ? err_part : err, (long long)s.docs_skipped);
    }
    if (mpi) { /* every rank meets here, whatever happened to it; rank 0 merges when all succeeded */
        int64_t mine[5] = {s.docs_done, s.docs_skipped, s.docs_failed, s.criteria, s.docs_total}, all[5];
        double secs = 0;
        int ok = cli_mpi_all_ok(rc == 0, mine, 5, all, s.seconds, &secs);
        if (rank == 0 && ok) {
            rc = merge_parts(out, err, size, resume);
            s.docs_done = all[0], s.docs_skipped = all[1], s.docs_failed = all[2], s.criteria = all[3];
            s.docs_total = all[4], s.seconds = secs;
            if (!rc && !quiet)
                fprintf(stderr, "typedecide run: %d ranks: %lld documents decided (%lld criteria) in %.1f s; %lld "
                                "failed; %lld already done; merged into %s\n",
                        size, (long long)all[0], (long long)all[3], secs, (long long)all[2], (long long)all[1], out);
        } else if (rank == 0 && !rc) {
            rc = cli_error("run", "a rank failed: the parts stay (%s.part-*); --resume continues them", out);
        }
        cli_mpi_finalize();
    }
    if (summary && rank == 0 && (rc == 0 || s.docs_done > 0)) {
        int src = write_summary(summary, &s, model_dir, dp.n_threads, size, device_desc, dp.precision);
        if (!rc) rc = src;
    }
    td_decider_free(d);
    td_model_free(m);
    free(instruction), free(err_default), free(out_part), free(err_part), free(prov), free(identity);
    return rc;
}

static const char merge_usage[] =
    "usage: typedecide merge --out results.jsonl [--errors FILE] SHARD.jsonl...\n"
    "\n"
    "Joins the results files of `typedecide run --shard I/N` over one input into input order (by each line's\n"
    "\"line\"), so that the merge of all shards is byte for byte the file of one unsharded run; their errors files\n"
    "(named in each shard's provenance, SHARD.jsonl.errors by default) are joined into OUT.errors, which is\n"
    "always written (empty when no shard met a bad line), and OUT.provenance.json records the whole run.\n"
    "Refused, with nothing written: a shard without its provenance record (SHARD.jsonl.provenance.json), shards of\n"
    "different runs (another input, criteria file, model or settings), one shard twice, shards that do not\n"
    "cover every document of the input exactly once (the message names the shards missing and those that stopped\n"
    "early: resume them first), a line whose \"check\" does not match its bytes (edited after the run wrote it) and\n"
    "lines whose \"doc_hash\" do not sum to the input's (a line of another corpus): --resume of the shard redecides\n"
    "such lines. OUT, OUT.errors and OUT.provenance.json may not be a shard or a shard's errors\n"
    "file. Each output is replaced whole (written beside it, synced, renamed).\n"
    "\n"
    "  --out FILE     the merged results\n"
    "  --errors FILE  the merged errors (default OUT.errors)\n"
    "Caps: at most 1024 shards; a line of a shard 256 MiB; a provenance record 1 MiB.\n";

int cmd_merge(int argc, char **argv) {
    const char *out = NULL, *errors = NULL, *pos[1025];
    int np = 0;
    const cli_opt opts[] = {{"out", 1, &out, NULL}, {"errors", 1, &errors, NULL}, {NULL, 0, NULL, NULL}};
    int r = cli_parse(argc, argv, opts, "merge", pos, 1024, &np);
    if (r == 1) {
        fputs(merge_usage, stdout);
        return 0;
    }
    if (r) return r;
    if (!out || np < 1) return cli_usage_error("merge", "--out and at least one results file are required");
    if (strcmp(out, "-") == 0) return cli_usage_error("merge", "--out -: the merged results go to a file");
    if (td_run_merge(pos, np, out, errors, 0) != TD_OK) return cli_fail_msg("merge");
    return 0;
}
