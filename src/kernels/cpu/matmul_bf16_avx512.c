/* AVX-512 BF16 matrix product: BF16 weights, read as stored (no packed copy), times bf16 activations (td_qrows'
 * bf16 layout); td_matmul_bf16_ref spells out vdpbf16ps' arithmetic and the two agree to the bit (finite inputs).
 *
 * A zmm of 32 consecutive weights and one of the same 32 activations make one vdpbf16ps: lane l adds the products
 * of columns 2l + 1 and 2l, 32 multiply-adds an instruction where an fp32 fma does 16 after converting the weights.
 * The last step of a row whose width is not a multiple of 32 reads its weights through a mask (zeros past the end,
 * as the activations are). Tiles (R rows x C tokens) only
 * decide how many dot products share each load: a dot product's operations never depend on its neighbours, so
 * results depend neither on the batch nor on the row range or the thread count.
 * Decode (T < DECODE_T) streams each row from memory once, asking for the rows DECODE_AHEAD ahead into L2 (as the
 * x16 kernel does); prefill walks blocks of TB tokens, whose activations stay in L2, past the weight rows. */
#include <immintrin.h>

#include "kernels/cpu/avx512_math.h"
#include "kernels/cpu/kernels.h"
#include "kernels/cpu/quant.h"
#include "kernels/cpu/tile_driver.h"

#ifndef DECODE_AHEAD
#define DECODE_AHEAD 8 /* rows of 2 KB and more, asked for into L2 */
#endif
#ifndef DECODE_T
#define DECODE_T 5
#endif
#define TB 128
#define STEP 32 /* columns a vdpbf16ps */

/* R rows x C tokens. x points at token 0's activations, rows n apart. */
static inline __attribute__((always_inline)) void tile(int R, int C, const uint16_t *const *wr, int64_t cols,
                                                       const uint16_t *x, int64_t n, float *y, int64_t ldy) {
    __m512 acc[4][4];
    _Pragma("GCC unroll 4") for (int r = 0; r < R; r++)
        _Pragma("GCC unroll 4") for (int c = 0; c < C; c++) acc[r][c] = _mm512_setzero_ps();
    const int64_t full = cols / STEP * STEP;
    for (int64_t k = 0; k < n; k += STEP) {
        __m512bh wv[4];
        if (k < full) {
            _Pragma("GCC unroll 4") for (int r = 0; r < R; r++) wv[r] = (__m512bh)_mm512_loadu_si512(wr[r] + k);
        } else { /* the row's last, partial step: zeros past its end */
            __mmask32 m = (__mmask32)((1ull << (cols - k)) - 1);
            _Pragma("GCC unroll 4") for (int r = 0; r < R; r++) wv[r] = (__m512bh)_mm512_maskz_loadu_epi16(m, wr[r] + k);
        }
        _Pragma("GCC unroll 4") for (int c = 0; c < C; c++) {
            __m512bh xv = (__m512bh)_mm512_loadu_si512(x + c * n + k);
            _Pragma("GCC unroll 4") for (int r = 0; r < R; r++) acc[r][c] = _mm512_dpbf16_ps(acc[r][c], wv[r], xv);
        }
    }
    _Pragma("GCC unroll 4") for (int r = 0; r < R; r++)
        _Pragma("GCC unroll 4") for (int c = 0; c < C; c++) y[c * ldy + r] = td_hsum16(acc[r][c]);
}

typedef struct {
    const uint16_t *const *wr;
    int64_t cols;
    const uint16_t *x;
    int64_t n;
    float *y;
    int64_t ldy;
} tile_args;

/* tile() for td_tile_call, which makes R and C constants. */
static inline __attribute__((always_inline)) void tile_at(int R, int C, const void *p) {
    const tile_args *a = p;
    tile(R, C, a->wr, a->cols, a->x, a->n, a->y, a->ldy);
}

/* Rows wr[0..R) times tokens [t, t + C), R and C in 1..4, each its own unrolled instance. */
static void tile_any(int R, int C, const uint16_t *const *wr, int64_t cols, const td_qrows *xq, int64_t t, float *y,
                     int64_t ldy) {
    const int64_t n = xq->nb * TD_QBLOCK;
    td_tile_call(R, C, 4, 4, tile_at, &(tile_args){wr, cols, xq->h + t * n, n, y, ldy});
}

void td_matmul_bf16_avx512(const td_mat *w, const int32_t *rows, const void *xq, int64_t T, float *y, int64_t ldy,
                           int64_t j0, int64_t j1) {
    const td_qrows *x = xq;
    const int64_t cols = w->cols;
    const uint16_t *wr[4];
    if (T < DECODE_T) {
        for (int64_t j = j0; !rows && j < j1 && j < j0 + DECODE_AHEAD; j++) /* the first rows, all at once */
            td_prefetch_row_l2(td_mat_row(w, j), w->row_bytes);
        for (int64_t j = j0; j < j1; j++) {
            if (!rows && j + DECODE_AHEAD < w->rows) td_prefetch_row_l2(td_mat_row(w, j + DECODE_AHEAD), w->row_bytes);
            wr[0] = td_mat_row(w, rows ? rows[j] : j);
            for (int64_t t = 0; t < T; t++) tile_any(1, 1, wr, cols, x, t, y + t * ldy + j, ldy);
        }
        return;
    }
    for (int64_t t0 = 0; t0 < T; t0 += TB) {
        int64_t t1 = T - t0 < TB ? T : t0 + TB;
        for (int64_t j = j0; j < j1; j += 4) {
            int R = j1 - j < 4 ? (int)(j1 - j) : 4;
            for (int r = 0; r < R; r++) wr[r] = td_mat_row(w, rows ? rows[j + r] : j + r);
            for (int64_t t = t0; t < t1; t += 4) {
                int C = t1 - t < 4 ? (int)(t1 - t) : 4;
                tile_any(R, C, wr, cols, x, t, y + t * ldy + j, ldy);
            }
        }
    }
}

void td_matmul_avx512bf16(const td_mat *w, const int32_t *rows, const float *x, const void *xq, int64_t T,
                          int64_t ldx, float *y, int64_t ldy, int64_t j0, int64_t j1) {
    if (w->type == TD_DTYPE_BF16 && xq) td_matmul_bf16_avx512(w, rows, xq, T, y, ldy, j0, j1);
    else td_matmul_avx512(w, rows, x, xq, T, ldx, y, ldy, j0, j1);
}
