// tests/cuda/emu: src/kernels/cuda/ptx.cuh's helpers emulated on the CPU by their PTX semantics (emu.h says what the
// emulator is; this file is found first by the -I order, so the kernels compile against it unchanged). Most of the
// selftest's mutations (td_emu_mut; the shuffle's is in emu.h) live here too: a wrong ldmatrix fragment index, a
// wrong mma A-operand order, a cp.async wait_group one group short; each must make the new kernels differ from the
// old ones.
#pragma once
#include "emu.h"

#define TD_DYN_SMEM(T, name) T *name = (T *)td_emu_smem
#define TD_DYN_SMEM16(T, name) T *name = (T *)td_emu_smem

static inline float td_emu_lo(uint32_t v) { return td_emu_bf2f((uint16_t)(v & 0xffff)); }
static inline float td_emu_hi(uint32_t v) { return td_emu_bf2f((uint16_t)(v >> 16)); }

// The shared-memory lines the pending wgmma of each warpgroup read (its thread 0's ops stand for the warpgroup's, as
// they are issued together): a cp.async issued into one of them before the wgmma was waited for may land before the
// tensor cores read it (a hazard the lazy copies below would hide). Counted in td_emu_wg_hazards (tc.cpp's cmp
// reports them as differences).
struct td_emu_wg_range {
    const unsigned char *lo, *hi;
    uint64_t id; // the wgmma's (td_emu_wg)
};
inline std::vector<td_emu_wg_range> td_emu_wg_ranges;
inline int64_t td_emu_wg_hazards = 0;
inline uint64_t td_emu_wg_ops = 0;
inline td_emu_wg_range td_emu_wg_lines(uint64_t desc, int rows, uint64_t id) {
    const uint32_t start = (uint32_t)(desc & 0x3fff) << 4;
    const unsigned char *lo = td_emu_smem_origin + (start & ~127u);
    return td_emu_wg_range{lo, lo + rows * 128, id};
}

// D = A B + C, m16n8k16, lane 4g + q: A row-major (a0: row g, k 2q, 2q + 1; a1: row g + 8; a2: row g, k 8 + 2q ..;
// a3: row g + 8, k 8 + 2q ..), B col-major (b0: k 2q, 2q + 1 of column g; b1: k 8 + 2q ..), C / D: rows g, g + 8,
// columns 2q, 2q + 1. Mutation MMA: a1 and a2 swapped.
inline void td_mma_bf16(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0, uint32_t b1) {
    const int lane = threadIdx.x & 31, w = threadIdx.x / 32;
    td_emu_warp &X = td_emu_wx[w];
    if (td_emu_mut(TD_EMU_MUT_MMA)) std::swap(a1, a2);
    X.a[lane][0] = a0, X.a[lane][1] = a1, X.a[lane][2] = a2, X.a[lane][3] = a3, X.b[lane][0] = b0, X.b[lane][1] = b1;
    __syncwarp();
    auto A = [&](int i, int k) { // row i, column k
        const int g = i & 7, hi_row = i >> 3, q = (k & 7) >> 1, hi_k = k >> 3;
        const uint32_t v = X.a[g * 4 + q][hi_row + 2 * hi_k];
        return (k & 1) ? td_emu_hi(v) : td_emu_lo(v);
    };
    auto B = [&](int k, int j) { // row k, column j
        const int q = (k & 7) >> 1, hi_k = k >> 3;
        const uint32_t v = X.b[j * 4 + q][hi_k];
        return (k & 1) ? td_emu_hi(v) : td_emu_lo(v);
    };
    const int g = lane >> 2, q = lane & 3;
    float out[4];
    for (int c = 0; c < 4; c++) {
        const int i = g + (c >> 1) * 8, j = 2 * q + (c & 1);
        float acc = d[c];
        for (int k = 0; k < 16; k++) acc = fmaf(A(i, k), B(k, j), acc);
        out[c] = acc;
    }
    __syncwarp();
    for (int c = 0; c < 4; c++) d[c] = out[c];
}
inline void td_mma_bf16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    td_mma_bf16(d, a[0], a[1], a[2], a[3], b0, b1);
}

