/* The matrix product y = x W^T over F32 / F16 / BF16 / Q8_0 / Q4_0 weights (td_cu_matmul), and the embedding
 * lookup (td_cu_embed), both through common.cuh's dequantisation (td_dev_weight_raw + td_dev_weight_cvt).
 *
 * Shape: one block of 256 threads per tile of 32 tokens x 64 outputs; the k axis is walked in slices of 64, each
 * slice's x rows (rounded to bf16 when asked; stored transposed) and weight rows (dequantised) staged in shared
 * memory; the next slice's bits are loaded into registers before the current slice is computed and converted after
 * it (a warp waits on a load only where it first uses it); the tile's weight rows are prefetched into L2 at the
 * start. Thread (tq, jj) = (tid / 64, tid % 64) owns output j0 + jj for tokens t0 + tq + 4r (r < 8): at T = 1 two
 * whole warps compute one output per thread, and warps whose tokens are all past T skip the work.
 * Batch invariance: every output element is one chain acc = fmaf(x[t, k], W[row(j), k], acc) for k = 0 .. cols-1
 * ascending, starting from +0.0f, whatever the tile (tiles split t and j only, never k), so its bits depend only on
 * its own x row and weight row. The tile shape is a constant; rows past T are skipped, not computed differently; a
 * partial last k slice runs only its real k (no padding fmaf, which could turn a -0.0f sum into +0.0f). */
#include "kernels/cuda/common.cuh"

#define MM_BM 32 /* tokens per tile */
#define MM_BN 64 /* outputs per tile */
#define MM_BK 64 /* k per shared-memory slice (two whole Q8_0 / Q4_0 blocks) */
#define MM_NT 256
#define MM_TQ (MM_NT / MM_BN)          /* token lanes: thread (tq, jj) owns tokens tq + 4r, r < 8, of output jj */
#define MM_TPT (MM_BM / MM_TQ)         /* tokens per thread: 8 */
#define MM_XP (MM_BM + 4)              /* x slice pitch: 16-byte rows, stores spread over 8 banks */
#define MM_SROWS (MM_NT / MM_BK)       /* rows one staging pass covers: 4 */
#define MM_WPT (MM_BN * MM_BK / MM_NT) /* weight elements a thread stages per slice: 16 */
#define MM_XPT (MM_BM * MM_BK / MM_NT) /* x elements a thread stages per slice: 8 */

/* Slice k0 .. k0 + kn of the tile into registers, as loaded bits: this thread's column kk = tid % MM_BK of rows
 * tid / MM_BK + 4u (a warp reads 32 consecutive k of one row). Issued before the previous slice is computed and
 * converted only after it (mm_put), so the loads overlap that work; the values are the same whoever loads them. */
template <int TYPE>
__device__ __forceinline__ void mm_fetch(uint32_t (&wr)[MM_WPT], float (&xr)[MM_XPT], const unsigned char *const *wrow,
                                         const float *x, int64_t ldx, int64_t t0, int64_t tmax,
                                         int64_t k0, int kn) {
    const int kk = threadIdx.x % MM_BK, r0 = threadIdx.x / MM_BK;
    const bool kin = kk < kn;
#pragma unroll
    for (int u = 0; u < MM_WPT; u++) {
        const unsigned char *row = wrow[r0 + MM_SROWS * u];
        wr[u] = row && kin ? td_dev_weight_raw<TYPE>(row, k0 + kk) : 0u; /* padding: never multiplied */
    }
#pragma unroll
    for (int u = 0; u < MM_XPT; u++) {
        const int tt = r0 + MM_SROWS * u;
        xr[u] = kin && tt < tmax ? td_ld_pass(x + (t0 + tt) * ldx + k0 + kk) : 0.0f;
    }
}

/* The fetched slice, converted, into shared memory: ws[row][kk], and xt[kk][tq * 8 + r] for token tq + 4r. */
template <int TYPE>
__device__ __forceinline__ void mm_put(float (*ws)[MM_BK + 1], float (*xt)[MM_XP], const uint32_t (&wr)[MM_WPT],
                                       const float (&xr)[MM_XPT], int64_t k0, int bf16_in) {
    const int kk = threadIdx.x % MM_BK, r0 = threadIdx.x / MM_BK;
#pragma unroll
    for (int u = 0; u < MM_WPT; u++) ws[r0 + MM_SROWS * u][kk] = td_dev_weight_cvt<TYPE>(wr[u], k0 + kk);
#pragma unroll
    for (int u = 0; u < MM_XPT; u++) xt[kk][r0 * MM_TPT + u] = bf16_in ? td_dev_round_bf16(xr[u]) : xr[u];
}

