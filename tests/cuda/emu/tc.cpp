// tests/cuda/emu: the new tensor-core products of src/kernels/cuda/matmul_tc.cu against the old ones, bit for bit,
// on the CPU (emu.h says what is emulated). Cases: [quick] a few seconds; [few] tc_stream (16 / 8 / 4 / 32 outputs a
// block) and tc_split (a block per k slice, the partials folded; mma.sync and wgmma) vs tc_skinny at T = 1 .. 64, k
// of one slice, several, a last slice shorter, row lists, odd ldx, 1-3 products in a launch, 4097 outputs; [many]
// tc_wide (x rounded in its blocks or once by tc_x_bf16, one pass or by slices; the slice totals in shared memory, or
// in registers with 3 or 4 weight stages; tc_wg on wgmma, 4 or 5 stages) vs tc_tile at T = 65 .. 300; tc_split and
// tc_x_bf16 + tc_wide taking the MLP's gate act(g) * u as their activations (td_cu_matmul_glu) vs the old kernels
// over the gated x; products left as tc_split's partials for the kernels of rows.cu that add them as they read them
// (the residual + norm, the MLP's gate, q/k preparation) vs those kernels over the folded products. Every entry past
// n_out must keep its poison (7.0f), every output must be written, every cp.async copy and wgmma waited for.
#include "emu.h"

#include "kernels/cuda/matmul_tc.cu"
#include "kernels/cuda/rows.cu"

