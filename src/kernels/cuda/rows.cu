/* Row operations: RMSNorm, rotary embedding, the KV store, Qwen3.5's sigmoid output gate, the SwiGLU gate, the
 * residual add with its finiteness check, the check alone, and the row gather. The residual + norm, the gate and q/k
 * preparation can read a product's result as its slices' partials (td_cu_parts) and add them themselves, in the
 * product's own order. The launches are at the end (tests/cuda/emu compiles the kernels alone).
 *
 * Shapes: RMSNorm and the residual + norm run one block of 256 threads per row, the check one per 4096 elements of
 * a row; everything else is element-wise over a grid-stride loop (one thread per element, any grid).
 * Batch invariance: the element-wise ops compute each element from its own inputs alone, the same expression as the
 * CPU reference (no contraction: --fmad=false). RMSNorm's sum of squares is in double, each thread folding
 * i = tid, tid + 256, ... ascending, then the fixed tree of td_dev_block_sum<256>: it depends on the row's n values
 * only. The fault word is lowered with an integer atomicMin, which is order-independent. */
#include "kernels/cuda/common.cuh"

#define ROW_NT 256
#define EW_NT 256

/* A product's result at (t, i) from its S partials, rows ld apart, T of them (td_dev_parts_sum). */
__device__ __forceinline__ float parts_sum(const float *p, int64_t S, int64_t ld, int64_t T, int64_t t, int64_t i) {
    return td_dev_parts_sum(p + t * ld + i, S, T * ld);
}

/* A norm's weight as it multiplies: 1 + w[i] for zero-centred norms (Qwen3.5), else w[i]. */
__device__ __forceinline__ float norm_weight(const float *__restrict__ w, int64_t i, int zero_centred) {
    return zero_centred ? 1.0f + w[i] : w[i];
}

/* A norm's weight w'[i] (norm_weight) at this thread's first NORM_WREG elements,
 * i = tid + ROW_NT u: read before td_pdl_wait (no pass writes a weight), so that the norm's tail does not wait on
 * memory after its sum. Elements past n are 0 (never used). */
#define NORM_WREG 8
struct norm_w {
    float v[NORM_WREG];
};
__device__ __forceinline__ norm_w norm_w_load(const float *__restrict__ w, int64_t n, int zero_centred) {
    norm_w r;
#pragma unroll
    for (int u = 0; u < NORM_WREG; u++) {
        const int64_t i = threadIdx.x + (int64_t)u * ROW_NT;
        r.v[u] = i < n ? norm_weight(w, i, zero_centred) : 0.0f;
    }
    return r;
}

/* y as a product's activations in bf16 (yb not NULL): tc_x_bf16's rounding (td_pack_bf16), so the same bits. */
__device__ __forceinline__ void norm_put(float *y, uint16_t *yb, int64_t i, float v) {
    y[i] = v;
    if (yb) yb[i] = (uint16_t)(td_pack_bf16(v, 0.0f) & 0xffffu);
}

/* The second half of a row's RMSNorm, for every kernel that norms a row (so all give its bits): ss is this thread's
 * fold of x[i]^2 (double) over i = tid, tid + ROW_NT, ... ascending; the block's fixed tree sums the folds, then
 * y[i] = (x[i] * s) * w'[i] (w' from wv, norm_w_load's, then from w past NORM_WREG * ROW_NT), and yb[i] (when not
 * NULL) that rounded to bf16. y may be x: each thread rewrites only the elements it read, after the block's barrier. */
__device__ __forceinline__ void norm_row(float *y, const float *x, const float *__restrict__ w, const norm_w &wv,
                                         int64_t n, float eps, int zero_centred, double ss, double *sh,
                                         uint16_t *yb = nullptr) {
    ss = td_dev_block_sum<ROW_NT>(ss, sh);
    const float s = td_dev_rms_scale(ss, n, eps);
#pragma unroll
    for (int u = 0; u < NORM_WREG; u++) {
        const int64_t i = threadIdx.x + (int64_t)u * ROW_NT;
        if (i < n) norm_put(y, yb, i, (x[i] * s) * wv.v[u]);
    }
    for (int64_t i = threadIdx.x + (int64_t)NORM_WREG * ROW_NT; i < n; i += ROW_NT)
        norm_put(y, yb, i, (x[i] * s) * norm_weight(w, i, zero_centred));
}

/* This thread's fold of x[i]^2 for norm_row. */
__device__ __forceinline__ double row_squares(const float *x, int64_t n) {
    double ss = 0.0;
    for (int64_t i = threadIdx.x; i < n; i += ROW_NT) ss += (double)x[i] * (double)x[i];
    return ss;
}

