/*
 * typedecide_run.h — corpus runs: decisions over a whole JSONL corpus, crash-safe, resumable, sharded.
 *
 * td_run streams a corpus through a decider into a results file; td_run_merge joins the shards of one run.
 * Implemented in src/run/ (criteria files are read as typedecide_eval.h's rows read them).
 * Part of libtypedecide, an application on top of the core: it includes typedecide.h, whose conventions
 * (td_status and td_last_error, ownership, td_free, threads) hold here too; see that header's guide for the layering.
 */
#ifndef TYPEDECIDE_RUN_H
#define TYPEDECIDE_RUN_H

#include "typedecide.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------------------------------------------ */
/* Corpus runs: decisions over a whole JSONL corpus, crash-safe and resumable                                    */
/* ------------------------------------------------------------------------------------------------------------ */

/* td_run decides every document of a JSONL corpus with a decider and appends one line per document to a results
 * file, streaming: memory does not grow with the corpus except for a table of document ids (about 21 bytes per
 * document: repeated ids and resume need it).
 *
 * Input lines: {"id": string or integer, "evidence": string, "criteria": [criterion, ...] (optional), ...}; other
 * members are ignored; blank lines are skipped. A document's criteria are those of params.criteria_path (a
 * criteria JSONL file as td_rows_load reads it, without evidence) followed by the line's own "criteria" (objects
 * of the same form); criterion ids must be distinct within a document.
 *
 * Output lines, in input order, each written whole with one write():
 *   {"id", "line": input line, "decisions": [{"id", "answer", "letter", "options": [ids], "probs": [same order],
 *    "allowed_mass" (with the decider's allowed_mass), "suffix_tokens"}, ...], "ms" (params.timing), "doc_hash",
 *    "check"}
 * Every results and errors line ends with "doc_hash" (16 hex digits: a 64-bit hash of the input line's bytes) and
 * "check" (16 hex digits: a 64-bit hash of the line's bytes before ',"check":'): resume keeps a line only when its
 * doc_hash is its input line's and its check matches, merge refuses a line whose check does not match (or whose
 * doc_hash, summed over the merge, is not the input's). Non-cryptographic: against accidents (copied lines, hand
 * edits), not adversaries.
 * The decisions are td_decide's over the document's evidence and criteria: bit for bit those of `typedecide
 * decide` on the same evidence and criteria, whatever the sharding, resumption or number of processes.
 * Floats are printed with 9 significant digits (exact for a float).
 *
 * Bad lines (malformed JSON, no id, no string evidence, no criteria, a bad criterion, evidence that does not fit
 * the model's context with a criterion, text that is not UTF-8) are appended to the errors file as
 * {"line", "id" (or null), "error": "INPUT:LINE: what is wrong", "doc_hash", "check"} and skipped, or, with params.strict, recorded and
 * then stop the run (TD_ERR_FORMAT with the same message). Repeated document ids in the input fail the run before
 * anything is written (TD_ERR_FORMAT naming the ids and their lines), in every shard.
 *
 * Crash safety: a line is written only when its document is finished; both files are fsync'ed every
 * params.checkpoint_docs documents or params.checkpoint_seconds, and at the end. A run holds an exclusive lock
 * (flock) on both files while it writes them: a second run on them fails (TD_ERR_STATE) instead of writing every
 * document twice.
 *
 * Provenance: beside the results file lies OUT.provenance.json, one JSON line: the input's size, hash and document
 * count, the criteria file's size and hash, params.identity, the shard, the errors file and whether the share is
 * complete (no time and no path of this machine in it). Resume refuses (TD_ERR_STATE, nothing changed) a results
 * file without one, or whose record differs from this run's, saying what differs. With params.resume, after that
 * check, the results and errors files are repaired: what stays is their complete lines about documents of this
 * share, in increasing input line, up to the first document that neither file covers; a torn last line, garbage,
 * duplicated lines, lines out of input order or of another share are cut (each kind counted in a warning through
 * params.log), and the documents already in the results file are skipped; bad lines already recorded are not
 * recorded again. A run killed at any point and resumed writes the same bytes as one run that was never
 * interrupted. Without resume, existing non-empty files are refused (TD_ERR_STATE) unless params.overwrite.
 * Overwrite never empties the old files: the run writes out_path + ".partial", the errors path + ".partial" and
 * out_path + ".partial.provenance.json" (holding out_path's lock too) and renames them over the old files only
 * when it completes; a failure or a kill leaves the old files as they were. Resume then continues the partial run
 * (and renames at its end); a run with neither resume nor overwrite is refused while a partial run exists.
 *
 * Inputs: the input must be a regular file (it is read twice; a pipe or device is refused with the reason); a line
 * longer than params.max_line_bytes is a bad line, read past without being held in memory; a UTF-8 byte-order mark
 * before the first line is skipped; an id holding a NUL character is a bad line. Outputs that are an input or each
 * other are refused (td_paths_check).
 *
 * Shards: the k-th document of the input (0-based, counting non-blank lines, bad ones included) belongs to shard
 * k % n_shards. A run with shard = I decides only its share, so that N runs (processes, machines, a Slurm array)
 * cover the corpus once; td_run_merge joins their results files into the one a single run writes.
 *
 * Documents per pass (params.docs_per_pass = N > 1; for a GPU, whose small passes are bound by launches, not by
 * arithmetic): up to N documents of the share are read ahead and checked, then decided by one td_decide_multi call
 * (their evidences prefilled together, all their criteria in shared forward passes), then their lines are written
 * in input order, each with one write(), exactly as one document at a time writes them: each decision is
 * bit-identical to td_decide's for that document alone, and with timing off the results and errors files are the
 * same bytes for every N. A bad line takes its place in input order in the errors file; a document refused by
 * td_decide's checks (TD_ERR_RANGE, TD_ERR_FORMAT, TD_ERR_INVALID_ARG) is a bad line as with N = 1; any other
 * failure stops the run after every earlier document of the window is written (the later ones are not: a resumed
 * run decides them). With params.strict a bad line found while reading ends the window there, and the first bad
 * line stops the run as with N = 1. "ms" (timing) is then the wall time of the window's td_decide_multi call
 * divided by the documents decided in it. docs_per_pass is not part of the provenance (the bytes do not depend on
 * it): a run resumed with another N continues the same files. Memory: the window's N documents (their parsed
 * lines, criteria and decisions) are held at once: up to about N x max_line_bytes of text, beside the decider's
 * context (sized by its memory budget). params.progress is still called after every document (those of a window
 * come together, once it is decided). */
