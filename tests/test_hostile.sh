#!/usr/bin/env bash
# Hostile input, every path around the parsers (issue 13): each case makes its input here, runs the command and
# asserts the exit code, a message that names the problem in the user's terms, no sanitizer report and no hang
# (a time limit per command). Runs in both builds. The cases, by the issue's table:
#   crash            evaluate on a row without evidence; a criteria file given to evaluate (with / without --skip-bad)
#   UB               metrics on a probability of 1e308, -0.5, 1.5, probabilities summing to 0 or 2, in rotations too
#   silent NaN       a NaN weight (safetensors, GGUF), an adapter with a NaN weight or lora_alpha 1e308: decide,
#                    generate, evaluate fail naming the layer / adapter, and evaluate writes no predictions
#   lost output      decide, tokenize, inspect, generate, metrics with stdout on /dev/full
#   directory input  --criteria, tokenize --jsonl, metrics --predictions, evaluate FIXTURE given a directory
#   unbounded read   --evidence /dev/zero, --criteria /dev/zero, tokenize --jsonl /dev/zero
#   wrong file       --instruction naming a missing file or a directory
#   past the context logits / generate past max_position_embeddings; accepted with --ctx and a warning
#   safetensors      a one-byte hole in the data buffer, bytes after the last tensor
#   invalid UTF-8    export --name $'\xff\xfe'
#   overwrite        export -o onto the model's safetensors; evaluate --predictions / --out onto its fixture;
#                    decide --slot-map onto its criteria
#   messages         UTF-8 errors at the user's byte (evidence, instruction file), --prune-head AAB, ranges of
#                    --memory / -n / --top-k, an unknown GGUF metadata type, a UTF-8 byte-order mark (accepted)
set -uo pipefail
ROOT=${TD_ROOT:-$(cd "$(dirname "$0")/.." && pwd)}
BIN=${TD_BIN:-$ROOT/build/typedecide}
FX=$ROOT/fixtures/models
M=$FX/qwen3-tiny-tied
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
cases=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }

# expect CODE NEEDLE -- command...: the exit code ("nz" = any failure that is not a crash or a hang), a substring
# of stderr, and no sanitizer report. Standard output goes to $tmp/out unless the command redirects it itself.
expect() {
    local code=$1 needle=$2
    shift 3
    local cmd="$*"
    cmd=${cmd:0:160}
    cases=$((cases + 1))
    timeout 120 "$@" >"$tmp/out" 2>"$tmp/err"
    local rc=$?
    if [ "$code" = nz ]; then
        { [ "$rc" -ne 0 ] && [ "$rc" -lt 124 ]; } || fail "'$cmd' exited $rc, want a clean failure ($(head -c 300 "$tmp/err"))"
    else
        [ "$rc" -eq "$code" ] || fail "'$cmd' exited $rc, want $code ($(head -c 300 "$tmp/err"))"
    fi
    [ -z "$needle" ] || grep -qF -- "$needle" "$tmp/err" || fail "'$cmd': stderr lacks \"$needle\": $(head -c 300 "$tmp/err")"
    if grep -qE 'runtime error:|AddressSanitizer|LeakSanitizer' "$tmp/err"; then fail "'$cmd': sanitizer report"; fi
}
# full: the same, with standard output on /dev/full
full() {
    local needle=$1
    shift 2
    cases=$((cases + 1))
    timeout 120 "$@" >/dev/full 2>"$tmp/err"
    local rc=$?
    { [ "$rc" -ne 0 ] && [ "$rc" -lt 124 ]; } || fail "'$*' > /dev/full exited $rc"
    grep -qF -- "$needle" "$tmp/err" || fail "'$*' > /dev/full: stderr lacks \"$needle\": $(head -c 300 "$tmp/err")"
}

row() { # id evidence-json answer-json
    printf '{"id": "%s", "family": "f", "evidence": %s, "question": "Is it?", "options": [{"id": "y", "description": "Yes"}, {"id": "n", "description": "No"}], "answer": %s}\n' "$1" "$2" "$3"
}
row a '"The parcel arrived broken."' '"y"' >"$tmp/good.jsonl"
row b '"Refund me."' '"n"' >>"$tmp/good.jsonl"