__global__ void __launch_bounds__(ROW_NT) rmsnorm_kernel(float *y, const float *x, const float *__restrict__ w,
                                                         int64_t per, int64_t ld_outer, int64_t ld_inner, int64_t n,
                                                         float eps, int zero_centred) {
    const norm_w wv = norm_w_load(w, n, zero_centred);
    td_pdl_wait();
    __shared__ double sh[ROW_NT / 32 + 1];
    const int64_t r = blockIdx.x, off = (r / per) * ld_outer + (r % per) * ld_inner;
    norm_row(y + off, x + off, w, wv, n, eps, zero_centred, row_squares(x + off, n), sh);
}

/* td_rope: x[i] = a c - b s, x[i + h] = b c + a s; one thread per pair (i, i + h). */
__global__ void __launch_bounds__(EW_NT) rope_kernel(float *x, const float *__restrict__ cs, int64_t T, int64_t H,
                                                     int64_t ldt, int64_t ldh, int64_t rot) {
    td_pdl_wait();
    const int64_t half = rot / 2, total = T * H * half;
    for (int64_t idx = (int64_t)blockIdx.x * EW_NT + threadIdx.x; idx < total; idx += (int64_t)gridDim.x * EW_NT) {
        int64_t i = idx % half, th = idx / half, h = th % H, t = th / H;
        float *xh = x + t * ldt + h * ldh;
        const float *c = cs + t * rot;
        float co = c[i], si = c[half + i];
        float a = xh[i], b = xh[i + half];
        xh[i] = a * co - b * si;
        xh[i + half] = b * co + a * si;
    }
}

/* The steps between the q/k/v products and attention in one launch: per block one (token, head) of q or k, its
 * per-head RMSNorm (when its weight is given: rmsnorm_kernel's code, so its bits), the rotation of its first rot
 * dims (rope_kernel's expression), and for a k head the store of its k and v slices into the cache
 * (store_rows_kernel's conversion). */
/* Where qk_prep reads q, k and v (td_cu_parts each, cuda.h td_cu_qk_prep): the buffers themselves (S = 1), or the
 * products' partials. */
struct qkv_src {
    td_cu_parts at[3];
};
/* Source i, selected (not indexed: a parameter indexed at run time is copied to local memory first). */
__device__ __forceinline__ td_cu_parts qkv_part(const qkv_src &src, int i) {
    return i == 0 ? src.at[0] : i == 1 ? src.at[1] : src.at[2];
}
/* Element c of head h's columns (q: h * qhs, k and v: h * hd) at token t of source i. */
__device__ __forceinline__ float qkv_at(const qkv_src &src, int i, int64_t T, int64_t t, int64_t col) {
    const td_cu_parts a = qkv_part(src, i);
    return parts_sum(a.p, a.S, a.ld, T, t, col);
}

/* qkv_at at columns c + 32 u, u < min(n, N), into v (td_dev_parts_sums). */
template <int N>
__device__ __forceinline__ void qkv_sums(float (&v)[N], const qkv_src &src, int i, int64_t T, int64_t t, int64_t c,
                                         int n) {
    const td_cu_parts a = qkv_part(src, i);
    td_dev_parts_sums<N, 32>(v, a.p + t * a.ld + c, a.S, T * a.ld, n);
}

__global__ void __launch_bounds__(ROW_NT) qk_prep_kernel(float *q, int64_t ldq, int64_t qhs, int64_t Hq, float *k,
                                                         int64_t ldk, int64_t Hkv, const qkv_src src,
                                                         const float *__restrict__ qw,
                                                         const float *__restrict__ kw, int64_t hd, float eps,
                                                         int zero_centred, const float *__restrict__ cs, int64_t rot,
                                                         void *kc, void *vc, int kvf,
                                                         const int32_t *__restrict__ cell, int64_t kv_dim) {
    __shared__ double sh[ROW_NT / 32 + 1];
    const int64_t T = gridDim.x / (Hq + Hkv), t = blockIdx.x / (Hq + Hkv), j = blockIdx.x % (Hq + Hkv);
    const bool isq = j < Hq;
    const int64_t h = isq ? j : j - Hq, col = isq ? h * qhs : h * hd;
    float *xh = isq ? q + t * ldq + h * qhs : k + t * ldk + h * hd;
    const float *w = isq ? qw : kw;
    const norm_w wv = w ? norm_w_load(w, hd, zero_centred) : norm_w{};
    td_pdl_wait();
    /* the products' partials: the head's sums (and the rest of a q head's columns: Qwen3.5's gate) into place first */
    if (qkv_part(src, !isq).p != (isq ? q : k)) {
        for (int64_t i = threadIdx.x; i < (isq ? qhs : hd); i += ROW_NT) xh[i] = qkv_at(src, !isq, T, t, col + i);
        __syncthreads();
    }
    if (w) {
        norm_row(xh, xh, w, wv, hd, eps, zero_centred, row_squares(xh, hd), sh);
        __syncthreads();
    }
    const int64_t half = rot / 2;
    const float *c = cs + t * rot;
    for (int64_t i = threadIdx.x; i < half; i += ROW_NT) {
        float co = c[i], si = c[half + i];
        float a = xh[i], b = xh[i + half];
        xh[i] = a * co - b * si;
        xh[i + half] = b * co + a * si;
    }
    if (isq) return;
    __syncthreads();
    const int64_t at = (int64_t)cell[t] * kv_dim + h * hd;
    for (int64_t i = threadIdx.x; i < hd; i += ROW_NT) {
        td_dev_kv_put(kc, kvf, at + i, xh[i]);
        td_dev_kv_put(vc, kvf, at + i, qkv_at(src, 2, T, t, col + i));
    }
}

