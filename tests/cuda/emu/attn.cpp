// tests/cuda/emu: attention_bf16_64_kernel (tiles of 64 rows, of 96 with 6 warps and of 128 with 8) of
// src/kernels/cuda/attention.cu against attention_bf16_kernel (16 rows), bit for bit, on the CPU (emu.h says what is
// emulated), and both against a double-precision reference of cuda.h's bf16 order (|diff| <= 2^-7 max |v|, as
// tests/cuda/test_cuda_attn_bf16.c).
// Each case's cache (f32 or f16) has a bf16 twin (its values rounded to nearest even, the bf16 order's k and v): both
// tensor-core kernels must give the same bits on it (cp.async staging, and element loads as for a cache that is not
// 16-byte aligned), also with NaN in every cache row no token sees; the fp32 kernel (attention_tile_kernel) on it
// must give the bits it gives on an f32 cache of the same rounded values, within 1e-5 of a double reference of the
// fp32 order on them.
// [quick]: hd 64 and 128, G 1, 2, 8, f32 and f16 caches, windows, the default tiles; [all]: also tiles of 1 .. 64 rows,
// reversed groups, both span sizes, test modes 1-3 (the bf16 cache's too); [selftest]: quick's first case. Every run
// also checks the output's bf16 copy (at_args.outb: each element the output rounded, as tc_x_bf16 rounds). The launch
// arguments mirror attention.cu's at_prepare (span, split, grid); shared memory starts as 0xff bytes (bf16 NaN) so a
// read of a slot never written shows; every output must be written (the buffer starts NaN and the reference check
// would fail).
#include <algorithm>

#include "emu.h"

#include "kernels/cuda/attention.cu"

