/* The walk both SIMD attention kernels (attn_avx2.c, attn_avx512.c) take, written once: the rows as floats
 * (td_attn_gather_avx2), scores in tiles of 2 rows x KT keys (4 for AVX2, 8 for AVX-512), one chunk of keys for all rows at a time, each row's
 * softmax, then values for pairs of rows by the same chunks. Each kernel passes its own width's tile functions;
 * td_attn_tiles is always inlined with them as constants, so they are inlined too. A row's operations depend on
 * its own keys only (the tiles pad by repeating the last key and never mix rows), so a row's result is the same
 * whichever rows share the call. Include only from those two files. */
#ifndef TD_KERNELS_CPU_ATTN_TILES_H
#define TD_KERNELS_CPU_ATTN_TILES_H

#include <stdint.h>

#include "kernels/cpu/kernels.h"

/* Keys per chunk of the score and value passes: all rows go over one chunk before the next, so the chunk's key
 * (or value) rows stay in the first-level cache while every row pair reads them (a multiple of the 4- and 8-key tiles). */
#define TD_ATTN_KEY_CHUNK 64

/* Scores of rows (q0, q1) against the tile's keys kp[0 .. KT) (all valid pointers), times scale: s0[j] = row 0's
 * score of key j for j < c0, s1[j] = row 1's for j < c1 (c1 = 0: s1 is not written); the other scores are computed
 * (on repeated keys) and dropped. */
typedef void (*td_attn_scores_fn)(const float *q0, const float *q1, const float *const *kp, int64_t dim, float scale,
                                  float *s0, float *s1, int c0, int c1);
/* Softmax of x[0..n) in place. */
typedef void (*td_attn_softmax_fn)(float *x, int64_t n);
/* o_r[0..dim) += sum_i p_r[i] v_i over keys c0 .. c1 of rows r0 (keys below n0) and r1 (below n1; p1 == NULL for
 * none), in key order, starting from zero when c0 == 0 and from the partial sums in o_r otherwise (a store and a
 * load change no bit, so each element's sum is the same sequence of operations however the keys are chunked). */
typedef void (*td_attn_values_fn)(const float *p0, const float *p1, int64_t n0, int64_t n1, int64_t c0, int64_t c1,
                                  const float *const *vp, int64_t dim, float *o0, float *o1);

/* How many of a tile's KT keys from i0 a row of n keys reads. */
static inline int td_attn_tile_keys(int64_t n, int64_t i0, int KT) {
    return n <= i0 ? 0 : n - i0 >= KT ? KT : (int)(n - i0);
}

static inline __attribute__((always_inline)) void td_attn_tiles(int KT, td_attn_scores_fn scores,
                                                                td_attn_softmax_fn softmax,
                                                                td_attn_values_fn values, const float *const *q,
                                                                float *const *out, const int64_t *n, int64_t R,
                                                                const td_attn_keys *keys, int64_t dim, float scale,
                                                                float *scratch) {
    int64_t max_n = 0;
    for (int64_t r = 0; r < R; r++) max_n = n[r] > max_n ? n[r] : max_n;
    float *S = scratch;
    const float **kp, **vp;
    td_attn_gather_avx2(keys, R, max_n, dim, scratch, &kp, &vp);
    for (int64_t c0 = 0; c0 < max_n; c0 += TD_ATTN_KEY_CHUNK)
        for (int64_t r0 = 0; r0 < R; r0 += 2) {
            int64_t r1 = r0 + 1 < R ? r0 + 1 : r0, nn = n[r0] > n[r1] ? n[r0] : n[r1];
            for (int64_t i0 = c0; i0 < nn && i0 < c0 + TD_ATTN_KEY_CHUNK; i0 += KT) {
                const float *kt[8]; /* KT <= 8 */
                for (int j = 0; j < KT; j++) kt[j] = kp[i0 + j < nn ? i0 + j : nn - 1];
                scores(q[r0], q[r1], kt, dim, scale, S + r0 * max_n + i0, S + r1 * max_n + i0,
                       td_attn_tile_keys(n[r0], i0, KT), r1 != r0 ? td_attn_tile_keys(n[r1], i0, KT) : 0);
            }
        }
    for (int64_t r = 0; r < R; r++) softmax(S + r * max_n, n[r]);
    for (int64_t c0 = 0; c0 < max_n; c0 += TD_ATTN_KEY_CHUNK)
        for (int64_t r0 = 0; r0 < R; r0 += 2) {
            const float *p0 = S + r0 * max_n, *p1 = r0 + 1 < R ? S + (r0 + 1) * max_n : NULL;
            values(p0, p1, n[r0], p1 ? n[r0 + 1] : 0, c0, c0 + TD_ATTN_KEY_CHUNK, vp, dim, out[r0],
                   p1 ? out[r0 + 1] : NULL);
        }
}

#endif
