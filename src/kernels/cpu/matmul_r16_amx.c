/* AMX matrix product over r16-packed Q8_0 / Q4_0 weights and r16 activations (the AMX kernel set's matmul slot,
 * td_matmul_amx): the same results, bit for bit, as td_matmul_r16_ref and td_matmul_r16_avx512.
 *
 * One tdpbsud multiplies a tile of up to 16 tokens' 32 activation bytes of block b (A: signed, rows nbg * 512 bytes
 * apart in the r16 layout) by the slab's block b (B: 8 rows of 64 bytes, as it lies in the pack: row k holds
 * elements 4k..4k+3 of the 16 weight rows, unsigned) into C [tokens][16 rows] of exact block sums: one block per
 * instruction, because every block has its own scale. Each C row then takes the r16 epilogue in AVX-512 (offset,
 * conversion, scale product, fma into that token's accumulator of 16 rows), in block order, so that the float
 * operations are the reference's. Q4_0 blocks are widened to bytes (q, 0..15) before their tile load. Fewer than
 * AMX_MIN_T tokens (decode), and lists of rows, take td_matmul_r16_avx512.
 *
 * Linux gives a process the AMX tile registers only when asked (arch_prctl ARCH_REQ_XCOMP_PERM): dispatch.c asks
 * before it offers the set. Compiled with -DTD_AMX_EMULATE (tests/test_kernels.c), the tile instructions are C loops
 * with the instructions' semantics and the function is td_matmul_r16_amx_emulated, so that the tiling and the
 * epilogue are checked on a CPU without AMX. */
#include <immintrin.h>
#include <string.h>

#include "kernels/cpu/kernels.h"
#include "kernels/cpu/quant.h"

#ifndef AMX_MIN_T
#define AMX_MIN_T 8 /* fewer tokens than this take the AVX-512 VNNI path */
#endif

/* Tile registers (macros: the intrinsics want the literal number): sums, activations (two levels), weights. */
#define C1 0
#define C2 1
#define A1 2
#define A2 3
#define B 4

/* LDTILECFG's 64-byte operand, palette 1. */
typedef struct tilecfg {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} tilecfg;

#ifdef TD_AMX_EMULATE
#define FN(name) name##_emulated
void td_matmul_r16_amx_emulated(const td_mat *w, const int32_t *rows, const void *xq, int64_t T, float *y,
                                int64_t ldy, int64_t j0, int64_t j1);
static _Thread_local struct {
    tilecfg cfg;
    uint8_t t[8][16][64];
} emu;
static void tile_config(const tilecfg *c) { emu.cfg = *c; }
static void tile_load(int i, const void *base, size_t stride) {
    for (int r = 0; r < emu.cfg.rows[i]; r++) memcpy(emu.t[i][r], (const uint8_t *)base + r * stride, emu.cfg.colsb[i]);
}
static void tile_zero(int i) { memset(emu.t[i], 0, sizeof emu.t[i]); }
static void tile_store(int i, void *base, size_t stride) {
    for (int r = 0; r < emu.cfg.rows[i]; r++) memcpy((uint8_t *)base + r * stride, emu.t[i][r], emu.cfg.colsb[i]);
}
/* tdpbsud: C[m][n] += sum over k of A[m][k] (signed) * B[k / 4][4n + k % 4] (unsigned), k < A's bytes a row. */
static void tile_dpbsud(int c, int a, int b) {
    for (int m = 0; m < emu.cfg.rows[c]; m++)
        for (int n = 0; n < emu.cfg.colsb[c] / 4; n++) {
            int32_t acc;
            memcpy(&acc, &emu.t[c][m][4 * n], 4);
            for (int k = 0; k < emu.cfg.colsb[a]; k++) acc += (int8_t)emu.t[a][m][k] * emu.t[b][k / 4][4 * n + k % 4];
            memcpy(&emu.t[c][m][4 * n], &acc, 4);
        }
}
#define TILE_CONFIG(c) tile_config(c)
#define TILE_LOAD(i, base, stride) tile_load(i, base, stride)
#define TILE_ZERO(i) tile_zero(i)
#define TILE_STORE(i, base, stride) tile_store(i, base, stride)
#define TILE_DPBSUD(c, a, b) tile_dpbsud(c, a, b)
#else
#define FN(name) name
/* one more level of macros, so that C1 .. B are expanded before the intrinsics stringify them */
#define TILE_CONFIG(c) _tile_loadconfig(c)
#define TILE_LOAD(i, base, stride) TILE_LOAD_(i, base, stride)
#define TILE_LOAD_(i, base, stride) _tile_loadd(i, base, stride)
#define TILE_ZERO(i) TILE_ZERO_(i)
#define TILE_ZERO_(i) _tile_zero(i)
#define TILE_STORE(i, base, stride) TILE_STORE_(i, base, stride)
#define TILE_STORE_(i, base, stride) _tile_stored(i, base, stride)
#define TILE_DPBSUD(c, a, b) TILE_DPBSUD_(c, a, b)
#define TILE_DPBSUD_(c, a, b) _tile_dpbsud(c, a, b)
#endif

/* Tiles for m tokens (1..16). */
static void configure(int m) {
    tilecfg cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.palette = 1;
    cfg.rows[C1] = cfg.rows[C2] = (uint8_t)m, cfg.colsb[C1] = cfg.colsb[C2] = 64;
    cfg.rows[A1] = cfg.rows[A2] = (uint8_t)m, cfg.colsb[A1] = cfg.colsb[A2] = TD_QBLOCK;
    cfg.rows[B] = TD_QBLOCK / 4, cfg.colsb[B] = 64;
    TILE_CONFIG(&cfg);
}

