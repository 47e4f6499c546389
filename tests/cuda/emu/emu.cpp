// tests/cuda/emu: the emulator's block runner and its entry point (emu.h says what is emulated; tc.cpp and attn.cpp
// hold the comparisons; tests/test_cuda_emu.sh builds and runs it).
// Usage: emu tc [quick | few | many | all]     tc_stream vs tc_skinny, tc_wide vs tc_tile, bit for bit
//        emu attn [quick | all]                the 64-row vs the 16-row bf16 attention kernel, a double reference, bf16 caches
//        emu dn [quick]                        the chunked DeltaNet: split invariance, double references
//        emu selftest                          each mutation (kernels/cuda/ptx.cuh) on the new kernels must be caught
#include <cstring>
#include <csetjmp>
#include <ucontext.h>

#include "emu.h"

dim3v threadIdx, blockIdx, gridDim, blockDim;
td_emu_cps *td_emu_cpq;
unsigned char *td_emu_smem, *td_emu_smem_origin;
td_emu_bar td_emu_block_bar, td_emu_warp_bar[32];
td_emu_warp td_emu_wx[32];
int td_emu_mutation;
bool td_emu_active;
std::vector<td_emu_buf> td_emu_produced;
unsigned td_emu_progress;
std::vector<td_emu_deferred> td_emu_mbar_deferred;

namespace {
// A fiber starts by swapcontext (makecontext's stack) and then switches by _setjmp / _longjmp (no system call).
struct fiber {
    ucontext_t ctx;
    jmp_buf jb;
    char *stack;
    bool started, done, at_pdl; // at_pdl: reached td_pdl_wait
    td_emu_cps cps;
};
constexpr size_t STACK = 1 << 20; // per fiber (malloc'd once, touched as deep as a kernel goes)
fiber fibers[1024];
ucontext_t sched;
jmp_buf sched_jb;
int cur;
unsigned pdl_arrivals;                       // fibers that reached td_pdl_wait (the scheduler's progress)
bool pdl_back;                               // the block's poisoned inputs have their contents back
std::vector<std::vector<unsigned char>> kept; // their contents meanwhile
void (*cur_body)(void *);
void *cur_arg;

__attribute__((noinline)) void switch_in(int t) { // its frame holds sched_jb while the fiber runs
    cur = t;
    threadIdx.x = (unsigned)t;
    td_emu_cpq = &fibers[t].cps;
    if (!_setjmp(sched_jb)) {
        if (!fibers[t].started) {
            fibers[t].started = true;
            swapcontext(&sched, &fibers[t].ctx);
        } else
            _longjmp(fibers[t].jb, 1);
    }
}
void entry() {
    cur_body(cur_arg);
    fibers[cur].done = true;
    _longjmp(sched_jb, 1);
}
// a fiber at the start of the kernel (getcontext, which returns twice, kept out of the scheduler's frame)
__attribute__((noinline)) void init(fiber &f) {
    if (!f.stack && !(f.stack = (char *)malloc(STACK))) {
        fprintf(stderr, "emu: out of memory\n");
        abort();
    }
    getcontext(&f.ctx);
    f.ctx.uc_stack.ss_sp = f.stack, f.ctx.uc_stack.ss_size = STACK, f.ctx.uc_link = &sched;
    makecontext(&f.ctx, entry, 0);
    f.started = f.done = f.at_pdl = false;
    f.cps.open.clear(), f.cps.groups.clear(), f.cps.wg_open.clear(), f.cps.wg_groups.clear();
}
} // namespace

// Arrive at b; the last to arrive releases the others. The fiber waits by giving the scheduler its turn.
void td_emu_wait(td_emu_bar &b) {
    if (++b.arrived == b.need) {
        b.arrived = 0, b.gen++;
        return;
    }
    const unsigned g = b.gen, me = (unsigned)cur;
    while (b.gen == g)
        if (!_setjmp(fibers[me].jb)) _longjmp(sched_jb, 1);
}

