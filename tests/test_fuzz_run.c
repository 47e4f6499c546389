/* The corpus runner's readers under seeded mutations, in both builds (the libFuzzer targets fuzz_resume and
 * fuzz_merge run the same harness, tests/fuzz/run_harness.h, under `make fuzz`): every seed of
 * tests/fuzz/corpus/resume and tests/fuzz/corpus/merge (files of a real run and its shards: whole, torn, duplicated,
 * swapped, a gap, garbage, no provenance; three shards, one missing, one stopped early), then mutations of each:
 * bytes flipped, lines duplicated, dropped or swapped, the file cut anywhere. No mutation may crash, leak, leave a
 * temporary file, make a merge write a partial corpus, or leave a repaired file that is not this share's lines in
 * input order (or that a second repair changes). */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz/run_harness.h"
#include "test_util.h"

typedef int (*harness_fn)(const char *dir, const uint8_t *data, size_t size);

/* One mutation of src into dst (cap bytes): which kind and where come from the random state. */
static size_t mutate(const uint8_t *src, size_t n, uint8_t *dst, size_t cap, uint64_t *rng) {
    size_t m = n < cap ? n : cap;
    memcpy(dst, src, m);
    if (!m) return 0;
    size_t at = (size_t)(td_test_rand(rng) % m);
    switch (td_test_rand(rng) % 6) {
    case 0: dst[at] ^= (uint8_t)(1u << (td_test_rand(rng) % 8)); break;                  /* a flipped bit */
    case 1: dst[at] = (uint8_t)"0123456789\n{}\":,[]-#"[td_test_rand(rng) % 21]; break;  /* a JSON-ish byte */
    case 2: return at;                                                                   /* cut anywhere */
    case 3: {                                                                            /* a line twice */
        size_t s = at, e = at;
        while (s > 0 && dst[s - 1] != '\n') s--;
        while (e < m && dst[e] != '\n') e++;
        if (e < m) e++;
        size_t l = e - s;
        if (m + l > cap) return m;
        memmove(dst + e + l, dst + e, m - e);
        memcpy(dst + e, dst + s, l);
        return m + l;
    }
    case 4: {                                                                            /* a line gone */
        size_t s = at, e = at;
        while (s > 0 && dst[s - 1] != '\n') s--;
        while (e < m && dst[e] != '\n') e++;
        if (e < m) e++;
        memmove(dst + s, dst + e, m - e);
        return m - (e - s);
    }
    default: {                                                                           /* two bytes swapped */
        size_t b = (size_t)(td_test_rand(rng) % m);
        uint8_t t = dst[at];
        dst[at] = dst[b], dst[b] = t;
    }
    }
    return m;
}

static int run_seeds(const char *name, harness_fn fn, const char *dir, int rounds) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", td_test_path("tests/fuzz/corpus"), name);
    DIR *d = opendir(path);
    CHECKF(d != NULL, "%s: no seeds", path);
    struct dirent *e;
    int seeds = 0, runs = 0;
    uint64_t rng = 47;
    uint8_t *buf = malloc(1 << 16), *mut = malloc(1 << 16);
    while (d && buf && mut && (e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char f[4600];
        snprintf(f, sizeof f, "%s/%s", path, e->d_name);
        size_t n = 0;
        uint8_t *seed = td_test_read(f, &n);
        if (!seed) continue;
        seeds++;
        CHECKF(fn(dir, seed, n) == 0, "%s: the seed %s", name, e->d_name);
        for (int r = 0; r < rounds; r++, runs++) {
            size_t m = mutate(seed, n, mut, 1 << 16, &rng);
            for (int k = (int)(td_test_rand(&rng) % 3); k > 0; k--) { /* sometimes two or three at once */
                memcpy(buf, mut, m);
                m = mutate(buf, m, mut, 1 << 16, &rng);
            }
            if (fn(dir, mut, m) != 0) {
                char keep[4700];
                snprintf(keep, sizeof keep, "%s/failed-%s-%d", dir, e->d_name, r);
                FILE *o = fopen(keep, "wb");
                if (o) fwrite(mut, 1, m, o), fclose(o);
                CHECKF(0, "%s: mutation %d of %s (kept as %s)", name, r, e->d_name, keep);
            }
        }
        free(seed);
    }
    if (d) closedir(d);
    free(buf), free(mut);
    printf("test_fuzz_run: %s: %d seeds, %d mutations\n", name, seeds, runs);
    return seeds;
}

int main(void) {
    /* thousands of small files: in memory where the machine has a tmpfs (a disk under load takes a minute) */
    char dir[64];
    snprintf(dir, sizeof dir, "%s/td-fuzz-run-XXXXXX", access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp");
    CHECK(mkdtemp(dir) != NULL);
    int rounds = getenv("TD_SANITIZED") ? 150 : 600;
    CHECK(run_seeds("resume", harness_resume, dir, rounds) >= 5);
    CHECK(run_seeds("merge", harness_merge, dir, rounds) >= 3);
    if (td_test_failures == 0) { /* a failing input stays for the reader */
        char cmd[256];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
        if (system(cmd) != 0) fprintf(stderr, "note: could not remove %s\n", dir);
    }
    return td_test_finish("test_fuzz_run");
}
