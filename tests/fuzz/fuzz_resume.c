/* libFuzzer target: resume's reader and repair (td_prov_read, td_run_repair) on arbitrary results, errors and
 * provenance files (tests/fuzz/run_harness.h says what must hold after a repair). */
#define _DEFAULT_SOURCE /* mkdtemp */
#include <stdint.h>
#include <stdlib.h>

#include "run_harness.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static char dir[64];
    if (!dir[0]) {
        /* many small files: in memory where the machine has a tmpfs */
        snprintf(dir, sizeof dir, "%s/td-fuzz-resume-XXXXXX", access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp");
        if (!mkdtemp(dir)) __builtin_trap();
    }
    if (harness_resume(dir, data, size) != 0) __builtin_trap();
    return 0;
}
