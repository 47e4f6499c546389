/* The corpus runner's pieces: a streaming line reader over a file descriptor, whole writes, and a set of ids. */
#ifndef TD_RUN_INTERNAL_H
#define TD_RUN_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "typedecide.h"

/* Reads a file line by line through one fixed read buffer and one line buffer that grows to the longest line:
 * memory does not depend on the file's size. */
typedef struct td_lines {
    int fd;
    const char *path;    /* borrowed, for messages */
    char *buf;           /* read buffer [TD_LINES_CHUNK] */
    size_t beg, end;     /* unread bytes of buf */
    int eof;
    char *line;          /* the current line, NUL-terminated, without its '\n' */
    size_t len, cap;
    int complete;        /* 1: it ended with '\n'; 0: the file ended first (a torn last line) */
    int64_t offset;      /* byte offset of the current line in the file */
    int64_t next;        /* byte offset after it (and its '\n') */
    int32_t lineno;      /* 1-based number of the current line */
} td_lines;

/* Opens path for reading. TD_ERR_IO naming the file. */
td_status td_lines_open(td_lines *r, const char *path);
void td_lines_close(td_lines *r);
/* The next line (blank ones included): 1 and r->line / len / complete / offset / lineno set, 0 at the end of the
 * file, or -1 on a read or allocation failure (the message is set). */
int td_lines_next(td_lines *r);
/* 1 when the line holds only spaces, tabs and CRs. */
int td_line_blank(const char *line, size_t len);

/* Writes all n bytes (retrying short writes). TD_ERR_IO naming the file. */
td_status td_run_write_all(int fd, const char *path, const char *data, size_t n);
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

/* Counts a file's lines (newlines, plus one for a last line without it): what an id set reserves. */
td_status td_count_lines(const char *path, int64_t *n);

/* A results or errors line of ours: a JSON object with an integer "line" >= 1 and, for results, a string "id" and
 * an array "decisions"; for errors, a string "error". Returns 1 and *line (and a new copy of the id in *id, NULL
 * when absent or null; td_free) when it is one, 0 when it is not, -1 when out of memory. */
int td_run_parse_ours(const char *text, size_t len, int errors_file, int32_t *line, char **id);

#endif
