/* The corpus runner's pieces: a streaming line reader over a file descriptor, whole writes, a set of ids, and the
 * provenance record that ties a results file to the run that wrote it. */
#ifndef TD_RUN_INTERNAL_H
#define TD_RUN_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "typedecide.h"
#include "util/fileio.h"

/* Reads a file line by line through one fixed read buffer and one line buffer that grows to the longest line (up
 * to max_len): memory does not depend on the file's size. */
typedef struct td_lines {
    int fd;
    const char *path;    /* borrowed, for messages */
    char *buf;           /* read buffer [TD_LINES_CHUNK] */
    size_t beg, end;     /* unread bytes of buf */
    int eof;
    char *line;          /* the current line, NUL-terminated, without its '\n' */
    size_t len, cap;
    int complete;        /* 1: it ended with '\n'; 0: the file ended first (a torn last line) */
    int too_long;        /* 1: the line had more than max_len bytes: line holds none of them */
    size_t max_len;      /* 0: no limit */
    int skip_bom;        /* 1: a UTF-8 byte-order mark at the very start is not part of line 1 */
    int64_t offset;      /* byte offset of the current line in the file */
    int64_t next;        /* byte offset after it (and its '\n') */
    int32_t lineno;      /* 1-based number of the current line */
    td_hash64 *hash;     /* when set: every byte read is fed to it */
    int64_t bytes;       /* bytes read so far */
    int digest;          /* 1: line_digest is computed for every line */
    uint64_t line_digest; /* with digest: td_hash64 of all the line's bytes (without '\n'; those of a too_long line
                             too), the "doc_hash" of its results or errors line */
    td_hash64 lh;
} td_lines;

/* Opens path for reading: TD_ERR_IO naming the file when it cannot be opened or is not a regular file (a pipe, a
 * device, a directory: said which; a FIFO is never waited on). */
td_status td_lines_open(td_lines *r, const char *path);
void td_lines_close(td_lines *r);
/* The next line (blank ones included): 1 and r->line / len / complete / too_long / offset / lineno set, 0 at the
 * end of the file, or -1 on a read or allocation failure (the message is set). A line longer than max_len is read
 * to its end and dropped (too_long = 1, len = 0): memory stays bounded whatever the file holds. */
int td_lines_next(td_lines *r);
/* 1 when the line holds only spaces, tabs and CRs. */
int td_line_blank(const char *line, size_t len);

/* Writes all n bytes (retrying short writes). TD_ERR_IO naming the file. */
td_status td_run_write_all(int fd, const char *path, const char *data, size_t n);
/* The same at a file offset (pwrite). */
td_status td_run_pwrite_all(int fd, const char *path, const char *data, size_t n, int64_t offset);
/* fsync of the directory that holds path, so that a new or renamed file's name is on disk too. */
td_status td_run_sync_dir(const char *path);

/* A set of document ids, insert-only: a 64-bit and a 32-bit hash of the id's bytes, independent (a false match needs
 * both to collide: about n^2 / 2^97 for n ids, 1e-17 for a million) and the line it came from, in 16-byte slots of
 * a table at most 3/4 full: 21 bytes per id when reserved for the count, which the runner does. */
typedef struct td_idset {
    struct td_idslot *slots;
    size_t cap, count;
} td_idset;

void td_idset_free(td_idset *s);
/* Room for n ids without growing. 0, or -1 when out of memory. */
int td_idset_reserve(td_idset *s, size_t n);
/* Adds the id unless present: returns 1 when added, 0 when it was there (*first_line receives its line), -1 when
 * out of memory. Grows when needed. */
int td_idset_add(td_idset *s, const char *id, size_t len, int32_t line, int32_t *first_line);
/* 1 when present (*line receives its line, may be NULL), else 0. */
int td_idset_has(const td_idset *s, const char *id, size_t len, int32_t *line);
/* The same keyed by an input line number (results and errors are matched to the input by line). */
int td_lineset_add(td_idset *s, int32_t line);
int td_lineset_has(const td_idset *s, int32_t line);

/* Counts a file's lines (newlines, plus one for a last line without it): what an id set reserves. */
td_status td_count_lines(const char *path, int64_t *n);

/* The longest results or errors line read back (resume, merge): a document line is at most td_run_params'
 * max_line_bytes (64 MiB by default) and its results line is of the same order. */
#define TD_RUN_MAX_OUTPUT_LINE ((size_t)256 << 20)
/* The most a criteria file may hold. */
#define TD_RUN_MAX_CRITERIA ((size_t)256 << 20)
/* The most a provenance file may hold (it is a few hundred bytes). */
#define TD_RUN_MAX_PROVENANCE ((size_t)1 << 20)