// The running fiber gives the scheduler its turn (it runs again in the scheduler's next pass).
void td_emu_yield() {
    const unsigned me = (unsigned)cur;
    if (!_setjmp(fibers[me].jb)) _longjmp(sched_jb, 1);
}

// The block's produced inputs poisoned (pdl_back false), or given their contents back.
static void pdl_poison() {
    kept.resize(td_emu_produced.size());
    for (size_t i = 0; i < td_emu_produced.size(); i++) {
        const td_emu_buf &b = td_emu_produced[i];
        kept[i].assign((unsigned char *)b.p, (unsigned char *)b.p + b.bytes);
        memset(b.p, 0xff, b.bytes);
    }
    pdl_back = td_emu_produced.empty();
}
static void pdl_restore() {
    if (pdl_back) return;
    for (size_t i = 0; i < td_emu_produced.size(); i++)
        memcpy(td_emu_produced[i].p, kept[i].data(), td_emu_produced[i].bytes);
    pdl_back = true;
}

// Wait until every thread of the block has reached its wait or ended, then the inputs come back (once a block).
void td_emu_pdl_wait() {
    const int me = cur;
    if (!fibers[me].at_pdl) fibers[me].at_pdl = true, pdl_arrivals++;
    for (;;) {
        bool all = true;
        for (int t = 0; t < (int)blockDim.x && all; t++) all = fibers[t].done || fibers[t].at_pdl;
        if (all) break;
        if (!_setjmp(fibers[me].jb)) _longjmp(sched_jb, 1);
    }
    if (!td_emu_mut(TD_EMU_MUT_PDL)) pdl_restore(); /* the mutation: they stay poisoned until the block ends */
}

int64_t td_emu_launch(unsigned gx, unsigned gy, unsigned gz, int nt, size_t dyn, int poison, void (*body)(void *),
                      void *arg) {
    if (nt % 32 != 0 || nt > 1024) {
        fprintf(stderr, "emu: a block of %d threads (whole warps, at most 1024)\n", nt);
        abort();
    }
    // the shared window's address 0 at a 1024-byte boundary (the 128-byte swizzle's bits are those of the address),
    // the dynamic shared memory 16 bytes after it (a kernel that wants 1024 aligns it, as the GPU may not)
    std::vector<unsigned char> smem(dyn + 2048);
    td_emu_smem_origin = (unsigned char *)(((uintptr_t)smem.data() + 1023) & ~(uintptr_t)1023);
    td_emu_smem = td_emu_smem_origin + 16;
    cur_body = body, cur_arg = arg;
    gridDim.x = gx, gridDim.y = gy, gridDim.z = gz;
    blockDim.x = (unsigned)nt, blockDim.y = blockDim.z = 1;
    int64_t left = 0;
    for (unsigned bz = 0; bz < gz; bz++)
        for (unsigned by = 0; by < gy; by++)
            for (unsigned bx = 0; bx < gx; bx++) {
                memset(td_emu_smem, poison, dyn);
                blockIdx.x = bx, blockIdx.y = by, blockIdx.z = bz;
                td_emu_block_bar = td_emu_bar{nt, 0, 0};
                pdl_poison();
                for (int w = 0; w < 32; w++) td_emu_warp_bar[w] = td_emu_bar{32, 0, 0};
                for (int t = 0; t < nt; t++) init(fibers[t]);
                // round robin: each fiber runs until it waits at a barrier or ends; a pass in which none ends and
                // no barrier opens is a deadlock (a barrier some thread of the block never reaches)
                for (int live = nt; live > 0;) {
                    const unsigned before = td_emu_block_bar.gen + pdl_arrivals + td_emu_progress + [] {
                        unsigned s = 0;
                        for (auto &w : td_emu_warp_bar) s += w.gen;
                        return s;
                    }();
                    int ended = 0;
                    for (int t = 0; t < nt; t++)
                        if (!fibers[t].done) {
                            switch_in(t);
                            ended += fibers[t].done;
                        }
                    live -= ended;
                    unsigned after = td_emu_block_bar.gen + pdl_arrivals + td_emu_progress;
                    for (auto &w : td_emu_warp_bar) after += w.gen;
                    if (live > 0 && ended == 0 && after == before) {
                        fprintf(stderr, "emu: deadlock: %d threads of block (%u, %u, %u) wait at a barrier the others "
                                        "never reach\n", live, bx, by, bz);
                        abort();
                    }
                }
                pdl_restore(); /* a block that never waited */
                for (auto &d : td_emu_mbar_deferred) left += d.land ? 1 : (int64_t)d.cps.size();
                td_emu_mbar_deferred.clear();
                for (int t = 0; t < nt; t++) {
                    left += (int64_t)fibers[t].cps.open.size();
                    for (auto &g : fibers[t].cps.groups) left += (int64_t)g.size();
                    left += (int64_t)fibers[t].cps.wg_open.size();
                    for (auto &g : fibers[t].cps.wg_groups) left += (int64_t)g.size();
                }
            }
    return left;
}

