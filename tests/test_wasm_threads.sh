#!/usr/bin/env bash
# The threaded WebAssembly module (typedecide-mt: the engine's thread pool, src/kernels/cpu/threadpool.c, on
# pthreads that emscripten runs on Web Workers over shared memory; worker_threads under Node) against the one-thread
# module (typedecide), both from web/build.sh:
#   1. decide probabilities with the scalar set and the wasm128 set, with 1, 2 and 4 threads, on the demo models and
#      every tiny fixture: bit-identical to the one-thread module's (test_wasm.sh holds those to native);
#   2. generation (greedy; sampled with the model's defaults and a seed) with 2 and 4 threads: the one-thread
#      module's ids and text on both demo models;
#   3. the pool itself (tests/test_pool.c built for the threaded module: web/CMakeLists.txt's pool_wasm_test) with up
#      to 16 threads on Web Workers, its WebAssembly waits (spin, then memory.atomic.wait32) included: every item
#      once, none under another job; a lost wake-up hangs it, so it runs under a timeout;
#   4. the threads really ran: a forward pass with 2 threads hands the pool's workers jobs (pool_jobs > 0) in the
#      threaded module, none in the one-thread module, which runs one thread whatever is asked (threads 1).
# Skipped (77) as test_wasm.sh is. Under Chromium (cross-origin isolated or not): test_wasm_browser.sh.
set -euo pipefail
ROOT=${TD_ROOT:-$(cd "$(dirname "$0")/.." && pwd)}
BIN=${TD_BIN:-$ROOT/build/typedecide}
cd "$ROOT"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. tests/wasm/common.sh
wasm_build_or_skip
RUN="node tests/wasm/wasm_run.mjs"

timeout 120 node "${TD_WASM_BUILD_DIR:-web/build/wasm}-mt/pool_wasm_test.js" ||
    fail "the thread pool's test on Web Workers (pool_wasm_test) failed or hung (exit $?)"
echo "ok: the thread pool's test (tests/test_pool.c) on Web Workers"
export TD_WASM_WORKERS=3 # the threaded module's pool: 4 threads with the caller

for set in scalar wasm128; do
    TD_WASM_KERNELS=$set $RUN decide "$EV" "$CRIT" 0 1 "${MODELS[@]}" >"$tmp/st-$set.jsonl" 2>"$tmp/log" ||
        { cat "$tmp/log" >&2; fail "one-thread module: decide ($set)"; }
    TD_WASM_MODULE=mt TD_WASM_KERNELS=$set $RUN decide "$EV" "$CRIT" 0 1,2,4 "${MODELS[@]}" >"$tmp/mt-$set.jsonl" \
        2>"$tmp/log" || { cat "$tmp/log" >&2; fail "threaded module: decide ($set)"; }
    for t in 1 2 4; do
        awk -v t="threads=$t" '/^# /{keep = ($NF == t)} keep' "$tmp/mt-$set.jsonl" >"$tmp/mt-$set-$t.jsonl"
        [ "$(grep -c "^# .* kernels=$set threads=$t\$" "$tmp/mt-$set-$t.jsonl")" = "${#MODELS[@]}" ] ||
            fail "threaded module ($set, $t threads): not ${#MODELS[@]} models with kernels=$set"
        node tests/wasm/compare.mjs "$tmp/st-$set.jsonl" "$tmp/mt-$set-$t.jsonl" 0 ||
            fail "threaded module, $set, $t threads: decisions differ from the one-thread module's"
    done
done
echo "ok: threaded module decide (scalar and wasm128; 1, 2, 4 threads) = one-thread module bit for bit on" \
     "${#MODELS[@]} models"

prompt=$'<|im_start|>user\nMy order arrived broken. What should I do?<|im_end|>\n<|im_start|>assistant\n'
for m in models/demo-qwen3 models/demo-qwen35; do
    for how in "0 1" "-1 7"; do
        set -- $how
        $RUN generate "$m" "$prompt" 24 "$1" "$2" 1 >"$tmp/gen-st.json" || fail "one-thread module: generate on $m"
        for t in 2 4; do
            TD_WASM_MODULE=mt $RUN generate "$m" "$prompt" 24 "$1" "$2" $t >"$tmp/gen-mt.json" ||
                fail "threaded module: generate on $m"
            cmp -s "$tmp/gen-st.json" "$tmp/gen-mt.json" || {
                head -c 400 "$tmp/gen-st.json" "$tmp/gen-mt.json" >&2
                fail "$m: $t threads generate otherwise than one (temperature $1, seed $2)"; }
        done
    done
done
echo "ok: threaded module generate (greedy; sampled, seed 7) with 2 and 4 threads = one-thread module's ids and text"

tiny=fixtures/gguf/qwen3-tiny-tied-f32.gguf
jobs_of() { node -e 'const j = JSON.parse(require("fs").readFileSync(0, "utf8")); console.log(j.threads, j.pool_jobs)'
}
read -r th jobs < <(TD_WASM_MODULE=mt $RUN bench "$tiny" 16 4 2 | jobs_of) || fail "threaded module: bench"
[ "$th" = 2 ] && [ "$jobs" -gt 0 ] || fail "threaded module: 2 threads asked, $th used, $jobs pool jobs (no worker ran)"
read -r th1 jobs1 < <($RUN bench "$tiny" 16 4 2 | jobs_of) || fail "one-thread module: bench"
[ "$th1" = 1 ] && [ "$jobs1" = 0 ] || fail "one-thread module: 2 threads asked, $th1 used, $jobs1 pool jobs"
echo "ok: threads ran (a 16-token prefill + 4 decodes with 2 threads: $jobs pool jobs; one-thread module: 1 thread," \
     "0 jobs)"