inline uint32_t td_pack_bf16(float lo, float hi) {
    return (uint32_t)td_emu_f2bf(lo) | (uint32_t)td_emu_f2bf(hi) << 16;
}

// ex2.approx.ftz.f32: 2^x in float (the hardware's last bits may differ: the emulator holds kernels to each other and
// to double references, never to the GPU's bits), subnormal inputs and results flushed to +0.
inline float td_ex2(float x) {
    if (std::fpclassify(x) == FP_SUBNORMAL) x = 0.0f;
    const float y = exp2f(x);
    return std::fpclassify(y) == FP_SUBNORMAL ? 0.0f : y;
}

// ldmatrix x4: lane l gives the address of row l % 8 of matrix l / 8; without .trans lane 4g + q gets row g,
// columns 2q, 2q + 1 of each matrix; with .trans rows 2q, 2q + 1 of column g. Mutation LDSM: matrices 1 and 2
// swapped (as a lane address computed with the two bits of its matrix index exchanged), without .trans only.
inline void td_emu_ldsm(uint32_t (&r)[4], const void *row, bool trans) {
    const int lane = threadIdx.x & 31, w = threadIdx.x / 32;
    if (((uintptr_t)row & 15) != 0) {
        fprintf(stderr, "ldmatrix: row address not 16-byte aligned\n");
        abort();
    }
    td_emu_wx[w].addr[lane] = row;
    __syncwarp();
    const int g = lane / 4, q = lane % 4;
    for (int m = 0; m < 4; m++) {
        uint16_t lo, hi;
        if (!trans) {
            const uint16_t *p = (const uint16_t *)td_emu_wx[w].addr[8 * m + g];
            lo = p[2 * q], hi = p[2 * q + 1];
        } else {
            lo = ((const uint16_t *)td_emu_wx[w].addr[8 * m + 2 * q])[g];
            hi = ((const uint16_t *)td_emu_wx[w].addr[8 * m + 2 * q + 1])[g];
        }
        r[m] = (uint32_t)lo | (uint32_t)hi << 16;
    }
    __syncwarp();
    if (!trans && td_emu_mut(TD_EMU_MUT_LDSM)) std::swap(r[1], r[2]);
}
inline void td_ldsm_x4(uint32_t (&r)[4], const void *smem_row) { td_emu_ldsm(r, smem_row, false); }
inline void td_ldsm_x4_t(uint32_t (&r)[4], const void *smem_row) { td_emu_ldsm(r, smem_row, true); }

// cp.async as late as PTX allows: a copy lands at the wait_group that requires it. Mutation WAIT: every
// wait_group N > 0 waits as N + 1 (one group too few: a stage read before it lands); wait_group 0 stays exact.
inline void td_cp16(void *smem, const void *g) {
    if (((uintptr_t)smem & 15) || ((uintptr_t)g & 15)) {
        fprintf(stderr, "cp.async: address not 16-byte aligned\n");
        abort();
    }
    for (const td_emu_wg_range &r : td_emu_wg_ranges)
        if ((const unsigned char *)smem < r.hi && (const unsigned char *)smem + 16 > r.lo) td_emu_wg_hazards++;
    td_emu_cpq->open.push_back(td_emu_cp{smem, g});
}
inline void td_cp_commit(void) { td_emu_cpq->groups.push_back(td_emu_cpq->open), td_emu_cpq->open.clear(); }
inline void td_emu_cp_wait(int n) {
    if (n > 0 && td_emu_mut(TD_EMU_MUT_WAIT)) n++;
    while ((int)td_emu_cpq->groups.size() > n) {
        for (const td_emu_cp &o : td_emu_cpq->groups.front()) memcpy(o.dst, o.src, 16);
        td_emu_cpq->groups.pop_front();
    }
}
template <int N> inline void td_cp_wait(void) { td_emu_cp_wait(N); }

