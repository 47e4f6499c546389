/* The attention test harness (attn_case.h). */
#include "cuda/attn_case.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/cuda_test.h"
#include "kernels/cpu/kernels.h"
#include "kernels/cuda/cuda.h"
#include "util/half.h"

static float rb(float f) { return td_bf16_to_f32(td_f32_to_bf16(f)); }
static int32_t irand(uint64_t *seed, int64_t n) { return (int32_t)(td_test_rand(seed) % (uint64_t)n); }

kvcase kv_new(uint64_t *seed, int64_t Hq, int64_t Hkv, int64_t hd, int64_t qhs, int f16, int64_t n_ctx, int64_t n_seq,
              int bf16) {
    kvcase c = {.Hq = Hq, .Hkv = Hkv, .hd = hd, .qhs = qhs, .kv_dim = Hkv * hd, .n_ctx = n_ctx, .n_seq = n_seq,
                .n_rows = n_ctx * n_seq + 13, .f16 = f16, .bf16 = bf16, .kvf = f16 ? TD_CU_KV_F16 : TD_CU_KV_F32};
    size_t es = f16 ? 2 : 4, n = (size_t)(c.n_rows * c.kv_dim);
    c.kc = malloc(n * es), c.vc = malloc(n * es);
    if (bf16) c.kr = malloc(n * 4), c.vr = malloc(n * 4), c.kb = malloc(n * 2), c.vb = malloc(n * 2);
    for (size_t i = 0; i < n; i++) {
        float k = td_test_uniform(seed, -1.5f, 1.5f), v = td_test_uniform(seed, -1.0f, 1.0f);
        if (f16) {
            uint16_t hk = td_f32_to_f16(k), hv = td_f32_to_f16(v);
            ((uint16_t *)c.kc)[i] = hk, ((uint16_t *)c.vc)[i] = hv;
            k = td_f16_to_f32(hk), v = td_f16_to_f32(hv);
        } else {
            ((float *)c.kc)[i] = k, ((float *)c.vc)[i] = v;
        }
        if (bf16) {
            c.kb[i] = td_f32_to_bf16(k), c.vb[i] = td_f32_to_bf16(v);
            c.kr[i] = td_bf16_to_f32(c.kb[i]), c.vr[i] = td_bf16_to_f32(c.vb[i]);
        }
    }
    int32_t *perm = malloc((size_t)c.n_rows * sizeof *perm);
    for (int64_t i = 0; i < c.n_rows; i++) perm[i] = (int32_t)i;
    cu_shuffle(seed, perm, c.n_rows);
    c.cells = malloc((size_t)(n_seq * n_ctx) * sizeof *c.cells);
    memcpy(c.cells, perm, (size_t)(n_seq * n_ctx) * sizeof *c.cells);
    if (n_seq > 1) memcpy(c.cells + n_ctx, c.cells, 50 * sizeof *c.cells);
    free(perm);
    c.kc_d = cu_up(c.kc, n * es), c.vc_d = cu_up(c.vc, n * es);
    if (bf16) {
        c.kr_d = cu_up(c.kr, n * 4), c.vr_d = cu_up(c.vr, n * 4);
        c.kb_d = cu_up(c.kb, n * 2), c.vb_d = cu_up(c.vb, n * 2);
    }
    c.cells_d = cu_up(c.cells, (size_t)(n_seq * n_ctx) * sizeof *c.cells);
    return c;
}

void kv_free(kvcase *c) {
    free(c->kc), free(c->vc), free(c->kr), free(c->vr), free(c->kb), free(c->vb), free(c->cells);
    td_cu_free(c->kc_d), td_cu_free(c->vc_d), td_cu_free(c->cells_d);
    td_cu_free(c->kr_d), td_cu_free(c->vr_d), td_cu_free(c->kb_d), td_cu_free(c->vb_d);
}

kvcase kv_twin(const kvcase *c, int rounded) {
    kvcase t = *c;
    CHECKF(c->bf16, "kv_twin of a case without bf16 twins");
    t.f16 = 0, t.kvf = rounded ? TD_CU_KV_F32 : TD_CU_KV_BF16;
    t.kc = rounded ? (void *)c->kr : (void *)c->kb, t.vc = rounded ? (void *)c->vr : (void *)c->vb;
    t.kc_d = rounded ? c->kr_d : c->kb_d, t.vc_d = rounded ? c->vr_d : c->vb_d;
    return t;
}