/* acc[r] = fmaf(x[t0 + tq + 4r, k], W[j, k], acc[r]) for the slice's kn k ascending, r < R (the live tokens: only
 * those are computed, so a warp of dead rows issues nothing). xt[k] holds token tq + 4r at column tq * 8 + r. */
template <int R>
__device__ __forceinline__ void mm_compute(float (&acc)[MM_TPT], const float (*ws)[MM_BK + 1],
                                           const float (*xt)[MM_XP], int jj, int tq, int kn) {
#pragma unroll 4
    for (int kk = 0; kk < kn; kk++) {
        const float w = ws[jj][kk];
        const float *xk = xt[kk] + tq * MM_TPT;
        float xv[MM_TPT];
        if (R == 1) {
            xv[0] = xk[0];
        } else {
            const float4 lo = *(const float4 *)xk;
            xv[0] = lo.x, xv[1] = lo.y, xv[2] = lo.z, xv[3] = lo.w;
            if (R > 4) {
                const float4 hi = *(const float4 *)(xk + 4);
                xv[4] = hi.x, xv[5] = hi.y, xv[6] = hi.z, xv[7] = hi.w;
            }
        }
#pragma unroll
        for (int r = 0; r < R; r++) acc[r] = fmaf(xv[r], w, acc[r]);
    }
}

template <int TYPE>
__global__ void __launch_bounds__(MM_NT)
    matmul_kernel(float *__restrict__ y, int64_t ldy, const float *x, int64_t ldx, int64_t T,
                  const unsigned char *__restrict__ w, size_t row_bytes, int64_t cols,
                  const int32_t *__restrict__ rows, int64_t n_out, int bf16_in) {
    td_pdl_wait();
    __shared__ __align__(16) float xt[MM_BK][MM_XP]; /* x slice, transposed: [k][token column] */
    __shared__ float ws[MM_BN][MM_BK + 1];            /* +1: thread jj reads ws[jj][k], conflict-free */
    __shared__ const unsigned char *wrow[MM_BN];
    const int tid = threadIdx.x, jj = tid % MM_BN, tq = tid / MM_BN;
    const int64_t j0 = (int64_t)blockIdx.x * MM_BN, t0 = (int64_t)blockIdx.y * MM_BM;

    if (tid < MM_BN) {
        int64_t j = j0 + tid;
        wrow[tid] = j < n_out ? w + (size_t)(rows ? (int64_t)rows[j] : j) * row_bytes : nullptr;
    }
    const int64_t tmax = T - t0; /* live token rows of the tile */
    /* this thread's live tokens: tq + 4r < tmax for r < rn (the same in the whole warp: a warp shares tq) */
    const int64_t live = tmax - tq <= 0 ? 0 : (tmax - tq + MM_TQ - 1) / MM_TQ;
    const int rn = live < MM_TPT ? (int)live : MM_TPT;

    float acc[MM_TPT];
#pragma unroll
    for (int r = 0; r < MM_TPT; r++) acc[r] = 0.0f;
    __syncthreads();
    { /* the tile's weight rows into L2 at once: at small T the k loop would otherwise wait on DRAM every slice */
        const int64_t lines = (int64_t)(row_bytes + 127) / 128;
        for (int64_t i = tid; i < MM_BN * lines; i += MM_NT) {
            const unsigned char *row = wrow[i / lines];
            if (row) asm volatile("prefetch.global.L2 [%0];" ::"l"(row + (i % lines) * 128));
        }
    }

    uint32_t wr[MM_WPT];
    float xr[MM_XPT];
    const int64_t ns = (cols + MM_BK - 1) / MM_BK;
    mm_fetch<TYPE>(wr, xr, wrow, x, ldx, t0, tmax, 0, cols < MM_BK ? (int)cols : MM_BK);
    for (int64_t sl = 0; sl < ns; sl++) {
        const int64_t k0 = sl * MM_BK;
        const int kn = cols - k0 < MM_BK ? (int)(cols - k0) : MM_BK;
        mm_put<TYPE>(ws, xt, wr, xr, k0, bf16_in);
        __syncthreads();
        if (sl + 1 < ns) {
            const int64_t k1 = k0 + MM_BK;
            mm_fetch<TYPE>(wr, xr, wrow, x, ldx, t0, tmax, k1, cols - k1 < MM_BK ? (int)(cols - k1) : MM_BK);
        }
        switch (rn) { /* warp-uniform */
        case 0: break;
        case 1: mm_compute<1>(acc, ws, xt, jj, tq, kn); break;
        case 2: mm_compute<2>(acc, ws, xt, jj, tq, kn); break;
        case 3: mm_compute<3>(acc, ws, xt, jj, tq, kn); break;
        case 4: mm_compute<4>(acc, ws, xt, jj, tq, kn); break;
        case 5: mm_compute<5>(acc, ws, xt, jj, tq, kn); break;
        case 6: mm_compute<6>(acc, ws, xt, jj, tq, kn); break;
        case 7: mm_compute<7>(acc, ws, xt, jj, tq, kn); break;
        default: mm_compute<8>(acc, ws, xt, jj, tq, kn); break;
        }
        __syncthreads();
    }
    const int64_t j = j0 + jj;
    if (j < n_out) {
#pragma unroll
        for (int r = 0; r < MM_TPT; r++)
            if (r < rn) y[(t0 + tq + MM_TQ * r) * ldy + j] = acc[r];
    }
}

