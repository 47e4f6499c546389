/* Files: read-only mappings for weights, whole-file reads for small JSON files, atomic-ish writes. */
#ifndef TD_UTIL_FILEIO_H
#define TD_UTIL_FILEIO_H

#include <stddef.h>
#include <stdint.h>

#include "typedecide.h"

typedef struct td_mapped_file {
    void *data;   /* NULL for an empty file */
    size_t size;
    char *path;   /* owned copy, for error messages */
} td_mapped_file;

/* Maps a whole file read-only. */
td_status td_map_file(const char *path, td_mapped_file *out);
void td_unmap_file(td_mapped_file *f);

/* Reads a whole file into a new NUL-terminated buffer. */
td_status td_read_file(const char *path, char **data, size_t *size);

/* 1 if the path names an existing regular file, 0 otherwise. */
int td_file_exists(const char *path);
/* 1 if the path names a directory. */
int td_is_dir(const char *path);

/* Joins dir and name with '/'; returns a new string (NULL on allocation failure). */
char *td_path_join(const char *dir, const char *name);

#endif
