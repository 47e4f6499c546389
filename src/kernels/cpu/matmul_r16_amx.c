/* AMX matrix product over r16-packed Q8_0 / Q4_0 weights and r16 activations (the AMX kernel set's matmul slot,
 * td_matmul_amx): the same results, bit for bit, as td_matmul_r16_ref and td_matmul_r16_avx512.
 *
 * One tdpbsud multiplies a tile of up to 16 tokens' 32 activation bytes of block b (A: signed, staged together) by
 * the slab's block b (B: 8 rows of 64 bytes, as it lies in the pack: row k holds elements 4k..4k+3 of the 16 weight
 * rows, unsigned; Q4_0 widened to bytes in L1) into C [tokens][16 rows] of exact block sums: one block per
 * instruction, because every block has its own scale. The last level's sums start from minus the offset sums (a
 * staged tile), so each token's two rows combine into 128 p1 + p2 - offsets with one shift and one add, and take the
 * r16 epilogue in AVX-512 (conversion, scale product, fma into that token's accumulator of 16 rows), in block order,
 * so that the float operations are the reference's. A slab's blocks run in a three-stage pipeline (slab_blocks).
 * Fewer than AMX_MIN_T tokens (decode), and lists of rows, take td_matmul_r16_avx512.
 *
 * Measured (NOTES, issue 16; bench/amx_probe.sh times this file and variants of it on one core of the AMX host):
 * the epilogue's time adds to the tile work's, however the two are interleaved; per block of 32 rows x 16 tokens
 * about 75 ns of tile work (of which ~20 the stores of the sums) and ~40 of epilogue; one activation level instead of
 * two would take 40% off (the fidelity kept for Q8_0 weights costs that). Slower variants: B copied to L1 first, the
 * offsets subtracted in the epilogue, both slabs' accumulators in memory, two slabs sharing the activation tiles
 * with the epilogue right after (or a block behind) their products (4-10% slower than one slab in a pipeline). The
 * first token tile of a group of slabs reads the weights from memory (the others from L2), so for Q8_0 it
 * prefetches a slab ahead.
 *
 * Linux gives a process the AMX tile registers only when asked (arch_prctl ARCH_REQ_XCOMP_PERM): dispatch.c asks
 * before it offers the set. Compiled with -DTD_AMX_EMULATE (tests/test_kernels.c), the tile instructions are C loops
 * with the instructions' semantics and the function is td_matmul_r16_amx_emulated, so that the tiling and the
 * epilogue are checked on a CPU without AMX. */
#include <immintrin.h>
#include <string.h>

#include "kernels/cpu/avx512_math.h"
#include "kernels/cpu/kernels.h"
#include "kernels/cpu/quant.h"

#ifndef AMX_MIN_T
#define AMX_MIN_T 8 /* fewer tokens than this take the AVX-512 VNNI path */
#endif
/* Tile registers (macros: the intrinsics want the literal number): activations (two levels), the slab's weights,
 * and two sets of sums (per level), one for even blocks and one for odd. */
#define A1 0
#define A2 1
#define B0 2
#define C1A 4 /* level 1, even blocks */
#define C2A 5 /* level 2, even blocks */
#define C1B 6 /* odd blocks */
#define C2B 7

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
    for (int c = C1A; c <= C2B; c++) cfg.rows[c] = (uint8_t)m, cfg.colsb[c] = 64;
    cfg.rows[A1] = cfg.rows[A2] = (uint8_t)m, cfg.colsb[A1] = cfg.colsb[A2] = TD_QBLOCK;
    cfg.rows[B0] = TD_QBLOCK / 4, cfg.colsb[B0] = 64;
    TILE_CONFIG(&cfg);
}

#define KC 16  /* blocks staged at a time */
#define NS 16  /* slabs (of 16 rows) whose accumulators are kept at a time */

/* The activations of tokens [t0, t0 + m), blocks [c0, c0 + kc), staged for the tiles: block b's m rows of 32 bytes
 * together (in the r16 layout a tile's rows lie nbg * 512 bytes apart, which maps them onto a few L1 sets), level 2
 * likewise, and per block and token minus the offset sums' share (td_matmul_r16_ref), 16 times over (a row of the
 * tile the last level's sums start from), and the scale d. */
