/* Error reporting inside the library: set the thread-local message and return the status in one step. */
#ifndef TD_UTIL_ERROR_H
#define TD_UTIL_ERROR_H

#include "typedecide.h"

#if defined(__GNUC__)
#define TD_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define TD_PRINTF(a, b)
#endif

/* Formats the message of the failing call and returns `status`, so that callers write
 * `return td_fail(TD_ERR_FORMAT, "%s: tensor %s: ...", file, name);` */
td_status td_fail(td_status status, const char *fmt, ...) TD_PRINTF(2, 3);

/* Prepends "prefix: " to the current message (to add context on the way up) and returns `status`. */
td_status td_fail_context(td_status status, const char *fmt, ...) TD_PRINTF(2, 3);

/* Convenience for allocation failures. */
td_status td_fail_nomem(const char *what);

#endif
