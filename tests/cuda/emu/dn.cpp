// tests/cuda/emu: the chunked Gated DeltaNet of src/kernels/cuda/deltanet_chunk.cu (td_cu_deltanet_chunk's three
// kernels, launched as its host side launches them) on the CPU (emu.h says what is emulated):
//   split invariance: the same sequence's tokens given in calls of 1 + 63 + 64 + ..., 7 + rest, 70 + rest, 65 + 1 +
//     rest, one token at a time, and all at once: every output and the state after (S and the open rows) bit for bit;
//   a double-precision reference of the token-by-token recurrence (td_deltanet_step_ref's algebra + the gated norm)
//     and one of the chunk form (cuda.h's formulas in double, chunks anchored at 0): the kernels within 2e-5 of
//     max |core| and max |S| of the recurrence (fp32 over chains of <= 192 terms and the 64-row triangular solve),
//     and the two double forms within 1e-9 of each other (the algebra of the chunk form, open rows included);
// shapes: Hk / Hv = 1 / 2 at dk = dv = 128 (100 tokens), 2 / 4 at dk = 27, dv = 37 (odd sizes, a partial column
// slice, two sequences of 100 tokens whose rows interleave in the batch), 16 / 32 at 128 (Qwen3.5-0.8B's heads, 70
// tokens, all at once and 7 + the rest only: the emulator's time);
// every sequence starts from a random S at position 0; a token with NaN k and infinite v at position 80 (60 in the
// 70-token case) changes no output before it (a later row never enters an earlier one, not even as 0 x inf). The
// scratch starts as NaN (an unwritten value read shows) and shared memory as NaN bytes; a digest of the all-at-once
// bits is printed (to compare variants of the kernels here). [selftest]: the first shape's all-at-once run against
// the references.
#include <algorithm>

#include "emu.h"

#include "kernels/cuda/deltanet_chunk.cu"

