/* AVX-512 VNNI matrix product over packed (x16) Q8_0 / Q4_0 weights and x16 activations; td_matmul_x16_ref is
 * its scalar reference and the two agree to the bit. td_matmul_avx512, the AVX-512 VNNI kernel set's matmul slot,
 * sends everything else to td_matmul_avx2.
 *
 * A 64-byte chunk of a packed group holds 4 consecutive elements of each of 16 blocks, so vpdpbusd (unsigned
 * weight bytes times signed activation bytes, 4 products a lane) leaves, after the 8 chunks of a group, each
 * block's complete integer dot product in its own 32-bit lane, offset by o * sum(x) (o = 128 or 8), which the
 * accumulator starts out subtracting. One conversion, one scale product and one fma then serve 16 blocks
 * (512 multiply-adds) per weight row and token and activation level (two for Q8_0 weights, one for Q4_0:
 * td_qrows_layout). Tiles (R rows x C tokens) only decide how many dot products share
 * each load: a dot product's operations never depend on its neighbours.
 * Decode (T < DECODE_T) streams each row from memory once, asking for the rows DECODE_AHEAD ahead into L2: the 6-row
 * tiles it replaced pulled ~7 GB/s on one core of the Intel Xeon (AVX-512) where one row at a time pulls ~13 (the
 * core's read bandwidth), and decode ran at 0.6x the x8 kernel's speed; asked for into L1 (8 rows ahead, as the x8
 * kernel did), Q8_0 decode on an AMD EPYC Zen 4 read 37-41 tokens/s at 2 threads, into L2 42-58. The tiled path
 * asks for rows ahead too when its token block is small (T <= SMALL_T: continuous batching's 8-sequence steps), where
 * each row block is done too soon for the hardware prefetcher: 8 streams through `serve` went from 2.6-3.0x to
 * 3.3-3.9x one stream's tokens/s on the Intel Xeon VM (2 threads). */
#include <immintrin.h>

#include "kernels/cpu/avx512_math.h"
#include "kernels/cpu/kernels.h"
#include "kernels/cpu/quant.h"

#define TB 128 /* tokens per block: their x16 activations stay in L2 while the weight rows stream past */
#ifndef PREFETCH_ROWS
#define PREFETCH_ROWS 8
#endif
#ifndef DECODE_AHEAD
#define DECODE_AHEAD 16 /* rows the streaming path asks for ahead, into L2 */
#endif
#ifndef SMALL_T
#define SMALL_T 16 /* up to this many tokens the tiled path prefetches rows ahead */
#endif
#ifndef DECODE_T
#define DECODE_T 5 /* fewer tokens than this take the streaming path (measured: 1.6-2x the 4 x 2 tiles at T = 2..4,
                      even at T = 8) */
#endif

/* Pointers to one token's x16 activations (both levels). */
typedef struct xrow {
    const int8_t *q1, *q2;
    const float *d1, *d2;
    const int32_t *s1, *s2;
} xrow;

