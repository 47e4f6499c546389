#!/usr/bin/env bash
# The WebAssembly module in headless Chromium (/usr/bin/chromium, Debian's), served by tests/wasm/serve_static.mjs
# with COOP/COEP headers and loaded through web/typedecide.mjs, against the native tool with the scalar kernels:
# the checks of test_wasm.sh (tokenizer ids equal on the whole corpus for every tokenizer fixture; decide
# probabilities within 1e-6 on the demo models and every tiny fixture), the same decisions from the module in a
# Worker (web/typedecide_worker.mjs), and the page is cross-origin isolated.
# Skipped (77) without emscripten or chromium, in the sanitizer run, or where Debian's sources cannot be fetched.
set -euo pipefail
ROOT=${TD_ROOT:-$(cd "$(dirname "$0")/.." && pwd)}
BIN=${TD_BIN:-$ROOT/build/typedecide}
CHROMIUM=${TD_CHROMIUM:-/usr/bin/chromium}
cd "$ROOT"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. tests/wasm/common.sh
[ -x "$CHROMIUM" ] || { echo "SKIP: no chromium at $CHROMIUM"; exit 77; }
wasm_build_or_skip
native_refs
ws=$(node -e 'process.exit(typeof WebSocket === "function" ? 0 : 1)' 2>/dev/null && echo "" || echo --experimental-websocket)
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