namespace {

uint64_t rs = 0x1234567;
float urand() {
    rs ^= rs << 13;
    rs ^= rs >> 7;
    rs ^= rs << 17;
    return (float)((rs >> 11) * (1.0 / 9007199254740992.0)) * 4 - 2;
}

int64_t pending = 0; // copies a thread issued and never waited for (a bug: counted by cmp)

// in: what the kernels before the launch wrote (poisoned in each block until its td_pdl_wait, emu.h)
template <typename F>
void launch(unsigned gx, unsigned gy, int nt, size_t dyn, bool is_new, F body, unsigned gz = 1,
            std::vector<td_emu_buf> in = {}) {
    td_emu_pdl_inputs pdl(std::move(in));
    pending += td_emu_run(gx, gy, gz, nt, dyn, 0x41, is_new, body);
}

struct prob {
    int64_t T, K, ldx, n;
    std::vector<int64_t> n_out;
    std::vector<std::vector<uint16_t>> w;
    std::vector<std::vector<int32_t>> rows;
    std::vector<float> x;
};

// A product's activations, as the kernels before it wrote them: x, u (gated), x in bf16 (tc_x_bf16's)
std::vector<td_emu_buf> xin(prob &p, const tc_glu &gl, std::vector<uint16_t> *xb = nullptr) {
    std::vector<td_emu_buf> b{td_emu_in(p.x)};
    if (gl.u) b.push_back(td_emu_buf{(void *)gl.u, (size_t)(p.T * p.ldx) * sizeof(float)});
    if (xb && !xb->empty()) b.push_back(td_emu_in(*xb));
    return b;
}
// tc_fold_parts over the partials the slices' blocks wrote
void fold(const tc_jobs &j, std::vector<float> &part, int64_t T, int64_t S, int64_t ng, int64_t per) {
    launch((unsigned)((tc_fold_threads(T, ng) + 255) / 256), 1, 256, 0, true,
           [&] { tc_fold_parts(j, part.data(), T, S, ng, per); }, 1, {td_emu_in(part)});
}

tc_jobs mkjobs(prob &p, std::vector<std::vector<float>> &ys, int64_t per, int64_t &blocks) {
    tc_jobs j;
    j.n = (int)p.n;
    blocks = 0;
    for (int i = 0; i < p.n; i++) {
        j.j[i] = tc_job{p.w[i].data(), p.rows[i].empty() ? nullptr : p.rows[i].data(),
                        ys[i].data(),  p.n_out[i] + 2,
                        p.K,           p.n_out[i],
                        blocks};
        blocks += (p.n_out[i] + per - 1) / per;
    }
    return j;
}
std::vector<std::vector<float>> fresh(prob &p) {
    std::vector<std::vector<float>> ys;
    for (int i = 0; i < p.n; i++)
        ys.emplace_back((size_t)(p.T * (p.n_out[i] + 2)), 7.0f);
    return ys;
}

template <int NF> std::vector<std::vector<float>> run_skinny(prob &p) {
    auto ys = fresh(p);
    int64_t blocks;
    tc_jobs j = mkjobs(p, ys, 16, blocks);
    bool wide = (p.K + 255) / 256 >= 8;
    if (wide)
        launch(blocks, 1, 256, 0, false, [&] { tc_skinny<NF, 8>(j, p.x.data(), p.ldx, p.T, p.K); });
    else
        launch(blocks, 1, 128, 0, false, [&] { tc_skinny<NF, 4>(j, p.x.data(), p.ldx, p.T, p.K); });
    return ys;
}
template <int NF, int R> std::vector<std::vector<float>> run_stream(prob &p) {
    auto ys = fresh(p);
    int64_t blocks;
    tc_jobs j = mkjobs(p, ys, R, blocks);
    int64_t S = (p.K + 255) / 256;
    auto go = [&](auto swc) {
        constexpr int SW = decltype(swc)::value;
        int nbuf = S > SW ? (SW == 8 && R == 32 ? 1 : 2) : 1; // as tc_stream_go
        size_t smem = (size_t)SW * nbuf * R * TC_SP * 2 + (size_t)SW * R * (NF * 8 + 1) * 4;
        launch(blocks, 1, SW * 32, smem, true, [&] { tc_stream<NF, SW, R>(j, p.x.data(), p.ldx, p.T, p.K, nbuf); }, 1,
               xin(p, tc_glu{nullptr, 0}));
    };
    if (S >= 8)
        go(std::integral_constant<int, 8>());
    else
        go(std::integral_constant<int, 4>());
    return ys;
}
std::vector<std::vector<float>> run_tile(prob &p) {
    auto ys = fresh(p);
    int64_t blocks;
    tc_jobs j = mkjobs(p, ys, TC_BM, blocks);
    launch(blocks, (p.T + 63) / 64, 256, 0, false, [&] { tc_tile<64, true>(j, p.x.data(), p.ldx, p.T, p.K); });
    return ys;
}
// x rounded to bf16 once (tc_x_bf16), as the launcher does for tc_wide<.., true>
// (gated first when gl.act: td_cu_matmul_glu's tc_wide path)
std::vector<uint16_t> to_bf16(prob &p, tc_glu gl = tc_glu{nullptr, 0}) {
    std::vector<uint16_t> xb((size_t)(p.T * p.K), 0x7fc1);
    launch((unsigned)((p.T * p.K / 4 + 255) / 256), 1, 256, 0, true,
           [&] { tc_x_bf16(p.x.data(), p.ldx, p.T, p.K, xb.data(), gl); }, 1, xin(p, gl));
    return xb;
}
// tc_wide<true, XB, TREG, AS>: the slice totals in shared memory (TREG false) or registers, AS weight stages
template <bool XB, bool TREG, int AS>
std::vector<std::vector<float>> run_wide(prob &p, tc_glu gl = tc_glu{nullptr, 0}) {
    auto ys = fresh(p);
    int64_t blocks;
    tc_jobs j = mkjobs(p, ys, TC_BM, blocks);
    std::vector<uint16_t> xb = XB ? to_bf16(p, gl) : std::vector<uint16_t>();
    launch(
        blocks, (p.T + 127) / 128, 256, tw_smem<XB, TREG, AS>(), true,
        [&] { tc_wide<true, XB, TREG, AS>(j, p.x.data(), xb.data(), p.ldx, p.T, p.K, nullptr); }, 1,
        xin(p, gl, &xb));
    return ys;
}
// tc_wide_parts: each slice in a block of its own (grid z), the partials added in slice order by tc_fold_parts
template <bool XB, bool TREG, int AS> std::vector<std::vector<float>> run_wide_parts(prob &p) {
    auto ys = fresh(p);
    int64_t blocks;
    tc_jobs j = mkjobs(p, ys, TC_BM, blocks);
    const int64_t S = (p.K + TC_KS - 1) / TC_KS, ng = blocks * TC_BM;
    std::vector<float> part((size_t)(S * p.T * ng), 3.0f);
    std::vector<uint16_t> xb = XB ? to_bf16(p) : std::vector<uint16_t>();
    launch(
        blocks, (p.T + 127) / 128, 256, tw_smem<XB, TREG, AS>(), true,
        [&] { tc_wide<true, XB, TREG, AS>(j, p.x.data(), xb.data(), p.ldx, p.T, p.K, part.data()); }, (unsigned)S,
        xin(p, tc_glu{nullptr, 0}, &xb));
    fold(j, part, p.T, S, ng, TC_BM);
    return ys;
}
// tc_wg<true, AS, EARLY> (wgmma; x rounded once by tc_x_bf16), or (WS: tc_ws's PW, WS_TMA, 2 or 4) tc_ws<true, AS>
// (its copies by the bulk tensor copy or by producer warps, mbarriers): one pass, or (parts) each slice in a block of
// its own and the partials added by tc_fold_parts
template <int AS, bool EARLY = true, int WS = 0>
std::vector<std::vector<float>> run_wg(prob &p, bool parts) {
    auto ys = fresh(p);
    int64_t blocks;
    tc_jobs j = mkjobs(p, ys, TC_BM, blocks);
    const int64_t S = (p.K + TC_KS - 1) / TC_KS, ng = blocks * TC_BM;
    std::vector<float> part(parts ? (size_t)(S * p.T * ng) : 0, 3.0f);
    std::vector<uint16_t> xb = to_bf16(p);
    float *pp = parts ? part.data() : nullptr;
    tc_maps maps = tc_no_maps;
    if (WS == WS_TMA && !tc_maps_make(&maps, j, false, xb.data(), p.T, p.K)) {
        printf("  tensor maps refused\n");
        for (auto &y : ys) std::fill(y.begin(), y.end(), NAN);
        return ys;
    }
    launch(
        blocks, (p.T + 127) / 128, WS ? ws_threads(WS) : 256, WS ? ws_smem<AS>() : wg_smem<AS>(), true,
        [&] {
            if constexpr (WS != 0) tc_ws<true, AS, false, WS>(j, maps, xb.data(), p.ldx, p.T, p.K, pp);
            else tc_wg<true, AS, EARLY>(j, nullptr, xb.data(), p.ldx, p.T, p.K, pp);
        },
        parts ? (unsigned)S : 1u, xin(p, tc_glu{nullptr, 0}, &xb));
    if (parts) fold(j, part, p.T, S, ng, TC_BM);
    return ys;
}

// tc_split: each slice in a block of its own (grid y), its partials added in slice order by tc_fold_parts (one
// slice: straight to y); its activations gated as it stages them when gl.act
// (WG: its wgmma form, every slice whole)
template <int NF, bool WG = false> std::vector<std::vector<float>> run_split(prob &p, tc_glu gl = tc_glu{nullptr, 0}) {
    auto ys = fresh(p);
    int64_t blocks;
    tc_jobs j = mkjobs(p, ys, SP_R, blocks);
    const int64_t S = (p.K + TC_KS - 1) / TC_KS, ng = blocks * SP_R;
    std::vector<float> part((size_t)(S * p.T * ng), 3.0f);
    float *pp = S > 1 ? part.data() : nullptr;
    launch(
        blocks, (unsigned)S, 128, tc_split_smem<NF, WG>(), true,
        [&] { tc_split<NF, false, WG>(j, p.x.data(), p.ldx, p.T, p.K, pp, gl); }, 1, xin(p, gl));
    if (pp) fold(j, part, p.T, S, ng, SP_R);
    return ys;
}

prob mk(int64_t T, int64_t K, std::vector<int64_t> n_out, bool rows, int64_t ldx) {
    prob p;
    p.T = T;
    p.K = K;
    p.ldx = ldx;
    p.n = n_out.size();
    p.n_out = n_out;
    for (auto n : n_out) {
        int64_t wr = n + 3;
        std::vector<uint16_t> w((size_t)(wr * K));
        for (auto &v : w)
            v = td_emu_f2bf(urand());
        p.w.push_back(w);
        std::vector<int32_t> r;
        if (rows)
            for (int64_t i = 0; i < n; i++)
                r.push_back((int32_t)((rs = rs * 6364136223846793005ull + 1) >> 33) % wr);
        p.rows.push_back(r);
    }
    p.x.resize((size_t)(T * ldx));
    for (auto &v : p.x)
        v = urand();
    return p;
}
// a: the old kernel's outputs, b: the new one's
int cmp(const char *what, prob &p, std::vector<std::vector<float>> &a, std::vector<std::vector<float>> &b) {
    int64_t bad = 0;
    for (int i = 0; i < p.n; i++) {
        for (size_t e = 0; e < a[i].size(); e++)
            bad += memcmp(&a[i][e], &b[i][e], 4) != 0;
        // padding untouched, every output written
        for (int64_t t = 0; t < p.T; t++)
            for (int64_t j = 0; j < p.n_out[i] + 2; j++) {
                float v = b[i][t * (p.n_out[i] + 2) + j];
                bad += j >= p.n_out[i] ? v != 7.0f : v == 7.0f;
            }
    }
    if (pending)
        printf("  %lld cp.async copies never waited for\n", (long long)pending);
    bad += pending;
    pending = 0;
    if (td_emu_wg_hazards)
        printf("  %lld cp.async copies into lines a pending wgmma reads\n", (long long)td_emu_wg_hazards);
    bad += td_emu_wg_hazards;
    td_emu_wg_hazards = 0;
    td_emu_wg_ranges.clear();
    printf("  %-60s %s (%lld)\n", what, bad ? "DIFFER" : "same bits", (long long)bad);
    return bad != 0;
}

template <int NF> int check_few(int64_t T, int64_t K, std::vector<int64_t> n_out, bool rows, int64_t ldx) {
    prob p = mk(T, K, n_out, rows, ldx);
    auto ref = run_skinny<NF>(p);
    char name[160];
    int bad = 0;
    auto a16 = run_stream<NF, 16>(p);
    snprintf(name, sizeof name, "T=%lld K=%lld n=%lld.. rows=%d ldx=%lld stream/16", (long long)T, (long long)K,
             (long long)n_out[0], rows, (long long)ldx);
    bad |= cmp(name, p, ref, a16);
    auto a8 = run_stream<NF, 8>(p);
    name[strlen(name) - 2] = 0;
    strcat(name, "8");
    bad |= cmp(name, p, ref, a8);
    auto a4 = run_stream<NF, 4>(p);
    name[strlen(name) - 1] = 0;
    strcat(name, "4");
    bad |= cmp(name, p, ref, a4);
    auto a32 = run_stream<NF, 32>(p);
    name[strlen(name) - 1] = 0;
    strcat(name, "32");
    bad |= cmp(name, p, ref, a32);
    auto sp = run_split<NF>(p);
    name[strlen(name) - 9] = 0;
    strcat(name, "split");
    bad |= cmp(name, p, ref, sp);
    if (K % TC_KS == 0) { // tc_split's wgmma form takes whole slices (the launcher's condition)
        auto wg = run_split<NF, true>(p);
        strcat(name, ", wgmma");
        bad |= cmp(name, p, ref, wg);
    }
    return bad;
}
// tc_wide in one form (its totals, weight stages) against tc_tile: one pass and by slices, x rounded in its blocks
// and once by tc_x_bf16
template <bool TREG, int AS>
int check_wide(prob &p, std::vector<std::vector<float>> &ref, const char *name, const char *form) {
    char nm[200];
    snprintf(nm, sizeof nm, "%s%s", name, form);
    auto b = run_wide<false, TREG, AS>(p);
    int bad = cmp(nm, p, ref, b);
    auto c = run_wide_parts<false, TREG, AS>(p);
    snprintf(nm, sizeof nm, "%s%s by slices", name, form);
    bad |= cmp(nm, p, ref, c);
    auto d = run_wide<true, TREG, AS>(p);
    snprintf(nm, sizeof nm, "%s%s, x in bf16", name, form);
    bad |= cmp(nm, p, ref, d);
    auto e = run_wide_parts<true, TREG, AS>(p);
    snprintf(nm, sizeof nm, "%s%s by slices, x in bf16", name, form);
    return bad | cmp(nm, p, ref, e);
}
int check_many(int64_t T, int64_t K, std::vector<int64_t> n_out, bool rows, int64_t ldx) {
    prob p = mk(T, K, n_out, rows, ldx);
    auto ref = run_tile(p);
    char name[160];
    snprintf(name, sizeof name, "T=%lld K=%lld n=%lld.. rows=%d ldx=%lld wide", (long long)T, (long long)K,
             (long long)n_out[0], rows, (long long)ldx);
    int bad = check_wide<false, TW_AS>(p, ref, name, "");
    bad |= check_wide<true, TW_AS>(p, ref, name, " reg");
    bad |= check_wide<true, TW_AS_REG>(p, ref, name, " reg/4");
    if (K % WG_BK) return bad; /* tc_wg runs K in whole stages (the launcher's condition) */
    char nm[256];
    for (int parts = 0; parts < 2; parts++) {
        snprintf(nm, sizeof nm, "%s, wgmma%s", name, parts ? " by slices" : "");
        auto g = run_wg<WG_AS>(p, parts);
        bad |= cmp(nm, p, ref, g);
    }
    snprintf(nm, sizeof nm, "%s, wgmma 5 stages", name);
    auto g5 = run_wg<5>(p, false);
    bad |= cmp(nm, p, ref, g5);
    snprintf(nm, sizeof nm, "%s, wgmma copies first", name);
    auto gc = run_wg<WG_AS, false>(p, true);
    bad |= cmp(nm, p, ref, gc);
    for (int parts = 0; parts < 2; parts++) {
        snprintf(nm, sizeof nm, "%s, wgmma, a producer warpgroup%s", name, parts ? " by slices" : "");
        auto w = run_wg<WS_AS, true, 4>(p, parts);
        bad |= cmp(nm, p, ref, w);
    }
    snprintf(nm, sizeof nm, "%s, wgmma, a producer warpgroup, 3 stages", name);
    auto w3 = run_wg<3, true, 4>(p, false);
    bad |= cmp(nm, p, ref, w3);
    for (int parts = 0; parts < 2; parts++) {
        snprintf(nm, sizeof nm, "%s, wgmma, two producer warps%s", name, parts ? " by slices" : "");
        auto w2 = run_wg<WS_AS, true, 2>(p, parts);
        bad |= cmp(nm, p, ref, w2);
    }
    if (rows) return bad; /* a row list: no tensor map (the launcher runs tc_wg) */
    for (int parts = 0; parts < 2; parts++) {
        snprintf(nm, sizeof nm, "%s, wgmma, bulk tensor copies%s", name, parts ? " by slices" : "");
        auto wt = run_wg<WS_AS, true, WS_TMA>(p, parts);
        bad |= cmp(nm, p, ref, wt);
    }
    snprintf(nm, sizeof nm, "%s, wgmma, bulk tensor copies, 3 stages", name);
    auto wt3 = run_wg<3, true, WS_TMA>(p, false);
    bad |= cmp(nm, p, ref, wt3);
    return bad;
}
// td_cu_matmul_glu's gated forms: x holds g; tc_split (T <= 64) or tc_x_bf16 + tc_wide (above) taking act(g) * u must
// give the bits of the old kernel over the gated activations, td_dev_glu(g, u) computed apart (td_cu_glu's function)
template <int NF> int check_glu(int64_t T, int64_t K, int64_t n, int64_t ldx, int act) {
    prob p = mk(T, K, {n}, false, ldx);
    std::vector<float> u(p.x.size());
    for (auto &v : u)
        v = urand() * 2;
    prob q = p;
    for (size_t i = 0; i < q.x.size(); i++)
        q.x[i] = td_dev_glu(p.x[i], u[i], act);
    const tc_glu gl{u.data(), act};
    char name[160];
    snprintf(name, sizeof name, "T=%lld K=%lld n=%lld ldx=%lld gated (%s)", (long long)T, (long long)K, (long long)n,
             (long long)ldx, act == TD_CU_GLU_SILU ? "SiLU" : "tanh GELU");
    if (T <= 64) {
        auto ref = run_skinny<NF>(q);
        auto got = run_split<NF>(p, gl);
        strcat(name, " split");
        int bad = cmp(name, p, ref, got);
        if (K % TC_KS == 0) {
            auto wg = run_split<NF, true>(p, gl);
            strcat(name, ", wgmma");
            bad |= cmp(name, p, ref, wg);
        }
        return bad;
    }
    auto ref = run_tile(q);
    auto got = run_wide<true, true, TW_AS_REG>(p, gl);
    strcat(name, " wide, x in bf16");
    return cmp(name, p, ref, got);
}
// td_cu_matmul_mlp's gate/up product: tc_wg's GLU form (block rows the gate's and up's, act(g) * u rounded to bf16
// as it ends) must give the bits of tc_wg over the gate and up (mkjobs' two jobs) then tc_x_bf16 gating them
// (td_cu_matmul_glu's path above 64 tokens): every one of the T x I activations written, none differing.
template <bool EARLY = true, int WS = 0> int check_mlp(int64_t T, int64_t K, int64_t I, int act, bool up_low = false) {
    prob p = mk(T, K, {I, I}, false, K);
    auto ys = run_wg<WG_AS>(p, false);
    std::vector<uint16_t> ref((size_t)(T * I), 0x7fc1), got((size_t)(T * I), 0x7fc1);
    launch((unsigned)((T * I / 4 + 255) / 256), 1, 256, 0, true,
           [&] { tc_x_bf16(ys[0].data(), I + 2, T, I, ref.data(), tc_glu{ys[1].data(), act}); }, 1,
           {td_emu_in(ys[0]), td_emu_in(ys[1])});
    int64_t blocks;
    tc_jobs j = mkjobs(p, ys, TC_BM, blocks);
    j.j[0].y = j.j[1].y = nullptr, j.j[0].yb = got.data(), j.j[0].ldy = I, j.j[0].act = act;
    std::vector<uint16_t> xb = to_bf16(p);
    /* the bulk-copy form reads the gate's and up's rows as one tensor from the lower-addressed: both in one buffer,
     * up's after the gate's (up_low: before) */
    std::vector<uint16_t> both(p.w[up_low ? 1 : 0]);
    both.insert(both.end(), p.w[up_low ? 0 : 1].begin(), p.w[up_low ? 0 : 1].end());
    if (WS == WS_TMA) j.j[up_low ? 1 : 0].w = both.data(), j.j[up_low ? 0 : 1].w = both.data() + p.w[0].size();
    tc_maps maps = tc_no_maps;
    if (WS == WS_TMA && !tc_maps_make(&maps, j, true, xb.data(), T, K)) {
        printf("  tensor maps refused\n");
        return 1;
    }
    launch(
        (unsigned)((I + 63) / 64), (p.T + 127) / 128, WS ? ws_threads(WS) : 256,
        WS ? ws_smem<WS_AS>() : wg_smem<WG_AS>(), true,
        [&] {
            if constexpr (WS != 0) tc_ws<true, WS_AS, true, WS>(j, maps, xb.data(), K, T, K, nullptr);
            else tc_wg<true, WG_AS, EARLY, true>(j, nullptr, xb.data(), K, T, K, nullptr);
        },
        1, {td_emu_in(xb)});
    int64_t bad = pending;
    pending = 0;
    for (size_t e = 0; e < got.size(); e++) bad += got[e] != ref[e] || got[e] == 0x7fc1;
    printf("  T=%lld K=%lld I=%lld %s, gate/up with the gate (wgmma%s%s) %s (%lld)\n", (long long)T, (long long)K,
           (long long)I, act == TD_CU_GLU_SILU ? "SiLU" : "tanh GELU",
           WS == WS_TMA ? ", bulk tensor copies" : WS == 4 ? ", a producer warpgroup" : WS ? ", two producer warps"
           : EARLY      ? ""
                        : ", copies first",
           WS == WS_TMA && up_low ? ", up's weights first" : "", bad ? "DIFFER" : "same bits", (long long)bad);
    return bad != 0;
}
// rows x cols of a (rows lda apart) and b (ldb) bit for bit; prints a line, 1 when they differ
int same_rows(const char *what, const float *a, int64_t lda, const float *b, int64_t ldb, int64_t rows, int64_t cols) {
    int64_t bad = 0;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < cols; c++) bad += memcmp(&a[r * lda + c], &b[r * ldb + c], 4) != 0;
    bad += pending;
    pending = 0;
    printf("  %-60s %s (%lld)\n", what, bad ? "DIFFER" : "same bits", (long long)bad);
    return bad != 0;
}
// Products left as tc_split's partials ([S][T][the launch's outputs], no tc_fold_parts) for the kernel that takes
// them (td_cu_matmul_multi_parts): add_rows_norm_kernel (the residual + norm), glu_parts_kernel (gate and up), and
// qk_prep_warp_kernel / qk_prep_kernel (q with its gate columns, k, v) must give their bits over the products folded
// by tc_fold_parts (run_split), each with its inputs poisoned until its wait.
template <int NF> int check_held(int64_t T) {
    const int64_t K = 1024, hd = 64, Hq = 2, qhs = 2 * hd, Hkv = 1, kv = Hkv * hd, ncell = T + 3;
    auto parts = [&](prob &p, std::vector<float> &part, int64_t &S, int64_t &ng) {
        auto ys = fresh(p);
        int64_t blocks;
        tc_jobs j = mkjobs(p, ys, SP_R, blocks);
        S = (p.K + TC_KS - 1) / TC_KS, ng = blocks * SP_R;
        part.assign((size_t)(S * p.T * ng), 3.0f);
        launch(blocks, (unsigned)S, 128, tc_split_smem<NF>(), true,
               [&] { tc_split<NF, false, false>(j, p.x.data(), p.ldx, p.T, p.K, part.data(), tc_glu{nullptr, 0}); }, 1,
               xin(p, tc_glu{nullptr, 0}));
    };
    auto rnd = [](size_t n, float lo, float hi) {
        std::vector<float> v(n);
        for (auto &e : v) e = lo + (hi - lo) * (urand() + 2) / 4;
        return v;
    };
    char nm[160];
    int bad = 0;
    int64_t S, ng;
    std::vector<float> part;
    for (int64_t nr : {256, 1000, 2600}) { // the residual + norm over one product of nr outputs (2600: past the
        // elements a thread holds in registers, NORM_WREG per thread), from 4 slices or 5 (an even count after P_0)
        const int64_t kr = nr == 1000 ? 1280 : K;
        prob p = mk(T, kr, {nr}, false, kr);
        auto ys = run_split<NF>(p);
        parts(p, part, S, ng);
        auto x1 = rnd((size_t)(T * nr), -3, 3), x2 = x1, nw = rnd((size_t)nr, 0.5f, 1.5f);
        std::vector<float> o1((size_t)(T * nr)), o2(o1.size());
        std::vector<uint16_t> b1(o1.size()), b2(o1.size(), 0x7fc1);
        unsigned long long f1 = ~0ull, f2 = ~0ull;
        launch((unsigned)T, 1, ROW_NT, 0, false, [&] {
            add_rows_norm_kernel(x1.data(), ys[0].data(), 1, nr + 2, nr, nullptr, &f1, 3, o1.data(), nullptr, nw.data(),
                                 1e-6f, 1);
        }, 1, {td_emu_in(x1), td_emu_in(ys[0])});
        launch((unsigned)T, 1, ROW_NT, 0, true, [&] {
            add_rows_norm_kernel(x2.data(), part.data(), S, ng, nr, nullptr, &f2, 3, o2.data(), b2.data(), nw.data(),
                                 1e-6f, 1);
        }, 1, {td_emu_in(x2), td_emu_in(part)});
        snprintf(nm, sizeof nm, "T=%lld n=%lld residual + norm from %lld partials: x", (long long)T, (long long)nr,
                 (long long)S);
        bad |= same_rows(nm, x1.data(), nr, x2.data(), nr, T, nr);
        snprintf(nm, sizeof nm, "T=%lld n=%lld residual + norm from %lld partials: norm", (long long)T, (long long)nr,
                 (long long)S);
        bad |= same_rows(nm, o1.data(), nr, o2.data(), nr, T, nr) | (f1 != f2);
        // the norm in bf16 as it wrote it for the products (td_cu_matmul_multi_xb) = tc_x_bf16 over it
        launch((unsigned)((T * nr / 4 + 255) / 256), 1, 256, 0, true,
               [&] { tc_x_bf16(o1.data(), nr, T, nr, b1.data(), tc_glu{nullptr, 0}); }, 1, {td_emu_in(o1)});
        snprintf(nm, sizeof nm, "T=%lld n=%lld residual + norm: the norm in bf16", (long long)T, (long long)nr);
        const int64_t nb = memcmp(b1.data(), b2.data(), b1.size() * 2) != 0;
        printf("  %-60s %s\n", nm, nb ? "DIFFER" : "same bits");
        bad |= (int)nb;
    }
    { // gate and up (256 outputs each) gated; the down product (64 outputs) staging them gated
        prob p = mk(T, K, {256, 256}, false, K);
        auto ys = run_split<NF>(p);
        parts(p, part, S, ng);
        std::vector<float> g2((size_t)(T * 256), 5.0f);
        const int64_t n1 = T * 258;
        const int act = T % 2 ? TD_CU_GLU_GELU_TANH : TD_CU_GLU_SILU;
        { // the down product's activations from partials made to cancel (P_0 = 1e6 a, P_2 = c - 1e6 a): another
          // order of the adds shows even through bf16; against them added here in order
            std::vector<float> dp((size_t)(4 * T * 512)), gf((size_t)(T * 258)), uf(gf.size());
            for (int64_t e = 0; e < T * 512; e++) {
                const float a = urand() * 1e6f;
                dp[e] = a, dp[T * 512 + e] = urand(), dp[2 * T * 512 + e] = urand() - a, dp[3 * T * 512 + e] = urand();
                const float y = ((dp[e] + dp[T * 512 + e]) + dp[2 * T * 512 + e]) + dp[3 * T * 512 + e];
                (e % 512 < 256 ? gf : uf)[(e / 512) * 258 + e % 256] = y;
            }
            prob d = mk(T, 256, {64}, false, 258);
            auto y1 = fresh(d), y2 = fresh(d);
            int64_t blocks;
            const tc_jobs j1 = mkjobs(d, y1, SP_R, blocks), j2 = mkjobs(d, y2, SP_R, blocks);
            launch(blocks, 1, 128, tc_split_smem<NF>(), false, [&] {
                tc_split<NF, false, false>(j1, gf.data(), 258, T, 256, nullptr, tc_glu{uf.data(), act});
            }, 1, {td_emu_in(gf), td_emu_in(uf)});
            launch(blocks, 1, 128, tc_split_smem<NF>(), true, [&] {
                const tc_glu gl{dp.data() + 256, act, 4, T * 512};
                tc_split<NF, false, false>(j2, dp.data(), 512, T, 256, nullptr, gl);
            }, 1, {td_emu_in(dp)});
            snprintf(nm, sizeof nm, "T=%lld down product gating 4 partials", (long long)T);
            bad |= cmp(nm, d, y1, y2);
        }
        launch((unsigned)((n1 + EW_NT - 1) / EW_NT), 1, EW_NT, 0, false,
               [&] { glu_kernel(ys[0].data(), ys[1].data(), n1, act); }, 1, {td_emu_in(ys[0]), td_emu_in(ys[1])});
        launch((unsigned)((T * 256 + EW_NT - 1) / EW_NT), 1, EW_NT, 0, true,
               [&] { glu_parts_kernel(g2.data(), part.data(), S, ng, part.data() + 256, S, ng, T, 256, act); }, 1,
               {td_emu_in(part)});
        snprintf(nm, sizeof nm, "T=%lld gate and up gated from %lld partials", (long long)T, (long long)S);
        bad |= same_rows(nm, ys[0].data(), 258, g2.data(), 256, T, 256);
    }
    { // q (2 heads of 64 with their gates), k and v (a head of 64): norms, RoPE, the caches
        prob p = mk(T, K, {Hq * qhs, kv, kv}, false, K);
        auto ys = run_split<NF>(p);
        parts(p, part, S, ng);
        auto qw = rnd(hd, 0.5f, 1.5f), kw = rnd(hd, 0.5f, 1.5f), cs = rnd((size_t)(T * hd), -1, 1);
        std::vector<int32_t> cell((size_t)T);
        for (int64_t t = 0; t < T; t++) cell[t] = (int32_t)((t * 7 + 2) % ncell);
        for (int block = 0; block < 2; block++) {
            auto q1 = ys[0], k1 = ys[1];
            std::vector<float> q2(q1.size(), 7.0f), k2(k1.size(), 7.0f), kc1((size_t)(ncell * kv)), vc1(kc1.size());
            std::vector<float> kc2(kc1.size()), vc2(kc1.size());
            const qkv_src plain = {{{q1.data(), 1, 258}, {k1.data(), 1, kv + 2}, {ys[2].data(), 1, kv + 2}}};
            const float *p0 = part.data();
            const qkv_src held = {{{p0, S, ng}, {p0 + Hq * qhs, S, ng}, {p0 + Hq * qhs + kv, S, ng}}};
            auto go = [&](float *q, float *k, const qkv_src &src, float *kc, float *vc) {
                if (block)
                    qk_prep_kernel(q, 258, qhs, Hq, k, kv + 2, Hkv, src, qw.data(), kw.data(), hd, 1e-6f, 0,
                                   cs.data(), hd, kc, vc, TD_CU_KV_F32, cell.data(), kv);
                else
                    qk_prep_warp_kernel<2, 1>(q, 258, qhs, Hq, k, kv + 2, Hkv, src, qw.data(), kw.data(), hd, 1e-6f, 0,
                                              cs.data(), hd, kc, vc, TD_CU_KV_F32, cell.data(), kv, T * (Hq + Hkv));
            };
            const unsigned grid = (unsigned)(block ? T * (Hq + Hkv) : (T * (Hq + Hkv) + 7) / 8);
            const int nt = block ? ROW_NT : 256;
            launch(grid, 1, nt, 0, false, [&] { go(q1.data(), k1.data(), plain, kc1.data(), vc1.data()); }, 1,
                   {td_emu_in(q1), td_emu_in(k1), td_emu_in(ys[2])});
            launch(grid, 1, nt, 0, true, [&] { go(q2.data(), k2.data(), held, kc2.data(), vc2.data()); }, 1,
                   {td_emu_in(part)});
            const char *form = block ? "a block a head" : "a warp a head";
            snprintf(nm, sizeof nm, "T=%lld q/k preparation (%s) from %lld partials: q", (long long)T, form,
                     (long long)S);
            bad |= same_rows(nm, q1.data(), 258, q2.data(), 258, T, Hq * qhs);
            const float *a[3] = {k1.data(), kc1.data(), vc1.data()}, *b[3] = {k2.data(), kc2.data(), vc2.data()};
            for (int i = 0; i < 3; i++) {
                snprintf(nm, sizeof nm, "T=%lld q/k preparation (%s): %s", (long long)T, form,
                         i == 0 ? "k" : i == 1 ? "the key cache" : "the value cache");
                bad |= i == 0 ? same_rows(nm, a[i], kv + 2, b[i], kv + 2, T, kv)
                              : same_rows(nm, a[i], kv, b[i], kv, ncell, kv);
            }
        }
    }
    return bad;
}
} // namespace