static inline __attribute__((always_inline)) void tile(td_dtype type, int R, int C, const uint8_t *const *wr,
                                                       size_t group_bytes, xrow x, int64_t nbg, float *y, int64_t ldy) {
    const int two = type == TD_DTYPE_Q8_0; /* activation levels: td_qrows_layout */
    __m512 acc[8][2];
    const int shift = type == TD_DTYPE_Q8_0 ? 7 : 3;
    const __m512i low4 = _mm512_set1_epi8(15);
    _Pragma("GCC unroll 8") for (int r = 0; r < R; r++)
        _Pragma("GCC unroll 2") for (int c = 0; c < C; c++) acc[r][c] = _mm512_setzero_ps();
    for (int64_t g = 0; g < nbg; g++) {
        __m512i i1[8][2], i2[8][2];
        _Pragma("GCC unroll 2") for (int c = 0; c < C; c++) {
            const int64_t at = (c * nbg + g) * TD_X16_LANES;
            __m512i a = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_slli_epi32(_mm512_loadu_si512(x.s1 + at), shift));
            __m512i b = two ? _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_slli_epi32(_mm512_loadu_si512(x.s2 + at), shift)) : a;
            _Pragma("GCC unroll 8") for (int r = 0; r < R; r++) i1[r][c] = a, i2[r][c] = b;
        }
        if (type == TD_DTYPE_Q8_0) {
            _Pragma("GCC unroll 8") for (int k = 0; k < TD_QBLOCK / 4; k++) {
                __m512i wv[8];
                _Pragma("GCC unroll 8") for (int r = 0; r < R; r++)
                    wv[r] = _mm512_loadu_si512(wr[r] + g * TD_X16_GROUP + k * TD_X16_CHUNK);
                _Pragma("GCC unroll 2") for (int c = 0; c < C; c++) {
                    const int64_t at = (c * nbg + g) * TD_X16_GROUP + k * TD_X16_CHUNK;
                    __m512i xa = _mm512_loadu_si512(x.q1 + at), xb = two ? _mm512_loadu_si512(x.q2 + at) : xa;
                    _Pragma("GCC unroll 8") for (int r = 0; r < R; r++) {
                        i1[r][c] = _mm512_dpbusd_epi32(i1[r][c], wv[r], xa);
                        if (two) i2[r][c] = _mm512_dpbusd_epi32(i2[r][c], wv[r], xb);
                    }
                }
            }
        } else {
            _Pragma("GCC unroll 4") for (int k = 0; k < TD_QBLOCK / 8; k++) {
                __m512i lo[8], hi[8];
                _Pragma("GCC unroll 8") for (int r = 0; r < R; r++) {
                    __m512i raw = _mm512_loadu_si512(wr[r] + g * group_bytes + k * TD_X16_CHUNK);
                    lo[r] = _mm512_and_si512(raw, low4);
                    hi[r] = _mm512_and_si512(_mm512_srli_epi16(raw, 4), low4);
                }
                _Pragma("GCC unroll 2") for (int c = 0; c < C; c++) {
                    const int64_t at = (c * nbg + g) * TD_X16_GROUP;
                    __m512i xlo = _mm512_loadu_si512(x.q1 + at + k * TD_X16_CHUNK);
                    __m512i xhi = _mm512_loadu_si512(x.q1 + at + (k + TD_QBLOCK / 8) * TD_X16_CHUNK);
                    _Pragma("GCC unroll 8") for (int r = 0; r < R; r++)
                        i1[r][c] = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(i1[r][c], lo[r], xlo), hi[r], xhi);
                }
            }
        }
        __m512 dw[8];
        _Pragma("GCC unroll 8") for (int r = 0; r < R; r++) dw[r] = _mm512_cvtph_ps(
            _mm256_loadu_si256((const __m256i *)(const void *)(wr[r] + nbg * group_bytes + g * TD_X16_LANES * 2)));
        _Pragma("GCC unroll 2") for (int c = 0; c < C; c++) {
            const int64_t at = (c * nbg + g) * TD_X16_LANES;
            __m512 d1 = _mm512_loadu_ps(x.d1 + at), d2 = two ? _mm512_loadu_ps(x.d2 + at) : d1;
            _Pragma("GCC unroll 8") for (int r = 0; r < R; r++) {
                acc[r][c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(i1[r][c]), _mm512_mul_ps(dw[r], d1), acc[r][c]);
                if (two) acc[r][c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(i2[r][c]), _mm512_mul_ps(dw[r], d2), acc[r][c]);
            }
        }
    }
    _Pragma("GCC unroll 8") for (int r = 0; r < R; r++)
        _Pragma("GCC unroll 2") for (int c = 0; c < C; c++) y[c * ldy + r] = td_hsum16(acc[r][c]);
}

/* One packed row times one token, for decode: the same operations as tile(type, 1, 1, ...), with each level's
 * integer sum split over two accumulators (even and odd chunks) so that two dependency chains per level run at
 * once; integer sums are exact, so the split changes no bit. */
