/* CUDA kernels for sm_90 (the H200), behind a C interface: the engine's device forward pass (src/engine/cuda/) calls
 * these and nothing else of CUDA. Kernels know nothing about models: device pointers, sizes and a stream.
 *
 * Batch invariance by construction. Every output element is computed by one fixed sequence of floating-point
 * operations that depends only on the inputs of its own row and on the row's sizes (n, K, hd, ...), never on the
 * number of rows in the launch (T), on which other rows are there, or on where a row lands in a tile: no split-K,
 * no atomics on values, no kernel or tile choice that depends on T. Reductions inside a block run in a fixed tree over
 * a fixed block size. The orders are spelled out per function below; tests/cuda/test_cuda_kernels.c checks them
 * against the CPU scalar references (src/kernels/cpu/, the _ref.c files) and checks bit-identity across batch shapes.
 *
 * Errors: every function returns 0, or -1 after a CUDA error, which td_cu_error() then describes (per thread).
 * Launches are asynchronous on `stream` (a td_cu_stream_new() handle; NULL = the legacy default stream); device
 * pointers are from td_cu_malloc. Sizes are int64_t; a launch with zero rows does nothing and returns 0. */
#ifndef TD_KERNELS_CUDA_H
#define TD_KERNELS_CUDA_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- runtime --------------------------------------------------------------------------------------------------- */

/* 0 when a CUDA device is usable (device 0 is selected; name and total memory reported when non-NULL); -1 with the
 * reason in td_cu_error() ("no CUDA-capable device is detected", a driver too old for this build, ...). */
int td_cu_probe(char *name, size_t name_len, int64_t *total_bytes);
/* The current device's free memory in bytes (after td_cu_probe); 0, or -1 with td_cu_error() set. */
int td_cu_mem_free(int64_t *free_bytes);
/* The last CUDA error of this thread, as text ("" when none). */
const char *td_cu_error(void);

void *td_cu_malloc(size_t bytes); /* NULL on failure (td_cu_error says why) */
void td_cu_free(void *p);         /* NULL is fine */
void *td_cu_stream_new(void);     /* NULL on failure */
void td_cu_stream_free(void *stream);
int td_cu_h2d(void *dst, const void *src, size_t bytes, void *stream); /* host -> device, ordered on the stream */
int td_cu_d2h(void *dst, const void *src, size_t bytes, void *stream); /* device -> host; returns when copied */
int td_cu_d2d(void *dst, const void *src, size_t bytes, void *stream);
int td_cu_zero(void *dst, size_t bytes, void *stream);
int td_cu_sync(void *stream); /* waits for the stream; reports any error of the work queued on it */
/* Page-locked host memory (copies from and to it run asynchronously); NULL on failure. */
void *td_cu_host_alloc(size_t bytes);
void td_cu_host_free(void *p); /* NULL is fine */

/* CUDA graphs: between td_cu_capture_begin and td_cu_capture_end the stream records the kernels and device copies it
 * is given instead of running them (host-to-device and device-to-host copies must stay outside). td_cu_capture_end
 * always ends the recording; with keep it makes the recording a runnable graph (*exec, freed by td_cu_graph_free),
 * without keep (the recorded work failed part-way) it drops it and *exec is NULL. td_cu_graph_launch runs the graph
 * on the stream: every recorded launch with the arguments it was recorded with. */
int td_cu_capture_begin(void *stream);
int td_cu_capture_end(void *stream, int keep, void **exec);
int td_cu_graph_launch(void *exec, void *stream);
void td_cu_graph_free(void *exec); /* NULL is fine */

/* ---- weights --------------------------------------------------------------------------------------------------- */

/* A weight matrix on the device, in its file's format (the host td_mat's bytes copied as they are): type is a
 * td_dtype (util/dtype.h): F32, F16, BF16, Q8_0 (blocks of 32: fp16 scale, 32 int8), Q4_0 (fp16 scale, 16 bytes:
 * low nibbles elements 0-15, high nibbles 16-31, value (nibble - 8) * scale). Rows are row_bytes apart; data is
 * 4-byte aligned for F32 and 2-byte aligned otherwise (a td_cu_malloc block is). */
typedef struct td_cu_mat {
    int type;
    int64_t rows, cols;
    size_t row_bytes;
    const void *data;
} td_cu_mat;

/* Element (r, c) of a weight as float: F16 / BF16 exactly; Q8_0 (float)q * d, Q4_0 (float)(nib - 8) * d, one
 * rounding each (d the block's fp16 scale as float). The matrix products and the embedding use exactly this. */

/* x[t, 0..cols) = row tok[t] of w, as float (the dequantisation above). */
int td_cu_embed(float *x, const td_cu_mat *w, const int32_t *tok, int64_t T, void *stream);

/* y[t, j] = sum_k x[t, k] * W[row(j), k] for t < T, j < n_out; row(j) = rows ? rows[j] : j (rows on the device).
 * x has leading dimension ldx, y has ldy. Order, per element: acc = 0.0f; for k = 0 .. cols-1 ascending:
 * acc = fmaf(xk, W[row(j), k], acc), where xk = x[t, k], or x[t, k] rounded to bf16 (nearest-even) when bf16_in.
 * That order is the same for every T and tile (tiles over t and j only; no split over k). */
int td_cu_matmul(float *y, int64_t ldy, const float *x, int64_t ldx, int64_t T, const td_cu_mat *w,
                 const int32_t *rows, int64_t n_out, int bf16_in, void *stream);
/* The MLP's down product over its gate: y = (act(g) * u) W^T for t < T, all W's rows (g and u [T, ldx], ldx = W's
 * cols; act TD_CU_GLU_SILU or _GELU_TANH): the bits of td_cu_glu(g, u) then td_cu_matmul, one launch fewer where the
 * tensor-core kernels gate the activations as they take them (tc_split up to 16 tokens, and tc_x_bf16 before tc_wide
 * above 64; between, every output block would gate its slice again: the gate runs apart). g's contents are undefined
 * afterwards (the other path gates it in place). */
int td_cu_matmul_glu(float *y, int64_t ldy, float *g, const float *u, int64_t ldx, int64_t T, const td_cu_mat *w,
                     int act, int bf16_in, void *stream);
