/* Scalar reference of the BF16 matrix product on AVX-512 BF16 (td_matmul_bf16_avx512): BF16 weights times bf16
 * activations (td_qrows' bf16 layout), with vdpbf16ps' arithmetic spelled out so that the two agree to the bit for
 * finite inputs.
 *
 * vdpbf16ps, lane l of 16: acc = add(add(acc, w[2l+1] x[2l+1]), w[2l] x[2l]), where the products are exact (two
 * 8-bit significands), each add rounds to nearest even, inputs below FLT_MIN (bf16 values and the accumulator)
 * count as zero and results below FLT_MIN are flushed to zero (DAZ / FTZ, whatever MXCSR says). Measured on the
 * Intel Xeon (Emerald Rapids) against these semantics: 48 M random lanes, normal, tiny and random bit patterns,
 * no difference. Infinities and NaN are not matched (vdpbf16ps gave +inf for inf - inf); the engine stops at the
 * first row that is not finite anyway.
 *
 * For weight row j and token t, lane l accumulates over the steps s in order (32 columns each: 2l and 2l + 1 of
 * the step, zero past the row's end); the result is the lanes added as a tree: a_i = acc_i + acc_{i+8}, then + 4,
 * + 2, + 1 (td_qpack_lanes_sum). */
#include <float.h>
#include <math.h>

#include "kernels/cpu/kernels.h"
#include "kernels/cpu/quant.h"
#include "util/half.h"

#define LANES 16
#define STEP (2 * LANES) /* columns a step: two per lane */

/* A bf16 input as vdpbf16ps reads it: below FLT_MIN is (signed) zero. */
static double bf16_in(uint16_t h) {
    return (h & 0x7f80u) == 0 ? ((h & 0x8000u) ? -0.0 : 0.0) : (double)td_bf16_to_f32(h);
}

/* round-to-nearest-even of a + p (p exact, a product of two bf16), then results below FLT_MIN flushed. The sum is
 * s + e exactly (Knuth's two-sum in double); converting s to float rounds correctly unless s sits exactly halfway
 * between two floats while e is not zero (a double rounding), where the side of e decides. */
static float add_rne_ftz(float a, double p) {
    double x = fabsf(a) < FLT_MIN ? (signbit(a) ? -0.0 : 0.0) : (double)a;
    double s = x + p, bb = s - x, e = (x - (s - bb)) + (p - bb);
    float r = (float)s;
    if (e != 0 && (double)r != s) {
        float other = nextafterf(r, s > (double)r ? INFINITY : -INFINITY); /* the float on s's other side */
        if ((double)r - s == s - (double)other) /* exactly halfway: the exact value lies on e's side */
            r = (e > 0) == ((double)r > s) ? r : other;
    }
    if (fabsf(r) < FLT_MIN) r = signbit(r) ? -0.0f : 0.0f; /* (float)s keeps the sign of a tiny or zero sum */
    return r;
}

static float dot_bf16(const uint16_t *w, int64_t cols, const td_qrows *xq, int64_t t) {
    float acc[LANES] = {0};
    const int64_t n = xq->nb * TD_QBLOCK;
    const uint16_t *x = xq->h + t * n;
    for (int64_t s = 0; s < n; s += STEP)
        for (int l = 0; l < LANES; l++)
            for (int odd = 1; odd >= 0; odd--) { /* column 2l + 1 first */
                int64_t k = s + 2 * l + odd;
                double wk = k < cols ? bf16_in(w[k]) : 0.0;
                acc[l] = add_rne_ftz(acc[l], wk * bf16_in(x[k]));
            }
    return td_qpack_lanes_sum(acc, LANES);
}

void td_matmul_bf16_ref(const td_mat *w, const int32_t *rows, const void *xq, int64_t T, float *y, int64_t ldy,
                        int64_t j0, int64_t j1) {
    for (int64_t j = j0; j < j1; j++) {
        const uint16_t *row = td_mat_row(w, rows ? rows[j] : j);
        for (int64_t t = 0; t < T; t++) y[t * ldy + j] = dot_bf16(row, w->cols, xq, t);
    }
}