static inline __attribute__((always_inline)) float row_dot(td_dtype type, const uint8_t *row, size_t group_bytes,
                                                           xrow x, int64_t nbg) {
    const int two = type == TD_DTYPE_Q8_0;
    const int shift = type == TD_DTYPE_Q8_0 ? 7 : 3;
    const __m512i low4 = _mm512_set1_epi8(15);
    const uint16_t *ws = (const uint16_t *)(const void *)(row + nbg * group_bytes);
    __m512 acc = _mm512_setzero_ps();
    for (int64_t g = 0; g < nbg; g++) {
        const int64_t at = g * TD_X16_LANES;
        const uint8_t *wg = row + g * group_bytes;
        const int8_t *x1 = x.q1 + g * TD_X16_GROUP, *x2 = x.q2 + g * TD_X16_GROUP;
        __m512i a1 = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_slli_epi32(_mm512_loadu_si512(x.s1 + at), shift));
        __m512i a2 = two ? _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_slli_epi32(_mm512_loadu_si512(x.s2 + at), shift))
                         : a1;
        __m512i b1 = _mm512_setzero_si512(), b2 = _mm512_setzero_si512();
        if (type == TD_DTYPE_Q8_0) {
            _Pragma("GCC unroll 4") for (int k = 0; k < TD_QBLOCK / 4; k += 2) {
                __m512i w0 = _mm512_loadu_si512(wg + k * TD_X16_CHUNK), w1 = _mm512_loadu_si512(wg + (k + 1) * TD_X16_CHUNK);
                a1 = _mm512_dpbusd_epi32(a1, w0, _mm512_loadu_si512(x1 + k * TD_X16_CHUNK));
                b1 = _mm512_dpbusd_epi32(b1, w1, _mm512_loadu_si512(x1 + (k + 1) * TD_X16_CHUNK));
                a2 = _mm512_dpbusd_epi32(a2, w0, _mm512_loadu_si512(x2 + k * TD_X16_CHUNK));
                b2 = _mm512_dpbusd_epi32(b2, w1, _mm512_loadu_si512(x2 + (k + 1) * TD_X16_CHUNK));
            }
        } else {
            _Pragma("GCC unroll 4") for (int k = 0; k < TD_QBLOCK / 8; k++) {
                __m512i raw = _mm512_loadu_si512(wg + k * TD_X16_CHUNK);
                __m512i lo = _mm512_and_si512(raw, low4), hi = _mm512_and_si512(_mm512_srli_epi16(raw, 4), low4);
                a1 = _mm512_dpbusd_epi32(a1, lo, _mm512_loadu_si512(x1 + k * TD_X16_CHUNK));
                b1 = _mm512_dpbusd_epi32(b1, hi, _mm512_loadu_si512(x1 + (k + TD_QBLOCK / 8) * TD_X16_CHUNK));
            }
        }
        __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)(ws + at)));
        acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(a1, b1)), _mm512_mul_ps(dw, _mm512_loadu_ps(x.d1 + at)), acc);
        if (two)
            acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(a2, b2)), _mm512_mul_ps(dw, _mm512_loadu_ps(x.d2 + at)),
                                  acc);
    }
    return td_hsum16(acc);
}

static inline xrow xrow_at(const td_qrows *xr, int64_t t) {
    int64_t q = t * xr->nbg * TD_X16_GROUP, s = t * xr->nbg * TD_X16_LANES;
    xrow x = {xr->qi + q, xr->qi2 + q, xr->d + s, xr->d2 + s, xr->s + s, xr->s2 + s};
    return x;
}

