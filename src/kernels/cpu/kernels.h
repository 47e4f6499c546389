/* CPU kernels. Every kernel has a scalar reference (*_ref, always compiled) and, where it matters for speed, an
 * AVX2/FMA/F16C (*_avx2) or AVX-512 (*_avx512: VNNI, and BF16 for the BF16 kernel) version chosen at run time
 * through td_kernels. Kernels know nothing about models.
 *
 * Files come in pairs, foo_ref.c beside foo_avx2.c (or foo_avx512.c), each holding one kernel:
 *   matmul_ref.c / matmul_avx2.c            products over F32 / F16 / BF16 weights (and the scalar and AVX2
 *                                           sets' matmul slots, which route the other weight types)
 *   matmul_quant_ref.c / matmul_quant_avx2.c  unpacked Q8_0 / Q4_0 weights x plain Q8_0 activations
 *   matmul_x8_ref.c / matmul_x8_avx2.c      packed x8 weights x int16 (Q8_0) or int8 (Q4_0) activations
 *                                           (bit-identical pair)
 *   matmul_x16_ref.c / matmul_x16_avx512.c  packed x16 weights x int8 activations (bit-identical pair; and the
 *                                           AVX-512 VNNI set's matmul slot)
 *   matmul_bf16_ref.c / matmul_bf16_avx512.c  BF16 weights x bf16 activations, vdpbf16ps (bit-identical pair; and
 *                                           the AVX-512 BF16 set's matmul slot)
 *   matmul_r16_ref.c / matmul_r16_avx512.c / matmul_r16_amx.c  packed r16 weights (16 rows in the lanes) x r16
 *                                           activations, on AVX-512 VNNI and on AMX tiles (bit-identical triple;
 *                                           and the avx512r16 and amx sets' matmul slots)
 *   quant_ref.c / quant_avx2.c              the activation quantiser (td_quantize_rows_*; bit-identical pair)
 *   attn_ref.c / attn_avx2.c / attn_avx512.c  attention of the query rows of one KV group (td_attn_rows_*; the
 *                                           SIMD two walk their tiles by attn_tiles.h)
 *   deltanet_ref.c / deltanet_avx2.c        the Gated DeltaNet step (and, scalar only, the chunked form)
 *   norm_ref.c / norm_avx2.c                RMSNorm
 *   silu_mul_ref.c / silu_mul_avx2.c        the SwiGLU gate
 * and, without a SIMD twin: ops_ref.c (rope, softmax, l2norm, gated RMSNorm, sigmoid gate, conv step, softplus,
 * add), quant_formats.c (Q8_0 / Q4_0 blocks), quant_pack.c (packed layouts), dispatch.c (the sets and the
 * default choice), threadpool.c; avx2_math.h / avx512_math.h hold small shared helpers.
 * tests/test_kernels.c runs every slot of td_kernels, in every kernel set the CPU runs, against the scalar set and
 * states per slot whether the pair is bit-identical or within which tolerance, and why.
 *
 * Determinism contract (the engine's exactness rests on it): for a given kernel choice, each output element is
 * computed by one fixed sequence of floating-point operations that depends only on that element's own inputs —
 * never on how many rows or tokens are processed together, how work is tiled, or which thread runs it. */
#ifndef TD_KERNELS_CPU_KERNELS_H
#define TD_KERNELS_CPU_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "typedecide.h"
#include "util/dtype.h"

struct td_qpack;

/* A weight matrix [rows, cols], row-major, rows `row_bytes` apart. Q8_0 / Q4_0 matrices may carry a packed copy
 * (quant.h) that the matrix products use instead when the kernels support it; `data` stays the original. */
typedef struct td_mat {
    td_dtype type;
    int64_t rows, cols;
    size_t row_bytes;
    const void *data;
    const struct td_qpack *pack;
} td_mat;

static inline const void *td_mat_row(const td_mat *w, int64_t r) {
    return (const char *)w->data + (size_t)r * w->row_bytes;
}

/* Asks for a weight row, every cache line of its `bytes`, into L1 (prefetcht0): the decode and small-batch products
 * stream rows from memory once each and ask for them PREFETCH_ROWS ahead. */