namespace {

uint64_t rs = 0x5eed64;
uint64_t rnd64() { rs ^= rs << 13; rs ^= rs >> 7; rs ^= rs << 17; return rs; }
float urand(float lo, float hi) {
    return lo + (hi - lo) * (float)((rnd64() >> 11) * (1.0 / 9007199254740992.0));
}
int failures = 0;
template <int N> using I = std::integral_constant<int, N>;

template <typename F> void launch(unsigned gx, unsigned gy, unsigned gz, int nt, size_t dyn, bool is_new, F body) {
    if (td_emu_run(gx, gy, gz, nt, dyn, 0xff, is_new, body) != 0) {
        printf("  cp.async copies never waited for\n");
        failures++;
    }
}

struct kcase {
    int64_t Hq, Hkv, hd, n_ctx, n_seq, n_rows, kv_dim, window;
    int f16;
    std::vector<float> kf, vf;      // f32 cache, or the f16 cache's values
    std::vector<uint16_t> kh, vh;   // f16 cache
    std::vector<uint16_t> kb, vb;   // bf16 cache: kf, vf rounded to bf16 (nearest even)
    std::vector<float> kr, vr;      // f32 cache of the bf16 cache's values
    std::vector<int32_t> cells;     // [n_seq][n_ctx]
    std::vector<int32_t> seq, pos;  // [T]
    std::vector<float> q;           // [T][Hq][hd]
    int64_t T;
};

uint16_t to_f16(float f) { // values in [-1, 1]: normal or zero, round to nearest even
    if (f == 0) return 0;
    int e;
    float m = frexpf(fabsf(f), &e); // |f| = m 2^e, m in [0.5, 1)
    int E = e - 1 + 15;
    if (E <= 0) return 0;
    float mant = (m * 2 - 1) * 1024;
    int mi = (int)nearbyintf(mant);
    if (mi == 1024) mi = 0, E++;
    return (uint16_t)((f < 0) << 15 | E << 10 | mi);
}

kcase mk(int64_t Hq, int64_t Hkv, int64_t hd, int f16, int64_t window, int64_t n_ctx,
                const std::vector<int32_t> &seq, const std::vector<int32_t> &pos) {
    kcase c;
    c.Hq = Hq, c.Hkv = Hkv, c.hd = hd, c.f16 = f16, c.window = window, c.n_ctx = n_ctx, c.n_seq = 3;
    c.n_rows = 3 * n_ctx + 7, c.kv_dim = Hkv * hd;
    c.kf.resize(c.n_rows * c.kv_dim), c.vf.resize(c.n_rows * c.kv_dim);
    for (auto &x : c.kf) x = urand(-1, 1);
    for (auto &x : c.vf) x = urand(-1, 1);
    if (f16) {
        c.kh.resize(c.kf.size()), c.vh.resize(c.vf.size());
        for (size_t i = 0; i < c.kf.size(); i++)
            c.kh[i] = to_f16(c.kf[i]), c.kf[i] = td_dev_f16(c.kh[i]), c.vh[i] = to_f16(c.vf[i]),
            c.vf[i] = td_dev_f16(c.vh[i]);
    }
    c.kb.resize(c.kf.size()), c.vb.resize(c.vf.size()), c.kr.resize(c.kf.size()), c.vr.resize(c.vf.size());
    for (size_t i = 0; i < c.kf.size(); i++)
        c.kb[i] = td_emu_f2bf(c.kf[i]), c.kr[i] = td_emu_bf2f(c.kb[i]), c.vb[i] = td_emu_f2bf(c.vf[i]),
        c.vr[i] = td_emu_bf2f(c.vb[i]);
    std::vector<int32_t> perm(c.n_rows);
    for (int64_t i = 0; i < c.n_rows; i++) perm[i] = (int32_t)i;
    for (int64_t i = c.n_rows - 1; i > 0; i--) std::swap(perm[i], perm[rnd64() % (i + 1)]);
    c.cells.assign(perm.begin(), perm.begin() + 3 * n_ctx);
    c.seq = seq, c.pos = pos, c.T = (int64_t)seq.size();
    c.q.resize(c.T * Hq * hd);
    for (auto &x : c.q) x = urand(-3, 3);
    return c;
}

// The cache a launch reads: the case's own (f32 or f16), its bf16 twin, or the f32 cache of the twin's values.
enum { OWN, BF16, ROUNDED };
struct kvsel {
    const void *k, *v;
    int kvf; // TD_CU_KV_*
};
kvsel cache(const kcase &c, int which) {
    if (which == BF16) return {c.kb.data(), c.vb.data(), TD_CU_KV_BF16};
    if (which == ROUNDED) return {c.kr.data(), c.vr.data(), TD_CU_KV_F32};
    if (c.f16) return {c.kh.data(), c.vh.data(), TD_CU_KV_F16};
    return {c.kf.data(), c.vf.data(), TD_CU_KV_F32};
}

// rows: 16, 64, 96 or 128 (the tensor-core kernels), 0 (the fp32 kernel, attention_tile_kernel); qt: tokens per tile
// (0: the most the kernel takes); mode: td_cu_attention_test_mode; big: the scratch holds the split by chunks (else
// exactly the super-chunk split's); which: the cache (OWN, BF16, ROUNDED); st: how the 64-row kernel (64 and 96
// rows) stages a bf16 cache's chunks (AB_STAGED, AB_DB double-buffered (64 rows only), AB_PIPE keys and values
// pipelined, AB_WG the products on wgmma (64 rows only)); vec: at_args.vec (0: the element loads of a cache that is
// not 16-byte aligned)
std::vector<float> run(const kcase &c, int rows, int64_t qt, int mode, bool big, bool reverse, int which = OWN,
                       int vec = 1, int st = AB_STAGED) {
    const kvsel kv = cache(c, which);
    const int R = rows ? rows : at_rows(c.hd);
    const int64_t T = c.T, Hq = c.Hq, hd = c.hd, G = Hq / c.Hkv;
    std::vector<int32_t> tok, off(c.n_seq + 1), tile;
    for (int64_t s = 0; s < c.n_seq; s++) {
        off[s] = (int32_t)tok.size();
        for (int64_t i = 0; i < T; i++) {
            int64_t t = reverse ? T - 1 - i : i;
            if (c.seq[t] == s) tok.push_back((int32_t)t);
        }
    }
    off[c.n_seq] = (int32_t)tok.size();
    const int64_t GH = at_heads(G, R);
    if (qt <= 0) qt = R / GH;
    for (int64_t g = 0; g < c.n_seq; g++)
        for (int64_t k = off[g]; k < off[g + 1]; k += qt)
            tile.push_back((int32_t)k), tile.push_back((int32_t)std::min<int64_t>(qt, off[g + 1] - k));
    int64_t max_n = 1;
    for (int64_t t = 0; t < T; t++) max_n = std::max<int64_t>(max_n, c.pos[t] + 1);
    const int64_t n_tiles = (int64_t)tile.size() / 2;
    std::vector<float> out(T * Hq * hd, NAN);
    const int64_t chunk_need = T * Hq * ((max_n + AT_C - 1) / AT_C) * (hd + 2);
    const int64_t super_need = T * Hq * ((max_n + AT_SC - 1) / AT_SC) * (hd + 2);
    std::vector<float> scratch(big ? chunk_need : super_need, NAN);
    at_args a;
    a.out = out.data(), a.ldo = Hq * hd, a.q = c.q.data(), a.ldq = Hq * hd, a.qhs = hd;
    a.kc = kv.k, a.vc = kv.v;
    a.kv_dim = c.kv_dim, a.cells = c.cells.data(), a.n_ctx = c.n_ctx, a.seq = c.seq.data(), a.pos = c.pos.data();
    a.tok = tok.data(), a.tile = tile.data(), a.Hq = Hq, a.G = G, a.hd = hd, a.window = c.window;
    a.scale = 1.0f / sqrtf((float)hd);
    a.R = R, a.GH = GH, a.mode = mode == 3 ? 0 : mode, a.scratch = scratch.data(), a.vec = vec;
    std::vector<uint16_t> outb(T * Hq * hd, 0x7fc1); /* the output's bf16 copy (the plan's out_bf16) */
    a.outb = outb.data(), a.ldb = Hq * hd;
    if (kv.kvf != TD_CU_KV_BF16 || !vec || (rows != 64 && !(rows == 96 && st == AB_PIPE))) st = AB_STAGED;
    if (st == AB_WG) td_emu_wg_hazards = 0;
    const int64_t zdim = c.Hkv * (G / GH), supers = (max_n + AT_SC - 1) / AT_SC;
    a.span = AT_SC;
    if (mode == 3 ||
        (a.mode == 0 && max_n > AT_C && n_tiles * zdim * supers < 256 && (int64_t)scratch.size() >= chunk_need))
        a.span = AT_C;
    a.nsc = (max_n + a.span - 1) / a.span;
    const bool split = a.mode == 2 || (a.mode == 0 && max_n > a.span);
    if (split && (int64_t)scratch.size() < T * Hq * a.nsc * (hd + 2)) { fprintf(stderr, "scratch\n"); abort(); }
    const unsigned gy = a.mode == 1 ? 1u : (unsigned)a.nsc;
    /* what the kernels before write (q; the cache's rows of the pass's tokens: here the whole cache), poisoned in
     * each block until its td_pdl_wait (emu.h) */
    const size_t kv_bytes = (size_t)(c.n_rows * c.kv_dim) * (kv.kvf == TD_CU_KV_F32 ? 4 : 2);
    td_emu_pdl_inputs in({td_emu_in(c.q), td_emu_buf{(void *)kv.k, kv_bytes}, td_emu_buf{(void *)kv.v, kv_bytes}});
    auto go = [&](auto kvfc) {
        constexpr int KVF = decltype(kvfc)::value;
        auto tc = [&](auto hdc) {
            constexpr int HD = decltype(hdc)::value;
            if (st != AB_STAGED) {
                if constexpr (KVF == TD_CU_KV_BF16) {
                    if (rows == 96)
                        launch(n_tiles, gy, zdim, 192, ab64_smem(HD, a.mode, 0, 96), true,
                               [&] { attention_bf16_64_kernel<KVF, HD, AB_PIPE, 6, 2>(a); });
                    else if (st == AB_DB)
                        launch(n_tiles, gy, zdim, AB_NT, ab64_smem(HD, a.mode, 1), true,
                               [&] { attention_bf16_64_kernel<KVF, HD, AB_DB>(a); });
                    else if (st == AB_WG)
                        launch(n_tiles, gy, zdim, AB_NT, ab64_smem(HD, a.mode, 0, 64, true), true,
                               [&] { attention_bf16_64_kernel<KVF, HD, AB_WG>(a); });
                    else
                        launch(n_tiles, gy, zdim, AB_NT, ab64_smem(HD, a.mode, 0), true,
                               [&] { attention_bf16_64_kernel<KVF, HD, AB_PIPE>(a); });
                }
            } else if (rows == 64)
                launch(n_tiles, gy, zdim, AB_NT, ab64_smem(HD, a.mode, 0), true,
                       [&] { attention_bf16_64_kernel<KVF, HD>(a); });
            else if (rows == 96)
                launch(n_tiles, gy, zdim, 192, ab64_smem(HD, a.mode, 0, 96), true,
                       [&] { attention_bf16_64_kernel<KVF, HD, AB_STAGED, 6, 2>(a); });
            else if (rows == 128)
                launch(n_tiles, gy, zdim, 256, ab64_smem(HD, a.mode, 0, 128), true,
                       [&] { attention_bf16_64_kernel<KVF, HD, AB_STAGED, 8>(a); });
            else
                launch(n_tiles, gy, zdim, AB_NT, ab_smem(HD), false, [&] { attention_bf16_kernel<KVF, HD>(a); });
        };
        if (rows == 0)
            launch(n_tiles, gy, zdim, AT_NT, at_smem(R, hd, a.mode), false, [&] { attention_tile_kernel<KVF>(a); });
        else if (hd == 64) tc(I<64>());
        else tc(I<128>());
    };
    if (kv.kvf == TD_CU_KV_BF16) go(I<TD_CU_KV_BF16>());
    else if (kv.kvf == TD_CU_KV_F16) go(I<TD_CU_KV_F16>());
    else go(I<TD_CU_KV_F32>());
    if (split)
        for (int64_t b = 0; b < T * Hq; b++) {
            blockIdx.x = (unsigned)b;
            for (int t = 0; t < 128; t++) threadIdx.x = t, attention_combine_kernel(a);
        }
    if (st == AB_WG && td_emu_wg_hazards) {
        printf("  FAIL: %lld cp.async copies into lines a pending wgmma reads\n", (long long)td_emu_wg_hazards);
        failures++;
    }
    int64_t copy_bad = 0; /* every output's copy written, as tc_x_bf16 would round it */
    for (size_t i = 0; i < out.size(); i++) copy_bad += outb[i] != (uint16_t)(td_pack_bf16(out[i], 0.0f) & 0xffffu);
    if (copy_bad) {
        printf("  FAIL: %lld outputs' bf16 copies are not the output rounded\n", (long long)copy_bad);
        failures++;
    }
    return out;
}

// cuda.h's bf16 order in double: q, k, v rounded to bf16, p = bf16(exp(s - m_chunk)) per chunk of 64 anchored at 0;
// with !bf16 the fp32 order's values (q as it is, p unrounded) on the cache of the bf16 twin's values (kr, vr)
std::vector<float> ref(const kcase &c, bool bf16 = true) {
    const int64_t Hq = c.Hq, hd = c.hd, G = Hq / c.Hkv;
    std::vector<float> out(c.T * Hq * hd);
    auto rb = [bf16](float f) { return bf16 ? td_dev_round_bf16(f) : f; };
    const std::vector<float> &kf = bf16 ? c.kf : c.kr, &vf = bf16 ? c.vf : c.vr;
    for (int64_t t = 0; t < c.T; t++)
        for (int64_t h = 0; h < Hq; h++) {
            int64_t n = c.pos[t] + 1, lo = c.window > 0 && n > c.window ? n - c.window : 0, kvh = h / G;
            std::vector<double> acc(hd, 0.0);
            double L = 0, M = -INFINITY;
            std::vector<double> s(n, -INFINITY);
            for (int64_t p = lo; p < n; p++) {
                const int64_t row = c.cells[c.seq[t] * c.n_ctx + p];
                double d = 0;
                for (int64_t e = 0; e < hd; e++)
                    d += (double)rb(c.q[(t * Hq + h) * hd + e]) * rb(kf[row * c.kv_dim + kvh * hd + e]);
                s[p] = d / sqrt((double)hd);
                M = std::max(M, s[p]);
            }
            for (int64_t c0 = lo / 64 * 64; c0 < n; c0 += 64) { // per chunk: p rounded to bf16 against its own max
                double m = -INFINITY;
                for (int64_t p = std::max(c0, lo); p < std::min(c0 + 64, n); p++) m = std::max(m, s[p]);
                for (int64_t p = std::max(c0, lo); p < std::min(c0 + 64, n); p++) {
                    double pp = (bf16 ? rb((float)exp(s[p] - m)) : exp(s[p] - m)) * exp(m - M);
                    L += pp;
                    const int64_t row = c.cells[c.seq[t] * c.n_ctx + p];
                    for (int64_t e = 0; e < hd; e++) acc[e] += pp * rb(vf[row * c.kv_dim + kvh * hd + e]);
                }
            }
            for (int64_t e = 0; e < hd; e++) out[(t * Hq + h) * hd + e] = (float)(acc[e] / L);
        }
    return out;
}

// c with NaN (bf16) in every row of its bf16 twin that no token's range reaches, keys and values
kcase poisoned(const kcase &c) {
    kcase p = c;
    std::vector<char> seen(c.n_rows, 0);
    for (int64_t t = 0; t < c.T; t++) {
        const int64_t n = c.pos[t] + 1, lo = c.window > 0 && n > c.window ? n - c.window : 0;
        for (int64_t q = lo; q < n; q++) seen[c.cells[c.seq[t] * c.n_ctx + q]] = 1;
    }
    for (int64_t row = 0; row < c.n_rows; row++)
        if (!seen[row])
            for (int64_t i = 0; i < c.kv_dim; i++) p.kb[row * c.kv_dim + i] = p.vb[row * c.kv_dim + i] = 0x7fc0;
    return p;
}

void bits(const char *name, const std::vector<float> &a, const std::vector<float> &b) {
    int64_t differ = 0;
    for (size_t i = 0; i < a.size(); i++) differ += memcmp(&a[i], &b[i], 4) != 0;
    printf("  %-70s %s", name, differ ? "NOT bit-exact" : "bit-exact");
    if (differ) printf(" (%lld of %zu differ)", (long long)differ, a.size()), failures++;
    printf("\n");
}
void near(const char *name, const std::vector<float> &a, const std::vector<float> &r, double bound = ldexp(1.0, -7)) {
    double worst = 0;
    for (size_t i = 0; i < a.size(); i++) {
        double d = fabs((double)a[i] - r[i]);
        if (!(d <= worst)) worst = std::isnan(d) ? INFINITY : d;
    }
    bool ok = worst <= bound;
    printf("  %-70s max |diff| %.3g%s\n", name, worst, ok ? "" : " TOO FAR");
    failures += !ok;
}

} // namespace