// ---- wgmma ----
// The shared window: address 0 at td_emu_smem_origin (1024-byte aligned, as the swizzle's bits need).
inline uint32_t td_smem_addr(const void *p) {
    const ptrdiff_t o = (const unsigned char *)p - td_emu_smem_origin;
    if (o < 0 || o >= (1 << 18)) {
        fprintf(stderr, "shared address of a pointer outside the dynamic shared memory\n");
        abort();
    }
    return (uint32_t)o;
}
inline uint64_t td_wg_desc(const void *p) {
    const uint64_t a = td_smem_addr(p);
    return ((a & 0x3ffffu) >> 4) | (uint64_t)(16 >> 4) << 16 | (uint64_t)(1024 >> 4) << 32 | (uint64_t)1 << 62;
}
// Element (row r, k) of a K-major bf16 operand by its descriptor, as PTX lays out the 128-byte swizzle: rows 128
// bytes apart in groups of 8 (the descriptor's SBO between groups), k's 16-byte chunk XORed with bits 7-9 of the
// address (the row within its group when the tile is 1024-byte aligned).
inline float td_emu_wg_at(uint64_t desc, int r, int k) {
    if ((desc >> 62) != 1) {
        fprintf(stderr, "wgmma: a descriptor that is not the 128-byte swizzle\n");
        abort();
    }
    const uint32_t start = (uint32_t)(desc & 0x3fff) << 4, sbo = (uint32_t)((desc >> 32) & 0x3fff) << 4;
    const uint32_t pre = start + (uint32_t)(r / 8) * sbo + (uint32_t)(r % 8) * 128 + (uint32_t)(k / 8) * 16 +
                         (uint32_t)(k % 8) * 2;
    const uint32_t phys = pre ^ (((pre >> 7) & 7) << 4);
    uint16_t v;
    memcpy(&v, td_emu_smem_origin + phys, 2);
    return td_emu_bf2f(v);
}
inline uint64_t td_wg_desc_mn(const void *p, uint32_t lbo) {
    const uint64_t a = td_smem_addr(p);
    return ((a & 0x3ffffu) >> 4) | (uint64_t)((lbo >> 4) & 0x3fffu) << 16 | (uint64_t)(1024 >> 4) << 32 |
           (uint64_t)1 << 62;
}
// Element (k, n) of an MN-major bf16 operand by its descriptor: k's row 128 bytes into its group of 8 (the SBO
// between groups), n's 16-byte chunk within its block of 64 (the LBO between blocks), the chunk XORed with bits 7-9
// of the address as td_emu_wg_at's.
inline float td_emu_wg_at_mn(uint64_t desc, int n, int k) {
    if ((desc >> 62) != 1) {
        fprintf(stderr, "wgmma: a descriptor that is not the 128-byte swizzle\n");
        abort();
    }
    const uint32_t start = (uint32_t)(desc & 0x3fff) << 4, lbo = (uint32_t)((desc >> 16) & 0x3fff) << 4,
                   sbo = (uint32_t)((desc >> 32) & 0x3fff) << 4;
    const uint32_t pre = start + (uint32_t)(k / 8) * sbo + (uint32_t)(k % 8) * 128 + (uint32_t)(n / 64) * lbo +
                         (uint32_t)(n % 64 / 8) * 16 + (uint32_t)(n % 8) * 2;
    const uint32_t phys = pre ^ (((pre >> 7) & 7) << 4);
    uint16_t v;
    memcpy(&v, td_emu_smem_origin + phys, 2);
    return td_emu_bf2f(v);
}
// wgmma.mma_async m64nNk16 as late as PTX allows: it reads shared memory and writes the accumulators at the
// wait_group that requires it (a buffer overwritten before that wait is read overwritten). Thread 32 w + 4 g + q of
// the warpgroup: d[4 j + c] = row 16 w + g + 8 (c >> 1), column 8 j + 2 q + (c & 1), j < N / 8; per element the fmaf
// chain over k of td_mma_bf16's emulation (so the same bits as it, for the same operands).
inline void td_emu_wg_run(const td_emu_wg &o) {
    const int t = threadIdx.x & 127, w = t / 32, g = (t & 31) / 4, q = t & 3;
    if (t == 0) { // no longer pending: its lines are free
        for (size_t i = 0; i < td_emu_wg_ranges.size();) {
            if (td_emu_wg_ranges[i].id == o.id) td_emu_wg_ranges.erase(td_emu_wg_ranges.begin() + (ptrdiff_t)i);
            else i++;
        }
    }
    for (int j = 0; j < o.n / 8; j++)
        for (int c = 0; c < 4; c++) {
            const int r = 16 * w + g + 8 * (c >> 1), n = 8 * j + 2 * q + (c & 1);
            float acc = o.d[4 * j + c];
            for (int k = 0; k < 16; k++)
                acc = o.rt ? fmaf(td_emu_bf2f(o.ar[c >> 1][k]), td_emu_wg_at_mn(o.db, n, k), acc)
                           : fmaf(td_emu_wg_at(o.da, r, k), td_emu_wg_at(o.db, n, k), acc);
            o.d[4 * j + c] = acc;
        }
}
template <int N> inline void td_wgmma_bf16(float (&d)[N / 2], uint64_t da, uint64_t db) {
    const uint64_t id = ++td_emu_wg_ops;
    td_emu_cpq->wg_open.push_back(td_emu_wg{d, da, db, N, id, false, {}});
    if ((threadIdx.x & 127) == 0)
        td_emu_wg_ranges.push_back(td_emu_wg_lines(da, 64, id)), td_emu_wg_ranges.push_back(td_emu_wg_lines(db, N, id));
}
// A from registers: the warp's fragments exchanged at the issue (as td_mma_bf16's; mutation MMA swaps a1 and a2
// likewise), the thread's two rows kept with the op; B's lines: its 16 k rows.
inline void td_wgmma_bf16_rt64(float (&d)[32], const uint32_t (&a)[4], uint64_t db) {
    const int lane = threadIdx.x & 31, w = threadIdx.x / 32, g = lane / 4;
    td_emu_warp &X = td_emu_wx[w];
    X.a[lane][0] = a[0], X.a[lane][1] = a[1], X.a[lane][2] = a[2], X.a[lane][3] = a[3];
    if (td_emu_mut(TD_EMU_MUT_MMA)) std::swap(X.a[lane][1], X.a[lane][2]);
    __syncwarp();
    const uint64_t id = ++td_emu_wg_ops;
    td_emu_wg o{d, 0, db, 64, id, true, {}};
    for (int h = 0; h < 2; h++)
        for (int k = 0; k < 16; k++) {
            const uint32_t v = X.a[g * 4 + ((k & 7) >> 1)][h + 2 * (k >> 3)];
            o.ar[h][k] = (k & 1) ? (uint16_t)(v >> 16) : (uint16_t)(v & 0xffffu);
        }
    __syncwarp();
    td_emu_cpq->wg_open.push_back(o);
    if ((threadIdx.x & 127) == 0) td_emu_wg_ranges.push_back(td_emu_wg_lines(db, 16, id));
}
inline void td_wg_fence(void) {}
inline void td_wg_commit(void) { td_emu_cpq->wg_groups.push_back(td_emu_cpq->wg_open), td_emu_cpq->wg_open.clear(); }
// Mutation WAIT: a wait_group N > 0 waits as N + 1, as cp.async's.
template <int N> inline void td_wg_wait(void) {
    int n = N;
    if (n > 0 && td_emu_mut(TD_EMU_MUT_WAIT)) n++;
    while ((int)td_emu_cpq->wg_groups.size() > n) {
        for (const td_emu_wg &o : td_emu_cpq->wg_groups.front()) td_emu_wg_run(o);
        td_emu_cpq->wg_groups.pop_front();
    }
    __syncwarp(); /* .sync.aligned: the warp's lanes all past it together (its lane 0 may then free the stage) */
}
inline void td_fence_async_smem(void) {}
inline void td_wg_reg(float &) {}

