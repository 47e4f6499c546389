#!/usr/bin/env bash
# The WebAssembly module in headless Chromium (/usr/bin/chromium, Debian's), served by tests/wasm/serve_static.mjs
# with COOP/COEP headers and loaded through web/typedecide.mjs, against the native tool with the scalar kernels:
# the checks of test_wasm.sh (tokenizer ids equal on the whole corpus for every tokenizer fixture; decide
# probabilities within 1e-6 on the demo models and every tiny fixture), the same decisions from the module in a
# Worker (web/typedecide_worker.mjs), and the page is cross-origin isolated. Threads: on that page the threaded
# module (typedecide-mt: the engine's pool on Web Workers over shared memory) with the scalar and the wasm128 sets
# and 1, 2, 4 threads decides bit for bit as the one-thread module (whose scalar set is held to native within 1e-6),
# and a 2-thread forward pass hands its workers jobs; on a page without COOP/COEP (not cross-origin isolated)
# create() loads the one-thread module even when asked for 4 threads (threads 1, no pool job), with the same bits.
# The relaxed SIMD set (wasm128r) in both modules equals wasm128 bit for bit, and kernels_wasm_test (every set's
# products against the scalar references) runs in the page with --relaxed (the set must be there).
# Skipped (77) without emscripten or chromium, in the sanitizer run, or where Debian's sources cannot be fetched.
set -euo pipefail
ROOT=${TD_ROOT:-$(cd "$(dirname "$0")/.." && pwd)}
BIN=${TD_BIN:-$ROOT/build/typedecide}
cd "$ROOT"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. tests/wasm/common.sh
chromium_or_skip
wasm_build_or_skip
# Q4_0 weights, which the relaxed SIMD set computes in its own module: the demo model exported to Q4_0, under the
# build folder (the static server serves the repository)
q4=${TD_WASM_BUILD_DIR:-web/build/wasm}/test-demo-qwen3-q4_0.gguf
"$BIN" export --model models/demo-qwen3 --quant q4_0 -o "$q4" --force >/dev/null 2>"$tmp/export.log" ||
    { cat "$tmp/export.log" >&2; fail "export of the Q4_0 model"; }
MODELS+=("$(realpath --relative-to=. "$q4")")
native_refs
ws=$(node_ws_flag)
mkdir "$tmp/b"
node $ws tests/wasm/browser_check.mjs "$CHROMIUM" "$tmp/b" "$CORPUS" "$EV" "$CRIT" --tok "${TOKS[@]}" \
    --models "${MODELS[@]}" || fail "the browser run"
for i in "${!TOKS[@]}"; do
    cmp -s "$tmp/native-$i.ids" "$tmp/b/tok-$i.ids" || {
        diff "$tmp/native-$i.ids" "$tmp/b/tok-$i.ids" | head -5 >&2; fail "${TOKS[$i]}: ids in Chromium differ from native"; }
done
echo "ok: tokenizer ids in Chromium equal native on $(wc -l <"$CORPUS") lines x ${#TOKS[@]} tokenizers"
node tests/wasm/compare.mjs "$tmp/native.jsonl" "$tmp/b/decide.jsonl" 1e-6 || fail "decide in Chromium differs from native"
node tests/wasm/compare.mjs <(awk '/^# /{n++} n<=2' "$tmp/b/decide.jsonl") "$tmp/b/worker.jsonl" 0 ||
    fail "the module in a Worker decides otherwise than on the page"
grep -q '"isolated": true' "$tmp/b/info.json" || fail "the page was not cross-origin isolated (COOP/COEP)"
echo "ok: decide in Chromium = native scalar within 1e-6 on ${#MODELS[@]} models; in a Worker the same bits;" \
     "crossOriginIsolated"

node tests/wasm/compare.mjs "$tmp/native.jsonl" "$tmp/b/st-scalar.jsonl" 1e-6 ||
    fail "the one-thread module's scalar set in Chromium differs from native"
for set in scalar wasm128; do
    for t in 1 2 4; do
        node tests/wasm/compare.mjs "$tmp/b/st-$set.jsonl" "$tmp/b/mt-$set-$t.jsonl" 0 ||
            fail "Chromium: the threaded module ($set, $t threads) decides otherwise than the one-thread module"
    done
done
# the relaxed SIMD set: really it (the models loaded with kernels=wasm128r), and the SIMD128 set's bits
for f in "$tmp/b/st-wasm128r.jsonl" "$tmp/b/mt-wasm128r-"{1,2,4}.jsonl; do
    [ "$(grep -c '^# .* kernels=wasm128r$' "$f")" = "${#MODELS[@]}" ] ||
        fail "Chromium: $(basename "$f"): not ${#MODELS[@]} models with kernels=wasm128r (relaxed SIMD)"
    node tests/wasm/compare.mjs "$tmp/b/st-wasm128.jsonl" "$f" 0 ||
        fail "Chromium: the relaxed SIMD set ($(basename "$f")) decides otherwise than the SIMD128 set"
done
node $ws tests/wasm/kernels_browser.mjs "${TD_WASM_BUILD_DIR:-web/build/wasm}/kernels_wasm_test.js" --relaxed ||
    fail "Chromium: the kernel sets' products differ from the scalar references (or no relaxed SIMD)"
echo "ok: Chromium: the relaxed SIMD set (wasm128r) = wasm128 bit for bit on ${#MODELS[@]} models (1, 2, 4 threads);" \
     "its products = the scalar references (kernels_wasm_test)"
node tests/wasm/compare.mjs "$tmp/b/st-wasm128.jsonl" "$tmp/b/plain-wasm128.jsonl" 0 ||
    fail "Chromium, a page not cross-origin isolated: other bits than the one-thread module's"
node -e '
    const j = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8")), bad = [];
    const want = (k, isolated, threaded, threads, jobs) => {
        const x = j[k];
        if (x.isolated !== isolated) bad.push(`${k}: crossOriginIsolated ${x.isolated}, expected ${isolated}`);
        if (x.threaded !== threaded || x.threads !== threads)
            bad.push(`${k}: threaded ${x.threaded} with ${x.threads} threads, expected ${threaded} with ${threads}`);
        if (!x.bench || (jobs ? !(x.bench.pool_jobs > 0) : x.bench.pool_jobs !== 0))
            bad.push(`${k}: a 2-thread forward pass gave ${JSON.stringify(x.bench)}`);
    };
    want("st", true, false, 1, false);
    want("mt", true, true, 4, true);
    want("plain", false, false, 1, false);
    if (bad.length) { console.error(bad.join("\n")); process.exit(1); }' "$tmp/b/threads.json" ||
    fail "Chromium: the modules or pages are not what the threads checks expect"
echo "ok: Chromium threads: typedecide-mt with 1, 2, 4 threads (scalar, wasm128) = the one-thread module bit for" \
     "bit on ${#MODELS[@]} models, its workers ran; a page not cross-origin isolated: one thread, the same bits"
