/* Element types of weights. */
#ifndef TD_MODEL_DTYPE_H
#define TD_MODEL_DTYPE_H

#include <stddef.h>

typedef enum td_dtype {
    TD_DTYPE_F32 = 0,
    TD_DTYPE_F16 = 1,
    TD_DTYPE_BF16 = 2,
    TD_DTYPE_OTHER = 255 /* stored in a file but not computable here (I64, F8_E4M3, ...) */
} td_dtype;

/* Bytes per element of a computable type. */
static inline size_t td_dtype_size(td_dtype t) {
    switch (t) {
    case TD_DTYPE_F32: return 4;
    case TD_DTYPE_F16:
    case TD_DTYPE_BF16: return 2;
    default: return 0;
    }
}

static inline const char *td_dtype_name(td_dtype t) {
    switch (t) {
    case TD_DTYPE_F32: return "F32";
    case TD_DTYPE_F16: return "F16";
    case TD_DTYPE_BF16: return "BF16";
    default: return "other";
    }
}

#endif