# ---- crash: rows without evidence, a criteria file given to evaluate ------------------------------------------------
printf '{"id": "x", "family": "f", "question": "Is it?", "options": [{"id": "y", "description": "Yes"}], "answer": "y"}\n' >"$tmp/noev.jsonl"
expect nz 'noev.jsonl:1: row "x" has no "evidence"' -- "$BIN" evaluate "$tmp/noev.jsonl" --model "$M" --quiet
expect nz 'has no "evidence"' -- "$BIN" evaluate "$tmp/noev.jsonl" --model "$M" --quiet --skip-bad
cat "$tmp/good.jsonl" "$tmp/noev.jsonl" >"$tmp/mixed.jsonl"
expect 0 'skipped 1 bad row(s)' -- "$BIN" evaluate "$tmp/mixed.jsonl" --model "$M" --quiet --skip-bad
printf '{"id": "c", "question": "Is it?", "options": [{"id": "y", "description": "Yes"}, {"id": "n", "description": "No"}]}\n' >"$tmp/crit.jsonl"
expect nz 'crit.jsonl:1: row "c": missing "answer"' -- "$BIN" evaluate "$tmp/crit.jsonl" --model "$M" --quiet
expect nz 'no rows to evaluate' -- "$BIN" evaluate "$tmp/crit.jsonl" --model "$M" --quiet --skip-bad

# ---- metrics: probabilities that cannot be --------------------------------------------------------------------------
pred() { printf '{"id": "p", "family": "f", "answer": "a", "options": ["a", "b"], "probs": %s%s}\n' "$1" "${2:+, \"rotations\": $2}"; }
pred '[1e308, 0]' >"$tmp/p1.jsonl"
expect nz 'probs[0] is 1e+308: a probability must be a number in [0, 1]' -- "$BIN" metrics --predictions "$tmp/p1.jsonl"
pred '[-0.5, 1.5]' >"$tmp/p2.jsonl"
expect nz 'probs[0] is -0.5' -- "$BIN" metrics --predictions "$tmp/p2.jsonl"
pred '[0, 0]' >"$tmp/p3.jsonl"
expect nz 'probs sum to 0: they must sum to 1 (within 0.001)' -- "$BIN" metrics --predictions "$tmp/p3.jsonl"
pred '[1, 1]' >"$tmp/p4.jsonl"
expect nz 'probs sum to 2' -- "$BIN" metrics --predictions "$tmp/p4.jsonl"
pred '[0.5, 0.5]' '[[0.5, 0.5], [2, -1]]' >"$tmp/p5.jsonl"
expect nz 'rotations[1][0] is 2' -- "$BIN" metrics --predictions "$tmp/p5.jsonl"
pred '[0.6, 0.4]' '[[0.6, 0.4], [0.3, 0.7]]' >"$tmp/p6.jsonl"
expect 0 '' -- "$BIN" metrics --predictions "$tmp/p6.jsonl"