/* A product's result that may be left as its k slices' partials for the kernel that takes it to add them as it reads
 * y (td_cu_add_rows_norm): y[t, j] = P_0 + P_1 + ... + P_{S-1} in fp32, in that order (the order td_cu_matmul_tc
 * states below, so the bits of the product's own sum), P_s[t, j] at p[(s * T + t) * ld + j], T the product's tokens.
 * S = 1 is a plain y (p, row pitch ld). */
typedef struct td_cu_parts {
    const float *p;
    int64_t S, ld;
} td_cu_parts;
/* td_cu_matmul_glu over the gate's and up's results as td_cu_matmul_multi_parts leaves them (gu[0], gu[1]; plain:
 * {g, 1, ldx} and {u, 1, ldx}), g (T x ldx floats) the space the gated rows may be written to; out as in
 * td_cu_matmul_multi_parts (NULL: y is written). The kernels that gate their activations as they stage them add the
 * partials there; otherwise one kernel adds and gates them into g (td_cu_glu_parts), then the product runs. */
int td_cu_matmul_glu_parts(td_cu_parts *out, float *y, int64_t ldy, float *g, const td_cu_parts *gu, int64_t ldx,
                           int64_t T, const td_cu_mat *w, int act, int bf16_in, void *stream);
void td_cu_matmul_defer_test(int mode);
/* Whether td_cu_matmul computes this weight on the tensor cores: bf16_in over a BF16 weight whose cols is a multiple
 * of 16 and whose rows start 16-byte aligned (a property of the weight alone, never of T). Then the order above is
 * replaced by this one, the same for every T, tile and kernel (matmul_tc.cu): k is cut into slices of 256 (the last
 * shorter); a slice's partial P_s is one chain acc = mma.m16n8k16(W[row(j), k..k+16), bf16(x[t, k..k+16)), acc) over its
 * 16-wide steps ascending from +0.0f, the mma unit's own fp32 accumulation inside a step; y = P_0, then y = y + P_s for
 * s = 1, 2, ... in fp32. Not bit-equal to the fmaf chain; within fp32 rounding of the bf16 products' sum. */
int td_cu_matmul_tc(const td_cu_mat *w, int bf16_in);
/* Which kernels compute that order (matmul_tc.cu; all give the same bits): the environment's TD_CUDA_TC, read once:
 * "new" or unset: tc_stream for T <= 64 (weights staged through shared memory, a whole slice in flight per warp),
 * tc_wide above (128 x 128 tiles); "old": tc_skinny for T <= 64, tc_tile above; anything else makes every
 * tensor-core product fail with a message naming the value. Test only (not thread-safe; process-wide):
 * td_cu_matmul_tc_test_mode(m) overrides it: 0 the environment's choice, 1 old, 2 new, 3 / 4 / 5 / 6 new with
 * 16 / 8 / 4 / 32 outputs per tc_stream block (2 picks by the launch's size), 7 new with tc_split on every launch of
 * T <= 64. */
void td_cu_matmul_tc_test_mode(int mode);
/* "new" runs launches of T <= 64 over more than one k slice and at most 8 x SMs x 64 outputs (every layer product;
 * not a vocabulary head) as tc_split: each slice in a block of its own (64 outputs x all tokens), the partials in a
 * stream-ordered scratch (slices x T x outputs floats) added in slice order by a second kernel: the same bits, more
 * blocks for small products. TD_CUDA_TC_SPLIT=0 turns it off. Test only: td_cu_matmul_tc_split_test(0 / 1) turns it
 * off / on, -1 restores the environment's choice. */
void td_cu_matmul_tc_split_test(int on);
/* In launches of up to 16 tokens tc_split's S slice blocks of 64 outputs run as one thread-block cluster (S up to 16,
 * where the GPU holds such a cluster) whose blocks add the partials through distributed shared memory in the same
 * slice order: no scratch and no second kernel. TD_CUDA_TC_CLUSTER=0 turns it off (the scratch and tc_fold_parts).
 * Test only: td_cu_matmul_tc_cluster_test(0 / 1: off / on for every tc_split launch), -1 the environment's choice. */
void td_cu_matmul_tc_cluster_test(int on);
/* tc_wide (T > 64) takes x rounded to bf16 once per launch (a stream-ordered scratch of T x cols bf16, copied into its
 * tiles as the weights are) instead of rounding it in every block of a column of tiles: the same bits.
 * TD_CUDA_TC_XB=0 turns that off. Test only: td_cu_matmul_tc_xb_test(0 / 1), -1 the environment's choice. */
void td_cu_matmul_tc_xb_test(int on);
/* tc_wide launches of at most 512 tokens whose 128 x 128 tiles fill at most half the GPU's SMs run each k slice in a
 * block of its own and add the slices' partials in slice order in a second kernel (the same bits; a stream-ordered scratch of slices x T x
 * outputs floats, at most 1 GiB, else one pass); TD_CUDA_TC_PARTS=0 turns that off. Test only:
 * td_cu_matmul_tc_parts_test(1 / 0) forces it on / off, -1 restores the environment's choice. */
void td_cu_matmul_tc_parts_test(int on);
/* tc_wide keeps its slice totals in registers instead of shared memory, the 64 KB that frees holding a 4th weight
 * stage: the same bits. TD_CUDA_TC_WREG: unset or any value but 0 and 3, registers with 4 stages (the default); 3
 * registers with 3; 0 shared memory with 3 (the form before). Test only: td_cu_matmul_tc_wreg_test(0 / 3 / 4: off /
 * 3 / 4 stages), -1 the environment's choice. */
void td_cu_matmul_tc_wreg_test(int stages);
/* TD_CUDA_TC_WG (a bit mask): 1, tc_wide's launches with x in bf16 (k a multiple of 64) run tc_wg instead, the same
 * tiles and order on wgmma (the tensor cores reading both operands from shared memory); 2, tc_split runs its slices as
 * wgmma (k a multiple of 256); 3 both, the default (unset or another value); 0 neither. The same bits as the mma.sync
 * kernels (test_cuda_matmul_tc on the H100). sm_90a code, used on a GPU of compute capability 9.0 only. Test only:
 * td_cu_matmul_tc_wg_test(mask), -1 the environment's choice; td_cu_matmul_tc_wg_here() says whether this GPU runs
 * them. */