static inline void td_prefetch_row(const void *row, size_t bytes) {
    for (size_t off = 0; off < bytes; off += 64) __builtin_prefetch((const char *)row + off, 0, 3);
}

/* The same into L2 (prefetcht1): the decode paths (x16, BF16, x8) ask for rows this way, further ahead (measured on
 * an AMD EPYC Zen 4: Q8_0 decode 37-41 -> 42-58 tokens/s at 2 threads, every round, and the AVX2 set there 27-34 ->
 * 38-43; on the Intel Xeon with AMX L1 and L2 within the noise, NOTES). */
static inline void td_prefetch_row_l2(const void *row, size_t bytes) {
    for (size_t off = 0; off < bytes; off += 64) __builtin_prefetch((const char *)row + off, 0, 2);
}

/* Y[t, j] = dot(X[t, :cols], W[row(j), :]) for t in [0, T), j in [j0, j1), where row(j) = rows ? rows[j] : j.
 * X has leading dimension ldx floats, Y has ldy. For Q8_0 / Q4_0 weights the activations come quantised:
 * xq points at a td_qrows (quant.h) holding T rows of cols / 32 Q8_0 blocks, and x is not read; each block
 * contributes (d_w * d_x) * (exact integer dot product). With w->pack, xq is in the layout of the pack's lanes
 * (td_qrows_layout) and the sum runs over 16 or 8 lanes, lane l adding fma((float)p_b, d_w * d_x, .) for its
 * blocks b = lanes * g + l in order of g (x16: level 1 then level 2); the lanes are then added as a tree (x16:
 * l + 8, then + 4, + 2, + 1; x8: l + 4, + 2, + 1): td_matmul_x16_ref and td_matmul_x8_ref spell it out. */
typedef void (*td_matmul_fn)(const td_mat *w, const int32_t *rows, const float *x, const void *xq, int64_t T,
                             int64_t ldx, float *y, int64_t ldy, int64_t j0, int64_t j1);

void td_matmul_ref(const td_mat *w, const int32_t *rows, const float *x, const void *xq, int64_t T, int64_t ldx,
                   float *y, int64_t ldy, int64_t j0, int64_t j1);
void td_matmul_avx2(const td_mat *w, const int32_t *rows, const float *x, const void *xq, int64_t T, int64_t ldx,
                    float *y, int64_t ldy, int64_t j0, int64_t j1);
/* The quantised half of td_matmul_ref / td_matmul_avx2: unpacked Q8_0 and Q4_0 weights, plain activations. */
void td_matmul_quant_ref(const td_mat *w, const int32_t *rows, const void *xq, int64_t T, float *y, int64_t ldy,
                         int64_t j0, int64_t j1);
void td_matmul_quant_avx2(const td_mat *w, const int32_t *rows, const void *xq, int64_t T, float *y, int64_t ldy,
                          int64_t j0, int64_t j1);
/* Packed weights (w->pack) and x16 activations: the scalar reference, and the AVX-512 VNNI version, which gives
 * bit-identical results (integer block sums are exact; the float operations are the same, in the same order). */
void td_matmul_x16_ref(const td_mat *w, const int32_t *rows, const void *xq, int64_t T, float *y, int64_t ldy,
                       int64_t j0, int64_t j1);
void td_matmul_x16_avx512(const td_mat *w, const int32_t *rows, const void *xq, int64_t T, float *y, int64_t ldy,
                          int64_t j0, int64_t j1);
/* r16-packed weights (16 rows in the lanes) and r16 activations: the scalar reference, the AVX-512 VNNI version and
 * the AMX version (tdpbsud tiles for 8 tokens or more, the VNNI version below that), all bit-identical. */
void td_matmul_r16_ref(const td_mat *w, const int32_t *rows, const void *xq, int64_t T, float *y, int64_t ldy,
                       int64_t j0, int64_t j1);
void td_matmul_r16_avx512(const td_mat *w, const int32_t *rows, const void *xq, int64_t T, float *y, int64_t ldy,
                          int64_t j0, int64_t j1);
void td_matmul_r16_amx(const td_mat *w, const int32_t *rows, const void *xq, int64_t T, float *y, int64_t ldy,
                       int64_t j0, int64_t j1);