const char *kv_name(const kvcase *c) {
    return c->kvf == TD_CU_KV_BF16 ? "bf16" : c->kvf == TD_CU_KV_F16 ? "f16" : "f32";
}

/* Bytes of an element of the case's cache. */
static size_t kv_es(const kvcase *c) { return c->kvf == TD_CU_KV_F32 ? 4 : 2; }

float *dev_attention(const kvcase *c, const float *q, const int32_t *seq, const int32_t *pos, int64_t T,
                     const int32_t *cells_d, attn_cut cut, int bf16) {
    int64_t ldq = c->Hq * c->qhs, ldo = c->Hq * c->hd, max_n = 1;
    float *qd = cu_up(q, (size_t)(T * ldq) * 4), *od = cu_up(NULL, (size_t)(T * ldo) * 4);
    float *poison = malloc((size_t)(T * ldo) * 4);
    memset(poison, 0xff, (size_t)(T * ldo) * 4);
    CU(td_cu_h2d(od, poison, (size_t)(T * ldo) * 4, NULL));
    /* the tokens grouped by sequence, as a pass does */
    int32_t *tok = malloc((size_t)T * 4), *off = malloc((size_t)(c->n_seq + 1) * 4), *tile = malloc((size_t)T * 8);
    int64_t k = 0;
    for (int64_t sq = 0; sq < c->n_seq; sq++) {
        off[sq] = (int32_t)k;
        for (int64_t i = 0; i < T; i++) {
            int64_t t = cut.reverse ? T - 1 - i : i;
            if (seq[t] == sq) tok[k++] = (int32_t)t;
        }
    }
    off[c->n_seq] = (int32_t)k;
    for (int64_t t = 0; t < T; t++) max_n = pos[t] + 1 > max_n ? pos[t] + 1 : max_n;
    td_cu_attention_rows_test(cut.rows);
    /* a cut's smaller tile, where the kernel holds it (hd 256 at G 8: the 16-row kernel holds 2 tokens) */
    const int64_t qmax = bf16 ? td_cu_attn_tile_tokens_bf16(c->Hq, c->Hkv, c->hd)
                              : td_cu_attn_tile_tokens(c->Hq, c->Hkv, c->hd);
    int64_t qt = cut.qt > 0 && cut.qt < qmax ? cut.qt : qmax;
    td_cu_attn_plan plan = {0};
    plan.n_tiles = td_cu_attn_tiles(tile, off, c->n_seq, qt);
    plan.tile_tokens = qt;
    plan.tok = cu_up(tok, (size_t)T * 4);
    plan.tile = cu_up(tile, (size_t)plan.n_tiles * 8);
    plan.max_n = max_n;
    plan.scratch_floats = T * c->Hq * ((max_n + 63) / 64) * (c->hd + 2); /* enough to split by chunks (cuda.h) */
    plan.scratch = cu_up(NULL, (size_t)plan.scratch_floats * 4);
    int32_t *seq_d = cu_up(seq, (size_t)T * 4), *pos_d = cu_up(pos, (size_t)T * 4);
    plan.out_bf16 = cu_up(poison, (size_t)(T * ldo) * 2); /* the output's bf16 copy, checked below */
    td_cu_attention_test_mode(cut.mode);
    if (bf16)
        CU(td_cu_attention_bf16(od, ldo, qd, ldq, c->qhs, c->kc_d, c->vc_d, c->kvf, c->kv_dim, cells_d, c->n_ctx,
                                seq_d, pos_d, T, c->Hq, c->Hkv, c->hd, 1.0f / sqrtf((float)c->hd), cut.window, &plan,
                                NULL));
    else
        CU(td_cu_attention(od, ldo, qd, ldq, c->qhs, c->kc_d, c->vc_d, c->kvf, c->kv_dim, cells_d, c->n_ctx, seq_d,
                           pos_d, T, c->Hq, c->Hkv, c->hd, 1.0f / sqrtf((float)c->hd), cut.window, &plan, NULL));
    td_cu_attention_test_mode(0);
    td_cu_attention_rows_test(0);
    float *out = malloc((size_t)(T * ldo) * 4);
    cu_down(out, od, (size_t)(T * ldo) * 4);
    uint16_t *ob = malloc((size_t)(T * ldo) * 2);
    cu_down(ob, plan.out_bf16, (size_t)(T * ldo) * 2);
    int64_t copy_bad = 0; /* each element the output rounded to nearest even, as the products round x */
    for (int64_t i = 0; i < T * ldo; i++) /* a NaN's payload is the hardware's own */
        copy_bad += isnan(out[i]) ? (ob[i] & 0x7f80u) != 0x7f80u || !(ob[i] & 0x7fu) : ob[i] != td_f32_to_bf16(out[i]);
    CHECKF(copy_bad == 0, "attention: %lld of %lld outputs' bf16 copies are not the output rounded",
           (long long)copy_bad, (long long)(T * ldo));
    free(ob), td_cu_free(plan.out_bf16);
    td_cu_free(qd), td_cu_free(od), td_cu_free(seq_d), td_cu_free(pos_d);
    td_cu_free((void *)plan.tok), td_cu_free((void *)plan.tile), td_cu_free(plan.scratch);
    free(poison), free(tok), free(off), free(tile);
    return out;
}