void td_cu_matmul_tc_wg_test(int on);
int td_cu_matmul_tc_wg_here(void);
/* Wherever tc_wg runs (its GLU form too), tc_ws instead: the same tiles, order and bits, its copies issued by warps
 * of their own and handed over by mbarriers: by default the bulk tensor copy (TMA; where the driver encodes the
 * tensor maps and no product has a row list, else tc_wg runs). TD_CUDA_WG_WS=mix takes a warpgroup of cp.async for
 * the gated gate/up, =4 (or 2) 4 (or 2) warps of cp.async for both, =0 tc_wg (read once). Test only:
 * td_cu_matmul_tc_ws_test(0 / 1 / 2 / 4: tc_wg, the bulk copy, producer warps), -1 the environment's choice;
 * td_cu_matmul_tc_tma_launches, the launches of the bulk-copy form so far. */
void td_cu_matmul_tc_ws_test(int pw);
int64_t td_cu_matmul_tc_tma_launches(void);

/* Several products of the same x (q, k and v; gate and up): mm[i].y = x W_i^T as td_cu_matmul would compute each,
 * bit for bit; in one launch when all n <= 4 take the tensor-core path with equal cols, else one launch each. */
typedef struct td_cu_mm {
    float *y;
    int64_t ldy;
    const td_cu_mat *w;
    const int32_t *rows; /* NULL: row j */
    int64_t n_out;
} td_cu_mm;
int td_cu_matmul_multi(const td_cu_mm *mm, int n, const float *x, int64_t ldx, int64_t T, int bf16_in, void *stream);
/* td_cu_matmul_multi whose results may stay as partials, out[i] for mm[i]: where tc_split runs the products (all of
 * one launch) through the bound scratch (td_cu_scratch_bind; the rows of every product a multiple of 64, none with a
 * row list) its second kernel is not launched, and out[i] describes mm[i]'s partials there, valid until the next
 * product launched from this thread on the stream; otherwise the ys are written and out[i] is {y, 1, ldy}.
 * TD_CUDA_TC_DEFER: 1, tc_split's launches that go through the scratch (17 to 64 tokens); 2 also those of up to 16
 * tokens, which otherwise add their partials in a cluster; 0 (unset or any other value: the default, the others
 * measured slower on the H100) never. Test only: td_cu_matmul_defer_test(mode), -1 the environment's choice. */
int td_cu_matmul_multi_parts(td_cu_parts *out, const td_cu_mm *mm, int n, const float *x, int64_t ldx, int64_t T,
                             int bf16_in, void *stream);
/* td_cu_matmul_multi_parts (out NULL: td_cu_matmul_multi) given x also rounded to bf16 (xb [T, ldx], the
 * products' own rounding: td_cu_add_rows_norm's out_bf16; NULL none): launches whose kernels take x in bf16 (the
 * wide tensor-core tiles, above 64 tokens) read xb instead of rounding x again. The same bits either way.
 * TD_CUDA_NORM_XB=0 turns it off (xb ignored); td_cu_matmul_norm_xb says which. Test only:
 * td_cu_matmul_norm_xb_test(0 / 1), -1 the environment's choice. */
int td_cu_matmul_multi_xb(td_cu_parts *out, const td_cu_mm *mm, int n, const float *x, const uint16_t *xb,
                          int64_t ldx, int64_t T, int bf16_in, void *stream);
int td_cu_matmul_norm_xb(void);
void td_cu_matmul_norm_xb_test(int on);
/* The MLP's three products as one call where the tensor cores allow: y = (act(x Wg^T) * (x Wu^T)) Wd^T for t < T,
 * all of Wd's rows, the bits of td_cu_matmul_multi over the gate and up then td_cu_matmul_glu, with act(g) * u
 * computed by the gate/up product as it ends (its tiles hold a gate output beside the up output of the same index)
 * and kept only rounded to bf16, as the down product takes it: the fp32 gate and up ([T, 2 x rows] floats) are
 * never written nor read again. Where: bf16_in, BF16 weights on the tensor cores (Wg and Wu of one shape, their
 * rows = Wd's cols, cols and rows multiples of 64), more than 64 tokens, a GPU running tc_wg (cuda.h's
 * TD_CUDA_TC_WG); xb as td_cu_matmul_multi_xb's. Returns 1 elsewhere, nothing launched: the caller runs those two
 * calls; 0 done; -1 failed (td_cu_error). TD_CUDA_GLU_EPI=0 turns it off. Test only: td_cu_matmul_glu_epi_test(0 /
 * 1), -1 the environment's choice. */
int td_cu_matmul_mlp(float *y, int64_t ldy, const float *x, const uint16_t *xb, int64_t ldx, int64_t T,
                     const td_cu_mat *wg, const td_cu_mat *wu, const td_cu_mat *wd, int act, int bf16_in, void *stream);
void td_cu_matmul_glu_epi_test(int on);
/* A device scratch of `floats` floats for the products launched from this thread (thread-local; NULL unbinds): the
 * products of a few tokens keep their partials there instead of in stream-ordered allocations, which a CUDA graph
 * records as nodes of their own between the kernels (its programmatic edges stop there). The caller keeps it alive
 * and unused by anything else until the stream is done with the launches. A launch that needed more than was bound
 * took an allocation: td_cu_scratch_wanted returns the most floats such a launch wanted since the last call (0:
 * none), then forgets it. */
void td_cu_scratch_bind(float *p, int64_t floats);
int64_t td_cu_scratch_wanted(void);

/* ---- row operations -------------------------------------------------------------------------------------------- */

/* RMSNorm over R rows of n elements, in place allowed (y == x). Row r starts at x + (r / per) * ld_outer +
 * (r % per) * ld_inner (and y the same): per = 1, ld_outer = d for the residual stream's rows; per = H heads,
 * ld_inner = the head stride for per-head q/k norms. y[i] = (x[i] * s) * w'[i], w' = 1 + w[i] when zero_centred
 * else w[i], s = (float)(1 / sqrt((double)(float)(ss / n) + eps)) with ss the sum of x[i]^2 in double (a fixed
 * tree over a fixed block): as td_rmsnorm up to the order of the double sum. */
