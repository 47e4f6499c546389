// tests/cuda/emu: the emulator's block runner and its entry point (emu.h says what is emulated; tc.cpp and attn.cpp
// hold the comparisons; tests/test_cuda_emu.sh builds and runs it).
// Usage: emu tc [quick | few | many | all]     tc_stream vs tc_skinny, tc_wide vs tc_tile, bit for bit
//        emu attn [quick | all]                the 64-row vs the 16-row bf16 attention kernel, and a double reference
//        emu selftest                          each mutation (kernels/cuda/ptx.cuh) on the new kernels must be caught
#include <atomic>
#include <cstring>

#include "emu.h"

thread_local dim3v threadIdx, blockIdx;
thread_local std::vector<td_emu_cp> td_emu_cp_open;
thread_local std::deque<std::vector<td_emu_cp>> td_emu_cp_groups;
unsigned char *td_emu_smem;
std::barrier<> *td_emu_block_bar;
std::barrier<> *td_emu_warp_bar[32];
td_emu_warp td_emu_wx[32];
int td_emu_mutation;
bool td_emu_active;

int64_t td_emu_launch(unsigned gx, unsigned gy, unsigned gz, int nt, size_t dyn, int poison, void (*body)(void *),
                      void *arg) {
    if (nt % 32 != 0 || nt > 1024) {
        fprintf(stderr, "emu: a block of %d threads (whole warps, at most 1024)\n", nt);
        abort();
    }
    std::vector<unsigned char> smem(dyn + 64);
    td_emu_smem = (unsigned char *)(((uintptr_t)smem.data() + 15) & ~(uintptr_t)15);
    // one std::thread per CUDA thread for the whole grid, the blocks one after the other (thread 0 poisons the
    // shared memory between two block-wide barriers)
    std::atomic<int64_t> left{0};
    std::barrier<> bb(nt);
    std::vector<std::unique_ptr<std::barrier<>>> wb;
    for (int w = 0; w < nt / 32; w++) wb.emplace_back(new std::barrier<>(32)), td_emu_warp_bar[w] = wb.back().get();
    td_emu_block_bar = &bb;
    std::vector<std::thread> th;
    for (int t = 0; t < nt; t++)
        th.emplace_back([&, t] {
            threadIdx.x = t;
            for (unsigned bz = 0; bz < gz; bz++)
                for (unsigned by = 0; by < gy; by++)
                    for (unsigned bx = 0; bx < gx; bx++) {
                        bb.arrive_and_wait();
                        if (t == 0) memset(td_emu_smem, poison, dyn);
                        bb.arrive_and_wait();
                        blockIdx.x = bx, blockIdx.y = by, blockIdx.z = bz;
                        body(arg);
                    }
            int64_t n = (int64_t)td_emu_cp_open.size();
            for (auto &g : td_emu_cp_groups) n += (int64_t)g.size();
            td_emu_cp_open.clear(), td_emu_cp_groups.clear();
            left += n;
        });
    for (auto &t : th) t.join();
    return left;
}

int td_emu_tc(const char *what);   // tc.cpp: 0 when the new kernels gave the old ones' bits
int td_emu_attn(const char *what); // attn.cpp: 0 when every check passed

int main(int argc, char **argv) {
    const char *fam = argc > 1 ? argv[1] : "", *what = argc > 2 ? argv[2] : "quick";
    if (!strcmp(fam, "tc")) return td_emu_tc(what) != 0;
    if (!strcmp(fam, "attn")) return td_emu_attn(what) != 0;
    if (!strcmp(fam, "selftest")) {
        struct {
            const char *fam, *name;
            int m;
        } const muts[] = {{"tc", "ldmatrix matrices 1 and 2 swapped", TD_EMU_MUT_LDSM},
                          {"tc", "mma A registers 1 and 2 swapped", TD_EMU_MUT_MMA},
                          {"tc", "cp.async wait_group one group short", TD_EMU_MUT_WAIT},
                          {"attn", "ldmatrix matrices 1 and 2 swapped", TD_EMU_MUT_LDSM},
                          {"attn", "mma A registers 1 and 2 swapped", TD_EMU_MUT_MMA},
                          {"attn", "shuffle xor partner one lane off", TD_EMU_MUT_SHFL}};
        int missed = 0;
        for (const auto &m : muts) {
            printf("selftest: %s kernels, %s in the new kernel\n", m.fam, m.name);
            td_emu_mutation = m.m;
            const int bad = !strcmp(m.fam, "tc") ? td_emu_tc("quick") : td_emu_attn("quick");
            printf("selftest: %s\n", bad ? "caught" : "NOT CAUGHT");
            missed += !bad;
        }
        td_emu_mutation = TD_EMU_MUT_NONE;
        printf(missed ? "selftest: %d mutations NOT caught\n" : "selftest: every mutation caught\n", missed);
        return missed != 0;
    }
    fprintf(stderr, "usage: emu tc [quick|few|many|all] | emu attn [quick|all] | emu selftest\n");
    return 2;
}
