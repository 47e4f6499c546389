/* safetensors: an 8-byte little-endian header length N, N bytes of JSON
 * {"name": {"dtype": "BF16", "shape": [..], "data_offsets": [begin, end]}, "__metadata__": {...}}, then the data.
 * Everything in the header is untrusted: lengths, offsets, shapes and dtypes are all checked here. */
#ifndef TD_MODEL_SAFETENSORS_H
#define TD_MODEL_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "util/dtype.h"
#include "typedecide.h"
#include "util/fileio.h"

#define TD_ST_MAX_DIMS 8

typedef struct td_st_tensor {
    char *name;
    td_dtype dtype; /* TD_DTYPE_OTHER for a valid safetensors dtype that the engine cannot compute with */
    char dtype_name[16];
    int n_dims;
    int64_t shape[TD_ST_MAX_DIMS];
    uint64_t begin, end; /* byte offsets into the data section */
} td_st_tensor;

typedef struct td_st_file {
    td_mapped_file map;
    const uint8_t *data; /* start of the data section */
    uint64_t data_size;
    td_st_tensor *tensors;
    int n_tensors;
} td_st_file;

/* Parses and validates the header of a safetensors image held in memory (`name` is used in messages). On success
 * `out->data` points into `buf`. Does not take ownership of buf. */
td_status td_st_parse(const uint8_t *buf, size_t size, const char *name, td_st_file *out);

/* Maps a file and parses it. */
td_status td_st_open(const char *path, td_st_file *out);

/* Releases the tensor table and the mapping (if any). */
void td_st_close(td_st_file *f);

/* Writes a safetensors file from tensors whose data lie in memory. names/dtypes/shapes describe each tensor. */
typedef struct td_st_write_tensor {
    const char *name;
    const char *dtype; /* "BF16", "F16", "F32" */
    int n_dims;
    int64_t shape[TD_ST_MAX_DIMS];
    const void *data;
    uint64_t nbytes;
} td_st_write_tensor;
td_status td_st_write(const char *path, const td_st_write_tensor *tensors, int n);
/* Writes only the length and header of such a file to an open stream (data pointers are ignored); the caller
 * then writes each tensor's bytes in the same order. */
td_status td_st_write_header(void *stream, const char *path, const td_st_write_tensor *tensors, int n);

#endif