int td_cu_rmsnorm(float *y, const float *x, const float *w, int64_t R, int64_t per, int64_t ld_outer,
                  int64_t ld_inner, int64_t n, float eps, int zero_centred, void *stream);

/* NeoX rotary embedding of the first rot dims of each head, as td_rope: for t < T, h < H, the head at
 * x + t * ldt + h * ldh is rotated with cs + t * rot ([cos | sin] of rot/2 each, made on the host by td_rope_table). */
int td_cu_rope(float *x, const float *cs, int64_t T, int64_t H, int64_t ldt, int64_t ldh, int64_t rot, void *stream);

/* Copies n_ranges runs of int32s on the device: run r = ranges[3r .. 3r + 2] = {offset into dst, offset into src,
 * count} (offsets and counts >= 0; runs may not overlap in dst). One launch for many small uploads: the host packs
 * them into one block, sends it with one copy, and this puts each run in place (the sequences' cell tables). */
int td_cu_scatter_ints(int32_t *dst, const int32_t *src, const int32_t *ranges, int64_t n_ranges, void *stream);

/* How a KV cache stores its elements (the kvf arguments below): float; IEEE half (rounded to nearest even); bf16
 * (rounded to nearest even: the top 16 bits of the rounded float). */
enum { TD_CU_KV_F32 = 0, TD_CU_KV_F16 = 1, TD_CU_KV_BF16 = 2 };

/* Stores T rows of dim floats (rows ld apart) into a cache of rows dim apart: row t goes to cache row cell[t], in
 * the cache's format kvf (TD_CU_KV_*). */
int td_cu_store_rows(void *cache, int kvf, const float *rows, int64_t ld, const int32_t *cell, int64_t T, int64_t dim,
                     void *stream);

/* Softmax attention over the KV cache. Token t is of sequence seq[t] at position pos[t]; row (t, h) reads the
 * positions [lo, n) of its sequence, n = pos[t] + 1, lo = 0, or n - window with a sliding window > 0 and n > window;
 * position p is in cache row cells[seq[t] * n_ctx + p]. Query head h (q + t * ldq + h * q_head_stride, hd floats)
 * uses KV head h / (Hq / Hkv), whose key row of cache row c is at kc + c * kv_dim + kvh * hd (in the format kvf,
 * converted exactly to float; another kvf fails, naming it); likewise vc. Writes out[t * ldo + h * hd + e].
 *
 * The canonical order (the batch-invariance contract: the same for every launch shape, tile, cell layout and batch;
 * fp32 arithmetic, no contraction, within 1e-5 relative of td_attn_rows_ref; on a bf16 cache, exactly the bits of an
 * f32 cache holding the same values):
 *   chunks of C = 64 positions anchored at position 0: chunk c = [64c, 64c + 64) intersected with [lo, n); a chunk
 *   with no position there is skipped. Per chunk: s_p = scale * d_p, d_p = fmaf chain over e ascending of
 *   q[e] * k_p[e] from +0; m = max s_p; p = expf(s_p - m) (0 at slots outside the range); l = the tree over the 64
 *   slots: slot i + slot i + 32 (i < 32), then halving strides 16, 8, 4, 2, 1 (pairs (i, i + stride)); a[e] = fmaf
 *   chain of p * v_p[e] over the chunk's positions in the range, ascending, from +0.
 *   Combining (M, L, A) with (m, l, a): M' = max(M, m), x = expf(M - M'), y = expf(m - M'), L = L * x + l * y,
 *   A = A * x + a * y (each product rounded, then the sum); the first combine into an empty state is a copy.
 *   Chunks combine left to right into a super-chunk state (super-chunk = 8 chunks = positions [512j, 512j + 512));
 *   super-chunk states with a position in the range combine left to right into the row's state; out = A / L.
 * Execution: a block per (tile, span, query heads of one KV head); the tile's keys and values are read once for all
 * its rows. A span is a super-chunk, or one chunk when the launch would have under 256 blocks of super-chunks and
 * the scratch holds T * Hq * ceil(max_n / 64) * (hd + 2) floats (decode: more blocks). Rows within one span write out
 * directly; longer rows write each span's state to the scratch and a combine kernel per (token, head) folds chunks
 * into super-chunks and those into the row, in the order above (the copy rule makes every path the same bits).
 *
 * The plan: tiles of tokens of ONE sequence each, tile i = batch rows tok[tile[2i] .. tile[2i] + tile[2i + 1]) with
 * tile[2i + 1] <= td_cu_attn_tile_tokens(Hq, Hkv, hd), td_cu_attn_tile_tokens_bf16 for td_cu_attention_bf16
 * (td_cu_attn_tiles makes them from a pass's groups); every token
 * of the launch in exactly one tile. max_n >= every pos[t] + 1 of the launch (only the grid's size; a larger value
 * costs empty blocks), max_n <= n_ctx. scratch: td_cu_attn_scratch_floats(T, Hq, max_n, hd) floats on the device
 * when max_n > 512 (else unused, may be NULL; more, as above, lets small launches split by chunks). */
typedef struct td_cu_attn_plan {
    const int32_t *tok;  /* device: batch rows (a pass's grp_tok) */
    const int32_t *tile; /* device: [n_tiles][2] first index into tok, count */
    int64_t n_tiles;
    int64_t max_n;       /* host value */
    float *scratch;      /* device */
    int64_t scratch_floats;
    int64_t tile_tokens; /* host: the most tokens a tile holds (the qt given to td_cu_attn_tiles); a launch whose
                            kernel takes fewer fails with the sizes. 0: not stated (tiles must fit the kernel) */
    uint16_t *out_bf16;  /* device, or NULL: the output also rounded to bf16 (nearest even, as the products round
                            their activations) into [T][Hq * hd], for the product that reads it
                            (td_cu_matmul_multi_xb) */
} td_cu_attn_plan;