/* Every results and errors line ends with two members the run adds (data safety, issue 47; docs/data-safety.md):
 *   "doc_hash": 16 hex digits, td_hash64 of the input line's bytes (without its newline; a leading byte-order mark
 *               is not part of line 1): --resume compares it with the input line it reads again, so a line of
 *               another corpus with the same id and line number is not kept;
 *   "check":    16 hex digits, td_hash64 of the line's bytes before ',"check":"' (everything else, doc_hash
 *               included): an edited line (an id, a probability, reformatted) no longer matches, which merge, that
 *               reads no input, detects. The line always ends with ,"check":"<16 hex>"} (the last member).
 * Accidents, not adversaries: a non-cryptographic 64-bit hash. */
#define TD_RUN_CHECK_TAIL 28 /* strlen(",\"check\":\"") + 16 + strlen("\"}") */

/* Appends ,"check":"<hex>"} to a line of n bytes that ended with '}' (replacing it) and a newline; buf must have
 * room for n + TD_RUN_CHECK_TAIL + 1 bytes. Returns the new length. */
size_t td_run_seal_line(char *buf, size_t n);
/* Mixes a document's input line and doc_hash into one term of the input's "lines" sum (the provenance's). */
uint64_t td_run_doc_term(int32_t line, uint64_t doc_hash);

/* A results or errors line read back. */
typedef struct td_run_line {
    int32_t line;
    char *id;          /* a new copy (td_free), NULL when absent or null */
    uint64_t doc_hash; /* when intact */
} td_run_line;

/* A results or errors line of ours: a JSON object with an integer "line" >= 1 and, for results, a string "id" and
 * an array "decisions"; for errors, a string "error". Returns 1 when it is one and intact (its "doc_hash" present
 * and its "check" matching its bytes), 2 when it has the shape of ours but not an intact check (edited, or written
 * before lines carried one), 0 when it is not ours, -1 when out of memory; out->line and out->id are set for 1 and
 * 2. */
int td_run_parse_line(const char *text, size_t len, int errors_file, td_run_line *out);
/* The same, 1 only for an intact line of ours (*id: td_free). */
int td_run_parse_ours(const char *text, size_t len, int errors_file, int32_t *line, char **id);

/* Resume's repair alone, as td_run does it after the provenance check (tests and fuzzing): both files (which must
 * exist) keep their lines of ours about documents of the share (share: ascending input lines) in increasing input
 * line, up to the first document neither covers; the rest is cut and reported through log. *kept_results and
 * *kept_errors (may be NULL) receive the lines kept. */
td_status td_run_repair(const char *out_path, const char *err_path, const int32_t *share, int64_t n_share,
                        td_log_fn log, void *log_user, int64_t *kept_results, int64_t *kept_errors);

/* ---- provenance -------------------------------------------------------------------------------------------------
 * Beside every results file OUT lies OUT.provenance.json, one JSON line that says what the results are of: the
 * input (bytes, hash, documents), the criteria file (bytes, hash), the caller's identity string (model fingerprint
 * and settings), the shard, the errors file and whether the share is complete. Resume refuses a results file whose
 * provenance differs from the run's, or that has none; merge refuses shards of different runs and counts the
 * documents they cover. It is written whole (temporary file, rename) and holds no time or path of this machine,
 * so that a merge of shards writes the provenance of one unsharded run, byte for byte. */
typedef struct td_prov {
    int64_t input_bytes, input_docs;
    uint64_t input_hash;
    int has_lines_sum;
    uint64_t lines_sum;    /* the sum of td_run_doc_term over the input's documents: merge compares it with its
                              lines' (a line of another corpus has another doc_hash) */
    int has_criteria;
    int64_t criteria_bytes;
    uint64_t criteria_hash;
    char *identity;        /* owned */
    int32_t shard, n_shards;
    int64_t share_docs;    /* documents of this share (input_docs for an unsharded run or a merge) */
    char *errors;          /* owned: the errors file when it is not the default (results + ".errors"): its name when
                              beside the results file, else its full path; NULL: the default, which follows the
                              results file when it is renamed */
    int complete;          /* 1: every document of the share is in the results or the errors file */
} td_prov;

/* OUT + ".provenance.json" (td_free), NULL when out of memory. */
char *td_prov_path(const char *results_path);
/* Reads a provenance file: TD_OK, or TD_ERR_IO with *missing = 1 when there is none, or TD_ERR_FORMAT naming the
 * file and member that is wrong. */
td_status td_prov_read(const char *path, td_prov *p, int *missing);
/* Writes it whole (td_wfile flags). */
td_status td_prov_write(const char *path, const td_prov *p, unsigned wflags);
void td_prov_free(td_prov *p);
/* 0 when a and b describe results of the same input, criteria and identity; else 1 and a sentence in why. */
int td_prov_differs(const td_prov *a, const td_prov *b, char *why, size_t n);
/* The errors file recorded in p, as a path usable from here (relative names are beside results_path). td_free. */
char *td_prov_errors_path(const td_prov *p, const char *results_path);

#endif