/* qk_prep_kernel's work and bits with one warp per (token, head) instead of a block of 256 threads (half of them
 * idle at head dim 128, two barriers a head): lane l holds elements l + 32 w, w < NW = hd / 32. norm_row's tree is
 * reproduced exactly: in the block, warp w's lane l held x[32 w + l]^2 (+0.0 past hd); each of those 32-value sets is
 * reduced here by the same shuffles (td_dev_warp_reduce), giving W_w in lane 0; the block's second stage ran the same
 * tree over lanes holding W_0 .. W_7 then +0.0, whose lane 0 is ((W0 + W4) + (W2 + W6)) + ((W1 + W5) + (W3 + W7))
 * (adding +0.0 to a sum of squares, never -0.0, changes no bit; W_w = +0.0 for w >= NW). The rotation pairs element
 * i with i + rot / 2: the same lane, HW = rot / 64 registers on. */
template <int NW, int HW>
__global__ void __launch_bounds__(256, 1)
    qk_prep_warp_kernel(float *q, int64_t ldq, int64_t qhs, int64_t Hq, float *k, int64_t ldk, int64_t Hkv,
                        const qkv_src src, const float *__restrict__ qw, const float *__restrict__ kw, int64_t hd,
                        float eps, int zero_centred, const float *__restrict__ cs, int64_t rot, void *kc, void *vc,
                        int kvf, const int32_t *__restrict__ cell, int64_t kv_dim, int64_t n_items) {
    const int lane = threadIdx.x & 31;
    const int64_t item = (int64_t)blockIdx.x * 8 + (threadIdx.x >> 5);
    if (item >= n_items) return; /* a whole warp: the shuffles below see full warps only */
    const int64_t T = n_items / (Hq + Hkv), t = item / (Hq + Hkv), j = item % (Hq + Hkv);
    const bool isq = j < Hq;
    const int64_t h = isq ? j : j - Hq, col = isq ? h * qhs : h * hd;
    float *xh = isq ? q + t * ldq + h * qhs : k + t * ldk + h * hd;
    const float *w = isq ? qw : kw;
    /* the norm's weights and the token's rotation, read before the wait: no pass writes them (weights; the RoPE
     * tables come with the pass, before its first kernel) */
    float wv[NW], co[HW], si[HW];
    const int64_t half = rot / 2;
    const float *c = cs + t * rot;
#pragma unroll
    for (int u = 0; u < NW; u++) {
        const int i = lane + 32 * u;
        wv[u] = w ? norm_weight(w, i, zero_centred) : 0.0f;
    }
#pragma unroll
    for (int u = 0; u < HW; u++) co[u] = c[lane + 32 * u], si[u] = c[half + lane + 32 * u];
    const int64_t at = isq ? 0 : (int64_t)cell[t] * kv_dim + h * hd; /* the cell table: the pass's too */
    td_pdl_wait();
    float y[NW], v[NW]; /* the head's q or k, and for a k head its v, all loads in flight at once */
    qkv_sums<NW>(y, src, !isq, T, t, col + lane, NW);
    if (!isq) qkv_sums<NW>(v, src, 2, T, t, col + lane, NW);
    if (w) {
        double W[8];
#pragma unroll
        for (int u = 0; u < 8; u++) W[u] = 0.0;
#pragma unroll
        for (int u = 0; u < NW; u++) {
            double e = 0.0;
            e += (double)y[u] * (double)y[u];
            W[u] = td_dev_warp_reduce(e, td_dev_add());
        }
        double ss = ((W[0] + W[4]) + (W[2] + W[6])) + ((W[1] + W[5]) + (W[3] + W[7]));
        ss = __shfl_sync(0xffffffffu, ss, 0);
        const float sc = td_dev_rms_scale(ss, hd, eps);
#pragma unroll
        for (int u = 0; u < NW; u++) y[u] = (y[u] * sc) * wv[u];
    }
#pragma unroll
    for (int u = 0; u < HW; u++) {
        float a = y[u], b = y[u + HW];
        y[u] = a * co[u] - b * si[u];
        y[u + HW] = b * co[u] + a * si[u];
    }
#pragma unroll
    for (int u = 0; u < NW; u++) xh[lane + 32 * u] = y[u];
    if (isq) {
        if (src.at[0].p != q) /* the products' partials: the rest of the head's columns (Qwen3.5's gate) into place */
            for (int64_t i0 = hd; i0 < qhs; i0 += 32 * NW) {
                const int n = (int)((qhs - i0 - lane + 31) / 32);
                qkv_sums<NW>(v, src, 0, T, t, col + i0 + lane, n);
#pragma unroll
                for (int u = 0; u < NW; u++)
                    if (u < n) xh[i0 + lane + 32 * u] = v[u];
            }
        return;
    }
#pragma unroll
    for (int u = 0; u < NW; u++) {
        const int i = lane + 32 * u;
        td_dev_kv_put(kc, kvf, at + i, y[u]);
        td_dev_kv_put(vc, kvf, at + i, v[u]);
    }
}

