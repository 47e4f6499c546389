/* AVX2 matrix product over packed (x8) Q8_0 / Q4_0 weights and their x8 activations (quant.h); td_matmul_x8_ref is
 * its scalar reference and the two agree to the bit.
 *
 * Q8_0 (int16 activations, ~15 bits): a 16-byte chunk of a packed group holds 2 consecutive elements of each of 8
 * blocks; widened to int16, one vpmaddwd against the same chunk of the activations adds 2 products into each
 * block's own 32-bit lane, so after the 16 chunks of a group every lane holds its block's complete integer dot
 * product (exact: |sum| < 2^27). One conversion, one scale product and one fma then serve 8 blocks (256
 * multiply-adds) per weight row and token.
 * Q4_0 (the Q8_0 values as bytes, the one level every Q4_0 path takes): a 32-byte chunk holds 4 consecutive
 * elements of each block, unsigned nibbles q = w + 8 against signed activation bytes; one vpmaddubsw adds 32
 * products into pairs of 16-bit sums, 8 chunks a group gather in 16 bits (tile_q4 states why exactly), and one
 * vpmaddwd by ones makes each lane's block sum: 2 ops per 32 products where vpmaddwd on widened nibbles took 4
 * (1.4-1.8x the kernel alone in every pair on Zen 4, NOTES). The -8 x sum(x) that q's offset adds is the starting
 * value of the 16-bit sums, computed with the activations, so nothing is subtracted per token.
 *
 * A tile is one weight row and C <= 8 consecutive tokens: the row's chunk is widened once and multiplied with the
 * C tokens' chunks straight from memory, so the C accumulators, the widened chunk and a temporary fit the 16 ymm
 * registers. Tiles only decide how many dot products share a load: a dot product's operations never depend on
 * its neighbours, so results do not depend on the batch, the row range or the thread count.
 * Decode (T < 4) streams each row from memory once, asking for the rows DECODE_AHEAD ahead into L2: one row at a
 * time with prefetch pulled twice the bandwidth of four interleaved rows on the AVX2-only EPYC (into L1 then); into
 * L2, 16 rows ahead, decode went 27-34 -> 38-43 (Q8_0) tokens/s at 2 threads on an AMD EPYC Zen 4 running this set
 * (NOTES). Prefill walks a block of rows that stays in L2 once for every 8 tokens, whose activations stay in L1. */
#include <immintrin.h>

#include "kernels/cpu/avx2_math.h"
#include "kernels/cpu/kernels.h"
#include "kernels/cpu/quant.h"
#include "kernels/cpu/tile_driver.h"

#ifndef SMALL_T
#define SMALL_T 16 /* up to this many tokens the tiled path prefetches rows ahead */
#endif
#ifndef PREFETCH_ROWS
#define PREFETCH_ROWS 8 /* rows the tiled path of a few tokens asks for ahead, into L1 */
#endif
#ifndef DECODE_AHEAD
#define DECODE_AHEAD 16 /* rows decode asks for ahead, into L2 */
#endif
#ifndef L2_ROWS_BYTES
#define L2_ROWS_BYTES (192 * 1024)
#endif
#define MAX_C 8
#define CHUNKS (TD_QBLOCK / 2) /* chunks a group: 2 elements of each block (Q4_0: chunk pairs p, p + CHUNKS / 2) */
#ifndef L1_X_BYTES
#define L1_X_BYTES (24 * 1024) /* the activations of one tile's tokens */
#endif

/* An empty asm that claims to change every accumulator: GCC then neither reassociates the integer sums across
 * chunks (it would hoist all products of a group first and spill them) nor moves accumulators to the stack. */
static inline __attribute__((always_inline)) void keep_in_registers(__m256i *ia, int C) {
    _Pragma("GCC unroll 8") for (int c = 0; c < C; c++) __asm__("" : "+x"(ia[c]));
}