int td_emu_tc(const char *which) {
    int bad = 0;
    if (!strcmp(which, "all") || !strcmp(which, "few")) {
        bad |= check_few<1>(1, 256, {33}, false, 256);
        bad |= check_few<1>(3, 1008, {7, 33}, true, 1013);
        bad |= check_few<1>(8, 3072, {17}, false, 3074);
        bad |= check_few<2>(9, 1040, {33, 5, 20}, true, 1041);
        bad |= check_few<8>(33, 2304, {9}, false, 2304);
        bad |= check_few<4>(32, 2304, {9, 40}, true, 2306);
        bad |= check_few<2>(16, 768, {4097}, false, 768);
        bad |= check_few<8>(64, 1008, {20}, true, 1010);
        bad |= check_few<8>(45, 2560, {16}, false, 2561);
        bad |= check_glu<1>(1, 768, 33, 768, TD_CU_GLU_SILU);
        bad |= check_glu<8>(45, 3072, 20, 3072, TD_CU_GLU_SILU);
        bad |= check_glu<4>(30, 1040, 9, 1041, TD_CU_GLU_GELU_TANH); /* not 16-byte aligned rows: element loads */
        bad |= check_held<8>(45);
        bad |= check_held<2>(9);
    }
    if (!strcmp(which, "all") || !strcmp(which, "many")) {
        bad |= check_many(65, 256, {33}, false, 256);
        bad |= check_many(130, 1008, {129, 7}, true, 1013);
        bad |= check_many(200, 1040, {40}, false, 1044);
        bad |= check_many(129, 576, {140}, true, 578);
        bad |= check_many(70, 3072, {130, 40, 9}, true, 3075); /* 12 slices, three products */
        bad |= check_many(300, 1024, {257, 64}, false, 1024); /* tc_wg: three token tiles, a last one of 44 */
        bad |= check_glu<8>(130, 1024, 140, 1024, TD_CU_GLU_SILU);
        bad |= check_glu<8>(70, 1040, 33, 1043, TD_CU_GLU_GELU_TANH);
        bad |= check_mlp(65, 256, 128, TD_CU_GLU_SILU);
        bad |= check_mlp<false>(130, 512, 192, TD_CU_GLU_GELU_TANH);
        bad |= check_mlp(300, 256, 64, TD_CU_GLU_SILU); /* three token tiles, a last one of 44 */
        bad |= check_mlp<true, 4>(130, 512, 192, TD_CU_GLU_GELU_TANH);
        bad |= check_mlp<true, 4>(300, 1024, 64, TD_CU_GLU_SILU);
        bad |= check_mlp<true, 2>(130, 512, 192, TD_CU_GLU_SILU);
        bad |= check_mlp<true, WS_TMA>(130, 512, 192, TD_CU_GLU_GELU_TANH);
        bad |= check_mlp<true, WS_TMA>(300, 1024, 64, TD_CU_GLU_SILU);
        bad |= check_mlp<true, WS_TMA>(130, 512, 192, TD_CU_GLU_SILU, true);
    }
    if (!strcmp(which, "quick")) {
        bad |= check_few<1>(3, 1008, {7, 33}, true, 1013);
        bad |= check_few<1>(2, 2560, {9}, false, 2560); /* 10 slices: two rounds (double-buffered but at 32) */
        bad |= check_many(65, 256, {33}, false, 256);
        bad |= check_held<4>(17);
        bad |= check_mlp(65, 256, 128, TD_CU_GLU_SILU);
        bad |= check_mlp<true, 4>(65, 256, 128, TD_CU_GLU_SILU);
        bad |= check_mlp<true, WS_TMA>(65, 256, 128, TD_CU_GLU_SILU);
        bad |= check_mlp<true, WS_TMA>(65, 256, 128, TD_CU_GLU_GELU_TANH, true);
    }
    printf(bad ? "tc: DIFFER\n" : "tc: all the same bits\n");
    return bad;
}