__global__ void __launch_bounds__(EW_NT) store_rows_kernel(void *cache, int kvf, const float *rows,
                                                           int64_t ld, const int32_t *__restrict__ cell, int64_t T,
                                                           int64_t dim) {
    td_pdl_wait();
    const int64_t total = T * dim;
    for (int64_t idx = (int64_t)blockIdx.x * EW_NT + threadIdx.x; idx < total; idx += (int64_t)gridDim.x * EW_NT) {
        int64_t t = idx / dim, i = idx % dim;
        float v = td_ld_pass(rows + t * ld + i);
        int64_t at = (int64_t)cell[t] * dim + i;
        td_dev_kv_put(cache, kvf, at, v);
    }
}

/* Block r copies ranges[r] = {dst offset, src offset, count} of int32s, threads striding over the count. */
__global__ void __launch_bounds__(EW_NT) scatter_ints_kernel(int32_t *__restrict__ dst, const int32_t *__restrict__ src,
                                                             const int32_t *__restrict__ ranges) {
    td_pdl_wait();
    const int32_t *r = ranges + 3 * (int64_t)blockIdx.x;
    const int64_t to = r[0], from = r[1], n = r[2];
    for (int64_t i = threadIdx.x; i < n; i += EW_NT) dst[to + i] = src[from + i];
}

__global__ void __launch_bounds__(EW_NT) sigmoid_gate_kernel(float *x, int64_t ldx, const float *gate,
                                                             int64_t ldg, int64_t gate_stride, int64_t T, int64_t H,
                                                             int64_t hd) {
    td_pdl_wait();
    const int64_t total = T * H * hd;
    for (int64_t idx = (int64_t)blockIdx.x * EW_NT + threadIdx.x; idx < total; idx += (int64_t)gridDim.x * EW_NT) {
        int64_t e = idx % hd, th = idx / hd, h = th % H, t = th / H;
        float g = td_ld_pass(gate + t * ldg + h * gate_stride + e);
        float *xe = x + t * ldx + h * hd + e;
        *xe *= 1.0f / (1.0f + expf(-g));
    }
}

/* g = act(g) * u (td_dev_glu: td_silu_mul's or td_gelu_tanh_mul's expressions) */
__global__ void __launch_bounds__(EW_NT) glu_kernel(float *g, const float *u, int64_t n, int act) {
    td_pdl_wait();
    for (int64_t i = (int64_t)blockIdx.x * EW_NT + threadIdx.x; i < n; i += (int64_t)gridDim.x * EW_NT)
        g[i] = td_dev_glu(g[i], td_ld_pass(u + i), act);
}

/* g = act(G) * U from the gate's and up's partials (gp may be g itself: each element read before it is written) */
__global__ void __launch_bounds__(EW_NT) glu_parts_kernel(float *g, const float *gp, int64_t gS,
                                                          int64_t gld, const float *up, int64_t uS,
                                                          int64_t uld, int64_t T, int64_t n, int act) {
    td_pdl_wait();
    for (int64_t e = (int64_t)blockIdx.x * EW_NT + threadIdx.x; e < T * n; e += (int64_t)gridDim.x * EW_NT) {
        const int64_t t = e / n, i = e % n;
        g[e] = td_dev_glu(parts_sum(gp, gS, gld, T, t, i), parts_sum(up, uS, uld, T, t, i), act);
    }
}

