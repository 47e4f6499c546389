/* AVX-512 VNNI matrix product over r16-packed Q8_0 / Q4_0 weights (quant.h: 16 weight rows in the 16 lanes) and r16
 * activations; td_matmul_r16_ref is its scalar reference and the two agree to the bit. It is the AMX set's path for
 * a few tokens (decode) and its twin set's (avx512r16) whole product; td_matmul_avx512r16 is that set's matmul slot.
 *
 * A 64-byte chunk of a slab's block holds 4 consecutive elements of each of the 16 rows, so vpdpbusd with the
 * token's 4 activation bytes broadcast leaves, after a block's 8 chunks, each row's exact block sum in its lane
 * (offset by o * sum(x), which is subtracted after); the two levels combine into 128 p1 + p2, and one conversion,
 * one scale product and one fma per block then serve 16 rows. The rows of a slab lie together, so decode streams
 * slabs front to back and asks for the bytes PREFETCH_BYTES ahead; up to 4 tokens share each weight load (a batch
 * reads each slab once per 4 tokens: this path is for a few tokens, AMX tiles take the rest). Lists of rows (the
 * head's letters: a few rows) go to the reference, which gives the same bits. */
#include <immintrin.h>
#include <string.h>

#include "kernels/cpu/avx512_math.h"
#include "kernels/cpu/kernels.h"
#include "kernels/cpu/quant.h"

#ifndef PREFETCH_BYTES
#define PREFETCH_BYTES 8192 /* about the x16 path's 8 rows ahead at 1,024 columns */
#endif

static inline __m512i bcast4(const int8_t *x) {
    int32_t v;
    memcpy(&v, x, 4);
    return _mm512_set1_epi32(v);
}

/* One slab (16 rows) times tokens t0 .. t0 + NT - 1 (NT <= 4; each weight chunk is loaded once for all of them):
 * out[n] holds token t0 + n's 16 results in lane order. Every token's operations are those of NT = 1. */
static inline __attribute__((always_inline)) void slab_dots(td_dtype type, int NT, const td_qpack *p,
                                                            const uint8_t *slab, const td_qrows *xq, int64_t t0,
                                                            int ahead, __m512 *out) {
    const size_t gb = p->group_bytes;
    const int64_t nb = p->nbg;
    const uint16_t *ws = td_qpack_scales(p, slab);
    const int two = type == TD_DTYPE_Q8_0, o = type == TD_DTYPE_Q8_0 ? 128 : 8;
    const __m512i low4 = _mm512_set1_epi8(15);
    const int64_t rs = xq->nbg * TD_X16_GROUP, ss = xq->nbg * TD_X16_LANES;
    const int8_t *x1 = xq->qi + t0 * rs, *x2 = xq->qi2 + t0 * rs;
    __m512 acc[4];
    for (int n = 0; n < NT; n++) acc[n] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *wb = slab + b * gb;
        const int64_t xo = b * TD_QBLOCK;
        if (ahead)
            for (size_t l = 0; l < gb; l += 64) _mm_prefetch((const char *)wb + PREFETCH_BYTES + l, _MM_HINT_T0);
        __m512i a1[4], b1[4], a2[4], b2[4];
        for (int n = 0; n < NT; n++)
            a1[n] = b1[n] = a2[n] = b2[n] = _mm512_setzero_si512();
        if (type == TD_DTYPE_Q8_0) {
            _Pragma("GCC unroll 4") for (int k = 0; k < TD_QBLOCK / 4; k += 2) {
                __m512i w0 = _mm512_loadu_si512(wb + k * TD_X16_CHUNK);
                __m512i w1 = _mm512_loadu_si512(wb + (k + 1) * TD_X16_CHUNK);
                for (int n = 0; n < NT; n++) {
                    const int8_t *xa = x1 + n * rs + xo + 4 * k, *xb = x2 + n * rs + xo + 4 * k;
                    a1[n] = _mm512_dpbusd_epi32(a1[n], w0, bcast4(xa));
                    b1[n] = _mm512_dpbusd_epi32(b1[n], w1, bcast4(xa + 4));
                    a2[n] = _mm512_dpbusd_epi32(a2[n], w0, bcast4(xb));
                    b2[n] = _mm512_dpbusd_epi32(b2[n], w1, bcast4(xb + 4));
                }
            }
        } else {
            _Pragma("GCC unroll 4") for (int k = 0; k < TD_QBLOCK / 8; k++) {
                __m512i raw = _mm512_loadu_si512(wb + k * TD_X16_CHUNK);
                __m512i lo = _mm512_and_si512(raw, low4), hi = _mm512_and_si512(_mm512_srli_epi16(raw, 4), low4);
                for (int n = 0; n < NT; n++) {
                    const int8_t *xa = x1 + n * rs + xo;
                    a1[n] = _mm512_dpbusd_epi32(a1[n], lo, bcast4(xa + 4 * k));
                    b1[n] = _mm512_dpbusd_epi32(b1[n], hi, bcast4(xa + TD_QBLOCK / 2 + 4 * k));
                }
            }
        }
        __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)(ws + b * TD_R16_ROWS)));
        for (int n = 0; n < NT; n++) {
            __m512i P = _mm512_add_epi32(a1[n], b1[n]);
            if (two) P = _mm512_add_epi32(_mm512_slli_epi32(P, TD_R16_SHIFT), _mm512_add_epi32(a2[n], b2[n]));
            const int64_t at = (t0 + n) * ss + b;
            P = _mm512_sub_epi32(P, _mm512_set1_epi32(td_r16_offset(xq, at, o)));
            __m512 scale = _mm512_mul_ps(dw, _mm512_set1_ps(td_r16_scale(xq, at)));
            acc[n] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(P), scale, acc[n]);
        }
    }
    for (int n = 0; n < NT; n++) out[n] = acc[n];
}

