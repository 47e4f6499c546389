#!/usr/bin/env bash
# The kill -9 / resume guarantee, measured: one uninterrupted run of a corpus is the reference; then TRIALS runs are
# each killed (SIGKILL) at a random moment, uniform over the first 95% of the reference run's wall time (model load
# included), and resumed with --resume to the end; every third trial is killed once more while it resumes. Each
# trial's results, errors and provenance files must equal the reference byte for byte. Writes one JSON object per
# trial and a summary to OUT (default bench/results/kill-resume.json).
#   bash bench/kill_resume.sh [TRIALS=20] [DOCS=600] [MODEL=fixtures/models/qwen3-tiny-tied] [OUT=...]
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${TD_BIN:-$ROOT/build/typedecide}
TRIALS=${TRIALS:-20}
DOCS=${DOCS:-600}
MODEL=${MODEL:-$ROOT/fixtures/models/qwen3-tiny-tied}
OUT=${OUT:-$ROOT/bench/results/kill-resume.json}
SEED=${SEED:-47}
tmp=$(mktemp -d)
bg=
trap '[ -n "$bg" ] && kill -9 $bg 2>/dev/null; rm -rf "$tmp"' EXIT
RANDOM=$SEED
RUN="$BIN run --model $MODEL --threads 1 --quiet --no-timing --checkpoint 16"

cat >"$tmp/crit.jsonl" <<'EOF'
{"id": "refund", "question": "Does the customer ask for a refund?", "options": [{"id": "yes", "description": "Yes"}, {"id": "no", "description": "No"}]}
{"id": "topic", "question": "What is the main topic?", "options": [{"id": "billing", "description": "Billing or payments"}, {"id": "bug", "description": "A software defect"}, {"id": "account", "description": "Account access"}]}
{"id": "urgency", "question": "How urgent is it?", "options": [{"id": "1", "description": "Low"}, {"id": "2", "description": "Medium"}, {"id": "3", "description": "High"}, {"id": "4", "description": "Critical"}]}
EOF
awk -v n="$DOCS" 'BEGIN {
    for (i = 1; i <= n; i++) {
        ev = sprintf("Ticket %d: I was billed %d times for plan %c. The app logs me out since v%d.%d.", i, i % 4 + 1, 65 + i % 3, i % 7, i % 5)
        if (i % 11 == 0) printf "{\"id\": \"doc-%d\", \"evidence\": \"%s\", \"criteria\": [{\"id\": \"lang\", \"question\": \"Which language?\", \"options\": [{\"id\": \"en\", \"description\": \"English\"}, {\"id\": \"fr\", \"description\": \"French\"}]}]}\n", i, ev
        else printf "{\"id\": \"doc-%d\", \"evidence\": \"%s\"}\n", i, ev
        if (i % 97 == 0) print "{\"id\": \"bad-" i "\", \"evidence\": "
        if (i % 89 == 0) print "{\"id\": \"no-evidence-" i "\"}"
    }
}' >"$tmp/docs.jsonl"
lines=$(wc -l <"$tmp/docs.jsonl")

t0=$(date +%s%N)
$RUN --input "$tmp/docs.jsonl" --criteria "$tmp/crit.jsonl" --out "$tmp/ref.jsonl" 2>/dev/null || { echo "reference run failed" >&2; exit 1; }
ref_ms=$((($(date +%s%N) - t0) / 1000000))
total=$(wc -l <"$tmp/ref.jsonl")
bad=$(wc -l <"$tmp/ref.jsonl.errors")
count() { if [ -f "$1" ]; then wc -l <"$1"; else echo 0; fi; }

mkdir -p "$(dirname "$OUT")"
: >"$tmp/trials.jsonl"
same=0 mid=0 kills=0
for trial in $(seq 1 "$TRIALS"); do
    out=$tmp/t$trial.jsonl
    n_kills=$((trial % 3 == 0 ? 2 : 1))
    resume=
    at_ms=() at_lines=()
    for k in $(seq 1 "$n_kills"); do
        delay=$((RANDOM * 32768 + RANDOM))
        delay=$((delay % (ref_ms * 95 / 100 + 1)))
        $RUN $resume --input "$tmp/docs.jsonl" --criteria "$tmp/crit.jsonl" --out "$out" 2>/dev/null &
        bg=$!
        sleep "$(printf '%d.%03d' $((delay / 1000)) $((delay % 1000)))"
        kill -9 "$bg" 2>/dev/null
        wait "$bg" 2>/dev/null
        bg=
        kills=$((kills + 1))
        l=$(count "$out")
        at_ms+=("$delay") at_lines+=("$l")
        [ "$l" -lt "$total" ] && mid=$((mid + 1))
        resume=--resume
    done
    t1=$(date +%s%N)
    $RUN --resume --input "$tmp/docs.jsonl" --criteria "$tmp/crit.jsonl" --out "$out" 2>"$tmp/resume.err"
    rc=$?
    resume_ms=$((($(date +%s%N) - t1) / 1000000))
    ok=0
    cmp -s "$out" "$tmp/ref.jsonl" && cmp -s "$out.errors" "$tmp/ref.jsonl.errors" &&
        cmp -s "$out.provenance.json" "$tmp/ref.jsonl.provenance.json" && [ $rc -eq 0 ] && ok=1
    same=$((same + ok))
    repaired=$(grep -c 'repaired\|dropped' "$tmp/resume.err")
    printf '{"trial": %d, "kills": %d, "kill_after_ms": [%s], "results_lines_at_kill": [%s], "resume_rc": %d, "resume_ms": %d, "repair_notes": %d, "identical": %s}\n' \
        "$trial" "$n_kills" "$(IFS=,; echo "${at_ms[*]}")" "$(IFS=,; echo "${at_lines[*]}")" "$rc" "$resume_ms" "$repaired" \
        "$([ $ok = 1 ] && echo true || echo false)" >>"$tmp/trials.jsonl"
    echo "kill_resume: trial $trial: killed after ${at_ms[*]} ms at ${at_lines[*]} of $total lines; identical: $ok" >&2
done
{
    printf '{"what": "kill -9 at random moments, then --resume, against one uninterrupted run", "command": "%s", ' "bash bench/kill_resume.sh"
    printf '"model": "%s", "input_lines": %d, "documents": %d, "bad_lines": %d, "criteria": 3, "reference_ms": %d, ' \
        "${MODEL#"$ROOT"/}" "$lines" "$total" "$bad" "$ref_ms"
    printf '"trials": %d, "kills": %d, "kills_mid_run": %d, "identical": %d, "load": "%s", "kernels": "%s",\n "per_trial": [\n' \
        "$TRIALS" "$kills" "$mid" "$same" "$(cut -d' ' -f1-3 /proc/loadavg)" "$("$BIN" --version | sed 's/.*kernels \(.*\))/\1/')"
    sed '$!s/$/,/' "$tmp/trials.jsonl"
    printf ']}\n'
} >"$OUT"
echo "kill_resume: $same of $TRIALS trials identical to the uninterrupted run ($kills kills, $mid mid-run); $OUT"
[ "$same" -eq "$TRIALS" ]