__global__ void __launch_bounds__(EW_NT) scale_kernel(float *x, float s, int64_t n) {
    td_pdl_wait();
    for (int64_t i = (int64_t)blockIdx.x * EW_NT + threadIdx.x; i < n; i += (int64_t)gridDim.x * EW_NT) x[i] *= s;
}

/* y[t, j] += b[j] for t < T, j < n (rows ldy apart): a product's bias, after its sum (td_add per row). */
__global__ void __launch_bounds__(EW_NT) add_bias_kernel(float *y, int64_t ldy, const float *__restrict__ b,
                                                         int64_t T, int64_t n) {
    td_pdl_wait();
    const int64_t total = T * n;
    for (int64_t i = (int64_t)blockIdx.x * EW_NT + threadIdx.x; i < total; i += (int64_t)gridDim.x * EW_NT) {
        int64_t t = i / n, j = i % n;
        y[t * ldy + j] = y[t * ldy + j] + b[j];
    }
}

/* NaN or +-inf (NaN fails every comparison). */
__device__ __forceinline__ int not_finite(float v) { return !(fabsf(v) <= 3.402823466e38f); }
/* A row's check, by all the block's threads: when any saw a value not finite (bad), *fault is lowered to
 * (code << 32 | the row's token) (atomicMin: whichever block comes first, the smallest wins). */
__device__ __forceinline__ void row_fault(int bad, const int32_t *__restrict__ row_tok, int64_t r,
                                          unsigned long long *fault, uint32_t code) {
    if (__syncthreads_or(bad) && threadIdx.x == 0) {
        uint32_t tok = row_tok ? (uint32_t)row_tok[r] : (uint32_t)r;
        atomicMin(fault, ((unsigned long long)code << 32) | tok);
    }
}

/* Block (r, p): piece p (RF_PIECE elements) of row r: x += y when add, then its finiteness (NaN or +-inf anywhere
 * lowers *fault: atomicMin, whichever block comes first). A head row of 151,936 outputs in 38 blocks, not one. */
#define RF_PIECE 4096
__global__ void __launch_bounds__(ROW_NT) rows_finite_kernel(float *x, const float *y, int64_t n,
                                                             int64_t ld, int add, const int32_t *__restrict__ row_tok,
                                                             unsigned long long *fault, uint32_t code) {
    td_pdl_wait();
    const int64_t r = blockIdx.x, i0 = (int64_t)blockIdx.y * RF_PIECE, i1 = i0 + RF_PIECE < n ? i0 + RF_PIECE : n;
    float *xr = x + r * ld;
    int bad = 0;
    for (int64_t i = i0 + threadIdx.x; i < i1; i += ROW_NT) {
        float v = xr[i];
        if (add) {
            v = v + td_ld_pass(y + r * n + i);
            xr[i] = v;
        }
        bad |= not_finite(v);
    }
    row_fault(bad, row_tok, r, fault, code);
}

/* td_cu_add_rows then td_cu_rmsnorm of the same rows, in one pass over them: the sum of squares folds the new x in
 * rmsnorm_kernel's order (thread i = tid, tid + 256, ... ascending, then the same tree), so both results are the two
 * kernels' bits. y is a product's S partials (td_cu_parts; S = 1 a plain y), added in their order first (the
 * product's own sum: tc_fold_parts' adds). out may be plain y (each thread rewrites only the elements it read, after
 * the block's barrier). outb (NULL: none) gets out rounded to bf16, [R, n]. */
