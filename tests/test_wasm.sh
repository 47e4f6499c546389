#!/usr/bin/env bash
# The WebAssembly build (web/build.sh: emscripten from Debian) under Node: the same module the browser loads, on the
# same files, against the native tool with the scalar kernels (TD_KERNELS=scalar, the set the module runs):
#   1. tokenizer ids equal native on every line of tests/tokenizer/corpus.jsonl, for every tokenizer fixture
#      (fixtures/tokenizers/*: Qwen3, Qwen3.5, Qwen2.5, Llama 3, Gemma 3) and a GGUF file's tokenizer, and on
#      llama.cpp's vocabulary cases (ggml-vocab-qwen2/qwen35.gguf, from node-llama-cpp's bundle of its source);
#   2. decide probabilities on the demo models (models/demo-qwen3, models/demo-qwen35) and the tiny fixtures
#      (Hugging Face directories and GGUF files: fixtures/models, fixtures/gguf) within 1e-6 of native;
#   3. the SIMD128 set (wasm128, the module's default) is bit-identical to the scalar set: its products against the
#      references on random inputs of odd sizes (tests/wasm/kernels_wasm_test.c), and every model's decisions;
#   4. the module's serial and fresh modes give the batch mode's bits;
#   5. generation with the sampler (greedy; sampled with a seed) gives native's ids on both demo models.
# Skipped (77) where emscripten is not installed (scripts/setup.sh installs it), in the sanitizer run, or where
# Debian's source packages cannot be fetched for the first build. test_wasm_browser.sh: the same in Chromium.
set -euo pipefail
ROOT=${TD_ROOT:-$(cd "$(dirname "$0")/.." && pwd)}
BIN=${TD_BIN:-$ROOT/build/typedecide}
cd "$ROOT"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. tests/wasm/common.sh
wasm_build_or_skip
native_refs
RUN="node tests/wasm/wasm_run.mjs"

i=0
for tok in "${TOKS[@]}"; do
    $RUN tokenize "$tok" "$CORPUS" >"$tmp/wasm.ids" || fail "wasm tokenize $tok"
    cmp -s "$tmp/native-$i.ids" "$tmp/wasm.ids" || {
        diff "$tmp/native-$i.ids" "$tmp/wasm.ids" | head -5 >&2; fail "$tok: wasm ids differ from native"; }
    i=$((i + 1))
done
echo "ok: tokenizer ids equal native on $(wc -l <"$CORPUS") lines x ${#TOKS[@]} tokenizers"

# llama.cpp's vocabulary tests (test_tokenizer_llama_vocab.sh checks native against their .out ids): the cases of
# models/ggml-vocab-{qwen2,qwen35}.gguf(.inp) from llama.cpp's source as node-llama-cpp ships it, where installed
bundle=tests/node/node_modules/node-llama-cpp/llama/gitRelease.bundle
if [ -f "$bundle" ] && git clone --quiet --bare "$bundle" "$tmp/llama.git" 2>/dev/null; then
    for v in qwen2 qwen35; do
        git --git-dir "$tmp/llama.git" show "HEAD:models/ggml-vocab-$v.gguf" >"$tmp/$v.gguf" || fail "no ggml-vocab-$v.gguf"
        git --git-dir "$tmp/llama.git" show "HEAD:models/ggml-vocab-$v.gguf.inp" |
            node -e 'const raw = require("fs").readFileSync(0, "utf8"), sep = "\n__ggml_vocab_test__\n";
                     const out = []; for (let p = 0; p < raw.length;) { const n = raw.indexOf(sep, p);
                     if (n < 0) { out.push(raw.slice(p)); break; } out.push(raw.slice(p, n)); p = n + sep.length; }
                     process.stdout.write(out.map((text) => JSON.stringify({ text })).join("\n") + "\n");' \
            >"$tmp/$v.jsonl" || fail "reading ggml-vocab-$v.gguf.inp"
        "$BIN" tokenize --tokenizer "$tmp/$v.gguf" --jsonl "$tmp/$v.jsonl" | tr -d ' ' >"$tmp/$v.native" ||
            fail "native tokenize ggml-vocab-$v"
        $RUN tokenize "$tmp/$v.gguf" "$tmp/$v.jsonl" >"$tmp/$v.wasm" || fail "wasm tokenize ggml-vocab-$v"
        cmp -s "$tmp/$v.native" "$tmp/$v.wasm" || fail "ggml-vocab-$v: wasm ids differ from native"
    done
    echo "ok: llama.cpp's vocabulary cases (ggml-vocab-qwen2, -qwen35): wasm ids equal native ($(cat "$tmp"/qwen2.jsonl "$tmp"/qwen35.jsonl | wc -l) cases)"