namespace {

uint64_t rs = 0xd17a5eedull;
uint64_t rnd64() { rs ^= rs << 13; rs ^= rs >> 7; rs ^= rs << 17; return rs; }
float urand(float lo, float hi) { return lo + (hi - lo) * (float)((rnd64() >> 11) * (1.0 / 9007199254740992.0)); }
int failures = 0;
bool step_on = true; // one-token calls on dnc_step_kernel, as the host side (td_cu_deltanet_chunk_test_step)

struct dcase {
    int Hk, Hv, dk, dv, ldu, N, n_seq; // N token rows in all, n_seq sequences, rows of sequence s: rows[s]
    std::vector<float> u, z, b, a, a_log, dt_bias, norm_w;
    std::vector<std::vector<int32_t>> rows;
    std::vector<std::vector<float>> S0; // each sequence's S at position 0 [Hv][dk][dv]
};

dcase mk(int Hk, int Hv, int dk, int dv, int per_seq, int n_seq) {
    dcase c;
    c.Hk = Hk, c.Hv = Hv, c.dk = dk, c.dv = dv, c.ldu = 2 * Hk * dk + Hv * dv + 3, c.N = per_seq * n_seq;
    c.n_seq = n_seq;
    c.u.resize((size_t)c.N * c.ldu), c.z.resize((size_t)c.N * Hv * dv), c.b.resize((size_t)c.N * Hv);
    c.a.resize((size_t)c.N * Hv), c.a_log.resize(Hv), c.dt_bias.resize(Hv), c.norm_w.resize(dv);
    for (auto &x : c.u) x = urand(-1, 1);
    for (auto &x : c.z) x = urand(-3, 3);
    for (auto &x : c.b) x = urand(-3, 3);
    for (auto &x : c.a) x = urand(-4, 4);
    for (auto &x : c.a_log) x = urand(-2, 1);
    for (auto &x : c.dt_bias) x = urand(-1, 1);
    for (auto &x : c.norm_w) x = urand(0.5f, 1.5f);
    std::vector<int32_t> perm(c.N);
    for (int i = 0; i < c.N; i++) perm[i] = i;
    for (int i = c.N - 1; i > 0; i--) std::swap(perm[i], perm[rnd64() % (i + 1)]);
    c.rows.resize(n_seq);
    for (int i = 0; i < c.N; i++) c.rows[i % n_seq].push_back(perm[i]); // sequences' rows interleave
    c.S0.resize(n_seq);
    for (auto &s : c.S0) {
        s.resize((size_t)Hv * dk * dv);
        for (auto &x : s) x = urand(-0.2f, 0.2f);
    }
    return c;
}

template <typename F> void launch3(unsigned gx, unsigned gy, unsigned gz, int nt, size_t dyn, F body) {
    if (td_emu_run(gx, gy, gz, nt, dyn, 0xff, true, body) != 0) {
        printf("  cp.async copies never waited for\n");
        failures++;
    }
}

// dnc_launch (deltanet_chunk.cu's host side) on the emulator: the step kernel over the one-token groups, the prep and
// state kernels over the others, the norm over every token
void launch_set(const dcase &c, dnc_args p, int n_chunks, int n_pre, int n_step, int n_tokens) {
    if (n_step > 0) {
        dnc_args q = p;
        if (q.gtab) q.gtab += 6 * n_pre;
        launch3((unsigned)c.Hv, 1, (unsigned)n_step, DNC_NT, dnc_step_smem(c.dk, c.dv), [&] { dnc_step_kernel(q); });
    }
    if (n_pre > 0) {
        launch3((unsigned)n_chunks, (unsigned)c.Hv, 1, DNC_NT, dnc_prep_smem(c.dk, c.dv), [&] { dnc_prep_kernel(p); });
        launch3((unsigned)c.Hv, (unsigned)((c.dv + DNC_CW - 1) / DNC_CW), (unsigned)n_pre, DNC_NT,
                dnc_state_smem(c.dk), [&] { dnc_state_kernel(p); });
    }
    launch3((unsigned)n_tokens, (unsigned)c.Hv, 1, DNC_NNT, 0, [&] { dnc_norm_kernel(p); });
}

dnc_args args(const dcase &c, std::vector<float> &core, float *state, float *scratch, const int32_t *tok) {
    dnc_args p;
    p.core = core.data(), p.u = c.u.data(), p.ldu = c.ldu, p.z = c.z.data(), p.b = c.b.data(), p.a = c.a.data();
    p.a_log = c.a_log.data(), p.dt_bias = c.dt_bias.data(), p.norm_w = c.norm_w.data(), p.state = state;
    p.scratch = scratch, p.tok = tok, p.Hk = c.Hk, p.Hv = c.Hv, p.dk = c.dk, p.dv = c.dv, p.eps = 1e-6f;
    p.gtab = p.ctab = nullptr, p.seq_stride = 0, p.n = p.n0 = p.nc = 0, p.tail = nullptr;
    return p;
}

// td_cu_deltanet_chunk: one call for the n tokens tok[0 .. n) at positions pos0 ...
void call(const dcase &c, std::vector<float> &core, std::vector<float> &state, const int32_t *tok, int n, int pos0) {
    std::vector<float> scratch((size_t)td_cu_deltanet_chunk_scratch_floats(n, pos0, c.Hv, c.dk, c.dv), NAN);
    dnc_args p = args(c, core, state.data(), scratch.data(), tok);
    p.n = n, p.n0 = pos0 % DNC_C, p.nc = dnc_chunks(n, pos0);
    p.tail = scratch.data() + (int64_t)p.nc * c.Hv * dnc_chunk_floats(c.dk, c.dv);
    td_cu_deltanet_chunk_test_step(step_on);
    const bool step = dnc_is_step(n);
    launch_set(c, p, step ? 0 : p.nc, step ? 0 : 1, step ? 1 : 0, n);
}

// Every sequence through calls of the given sizes (cycled; 0: the rest at once). core [N][Hv dv] starts NaN (every
// output must be written); states: each sequence's chunk state after.
void run(const dcase &c, const std::vector<int> &sizes, std::vector<float> &core, std::vector<std::vector<float>> &st) {
    core.assign((size_t)c.N * c.Hv * c.dv, NAN);
    st.resize(c.n_seq);
    const int64_t hf = dnc_head_floats(c.dk, c.dv);
    for (int s = 0; s < c.n_seq; s++) {
        st[s].assign((size_t)td_cu_deltanet_chunk_state_floats(c.Hv, c.dk, c.dv), NAN);
        for (int h = 0; h < c.Hv; h++) // S at position 0; the open rows are never read at a boundary (left NaN)
            memcpy(&st[s][h * hf], &c.S0[s][(size_t)h * c.dk * c.dv], sizeof(float) * c.dk * c.dv);
        const int n_tok = (int)c.rows[s].size();
        for (int pos = 0, k = 0; pos < n_tok; k++) {
            int n = sizes[k % sizes.size()];
            if (n == 0 || n > n_tok - pos) n = n_tok - pos;
            call(c, core, st[s], c.rows[s].data() + pos, n, pos);
            pos += n;
        }
    }
}

// As run, but each round's calls of every sequence in one launch set (td_cu_deltanet_chunk_multi: a pass's groups),
// sequence s taking the sizes from the (k + s)-th on (so one-token groups and longer ones meet in a round); the
// sequences' states one buffer, seq_stride apart.
void run_multi(const dcase &c, const std::vector<int> &sizes, std::vector<float> &core,
               std::vector<std::vector<float>> &st) {
    core.assign((size_t)c.N * c.Hv * c.dv, NAN);
    const int64_t sf = td_cu_deltanet_chunk_state_floats(c.Hv, c.dk, c.dv), hf = dnc_head_floats(c.dk, c.dv);
    std::vector<float> all((size_t)(sf * c.n_seq), NAN);
    for (int s = 0; s < c.n_seq; s++)
        for (int h = 0; h < c.Hv; h++)
            memcpy(&all[s * sf + h * hf], &c.S0[s][(size_t)h * c.dk * c.dv], sizeof(float) * c.dk * c.dv);
    std::vector<int> pos(c.n_seq, 0);
    td_cu_deltanet_chunk_test_step(step_on);
    for (int k = 0;; k++) {
        std::vector<int32_t> off{0}, seq, tok;
        std::vector<int64_t> p0;
        for (int s = c.n_seq - 1; s >= 0; s--) { // groups in reverse sequence order
            const int n_tok = (int)c.rows[s].size();
            if (pos[s] >= n_tok) continue;
            int n = sizes[(k + s) % sizes.size()]; // rounds mix one-token groups and others
            if (n == 0 || n > n_tok - pos[s]) n = n_tok - pos[s];
            tok.insert(tok.end(), c.rows[s].begin() + pos[s], c.rows[s].begin() + pos[s] + n);
            off.push_back((int32_t)tok.size()), seq.push_back(s), p0.push_back(pos[s]);
            pos[s] += n;
        }
        if (seq.empty()) break;
        td_cu_dnc_plan plan;
        td_cu_deltanet_chunk_plan(nullptr, &plan, off.data(), seq.data(), p0.data(), (int64_t)seq.size(), c.Hv, c.dk,
                                  c.dv);
        std::vector<int32_t> tab((size_t)plan.n_ints);
        const int64_t need = td_cu_deltanet_chunk_plan(tab.data(), &plan, off.data(), seq.data(), p0.data(),
                                                       (int64_t)seq.size(), c.Hv, c.dk, c.dv);
        std::vector<float> scratch((size_t)(need > 0 ? need : 1), NAN);
        dnc_args p = args(c, core, all.data(), scratch.data(), tok.data());
        p.seq_stride = sf, p.gtab = tab.data(), p.ctab = tab.data() + 6 * (plan.n_pre + plan.n_step);
        p.tail = scratch.data() + plan.n_chunks * c.Hv * dnc_chunk_floats(c.dk, c.dv);
        launch_set(c, p, (int)plan.n_chunks, (int)plan.n_pre, (int)plan.n_step, (int)plan.n_tokens);
    }
    td_cu_deltanet_chunk_test_step(1);
    st.assign(c.n_seq, {});
    for (int s = 0; s < c.n_seq; s++) st[s].assign(all.begin() + s * sf, all.begin() + (s + 1) * sf);
}

// The state's meaningful floats (S, and the open rows r < n_tok % 64 of K, V, G, B, T, V') of every sequence, in one
// vector.
std::vector<float> meaningful(const dcase &c, const std::vector<std::vector<float>> &st) {
    std::vector<float> r;
    const int64_t hf = dnc_head_floats(c.dk, c.dv);
    for (int s = 0; s < c.n_seq; s++) {
        const int m = (int)(c.rows[s].size() % DNC_C);
        for (int h = 0; h < c.Hv; h++) {
            const float *hs = &st[s][h * hf], *K = hs + c.dk * c.dv, *V = K + (DNC_C - 1) * c.dk,
                        *G = V + (DNC_C - 1) * c.dv, *B = G + DNC_C - 1, *T = B + DNC_C - 1,
                        *Vp = T + (DNC_C - 1) * DNC_C;
            r.insert(r.end(), hs, hs + c.dk * c.dv);
            r.insert(r.end(), K, K + m * c.dk);
            r.insert(r.end(), V, V + m * c.dv);
            r.insert(r.end(), G, G + m);
            r.insert(r.end(), B, B + m);
            r.insert(r.end(), T, T + m * DNC_C);
            r.insert(r.end(), Vp, Vp + m * c.dv);
        }
    }
    return r;
}

// ---- the double references: token inputs, the recurrence, the chunk form ----
struct dtok {
    std::vector<double> q, k, v;
    double g, beta;
};
dtok inputs(const dcase &c, int32_t t, int h) {
    dtok r;
    const int kh = h / (c.Hv / c.Hk);
    const float *ut = &c.u[(size_t)t * c.ldu];
    double sq = 0, sk = 0;
    for (int i = 0; i < c.dk; i++) sq += (double)ut[kh * c.dk + i] * ut[kh * c.dk + i];
    for (int i = 0; i < c.dk; i++) sk += (double)ut[c.Hk * c.dk + kh * c.dk + i] * ut[c.Hk * c.dk + kh * c.dk + i];
    for (int i = 0; i < c.dk; i++) {
        r.q.push_back(ut[kh * c.dk + i] / sqrt(sq + 1e-6) / sqrt((double)c.dk));
        r.k.push_back(ut[c.Hk * c.dk + kh * c.dk + i] / sqrt(sk + 1e-6));
    }
    for (int e = 0; e < c.dv; e++) r.v.push_back(ut[2 * c.Hk * c.dk + h * c.dv + e]);
    r.beta = 1 / (1 + exp(-(double)c.b[(size_t)t * c.Hv + h]));
    const double x = (double)c.a[(size_t)t * c.Hv + h] + c.dt_bias[h];
    r.g = -exp((double)c.a_log[h]) * (x > 20 ? x : log1p(exp(x)));
    return r;
}
// the gated RMS norm of o into core row t, head h
void gated(const dcase &c, const std::vector<double> &o, int32_t t, int h, std::vector<double> &core) {
    double ss = 0;
    for (double x : o) ss += x * x;
    const double r = 1 / sqrt(ss / c.dv + 1e-6);
    for (int e = 0; e < c.dv; e++) {
        const double zi = c.z[((size_t)t * c.Hv + h) * c.dv + e];
        core[((size_t)t * c.Hv + h) * c.dv + e] = c.norm_w[e] * o[e] * r * (zi / (1 + exp(-zi)));
    }
}
// token by token: S = e^g S; m = S^T k; S += k (beta (v - m))^T; o = S^T q. S: [seq][Hv][dk][dv] at the sequence's
// last chunk boundary (what the chunk state holds).
void ref_recurrent(const dcase &c, std::vector<double> &core, std::vector<std::vector<double>> &S) {
    core.assign((size_t)c.N * c.Hv * c.dv, 0);
    S.resize(c.n_seq);
    for (int s = 0; s < c.n_seq; s++) {
        S[s].assign(c.S0[s].begin(), c.S0[s].end());
        for (int h = 0; h < c.Hv; h++) {
            double *Sh = &S[s][(size_t)h * c.dk * c.dv];
            const size_t n_tok = c.rows[s].size(), edge = n_tok / DNC_C * DNC_C;
            std::vector<double> at_edge(Sh, Sh + (size_t)c.dk * c.dv);
            for (size_t it = 0; it < n_tok; it++) {
                const int32_t t = c.rows[s][it];
                const dtok x = inputs(c, t, h);
                std::vector<double> m(c.dv, 0), o(c.dv, 0);
                for (int i = 0; i < c.dk; i++)
                    for (int e = 0; e < c.dv; e++) Sh[i * c.dv + e] *= exp(x.g), m[e] += Sh[i * c.dv + e] * x.k[i];
                for (int i = 0; i < c.dk; i++)
                    for (int e = 0; e < c.dv; e++) {
                        Sh[i * c.dv + e] += x.k[i] * x.beta * (x.v[e] - m[e]);
                        o[e] += Sh[i * c.dv + e] * x.q[i];
                    }
                gated(c, o, t, h, core);
                if (it + 1 == edge) at_edge.assign(Sh, Sh + (size_t)c.dk * c.dv);
            }
            std::copy(at_edge.begin(), at_edge.end(), Sh); // S at the last chunk boundary, as the chunk state holds
        }
    }
}
// cuda.h's chunk formulas in double over chunks of 64 anchored at 0; S after = the last boundary's
void ref_chunked(const dcase &c, std::vector<double> &core, std::vector<std::vector<double>> &S) {
    core.assign((size_t)c.N * c.Hv * c.dv, 0);
    S.resize(c.n_seq);
    const int dk = c.dk, dv = c.dv, C = DNC_C;
    for (int s = 0; s < c.n_seq; s++) {
        S[s].assign(c.S0[s].begin(), c.S0[s].end());
        const int n_tok = (int)c.rows[s].size();
        for (int h = 0; h < c.Hv; h++) {
            double *S0 = &S[s][(size_t)h * dk * dv];
            for (int c0 = 0; c0 < n_tok; c0 += C) {
                const int nr = std::min(C, n_tok - c0);
                std::vector<dtok> x;
                for (int r = 0; r < nr; r++) x.push_back(inputs(c, c.rows[s][c0 + r], h));
                std::vector<double> G(nr), T((size_t)nr * nr, 0), A((size_t)nr * nr, 0);
                for (int r = 0; r < nr; r++) G[r] = (r ? G[r - 1] : 0) + x[r].g;
                auto dot = [&](const std::vector<double> &p, const std::vector<double> &q) {
                    double d = 0;
                    for (int i = 0; i < dk; i++) d += p[i] * q[i];
                    return d;
                };
                for (int i = 0; i < nr; i++)
                    for (int j = 0; j < i; j++) A[i * nr + j] = dot(x[i].k, x[j].k) * x[i].beta * exp(G[i] - G[j]);
                for (int i = 0; i < nr; i++) {
                    T[i * nr + i] = 1;
                    for (int j = 0; j < i; j++) {
                        double v = A[i * nr + j];
                        for (int m = j + 1; m < i; m++) v += A[i * nr + m] * T[m * nr + j];
                        T[i * nr + j] = -v;
                    }
                }
                std::vector<double> Vp((size_t)nr * dv), W((size_t)nr * dk, 0), QK((size_t)nr * nr, 0);
                for (int t = 0; t < nr; t++)
                    for (int m = 0; m <= t; m++) {
                        for (int i = 0; i < dk; i++) W[t * dk + i] += T[t * nr + m] * x[m].k[i] * x[m].beta * exp(G[m]);
                        QK[t * nr + m] = dot(x[t].q, x[m].k) * exp(G[t] - G[m]);
                    }
                for (int t = 0; t < nr; t++)
                    for (int e = 0; e < dv; e++) {
                        double u = 0, ws = 0;
                        for (int m = 0; m <= t; m++) u += T[t * nr + m] * x[m].v[e] * x[m].beta;
                        for (int i = 0; i < dk; i++) ws += W[t * dk + i] * S0[i * dv + e];
                        Vp[t * dv + e] = u - ws;
                    }
                for (int t = 0; t < nr; t++) {
                    std::vector<double> o(dv, 0);
                    for (int e = 0; e < dv; e++) {
                        for (int i = 0; i < dk; i++) o[e] += x[t].q[i] * exp(G[t]) * S0[i * dv + e];
                        for (int j = 0; j <= t; j++) o[e] += QK[t * nr + j] * Vp[j * dv + e];
                    }
                    gated(c, o, c.rows[s][c0 + t], h, core);
                }
                if (nr == C)
                    for (int i = 0; i < dk; i++)
                        for (int e = 0; e < dv; e++) {
                            double v = S0[i * dv + e] * exp(G[C - 1]);
                            for (int j = 0; j < C; j++) v += x[j].k[i] * exp(G[C - 1] - G[j]) * Vp[j * dv + e];
                            S0[i * dv + e] = v;
                        }
            }
        }
    }
}

void bits(const char *name, const std::vector<float> &a, const std::vector<float> &b) {
    int64_t differ = 0;
    for (size_t i = 0; i < a.size(); i++) differ += memcmp(&a[i], &b[i], 4) != 0;
    if (a.size() != b.size()) differ = -1;
    printf("  %-66s %s", name, differ ? "NOT bit-exact" : "bit-exact");
    if (differ) printf(" (%lld of %zu differ)", (long long)differ, a.size()), failures++;
    printf("\n");
}
// max |a - r| / max |r| (NaN: infinite)
double rel(const std::vector<float> &a, const std::vector<double> &r) {
    double md = 0, mx = 0;
    for (size_t i = 0; i < a.size(); i++) {
        const double d = fabs((double)a[i] - r[i]);
        if (!(d <= md)) md = std::isnan(d) ? INFINITY : d;
        mx = std::max(mx, fabs(r[i]));
    }
    return md / (mx > 0 ? mx : 1);
}
void near(const char *name, double e, double tol) {
    const bool ok = e <= tol;
    printf("  %-66s %.3g (allowed %.3g)%s\n", name, e, tol, ok ? "" : " TOO FAR");
    failures += !ok;
}
// The S part of every sequence's state (the kernel's layout) as one vector, to compare with a reference's S.
std::vector<float> s_part(const dcase &c, const std::vector<std::vector<float>> &st) {
    std::vector<float> r;
    const int64_t hf = dnc_head_floats(c.dk, c.dv);
    for (int s = 0; s < c.n_seq; s++)
        for (int h = 0; h < c.Hv; h++) r.insert(r.end(), &st[s][h * hf], &st[s][h * hf] + c.dk * c.dv);
    return r;
}
std::vector<double> flat(const std::vector<std::vector<double>> &S) {
    std::vector<double> r;
    for (auto &s : S) r.insert(r.end(), s.begin(), s.end());
    return r;
}

} // namespace