__global__ void __launch_bounds__(ROW_NT, 1)
    add_rows_norm_kernel(float *x, const float *y, int64_t S, int64_t ldy, int64_t n,
                         const int32_t *__restrict__ row_tok, unsigned long long *fault, uint32_t code, float *out,
                         uint16_t *outb, const float *__restrict__ w, float eps, int zero_centred) {
    const norm_w wv = norm_w_load(w, n, zero_centred);
    td_pdl_wait();
    __shared__ double sh[ROW_NT / 32 + 1];
    const int64_t r = blockIdx.x;
    float *xr = x + r * n;
    int bad = 0;
    double ss = 0.0;
    auto put = [&](int64_t i, float e) { /* x[i] = e, its finiteness, its square folded in i's order */
        xr[i] = e;
        bad |= not_finite(e);
        ss += (double)e * (double)e;
    };
    float xv[NORM_WREG], v[NORM_WREG];
#pragma unroll
    for (int u = 0; u < NORM_WREG; u++) {
        const int64_t i = threadIdx.x + (int64_t)u * ROW_NT;
        if (i < n) xv[u] = xr[i];
    }
    const int nv = threadIdx.x < n ? (int)((n - threadIdx.x + ROW_NT - 1) / ROW_NT) : 0; /* this thread's elements */
    td_dev_parts_sums<NORM_WREG, ROW_NT>(v, y + r * ldy + threadIdx.x, S, gridDim.x * ldy, nv);
#pragma unroll
    for (int u = 0; u < NORM_WREG; u++) {
        const int64_t i = threadIdx.x + (int64_t)u * ROW_NT;
        if (i < n) put(i, xv[u] + v[u]);
    }
    for (int64_t i = threadIdx.x + (int64_t)NORM_WREG * ROW_NT; i < n; i += ROW_NT)
        put(i, xr[i] + parts_sum(y, S, ldy, gridDim.x, r, i));
    row_fault(bad, row_tok, r, fault, code);
    norm_row(out + r * n, xr, w, wv, n, eps, zero_centred, ss, sh, outb ? outb + r * n : nullptr);
}

__global__ void __launch_bounds__(EW_NT) gather_rows_kernel(float *__restrict__ dst, const float *src,
                                                            const int32_t *__restrict__ idx, int64_t R, int64_t n) {
    td_pdl_wait();
    const int64_t total = R * n;
    for (int64_t e = (int64_t)blockIdx.x * EW_NT + threadIdx.x; e < total; e += (int64_t)gridDim.x * EW_NT) {
        int64_t r = e / n, i = e % n;
        dst[e] = td_ld_pass(src + (int64_t)idx[r] * n + i);
    }
}

#ifndef TD_CU_EMU /* tests/cuda/emu compiles the kernels above alone */

/* ---- launches ---------------------------------------------------------------------------------------------------- */

extern "C" int td_cu_rmsnorm(float *y, const float *x, const float *w, int64_t R, int64_t per, int64_t ld_outer,
                             int64_t ld_inner, int64_t n, float eps, int zero_centred, void *stream) {
    if (R <= 0 || n <= 0) return 0;
    if (per <= 0) return td_cu_failf("td_cu_rmsnorm: per = %lld", (long long)per);
    if (R > 0x7fffffff) return td_cu_failf("td_cu_rmsnorm: %lld rows is beyond one launch", (long long)R);
    rmsnorm_kernel<<<(unsigned)R, ROW_NT, 0, TD_CU_STREAM(stream)>>>(y, x, w, per, ld_outer, ld_inner, n, eps,
                                                                     zero_centred);
    return td_cu_launched("rmsnorm");
}

extern "C" int td_cu_rope(float *x, const float *cs, int64_t T, int64_t H, int64_t ldt, int64_t ldh, int64_t rot,
                          void *stream) {
    int64_t total = T * H * (rot / 2);
    if (T <= 0 || H <= 0 || total <= 0) return 0;
    rope_kernel<<<td_cu_grid(total, EW_NT), EW_NT, 0, TD_CU_STREAM(stream)>>>(x, cs, T, H, ldt, ldh, rot);
    return td_cu_launched("rope");
}