else
    echo "note: node-llama-cpp's llama.cpp bundle is not installed: its vocabulary cases not checked here"
fi

node "${TD_WASM_BUILD_DIR:-web/build/wasm}/kernels_wasm_test.js" || fail "the SIMD128 products differ from the scalar references"

TD_WASM_KERNELS=scalar $RUN decide "$EV" "$CRIT" 0 1 "${MODELS[@]}" >"$tmp/wasm-scalar.jsonl" 2>"$tmp/wasm.log" ||
    { cat "$tmp/wasm.log" >&2; fail "wasm decide (scalar)"; }
grep -q "kernels=scalar" "$tmp/wasm-scalar.jsonl" || fail "TD_KERNELS=scalar did not choose the scalar set"
node tests/wasm/compare.mjs "$tmp/native.jsonl" "$tmp/wasm-scalar.jsonl" 1e-6 || fail "wasm decide differs from native"
$RUN decide "$EV" "$CRIT" 0 1 "${MODELS[@]}" >"$tmp/wasm-batch.jsonl" 2>"$tmp/wasm.log" ||
    { cat "$tmp/wasm.log" >&2; fail "wasm decide (default set)"; }
grep -q "kernels=wasm128" "$tmp/wasm-batch.jsonl" || fail "the default set is not wasm128"
node tests/wasm/compare.mjs "$tmp/wasm-scalar.jsonl" "$tmp/wasm-batch.jsonl" 0 || fail "wasm128 differs from scalar"

# generation with the sampler: greedy, and the model's sampling defaults with a seed, the ids native generates
prompt=$'<|im_start|>user\nMy order arrived broken. What should I do?<|im_end|>\n<|im_start|>assistant\n'
for m in models/demo-qwen3 models/demo-qwen35; do
    for how in "0 1" "-1 7"; do
        set -- $how
        $RUN generate "$m" "$prompt" 24 "$1" "$2" >"$tmp/gen.json" || fail "wasm generate on $m"
        ids=$(node -e 'console.log(JSON.parse(require("fs").readFileSync(process.argv[1], "utf8")).prompt_ids.join(","))' "$tmp/gen.json")
        temp=(); [ "$1" = -1 ] || temp=(--temperature "$1")
        TD_KERNELS=scalar "$BIN" generate --model "$m" --ids "$ids" -n 24 "${temp[@]}" --seed "$2" 2>/dev/null |
            tr -d ' ' >"$tmp/gen.native" || fail "native generate on $m"
        node -e 'console.log(JSON.stringify(JSON.parse(require("fs").readFileSync(process.argv[1], "utf8")).ids))' \
            "$tmp/gen.json" | cmp -s - "$tmp/gen.native" || fail "$m: wasm generates other ids than native (temperature $1, seed $2)"
    done
done
echo "ok: generate (greedy, and sampled with the model's defaults and a seed) = native's ids on both demo models"

for mode in 1 2; do # the two demo models and two tiny ones
    $RUN decide "$EV" "$CRIT" $mode 1 "${MODELS[@]:0:4}" >"$tmp/wasm-$mode.jsonl" 2>/dev/null || fail "wasm decide mode $mode"
    node tests/wasm/compare.mjs <(awk '/^# /{n++} n<=4' "$tmp/wasm-batch.jsonl") "$tmp/wasm-$mode.jsonl" 0 ||
        fail "wasm mode $mode differs from batch"
done
echo "ok: wasm decide (scalar) = native scalar within 1e-6 on ${#MODELS[@]} models; wasm128 = scalar bit for bit;" \
     "serial and fresh = batch bit for bit"