typedef struct stage {
    _Alignas(64) int8_t a1[KC][16][TD_QBLOCK], a2[KC][16][TD_QBLOCK];
    _Alignas(64) int32_t noff[KC][16][16];
    float d[KC][16];
} stage;

static void stage_tokens(stage *st, const td_qrows *xq, int two, int32_t o, int64_t t0, int m, int64_t c0, int kc) {
    const int64_t rs = xq->nbg * TD_X16_GROUP, ss = xq->nbg * TD_X16_LANES;
    for (int t = 0; t < m; t++) {
        const int8_t *x1 = xq->qi + (t0 + t) * rs + c0 * TD_QBLOCK, *x2 = xq->qi2 + (t0 + t) * rs + c0 * TD_QBLOCK;
        const int64_t at = (t0 + t) * ss + c0;
        for (int b = 0; b < kc; b++) {
            const __m256i *v1 = (const __m256i *)(const void *)(x1 + b * TD_QBLOCK);
            const __m256i *v2 = (const __m256i *)(const void *)(x2 + b * TD_QBLOCK);
            _mm256_store_si256((__m256i *)(void *)st->a1[b][t], _mm256_loadu_si256(v1));
            if (two) _mm256_store_si256((__m256i *)(void *)st->a2[b][t], _mm256_loadu_si256(v2));
            const uint32_t off = (uint32_t)td_r16_offset(xq, at + b, o); /* negated as the lanes wrap */
            _mm512_store_si512(st->noff[b][t], _mm512_set1_epi32((int32_t)(0u - off)));
            st->d[b][t] = td_r16_scale(xq, at + b);
        }
    }
}

/* A Q4_0 slab block's B tile, widened to bytes: chunk k (< 4) from the low nibbles, chunk k + 4 from the high. */
static inline __attribute__((always_inline)) void q4_tile(const uint8_t *wb, uint8_t wide[TD_QBLOCK / 4][64]) {
    const __m512i low4 = _mm512_set1_epi8(15);
    for (int k = 0; k < TD_QBLOCK / 8; k++) {
        __m512i raw = _mm512_loadu_si512(wb + k * 64);
        _mm512_store_si512(wide[k], _mm512_and_si512(raw, low4));
        _mm512_store_si512(wide[k + TD_QBLOCK / 8], _mm512_and_si512(_mm512_srli_epi16(raw, 4), low4));
    }
}

/* Blocks [c0, c0 + kc) of one slab for the staged tokens (M of them), into acc[token], in three stages a block apart:
 * block b's products into the sums of its parity, block b - 1's sums stored, block b - 2's epilogue. Each set of
 * sums is free again a whole block before it is reused, and the epilogue reads sums stored a block earlier. The
 * slab's 16 accumulators stay in registers. next (or NULL): the bytes the next slab will take, asked for a block at a
 * time while this one computes. */
static inline __attribute__((always_inline)) void slab_blocks(td_dtype type, const td_qpack *p, const uint8_t *slab,
                                                              const stage *st, int64_t c0, int kc, int M,
                                                              float (*acc)[16], const uint8_t *next) {
    const int two = type == TD_DTYPE_Q8_0;
    const size_t gb = p->group_bytes;
    const uint16_t *ws = td_qpack_scales(p, slab);
    _Alignas(64) int32_t c1[2][16][16], c2[2][16][16];
    _Alignas(64) uint8_t wide[TD_QBLOCK / 4][64];
    __m512 a[16];
    for (int t = 0; t < M; t++) a[t] = _mm512_load_ps(acc[t]);
#define START(c, last) \
    do { \
        if (last) TILE_LOAD(c, st->noff[b], 64); \
        else TILE_ZERO(c); \
    } while (0)
#define PRODUCTS(cl1, cl2) \
    do { \
        START(cl1, !two); \
        TILE_DPBSUD(cl1, A1, B0); \
        if (two) { \
            START(cl2, 1); \
            TILE_DPBSUD(cl2, A2, B0); \
        } \
    } while (0)
#define SUMS(cl1, cl2, q) \
    do { \
        TILE_STORE(cl1, c1[q], 64); \
        if (two) TILE_STORE(cl2, c2[q], 64); \
    } while (0)
    for (int b = 0; b < kc + 2; b++) {
        if (b < kc) { /* block b's products */
            const uint8_t *bt = wide[0];
            if (next)
                for (size_t l = 0; l < gb; l += 64) _mm_prefetch((const char *)next + b * gb + l, _MM_HINT_T0);
            if (type == TD_DTYPE_Q8_0) bt = slab + (c0 + b) * gb;
            else q4_tile(slab + (c0 + b) * gb, wide);
            TILE_LOAD(A1, st->a1[b], TD_QBLOCK);
            if (two) TILE_LOAD(A2, st->a2[b], TD_QBLOCK);
            TILE_LOAD(B0, bt, 64);
            if (b & 1) PRODUCTS(C1B, C2B);
            else PRODUCTS(C1A, C2A);
        }
        if (b >= 1 && b <= kc) { /* block b - 1's sums out */
            if ((b - 1) & 1) SUMS(C1B, C2B, 1);
            else SUMS(C1A, C2A, 0);
        }
        if (b < 2) continue;
        const int e = b - 2, q = e & 1; /* block b - 2's epilogue */
        const __m256i dh = _mm256_loadu_si256((const __m256i *)(const void *)(ws + (c0 + e) * TD_R16_ROWS));
        const __m512 dw = _mm512_cvtph_ps(dh);
        for (int t = 0; t < M; t++) {
            __m512i P = _mm512_load_si512(c1[q][t]);
            if (two) P = _mm512_add_epi32(_mm512_slli_epi32(P, TD_R16_SHIFT), _mm512_load_si512(c2[q][t]));
            a[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(P), _mm512_mul_ps(dw, _mm512_set1_ps(st->d[e][t])), a[t]);
        }
    }
    for (int t = 0; t < M; t++) _mm512_store_ps(acc[t], a[t]);
#undef START
#undef PRODUCTS
#undef SUMS
}

