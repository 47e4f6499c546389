#!/usr/bin/env bash
# The kill -9 / resume guarantee for `run --force` over existing results (issue 47: a forced run writes OUT.partial
# and renames it over OUT only when it completes): every trial starts from the files of an older run (of the first
# DOCS/3 documents) at OUT, runs `--force` and kills it (SIGKILL) at a random moment, uniform over the first 95% of
# the reference run's wall time; OUT, its errors and provenance must then be the old files byte for byte; then
# --resume to the end (--force again when the kill came before the run had created OUT.partial) (every third trial is killed once more while it resumes, and OUT checked again), after which
# the three files must equal one uninterrupted run's byte for byte and no .partial file may remain. Writes one JSON
# object per trial and a summary to OUT (default bench/results/kill-force-resume.json).
#   bash bench/hostile/kill_force.sh [TRIALS=20] [DOCS=600] [MODEL=fixtures/models/qwen3-tiny-tied] [OUT=...]
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BIN=${TD_BIN:-$ROOT/build/typedecide}
TRIALS=${TRIALS:-20}
DOCS=${DOCS:-600}
MODEL=${MODEL:-$ROOT/fixtures/models/qwen3-tiny-tied}
OUT=${OUT:-$ROOT/bench/results/kill-force-resume.json}
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
head -n $((lines / 3)) "$tmp/docs.jsonl" >"$tmp/old-docs.jsonl"
$RUN --input "$tmp/old-docs.jsonl" --criteria "$tmp/crit.jsonl" --out "$tmp/old.jsonl" 2>/dev/null || { echo "old run failed" >&2; exit 1; }
sums() { for x in "" .errors .provenance.json; do sha256sum <"$1$x" | cut -c1-16; done | tr '\n' ' '; }
old=$(sums "$tmp/old.jsonl")
count() { if [ -f "$1" ]; then wc -l <"$1"; else echo 0; fi; }

mkdir -p "$(dirname "$OUT")"
: >"$tmp/trials.jsonl"
same=0 mid=0 kills=0 kept=0
for trial in $(seq 1 "$TRIALS"); do
    out=$tmp/t$trial.jsonl
    for x in "" .errors .provenance.json; do cp "$tmp/old.jsonl$x" "$out$x"; done
    n_kills=$((trial % 3 == 0 ? 2 : 1))
    mode=--force
    at_ms=() at_lines=() old_kept=true
    for k in $(seq 1 "$n_kills"); do
        delay=$((RANDOM * 32768 + RANDOM))
        delay=$((delay % (ref_ms * 95 / 100 + 1)))
        $RUN $mode --input "$tmp/docs.jsonl" --criteria "$tmp/crit.jsonl" --out "$out" 2>/dev/null &
        bg=$!
        sleep "$(printf '%d.%03d' $((delay / 1000)) $((delay % 1000)))"
        kill -9 "$bg" 2>/dev/null
        wait "$bg" 2>/dev/null
        bg=
        kills=$((kills + 1))
        l=$(count "$out.partial")
        at_ms+=("$delay") at_lines+=("$l")
        if [ -e "$out.partial" ]; then # killed before it completed: OUT must be the old files
            mid=$((mid + 1))
            [ "$(sums "$out")" = "$old" ] && kept=$((kept + 1)) || old_kept=false
        fi
        # a kill before the forced run created OUT.partial left nothing to continue: --force again (--resume would
        # refuse, OUT being the old run's); else --resume continues the partial run
        if [ -e "$out.partial" ]; then mode=--resume; else mode=--force; fi
    done
    t1=$(date +%s%N)
    $RUN $mode --input "$tmp/docs.jsonl" --criteria "$tmp/crit.jsonl" --out "$out" 2>"$tmp/resume.err"
    rc=$?
    resume_ms=$((($(date +%s%N) - t1) / 1000000))
    ok=0
    cmp -s "$out" "$tmp/ref.jsonl" && cmp -s "$out.errors" "$tmp/ref.jsonl.errors" &&
        cmp -s "$out.provenance.json" "$tmp/ref.jsonl.provenance.json" && [ $rc -eq 0 ] &&
        ! ls "$out".*partial* >/dev/null 2>&1 && [ "$old_kept" = true ] && ok=1
    same=$((same + ok))
    repaired=$(grep -c 'repaired\|dropped' "$tmp/resume.err")
    printf '{"trial": %d, "kills": %d, "kill_after_ms": [%s], "partial_lines_at_kill": [%s], "old_files_kept": %s, "resume_rc": %d, "resume_ms": %d, "repair_notes": %d, "identical": %s}\n' \
        "$trial" "$n_kills" "$(IFS=,; echo "${at_ms[*]}")" "$(IFS=,; echo "${at_lines[*]}")" "$old_kept" "$rc" "$resume_ms" "$repaired" \
        "$([ $ok = 1 ] && echo true || echo false)" >>"$tmp/trials.jsonl"
    echo "kill_force: trial $trial: killed after ${at_ms[*]} ms at ${at_lines[*]} of $total lines; old kept: $old_kept; identical: $ok" >&2
done
{
    printf '{"what": "run --force over older results, kill -9 at random moments (OUT must stay the old files), then --resume, against one uninterrupted run", "command": "%s", ' "bash bench/hostile/kill_force.sh"
    printf '"model": "%s", "input_lines": %d, "documents": %d, "bad_lines": %d, "criteria": 3, "reference_ms": %d, ' \
        "${MODEL#"$ROOT"/}" "$lines" "$total" "$bad" "$ref_ms"
    printf '"trials": %d, "kills": %d, "kills_mid_run": %d, "old_files_kept_at_mid_run_kills": %d, "identical": %d, "load": "%s", "kernels": "%s",\n "per_trial": [\n' \
        "$TRIALS" "$kills" "$mid" "$kept" "$same" "$(cut -d' ' -f1-3 /proc/loadavg)" "$("$BIN" --version | sed 's/.*kernels \(.*\))/\1/')"
    sed '$!s/$/,/' "$tmp/trials.jsonl"
    printf ']}\n'
} >"$OUT"
echo "kill_force: $same of $TRIALS trials identical to the uninterrupted run, the old files kept at $kept of $mid mid-run kills ($kills kills); $OUT"
[ "$same" -eq "$TRIALS" ] && [ "$kept" -eq "$mid" ]