float *ref_attention(const kvcase *c, const float *q, const int32_t *seq, const int32_t *pos, int64_t T,
                     int64_t window) {
    int64_t Hq = c->Hq, hd = c->hd, ldq = Hq * c->qhs, ldo = Hq * hd, es = (int64_t)kv_es(c);
    /* bf16: the rounded cache as f32 rows and each q head rounded into qr */
    int kf16 = c->bf16 ? 0 : c->f16;
    float *ref = malloc((size_t)(T * ldo) * 4), *qr = malloc((size_t)hd * 4);
    float *scratch = malloc((size_t)td_attn_rows_scratch(1, c->n_ctx, hd, kf16) * 4);
    for (int64_t t = 0; t < T; t++)
        for (int64_t h = 0; h < Hq; h++) {
            int64_t kvh = h / (Hq / c->Hkv), n = pos[t] + 1, lo = window > 0 && n > window ? n - window : 0;
            td_attn_keys keys = {(const char *)c->kc + kvh * hd * es, (const char *)c->vc + kvh * hd * es, kf16,
                                 c->cells + seq[t] * c->n_ctx + lo, c->kv_dim, NULL, NULL, 0};
            const float *qp = q + t * ldq + h * c->qhs;
            if (c->bf16) {
                keys.k = c->kr + kvh * hd, keys.v = c->vr + kvh * hd;
                for (int64_t e = 0; e < hd; e++) qr[e] = rb(qp[e]);
                qp = qr;
            }
            float *orow = ref + t * ldo + h * hd;
            int64_t m = n - lo;
            td_attn_rows_ref(&qp, &orow, &m, 1, &keys, hd, 1.0f / sqrtf((float)hd), scratch);
        }
    free(scratch), free(qr);
    return ref;
}

const int32_t attn_edge[ATTN_N_EDGE] = {0, 1, 63, 64, 65, 511, 512, 513, 2047, 3000};

void attn_accuracy(uint64_t *seed, const int64_t (*cases)[5], size_t n_cases, int bf16,
                   void (*check)(const attn_acc *)) {
    const int64_t n_ctx = 3100, n_seq = 3;
    for (size_t ci = 0; ci < n_cases; ci++)
        for (int f16 = 0; f16 < 2; f16++) {
            int64_t Hq = cases[ci][0], Hkv = cases[ci][1], hd = cases[ci][2], qhs = cases[ci][3], T = cases[ci][4];
            kvcase c = kv_new(seed, Hq, Hkv, hd, qhs, f16, n_ctx, n_seq, bf16);
            float *q = cu_rnd(seed, T * Hq * qhs, -3.0f, 3.0f);
            int32_t *seq = malloc((size_t)T * 4), *pos = malloc((size_t)T * 4);
            for (int64_t t = 0; t < T; t++) {
                seq[t] = irand(seed, n_seq);
                pos[t] = t < ATTN_N_EDGE ? attn_edge[(t + (int64_t)ci) % ATTN_N_EDGE] : irand(seed, n_ctx);
            }
            if (T == 1) pos[0] = 3000;
            for (int wi = 0; wi < 2; wi++) {
                int64_t window = wi ? (ci % 2 ? 100 : 700) : 0;
                float *out = dev_attention(&c, q, seq, pos, T, c.cells_d, (attn_cut){0, window, 0, 0, 0}, bf16);
                float *ref = ref_attention(&c, q, seq, pos, T, window);
                char name[160];
                snprintf(name, sizeof name, "Hq=%lld Hkv=%lld hd=%lld T=%lld kv %s window %lld", (long long)Hq,
                         (long long)Hkv, (long long)hd, (long long)T, f16 ? "f16" : "f32", (long long)window);
                check(&(attn_acc){name, &c, q, seq, pos, T, window, out, ref});
                free(out), free(ref);
            }
            free(q), free(seq), free(pos);
            kv_free(&c);
        }
}