# ---- non-finite weights and adapters --------------------------------------------------------------------------------
cp -rL "$M" "$tmp/nan"
node -e '
const fs = require("fs"), p = process.argv[1], b = fs.readFileSync(p);
const n = Number(b.readBigUInt64LE(0)), h = JSON.parse(b.subarray(8, 8 + n).toString());
const t = h["model.layers.0.mlp.down_proj.weight"];
if (t.dtype !== "BF16") throw new Error("expected BF16, got " + t.dtype);
b.writeUInt16LE(0x7fc0, 8 + n + t.data_offsets[0] + 6);   /* one BF16 NaN */
fs.writeFileSync(p, b);' "$tmp/nan/model.safetensors" || fail "could not plant a NaN"
expect nz 'layer 0 (MLP) gave NaN or infinity' -- "$BIN" decide --model "$tmp/nan" --criteria "$tmp/good.jsonl" --quiet
grep -q '"triage\|"a"' "$tmp/out" && fail "decide printed decisions from a NaN model"
expect nz 'non-finite value' -- "$BIN" generate --model "$tmp/nan" --prompt "hello" -n 3
expect nz 'non-finite value' -- "$BIN" evaluate "$tmp/good.jsonl" --model "$tmp/nan" --quiet --predictions "$tmp/nan.preds"
[ -s "$tmp/nan.preds" ] && fail "evaluate wrote predictions from a NaN model"
"$BIN" export --model "$tmp/nan" --quant f32 -o "$tmp/nan.gguf" 2>/dev/null || fail "export of the NaN model failed"
expect nz 'layer 0 (MLP) gave NaN or infinity' -- "$BIN" decide --model "$tmp/nan.gguf" --criteria "$tmp/good.jsonl" --quiet
cp -r "$FX/qwen3-tiny-lora" "$tmp/lora-alpha"
node -e 'const fs = require("fs"), p = process.argv[1], c = JSON.parse(fs.readFileSync(p)); c.lora_alpha = 1e308; fs.writeFileSync(p, JSON.stringify(c));' "$tmp/lora-alpha/adapter_config.json"
expect nz 'adapter_model.safetensors: merging' -- "$BIN" decide --model "$M" --adapter "$tmp/lora-alpha" --criteria "$tmp/good.jsonl" --quiet
cp -r "$FX/qwen3-tiny-lora" "$tmp/lora-nan"
node -e '
const fs = require("fs"), p = process.argv[1], b = fs.readFileSync(p);
const n = Number(b.readBigUInt64LE(0)), h = JSON.parse(b.subarray(8, 8 + n).toString());
const k = Object.keys(h).find(k => k.endsWith("lora_B.weight")), t = h[k];
if (t.dtype === "F32") b.writeFloatLE(NaN, 8 + n + t.data_offsets[0]); else b.writeUInt16LE(0x7fc0, 8 + n + t.data_offsets[0]);
fs.writeFileSync(p, b);' "$tmp/lora-nan/adapter_model.safetensors" || fail "could not plant a NaN in the adapter"
expect nz 'the adapter holds NaN or infinity' -- "$BIN" decide --model "$M" --adapter "$tmp/lora-nan" --criteria "$tmp/good.jsonl" --quiet

# ---- lost output ----------------------------------------------------------------------------------------------------
full 'writing the output failed' -- "$BIN" decide --model "$M" --criteria "$tmp/good.jsonl" --quiet
full 'writing the output failed' -- "$BIN" tokenize --model "$M" --text "hello"
full 'writing the output failed' -- "$BIN" inspect "$M"
full 'writing the output failed' -- "$BIN" generate --model "$M" --prompt "hello" -n 4
full 'writing the output failed' -- "$BIN" metrics --predictions "$tmp/p6.jsonl"
full 'writing the output failed' -- "$BIN" savings --preset qwen3-8b

# ---- a directory as input -------------------------------------------------------------------------------------------
mkdir -p "$tmp/dir"
expect nz "$tmp/dir: is a directory" -- "$BIN" decide --model "$M" --criteria "$tmp/dir" --evidence "$tmp/good.jsonl"
expect nz "$tmp/dir: is a directory" -- "$BIN" tokenize --model "$M" --jsonl "$tmp/dir"
expect nz "$tmp/dir: is a directory" -- "$BIN" metrics --predictions "$tmp/dir"
expect nz "$tmp/dir: is a directory" -- "$BIN" evaluate "$tmp/dir" --model "$M"
expect nz "$tmp/dir: is a directory" -- "$BIN" decide --model "$M" --criteria "$tmp/crit.jsonl" --evidence "$tmp/dir" --quiet

# ---- unbounded reads ------------------------------------------------------------------------------------------------
expect nz '/dev/zero: more than 262144 bytes, the most evidence can be for a model that reads 4096 tokens' -- \
    "$BIN" decide --model "$M" --criteria "$tmp/crit.jsonl" --evidence /dev/zero --quiet