/* Packed x8 weights and x8 activations (quant.h): the scalar reference, and the AVX2 version, which gives
 * bit-identical results (td_matmul_x8_ref spells out the arithmetic). */
void td_matmul_x8_ref(const td_mat *w, const int32_t *rows, const void *xq, int64_t T, float *y, int64_t ldy,
                      int64_t j0, int64_t j1);
void td_matmul_x8_avx2(const td_mat *w, const int32_t *rows, const void *xq, int64_t T, float *y, int64_t ldy,
                       int64_t j0, int64_t j1);
/* BF16 weights (as stored) and bf16 activations (td_qrows' bf16 layout): the scalar reference, which spells out
 * vdpbf16ps' arithmetic, and the AVX-512 BF16 version, which gives bit-identical results for finite inputs. */
void td_matmul_bf16_ref(const td_mat *w, const int32_t *rows, const void *xq, int64_t T, float *y, int64_t ldy,
                        int64_t j0, int64_t j1);
void td_matmul_bf16_avx512(const td_mat *w, const int32_t *rows, const void *xq, int64_t T, float *y, int64_t ldy,
                           int64_t j0, int64_t j1);
/* All of td_matmul_avx2, with packed weights on AVX-512 VNNI; and all of that with BF16 weights on AVX-512 BF16
 * when the activations come as bf16. */
void td_matmul_avx512(const td_mat *w, const int32_t *rows, const float *x, const void *xq, int64_t T, int64_t ldx,
                      float *y, int64_t ldy, int64_t j0, int64_t j1);
void td_matmul_avx512bf16(const td_mat *w, const int32_t *rows, const float *x, const void *xq, int64_t T,
                          int64_t ldx, float *y, int64_t ldy, int64_t j0, int64_t j1);
/* All of td_matmul_avx512bf16, with r16-packed weights on AVX-512 VNNI (the avx512r16 set) or on AMX tiles (amx). */
void td_matmul_avx512r16(const td_mat *w, const int32_t *rows, const float *x, const void *xq, int64_t T, int64_t ldx,
                         float *y, int64_t ldy, int64_t j0, int64_t j1);
void td_matmul_amx(const td_mat *w, const int32_t *rows, const float *x, const void *xq, int64_t T, int64_t ldx,
                   float *y, int64_t ldy, int64_t j0, int64_t j1);

/* Where an attention task's keys and values come from: key i is cell idx[i] of a cache (float, or f16 when kv_f16;
 * rows `stride` elements apart, this head's dim values at the start of each row), except that the first n_pre keys
 * may already be gathered as contiguous fp32 rows (pre_k, pre_v: [n_pre, dim]), the same values once for every
 * task of a pass whose sequences share them (a batch of criteria over one evidence). */
typedef struct td_attn_keys {
    const void *k, *v;
    int kv_f16;
    const int32_t *idx;
    int64_t stride;
    const float *pre_k, *pre_v;
    int64_t n_pre;
} td_attn_keys;

/* Attention of R query rows that share their keys (the heads of one KV group, for consecutive tokens of one
 * sequence): row r attends to the first n[r] keys (fewer than keys->n_pre or more),
 *     s_i = dot(q_r, k_i) * scale, p = softmax(s), out_r = sum_i p_i v_i   (i in key order),
 * with each key and value row read (and converted from f16 when kv_f16) once for all R rows. Each row's result is
 * the same whichever rows share the call and whether or not its first keys came gathered. scratch holds
 * td_attn_rows_scratch(R, max(n), dim, kv_f16) floats. */
int64_t td_attn_rows_scratch(int64_t R, int64_t max_n, int64_t dim, int kv_f16);
typedef void (*td_attn_rows_fn)(const float *const *q, float *const *out, const int64_t *n, int64_t R,
                                const td_attn_keys *keys, int64_t dim, float scale, float *scratch);
void td_attn_rows_ref(const float *const *q, float *const *out, const int64_t *n, int64_t R, const td_attn_keys *keys,
                      int64_t dim, float scale, float *scratch);
void td_attn_rows_avx2(const float *const *q, float *const *out, const int64_t *n, int64_t R,
                       const td_attn_keys *keys, int64_t dim, float scale, float *scratch);
void td_attn_rows_avx512(const float *const *q, float *const *out, const int64_t *n, int64_t R,
                         const td_attn_keys *keys, int64_t dim, float scale, float *scratch);
