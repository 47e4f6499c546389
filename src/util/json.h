/* JSON through jansson, with errors that name the file, line, column and field. */
#ifndef TD_UTIL_JSON_H
#define TD_UTIL_JSON_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "typedecide.h"

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
