#!/usr/bin/env bash
# The kill -9 / resume guarantee, measured: one uninterrupted run of a corpus is the reference; then TRIALS runs are
# each killed (SIGKILL) at a random moment, uniform over the first 95% of the reference run's wall time (model load
# included), and resumed with --resume to the end; every third trial is killed once more while it resumes. Each
# trial's results, errors and provenance files must equal the reference byte for byte. Writes one JSON object per
# trial and a summary to OUT (default bench/results/kill-resume.json). The corpus and the kill: bench/kill_common.sh.
#   bash bench/kill_resume.sh [TRIALS=20] [DOCS=600] [MODEL=fixtures/models/qwen3-tiny-tied] [OUT=...]
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-$ROOT/bench/results/kill-resume.json}
. "$ROOT/bench/kill_common.sh"
kill_setup
kill_reference

: >"$tmp/trials.jsonl"
same=0 mid=0 kills=0
for trial in $(seq 1 "$TRIALS"); do
    out=$tmp/t$trial.jsonl
    n_kills=$((trial % 3 == 0 ? 2 : 1))
    resume=
    at_ms=() at_lines=()
    for k in $(seq 1 "$n_kills"); do
        kill_run_at_random "$out" $resume
        l=$(count "$out")
        at_ms+=("$delay") at_lines+=("$l")
        [ "$l" -lt "$total" ] && mid=$((mid + 1))
        resume=--resume
    done
    kill_finish "$out" --resume
    ok=0
    kill_same_as_reference "$out" && ok=1
    same=$((same + ok))
    printf '{"trial": %d, "kills": %d, "kill_after_ms": [%s], "results_lines_at_kill": [%s], "resume_rc": %d, "resume_ms": %d, "repair_notes": %d, "identical": %s}\n' \
        "$trial" "$n_kills" "$(kill_join "${at_ms[@]}")" "$(kill_join "${at_lines[@]}")" "$rc" "$resume_ms" "$repaired" \
        "$([ $ok = 1 ] && echo true || echo false)" >>"$tmp/trials.jsonl"
    echo "kill_resume: trial $trial: killed after ${at_ms[*]} ms at ${at_lines[*]} of $total lines; identical: $ok" >&2
done
kill_write_summary "kill -9 at random moments, then --resume, against one uninterrupted run" "bash bench/kill_resume.sh" ""
echo "kill_resume: $same of $TRIALS trials identical to the uninterrupted run ($kills kills, $mid mid-run); $OUT"
[ "$same" -eq "$TRIALS" ]
