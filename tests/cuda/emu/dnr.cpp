// tests/cuda/emu: the token-by-token Gated DeltaNet of src/kernels/cuda/deltanet.cu on the CPU (emu.h says what is
// emulated): deltanet_warp_kernel + dn_norm_kernel (a warp of 32 columns a block, the gated norm apart) against
// deltanet_reg_kernel (a block of 128 threads a head) and deltanet_kernel (the state in global memory), core outputs
// and the state after, bit for bit. Shapes: Hk / Hv = 2 / 4 at dk = dv = 128 and 1 / 2 at dk = 128, dv = 64 (threads
// of the 128-thread kernels without a column); groups of 1, 2, 3, 7 and 40 tokens of five sequences (a sixth
// untouched) whose rows interleave in the batch, each from a random state; then the 40-token group as 17 + 23 over two
// launches (the state carried) = one. Then conv_kernel against its expressions run here. [selftest]: the first shape
// and the conv.
#include "emu.h"

#include "kernels/cuda/deltanet.cu"

namespace {

uint64_t rs = 0x5eed0fde17aull;
uint64_t rnd64() { rs ^= rs << 13; rs ^= rs >> 7; rs ^= rs << 17; return rs; }
float urand(float lo, float hi) { return lo + (hi - lo) * (float)((rnd64() >> 11) * (1.0 / 9007199254740992.0)); }
int failures = 0;

struct rcase {
    int Hk, Hv, dv, ldu, N, n_seq;
    std::vector<float> u, z, b, a, a_log, dt_bias, norm_w, state; // state: n_seq x [Hv][128][dv]
    std::vector<int32_t> seq, off, tok;                          // the groups
};

rcase mk(int Hk, int Hv, int dv, const std::vector<int> &sizes) {
    rcase c;
    c.Hk = Hk, c.Hv = Hv, c.dv = dv, c.ldu = 2 * Hk * 128 + Hv * dv + 5, c.n_seq = (int)sizes.size() + 1;
    c.N = 0;
    for (int n : sizes) c.N += n;
    c.u.resize((size_t)c.N * c.ldu), c.z.resize((size_t)c.N * Hv * dv), c.b.resize((size_t)c.N * Hv);
    c.a.resize((size_t)c.N * Hv), c.a_log.resize(Hv), c.dt_bias.resize(Hv), c.norm_w.resize(dv);
    c.state.resize((size_t)c.n_seq * Hv * 128 * dv);
    for (auto &x : c.u) x = urand(-1, 1);
    for (auto &x : c.z) x = urand(-3, 3);
    for (auto &x : c.b) x = urand(-3, 3);
    for (auto &x : c.a) x = urand(-4, 4);
    for (auto &x : c.a_log) x = urand(-2, 1);
    for (auto &x : c.dt_bias) x = urand(-1, 1);
    for (auto &x : c.norm_w) x = urand(0.5f, 1.5f);
    for (auto &x : c.state) x = urand(-0.2f, 0.2f);
    // group g (sequence g + 1: sequence 0 is in none) takes rows dealt round robin over the groups still open
    std::vector<std::vector<int32_t>> rows(sizes.size());
    std::vector<int32_t> perm(c.N);
    for (int i = 0; i < c.N; i++) perm[i] = i;
    for (int i = c.N - 1; i > 0; i--) std::swap(perm[i], perm[rnd64() % (i + 1)]);
    for (int i = 0, g = 0; i < c.N; g = (g + 1) % (int)sizes.size())
        if ((int)rows[g].size() < sizes[g]) rows[g].push_back(perm[i++]);
    c.off.push_back(0);
    for (size_t g = 0; g < sizes.size(); g++) {
        c.seq.push_back((int32_t)g + 1);
        c.tok.insert(c.tok.end(), rows[g].begin(), rows[g].end());
        c.off.push_back((int32_t)c.tok.size());
    }
    return c;
}

// kind 0: deltanet_kernel, 1: deltanet_reg_kernel, 2: deltanet_warp_kernel + dn_norm_kernel; over groups
// [g0, g1) of c, the state in st, the outputs into core
void run(const rcase &c, int kind, int g0, int g1, const int32_t *off, std::vector<float> &core,
         std::vector<float> &st) {
    const int ng = g1 - g0;
    const int64_t ss = (int64_t)c.Hv * 128 * c.dv;
    const int32_t *seq = c.seq.data() + g0, *tok = c.tok.data();
    float *cr = core.data(), *sp = st.data();
    const rcase *p = &c;
    const bool is_new = kind == 2;
    if (kind == 0)
        td_emu_run((unsigned)(ng * c.Hv), 1, 1, DN_NT, 0, 0xff, false, [&] {
            deltanet_kernel(cr, p->u.data(), p->ldu, p->z.data(), p->b.data(), p->a.data(), p->a_log.data(),
                            p->dt_bias.data(), p->norm_w.data(), sp, ss, p->Hk, p->Hv, 128, p->dv, 1e-6f, seq, off,
                            tok);
        });
    if (kind == 1)
        td_emu_run((unsigned)(ng * c.Hv), 1, 1, DN_NT, 0, 0xff, false, [&] {
            deltanet_reg_kernel<128>(cr, p->u.data(), p->ldu, p->z.data(), p->b.data(), p->a.data(), p->a_log.data(),
                                     p->dt_bias.data(), p->norm_w.data(), sp, ss, p->Hk, p->Hv, p->dv, 1e-6f, seq, off,
                                     tok);
        });
    if (kind == 2) {
        /* what the kernels before write (u, b, a; then the core rows and z), poisoned in each block until its
         * td_pdl_wait (emu.h); the state is the layer's own */
        {
            td_emu_pdl_inputs in({td_emu_in(c.u), td_emu_in(c.b), td_emu_in(c.a)});
            td_emu_run((unsigned)(ng * c.Hv * (c.dv / DW_C)), 1, 1, DW_C, 0, 0xff, is_new, [&] {
                deltanet_warp_kernel(cr, p->u.data(), p->ldu, p->b.data(), p->a.data(), p->a_log.data(),
                                     p->dt_bias.data(), sp, ss, p->Hk, p->Hv, p->dv, seq, off, tok);
            });
        }
        const int n_tok = off[ng] - off[0];
        td_emu_pdl_inputs in({td_emu_in(core), td_emu_in(c.z)});
        td_emu_run((unsigned)n_tok, (unsigned)c.Hv, 1, DN_NT, 0, 0xff, is_new, [&] {
            dn_norm_kernel(cr, p->z.data(), p->norm_w.data(), p->Hv, p->dv, 1e-6f, tok + off[0]);
        });
    }
}

int bits(const char *what, const std::vector<float> &x, const std::vector<float> &y) {
    size_t diff = 0;
    for (size_t i = 0; i < x.size(); i++) diff += memcmp(&x[i], &y[i], 4) != 0;
    printf("  %-64s %s (%zu of %zu differ)\n", what, diff ? "DIFFER" : "same bits", diff, x.size());
    return diff != 0;
}

int check(int Hk, int Hv, int dv) {
    const std::vector<int> sizes = {1, 40, 2, 7, 3};
    rcase c = mk(Hk, Hv, dv, sizes);
    printf("Hk=%d Hv=%d dk=128 dv=%d, groups of 1 / 40 / 2 / 7 / 3 tokens\n", Hk, Hv, dv);
    const int ng = (int)sizes.size();
    std::vector<float> core[3], st[3];
    for (int k = 0; k < 3; k++) {
        core[k].assign((size_t)c.N * Hv * dv, 7.0f), st[k] = c.state;
        run(c, k, 0, ng, c.off.data(), core[k], st[k]);
    }
    int bad = bits("core: by warps vs the register kernel", core[2], core[1]);
    bad |= bits("state: by warps vs the register kernel", st[2], st[1]);
    bad |= bits("core: by warps vs the global-state kernel", core[2], core[0]);
    bad |= bits("state: by warps vs the global-state kernel", st[2], st[0]);
    // the 40-token group (index 1) as 17 + 23 tokens over two launches = one launch
    std::vector<float> c2((size_t)c.N * Hv * dv, 7.0f), s2 = c.state;
    const int32_t o1[2] = {c.off[1], c.off[1] + 17}, o2[2] = {c.off[1] + 17, c.off[2]};
    run(c, 2, 1, 2, o1, c2, s2);
    run(c, 2, 1, 2, o2, c2, s2);
    std::vector<float> x, y;
    for (int32_t i = c.off[1]; i < c.off[2]; i++)
        for (int64_t e = 0; e < (int64_t)Hv * dv; e++)
            x.push_back(c2[(size_t)(c.tok[i] * (int64_t)Hv * dv + e)]),
                y.push_back(core[2][(size_t)(c.tok[i] * (int64_t)Hv * dv + e)]);
    bad |= bits("40 tokens as 17 + 23 launches = one: core", x, y);
    const size_t hs = (size_t)Hv * 128 * dv;
    std::vector<float> sa(s2.begin() + 2 * hs, s2.begin() + 3 * hs), sb(st[2].begin() + 2 * hs, st[2].begin() + 3 * hs);
    bad |= bits("40 tokens as 17 + 23 launches = one: state", sa, sb);
    return bad;
}

// conv_kernel (the causal conv + SiLU of a few tokens a group: the window from the state, token after token) against
// the same expressions (conv_silu) run here group by group, outputs and state after; its input x is what the kernel
// before writes (poisoned until the wait), its window the layer's own state. C = 300: a last block partly past C.
int check_conv() {
    constexpr int K = 4;
    const int C = 300, n_seq = 4;
    const std::vector<int32_t> seq = {2, 0, 3}, off = {0, 1, 8, 11}, tok = {5, 0, 2, 4, 6, 8, 9, 10, 1, 3, 7};
    const int N = 11, ng = 3, bpg = (C + CV_NT - 1) / CV_NT;
    const int64_t ss = (int64_t)(K - 1) * C + 17; /* a sequence's state rows, then others' data */
    std::vector<float> x((size_t)N * C), w((size_t)C * K), st((size_t)n_seq * ss);
    for (auto &v : x) v = urand(-2, 2);
    for (auto &v : w) v = urand(-1, 1);
    for (auto &v : st) v = urand(-2, 2);
    std::vector<float> out((size_t)N * C, 7.0f), ref = out, st_ref = st;
    for (int g = 0; g < ng; g++)
        for (int c = 0; c < C; c++) {
            float wc[K], win[K - 1];
            float *sp = st_ref.data() + seq[g] * ss;
            for (int j = 0; j < K; j++) wc[j] = w[(size_t)c * K + j];
            for (int j = 0; j < K - 1; j++) win[j] = sp[j * C + c];
            for (int k = off[g]; k < off[g + 1]; k++) {
                const float xc = x[(size_t)tok[k] * C + c];
                ref[(size_t)tok[k] * C + c] = conv_silu<K>(wc, win, xc);
                for (int j = 0; j + 1 < K - 1; j++) win[j] = win[j + 1];
                win[K - 2] = xc;
            }
            for (int j = 0; j < K - 1; j++) sp[j * C + c] = win[j];
        }
    {
        td_emu_pdl_inputs in({td_emu_in(x)});
        td_emu_run((unsigned)(ng * bpg), 1, 1, CV_NT, 0, 0xff, true, [&] {
            conv_kernel<K>(out.data(), x.data(), st.data(), ss, w.data(), C, bpg, seq.data(), off.data(), tok.data());
        });
    }
    printf("conv: %d channels, groups of 1 / 7 / 3 tokens of sequences 2, 0, 3\n", C);
    return bits("conv_kernel: outputs", out, ref) | bits("conv_kernel: state", st, st_ref);
}

} // namespace

int td_emu_dnr(const char *what) {
    failures = check(2, 4, 128);
    failures |= check_conv();
    if (strcmp(what, "selftest")) failures |= check(1, 2, 64);
    printf(failures ? "dnr: DIFFER\n" : "dnr: all the same bits\n");
    return failures;
}