typedef struct td_run_stats {
    int64_t docs_total;   /* documents in this run's share of the input (known before the first decision) */
    int64_t docs_done;    /* decided and written by this run */
    int64_t docs_skipped; /* already in the results file (resume) */
    int64_t docs_failed;  /* bad lines met by this run (recorded now or by an earlier run) */
    int64_t criteria;     /* decisions written by this run */
    double seconds;       /* wall time of this run so far */
} td_run_stats;

typedef struct td_run_params {
    const char *criteria_path;  /* criteria for every document (JSONL), or NULL: every line brings its own */
    const char *errors_path;    /* NULL: out_path + ".errors" */
    int resume;                 /* 1: repair the files and skip the documents already done */
    int overwrite;              /* 1: without resume, replace existing files instead of refusing */
    int strict;                 /* 1: a bad line stops the run (after it is recorded) */
    int timing;                 /* 1 (default): "ms" (wall time of the document) in every line; 0: the lines are
                                   fully deterministic */
    int32_t shard, n_shards;    /* this run's share: 0 .. n_shards - 1 (default 0 of 1) */
    int32_t checkpoint_docs;    /* fsync after this many documents (default 64) */
    double checkpoint_seconds;  /* ... or this many seconds since the last one (default 10) */
    int sync;                   /* 1 (default): fsync at checkpoints; 0: never (scratch files: a process that dies
                                   still leaves every line it wrote, a machine that dies may not) */
    const char *prior_out;      /* optional: another results file (e.g. the merged output of an earlier run that
                                   this run continues one shard of) whose ids also count as done with resume */
    const char *prior_errors;   /* optional: its errors file, whose lines count as already recorded */
    void (*progress)(void *user, const td_run_stats *stats); /* after every document; may be NULL */
    void *progress_user;
    td_log_fn log;              /* repairs and other notes (level 0 info, 1 warning); may be NULL */
    void *log_user;
    const char *identity;       /* what else the results depend on (the model's fingerprint, the decider's
                                   settings): recorded in the provenance and compared by resume; NULL: "" */
    int64_t max_line_bytes;     /* the longest input line read (default 64 MiB); 0: no limit */
    int32_t docs_per_pass;      /* documents decided together (default 1; 0 counts as 1; at most
                                   TD_RUN_MAX_DOCS_PER_PASS): 1 decides each document with td_decide; N > 1 reads up
                                   to N documents of the share ahead and decides them with one td_decide_multi call
                                   (see "Documents per pass" above) */
} td_run_params;