/* Q8_0: one packed row times C consecutive tokens whose activations start at xqw / xd; y[c * ldy] = result. */
static inline __attribute__((always_inline)) void tile_q8(int C, const uint8_t *row, const uint16_t *ws,
                                                          const int16_t *xqw, const float *xd, int64_t nbg, float *y,
                                                          int64_t ldy) {
    __m256 acc[MAX_C];
    _Pragma("GCC unroll 8") for (int c = 0; c < C; c++) acc[c] = _mm256_setzero_ps();
    for (int64_t g = 0; g < nbg; g++) {
        const uint8_t *wg = row + g * TD_X8_GROUP;
        __m256i ia[MAX_C];
        _Pragma("GCC unroll 8") for (int c = 0; c < C; c++) ia[c] = _mm256_setzero_si256();
        _Pragma("GCC unroll 2") for (int k = 0; k < CHUNKS; k++) {
            const __m128i *wk = (const __m128i *)(const void *)(wg + k * TD_X8_CHUNK);
            __m256i wv = _mm256_cvtepi8_epi16(_mm_loadu_si128(wk));
            _Pragma("GCC unroll 8") for (int c = 0; c < C; c++) {
                const int16_t *xk = xqw + (c * nbg + g) * TD_X8_GROUP + k * TD_X8_CHUNK;
                const __m256i *xv = (const __m256i *)(const void *)xk;
                ia[c] = _mm256_add_epi32(ia[c], _mm256_madd_epi16(wv, _mm256_load_si256(xv)));
            }
            keep_in_registers(ia, C);
        }
        __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(ws + g * TD_X8_LANES)));
        _Pragma("GCC unroll 8") for (int c = 0; c < C; c++) {
            __m256 dx = _mm256_loadu_ps(xd + (c * nbg + g) * TD_X8_LANES);
            acc[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(ia[c]), _mm256_mul_ps(dw, dx), acc[c]);
        }
    }
    _Pragma("GCC unroll 8") for (int c = 0; c < C; c++) y[c * ldy] = td_hsum8(acc[c]);
}

/* Q4_0: the same with x8 Q4_0 activations (bytes xqi, offsets xc, scales xd). Each 16-bit half of a lane starts at
 * its offset, -8 x the sum of its 16 activations, and gathers their 16 products q x (q = w + 8) by vpmaddubsw, pairs
 * at a time; every partial sum is -8 S + (a subset of the q x), within +-8 x 16 x 127 = +-16256 (|x| <= 127), so
 * 16 bits hold it exactly and saturation never happens. vpmaddwd by ones then adds the halves into the lane. */
static inline __attribute__((always_inline)) void tile_q4(int C, const uint8_t *row, const uint16_t *ws,
                                                          const int8_t *xqi, const int16_t *xc, const float *xd,
                                                          int64_t nbg, float *y, int64_t ldy) {
    const __m256i nib = _mm256_set1_epi8(15), ones = _mm256_set1_epi16(1);
    __m256 acc[MAX_C];
    _Pragma("GCC unroll 8") for (int c = 0; c < C; c++) acc[c] = _mm256_setzero_ps();
    for (int64_t g = 0; g < nbg; g++) {
        const uint8_t *wg = row + g * (TD_X8_GROUP / 2);
        __m256i is[MAX_C];
        _Pragma("GCC unroll 8") for (int c = 0; c < C; c++)
            is[c] = _mm256_loadu_si256((const __m256i *)(const void *)(xc + (c * nbg + g) * 2 * TD_X8_LANES));
        _Pragma("GCC unroll 2") for (int k = 0; k < CHUNKS / 4; k++) { /* chunk k in the low nibbles, k + 4 high */
            __m256i raw = _mm256_loadu_si256((const __m256i *)(const void *)(wg + k * TD_X8_QCHUNK));
            __m256i lo = _mm256_and_si256(raw, nib), hi = _mm256_and_si256(_mm256_srli_epi16(raw, 4), nib);
            _Pragma("GCC unroll 8") for (int c = 0; c < C; c++) {
                const int8_t *xg = xqi + (c * nbg + g) * TD_X8_GROUP;
                __m256i xlo = _mm256_load_si256((const __m256i *)(const void *)(xg + k * TD_X8_QCHUNK));
                __m256i xhi = _mm256_load_si256((const __m256i *)(const void *)(xg + (k + 4) * TD_X8_QCHUNK));
                is[c] = _mm256_add_epi16(is[c], _mm256_add_epi16(_mm256_maddubs_epi16(lo, xlo),
                                                                 _mm256_maddubs_epi16(hi, xhi)));
            }
            keep_in_registers(is, C);
        }
        __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(ws + g * TD_X8_LANES)));
        _Pragma("GCC unroll 8") for (int c = 0; c < C; c++) {
            __m256 dx = _mm256_loadu_ps(xd + (c * nbg + g) * TD_X8_LANES);
            __m256i ia = _mm256_madd_epi16(is[c], ones);
            acc[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(ia), _mm256_mul_ps(dw, dx), acc[c]);
        }
    }
    _Pragma("GCC unroll 8") for (int c = 0; c < C; c++) y[c * ldy] = td_hsum8(acc[c]);
}

typedef struct {
    const uint8_t *row;
    const uint16_t *ws;
    const void *q;    /* Q8_0: int16 activations; Q4_0: int8 */
    const int16_t *o; /* Q4_0: the activations' offsets */
    const float *d;
    int64_t nbg;
    float *y;
    int64_t ldy;
} tile_args;

