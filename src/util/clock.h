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

/* The time `ms` milliseconds from now on `clock`, a deadline for pthread_cond_timedwait: CLOCK_REALTIME for a
 * condition variable made with the default attributes, the clock set by pthread_condattr_setclock otherwise. */
static inline struct timespec td_deadline(clockid_t clock, long ms) {
    struct timespec t;
    clock_gettime(clock, &t);
    t.tv_sec += ms / 1000;
    t.tv_nsec += ms % 1000 * 1000000L;
    if (t.tv_nsec >= 1000000000L) t.tv_sec++, t.tv_nsec -= 1000000000L;
    return t;
}

#endif
