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

inline void td_prefetch_l2(const void *) {}

// griddepcontrol.wait: the emulator runs one kernel at a time, so there is never a kernel before it still running.
inline void td_pdl_wait(void) {}