/* tile_q8() and tile_q4() for td_tile_call, which makes C a constant (R is 1: one row a tile). */
static inline __attribute__((always_inline)) void q8_at(int R, int C, const void *p) {
    const tile_args *a = p;
    (void)R;
    tile_q8(C, a->row, a->ws, a->q, a->d, a->nbg, a->y, a->ldy);
}
static inline __attribute__((always_inline)) void q4_at(int R, int C, const void *p) {
    const tile_args *a = p;
    (void)R;
    tile_q4(C, a->row, a->ws, a->q, a->o, a->d, a->nbg, a->y, a->ldy);
}

/* Row j's packed bytes times tokens [t, t + C) (1 <= C <= 8), each C its own unrolled instance. */
static inline __attribute__((always_inline)) void tile_any(td_dtype type, int C, const td_qpack *p,
                                                           const uint8_t *row, const td_qrows *xq, int64_t t,
                                                           float *y, int64_t ldy) {
    const int64_t nbg = xq->nbg;
    const uint16_t *ws = td_qpack_scales(p, row);
    const float *d = xq->d + t * nbg * TD_X8_LANES;
    if (type == TD_DTYPE_Q4_0) {
        const int8_t *q = xq->qi + t * nbg * TD_X8_GROUP;
        const int16_t *o = xq->c + t * nbg * 2 * TD_X8_LANES;
        td_tile_call(1, C, 1, MAX_C, q4_at, &(tile_args){row, ws, q, o, d, nbg, y, ldy});
    } else {
        const int16_t *q = xq->qw + t * nbg * TD_X8_GROUP;
        td_tile_call(1, C, 1, MAX_C, q8_at, &(tile_args){row, ws, q, NULL, d, nbg, y, ldy});
    }
}

static inline __attribute__((always_inline)) void matmul_typed(td_dtype type, const td_mat *w, const int32_t *rows,
                                                               const td_qrows *xq, int64_t T, float *y, int64_t ldy,
                                                               int64_t j0, int64_t j1) {
    const td_qpack *p = w->pack;
    if (T < 4) {
        for (int64_t j = j0; !rows && j < j1 && j < j0 + DECODE_AHEAD; j++) /* the first rows, all at once */
            td_prefetch_row_l2(td_qpack_row(p, j), p->row_bytes);
        for (int64_t j = j0; j < j1; j++) {
            if (!rows && j + DECODE_AHEAD < p->rows) /* rows stream from memory once: ask for them early (past
                                                         the range too: a thread's next range follows it) */
                td_prefetch_row_l2(td_qpack_row(p, j + DECODE_AHEAD), p->row_bytes);
            const uint8_t *row = td_qpack_row(p, rows ? rows[j] : j);
            for (int64_t t = 0; t < T; t++) tile_any(type, 1, p, row, xq, t, y + t * ldy + j, ldy);
        }
        return;
    }
    int64_t rb = (int64_t)(L2_ROWS_BYTES / p->row_bytes);
    if (rb < 1) rb = 1;
    int64_t cmax = L1_X_BYTES / (xq->nbg * TD_X8_GROUP * (type == TD_DTYPE_Q8_0 ? 2 : 1)); /* a token's activations */
    cmax = cmax < 2 ? 2 : cmax > MAX_C ? MAX_C : cmax;
    for (int64_t jb = j0; jb < j1; jb += rb) {
        int64_t je = j1 - jb < rb ? j1 : jb + rb;
        /* tiles of equal size (45 tokens by 8: 8,8,8,7,7,7 rather than 8,8,8,8,8,5; by 4 no tile of 1) */
        int64_t n_tiles = (T + cmax - 1) / cmax, base = T / n_tiles, extra = T % n_tiles;
        for (int64_t i = 0, t = 0; i < n_tiles; t += base + (i < extra), i++) {
            int C = (int)(base + (i < extra));
            for (int64_t j = jb; j < je; j++) {
                if (i == 0 && T <= SMALL_T && !rows && j + PREFETCH_ROWS < p->rows) /* a few tokens (continuous
                    batching's steps): the first tile reads each row from memory; ask for it early, as decode does */
                    td_prefetch_row(td_qpack_row(p, j + PREFETCH_ROWS), p->row_bytes);
                tile_any(type, C, p, td_qpack_row(p, rows ? rows[j] : j), xq, t, y + t * ldy + j, ldy);
            }
        }
    }
}

void td_matmul_x8_avx2(const td_mat *w, const int32_t *rows, const void *xq, int64_t T, float *y, int64_t ldy,
                       int64_t j0, int64_t j1) {
    if (w->type == TD_DTYPE_Q8_0) matmul_typed(TD_DTYPE_Q8_0, w, rows, xq, T, y, ldy, j0, j1);
    else if (w->type == TD_DTYPE_Q4_0) matmul_typed(TD_DTYPE_Q4_0, w, rows, xq, T, y, ldy, j0, j1);
}