static inline __attribute__((always_inline)) void matmul_typed(td_dtype type, const td_mat *w, const int32_t *rows,
                                                               const td_qrows *xr, int64_t T, float *y, int64_t ldy,
                                                               int64_t j0, int64_t j1) {
    const td_qpack *p = w->pack;
    const int64_t nbg = p->nbg;
    const size_t gb = p->group_bytes;
    const uint8_t *wr[8];
    if (T < DECODE_T) { /* decode: rows stream from memory once each, asked for DECODE_AHEAD ahead into L2 (past the
                           range too: a thread's next range follows it) */
        for (int64_t j = j0; !rows && j < j1 && j < j0 + DECODE_AHEAD; j++)
            td_prefetch_row_l2(td_qpack_row(p, j), p->row_bytes);
        for (int64_t j = j0; j < j1; j++) {
            if (!rows && j + DECODE_AHEAD < p->rows) td_prefetch_row_l2(td_qpack_row(p, j + DECODE_AHEAD), p->row_bytes);
            const uint8_t *row = td_qpack_row(p, rows ? rows[j] : j);
            for (int64_t t = 0; t < T; t++) y[t * ldy + j] = row_dot(type, row, gb, xrow_at(xr, t), nbg);
        }
        return;
    }
    for (int64_t t0 = 0; t0 < T; t0 += TB) {
        int64_t t1 = T - t0 < TB ? T : t0 + TB;
        /* a few tokens (continuous batching's decode steps) spend little time on each row block: ask for the rows
           PREFETCH_ROWS ahead, as the streaming path does, so their reads overlap the products */
        const int ahead = !rows && t1 - t0 <= SMALL_T;
        for (int64_t j = j0; j < j1; j += 4) {
            int R = j1 - j < 4 ? (int)(j1 - j) : 4;
            for (int64_t a = j + PREFETCH_ROWS; ahead && a < j + PREFETCH_ROWS + 4 && a < p->rows; a++)
                td_prefetch_row(td_qpack_row(p, a), p->row_bytes);
            for (int r = 0; r < R; r++) wr[r] = td_qpack_row(p, rows ? rows[j + r] : j + r);
            for (int64_t t = t0; t < t1; t += 2) {
                int C = t1 - t < 2 ? 1 : 2;
                xrow x = xrow_at(xr, t);
                float *yt = y + t * ldy + j;
                switch (R * 4 + C) {
                case 4 * 4 + 2: tile(type, 4, 2, wr, gb, x, nbg, yt, ldy); break;
                case 4 * 4 + 1: tile(type, 4, 1, wr, gb, x, nbg, yt, ldy); break;
                case 3 * 4 + 2: tile(type, 3, 2, wr, gb, x, nbg, yt, ldy); break;
                case 3 * 4 + 1: tile(type, 3, 1, wr, gb, x, nbg, yt, ldy); break;
                case 2 * 4 + 2: tile(type, 2, 2, wr, gb, x, nbg, yt, ldy); break;
                case 2 * 4 + 1: tile(type, 2, 1, wr, gb, x, nbg, yt, ldy); break;
                case 1 * 4 + 2: tile(type, 1, 2, wr, gb, x, nbg, yt, ldy); break;
                default: tile(type, 1, 1, wr, gb, x, nbg, yt, ldy); break;
                }
            }
        }
    }
}

void td_matmul_x16_avx512(const td_mat *w, const int32_t *rows, const void *xq, int64_t T, float *y, int64_t ldy,
                          int64_t j0, int64_t j1) {
    if (w->type == TD_DTYPE_Q8_0) matmul_typed(TD_DTYPE_Q8_0, w, rows, xq, T, y, ldy, j0, j1);
    else matmul_typed(TD_DTYPE_Q4_0, w, rows, xq, T, y, ldy, j0, j1);
}

void td_matmul_avx512(const td_mat *w, const int32_t *rows, const float *x, const void *xq, int64_t T, int64_t ldx,
                      float *y, int64_t ldy, int64_t j0, int64_t j1) {
    if (w->pack && w->pack->lanes == TD_X16_LANES) td_matmul_x16_avx512(w, rows, xq, T, y, ldy, j0, j1);
    else td_matmul_avx2(w, rows, x, xq, T, ldx, y, ldy, j0, j1);
}
