#!/usr/bin/env bash
# The kill -9 / resume guarantee for `run --force` over existing results (issue 47: a forced run writes OUT.partial
# and renames it over OUT only when it completes): every trial starts from the files of an older run (of the first
# DOCS/3 documents) at OUT, runs `--force` and kills it (SIGKILL) at a random moment, uniform over the first 95% of
# the reference run's wall time; OUT, its errors and provenance must then be the old files byte for byte; then
# --resume to the end (--force again when the kill came before the run had created OUT.partial) (every third trial is
# killed once more while it resumes, and OUT checked again), after which the three files must equal one uninterrupted
# run's byte for byte and no .partial file may remain. Writes one JSON object per trial and a summary to OUT (default
# bench/results/kill-force-resume.json). The corpus and the kill: bench/kill_common.sh.
#   bash bench/hostile/kill_force.sh [TRIALS=20] [DOCS=600] [MODEL=fixtures/models/qwen3-tiny-tied] [OUT=...]
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${OUT:-$ROOT/bench/results/kill-force-resume.json}
. "$ROOT/bench/kill_common.sh"
kill_setup
kill_reference
head -n $((lines / 3)) "$tmp/docs.jsonl" >"$tmp/old-docs.jsonl"
$RUN --input "$tmp/old-docs.jsonl" --criteria "$tmp/crit.jsonl" --out "$tmp/old.jsonl" 2>/dev/null || { echo "old run failed" >&2; exit 1; }
sums() { for x in "" .errors .provenance.json; do sha256sum <"$1$x" | cut -c1-16; done | tr '\n' ' '; }
old=$(sums "$tmp/old.jsonl")

: >"$tmp/trials.jsonl"
same=0 mid=0 kills=0 kept=0
for trial in $(seq 1 "$TRIALS"); do
    out=$tmp/t$trial.jsonl
    for x in "" .errors .provenance.json; do cp "$tmp/old.jsonl$x" "$out$x"; done
    n_kills=$((trial % 3 == 0 ? 2 : 1))
    mode=--force
    at_ms=() at_lines=() old_kept=true
    for k in $(seq 1 "$n_kills"); do
        kill_run_at_random "$out" $mode
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
    kill_finish "$out" $mode
    ok=0
    kill_same_as_reference "$out" && ! ls "$out".*partial* >/dev/null 2>&1 && [ "$old_kept" = true ] && ok=1
    same=$((same + ok))
    printf '{"trial": %d, "kills": %d, "kill_after_ms": [%s], "partial_lines_at_kill": [%s], "old_files_kept": %s, "resume_rc": %d, "resume_ms": %d, "repair_notes": %d, "identical": %s}\n' \
        "$trial" "$n_kills" "$(kill_join "${at_ms[@]}")" "$(kill_join "${at_lines[@]}")" "$old_kept" "$rc" "$resume_ms" "$repaired" \
        "$([ $ok = 1 ] && echo true || echo false)" >>"$tmp/trials.jsonl"
    echo "kill_force: trial $trial: killed after ${at_ms[*]} ms at ${at_lines[*]} of $total lines; old kept: $old_kept; identical: $ok" >&2
done
kill_write_summary "run --force over older results, kill -9 at random moments (OUT must stay the old files), then --resume, against one uninterrupted run" \
    "bash bench/hostile/kill_force.sh" "$(printf '"old_files_kept_at_mid_run_kills": %d, ' "$kept")"
echo "kill_force: $same of $TRIALS trials identical to the uninterrupted run, the old files kept at $kept of $mid mid-run kills ($kills kills); $OUT"
[ "$same" -eq "$TRIALS" ] && [ "$kept" -eq "$mid" ]