if [ -z "${TD_SANITIZED:-}" ]; then # 256 MiB of zeros: seconds in release, too slow to be worth it under ASan
    expect nz '/dev/zero: more than 268435456 bytes, the most a criteria file can be' -- \
        "$BIN" decide --model "$M" --criteria /dev/zero --evidence "$tmp/good.jsonl"
fi
expect nz '/dev/zero:1: line longer than 67108864 bytes' -- "$BIN" tokenize --model "$M" --jsonl /dev/zero

# ---- --instruction that names no file -------------------------------------------------------------------------------
expect nz '--instruction /nonexistent/instr.txt: no such file' -- \
    "$BIN" decide --model "$M" --criteria "$tmp/good.jsonl" --instruction /nonexistent/instr.txt --quiet
expect nz "--instruction $tmp/dir: is a directory" -- \
    "$BIN" evaluate "$tmp/good.jsonl" --model "$M" --instruction "$tmp/dir" --quiet
expect 0 '' -- "$BIN" decide --model "$M" --criteria "$tmp/good.jsonl" --instruction "Answer with a letter." --quiet

# ---- past the model's context (4096 positions) -----------------------------------------------------------------------
ids=$(seq 1 4100 | awk '{ printf("%s%d", (NR > 1 ? "," : ""), $1 % 2000 + 1) }')
expect nz 'need 4100 positions, past the model'"'"'s context of 4096 tokens' -- "$BIN" logits --model "$M" --ids "$ids" --out "$tmp/l.f32"
expect nz 'need 4101 positions, past the model' -- "$BIN" generate --model "$M" --ids "$ids" -n 1
expect nz 'need 10001 positions, past the model' -- "$BIN" generate --model "$M" --prompt "a" -n 10000 --ignore-eos
if [ -z "${TD_SANITIZED:-}" ]; then
    expect 0 'warning: 4100 positions, past the model' -- "$BIN" logits --model "$M" --ids "$ids" --out "$tmp/l.f32" --ctx 4100
fi

# ---- safetensors that are not fully indexed -------------------------------------------------------------------------
hole() { # name js-edit-of-header(h) — moves data so that one byte belongs to no tensor
    rm -rf "$tmp/$1" && cp -rL "$M" "$tmp/$1"
    node -e '
const fs = require("fs"), p = process.argv[1], b = fs.readFileSync(p);
const n = Number(b.readBigUInt64LE(0)), h = JSON.parse(b.subarray(8, 8 + n).toString()), data = b.subarray(8 + n);
'"$2"'
let txt = JSON.stringify(h); while ((txt.length + 8) % 8) txt += " ";
const len = Buffer.alloc(8); len.writeBigUInt64LE(BigInt(txt.length));
fs.writeFileSync(p, Buffer.concat([len, Buffer.from(txt), out]));' "$tmp/$1/model.safetensors" || fail "could not build $1"
}
# a one-byte hole before the last tensor: shift it (and its bytes) by one
hole hole1 'const ks = Object.keys(h).filter(k => k !== "__metadata__").sort((a, c) => h[a].data_offsets[0] - h[c].data_offsets[0]);
const last = h[ks[ks.length - 1]], [b0, b1] = last.data_offsets;
const out = Buffer.concat([data.subarray(0, b0), Buffer.alloc(1), data.subarray(b0, b1)]); last.data_offsets = [b0 + 1, b1 + 1];'
expect nz 'belong to no tensor' -- "$BIN" inspect "$tmp/hole1"
hole hole2 'const out = Buffer.concat([data, Buffer.alloc(4)]);'
expect nz 'belong to no tensor (after the last)' -- "$BIN" inspect "$tmp/hole2"

# ---- invalid UTF-8 into a GGUF --------------------------------------------------------------------------------------
expect nz 'GGUF general.name is not valid UTF-8 at byte 0' -- "$BIN" export --model "$M" --quant f32 --name $'\xff\xfe' -o "$tmp/n.gguf"
[ -e "$tmp/n.gguf" ] && fail "a GGUF with an invalid name was written"