#define TD_RUN_MAX_DOCS_PER_PASS 4096

TD_API td_run_params td_run_default_params(void);

/* Runs the decider over input_path (a JSONL file; read twice: once for the ids and the share's size, once to
 * decide) and appends to out_path (and the errors file). The decider's parameters (letters, instruction, mode,
 * threads, memory, allowed_mass) apply. stats (may be NULL) receives the counts, also on failure. Errors:
 * TD_ERR_IO naming the file that cannot be read, written or synced, or an input that is not a regular file;
 * TD_ERR_FORMAT for repeated ids, a bad criteria file or (strict) a bad line, each naming file and line;
 * TD_ERR_STATE for existing files without resume or overwrite, files another run holds, and (resume) results whose
 * provenance is missing or differs, saying what differs; TD_ERR_INVALID_ARG for a shard outside 0..n_shards-1 and
 * outputs that are inputs or each other (td_paths_check); decide errors that are not the document's
 * fault (TD_ERR_NOMEM, ...) pass through. Whatever was written before a failure stays (synced) and a resumed run
 * continues from it. The decider is used by this call alone meanwhile (one thread); several runs may go on at once
 * in one process with different deciders and files. */
TD_API td_status td_run(td_decider *d, const char *input_path, const char *out_path, const td_run_params *params,
                        td_run_stats *stats);

/* Joins the results files of runs over one input (shards, MPI parts), each in input order, into out_path in input
 * order (by their "line" members), and their errors files (named by their provenance) into errors_path (NULL:
 * out_path + ".errors", always written, empty when no run met a bad line): the merge of all shards equals the
 * files one unsharded run writes, byte for byte, provenance included. Every input needs its provenance record;
 * all must be of one run (input, criteria, identity); together they must cover every document of the input exactly
 * once, or nothing is written and the message names the shards missing and those that stopped early (with the
 * input line after which their documents are missing). Streams (one line per file in memory); each output is
 * written beside itself, synced and renamed, so it is either the old file or the whole new one. The outputs may
 * not be an input or an input's errors file (TD_ERR_INVALID_ARG) unless TD_MERGE_INTO_INPUT. Flags:
 * TD_MERGE_MISSING_OK (a missing input is an empty one), TD_MERGE_NO_SYNC (no fsync: scratch files),
 * TD_MERGE_INTO_INPUT (out_path may be one of the inputs: an earlier merged file that the others extend). Errors:
 * TD_ERR_FORMAT naming file and line for a line that is not ours, a torn last line, lines out of order or one line
 * number in two files, a missing provenance, runs that differ, incomplete coverage; TD_ERR_STATE when a run holds
 * out_path's lock; TD_ERR_IO. */
#define TD_MERGE_MISSING_OK 1u
#define TD_MERGE_NO_SYNC 2u
#define TD_MERGE_INTO_INPUT 4u
TD_API td_status td_run_merge(const char *const *inputs, int32_t n, const char *out_path, const char *errors_path,
                              unsigned flags);

#ifdef __cplusplus
}
#endif

#endif /* TYPEDECIDE_RUN_H */
