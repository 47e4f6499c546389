#!/usr/bin/env bash
# The static page (web/page/) as a new user tries it, in headless Chromium (/usr/bin/chromium) on a COOP/COEP static
# server over the repository (tests/wasm/page_wasm_test.mjs: both demo models loaded, evidence and criteria typed, the
# table, a criterion with one option refused on the page, a streamed chat reply, a bad file and a truncated GGUF
# refused, the tiny GGUF picked from disk). The page's tables equal the module's decide() on the same typed input
# (checked in the page) and the native tool with the scalar kernels within 1e-6 (checked here).
# Screenshots go to $TD_PAGE_SHOTS when set (bench/results/wasm-page-{decide,chat}.png were made so), else to a
# scratch directory; each must stay under 150 kB. The module: $TD_WASM_DIST (default web/dist), inside the checkout.
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
dist=$(realpath "${TD_WASM_DIST:-web/dist}")
case "$dist/" in "$ROOT"/*) ;; *) fail "TD_WASM_DIST=$dist is outside $ROOT: the page's static server would not serve it" ;; esac
[ -f "$dist/typedecide.wasm" ] || fail "no module at $dist (web/build.sh)"
shots=${TD_PAGE_SHOTS:-$tmp}
GGUF=fixtures/gguf/qwen3-tiny-tied-q8_0.gguf
head -c 4096 "$GGUF" >"$tmp/truncated.gguf"
ws=$(node_ws_flag)
node $ws tests/wasm/page_wasm_test.mjs "$CHROMIUM" "${dist#"$ROOT"}/" "$tmp" "$GGUF" "$tmp/truncated.gguf" \
    models/demo/ticket.txt "$shots/wasm-page-decide.png" "$shots/wasm-page-chat.png" || fail "the page in Chromium"
for s in decide chat; do
    size=$(stat -c %s "$shots/wasm-page-$s.png")
    [ "$size" -lt 153600 ] || fail "wasm-page-$s.png is $size bytes (keep screenshots under 150 kB)"
done
{
    echo "# models/demo-qwen3"
    TD_KERNELS=scalar "$BIN" decide --quiet --model models/demo-qwen3 --evidence "$tmp/evidence.txt" \
        --criteria "$tmp/criteria.jsonl"
    head -1 "$tmp/criteria.jsonl" >"$tmp/criteria1.jsonl"
    echo "# models/demo-qwen35"
    TD_KERNELS=scalar "$BIN" decide --quiet --model models/demo-qwen35 --evidence "$tmp/evidence.txt" \
        --criteria "$tmp/criteria1.jsonl"
    echo "# $GGUF"
    TD_KERNELS=scalar "$BIN" decide --quiet --model "$GGUF" --evidence "$tmp/evidence.txt" --criteria "$tmp/criteria1.jsonl"
} >"$tmp/native.jsonl" 2>"$tmp/native.log" || { cat "$tmp/native.log" >&2; fail "native decide"; }
node tests/wasm/compare.mjs "$tmp/native.jsonl" "$tmp/page.jsonl" 1e-6 || fail "the page's tables differ from native"
echo "ok: the page's tables (typed input) = the module's decide() in Chromium and native scalar within 1e-6"