/* The SIMD versions' first step: row pointers kp, vp [max_n] (in scratch, after R * max_n scores) to every key and
 * value row as fp32: the gathered prefix as given, the cache's rows in place or (f16, or more than two query rows)
 * copied together. */
void td_attn_gather_avx2(const td_attn_keys *keys, int64_t R, int64_t max_n, int64_t dim, float *scratch,
                         const float ***kp, const float ***vp);

/* Gated DeltaNet, one head. S is the [dk, dv] state (row i = key dim i), fp32, dv <= TD_DELTANET_MAX_DV. q, k are
 * already l2-normalised (q also scaled by 1/sqrt(dk)); g is the log decay (<= 0), beta the write strength.
 * Recurrent form, one token: S = exp(g) S;  m = S^T k;  S += k (beta (v - m))^T;  o = S^T q. */
#define TD_DELTANET_MAX_DV 1024 /* the step keeps a [dv] vector on the stack; the model loader refuses more */
typedef void (*td_deltanet_step_fn)(float *S, const float *q, const float *k, const float *v, float g, float beta,
                                    int64_t dk, int64_t dv, float *o);
void td_deltanet_step_ref(float *S, const float *q, const float *k, const float *v, float g, float beta, int64_t dk,
                          int64_t dv, float *o);
void td_deltanet_step_avx2(float *S, const float *q, const float *k, const float *v, float g, float beta,
                           int64_t dk, int64_t dv, float *o);

/* Chunked form over n <= TD_DELTANET_CHUNK consecutive tokens (rows of q, k: [n, dk]; v, o: [n, dv]; g, beta:
 * [n]): the same function as n recurrent steps, computed with a triangular solve inside the chunk and matrix
 * products against S (transformers' torch_chunk_gated_delta_rule). `work` holds td_deltanet_chunk_work(n, dk, dv)
 * floats. */
#define TD_DELTANET_CHUNK 64
int64_t td_deltanet_chunk_work(int64_t n, int64_t dk, int64_t dv);
void td_deltanet_chunk_ref(float *S, const float *q, const float *k, const float *v, const float *g,
                           const float *beta, int64_t n, int64_t dk, int64_t dv, float *o, float *work);

/* Row ops that run once per token and layer, with an AVX2 twin (the tolerances between them: test_kernels). */

/* y = x * rsqrt(mean(x^2) + eps) * (w or 1 + w when zero_centred), over n elements. */
void td_rmsnorm(float *y, const float *x, const float *w, int64_t n, float eps, int zero_centred);
void td_rmsnorm_avx2(float *y, const float *x, const float *w, int64_t n, float eps, int zero_centred);
/* g[i] = silu(g[i]) * u[i] */
void td_silu_mul(float *g, const float *u, int64_t n);
void td_silu_mul_avx2(float *g, const float *u, int64_t n);

/* Element-wise and row ops without a SIMD twin (a vanishing share of the work). */

/* NeoX half-split rotary embedding of the first `rot` dims of x (length >= rot) with the cosines and sines of one
 * position, cs = [cos(pos f_i) for i < rot/2 | sin(pos f_i)] (td_rope_table). Dims rot.. are untouched. */
void td_rope(float *x, int64_t rot, const float *cs);
/* The cosines and sines of position pos: angle = (float)pos * inv_freq[i] in fp32, then cos and sin in double
 * rounded to float. */
void td_rope_table(float *cs, int64_t rot, const float *inv_freq, int32_t pos);
/* inv_freq[i] = 1 / theta^(2i/rot), computed in fp32 the way transformers does. */
void td_rope_inv_freq(float *inv_freq, int64_t rot, double theta);
/* y[i] += x[i] */
void td_add(float *y, const float *x, int64_t n);
/* Converts one row of a weight to fp32 (matmul_ref.c: the values the reference product multiplies). */
void td_row_to_f32(float *y, const td_mat *w, int64_t row);
/* In-place softmax over n values; returns nothing. Max-subtracted, summed in index order. */
void td_softmax(float *x, int64_t n);
/* x *= rsqrt(sum(x^2) + eps) (the DeltaNet q/k normalisation). */
void td_l2norm(float *x, int64_t n, float eps);
/* y = w * (x * rsqrt(mean(x^2) + eps)) * silu(z): the DeltaNet gated output norm (plain w). */
void td_gated_rmsnorm(float *y, const float *x, const float *z, const float *w, int64_t n, float eps);
/* x[i] *= sigmoid(gate[i]) */
void td_sigmoid_gate(float *x, const float *gate, int64_t n);
/* Causal depthwise conv step with SiLU over `channels` (a contiguous range of them): for each channel c,
 * out[c] = silu(sum_j w[c*K + j] * window_j[c]) with window = the K-1 state rows (oldest first) then x; then the
 * state shifts by one row and takes x. state is [(K-1), ld] (row stride ld), processed for channels [c0, c1). */