int td_emu_attn(const char *what) {
    const bool quick = strcmp(what, "all") != 0;
    failures = 0;
    struct spec { int64_t Hq, Hkv, hd; int f16; int64_t window; };
    const spec specs[] = {{2, 1, 64, 0, 0}, {8, 1, 128, 1, 100}, {2, 2, 64, 1, 0}, {4, 2, 128, 0, 40}};
    const int n_specs = !strcmp(what, "selftest") ? 1 : 4;
    for (int si = 0; si < n_specs; si++) {
        const spec &sp = specs[si];
        const int64_t G = sp.Hq / sp.Hkv;
        std::vector<int32_t> seq, pos;
        const int run_len = (int)(sp.hd == 128 && G == 8 ? 20 : 70); // seq 0: a causal run crossing 512
        for (int i = 0; i < run_len; i++) seq.push_back(0), pos.push_back(500 - run_len / 2 + i);
        for (int i = 0; i < 5; i++) seq.push_back(1), pos.push_back((int32_t)(rnd64() % 700));
        const int32_t edge[] = {0, 1, 63, 64, 65, 600};
        for (int32_t p : edge) seq.push_back(2), pos.push_back(p);
        kcase c = mk(sp.Hq, sp.Hkv, sp.hd, sp.f16, sp.window, 700, seq, pos);
        printf("hd %lld G %lld kv %s window %lld, %lld tokens\n", (long long)sp.hd, (long long)G,
               sp.f16 ? "f16" : "f32", (long long)sp.window, (long long)c.T);
        std::vector<float> r16 = run(c, 16, 0, 0, true, false), rr = ref(c);
        near("16 rows vs the double reference", r16, rr);
        std::vector<float> r64 = run(c, 64, 0, 0, true, false);
        near("64 rows vs the double reference", r64, rr);
        bits("64 rows (most tokens a tile) vs 16 rows", r64, r16);
        bits("96 rows (6 warps: staging units not a multiple of the threads) vs 16 rows", run(c, 96, 0, 0, true, false),
             r16);
        bits("96 rows, bf16 cache vs the own cache", run(c, 96, 0, 0, true, false, BF16), r16);
        bits("96 rows, bf16 cache, element loads, super-chunk spans", run(c, 96, 0, 0, false, false, BF16, 0), r16);
        bits("128 rows (8 warps) vs 16 rows", run(c, 128, 0, 0, true, false), r16);
        bits("128 rows, bf16 cache vs the own cache", run(c, 128, 0, 0, true, false, BF16), r16);
        bits("128 rows, bf16 cache, element loads, super-chunk spans", run(c, 128, 0, 0, false, false, BF16, 0), r16);
        bits("16 rows, bf16 cache vs the own cache", run(c, 16, 0, 0, true, false, BF16), r16);
        bits("64 rows, bf16 cache vs the own cache", run(c, 64, 0, 0, true, false, BF16), r16);
        bits("64 rows, bf16 cache, element loads (not 16-byte aligned)", run(c, 64, 0, 0, true, false, BF16, 0), r16);
        // double buffering needs spans of several chunks: super-chunk spans, and test mode 1 (all of a tile's)
        bits("64 rows, bf16 cache double-buffered, super-chunk spans", run(c, 64, 0, 0, false, false, BF16, 1, AB_DB),
             r16);
        bits("64 rows, bf16 cache double-buffered, test mode 1", run(c, 64, 0, 1, true, false, BF16, 1, AB_DB), r16);
        bits("64 rows, bf16 cache double-buffered, 3 tokens a tile, reversed",
             run(c, 64, 3, 0, false, true, BF16, 1, AB_DB), r16);
        // the keys and values pipelined: chunk spans, super-chunk spans, test mode 1, 96 rows, small tiles
        bits("64 rows, bf16 cache pipelined", run(c, 64, 0, 0, true, false, BF16, 1, AB_PIPE), r16);
        bits("64 rows, bf16 cache pipelined, super-chunk spans", run(c, 64, 0, 0, false, false, BF16, 1, AB_PIPE),
             r16);
        bits("64 rows, bf16 cache pipelined, test mode 1", run(c, 64, 0, 1, true, false, BF16, 1, AB_PIPE), r16);
        bits("64 rows, bf16 cache pipelined, 3 tokens a tile, reversed",
             run(c, 64, 3, 0, false, true, BF16, 1, AB_PIPE), r16);
        bits("96 rows, bf16 cache pipelined, super-chunk spans", run(c, 96, 0, 0, false, false, BF16, 1, AB_PIPE),
             r16);
        // the products on wgmma (the warpgroup's 64 rows; idle warps included)
        bits("64 rows on wgmma", run(c, 64, 0, 0, true, false, BF16, 1, AB_WG), r16);
        bits("64 rows on wgmma, super-chunk spans", run(c, 64, 0, 0, false, false, BF16, 1, AB_WG), r16);
        bits("64 rows on wgmma, test mode 1", run(c, 64, 0, 1, true, false, BF16, 1, AB_WG), r16);
        bits("64 rows on wgmma, 3 tokens a tile, reversed", run(c, 64, 3, 0, false, true, BF16, 1, AB_WG), r16);
        {
            const kcase cp = poisoned(c);
            bits("16 rows, bf16 cache, NaN in every row no token sees", run(cp, 16, 0, 0, true, false, BF16), r16);
            bits("64 rows, bf16 cache, NaN in every row no token sees", run(cp, 64, 0, 0, true, false, BF16), r16);
            bits("64 rows, bf16 cache double-buffered, NaN in every row no token sees",
                 run(cp, 64, 0, 0, false, false, BF16, 1, AB_DB), r16);
            bits("64 rows, bf16 cache pipelined, NaN in every row no token sees",
                 run(cp, 64, 0, 0, false, false, BF16, 1, AB_PIPE), r16);
            bits("64 rows on wgmma, NaN in every row no token sees", run(cp, 64, 0, 0, false, false, BF16, 1, AB_WG),
                 r16);
        }
        std::vector<float> t32 = run(c, 0, 0, 0, true, false, ROUNDED);
        near("fp32 kernel, f32 cache of the bf16 values vs the fp32 double reference", t32, ref(c, false), 1e-5);
        bits("fp32 kernel, bf16 cache vs the f32 cache of its values", run(c, 0, 0, 0, true, false, BF16), t32);
        if (quick) continue;
        char name[160];
        const int64_t qmax = 64 / at_heads(G, 64);
        for (int64_t qt : {(int64_t)1, (int64_t)3, qmax / 2 + 1}) {
            if (qt > qmax) continue;
            snprintf(name, sizeof name, "64 rows, %lld tokens a tile, groups reversed", (long long)qt);
            bits(name, run(c, 64, qt, 0, true, true), r16);
        }
        bits("64 rows, super-chunk spans (scratch too small for chunks)", run(c, 64, 0, 0, false, false), r16);
        bits("16 rows, super-chunk spans", run(c, 16, 0, 0, false, false), r16);
        for (int mode = 1; mode <= 3; mode++) {
            snprintf(name, sizeof name, "64 rows, test mode %d", mode);
            bits(name, run(c, 64, 0, mode, true, false), r16);
            snprintf(name, sizeof name, "64 rows, bf16 cache, test mode %d", mode);
            bits(name, run(c, 64, 0, mode, true, false, BF16), r16);
            snprintf(name, sizeof name, "16 rows, bf16 cache, test mode %d", mode);
            bits(name, run(c, 16, 0, mode, true, false, BF16), r16);
            snprintf(name, sizeof name, "fp32 kernel, bf16 cache, test mode %d", mode);
            bits(name, run(c, 0, 0, mode, true, false, BF16), t32);
        }
        bits("64 rows, bf16 cache, 1 token a tile, groups reversed", run(c, 64, 1, 0, true, true, BF16), r16);
        for (int mode = 1; mode <= 3; mode++) {
            snprintf(name, sizeof name, "128 rows, bf16 cache, test mode %d", mode);
            bits(name, run(c, 128, 0, mode, true, false, BF16), r16);
        }
        bits("128 rows, 5 tokens a tile, groups reversed", run(c, 128, 5, 0, true, true), r16);
        for (int mode = 1; mode <= 3; mode++) {
            snprintf(name, sizeof name, "96 rows, bf16 cache, test mode %d", mode);
            bits(name, run(c, 96, 0, mode, true, false, BF16), r16);
        }
        bits("96 rows, 7 tokens a tile, groups reversed", run(c, 96, 7, 0, true, true), r16);
        bits("fp32 kernel, bf16 cache, super-chunk spans", run(c, 0, 0, 0, false, false, BF16), t32);
    }
    printf(failures ? "attn: %d FAILED\n" : "attn: all passed\n", failures);
    return failures;
}