extern "C" int td_cu_qk_prep(float *q, int64_t ldq, int64_t q_head_stride, int64_t Hq, float *k, int64_t ldk,
                             int64_t Hkv, const float *v, int64_t ldv, const td_cu_parts *qkv, const float *q_norm,
                             const float *k_norm, int64_t hd, float eps, int zero_centred, const float *cs, int64_t rot,
                             void *kc, void *vc, int kvf, const int32_t *cell, int64_t kv_dim, int64_t T,
                             void *stream) {
    if (T <= 0 || Hq + Hkv <= 0) return 0;
    if (kvf < TD_CU_KV_F32 || kvf > TD_CU_KV_BF16) return td_cu_failf("td_cu_qk_prep: KV cache format %d", kvf);
    qkv_src src = {{{q, 1, ldq}, {k, 1, ldk}, {v, 1, ldv}}};
    for (int i = 0; qkv && i < 3; i++) {
        if (qkv[i].S < 1 || qkv[i].ld < (i == 0 ? ldq : i == 1 ? ldk : ldv))
            return td_cu_failf("td_cu_qk_prep: %lld partials of rows %lld apart", (long long)qkv[i].S,
                               (long long)qkv[i].ld);
        src.at[i] = qkv[i];
    }
    if (T * (Hq + Hkv) > 0x7fffffff)
        return td_cu_failf("td_cu_qk_prep: %lld tokens x %lld heads is beyond one launch", (long long)T,
                           (long long)(Hq + Hkv));
    /* a warp a head where its elements and the rotation's pairs fall on whole lanes (head dims 64, 128, 256 with a
     * rotation of a multiple of 64 dims: Qwen3, Qwen3.5); else a block a head */
    const int64_t n = T * (Hq + Hkv), nw = hd / 32, hw = rot / 64;
    if (hd % 32 == 0 && rot % 64 == 0 && rot > 0 && rot <= hd && (nw == 2 || nw == 4 || nw == 8)) {
        const unsigned grid = (unsigned)((n + 7) / 8);
        cudaStream_t s = TD_CU_STREAM(stream);
#define QKW(NW, HW)                                                                                               \
    qk_prep_warp_kernel<NW, HW><<<grid, 256, 0, s>>>(q, ldq, q_head_stride, Hq, k, ldk, Hkv, src, q_norm, k_norm,   \
                                                     hd, eps, zero_centred, cs, rot, kc, vc, kvf, cell, kv_dim, n)
        if (nw == 2) QKW(2, 1);
        else if (nw == 4 && hw == 1) QKW(4, 1);
        else if (nw == 4) QKW(4, 2);
        else if (hw == 1) QKW(8, 1);
        else if (hw == 2) QKW(8, 2);
        else QKW(8, 4);
#undef QKW
        return td_cu_launched("qk_prep (a warp a head)");
    }
    qk_prep_kernel<<<(unsigned)n, ROW_NT, 0, TD_CU_STREAM(stream)>>>(
        q, ldq, q_head_stride, Hq, k, ldk, Hkv, src, q_norm, k_norm, hd, eps, zero_centred, cs, rot, kc, vc, kvf,
        cell, kv_dim);
    return td_cu_launched("qk_prep");
}

extern "C" int td_cu_store_rows(void *cache, int kvf, const float *rows, int64_t ld, const int32_t *cell, int64_t T,
                                int64_t dim, void *stream) {
    if (T <= 0 || dim <= 0) return 0;
    if (kvf < TD_CU_KV_F32 || kvf > TD_CU_KV_BF16) return td_cu_failf("td_cu_store_rows: KV cache format %d", kvf);
    store_rows_kernel<<<td_cu_grid(T * dim, EW_NT), EW_NT, 0, TD_CU_STREAM(stream)>>>(cache, kvf, rows, ld, cell, T,
                                                                                     dim);
    return td_cu_launched("store_rows");
}

extern "C" int td_cu_scatter_ints(int32_t *dst, const int32_t *src, const int32_t *ranges, int64_t n_ranges,
                                  void *stream) {
    if (n_ranges <= 0) return 0;
    scatter_ints_kernel<<<(unsigned)n_ranges, EW_NT, 0, TD_CU_STREAM(stream)>>>(dst, src, ranges);
    return td_cu_launched("scatter_ints");
}

extern "C" int td_cu_sigmoid_gate(float *x, int64_t ldx, const float *gate, int64_t ldg, int64_t gate_stride,
                                  int64_t T, int64_t H, int64_t hd, void *stream) {
    if (T <= 0 || H <= 0 || hd <= 0) return 0;
    sigmoid_gate_kernel<<<td_cu_grid(T * H * hd, EW_NT), EW_NT, 0, TD_CU_STREAM(stream)>>>(x, ldx, gate, ldg,
                                                                                          gate_stride, T, H, hd);
    return td_cu_launched("sigmoid_gate");
}

extern "C" int td_cu_glu_parts(float *g, const td_cu_parts *gate, const td_cu_parts *up, int64_t T, int64_t n,
                               int act, void *stream) {
    if (T <= 0 || n <= 0) return 0;
    if (act != TD_CU_GLU_SILU && act != TD_CU_GLU_GELU_TANH) return td_cu_failf("td_cu_glu_parts: activation %d", act);
    if (gate->S < 1 || up->S < 1 || gate->ld < n || up->ld < n)
        return td_cu_failf("td_cu_glu_parts: partials %lld / %lld of rows %lld / %lld apart for %lld columns",
                           (long long)gate->S, (long long)up->S, (long long)gate->ld, (long long)up->ld, (long long)n);
    glu_parts_kernel<<<td_cu_grid(T * n, EW_NT), EW_NT, 0, TD_CU_STREAM(stream)>>>(g, gate->p, gate->S, gate->ld, up->p,
                                                                                 up->S, up->ld, T, n, act);
    return td_cu_launched("glu_parts");
}