void attn_modes_bits(const kvcase *c, const float *q, const int32_t *seq, const int32_t *pos, int64_t T,
                     int64_t window, const float *out, int bf16) {
    static const char *what[] = {"", "one block", "all combined", "by chunks"};
    for (int mode = 1; mode <= 3; mode++) {
        float *o2 = dev_attention(c, q, seq, pos, T, c->cells_d, (attn_cut){0, window, mode, 0, 0}, bf16);
        char name[160];
        snprintf(name, sizeof name, "  %s vs normal: hd=%lld T=%lld kv %s window %lld", what[mode], (long long)c->hd,
                 (long long)T, kv_name(c), (long long)window);
        cu_bits(name, o2, out, T * c->Hq * c->hd);
        free(o2);
    }
}

/* attn_target_row's move of the target's sequence (0) to slot 2 of a new table: returns the table on the device */
static int32_t *kv_move_seq(const kvcase *c, uint64_t *seed, int32_t tpos, int32_t *seq, int64_t T, int64_t at) {
    const int64_t n_ctx = c->n_ctx;
    int32_t *moved = malloc((size_t)(3 * n_ctx) * 4);
    for (int64_t i = 0; i < 3 * n_ctx; i++) moved[i] = irand(seed, c->n_rows);
    size_t rbytes = (size_t)c->kv_dim * kv_es(c);
    for (int64_t p = 0; p <= tpos; p++) /* distinct rows: 7 and n_rows = 9313 are coprime */
        moved[2 * n_ctx + p] = (int32_t)((p * 7 + 5) % c->n_rows);
    unsigned char *k2 = malloc((size_t)c->n_rows * rbytes), *v2 = malloc((size_t)c->n_rows * rbytes);
    memcpy(k2, c->kc, (size_t)c->n_rows * rbytes), memcpy(v2, c->vc, (size_t)c->n_rows * rbytes);
    for (int64_t p = 0; p <= tpos; p++) {
        memcpy(k2 + (size_t)moved[2 * n_ctx + p] * rbytes, (const unsigned char *)c->kc + (size_t)c->cells[p] * rbytes,
               rbytes);
        memcpy(v2 + (size_t)moved[2 * n_ctx + p] * rbytes, (const unsigned char *)c->vc + (size_t)c->cells[p] * rbytes,
               rbytes);
    }
    CU(td_cu_h2d(c->kc_d, k2, (size_t)c->n_rows * rbytes, NULL));
    CU(td_cu_h2d(c->vc_d, v2, (size_t)c->n_rows * rbytes, NULL));
    CU(td_cu_sync(NULL));
    free(k2), free(v2);
    for (int64_t t = 0; t < T; t++)
        if (seq[t] == 2) seq[t] = 1;
    seq[at] = 2;
    int32_t *cells_d = cu_up(moved, (size_t)(3 * n_ctx) * 4);
    free(moved);
    return cells_d;
}

float *attn_target_row(const kvcase *c, uint64_t *seed, const float *target, int32_t tpos, int64_t T, int64_t at,
                       int own_seq, int moved, attn_cut cut, int bf16) {
    int64_t ldq = c->Hq * c->qhs, ldo = c->Hq * c->hd;
    float *q = cu_rnd(seed, T * ldq, -3.0f, 3.0f);
    memcpy(q + at * ldq, target, (size_t)ldq * 4);
    int32_t *seq = malloc((size_t)T * 4), *pos = malloc((size_t)T * 4);
    for (int64_t t = 0; t < T; t++) seq[t] = irand(seed, 3), pos[t] = irand(seed, c->n_ctx);
    if (own_seq)
        for (int64_t t = 0; t < T; t++) {
            int64_t p = tpos - at + t;
            seq[t] = 0, pos[t] = (int32_t)(p < 0 ? t : p);
        }
    seq[at] = 0, pos[at] = tpos;
    int32_t *cells_d = moved ? kv_move_seq(c, seed, tpos, seq, T, at) : c->cells_d;
    float *out = dev_attention(c, q, seq, pos, T, cells_d, cut, bf16), *row = malloc((size_t)ldo * 4);
    memcpy(row, out + at * ldo, (size_t)ldo * 4);
    if (moved) td_cu_free(cells_d);
    free(q), free(seq), free(pos), free(out);
    return row;
}