void td_conv_step(float *out, float *state, const float *x, const float *w, int64_t K, int64_t ld, int64_t c0,
                  int64_t c1);
/* g[i] = gelu_tanh(g[i]) * u[i], PyTorch's gelu(approximate="tanh") in fp32 with its order of operations:
 * 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) (Gemma's MLP gate). One version for every kernel set. */
void td_gelu_tanh_mul(float *g, const float *u, int64_t n);
/* softplus with transformers' threshold: x > 20 -> x, else log1p(exp(x)). */
float td_softplus(float x);

/* The run-time choice between the scalar, AVX2, AVX-512 and AMX versions. */
typedef struct td_kernels {
    const char *name; /* "amx", "avx512r16", "avx512bf16", "avx512vnni", "avx2" or "scalar" */
    int pack;         /* Q8_0 / Q4_0 matrices are best packed (td_qpack) with this many lanes (TD_X8_LANES,
                         TD_X16_LANES, TD_R16_LANES), 0: not */
    int bf16;         /* 1: the set has bf16 products (BF16 weights x activations rounded to bf16, TD_QROWS_BF16),
                         used when a context asks for TD_PRECISION_BF16; 0: BF16 weights always take fp32 */
    td_matmul_fn matmul;
    td_attn_rows_fn attn_rows;
    td_deltanet_step_fn deltanet_step;
    void (*quantize_rows)(const float *x, int64_t ldx, const void *xq, int64_t r0, int64_t r1); /* xq: td_qrows */
    void (*rmsnorm)(float *y, const float *x, const float *w, int64_t n, float eps, int zero_centred);
    void (*silu_mul)(float *g, const float *u, int64_t n);
} td_kernels;

/* The layout (TD_QROWS_*, quant.h) in which a product of w takes its activations with kernels k, or -1 when it
 * takes them as fp32: quantised weights take the layout of their packing; BF16 weights take bf16 activations only
 * when bf16_acts (a context that asked for TD_PRECISION_BF16) and the set has bf16 products. One model's products
 * all follow one kernel set, chosen when it is loaded; the precision is the context's. */
int td_kernels_layout(const td_kernels *k, const td_mat *w, int bf16_acts);

/* The kernels a model loaded now takes: the set named by TD_KERNELS in the environment when this CPU runs it,
 * else the fastest set this CPU runs (dispatch.c states the measurements behind the choice). */
const td_kernels *td_kernels_best(void);
/* td_kernels_best() for a model being loaded, and whether TD_KERNELS was honoured: TD_ERR_INVALID_ARG when it names
 * no set, TD_ERR_UNSUPPORTED when this CPU cannot run the set it names (each message lists the sets it runs);
 * *out is the default set then. An empty TD_KERNELS is no choice. */
td_status td_kernels_choose(const td_kernels **out);
/* The kernel set of that name ("scalar", "avx2", "avx512vnni", "avx512bf16", "avx512r16", "amx"), or NULL when the
 * name is unknown or this CPU cannot run it. "scalar" is the reference every other set is tested against. */
const td_kernels *td_kernels_named(const char *name);
/* 1 if this CPU can run the AVX2 kernels; the AVX-512 VNNI ones. */
int td_cpu_has_avx2(void);
int td_cpu_has_avx512vnni(void);
int td_cpu_has_avx512bf16(void);
/* AMX-TILE and AMX-INT8 on top of AVX-512 BF16, with the tile registers granted to this process by the kernel. */
int td_cpu_has_amx(void);

#endif
