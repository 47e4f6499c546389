#include "util/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One message per thread, like dlerror(): the library has no other mutable global state. */
static _Thread_local char last_error[2048];

const char *td_last_error(void) { return last_error; }

td_status td_fail(td_status status, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    return status;
}

td_status td_fail_context(td_status status, const char *fmt, ...) {
    char prefix[1024], old[sizeof last_error];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    memcpy(old, last_error, sizeof old);
    size_t a = strlen(prefix), b = strlen(old);
    if (a > sizeof last_error - 3) a = sizeof last_error - 3;
    if (b > sizeof last_error - 3 - a) b = sizeof last_error - 3 - a; /* keep the end of a long chain short */
    memcpy(last_error, prefix, a);
    memcpy(last_error + a, ": ", 2);
    memcpy(last_error + a + 2, old, b);
    last_error[a + 2 + b] = 0;
    return status;
}

td_status td_fail_nomem(const char *what) { return td_fail(TD_ERR_NOMEM, "out of memory allocating %s", what); }

const char *td_status_str(td_status status) {
    switch (status) {
    case TD_OK: return "ok";
    case TD_ERR_INVALID_ARG: return "invalid argument";
    case TD_ERR_IO: return "i/o error";
    case TD_ERR_FORMAT: return "format error";
    case TD_ERR_UNSUPPORTED: return "unsupported";
    case TD_ERR_NOMEM: return "out of memory";
    case TD_ERR_RANGE: return "out of range";
    case TD_ERR_STATE: return "invalid state";
    case TD_ERR_NONFINITE: return "non-finite value";
    case TD_ERR_DEVICE: return "device error";
    }
    return "unknown status";
}

const char *td_version(void) { return TD_VERSION_STRING; }
