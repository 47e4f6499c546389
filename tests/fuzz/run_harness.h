/* The corpus runner's readers on arbitrary bytes, shared by the libFuzzer targets fuzz_resume and fuzz_merge and by
 * the seeded mutations of tests/test_fuzz_run.c (both builds). Parts of an input are separated by "\n##\n".
 *   resume: results, errors, provenance -> td_prov_read, then td_run_repair over a share; afterwards both files
 *           hold only complete lines of ours about the share in increasing input line, the counts agree, and a
 *           second repair changes nothing;
 *   merge:  up to 3 shards of (results, errors, provenance) -> td_run_merge; on success the output holds increasing
 *           input lines and results + errors cover the recorded documents; on failure no output exists; no
 *           temporary file is ever left behind.
 * Each returns 0, or -1 naming the broken invariant on stderr. */
#ifndef TD_TESTS_FUZZ_RUN_HARNESS_H
#define TD_TESTS_FUZZ_RUN_HARNESS_H

#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "run/run_internal.h"
#include "typedecide_run.h"

#define HARNESS_MAX_PARTS 9

/* Splits data at "\n##\n" into at most max parts (the last takes the rest). */
static inline int harness_split(const uint8_t *data, size_t size, const uint8_t **part, size_t *len, int max) {
    int n = 0;
    size_t start = 0;
    for (size_t i = 0; i + 4 <= size && n < max - 1; i++)
        if (memcmp(data + i, "\n##\n", 4) == 0) {
            part[n] = data + start, len[n] = i + 1 - start, n++; /* the part keeps its newline */
            start = i + 4;
            i += 3;
        }
    part[n] = data + start, len[n] = size - start, n++;
    return n;
}

static inline int harness_write(const char *path, const uint8_t *data, size_t len) {
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    int ok = len == 0 || fwrite(data, 1, len, f) == len;
    return fclose(f) == 0 && ok ? 0 : -1;
}

/* The lines of a file of ours, checked: every line complete and ours, input lines increasing (and in the share when
 * one is given). The count, or -1 (with why). */
static inline int64_t harness_check_file(const char *path, int errors_file, const int32_t *share, int64_t n_share) {
    td_lines r;
    if (td_lines_open(&r, path) != TD_OK) return -1;
    int64_t n = 0;
    int32_t prev = 0;
    int got, bad = 0;
    while (!bad && (got = td_lines_next(&r)) == 1) {
        int32_t line = 0;
        char *id = NULL;
        int ours = r.complete ? td_run_parse_ours(r.line, r.len, errors_file, &line, &id) : 0;
        td_free(id);
        int in = !share;
        for (int64_t k = 0; share && k < n_share && !in; k++) in = share[k] == line;
        if (ours != 1 || line <= prev || !in) {
            fprintf(stderr, "harness: %s:%d: %s\n", path, r.lineno,
                    ours != 1 ? "not a complete line of ours" : line <= prev ? "not in input order" : "not of the share");
            bad = 1;
        }
        prev = line;
        n++;
    }
    if (got < 0) bad = 1;
    td_lines_close(&r);
    return bad ? -1 : n;
}

static inline char *harness_read_all(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 4096, k = 0;
    char *b = malloc(cap);
    size_t got;
    while (b && (got = fread(b + k, 1, cap - k, f)) > 0) {
        k += got;
        if (k == cap) {
            char *nb = realloc(b, cap *= 2);
            if (!nb) free(b);
            b = nb;
        }
    }
    fclose(f);
    *n = k;
    return b;
}

static inline int harness_no_temporaries(const char *dir) {
    DIR *d = opendir(dir);
    struct dirent *e;
    int clean = 1;
    while (d && (e = readdir(d)))
        if (strstr(e->d_name, ".tmp.")) {
            fprintf(stderr, "harness: a temporary file was left behind: %s\n", e->d_name);
            clean = 0;
        }
    if (d) closedir(d);
    return clean;
}

