/* GGUF v3 files: a parser for untrusted bytes (every length, count, offset and shape is checked) and a writer that
 * lays tensors out the way ggml's reader requires (sequential offsets, each padded to the alignment). */
#ifndef TD_MODEL_GGUF_H
#define TD_MODEL_GGUF_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "util/dtype.h"
#include "typedecide.h"
#include "util/fileio.h"

typedef enum td_gguf_vtype {
    TD_GGUF_U8 = 0, TD_GGUF_I8 = 1, TD_GGUF_U16 = 2, TD_GGUF_I16 = 3, TD_GGUF_U32 = 4, TD_GGUF_I32 = 5,
    TD_GGUF_F32 = 6, TD_GGUF_BOOL = 7, TD_GGUF_STRING = 8, TD_GGUF_ARRAY = 9, TD_GGUF_U64 = 10, TD_GGUF_I64 = 11,
    TD_GGUF_F64 = 12
} td_gguf_vtype;

/* ggml type ids of the tensor types this engine computes with */
enum { TD_GGML_F32 = 0, TD_GGML_F16 = 1, TD_GGML_Q4_0 = 2, TD_GGML_Q8_0 = 8, TD_GGML_BF16 = 30 };

typedef struct td_gguf_kv {
    const char *key; /* points into the file: NOT NUL-terminated; key_len bytes */
    uint64_t key_len;
    td_gguf_vtype type;
    td_gguf_vtype elem_type; /* arrays */
    uint64_t n;              /* arrays: element count; strings: byte length */
    const uint8_t *value;    /* scalars / string bytes / first array element */
} td_gguf_kv;

typedef struct td_gguf_tensor {
    char name[64];
    int n_dims;
    int64_t ne[4];    /* ne[0] = row length */
    int ggml_type;
    td_dtype dtype;   /* TD_DTYPE_OTHER for ggml types this engine does not compute with */
    uint64_t offset;  /* from the start of the data section */
    uint64_t nbytes;
    const uint8_t *data;
} td_gguf_tensor;

typedef struct td_gguf {
    td_mapped_file map; /* the image: a mapped file, or a caller's buffer (buffer) */
    int buffer;         /* 0: map is a mapped file; TD_GGUF_BUFFER_OWNED: td_free'd on close; _BORROWED: left alone */
    uint32_t version;
    td_gguf_kv *kv;
    int64_t n_kv;
    td_gguf_tensor *tensors;
    int64_t n_tensors;
    uint32_t alignment;
} td_gguf;

/* Parses a GGUF image in memory (not copied; `name` appears in messages). */
td_status td_gguf_parse(const uint8_t *buf, size_t size, const char *name, td_gguf *out);
td_status td_gguf_open(const char *path, td_gguf *out);
enum { TD_GGUF_BUFFER_OWNED = 1, TD_GGUF_BUFFER_BORROWED = 2 };
/* Parses a GGUF image held in a buffer (td_model_load_buffer): `how` TD_GGUF_BUFFER_OWNED, the buffer is td_free'd
 * by td_gguf_close (and here on failure); TD_GGUF_BUFFER_BORROWED, never freed. */
td_status td_gguf_open_buffer(void *data, size_t size, const char *name, int how, td_gguf *out);
void td_gguf_close(td_gguf *g);
/* 1 if the file starts with the GGUF magic. */
int td_gguf_sniff(const char *path);

const td_gguf_kv *td_gguf_find(const td_gguf *g, const char *key);
const td_gguf_tensor *td_gguf_tensor_find(const td_gguf *g, const char *name);
/* Typed reads; each fails with a message naming the key when it is absent (if required) or of another type.
 * Integer reads accept any integer type whose value fits. */
td_status td_gguf_get_int(const td_gguf *g, const char *key, int required, int64_t *out);
td_status td_gguf_get_f32(const td_gguf *g, const char *key, int required, float *out);
td_status td_gguf_get_bool(const td_gguf *g, const char *key, int required, int *out);
/* *s points into the file (not NUL-terminated); *len is its length. */
td_status td_gguf_get_str(const td_gguf *g, const char *key, int required, const char **s, uint64_t *len);
/* Walks a string array in order (bounds were checked at parse): set *it = NULL, then each call yields the next
 * element. */
void td_gguf_next_str(const td_gguf_kv *kv, const uint8_t **it, const char **s, uint64_t *len);
/* An array's i-th integer element. */
int64_t td_gguf_array_int(const td_gguf_kv *kv, uint64_t i);
/* An F32 array's i-th element (the caller checked elem_type). */
float td_gguf_array_f32(const td_gguf_kv *kv, uint64_t i);

/* The tokenizer of tokenizer.ggml.* (td_tokenizer_load_gguf's rules; flags: TD_TOKENIZER_NO_NFC). Tensors and
 * the architecture play no part. */
td_status td_gguf_tokenizer(const td_gguf *g, unsigned flags, td_tokenizer **out);
/* The SentencePiece vocabulary of tokenizer.ggml.model "gemma4" (with_merges: tokenizer.ggml.merges) or "llama"
 * (merges from the scores by Hugging Face's rule) (gguf_spm.c); bos: the token TD_TOKENIZE_ADD_BOS puts first,
 * -1: none. */
td_status td_gguf_spm_tokenizer(const td_gguf *g, int with_merges, int32_t bos, td_tokenizer **out);
/* For export: a SentencePiece-style tokenizer's pieces scored so that the rule above gives back its merges' ranks
 * (*scores: one per token, td_free). */
td_status td_spm_scores(const td_tokenizer *tok, float **scores);

/* ---- writing ---------------------------------------------------------------------------------------------- */

typedef struct td_gguf_writer td_gguf_writer;

td_status td_gguf_writer_new(td_gguf_writer **out);
void td_gguf_writer_free(td_gguf_writer *w);
td_status td_gguf_add_u32(td_gguf_writer *w, const char *key, uint32_t v);
td_status td_gguf_add_i32(td_gguf_writer *w, const char *key, int32_t v);
td_status td_gguf_add_f32(td_gguf_writer *w, const char *key, float v);
td_status td_gguf_add_bool(td_gguf_writer *w, const char *key, int v);
td_status td_gguf_add_str(td_gguf_writer *w, const char *key, const char *s, size_t len);
/* Arrays: strings (n pointers + lengths) or i32. */
td_status td_gguf_add_str_array(td_gguf_writer *w, const char *key, const char *const *s, const size_t *len, uint64_t n);
td_status td_gguf_add_i32_array(td_gguf_writer *w, const char *key, const int32_t *v, uint64_t n);
td_status td_gguf_add_f32_array(td_gguf_writer *w, const char *key, const float *v, uint64_t n);
/* Adds a tensor of ggml type `type` with dims ne[0..n_dims) (ne[0] = row length); the writer takes ownership of
 * `data` (malloc'd, nbytes). */
td_status td_gguf_add_tensor(td_gguf_writer *w, const char *name, int type, int n_dims, const int64_t *ne, void *data,
                             uint64_t nbytes);
td_status td_gguf_write(td_gguf_writer *w, const char *path);

#endif