extern "C" int td_cu_glu(float *g, const float *u, int64_t n, int act, void *stream) {
    if (n <= 0) return 0;
    if (act != TD_CU_GLU_SILU && act != TD_CU_GLU_GELU_TANH) return td_cu_failf("td_cu_glu: activation %d", act);
    glu_kernel<<<td_cu_grid(n, EW_NT), EW_NT, 0, TD_CU_STREAM(stream)>>>(g, u, n, act);
    return td_cu_launched(act == TD_CU_GLU_SILU ? "silu_mul" : "gelu_tanh_mul");
}

extern "C" int td_cu_scale(float *x, float s, int64_t n, void *stream) {
    if (n <= 0) return 0;
    scale_kernel<<<td_cu_grid(n, EW_NT), EW_NT, 0, TD_CU_STREAM(stream)>>>(x, s, n);
    return td_cu_launched("scale");
}

extern "C" int td_cu_silu_mul(float *g, const float *u, int64_t n, void *stream) {
    return td_cu_glu(g, u, n, TD_CU_GLU_SILU, stream);
}

extern "C" int td_cu_add_bias(float *y, int64_t ldy, const float *b, int64_t T, int64_t n, void *stream) {
    if (T <= 0 || n <= 0) return 0;
    add_bias_kernel<<<td_cu_grid(T * n, EW_NT), EW_NT, 0, TD_CU_STREAM(stream)>>>(y, ldy, b, T, n);
    return td_cu_launched("add_bias");
}

static unsigned rf_pieces(int64_t n) { return (unsigned)(n <= RF_PIECE ? 1 : (n + RF_PIECE - 1) / RF_PIECE); }

/* rows_finite_kernel over R rows of n (`what` names the caller in its errors) */
static int rows_finite_launch(const char *what, float *x, const float *y, int64_t R, int64_t n, int64_t ld, int add,
                              const int32_t *row_tok, uint64_t *fault, uint32_t code, void *stream) {
    if (R <= 0) return 0;
    if (R > 0x7fffffff || n > (int64_t)RF_PIECE * 65535)
        return td_cu_failf("td_cu_%s: %lld rows of %lld is beyond one launch", what, (long long)R, (long long)n);
    rows_finite_kernel<<<dim3((unsigned)R, rf_pieces(n)), ROW_NT, 0, TD_CU_STREAM(stream)>>>(
        x, y, n, ld, add, row_tok, (unsigned long long *)fault, code);
    return td_cu_launched(what);
}

extern "C" int td_cu_add_rows(float *x, const float *y, int64_t R, int64_t n, const int32_t *row_tok, uint64_t *fault,
                              uint32_t code, void *stream) {
    return rows_finite_launch("add_rows", x, y, R, n, n, 1, row_tok, fault, code, stream);
}

extern "C" int td_cu_check_rows(const float *x, int64_t R, int64_t n, int64_t ld, const int32_t *row_tok,
                                uint64_t *fault, uint32_t code, void *stream) {
    /* add = 0: the kernel never writes x */
    return rows_finite_launch("check_rows", (float *)x, NULL, R, n, ld, 0, row_tok, fault, code, stream);
}

extern "C" int td_cu_add_rows_norm(float *x, const td_cu_parts *y, int64_t R, int64_t n, const int32_t *row_tok,
                                   uint64_t *fault, uint32_t code, float *out, uint16_t *out_bf16, const float *w,
                                   float eps, int zero_centred, void *stream) {
    if (R <= 0 || n <= 0) return 0;
    if (R > 0x7fffffff) return td_cu_failf("td_cu_add_rows_norm: %lld rows is beyond one launch", (long long)R);
    if (y->S < 1 || y->ld < n)
        return td_cu_failf("td_cu_add_rows_norm: %lld partials of rows %lld apart for %lld columns", (long long)y->S,
                           (long long)y->ld, (long long)n);
    add_rows_norm_kernel<<<(unsigned)R, ROW_NT, 0, TD_CU_STREAM(stream)>>>(
        x, y->p, y->S, y->ld, n, row_tok, (unsigned long long *)fault, code, out, out_bf16, w, eps, zero_centred);
    return td_cu_launched("add_rows_norm");
}

extern "C" int td_cu_gather_rows(float *dst, const float *src, const int32_t *idx, int64_t R, int64_t n,
                                 void *stream) {
    if (R <= 0 || n <= 0) return 0;
    gather_rows_kernel<<<td_cu_grid(R * n, EW_NT), EW_NT, 0, TD_CU_STREAM(stream)>>>(dst, src, idx, R, n);
    return td_cu_launched("gather_rows");
}

#endif /* TD_CU_EMU */
