/* Element types of weights: the base types that kernels and models share (below both in the layers). */
#ifndef TD_UTIL_DTYPE_H
#define TD_UTIL_DTYPE_H

#include <stddef.h>

typedef enum td_dtype {
    TD_DTYPE_F32 = 0,
    TD_DTYPE_F16 = 1,
    TD_DTYPE_BF16 = 2,
    TD_DTYPE_Q8_0 = 3, /* GGUF block of 32: fp16 scale d + 32 int8 q; value = q * d (34 bytes) */
    TD_DTYPE_Q4_0 = 4, /* GGUF block of 32: fp16 scale d + 16 bytes; low nibbles are elements 0-15, high nibbles
                          16-31; value = (q - 8) * d (18 bytes) */
    TD_DTYPE_OTHER = 255 /* stored in a file but not computable here (I64, F8_E4M3, ...) */
} td_dtype;

#define TD_QBLOCK 32          /* elements per Q8_0 / Q4_0 block */
#define TD_Q8_0_BLOCK_BYTES 34 /* fp16 scale + 32 int8 */
#define TD_Q4_0_BLOCK_BYTES 18 /* fp16 scale + 16 bytes of nibbles */

/* Bytes per element of a plain (non-block) type; 0 for block types. */
static inline size_t td_dtype_size(td_dtype t) {
    switch (t) {
    case TD_DTYPE_F32: return 4;
    case TD_DTYPE_F16:
    case TD_DTYPE_BF16: return 2;
    default: return 0;
    }
}

static inline int td_dtype_is_block(td_dtype t) { return t == TD_DTYPE_Q8_0 || t == TD_DTYPE_Q4_0; }

/* Bytes of one row of `cols` elements (cols a multiple of 32 for block types); 0 if not representable. */
static inline size_t td_dtype_row_bytes(td_dtype t, int64_t cols) {
    if (t == TD_DTYPE_Q8_0) return cols % TD_QBLOCK ? 0 : (size_t)(cols / TD_QBLOCK) * TD_Q8_0_BLOCK_BYTES;
    if (t == TD_DTYPE_Q4_0) return cols % TD_QBLOCK ? 0 : (size_t)(cols / TD_QBLOCK) * TD_Q4_0_BLOCK_BYTES;
    return (size_t)cols * td_dtype_size(t);
}

static inline const char *td_dtype_name(td_dtype t) {
    switch (t) {
    case TD_DTYPE_F32: return "F32";
    case TD_DTYPE_F16: return "F16";
    case TD_DTYPE_BF16: return "BF16";
    case TD_DTYPE_Q8_0: return "Q8_0";
    case TD_DTYPE_Q4_0: return "Q4_0";
    default: return "other";
    }
}

#endif