/* Tokens [t0, t0 + m) times slab s, stored for the rows in lanes `mask`. */
static inline __attribute__((always_inline)) void slab_tile(td_dtype type, const td_qpack *p, const uint8_t *slab,
                                                            const td_qrows *xq, int64_t t0, int m, float *y,
                                                            int64_t ldy, __mmask16 mask) {
    const int two = type == TD_DTYPE_Q8_0, o = type == TD_DTYPE_Q8_0 ? 128 : 8;
    const int64_t nb = p->nbg, rs = xq->nbg * TD_X16_GROUP, ss = xq->nbg * TD_X16_LANES;
    const size_t gb = p->group_bytes;
    const uint16_t *ws = (const uint16_t *)(const void *)(slab + nb * gb);
    const __m512i low4 = _mm512_set1_epi8(15);
    _Alignas(64) int32_t c1[16][16], c2[16][16];
    _Alignas(64) uint8_t wide[TD_QBLOCK / 4][64]; /* a Q4_0 block as bytes */
    __m512 acc[16];
    for (int t = 0; t < 16; t++) acc[t] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *wb = slab + b * gb;
        if (type == TD_DTYPE_Q4_0) {
            for (int k = 0; k < TD_QBLOCK / 8; k++) {
                __m512i raw = _mm512_loadu_si512(wb + k * 64);
                _mm512_store_si512(wide[k], _mm512_and_si512(raw, low4));
                _mm512_store_si512(wide[k + TD_QBLOCK / 8], _mm512_and_si512(_mm512_srli_epi16(raw, 4), low4));
            }
            wb = wide[0];
        }
        TILE_LOAD(B, wb, 64);
        TILE_LOAD(A1, xq->qi + t0 * rs + b * TD_QBLOCK, (size_t)rs);
        TILE_ZERO(C1);
        TILE_DPBSUD(C1, A1, B);
        TILE_STORE(C1, c1, 64);
        if (two) {
            TILE_LOAD(A2, xq->qi2 + t0 * rs + b * TD_QBLOCK, (size_t)rs);
            TILE_ZERO(C2);
            TILE_DPBSUD(C2, A2, B);
            TILE_STORE(C2, c2, 64);
        }
        __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)(ws + b * TD_R16_ROWS)));
        for (int t = 0; t < m; t++) {
            const int64_t at = (t0 + t) * ss + b;
            __m512i i1 = _mm512_sub_epi32(_mm512_load_si512(c1[t]), _mm512_set1_epi32(xq->s[at] * o));
            acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(i1), _mm512_mul_ps(dw, _mm512_set1_ps(xq->d[at])), acc[t]);
            if (!two) continue;
            __m512i i2 = _mm512_sub_epi32(_mm512_load_si512(c2[t]), _mm512_set1_epi32(xq->s2[at] * o));
            acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(i2), _mm512_mul_ps(dw, _mm512_set1_ps(xq->d2[at])), acc[t]);
        }
    }
    for (int t = 0; t < m; t++) _mm512_mask_storeu_ps(y + (t0 + t) * ldy, mask, acc[t]);
}

static inline __mmask16 slab_mask(int64_t s, int64_t j0, int64_t j1) {
    int64_t lo = j0 > s * TD_R16_ROWS ? j0 - s * TD_R16_ROWS : 0;
    int64_t hi = j1 < (s + 1) * TD_R16_ROWS ? j1 - s * TD_R16_ROWS : TD_R16_ROWS;
    return (__mmask16)(((1u << hi) - 1u) & ~((1u << lo) - 1u));
}

static inline __attribute__((always_inline)) void matmul_typed(td_dtype type, const td_qpack *p, const td_qrows *xq,
                                                               int64_t T, float *y, int64_t ldy, int64_t j0,
                                                               int64_t j1) {
    int configured = 0;
    for (int64_t t0 = 0; t0 < T; t0 += 16) {
        int m = T - t0 < 16 ? (int)(T - t0) : 16;
        if (m != configured) configure(m), configured = m;
        for (int64_t s = j0 / TD_R16_ROWS; s * TD_R16_ROWS < j1; s++) {
            float *ys = y + s * TD_R16_ROWS;
            if (m == 16) slab_tile(type, p, td_qpack_slab(p, s), xq, t0, 16, ys, ldy, slab_mask(s, j0, j1));
            else slab_tile(type, p, td_qpack_slab(p, s), xq, t0, m, ys, ldy, slab_mask(s, j0, j1));
        }
    }
}

void FN(td_matmul_r16_amx)(const td_mat *w, const int32_t *rows, const void *xq, int64_t T, float *y, int64_t ldy,
                           int64_t j0, int64_t j1) {
    if (rows || T < AMX_MIN_T) td_matmul_r16_avx512(w, rows, xq, T, y, ldy, j0, j1);
    else if (w->type == TD_DTYPE_Q8_0) matmul_typed(TD_DTYPE_Q8_0, w->pack, xq, T, y, ldy, j0, j1);
    else matmul_typed(TD_DTYPE_Q4_0, w->pack, xq, T, y, ldy, j0, j1);
}

#ifndef TD_AMX_EMULATE
void td_matmul_amx(const td_mat *w, const int32_t *rows, const float *x, const void *xq, int64_t T, int64_t ldx,
                   float *y, int64_t ldy, int64_t j0, int64_t j1) {
    if (w->pack && w->pack->lanes == TD_R16_LANES) td_matmul_r16_amx(w, rows, xq, T, y, ldy, j0, j1);
    else td_matmul_avx512bf16(w, rows, x, xq, T, ldx, y, ldy, j0, j1);
}
#endif