template <int TYPE>
__global__ void __launch_bounds__(256) embed_kernel(float *__restrict__ x, const unsigned char *__restrict__ w,
                                                    size_t row_bytes, int64_t cols, const int32_t *__restrict__ tok) {
    td_pdl_wait();
    const int64_t t = blockIdx.x;
    const unsigned char *row = w + (size_t)tok[t] * row_bytes;
    for (int64_t c = threadIdx.x; c < cols; c += 256) x[t * cols + c] = td_dev_weight<TYPE>(row, c);
}

static int check_mat(const td_cu_mat *w, const char *fn) {
    if (w->type != TD_DTYPE_F32 && w->type != TD_DTYPE_F16 && w->type != TD_DTYPE_BF16 && w->type != TD_DTYPE_Q8_0 &&
        w->type != TD_DTYPE_Q4_0)
        return td_cu_failf("%s: weight type %d is not F32, F16, BF16, Q8_0 or Q4_0", fn, w->type);
    if ((w->type == TD_DTYPE_Q8_0 || w->type == TD_DTYPE_Q4_0) && w->cols % TD_QBLOCK)
        return td_cu_failf("%s: a %s weight of %lld columns (not a multiple of %d)", fn,
                           td_dtype_name((td_dtype)w->type), (long long)w->cols, TD_QBLOCK);
    return 0;
}

template <int TYPE>
static void launch_matmul(float *y, int64_t ldy, const float *x, int64_t ldx, int64_t T, const td_cu_mat *w,
                          const int32_t *rows, int64_t n_out, int bf16_in, cudaStream_t s) {
    dim3 grid((unsigned)((n_out + MM_BN - 1) / MM_BN), (unsigned)((T + MM_BM - 1) / MM_BM));
    matmul_kernel<TYPE><<<grid, MM_NT, 0, s>>>(y, ldy, x, ldx, T, (const unsigned char *)w->data, w->row_bytes,
                                                w->cols, rows, n_out, bf16_in);
}