int td_emu_dn(const char *what) {
    failures = 0;
    struct spec { int Hk, Hv, dk, dv, per_seq, n_seq; bool all_splits; };
    const spec specs[] = {
        {1, 2, 128, 128, 100, 1, true}, {2, 4, 27, 37, 100, 2, true}, {16, 32, 128, 128, 70, 1, false}};
    const bool selftest = !strcmp(what, "selftest");
    for (int si = 0; si < (selftest ? 1 : 3); si++) {
        const spec &sp = specs[si];
        dcase c = mk(sp.Hk, sp.Hv, sp.dk, sp.dv, sp.per_seq, sp.n_seq);
        printf("Hk %d Hv %d dk %d dv %d, %d sequence(s) of %d tokens\n", sp.Hk, sp.Hv, sp.dk, sp.dv, sp.n_seq,
               sp.per_seq);
        std::vector<float> core;
        std::vector<std::vector<float>> st;
        run(c, {0}, core, st);
        std::vector<double> rcore, ccore;
        std::vector<std::vector<double>> rS, cS;
        ref_recurrent(c, rcore, rS);
        ref_chunked(c, ccore, cS);
        {
            std::vector<float> a(ccore.begin(), ccore.end());
            near("double chunk form vs double recurrence: core", rel(a, rcore) , 1e-6); // float-rounded a
            double md = 0, mx = 0;
            const std::vector<double> x = flat(cS), y = flat(rS);
            for (size_t i = 0; i < x.size(); i++) md = std::max(md, fabs(x[i] - y[i])), mx = std::max(mx, fabs(y[i]));
            near("double chunk form vs double recurrence: S", md / mx, 1e-9);
            md = 0, mx = 0;
            for (size_t i = 0; i < ccore.size(); i++)
                md = std::max(md, fabs(ccore[i] - rcore[i])), mx = std::max(mx, fabs(rcore[i]));
            near("double chunk form vs double recurrence: core (double)", md / mx, 1e-9);
        }
        near("kernels (all at once) vs double recurrence: core", rel(core, rcore), 2e-5);
        near("kernels (all at once) vs double recurrence: S", rel(s_part(c, st), flat(rS)), 2e-5);
        near("kernels (all at once) vs double chunk form: core", rel(core, ccore), 2e-5);
        { // a digest of the bits (compares the kernels' variants on this emulator; no check)
            uint64_t hsh = 1469598103934665603ull;
            std::vector<float> m = meaningful(c, st);
            for (std::vector<float> *v : {&core, &m})
                for (float f : *v) hsh = (hsh ^ __float_as_uint(f)) * 1099511628211ull;
            printf("  %-66s %016llx\n", "digest of the outputs and the state", (unsigned long long)hsh);
        }
        if (selftest) continue;
        { // a non-finite token (k NaN, v infinite) at position pb of sequence 0, all at once: no earlier output moves
            dcase d = c;
            const int pb = (int)d.rows[0].size() > 80 ? 80 : 60;
            const int32_t bad = d.rows[0][pb];
            for (int i = 0; i < d.Hk * d.dk; i++) d.u[(size_t)bad * d.ldu + d.Hk * d.dk + i] = NAN;
            for (int e = 0; e < d.Hv * d.dv; e++) d.u[(size_t)bad * d.ldu + 2 * d.Hk * d.dk + e] = INFINITY;
            std::vector<float> cb;
            std::vector<std::vector<float>> sb;
            run(d, {0}, cb, sb);
            std::vector<float> x, y;
            for (int p = 0; p < pb; p++)
                for (int e = 0; e < d.Hv * d.dv; e++)
                    x.push_back(cb[(size_t)d.rows[0][p] * d.Hv * d.dv + e]),
                        y.push_back(core[(size_t)d.rows[0][p] * d.Hv * d.dv + e]);
            char name[96];
            snprintf(name, sizeof name, "a NaN / infinite token at position %d: positions 0 .. %d unchanged", pb,
                     pb - 1);
            bits(name, x, y);
        }
        const std::vector<float> m0 = meaningful(c, st);
        struct split { const char *name; std::vector<int> sizes; bool all; };
        const split splits[] = {{"1 + 63 + 64 + 64 + ... tokens", {1, 63, 64}, true},
                                {"7 + the rest", {7, 0}, false},
                                {"70 + the rest", {70, 0}, true},
                                {"65 + 1 + 5 + 64 + ... (cycled)", {65, 1, 5, 64}, true},
                                {"one token at a time", {1}, true},
                                {"one token at a time, without the step kernel", {1}, true}};
        for (const split &x : splits) {
            if (!sp.all_splits && x.all) continue;
            std::vector<float> core2;
            std::vector<std::vector<float>> st2;
            const bool nostep = strstr(x.name, "without") != nullptr;
            if (nostep && si != 1) continue; // the small shape only (the emulator's time)
            step_on = !nostep;
            run(c, x.sizes, core2, st2);
            step_on = true;
            char name[160];
            snprintf(name, sizeof name, "%s = all at once: outputs", x.name);
            bits(name, core2, core);
            snprintf(name, sizeof name, "%s = all at once: state (S, open rows)", x.name);
            bits(name, meaningful(c, st2), m0);
            if (c.n_seq > 1 && !nostep) { // the sequences' calls of a round in one launch set
                run_multi(c, x.sizes, core2, st2);
                snprintf(name, sizeof name, "%s, the sequences in one launch set: outputs", x.name);
                bits(name, core2, core);
                snprintf(name, sizeof name, "%s, the sequences in one launch set: state", x.name);
                bits(name, meaningful(c, st2), m0);
            }
        }
    }
    printf(failures ? "dn: %d FAILED\n" : "dn: all passed\n", failures);
    return failures;
}
