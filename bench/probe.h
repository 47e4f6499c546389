/* What the kernel probes (bench/amx_probe.c, bench/attn_probe.c) share: a monotonic clock and a fixed xorshift
 * stream of uniform floats in [-1, 1), the same inputs on every machine. Not part of the engine. */
#ifndef TD_BENCH_PROBE_H
#define TD_BENCH_PROBE_H

#include <stdint.h>
#include <time.h>

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static uint64_t rng = 88172645463325252ull;
static float uniform(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (float)((rng >> 40) & 0xffffff) / 16777216.0f * 2.0f - 1.0f;
}

#endif
