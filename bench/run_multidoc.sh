#!/usr/bin/env bash
# Would deciding several documents in one forward pass pay on the CPU? `typedecide run` decides one document per
# td_decide call: its head in one pass, its 12 criteria in a second. Deciding D documents at once would put D
# heads in one pass and D x 12 suffixes in another, so what it can save is the per-pass cost, D - 1 times in D.
# Measured with `bench decide` over one 160-token evidence (the corpus's head size), 45-token suffixes:
#   c12   12 criteria in one batched pass (one document's)        -> suffix ms per criterion
#   c48   48 criteria in one batched pass (four documents' worth) -> suffix ms per criterion
#   s1    one-token criteria, serial: what a pass costs whatever its length
# on the tiny fixture (1 and 2 threads) and the synthetic qwen3-0.6b Q8_0 (2 threads; bench/run.sh makes it).
# Writes bench/results/run-multidoc-ceiling.json (commands, results, ratios c12 / c48).
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${TD_BIN:-build/typedecide}
Q8=${TMPDIR:-/tmp}/td-run-bench/qwen3-0.6b.q8_0.gguf
runs=""
add() { # key command...
    local key=$1
    shift
    echo "run_multidoc: $key: $*" >&2
    runs="$runs${runs:+,}{\"key\": \"$key\", \"command\": \"$*\", \"result\": $("$@")}"
}
for t in 1 2; do
    m=fixtures/models/qwen3-tiny-tied
    add "tiny_${t}t_c12" "$BIN" bench decide --model $m --prefix 160 --criteria 12 --suffix 45 --options 3 --batch --threads $t --repeat 5
    add "tiny_${t}t_c48" "$BIN" bench decide --model $m --prefix 160 --criteria 48 --suffix 45 --options 3 --batch --threads $t --repeat 5
    add "tiny_${t}t_s1" "$BIN" bench decide --model $m --prefix 160 --criteria 12 --suffix 1 --options 3 --serial --threads $t --repeat 5
done
if [ -f "$Q8" ]; then
    add q8_2t_c12 "$BIN" bench decide --model "$Q8" --prefix 160 --criteria 12 --suffix 45 --options 3 --batch --threads 2 --repeat 1
    add q8_2t_c48 "$BIN" bench decide --model "$Q8" --prefix 160 --criteria 48 --suffix 45 --options 3 --batch --threads 2 --repeat 1
    add q8_2t_s1 "$BIN" bench decide --model "$Q8" --prefix 160 --criteria 12 --suffix 1 --options 3 --serial --threads 2 --repeat 1
fi
node - >bench/results/run-multidoc-ceiling.json <<NODE
const runs = [$runs], os = require("os");
const get = k => { const r = runs.find(x => x.key === k); return r ? r.result : null; };
const ratios = {};
for (const p of ["tiny_1t", "tiny_2t", "q8_2t"]) {
  const a = get(p + "_c12"), b = get(p + "_c48"), s = get(p + "_s1");
  if (!a || !b) continue;
  ratios[p] = {
    c12_suffix_ms_per_criterion: a.suffix_ms_per_criterion, c48_suffix_ms_per_criterion: b.suffix_ms_per_criterion,
    gain_of_four_documents_per_pass: +(a.suffix_ms_per_criterion / b.suffix_ms_per_criterion).toFixed(3),
    one_token_pass_ms: s ? s.suffix_ms_per_criterion : null, prefix_ms: a.prefix_ms,
  };
}
console.log(JSON.stringify({ machine: { cpu: os.cpus()[0].model, cores: os.cpus().length,
  load_average_at_end: os.loadavg().map(x => +x.toFixed(2)) }, ratios, runs }, null, 2));
NODE
node -e 'console.log(JSON.stringify(require(process.argv[1]).ratios, null, 1))' "$PWD/bench/results/run-multidoc-ceiling.json"