int td_cu_attention(float *out, int64_t ldo, const float *q, int64_t ldq, int64_t q_head_stride, const void *kc,
                    const void *vc, int kvf, int64_t kv_dim, const int32_t *cells, int64_t n_ctx, const int32_t *seq,
                    const int32_t *pos, int64_t T, int64_t Hq, int64_t Hkv, int64_t hd, float scale, int64_t window,
                    const td_cu_attn_plan *plan, void *stream);

/* td_cu_attention in --precision bf16 mode (same arguments, plan and scratch): when td_cu_attention_tc(hd), the
 * order below on the tensor cores (attention.cu: attention_bf16_64_kernel, tiles of up to 64 rows, or 128 with
 * TD_CUDA_ATTN_ROWS=128, at head dims 64 and 128; attention_bf16_kernel, tiles of 16 rows, at 256 or with
 * TD_CUDA_ATTN_ROWS=16 in the environment, read once per process; another value of it makes the call fail naming
 * it); otherwise exactly td_cu_attention.
 * td_cu_attention_tc: hd is 64, 128 or 256 and TD_CUDA_TC_ATTN is not "0" in the environment (read once per
 * process): a property of the head dim, never of the launch.
 * The bf16 canonical order (the batch-invariance contract: the same for every launch shape, tile, span split, test
 * mode, cell layout and batch; fp32 arithmetic, no contraction, outside the mma unit):
 *   q, k and v rounded to bf16 (nearest even; a cached f16 or f32 value converted exactly to f32, then rounded; a
 *   cached bf16 value as it is: so a bf16 cache holds exactly what this order makes of an f32 cache's values, and
 *   gives the same bits);
 *   the chunks of 64 positions anchored at position 0 as above. Per chunk, per row: d_p = one mma.m16n8k16 chain
 *   (bf16 operands, fp32 accumulator) over the head's hd / 16 k-steps of 16 elements ascending, from +0, of q.k_p;
 *   s_p = scale * d_p (s_p a function of q and k_p only); m = max s_p over the chunk's positions in [lo, n);
 *   p_i = bf16(ex2.approx.ftz((s_i - m) * log2 e)) for the chunk's 64 slots i (e^(s_i - m) within 2^-17 relative,
 *   the multiplication an fp32 one), exactly 0 at a slot outside the range;
 *   l = the fp32 tree over the 64 p_i of the fp32 order (slot i + slot i + 32, then halving strides 16 .. 1);
 *   a[e] = one mma chain over the chunk's 4 k-steps of 16 slots ascending, from +0, of p_i v_i[e] (a slot that no
 *   row of the launch's tile sees enters as v = +0, never as cache bytes); then the combine of (M, L, A) above
 *   (copy first, chunks left to right into super-chunks of 512, those left to right) and out = A / L.
 *   Every per-row quantity is a function of the row's own inputs, so tiles of any height give the same bits.
 *   Not bit-equal to td_cu_attention; within bf16 rounding of it (p's rounding: |out - ref| <= 2^-7 max |v|
 *   against td_attn_rows_ref on the bf16-rounded q, k, v, tests/cuda/test_cuda_attn_bf16.c). One caveat of the
 *   shared product: a non-finite value cached at a position that some row of a tile sees reaches every row of that
 *   tile (0 * inf), where the fp32 path keeps it to the rows that see it; positions no row of the tile sees never
 *   reach an output. */
int td_cu_attention_tc(int64_t hd);
/* Whether callers should ask for the output's bf16 copy (td_cu_attn_plan.out_bf16) where the product after attention
 * rounds it: 1 unless TD_CUDA_ATT_XB=0 in the environment (read once). The same bits either way. */
int td_cu_attention_xb(void);
int td_cu_attention_bf16(float *out, int64_t ldo, const float *q, int64_t ldq, int64_t q_head_stride, const void *kc,
                         const void *vc, int kvf, int64_t kv_dim, const int32_t *cells, int64_t n_ctx,
                         const int32_t *seq, const int32_t *pos, int64_t T, int64_t Hq, int64_t Hkv, int64_t hd,
                         float scale, int64_t window, const td_cu_attn_plan *plan, void *stream);

/* Host helpers for the plan (no CUDA calls): tokens per tile for these sizes (>= 1); the tiles of groups
 * (grp_off[n_groups + 1], host) cut every qt tokens into tile ([n_tokens][2] at most), returning their count; the
 * scratch floats for T tokens of Hq heads reaching max_n positions. */
int64_t td_cu_attn_tile_tokens(int64_t Hq, int64_t Hkv, int64_t hd);
/* Tokens per tile for td_cu_attention_bf16: 64 rows (attention_bf16_64_kernel; 128 with TD_CUDA_ATTN_ROWS=128)
 * where td_cu_attention_tc(hd) and that kernel runs (head dims 64, 128; TD_CUDA_ATTN_ROWS unset, "64" or "128"), else
 * td_cu_attn_tile_tokens's. */
int64_t td_cu_attn_tile_tokens_bf16(int64_t Hq, int64_t Hkv, int64_t hd);
/* Tokens per tile of 96 rows (attention_bf16_64_kernel with 6 warps), 0 where td_cu_attention_bf16 runs none (head
 * dims other than 64 and 128, TD_CUDA_ATTN_ROWS set to another size, TD_CUDA_ATTN_96=0). A plan may be cut at this
 * many tokens instead of td_cu_attn_tile_tokens_bf16's: td_cu_attention_bf16 runs 96-row tiles for a plan whose
 * tile_tokens exceed the 64-row kernel's. The same bits either way (the order above). */
int64_t td_cu_attn_whole_tokens_bf16(int64_t Hq, int64_t Hkv, int64_t hd);
int64_t td_cu_attn_tiles(int32_t *tile, const int32_t *grp_off, int64_t n_groups, int64_t qt);
int64_t td_cu_attn_scratch_floats(int64_t T, int64_t Hq, int64_t max_n, int64_t hd);
/* Test only (not thread-safe; process-wide): 0 the normal path; 1 one block per tile walks all its super-chunks
 * (the row state in shared memory, no scratch); 2 every row goes through the scratch and the combine kernel; 3 the
 * split by chunks whatever the launch (the scratch must hold it). All must give the same bits. */