/* Each slab once per 4 tokens (then 2, then 1): decode streams it, a few tokens share its loads. */
static inline __attribute__((always_inline)) void matmul_typed(td_dtype type, const td_qpack *p, const td_qrows *xq,
                                                               int64_t T, float *y, int64_t ldy, int64_t j0,
                                                               int64_t j1) {
    for (int64_t s = j0 / TD_R16_ROWS; s * TD_R16_ROWS < j1; s++) {
        const uint8_t *slab = td_qpack_slab(p, s);
        __mmask16 m = td_r16_mask(s, j0, j1);
        float *ys = y + s * TD_R16_ROWS;
        __m512 v[4];
        int64_t t = 0;
        for (; t + 4 <= T; t += 4) {
            slab_dots(type, 4, p, slab, xq, t, t == 0, v);
            for (int n = 0; n < 4; n++) _mm512_mask_storeu_ps(ys + (t + n) * ldy, m, v[n]);
        }
        for (; t + 2 <= T; t += 2) {
            slab_dots(type, 2, p, slab, xq, t, t == 0, v);
            for (int n = 0; n < 2; n++) _mm512_mask_storeu_ps(ys + (t + n) * ldy, m, v[n]);
        }
        if (t < T) {
            slab_dots(type, 1, p, slab, xq, t, t == 0, v);
            _mm512_mask_storeu_ps(ys + t * ldy, m, v[0]);
        }
    }
}

void td_matmul_r16_avx512(const td_mat *w, const int32_t *rows, const void *xq, int64_t T, float *y, int64_t ldy,
                          int64_t j0, int64_t j1) {
    if (rows) td_matmul_r16_ref(w, rows, xq, T, y, ldy, j0, j1);
    else if (w->type == TD_DTYPE_Q8_0) matmul_typed(TD_DTYPE_Q8_0, w->pack, xq, T, y, ldy, j0, j1);
    else matmul_typed(TD_DTYPE_Q4_0, w->pack, xq, T, y, ldy, j0, j1);
}

void td_matmul_avx512r16(const td_mat *w, const int32_t *rows, const float *x, const void *xq, int64_t T, int64_t ldx,
                         float *y, int64_t ldy, int64_t j0, int64_t j1) {
    if (w->pack && w->pack->lanes == TD_R16_LANES) td_matmul_r16_avx512(w, rows, xq, T, y, ldy, j0, j1);
    else td_matmul_avx512bf16(w, rows, x, xq, T, ldx, y, ldy, j0, j1);
}