/* td_cu_matmul, and the product of td_cu_matmul_glu_parts where defer is not NULL (set to y by the caller) */
static int matmul_go(float *y, int64_t ldy, const float *x, int64_t ldx, int64_t T, const td_cu_mat *w,
                     const int32_t *rows, int64_t n_out, int bf16_in, td_cu_parts *defer, void *stream) {
    if (T <= 0 || n_out <= 0) return 0;
    if (check_mat(w, "td_cu_matmul")) return -1;
    if ((T + MM_BM - 1) / MM_BM > 65535 || (n_out + MM_BN - 1) / MM_BN > 0x7fffffff)
        return td_cu_failf("td_cu_matmul: %lld tokens x %lld outputs is beyond one launch", (long long)T,
                           (long long)n_out);
    cudaStream_t s = TD_CU_STREAM(stream);
    if (td_cu_matmul_tc(w, bf16_in)) {
        td_cu_mm mm = {y, ldy, w, rows, n_out};
        return td_cu_matmul_tc_launch(&mm, 1, x, NULL, ldx, T, defer, s);
    }
    switch (w->type) {
    case TD_DTYPE_F32: launch_matmul<TD_DTYPE_F32>(y, ldy, x, ldx, T, w, rows, n_out, bf16_in, s); break;
    case TD_DTYPE_F16: launch_matmul<TD_DTYPE_F16>(y, ldy, x, ldx, T, w, rows, n_out, bf16_in, s); break;
    case TD_DTYPE_BF16: launch_matmul<TD_DTYPE_BF16>(y, ldy, x, ldx, T, w, rows, n_out, bf16_in, s); break;
    case TD_DTYPE_Q8_0: launch_matmul<TD_DTYPE_Q8_0>(y, ldy, x, ldx, T, w, rows, n_out, bf16_in, s); break;
    default: launch_matmul<TD_DTYPE_Q4_0>(y, ldy, x, ldx, T, w, rows, n_out, bf16_in, s); break;
    }
    return td_cu_launched("matmul");
}

extern "C" int td_cu_matmul(float *y, int64_t ldy, const float *x, int64_t ldx, int64_t T, const td_cu_mat *w,
                            const int32_t *rows, int64_t n_out, int bf16_in, void *stream) {
    return matmul_go(y, ldy, x, ldx, T, w, rows, n_out, bf16_in, NULL, stream);
}

/* td_cu_matmul_glu_parts, out NULL: the product's y written */
extern "C" int td_cu_matmul_glu_parts(td_cu_parts *out, float *y, int64_t ldy, float *g, const td_cu_parts *gu,
                                      int64_t ldx, int64_t T, const td_cu_mat *w, int act, int bf16_in, void *stream) {
    if (out) *out = td_cu_parts{y, 1, ldy};
    if (T <= 0) return 0;
    if (check_mat(w, "td_cu_matmul_glu")) return -1;
    if (ldx != w->cols) return td_cu_failf("td_cu_matmul_glu: rows of %lld for %lld columns", (long long)ldx,
                                           (long long)w->cols);
    if (act != TD_CU_GLU_SILU && act != TD_CU_GLU_GELU_TANH) return td_cu_failf("td_cu_matmul_glu: activation %d", act);
    if (td_cu_matmul_tc(w, bf16_in) && (T + 63) / 64 <= 65535) {
        const td_cu_mm mm = {y, ldy, w, NULL, w->rows};
        const int rc = td_cu_matmul_tc_glu(&mm, gu, act, T, out, TD_CU_STREAM(stream));
        if (rc <= 0) return rc;
    }
    const bool plain = gu[0].S == 1 && gu[1].S == 1 && gu[0].p == g && gu[0].ld == ldx && gu[1].ld == ldx;
    if (plain ? td_cu_glu(g, gu[1].p, T * ldx, act, stream) : td_cu_glu_parts(g, &gu[0], &gu[1], T, ldx, act, stream))
        return -1;
    return matmul_go(y, ldy, g, ldx, T, w, NULL, w->rows, bf16_in, out, stream);
}

extern "C" int td_cu_matmul_glu(float *y, int64_t ldy, float *g, const float *u, int64_t ldx, int64_t T,
                                const td_cu_mat *w, int act, int bf16_in, void *stream) {
    const td_cu_parts gu[2] = {{g, 1, ldx}, {u, 1, ldx}};
    return td_cu_matmul_glu_parts(NULL, y, ldy, g, gu, ldx, T, w, act, bf16_in, stream);
}

