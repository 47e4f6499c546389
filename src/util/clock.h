/* The library's one clock, for durations and timeouts measured here: CLOCK_MONOTONIC, which no change of the wall
 * time moves, in milliseconds or seconds as a double (what the statistics and the logs report). Not for the wall
 * time that a response or a file records (`created`, a run's date): those read CLOCK_REALTIME / time(). */
#ifndef TD_UTIL_CLOCK_H
#define TD_UTIL_CLOCK_H

#include <time.h>

static inline double td_now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static inline double td_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return 1e3 * (double)ts.tv_sec + 1e-6 * (double)ts.tv_nsec;
}

#endif
