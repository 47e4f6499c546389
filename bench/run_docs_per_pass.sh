#!/usr/bin/env bash
# `typedecide run --docs-per-pass N` against one document per pass on the CPU (issue 43): the same corpus
# (bench/corpus_gen.sh: DOCS tickets x 12 criteria) decided with N = 1 and N = 16, alternately REPEATS times per model,
# documents/s from each run's --summary; the results files of both (--no-timing) must be the same bytes (checked,
# recorded). Writes bench/results/run-docs-per-pass-cpu.json with the commands, the machine and the load average
# around each run (this machine is shared: read the spread, not one number).
#   bench/run_docs_per_pass.sh                 models: fixtures/models/qwen3-tiny-tied and models/demo-qwen3
# MODELS, DOCS (default 300), REPEATS (default 3), THREADS (default: all cores), PASS (default 16) from the
# environment.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${TD_BIN:-build/typedecide}
DOCS=${DOCS:-300}
REPEATS=${REPEATS:-3}
THREADS=${THREADS:-$(nproc)}
PASS=${PASS:-16}
MODELS=${MODELS:-fixtures/models/qwen3-tiny-tied models/demo-qwen3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
corpus=$(bash bench/corpus_gen.sh "$DOCS" "$work")
runs=$work/runs.jsonl
: >"$runs"
for m in $MODELS; do
    for r in $(seq 1 "$REPEATS"); do
        for n in 1 "$PASS"; do
            out=$work/out-$(basename "$m")-$n.jsonl
            cmd="$BIN run --model $m --input $corpus --criteria $work/criteria.jsonl --out $out --force --no-timing --threads $THREADS --docs-per-pass $n --summary $work/s.json --quiet"
            load0=$(cut -d' ' -f1 /proc/loadavg)
            $cmd
            echo "{\"model\": \"$(basename "$m")\", \"repeat\": $r, \"docs_per_pass\": $n, \"load_before\": $load0, \"load_after\": $(cut -d' ' -f1 /proc/loadavg), \"command\": \"$cmd\", \"summary\": $(cat "$work/s.json")}" >>"$runs"
            echo "bench/run_docs_per_pass: $(basename "$m") N=$n: $(grep -o '"documents_per_s": [0-9.]*' "$work/s.json")" >&2
        done
        cmp -s "$work/out-$(basename "$m")-1.jsonl" "$work/out-$(basename "$m")-$PASS.jsonl" && echo same >>"$work/same-$(basename "$m")" ||
            echo differ >>"$work/same-$(basename "$m")"
    done
done
node - "$runs" "$work" "$DOCS" "$PASS" >bench/results/run-docs-per-pass-cpu.json <<'NODE'
const fs = require("fs"), os = require("os"), path = require("path");
const [runs, work, docs, pass] = process.argv.slice(2);
const rows = fs.readFileSync(runs, "utf8").trim().split("\n").map(JSON.parse);
const models = [...new Set(rows.map(r => r.model))];
const med = a => { const s = [...a].sort((x, y) => x - y); return s[s.length >> 1]; };
const per_model = {};
for (const m of models) {
  const one = rows.filter(r => r.model === m && r.docs_per_pass === 1).map(r => r.summary.documents_per_s);
  const many = rows.filter(r => r.model === m && r.docs_per_pass === +pass).map(r => r.summary.documents_per_s);
  const same = fs.readFileSync(path.join(work, "same-" + m), "utf8").trim().split("\n");
  per_model[m] = {
    documents_per_s_1: one.map(x => +x.toFixed(2)), ["documents_per_s_" + pass]: many.map(x => +x.toFixed(2)),
    median_ratio: +(med(many) / med(one)).toFixed(3),
    results_same_bytes: same.every(x => x === "same"),
  };
}
console.log(JSON.stringify({
  bench: `typedecide run: ${docs} documents x 12 criteria (bench/corpus_gen.sh), --docs-per-pass 1 vs ${pass}, CPU, alternating`,
  machine: { cpu: os.cpus()[0].model, cores: os.cpus().length, note: "shared with other builds and tests: see each run's load average" },
  per_model, runs: rows, date: new Date().toISOString().slice(0, 10),
}, null, 2));
NODE
echo "bench/run_docs_per_pass: wrote bench/results/run-docs-per-pass-cpu.json" >&2
node -e 'console.log(JSON.stringify(require(process.argv[1]).per_model))' "$PWD/bench/results/run-docs-per-pass-cpu.json"