// ---- mbarriers ----
// The barrier's 8 bytes: the arrivals its current phase still needs, the count it was made with, the phases completed
// (their low 8 bits), the bytes of bulk copies the phase still waits for (expect_tx adds, a landed copy takes). A
// phase completes when both are at zero.
struct td_emu_mbar {
    uint32_t pending : 12, count : 12, phase : 8;
    int32_t tx;
};
static_assert(sizeof(td_emu_mbar) == 8, "an mbarrier is 8 bytes");
inline void td_mbar_init(uint64_t *b, unsigned count) {
    if (count < 1 || count > 4095) {
        fprintf(stderr, "mbarrier: a count of %u (the emulator takes 1 .. 4095)\n", count);
        abort();
    }
    td_emu_mbar m{};
    m.pending = m.count = count;
    memcpy(b, &m, 8);
}
inline void td_emu_mbar_done(td_emu_mbar &m) {
    if (m.pending == 0 && m.tx == 0) m.phase++, m.pending = m.count, td_emu_progress++;
}
inline void td_emu_mbar_arrive(uint64_t *b, unsigned expect_tx = 0) {
    td_emu_mbar m;
    memcpy(&m, b, 8);
    if (m.pending == 0) {
        fprintf(stderr, "mbarrier: an arrival on a barrier never initialised, or past the phase's count\n");
        abort();
    }
    m.tx += (int32_t)expect_tx, m.pending--;
    td_emu_progress++; /* the barrier's state changed: progress for the scheduler's deadlock check */
    td_emu_mbar_done(m);
    memcpy(b, &m, 8);
}
// bytes of bulk copies landed (complete_tx)
inline void td_emu_mbar_tx(uint64_t *b, unsigned bytes) {
    td_emu_mbar m;
    memcpy(&m, b, 8);
    m.tx -= (int32_t)bytes;
    td_emu_mbar_done(m);
    memcpy(b, &m, 8);
}
// an arrival lets the threads it frees run before the arriving one goes on (so a stage freed too early is written
// while the wgmma that read it is still pending: a hazard, tc.cpp)
inline void td_mbar_arrive(uint64_t *b, bool pred) {
    if (pred) td_emu_mbar_arrive(b), td_emu_yield();
}
// cp.async.mbarrier.arrive.noinc: every copy this thread issued before (committed or not) moves to the barrier's
// deferred list; they land and arrive when a waiter needs them (td_mbar_wait)
inline void td_cp_arrive(uint64_t *b) {
    td_emu_deferred d{b, {}, {}, 0};
    for (const auto &g : td_emu_cpq->groups) d.cps.insert(d.cps.end(), g.begin(), g.end());
    d.cps.insert(d.cps.end(), td_emu_cpq->open.begin(), td_emu_cpq->open.end());
    td_emu_cpq->groups.clear(), td_emu_cpq->open.clear();
    td_emu_mbar_deferred.push_back(std::move(d));
    td_emu_progress++; /* an arrival to come: progress for the scheduler's deadlock check */
}
// try_wait.parity in a loop: done once the current phase's parity differs from `parity`
inline void td_mbar_wait(uint64_t *b, unsigned parity) {
    for (;;) {
        td_emu_mbar m;
        memcpy(&m, b, 8);
        if ((m.phase & 1u) != (parity & 1u)) return;
        bool landed = false;
        for (size_t i = 0; i < td_emu_mbar_deferred.size();) {
            if (td_emu_mbar_deferred[i].bar != b) {
                i++;
                continue;
            }
            const td_emu_deferred d = std::move(td_emu_mbar_deferred[i]);
            td_emu_mbar_deferred.erase(td_emu_mbar_deferred.begin() + (ptrdiff_t)i);
            if (d.land) {
                d.land(), td_emu_mbar_tx(b, d.tx);
            } else {
                for (const td_emu_cp &o : d.cps) memcpy(o.dst, o.src, 16);
                td_emu_mbar_arrive(b);
            }
            landed = true;
            break; /* one arrival, then look again */
        }
        if (!landed) td_emu_yield();
    }
}

