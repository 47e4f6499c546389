/* The relaxed SIMD set's products (kernels_wasm.h, td_matmul_wasm_relaxed) on the engine's side: the relaxed module
 * (matmul_wasm_relaxed.c, built by clang-19 and wasm-ld-19 apart from the engine; web/relaxed_module.cmake embeds its
 * bytes in the generated relaxed_wasm_module.h) is validated once, then instantiated on each thread that runs a
 * product, over the engine's own memory, its function put in that thread's function table (each Web Worker has its
 * own instance of the engine and so its own table: the index is thread-local). Where it does not validate (an engine
 * without relaxed SIMD) or the build had no clang-19, td_wasm_relaxed_available() is 0 and the set is not offered. */
#include <emscripten/emscripten.h>
#include <stdatomic.h>
#include <string.h>

#include "kernels/cpu/kernels_wasm.h"
#include "kernels/cpu/quant.h"
#include "relaxed_wasm_module.h" /* TD_RELAXED_WASM_SIZE, td_relaxed_wasm[] */

typedef void (*relaxed_fn)(const td_mat *w, const int32_t *rows, const td_qrows *xr, int64_t T, float *y, int64_t ldy,
                           int64_t j0, int64_t j1, td_wasm_relaxed_scratch *s);

/* 1 when the engine compiles the module's bytes (its relaxed SIMD instructions included). */
EM_JS(int, relaxed_js_validate, (const unsigned char *bytes, int n), {
    return WebAssembly.validate(HEAPU8.slice(bytes, bytes + n)) ? 1 : 0;
});

/* Instantiates the module over this thread's view of the engine's memory and appends its product to this thread's
 * function table; returns the table index, 0 on failure (modules under 4 KiB may be compiled synchronously on a
 * browser's main thread: web/relaxed_module.cmake keeps it so). */
EM_JS(int, relaxed_js_instantiate, (const unsigned char *bytes, int n), {
    try {
        var module = new WebAssembly.Module(HEAPU8.slice(bytes, bytes + n));
        var instance = new WebAssembly.Instance(module, {env : {memory : wasmMemory}});
        var at = wasmTable.length;
        wasmTable.grow(1);
        wasmTable.set(at, instance.exports.tdr_matmul_quant);
        return at;
    } catch (e) {
        return 0;
    }
});

static _Thread_local int table_at; /* this thread's instance: 0 not yet, -1 failed, else its table index */

static relaxed_fn instantiate_here(void) {
    if (!table_at) table_at = relaxed_js_instantiate(td_relaxed_wasm, TD_RELAXED_WASM_SIZE);
    if (!table_at) table_at = -1;
    return table_at > 0 ? (relaxed_fn)(uintptr_t)table_at : NULL;
}

/* A known answer: 4 rows of 2 blocks (bytes -128..127 and every nibble; fp16 scales 1, 2^-3, 3, 2^-10) against 2
 * tokens of activations -128..127, through the module and through td_matmul_wasm128, bit for bit. An engine that
 * validates relaxed SIMD but computes its dot otherwise than the spec (Node 20's V8 11.3 behind
 * --experimental-wasm-relaxed-simd returns twice the dot) fails it, and the set is not offered. */
