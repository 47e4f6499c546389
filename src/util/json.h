/* JSON through jansson, with errors that name the file, line, column and field. */
#ifndef TD_UTIL_JSON_H
#define TD_UTIL_JSON_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "typedecide.h"

/* json_loadb that also tells (*oom) whether it failed because an allocation failed: jansson reports some of
 * those as syntax errors, and may even return an object that lacks the members it could not allocate (then NULL
 * here, with *oom set). */
json_t *td_json_loadb(const char *data, size_t len, size_t flags, json_error_t *e, int *oom);

/* json_dumps of an object built since td_alloc_failures() read f0, as a string of ours (td_free), or NULL when
 * dumping failed or an allocation was refused meanwhile (jansson then leaves out the values it could not make: the
 * text would be incomplete). */
char *td_json_dumps_checked(const json_t *o, size_t flags, uint64_t f0);

/* A JSON string or integer as a new C string (ids may be written as numbers); NULL for any other value, or when
 * out of memory (then *oom is set). */
char *td_json_id(const json_t *v, int *oom);

/* The next non-blank line of JSONL data at *at (blank: only spaces, tabs, CR, LF): *line and *n receive it (with its
 * newline), *lineno its 1-based number (counting blank lines). A UTF-8 byte-order mark at the start of the data is
 * skipped (editors write one). Returns 0 at the end. */
int td_jsonl_next(const char *data, size_t len, size_t *at, const char **line, size_t *n, int32_t *lineno);

/* Parses a whole JSON document from a file. Malformed JSON fails with TD_ERR_FORMAT and "path:line:col: why". */
td_status td_json_load_file(const char *path, json_t **out);
/* Parses JSON from memory; `name` stands for the source in messages. */
td_status td_json_load_bytes(const char *data, size_t len, const char *name, json_t **out);

/* Typed field access. `where` names the object for messages ("config.json"). A missing field fails only when
 * `required` is set; otherwise *out keeps its value. A field of the wrong type always fails. */
td_status td_json_int(const json_t *obj, const char *key, int required, const char *where, int64_t *out);
td_status td_json_i32(const json_t *obj, const char *key, int required, const char *where, int32_t *out);
td_status td_json_num(const json_t *obj, const char *key, int required, const char *where, double *out);
td_status td_json_bool(const json_t *obj, const char *key, int required, const char *where, int *out);
/* *out is borrowed from the JSON object. */
td_status td_json_str(const json_t *obj, const char *key, int required, const char *where, const char **out);

#endif