void td_cu_attention_test_mode(int mode);
/* Test only (not thread-safe; process-wide): the bf16 kernel's rows per tile, 16, 64, 96 or 128 (0: the environment's
 * TD_CUDA_ATTN_ROWS, default 64); plans must be cut with td_cu_attn_tile_tokens_bf16 after it. */
void td_cu_attention_rows_test(int rows);
/* Test only (not thread-safe; process-wide): whether the 64-row kernel double-buffers the chunks of a 16-byte
 * aligned bf16 cache (1), or stages and waits for each (0); -1: the environment's TD_CUDA_ATTN_DB (off unless "1").
 * The same bits either way. */
void td_cu_attention_db_test(int on);
/* Test only (not thread-safe; process-wide): whether the 64-row kernel (64 and 96 rows) pipelines a 16-byte aligned
 * bf16 cache's keys and values in its one buffer (1: a chunk's values copied during its scores, the next chunk's keys
 * during its values' products), or stages and waits for each chunk (0); -1: the environment's TD_CUDA_ATTN_PIPE.
 * Double buffering (td_cu_attention_db_test) and, at 64 rows, wgmma (td_cu_attention_wg_test) win over it. The same
 * bits either way. */
void td_cu_attention_pipe_test(int on);
/* Test only (not thread-safe; process-wide): whether the 64-row kernel runs its products on wgmma (1; a 16-byte
 * aligned bf16 cache on compute capability 9.0, else as 0) or mma.sync (0); -1: the environment's TD_CUDA_ATTN_WG.
 * With it on, td_cu_attn_whole_tokens_bf16 is 0 (no 96-row tiles). The same bits either way. */
void td_cu_attention_wg_test(int on);

/* The steps between the q/k/v products and attention, in one launch and with their bits: for each token t, each q
 * head (q + t * ldq + h * q_head_stride) and each k head (k + t * ldk + h * hd): td_cu_rmsnorm of the head's hd
 * values with q_norm / k_norm (skipped when NULL), then td_cu_rope of its first rot dims with cs + t * rot; then
 * td_cu_store_rows of k and v (rows ldk / ldv apart, Hkv * hd = kv_dim wide) into cache row cell[t]. qkv: NULL, or
 * the q, k and v products' results as td_cu_matmul_multi_parts leaves them (the same columns as q's, k's and v's
 * rows): each value is their sum, and q's heads, all q_head_stride columns of them (Qwen3.5's gate too), and k's are
 * written to q and k as above; v is not written. */
int td_cu_qk_prep(float *q, int64_t ldq, int64_t q_head_stride, int64_t Hq, float *k, int64_t ldk, int64_t Hkv,
                  const float *v, int64_t ldv, const td_cu_parts *qkv, const float *q_norm, const float *k_norm,
                  int64_t hd, float eps, int zero_centred, const float *cs, int64_t rot, void *kc, void *vc, int kvf,
                  const int32_t *cell, int64_t kv_dim, int64_t T, void *stream);

/* Qwen3.5's output gate: x[t * ldx + h * hd + e] *= 1 / (1 + expf(-g)), g = gate[t * ldg + h * gate_stride + e]. */
int td_cu_sigmoid_gate(float *x, int64_t ldx, const float *gate, int64_t ldg, int64_t gate_stride, int64_t T,
                       int64_t H, int64_t hd, void *stream);

/* y[t * ldy + j] += b[j] for t < T, j < n: a product's bias, added after the product (as td_add). */
int td_cu_add_bias(float *y, int64_t ldy, const float *b, int64_t T, int64_t n, void *stream);

/* The MLP gate's activation: act(g) * u with act SiLU or PyTorch's tanh GELU (td_silu_mul, td_gelu_tanh_mul). */
enum { TD_CU_GLU_SILU = 1, TD_CU_GLU_GELU_TANH = 2 };
/* g[i] = act(g[i]) * u[i] for i < n; an act not above is refused. */
int td_cu_glu(float *g, const float *u, int64_t n, int act, void *stream);
/* g[t, i] = act(G) * U for t < T, i < n (g's rows n apart), G and U the gate's and the up product's results as
 * td_cu_matmul_multi_parts leaves them, each added in its order first: td_cu_glu's bits over the products' ys. */
int td_cu_glu_parts(float *g, const td_cu_parts *gate, const td_cu_parts *up, int64_t T, int64_t n, int act,
                    void *stream);
/* g[i] = (g[i] / (1 + expf(-g[i]))) * u[i] for i < n (td_silu_mul). */
int td_cu_silu_mul(float *g, const float *u, int64_t n, void *stream);
/* x[i] *= s for i < n. */
int td_cu_scale(float *x, float s, int64_t n, void *stream);

/* The residual: x[r, :n] += y[r, :n] for r < R (rows n apart). A row that holds NaN or infinity afterwards lowers
 * *fault (device) to ((uint64_t)code << 32) | tok, tok = row_tok ? row_tok[r] : r (atomicMin: the smallest code,
 * then the smallest token, wins; start it at UINT64_MAX). td_cu_check_rows does the check alone, rows ld apart. */
int td_cu_add_rows(float *x, const float *y, int64_t R, int64_t n, const int32_t *row_tok, uint64_t *fault,
                   uint32_t code, void *stream);
int td_cu_check_rows(const float *x, int64_t R, int64_t n, int64_t ld, const int32_t *row_tok, uint64_t *fault,
                     uint32_t code, void *stream);
/* td_cu_add_rows(x, y, ...) then td_cu_rmsnorm(out, x, w, R, 1, n, 0, n, eps, zero_centred) in one launch, both
 * results bit for bit the two calls' (out may be y's plain rows, y->S = 1). y is a product's result as
 * td_cu_matmul_multi_parts leaves it (its T = R): the kernel adds the partials in their order, then to x. out_bf16
 * (NULL: none) gets out [R, n] rounded to bf16 as the tensor-core products round their activations: the xb of
 * td_cu_matmul_multi_xb. */
int td_cu_add_rows_norm(float *x, const td_cu_parts *y, int64_t R, int64_t n, const int32_t *row_tok,
                        uint64_t *fault, uint32_t code, float *out, uint16_t *out_bf16, const float *w, float eps,
                        int zero_centred, void *stream);