static int known_answer(relaxed_fn f, td_dtype type) {
    _Alignas(16) unsigned char w[4 * 2 * sizeof(td_block_q8_0)];
    td_block_q8_0 xb[2 * 2];
    float xd[2 * 2] = {0.5f, 0.25f, 1.0f / 3.0f, 3.0f}, y0[2 * 4], y1[2 * 4];
    static const uint16_t d[4] = {0x3c00, 0x3000, 0x4200, 0x1400};
    size_t rb = type == TD_DTYPE_Q8_0 ? 2 * sizeof(td_block_q8_0) : 2 * sizeof(td_block_q4_0);
    for (int r = 0; r < 4; r++)
        for (int b = 0; b < 2; b++) {
            unsigned char *blk = w + r * rb + b * (rb / 2);
            memcpy(blk, &d[(r + b) % 4], 2);
            for (size_t i = 2; i < rb / 2; i++) blk[i] = (unsigned char)(r * 67 + b * 29 + (int)i * 37);
        }
    for (int t = 0; t < 4; t++) {
        xb[t].d = 0;
        for (int i = 0; i < 32; i++) xb[t].qs[i] = (int8_t)(unsigned char)(t * 71 + i * 41 + 128);
    }
    td_mat m = {type, 4, 64, rb, w, NULL};
    td_qrows xq;
    memset(&xq, 0, sizeof xq);
    xq.q = xb, xq.d = xd, xq.nb = 2, xq.cols = 64;
    td_wasm_relaxed_scratch s;
    f(&m, NULL, &xq, 2, y1, 4, 0, 4, &s);
    td_matmul_wasm128(&m, NULL, NULL, &xq, 2, 64, y0, 4, 0, 4);
    return memcmp(y0, y1, sizeof y0) == 0;
}

int td_wasm_relaxed_available(void) {
    static atomic_int known; /* 0 not asked yet, 1 yes, 2 no */
    int k = atomic_load(&known);
    if (!k) {
        relaxed_fn f = TD_RELAXED_WASM_SIZE > 0 && relaxed_js_validate(td_relaxed_wasm, TD_RELAXED_WASM_SIZE)
                           ? instantiate_here() : NULL;
        k = f && known_answer(f, TD_DTYPE_Q8_0) && known_answer(f, TD_DTYPE_Q4_0) ? 1 : 2;
        atomic_store(&known, k);
    }
    return k == 1;
}

/* This thread's entry to the module's product, instantiated on first use; NULL where it cannot be. */
static relaxed_fn relaxed_product(void) { return td_wasm_relaxed_available() ? instantiate_here() : NULL; }

/* Rows [j0, j1) through the module (its whole groups of four; the rest through td_matmul_wasm128), Q8_0 or Q4_0. */
static void through_module(relaxed_fn f, const td_mat *w, const int32_t *rows, const float *x, const void *xq,
                           int64_t T, int64_t ldx, float *y, int64_t ldy, int64_t j0, int64_t j1) {
    td_wasm_relaxed_scratch scratch;
    int64_t full = j0 + (j1 - j0) / 4 * 4;
    f(w, rows, xq, T, y, ldy, j0, j1, &scratch);
    if (full < j1) td_matmul_wasm128(w, rows, x, xq, T, ldx, y, ldy, full, j1);
}

void td_matmul_wasm_relaxed(const td_mat *w, const int32_t *rows, const float *x, const void *xq, int64_t T,
                            int64_t ldx, float *y, int64_t ldy, int64_t j0, int64_t j1) {
    /* Q8_0 (signed by signed) needs two relaxed dots per 16 bytes, and the SIMD128 product is as fast or faster
     * (web/bench_matmul_browser.mjs, Chromium 156 on this AMD EPYC, 3072 x 1024, warmed up: Q8_0 0.89-1.08x at 1-32
     * tokens; Q4_0 1.18-1.38x at every count): Q4_0 alone takes the module. Either gives the same bits. */
    relaxed_fn f = !w->pack && w->type == TD_DTYPE_Q4_0 && xq && j1 - j0 >= 4 ? relaxed_product() : NULL;
    if (f) through_module(f, w, rows, x, xq, T, ldx, y, ldy, j0, j1);
    else td_matmul_wasm128(w, rows, x, xq, T, ldx, y, ldy, j0, j1);
}

void td_matmul_wasm_relaxed_module(const td_mat *w, const int32_t *rows, const float *x, const void *xq, int64_t T,
                                   int64_t ldx, float *y, int64_t ldy, int64_t j0, int64_t j1) {
    relaxed_fn f = !w->pack && td_dtype_is_block(w->type) && xq && j1 - j0 >= 4 ? relaxed_product() : NULL;
    if (f) through_module(f, w, rows, x, xq, T, ldx, y, ldy, j0, j1);
    else td_matmul_wasm128(w, rows, x, xq, T, ldx, y, ldy, j0, j1);
}