int td_emu_tc(const char *what);   // tc.cpp: 0 when the new kernels gave the old ones' bits
int td_emu_attn(const char *what); // attn.cpp: 0 when every check passed
int td_emu_dn(const char *what);   // dn.cpp: 0 when every check passed
int td_emu_dnr(const char *what);  // dnr.cpp: 0 when the warp form gave the other kernels' bits

int main(int argc, char **argv) {
    const char *fam = argc > 1 ? argv[1] : "", *what = argc > 2 ? argv[2] : "quick";
    if (!strcmp(fam, "tc")) return td_emu_tc(what) != 0;
    if (!strcmp(fam, "attn")) return td_emu_attn(what) != 0;
    if (!strcmp(fam, "dn")) return td_emu_dn(what) != 0;
    if (!strcmp(fam, "dnr")) return td_emu_dnr(what) != 0;
    if (!strcmp(fam, "selftest")) {
        struct {
            const char *fam, *name;
            int m;
        } const muts[] = {{"tc", "ldmatrix matrices 1 and 2 swapped", TD_EMU_MUT_LDSM},
                          {"tc", "mma A registers 1 and 2 swapped", TD_EMU_MUT_MMA},
                          {"tc", "cp.async wait_group one group short", TD_EMU_MUT_WAIT},
                          {"attn", "ldmatrix matrices 1 and 2 swapped", TD_EMU_MUT_LDSM},
                          {"attn", "mma A registers 1 and 2 swapped", TD_EMU_MUT_MMA},
                          {"attn", "shuffle xor partner one lane off", TD_EMU_MUT_SHFL},
                          {"dn", "shuffle xor partner one lane off", TD_EMU_MUT_SHFL},
                          {"dnr", "shuffle source one lane off", TD_EMU_MUT_SHFL},
                          {"tc", "the kernels before's outputs not back at the wait", TD_EMU_MUT_PDL},
                          {"attn", "the kernels before's outputs not back at the wait", TD_EMU_MUT_PDL},
                          {"dnr", "the kernels before's outputs not back at the wait", TD_EMU_MUT_PDL}};
        int missed = 0;
        for (const auto &m : muts) {
            printf("selftest: %s kernels, %s in the new kernel\n", m.fam, m.name);
            td_emu_mutation = m.m;
            const int bad = !strcmp(m.fam, "tc")    ? td_emu_tc("quick")
                            : !strcmp(m.fam, "dn")  ? td_emu_dn("selftest")
                            : !strcmp(m.fam, "dnr") ? td_emu_dnr("selftest")
                                                    : td_emu_attn("selftest");
            printf("selftest: %s\n", bad ? "caught" : "NOT CAUGHT");
            missed += !bad;
        }
        td_emu_mutation = TD_EMU_MUT_NONE;
        printf(missed ? "selftest: %d mutations NOT caught\n" : "selftest: every mutation caught\n", missed);
        return missed != 0;
    }
    fprintf(stderr, "usage: emu tc [quick|few|many|all] | emu attn [quick|all] | emu dn | emu dnr | emu selftest\n");
    return 2;
}