/* dst[r, :n] = src[idx[r], :n] for r < R (rows n apart; dst and src do not overlap). */
int td_cu_gather_rows(float *dst, const float *src, const int32_t *idx, int64_t R, int64_t n, void *stream);

/* ---- Gated DeltaNet ---------------------------------------------------------------------------------------------- */

/* The tokens of a pass grouped by sequence: group g is sequence grp_seq[g] and holds the batch rows
 * grp_tok[grp_off[g] .. grp_off[g+1]) in position order. A sequence's state for the layer is at
 * state + grp_seq[g] * seq_stride (floats). */
typedef struct td_cu_groups {
    const int32_t *grp_seq, *grp_off, *grp_tok; /* device */
    int64_t n_groups;
    int64_t n_tok; /* grp_off[n_groups] where the caller knows it (td_cu_conv's choice of kernel), else 0 */
} td_cu_groups;

/* The causal depthwise convolution with SiLU, td_conv_step for every token of every group in order, all C channels:
 * token row t of x / out is C floats at x + t * C; the state is [(K-1), C] (oldest row first); w is [C, K]; K 1 .. 8.
 * Each output is td_conv_step's expression over the K - 1 inputs before it (the state's rows before a group's first)
 * and its own: with g->n_tok > 64 every (token, channel) at once and the state by a second kernel, else a thread per
 * channel walking its group's tokens: the same bits. */
int td_cu_conv(float *out, const float *x, float *state, int64_t seq_stride, const float *w, int64_t K, int64_t C,
               const td_cu_groups *g, void *stream);

/* The recurrence and the gated output norm, one (group, value head h) per task, the group's tokens in order (the
 * token-by-token form: exact however a sequence was split into passes). For token row t: u = conv output row t
 * ([q: Hk*dk | k: Hk*dk | v: Hv*dv], ldu floats apart), key head kh = h / (Hv / Hk); q = l2norm(u_q[kh]) / sqrt(dk),
 * k = l2norm(u_k[kh]) (td_l2norm, eps 1e-6), v = u_v[h]; beta = 1 / (1 + expf(-b[t * Hv + h])),
 * g = -expf(a_log[h]) * softplus(a[t * Hv + h] + dt_bias[h]) (td_softplus); then td_deltanet_step_ref's update of
 * S = state + seq * seq_stride + h * dk * dv ([dk, dv] row-major) giving o [dv]; then
 * core[t * Hv * dv + h * dv + e] = td_gated_rmsnorm(o, z + t * Hv * dv + h * dv, norm_w, dv, eps)[e]. */
int td_cu_deltanet(float *core, const float *u, int64_t ldu, const float *z, const float *b, const float *a,
                   const float *a_log, const float *dt_bias, const float *norm_w, float *state, int64_t seq_stride,
                   int64_t Hk, int64_t Hv, int64_t dk, int64_t dv, float eps, const td_cu_groups *g, void *stream);
/* Which kernel td_cu_deltanet runs (the same bits either way): for dk = 128 and dv <= 128 one whose threads keep their
 * state column in registers for the whole launch (loaded once, stored once; td_cu_deltanet_regs(dk, dv) says 1), else
 * the one that reads and writes the state in global memory for every token. TD_CUDA_DN=old in the environment (read
 * once per process) keeps every shape on the latter. By default, where dk = 128, dv is a multiple of 32 up to 128 and
 * g->n_tok is given, the register form runs by warps (32 columns a block, no block barrier per token) with the gated
 * norm after it: the same bits again (TD_CUDA_DN=reg: the register kernel). Test only (not thread-safe;
 * process-wide): td_cu_deltanet_test_mode(1) does what TD_CUDA_DN=old does, 2 the warps where they take the shape, 3
 * what TD_CUDA_DN=reg does, 0 restores the normal choice. */
int td_cu_deltanet_regs(int64_t dk, int64_t dv);
void td_cu_deltanet_test_mode(int mode);

