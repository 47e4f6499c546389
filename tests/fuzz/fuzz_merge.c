/* libFuzzer target: merge's reader (td_run_merge) on up to three arbitrary shards, each results, errors and
 * provenance (tests/fuzz/run_harness.h says what must hold: a merge either covers the corpus or writes nothing). */
#define _DEFAULT_SOURCE /* mkdtemp */
#include <stdint.h>
#include <stdlib.h>

#include "run_harness.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static char dir[64];
    if (!dir[0]) {
        /* many small files: in memory where the machine has a tmpfs */
        snprintf(dir, sizeof dir, "%s/td-fuzz-merge-XXXXXX", access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp");
        if (!mkdtemp(dir)) __builtin_trap();
    }
    if (harness_merge(dir, data, size) != 0) __builtin_trap();
    return 0;
}