# ---- outputs over inputs --------------------------------------------------------------------------------------------
cp -rL "$M" "$tmp/own"
sum0=$(sha256sum "$tmp/own/model.safetensors" | cut -c1-64)
expect nz 'refusing to write over a file of the model' -- "$BIN" export --model "$tmp/own" --quant f32 -o "$tmp/own/model.safetensors"
[ "$(sha256sum "$tmp/own/model.safetensors" | cut -c1-64)" = "$sum0" ] || fail "export destroyed its own input"
cp "$tmp/good.jsonl" "$tmp/fx.jsonl"
expect nz 'refusing to write over an input of this command' -- "$BIN" evaluate "$tmp/fx.jsonl" --model "$M" --quiet --predictions "$tmp/fx.jsonl"
expect nz 'refusing to write over an input of this command' -- "$BIN" evaluate "$tmp/fx.jsonl" --model "$M" --quiet --out "$tmp/fx.jsonl"
cmp -s "$tmp/fx.jsonl" "$tmp/good.jsonl" || fail "evaluate destroyed its fixture"
expect nz 'refusing to write over an input of this command' -- "$BIN" decide --model "$M" --criteria "$tmp/fx.jsonl" --slot-map "$tmp/fx.jsonl" --quiet

# ---- messages in the user's terms -----------------------------------------------------------------------------------
printf 'Hello world!\xff and more' >"$tmp/bad-ev.txt"
expect nz 'the evidence is not valid UTF-8 at byte 12 (of 22)' -- "$BIN" decide --model "$M" --criteria "$tmp/crit.jsonl" --evidence "$tmp/bad-ev.txt" --quiet
printf 'Answer\xc3 now' >"$tmp/bad-instr.txt"
expect nz 'the instruction is not valid UTF-8 at byte 6' -- "$BIN" decide --model "$M" --criteria "$tmp/good.jsonl" --instruction "$tmp/bad-instr.txt" --quiet
expect nz "'A' appears twice" -- "$BIN" export --model "$M" --quant f32 --prune-head AAB -o "$tmp/p.gguf"
expect 2 '--memory must be a size in MB in 1..16777216' -- "$BIN" decide --model "$M" --criteria "$tmp/good.jsonl" --memory 999999999
expect 2 '-n must be an integer in 0..1048576' -- "$BIN" generate --model "$M" --prompt a -n 100000000
expect 2 '--top-k must be an integer in 0..16777216' -- "$BIN" generate --model "$M" --prompt a --top-k 99999999
node -e '
const fs = require("fs"), b = fs.readFileSync(process.argv[1]);
const klen = Number(b.readBigUInt64LE(24));
b.writeUInt32LE(99, 32 + klen);   /* the first metadata value type */
fs.writeFileSync(process.argv[2], b);' "$ROOT/fixtures/gguf/qwen3-tiny-tied-f32.gguf" "$tmp/badtype.gguf"
expect nz ': unknown value type 99' -- "$BIN" inspect "$tmp/badtype.gguf"
grep -q 'metadata metadata' "$tmp/err" && fail "the GGUF message says \"metadata metadata\""
{ printf '\xef\xbb\xbf'; cat "$tmp/good.jsonl"; } >"$tmp/bom.jsonl"
expect 0 '' -- "$BIN" decide --model "$M" --criteria "$tmp/bom.jsonl" --quiet
[ "$(wc -l <"$tmp/out")" -eq 2 ] || fail "a byte-order mark lost a row: $(cat "$tmp/out")"
printf '\xef\xbb\xbf{"text": "hi"}\n' >"$tmp/bom-tok.jsonl"
expect 0 '' -- "$BIN" tokenize --model "$M" --jsonl "$tmp/bom-tok.jsonl"

[ "$fails" -eq 0 ] && echo "test_hostile: all $cases cases passed"
exit $((fails > 0))