/* Slabs in groups of NS (their accumulators kept between staged chunks), tokens in tiles of 16, blocks in chunks of
 * KC staged once for the group's slabs, taken a slab at a time: each (row, token) still adds its blocks in order. */
static inline __attribute__((always_inline)) void matmul_typed(td_dtype type, const td_qpack *p, const td_qrows *xq,
                                                               int64_t T, float *y, int64_t ldy, int64_t j0,
                                                               int64_t j1) {
    const int two = type == TD_DTYPE_Q8_0;
    const int32_t o = two ? 128 : 8;
    stage st;
    _Alignas(64) float accm[NS][16][16];
    int configured = 0;
    for (int64_t s0 = j0 / TD_R16_ROWS; s0 * TD_R16_ROWS < j1; s0 += NS) {
        int64_t s1 = (j1 + TD_R16_ROWS - 1) / TD_R16_ROWS;
        int ns = s1 - s0 < NS ? (int)(s1 - s0) : NS;
        for (int64_t t0 = 0; t0 < T; t0 += 16) {
            int m = T - t0 < 16 ? (int)(T - t0) : 16;
            if (m != configured) configure(m), configured = m;
            memset(accm, 0, sizeof accm);
            for (int64_t c0 = 0; c0 < p->nbg; c0 += KC) {
                int kc = p->nbg - c0 < KC ? (int)(p->nbg - c0) : KC;
                stage_tokens(&st, xq, two, o, t0, m, c0, kc);
                for (int i = 0; i < ns; i++) {
                    /* The first token tile reads the weights from memory: Q8_0's asks for the next slab's blocks of
                     * this chunk (after the last slab, the first slab's next chunk) a slab ahead (measured: a shorter
                     * Q8_0 criterion; Q4_0's widening loads did better without). */
                    const uint8_t *next = NULL;
                    const size_t gb = p->group_bytes;
                    if (t0 == 0 && two && i + 1 < ns) next = td_qpack_slab(p, s0 + i + 1) + c0 * gb;
                    else if (t0 == 0 && two && c0 + KC < p->nbg) next = td_qpack_slab(p, s0) + (c0 + KC) * gb;
                    if (m == 16) slab_blocks(type, p, td_qpack_slab(p, s0 + i), &st, c0, kc, 16, accm[i], next);
                    else slab_blocks(type, p, td_qpack_slab(p, s0 + i), &st, c0, kc, m, accm[i], next);
                }
            }
            for (int i = 0; i < ns; i++)
                for (int t = 0; t < m; t++)
                    _mm512_mask_storeu_ps(y + (t0 + t) * ldy + (s0 + i) * TD_R16_ROWS, td_r16_mask(s0 + i, j0, j1),
                                          _mm512_load_ps(accm[i][t]));
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