// ---- the bulk tensor copy (TMA) ----
// The map's fields, kept in its 128 bytes by the emulated encoder (which checks what the driver checks for these
// uses: rank 2 .. 4, 16-byte aligned base and strides, box sides of 1 .. 256; and a box row of exactly the
// swizzle's 128 bytes, the one width emulated).
struct td_emu_tmap {
    const unsigned char *base;
    int rank;
    uint32_t box[4];
    uint64_t dims[4], stride[4]; // stride[0]: 2 (a bf16)
};
static_assert(sizeof(td_emu_tmap) <= sizeof(CUtensorMap), "the map's fields fit its 128 bytes");
inline int td_tma_map(CUtensorMap *m, const void *base, int rank, const uint64_t *dims, const uint64_t *stride,
                      const uint32_t *box) {
    td_emu_tmap t{};
    if (rank < 2 || rank > 4 || ((uintptr_t)base & 15) || box[0] != 64) return -1;
    t.base = (const unsigned char *)base, t.rank = rank, t.stride[0] = 2;
    for (int i = 0; i < rank; i++) {
        if (dims[i] < 1 || box[i] < 1 || box[i] > 256 || (i > 0 && (stride[i - 1] & 15))) return -1;
        t.dims[i] = dims[i], t.box[i] = box[i];
        if (i > 0) t.stride[i] = stride[i - 1];
    }
    memset(m, 0, sizeof *m);
    memcpy(m, &t, sizeof t);
    return 0;
}
// mbarrier.arrive.expect_tx: one arrival that also makes the phase wait for `bytes` of bulk copies (the producer goes
// on without yielding: it runs as far ahead as its own waits let it, so a missing wait shows)
inline void td_mbar_expect_tx(uint64_t *b, unsigned bytes) { td_emu_mbar_arrive(b, bytes); }
// cp.async.bulk.tensor ... complete_tx: the box at coordinates c lands (as late as PTX allows: when a waiter on b
// needs it) dense, dimension 0 fastest, from dst on, each element's address's 16-byte chunk index XORed with its bits
// 7-9 (the 128-byte swizzle), elements outside the tensor as zeros; its bytes (all of the box's) then count on b.
// dst must be 1024-byte aligned (the layout td_wg_desc reads). A copy into lines a pending wgmma reads is a hazard.
inline void td_emu_tma_load(void *dst, const CUtensorMap *map, const int (&c)[4], uint64_t *b) {
    td_emu_tmap t;
    memcpy(&t, map, sizeof t);
    const uint32_t d0 = td_smem_addr(dst);
    if ((d0 & 1023) || !t.base) {
        fprintf(stderr, "cp.async.bulk.tensor: %s\n", t.base ? "destination not 1024-byte aligned" : "no tensor map");
        abort();
    }
    unsigned n = 1;
    for (int i = 0; i < t.rank; i++) n *= t.box[i];
    const unsigned bytes = 2 * n;
    for (const td_emu_wg_range &r : td_emu_wg_ranges)
        if ((const unsigned char *)dst < r.hi && (const unsigned char *)dst + bytes > r.lo) td_emu_wg_hazards++;
    auto land = [t, d0, c, n] {
        for (unsigned e = 0; e < n; e++) {
            unsigned rest = e;
            bool in = true;
            int64_t off = 0;
            for (int i = 0; i < t.rank; i++) {
                const int64_t at = (int64_t)c[i] + rest % t.box[i];
                rest /= t.box[i];
                in = in && at >= 0 && at < (int64_t)t.dims[i];
                off += at * (int64_t)t.stride[i];
            }
            const uint32_t pre = d0 + 2 * e, phys = pre ^ (((pre >> 7) & 7) << 4);
            uint16_t v = 0;
            if (in) memcpy(&v, t.base + off, 2);
            memcpy(td_emu_smem_origin + phys, &v, 2);
        }
    };
    td_emu_mbar_deferred.push_back(td_emu_deferred{b, {}, land, bytes});
    td_emu_progress++; /* bytes to come: progress for the scheduler's deadlock check */
}
inline void td_tma_load_2d(void *dst, const CUtensorMap *map, int c0, int c1, uint64_t *b) {
    td_emu_tma_load(dst, map, {c0, c1, 0, 0}, b);
}
inline void td_tma_load_4d(void *dst, const CUtensorMap *map, int c0, int c1, int c2, int c3, uint64_t *b) {
    td_emu_tma_load(dst, map, {c0, c1, c2, c3}, b);
}

inline void td_prefetch_l2(const void *) {}

// griddepcontrol.wait: the emulator runs one kernel at a time; the inputs a test names as the kernels before's
// outputs stay poisoned until every thread of the block is here (emu.h, td_emu_pdl_inputs).
inline void td_pdl_wait(void) { td_emu_pdl_wait(); }
