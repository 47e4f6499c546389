/* The attention test harness, shared by the CUDA tests of td_cu_attention and td_cu_attention_bf16: a KV cache of
 * random keys and values on the host and the device, one launch cut as a pass cuts it, the CPU reference
 * (td_attn_rows_ref) for every row, and the pieces both tests' checks repeat. Failed CUDA calls count in
 * td_test_failures (cuda_test.h). */
#ifndef TD_TESTS_ATTN_CASE_H
#define TD_TESTS_ATTN_CASE_H

#include <stddef.h>
#include <stdint.h>

/* n_seq sequences of n_ctx positions in shuffled cache rows (n_rows = n_ctx n_seq + 13); sequence 1 shares sequence
 * 0's first 50 cells (a shared prefix). With bf16, kr / vr hold the cache's values rounded to bf16 (as float: the
 * reference's cache in bf16 mode) and kb / vb the same values as bf16, both also on the device (kv_twin's caches),
 * else NULL. kvf: the format of kc and kc_d (TD_CU_KV_*; f16 says TD_CU_KV_F16). */
typedef struct kvcase {
    int64_t Hq, Hkv, hd, qhs, kv_dim, n_ctx, n_seq, n_rows;
    int f16, bf16, kvf;
    void *kc, *vc; /* host: float or uint16 */
    float *kr, *vr;
    uint16_t *kb, *vb;
    int32_t *cells; /* [n_seq, n_ctx] */
    void *kc_d, *vc_d, *kr_d, *vr_d, *kb_d, *vb_d;
    int32_t *cells_d;
} kvcase;

/* Draws every key then value (k, v per element, uniform in [-1.5, 1.5] and [-1, 1]), then the shuffle, from *seed. */
kvcase kv_new(uint64_t *seed, int64_t Hq, int64_t Hkv, int64_t hd, int64_t qhs, int f16, int64_t n_ctx, int64_t n_seq,
              int bf16);
void kv_free(kvcase *c);

/* A view of a bf16 case (never given to kv_free) whose cache (kc, kc_d and kvf) is another of its three: the bf16 twin
 * (kb: its values rounded to bf16, as TD_CU_KV_BF16), or with `rounded` the f32 cache of the same rounded values (kr);
 * the same cells, rows and reference (ref_attention on the rounded values either way). */
kvcase kv_twin(const kvcase *c, int rounded);
/* "f32", "f16" or "bf16": the format of the case's cache. */
const char *kv_name(const kvcase *c);

/* How a launch is cut: tokens per tile (0: td_cu_attn_tile_tokens, or td_cu_attn_tile_tokens_bf16 in bf16 mode), the
 * sliding window, the test mode (td_cu_attention_test_mode: 0 normal, 1 one block over all super-chunks, 2 every row
 * through the combine, 3 split by chunks), whether the groups' token order is reversed (tiles then hold other
 * neighbours), the bf16 kernel's rows per tile (td_cu_attention_rows_test: 0 the environment's, 16, 64, 128). */
typedef struct attn_cut {
    int64_t qt, window;
    int mode, reverse, rows;
} attn_cut;

/* out [T, Hq hd] (malloc) from q [T, Hq qhs] through td_cu_attention_bf16 (bf16) or td_cu_attention, the tokens
 * grouped by sequence as a pass groups them and tiled as cut says; the output buffer is poisoned (NaN) before the
 * launch. */
float *dev_attention(const kvcase *c, const float *q, const int32_t *seq, const int32_t *pos, int64_t T,
                     const int32_t *cells_d, attn_cut cut, int bf16);

/* td_attn_rows_ref for every row (malloc), with the window as the CPU's attention task applies it; for a bf16 case
 * on the bf16-rounded q and cache. */
float *ref_attention(const kvcase *c, const float *q, const int32_t *seq, const int32_t *pos, int64_t T,
                     int64_t window);

/* The positions at the chunk (64) and super-chunk (512) edges and past 2048 the accuracy cases visit. */
#define ATTN_N_EDGE 10
extern const int32_t attn_edge[ATTN_N_EDGE];

/* The accuracy cases: for each case {Hq, Hkv, hd, q head stride, T} and each cache type (f32, then f16): a kvcase of
 * 3 sequences of 3100 positions, q [T, Hq qhs] in [-3, 3), the rows' sequences random and their positions
 * attn_edge[(t + case index) % ATTN_N_EDGE] for the first ATTN_N_EDGE rows, random after (a lone row at 3000), all
 * drawn from *seed in that order; then for no window and a window (700, or 100 at odd case indices) one launch
 * (dev_attention in bf16 mode or not, the default cut) and ref_attention, handed to check. */
typedef struct attn_acc {
    const char *name; /* "Hq=.. Hkv=.. hd=.. T=.. kv f32|f16 window .." */
    const kvcase *c;
    const float *q;
    const int32_t *seq, *pos;
    int64_t T, window;
    const float *out, *ref; /* [T, Hq hd] */
} attn_acc;
void attn_accuracy(uint64_t *seed, const int64_t (*cases)[5], size_t n_cases, int bf16,
                   void (*check)(const attn_acc *));

/* The one-block, all-through-the-combine and by-chunks paths (test modes 1, 2, 3) of the launch that gave out (mode
 * 0, the default tiles), each bit for bit against it. */
void attn_modes_bits(const kvcase *c, const float *q, const int32_t *seq, const int32_t *pos, int64_t T,
                     int64_t window, const float *out, int bf16);

/* One run of the invariance tests: q [T, Hq qhs] random in [-3, 3) with the target's q row at row `at`; the rows'
 * sequences (of 3) and positions (below n_ctx) random, or with own_seq all in the target's sequence at consecutive
 * positions tpos - at + t (t where that is negative); the target row in sequence 0 at tpos; with moved, the
 * target's sequence moved to slot 2 of a new cell table whose other slots are random rows, its keys and values at
 * positions 0 .. tpos to other cache rows (the same bytes, written over c's device cache, kc_d, and not restored: the
 * last run on a case or view), the other rows of sequence 2 to sequence 1; drawn from *seed in that order. Launched
 * as cut says (dev_attention), returns the target row's output (Hq hd floats, malloc). */
float *attn_target_row(const kvcase *c, uint64_t *seed, const float *target, int32_t tpos, int64_t T, int64_t at,
                       int own_seq, int moved, attn_cut cut, int bf16);

#endif