/* ---- Gated DeltaNet, the chunked form (deltanet_chunk.cu) ---------------------------------------------------------
 * The same function as td_cu_deltanet (same inputs, core written after the same gated RMS norm), computed over chunks
 * of TD_CU_DNC_CHUNK = 64 positions anchored at position 0 of the sequence ([64c, 64c + 64)), with other bits than
 * the token-by-token form (within fp32 rounding of it) but the same bits however a sequence's tokens are split into
 * calls: 1 + 63 + 64 + ..., 7 + 200, 300 at once or one at a time give every token's output and the state bit for bit.
 * The engine runs it with TD_CUDA_DN=chunk (src/engine/cuda/forward.c; td_cu_deltanet otherwise). dk, dv <= 128.
 *
 * The state of one sequence for one layer (state_floats = td_cu_deltanet_chunk_state_floats(Hv, dk, dv) floats, all
 * zeros = the empty sequence), per value head h at state + h * (dk dv + 63 (dk + 2 dv + 66)):
 *   S [dk][dv]   the recurrent state at the sequence's last chunk boundary (64 floor(pos / 64)), td_cu_deltanet's
 *                [dk, dv] row-major layout;
 *   K [63][dk]   the l2-normalised k of the open rows (the tokens after that boundary, row r = position 64c + r),
 *   V [63][dv]   their v, G [63] their g (log decay, not cumulative), B [63] their beta,
 *   T [63][64]   their rows of T below (row r: T[r][0 .. r], zeros after), V' [63][dv] their rows of V' below
 *                (cached: a one-token call computes its own row only, from these);
 * only rows r < pos % 64 mean anything (the count is the sequence's position, which the caller knows; nothing else
 * is stored). Snapshots and forks copy these floats; a fork at any position continues bit for bit.
 *
 * One call: the n tokens of ONE sequence at positions pos0, pos0 + 1, ... (batch rows tok[0 .. n), device, in
 * position order; u, z, b, a as td_cu_deltanet), from the state at pos0. scratch: at least
 * td_cu_deltanet_chunk_scratch_floats(n, pos0, Hv, dk, dv) floats on the device, 16-byte aligned (~(n / 64 + 2) Hv
 * 37k floats at dk = dv = 128: 76 MB for 2048 tokens of 16 heads). Three launches on the stream (two for n = 1);
 * errors name the argument (head counts, dims, scratch size or alignment). A one-token call (n = 1: a decode step)
 * appends its row to the open chunk in O(t dk + dk dv) (one block a head) instead of recomputing the chunk; the same
 * bits. The state is 175 KB a head at dk = dv = 128 (2.8 MB a layer at Hv = 16), 2.7x td_cu_deltanet's 64 KB.
 *
 * The order (fp32, every product rounded then summed, no contraction; chains start at +0 and run ascending). Per
 * token row: q, k of key head h / (Hv / Hk) l2-normalised with the sum of squares folded by each lane of a warp over
 * i = lane, lane + 32, ... then the xor butterfly 16, 8, 4, 2, 1; r = 1 / sqrtf(ss + 1e-6f); q = (q r) s with
 * s = (float)(1 / sqrt((double)dk)), k = k r; beta, g as td_cu_deltanet. Per chunk of 64 rows: row r is an open
 * row of the state, a token of the call, or absent (k = q = v = 0, g = beta = 0); q of an open row is 0 (its output
 * was written by an earlier call).
 *   G[r] = G[r - 1] + g[r] (from +0); gamma[r] = expf(G[r]); dte[r] = expf(G[63] - G[r]);
 *   A[i][j] = ((k_i . k_j) beta_i) expf(G_i - G_j) for j < i, else 0 (dot over c ascending);
 *   T = (I + A)^-1: T[i][i] = 1, T[i][j] = -(A[i][j] + sum_{m=j+1}^{i-1} A[i][m] T[m][j]) for j < i, m ascending;
 *   W[t][i] = sum_{m=0}^{t} T[t][m] (k_m[i] (beta_m gamma_m)); U[t][e] = sum_{m=0}^{t} T[t][m] (v_m[e] beta_m);
 *   Qg[t][i] = q_t[i] gamma_t; Kd[s][i] = k_s[i] dte[s]; P[t][s] = (q_t . k_s) expf(G_t - G_s) for s <= t, else 0;
 *   V'[t][e] = U[t][e] - (sum_i W[t][i] S0[i][e]);
 *   o[t][e] = (sum_i Qg[t][i] S0[i][e]) + (sum_{s=0}^{t} P[t][s] V'[s][e])  (two chains, then one add);
 *   a completed chunk only: S[i][e] = (S0[i][e] gamma[63]) + (sum_{s=0}^{63} Kd[s][i] V'[s][e]).
 * Row t's values are functions of S0 and rows <= t only (a later row, absent or present, finite or not, enters
 * nothing before it: every sum over rows stops at t, A and P are 0 above the diagonal by selection, not by a
 * product), so no output depends on where a call ended. Then
 * core = td_gated_rmsnorm(o) with td_cu_deltanet's expression and double tree (128 threads).
 * Batch invariance: a call's values depend on its sequence's state and tokens only. */
#define TD_CU_DNC_CHUNK 64
int64_t td_cu_deltanet_chunk_state_floats(int64_t Hv, int64_t dk, int64_t dv);
int64_t td_cu_deltanet_chunk_scratch_floats(int64_t n, int64_t pos0, int64_t Hv, int64_t dk, int64_t dv);
int td_cu_deltanet_chunk(float *core, const float *u, int64_t ldu, const float *z, const float *b, const float *a,
                         const float *a_log, const float *dt_bias, const float *norm_w, float *state, int64_t Hk,
                         int64_t Hv, int64_t dk, int64_t dv, float eps, const int32_t *tok, int64_t n, int64_t pos0,
                         float *scratch, int64_t scratch_floats, void *stream);
/* Many sequences in one set of launches (a pass's groups; the same bits for each group as td_cu_deltanet_chunk on it
 * alone): group g is sequence grp_seq[g] with its chunk state at state + grp_seq[g] * seq_stride, and the tokens at
 * batch rows grp_tok[grp_off[g] .. grp_off[g + 1]) (device; groups contiguous from grp_off[0] = 0) at positions
 * pos0[g], pos0[g] + 1, ...; a sequence in one group at most. The plan (host, no CUDA calls): with tab NULL,
 * td_cu_deltanet_chunk_plan fills plan's counts (n_ints: the table's size); with tab (n_ints ints) it writes the table
 * (the one-token groups after the others, and the chunks); the caller uploads it and sets plan->tab to the device
 * copy. It returns the scratch floats a launch set needs (16-byte aligned). grp_off, grp_seq, pos0: host. */
typedef struct td_cu_dnc_plan {
    const int32_t *tab; /* device: the table (set by the caller after the upload) */
    int64_t n_pre, n_step, n_chunks, n_tokens, n_ints;
} td_cu_dnc_plan;
int64_t td_cu_deltanet_chunk_plan(int32_t *tab, td_cu_dnc_plan *plan, const int32_t *grp_off, const int32_t *grp_seq,
                                  const int64_t *pos0, int64_t n_groups, int64_t Hv, int64_t dk, int64_t dv);
int td_cu_deltanet_chunk_multi(float *core, const float *u, int64_t ldu, const float *z, const float *b, const float *a,
                               const float *a_log, const float *dt_bias, const float *norm_w, float *state,
                               int64_t seq_stride, int64_t Hk, int64_t Hv, int64_t dk, int64_t dv, float eps,
                               const int32_t *grp_tok, const td_cu_dnc_plan *plan, float *scratch,
                               int64_t scratch_floats, void *stream);
/* Test only (not thread-safe; process-wide), for timing the parts: td_cu_deltanet_chunk runs its first `stages`
 * launches only (1: the prep kernel; 2: and the state kernel; 3, the default: all, the norm too). */
void td_cu_deltanet_chunk_test_stages(int stages);
/* Test only (not thread-safe; process-wide): 0 sends one-token calls through the whole-chunk kernels too (the same
 * bits), 1 (the default) appends them (the step kernel). */
void td_cu_deltanet_chunk_test_step(int on);

#ifdef __cplusplus
}
#endif

#endif
