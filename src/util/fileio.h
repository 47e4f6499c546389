/* Files: read-only mappings for weights, bounded whole-file reads, and one discipline for every output: a path is
 * resolved to its file identity before anything is written, an output that is an input (or another output) is
 * refused, and a file is written beside its target under a temporary name and renamed into place, so that the
 * target is either the old file or the whole new one and nothing the caller did not create is ever removed. */
#ifndef TD_UTIL_FILEIO_H
#define TD_UTIL_FILEIO_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "typedecide.h"

typedef struct td_mapped_file {
    void *data;   /* NULL for an empty file */
    size_t size;
    char *path;   /* owned copy, for error messages */
} td_mapped_file;

/* Maps a whole file read-only. */
td_status td_map_file(const char *path, td_mapped_file *out);
void td_unmap_file(td_mapped_file *f);

/* The most td_read_file reads: far above any config.json or tokenizer.json (Qwen's are 7-20 MB), far below what
 * exhausts a machine when a path names /dev/zero or a runaway file. */
#define TD_MAX_READ_FILE ((size_t)256 << 20)

/* Reads a whole regular file into a new NUL-terminated buffer, at most TD_MAX_READ_FILE bytes: TD_ERR_IO naming the
 * file when it is missing, not a regular file (a directory, a device, a pipe: said which) or larger. */
td_status td_read_file(const char *path, char **data, size_t *size);
/* The same with a cap of the caller's; `what` completes the refusal "PATH: N bytes, more than the CAP bytes WHAT"
 * (e.g. "a criteria file may have"). */
td_status td_read_file_max(const char *path, size_t cap, const char *what, char **data, size_t *size);

/* "a directory", "a character device", "a FIFO (pipe)", ... for a st_mode that is not a regular file; "a regular
 * file" otherwise. Static string. */
const char *td_file_kind(unsigned mode);

/* 1 if the path names an existing regular file, 0 otherwise. */
int td_file_exists(const char *path);
/* 1 if the path names a directory. */
int td_is_dir(const char *path);

/* Joins dir and name with '/'; returns a new string (NULL on allocation failure). */
char *td_path_join(const char *dir, const char *name);

/* ---- identity ---------------------------------------------------------------------------------------------- */

/* What a path refers to: an existing file's device and inode (after symbolic links), or, for a path that does not
 * exist yet, its directory's device and inode and its last component, so that "o/x" and "./o/x" are one file
 * before either exists. */
typedef struct td_file_id {
    int exists;
    unsigned mode;          /* st_mode when it exists */
    uint64_t dev, ino;      /* the file's, or its directory's when it does not exist */
    char name[256];         /* the last component when it does not exist */
} td_file_id;

/* TD_ERR_IO naming the path when neither it nor its directory can be resolved. */
td_status td_file_id_of(const char *path, td_file_id *id);
int td_file_id_same(const td_file_id *a, const td_file_id *b);

/* ---- writing ------------------------------------------------------------------------------------------------ */

/* A file being written beside its target: f writes to a temporary file in the target's directory (the target's
 * real directory when the target is a symbolic link), which commit syncs and renames over the target. */
typedef struct td_wfile {
    FILE *f;
    char *path;    /* the target (resolved) */
    char *tmp;     /* the temporary file */
    unsigned flags;
} td_wfile;

/* Flags of td_wfile_open (and of the public td_file_write / td_outfile_open, typedecide.h). */
#define TD_WFILE_NO_REPLACE TD_FILE_NO_REPLACE
#define TD_WFILE_NO_SYNC TD_FILE_NO_SYNC

/* Refuses a target that exists and is not a regular file (TD_ERR_IO naming what it is), an existing one with
 * TD_WFILE_NO_REPLACE (TD_ERR_STATE), a missing directory; else creates the temporary file. */
td_status td_wfile_open(td_wfile *w, const char *path, unsigned flags);
/* Flushes, syncs, closes and renames the temporary file over the target, then syncs the directory. On any failure
 * (a write that failed before, a full disk) the temporary file is removed, the target is as it was, and the
 * message names the target and the reason. Always releases w. */
td_status td_wfile_commit(td_wfile *w);
/* Closes and removes the temporary file; the target is untouched. Releases w; harmless on a zeroed w. */
void td_wfile_abort(td_wfile *w);

/* ---- hashing ------------------------------------------------------------------------------------------------ */

/* A 64-bit hash of a byte stream, fed in pieces of any size (the value does not depend on how the stream was
 * cut): eight bytes at a time through a multiply-xorshift mix. For telling files apart, not against an adversary. */
typedef struct td_hash64 {
    uint64_t h, n, tail;
    int nt;
} td_hash64;

void td_hash64_init(td_hash64 *s);
void td_hash64_update(td_hash64 *s, const void *data, size_t len);
uint64_t td_hash64_final(const td_hash64 *s);

#endif