static inline int harness_resume(const char *dir, const uint8_t *data, size_t size) {
    const uint8_t *part[3];
    size_t len[3] = {0, 0, 0};
    int np = harness_split(data, size, part, len, 3);
    char out[4096], err[4096], prov[4096];
    snprintf(out, sizeof out, "%s/r.jsonl", dir);
    snprintf(err, sizeof err, "%s/r.jsonl.errors", dir);
    snprintf(prov, sizeof prov, "%s/r.jsonl.provenance.json", dir);
    if (harness_write(out, part[0], len[0]) || harness_write(err, np > 1 ? part[1] : data, np > 1 ? len[1] : 0) ||
        harness_write(prov, np > 2 ? part[2] : data, np > 2 ? len[2] : 0))
        return -1;
    td_prov pv;
    int missing = 0;
    if (td_prov_read(prov, &pv, &missing) == TD_OK) {
        if (pv.shard < 0 || pv.shard >= pv.n_shards || pv.share_docs > pv.input_docs || !pv.identity) {
            fprintf(stderr, "harness: an accepted provenance record holds impossible values\n");
            td_prov_free(&pv);
            return -1;
        }
        char *e = td_prov_errors_path(&pv, out);
        td_free(e);
        td_prov_free(&pv);
    } else if (!td_last_error()[0]) {
        return -1; /* a refusal always says why */
    }
    /* the share: every n-th input line from 1, n chosen by the data, up to line 200 */
    int32_t share[200];
    int64_t n_share = 0;
    int step = 1 + (size ? data[size - 1] % 3 : 0);
    for (int32_t l = 1; l <= 200; l += step) share[n_share++] = l;
    int64_t kr = 0, ke = 0, kr2 = 0, ke2 = 0;
    if (td_run_repair(out, err, share, n_share, NULL, NULL, &kr, &ke) != TD_OK) return td_last_error()[0] ? 0 : -1;
    int64_t nr = harness_check_file(out, 0, share, n_share), ne = harness_check_file(err, 1, share, n_share);
    if (nr < 0 || ne < 0 || nr != kr || ne != ke) {
        fprintf(stderr, "harness: after repair: %lld / %lld lines, %lld / %lld kept\n", (long long)nr, (long long)ne,
                (long long)kr, (long long)ke);
        return -1;
    }
    size_t a_n = 0, b_n = 0;
    char *a = harness_read_all(out, &a_n);
    if (td_run_repair(out, err, share, n_share, NULL, NULL, &kr2, &ke2) != TD_OK || kr2 != kr || ke2 != ke) {
        free(a);
        fprintf(stderr, "harness: a second repair differs\n");
        return -1;
    }
    char *b = harness_read_all(out, &b_n);
    int same = a && b && a_n == b_n && memcmp(a, b, a_n) == 0;
    free(a), free(b);
    if (!same) fprintf(stderr, "harness: a second repair changed the results\n");
    return same ? 0 : -1;
}

static inline int harness_merge(const char *dir, const uint8_t *data, size_t size) {
    const uint8_t *part[HARNESS_MAX_PARTS];
    size_t len[HARNESS_MAX_PARTS];
    int np = harness_split(data, size, part, len, HARNESS_MAX_PARTS);
    int n_shards = (np + 2) / 3;
    char paths[3][4096], out[4096], prov_out[4096], err_out[4096];
    const char *inputs[3];
    for (int i = 0; i < n_shards; i++) {
        char p[4200];
        snprintf(paths[i], sizeof paths[i], "%s/s%d.jsonl", dir, i);
        inputs[i] = paths[i];
        if (harness_write(paths[i], part[3 * i], len[3 * i])) return -1;
        snprintf(p, sizeof p, "%s.errors", paths[i]);
        if (harness_write(p, 3 * i + 1 < np ? part[3 * i + 1] : data, 3 * i + 1 < np ? len[3 * i + 1] : 0)) return -1;
        snprintf(p, sizeof p, "%s.provenance.json", paths[i]);
        if (harness_write(p, 3 * i + 2 < np ? part[3 * i + 2] : data, 3 * i + 2 < np ? len[3 * i + 2] : 0)) return -1;
    }
    snprintf(out, sizeof out, "%s/m.jsonl", dir);
    snprintf(err_out, sizeof err_out, "%s/m.jsonl.errors", dir);
    snprintf(prov_out, sizeof prov_out, "%s/m.jsonl.provenance.json", dir);
    unlink(out), unlink(err_out), unlink(prov_out);
    td_status st = td_run_merge(inputs, n_shards, out, NULL, TD_MERGE_NO_SYNC);
    if (!harness_no_temporaries(dir)) return -1;
    if (st != TD_OK) {
        if (!td_last_error()[0]) return -1;
        if (access(out, F_OK) == 0 || access(err_out, F_OK) == 0 || access(prov_out, F_OK) == 0) {
            fprintf(stderr, "harness: a failed merge wrote an output\n");
            return -1;
        }
        return 0;
    }
    td_prov pv;
    int missing = 0;
    if (td_prov_read(prov_out, &pv, &missing) != TD_OK) {
        fprintf(stderr, "harness: a merge wrote no readable provenance: %s\n", td_last_error());
        return -1;
    }
    int64_t nr = harness_check_file(out, 0, NULL, 0), ne = harness_check_file(err_out, 1, NULL, 0);
    int ok = nr >= 0 && ne >= 0 && nr + ne == pv.input_docs && pv.complete && pv.n_shards == 1;
    if (!ok)
        fprintf(stderr, "harness: a merge's output: %lld results + %lld errors for %lld documents\n", (long long)nr,
                (long long)ne, (long long)pv.input_docs);
    td_prov_free(&pv);
    return ok ? 0 : -1;
}

#endif