extern "C" int td_cu_embed(float *x, const td_cu_mat *w, const int32_t *tok, int64_t T, void *stream) {
    if (T <= 0) return 0;
    if (check_mat(w, "td_cu_embed")) return -1;
    if (T > 0x7fffffff) return td_cu_failf("td_cu_embed: %lld tokens is beyond one launch", (long long)T);
    cudaStream_t s = TD_CU_STREAM(stream);
    const unsigned char *d = (const unsigned char *)w->data;
    unsigned grid = (unsigned)T;
    switch (w->type) {
    case TD_DTYPE_F32: embed_kernel<TD_DTYPE_F32><<<grid, 256, 0, s>>>(x, d, w->row_bytes, w->cols, tok); break;
    case TD_DTYPE_F16: embed_kernel<TD_DTYPE_F16><<<grid, 256, 0, s>>>(x, d, w->row_bytes, w->cols, tok); break;
    case TD_DTYPE_BF16: embed_kernel<TD_DTYPE_BF16><<<grid, 256, 0, s>>>(x, d, w->row_bytes, w->cols, tok); break;
    case TD_DTYPE_Q8_0: embed_kernel<TD_DTYPE_Q8_0><<<grid, 256, 0, s>>>(x, d, w->row_bytes, w->cols, tok); break;
    default: embed_kernel<TD_DTYPE_Q4_0><<<grid, 256, 0, s>>>(x, d, w->row_bytes, w->cols, tok); break;
    }
    return td_cu_launched("embed");
}

extern "C" int td_cu_matmul_mlp(float *y, int64_t ldy, const float *x, const uint16_t *xb, int64_t ldx, int64_t T,
                                const td_cu_mat *wg, const td_cu_mat *wu, const td_cu_mat *wd, int act, int bf16_in,
                                void *stream) {
    if (T <= 0 || !bf16_in) return 1;
    if (act != TD_CU_GLU_SILU && act != TD_CU_GLU_GELU_TANH) return td_cu_failf("td_cu_matmul_mlp: activation %d", act);
    if (!td_cu_matmul_tc(wg, 1) || !td_cu_matmul_tc(wu, 1) || !td_cu_matmul_tc(wd, 1) || ldx < wg->cols ||
        (T + 63) / 64 > 65535)
        return 1;
    const td_cu_mm down = {y, ldy, wd, NULL, wd->rows};
    return td_cu_matmul_mlp_tc(&down, x, xb, ldx, T, wg, wu, act, TD_CU_STREAM(stream));
}

/* td_cu_matmul_multi, and td_cu_matmul_multi_parts where defer is not NULL (set to the ys by the caller); xb as
 * td_cu_matmul_multi_xb's */
static int matmul_multi_go(const td_cu_mm *mm, int n, const float *x, const uint16_t *xb, int64_t ldx, int64_t T,
                           int bf16_in, td_cu_parts *defer, void *stream) {
    if (T <= 0 || n <= 0) return 0;
    int together = n <= 4;
    for (int i = 0; i < n && together; i++)
        together = td_cu_matmul_tc(mm[i].w, bf16_in) && mm[i].w->cols == mm[0].w->cols && mm[i].n_out > 0;
    if (together) {
        for (int i = 0; i < n; i++)
            if (check_mat(mm[i].w, "td_cu_matmul_multi")) return -1;
        if ((T + 63) / 64 > 65535)
            return td_cu_failf("td_cu_matmul_multi: %lld tokens is beyond one launch", (long long)T);
        return td_cu_matmul_tc_launch(mm, n, x, xb, ldx, T, defer, TD_CU_STREAM(stream));
    }
    for (int i = 0; i < n; i++)
        if (matmul_go(mm[i].y, mm[i].ldy, x, ldx, T, mm[i].w, mm[i].rows, mm[i].n_out, bf16_in, NULL, stream))
            return -1;
    return 0;
}

extern "C" int td_cu_matmul_multi(const td_cu_mm *mm, int n, const float *x, int64_t ldx, int64_t T, int bf16_in,
                                  void *stream) {
    return matmul_multi_go(mm, n, x, NULL, ldx, T, bf16_in, NULL, stream);
}

extern "C" int td_cu_matmul_multi_xb(td_cu_parts *out, const td_cu_mm *mm, int n, const float *x, const uint16_t *xb,
                                     int64_t ldx, int64_t T, int bf16_in, void *stream) {
    for (int i = 0; out && i < n; i++) out[i] = td_cu_parts{mm[i].y, 1, mm[i].ldy};
    return matmul_multi_go(mm, n, x, xb, ldx, T, bf16_in, out, stream);
}

extern "C" int td_cu_matmul_multi_parts(td_cu_parts *out, const td_cu_mm *mm, int n, const float *x, int64_t ldx,
                                        int64_t T, int bf16_in, void *stream) {
    return td_cu_matmul_multi_xb(out, mm, n, x, NULL, ldx, T, bf16_in, stream);
}
