#!/usr/bin/env bash
# PEFT LoRA adapters: the fixture adapter merges at load (its logits are checked against transformers + peft in
# test_fixtures); broken adapters are refused with a message naming the field or tensor.
set -uo pipefail
ROOT=${TD_ROOT:-$(cd "$(dirname "$0")/.." && pwd)}
BIN=${TD_BIN:-$ROOT/build/typedecide}
FX=$ROOT/fixtures/models
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }

"$BIN" logits --model "$FX/qwen3-tiny-tied" --adapter "$FX/qwen3-tiny-lora" --ids 1,2,3 --out "$tmp/a.f32" 2>"$tmp/err" ||
    fail "logits with the adapter failed: $(cat "$tmp/err")"
grep -q "merged LoRA adapter .*: 14 weights, scaling 2" "$tmp/err" || fail "no merge log line: $(cat "$tmp/err")"
"$BIN" logits --model "$FX/qwen3-tiny-tied" --ids 1,2,3 --out "$tmp/b.f32" 2>/dev/null
cmp -s "$tmp/a.f32" "$tmp/b.f32" && fail "the adapter changed nothing"

# broken copies: edit adapter_config.json with node
broken() { # name js-expression-on-c
    rm -rf "$tmp/$1" && cp -r "$FX/qwen3-tiny-lora" "$tmp/$1"
    node -e 'const fs = require("fs"), p = process.argv[1]; const c = JSON.parse(fs.readFileSync(p)); '"$2"'; fs.writeFileSync(p, JSON.stringify(c));' "$tmp/$1/adapter_config.json"
}
expect() { # adapter-dir needle
    "$BIN" logits --model "$FX/qwen3-tiny-tied" --adapter "$1" --ids 1 --out "$tmp/x.f32" >/dev/null 2>"$tmp/err"
    local rc=$?
    { [ $rc -eq 1 ]; } || fail "adapter $1: exit $rc, want 1"
    grep -qF -- "$2" "$tmp/err" || fail "adapter $1: stderr lacks \"$2\": $(cat "$tmp/err")"
}
broken unknown 'c.target_modules.push("foo_proj")'
expect "$tmp/unknown" 'target module "foo_proj" matches no lora tensor'
broken missing 'c.target_modules = c.target_modules.filter(t => t !== "q_proj")'
expect "$tmp/missing" 'adapts "q_proj", which is not in target_modules'
broken rank 'c.r = 3'
expect "$tmp/rank" 'down_proj.lora_A.weight must have shape [3, 128] (r, in features of model.layers.0.mlp.down_proj.weight)'
broken dora 'c.use_dora = true'
expect "$tmp/dora" '"use_dora": true is not supported'
broken regex 'c.target_modules = ".*proj"'
expect "$tmp/regex" '"target_modules" must be a list of module names'
expect "$tmp/nonexistent" 'nonexistent/adapter_config.json: unable to open'
# an adapter for another model: lora_B rows disagree with the base weight
"$BIN" logits --model "$FX/qwen3-tiny-untied" --adapter "$FX/qwen3-tiny-lora" --ids 1 --out "$tmp/x.f32" >/dev/null 2>"$tmp/err" &&
    fail "an adapter for a different shape was accepted"
grep -q "must have shape" "$tmp/err" || fail "shape mismatch message: $(cat "$tmp/err")"

[ "$fails" -eq 0 ] && echo "test_adapter: all checks passed"
exit $((fails > 0))
