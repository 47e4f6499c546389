# What bench/kill_resume.sh and bench/hostile/kill_force.sh share, sourced by both (not run on its own): the corpus,
# the uninterrupted reference run, the random kill, the byte-for-byte comparison and the summary's common fields.
# The caller sets ROOT (the repository root) and OUT first; TD_BIN, TRIALS, DOCS, MODEL and SEED come from the
# environment. Every variable below is global: the scripts read them after the calls.

# BIN TRIALS DOCS MODEL SEED, the temporary folder (removed on exit, with any run still going), RUN, and the inputs:
# $tmp/crit.jsonl (3 criteria) and $tmp/docs.jsonl (DOCS documents, every 11th with a criterion of its own, a broken
# line after every 97th, a line without evidence after every 89th); lines = its line count.
kill_setup() {
    BIN=${TD_BIN:-$ROOT/build/typedecide}
    TRIALS=${TRIALS:-20}
    DOCS=${DOCS:-600}
    MODEL=${MODEL:-$ROOT/fixtures/models/qwen3-tiny-tied}
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
}

# The uninterrupted run, $tmp/ref.jsonl (+ .errors, .provenance.json): ref_ms its wall time, total its result lines,
# bad its error lines. Exits when it fails.
kill_reference() {
    local t0
    t0=$(date +%s%N)
    $RUN --input "$tmp/docs.jsonl" --criteria "$tmp/crit.jsonl" --out "$tmp/ref.jsonl" 2>/dev/null ||
        { echo "reference run failed" >&2; exit 1; }
    ref_ms=$((($(date +%s%N) - t0) / 1000000))
    total=$(wc -l <"$tmp/ref.jsonl")
    bad=$(wc -l <"$tmp/ref.jsonl.errors")
}

# Lines of file $1, 0 when it does not exist.
count() { if [ -f "$1" ]; then wc -l <"$1"; else echo 0; fi; }

# kill_run_at_random OUT [FLAGS...]: runs `$RUN FLAGS... --input docs --criteria crit --out OUT` in the background
# and kills it (SIGKILL) after a random delay, uniform over the first 95% of the reference run's wall time:
# delay = that delay in ms; kills += 1.
kill_run_at_random() {
    delay=$((RANDOM * 32768 + RANDOM))
    delay=$((delay % (ref_ms * 95 / 100 + 1)))
    $RUN "${@:2}" --input "$tmp/docs.jsonl" --criteria "$tmp/crit.jsonl" --out "$1" 2>/dev/null &
    bg=$!
    sleep "$(printf '%d.%03d' $((delay / 1000)) $((delay % 1000)))"
    kill -9 "$bg" 2>/dev/null
    wait "$bg" 2>/dev/null
    bg=
    kills=$((kills + 1))
}

# kill_finish OUT [FLAGS...]: runs `$RUN FLAGS... --input docs --criteria crit --out OUT` to the end, its stderr in
# $tmp/resume.err: rc its exit status, resume_ms its wall time, repaired the repair notes it printed.
kill_finish() {
    local t1
    t1=$(date +%s%N)
    $RUN "${@:2}" --input "$tmp/docs.jsonl" --criteria "$tmp/crit.jsonl" --out "$1" 2>"$tmp/resume.err"
    rc=$?
    resume_ms=$((($(date +%s%N) - t1) / 1000000))
    repaired=$(grep -c 'repaired\|dropped' "$tmp/resume.err")
}

# True when results file $1, its errors and its provenance equal the reference's byte for byte and rc is 0.
kill_same_as_reference() {
    cmp -s "$1" "$tmp/ref.jsonl" && cmp -s "$1.errors" "$tmp/ref.jsonl.errors" &&
        cmp -s "$1.provenance.json" "$tmp/ref.jsonl.provenance.json" && [ "$rc" -eq 0 ]
}

# Array $@ joined by commas (a JSON list's inside).
kill_join() { (IFS=,; echo "$*"); }

# The summary: {"what": $1, "command": $2, the corpus and reference fields, "trials", "kills", "kills_mid_run", then
# $3 (more `"key": value, ` fields, may be empty), "identical", "load", "kernels", "per_trial": [the lines of
# $tmp/trials.jsonl]}, written to OUT.
kill_write_summary() {
    mkdir -p "$(dirname "$OUT")"
    {
        printf '{"what": "%s", "command": "%s", ' "$1" "$2"
        printf '"model": "%s", "input_lines": %d, "documents": %d, "bad_lines": %d, "criteria": 3, "reference_ms": %d, ' \
            "${MODEL#"$ROOT"/}" "$lines" "$total" "$bad" "$ref_ms"
        printf '"trials": %d, "kills": %d, "kills_mid_run": %d, %s"identical": %d, "load": "%s", "kernels": "%s",\n "per_trial": [\n' \
            "$TRIALS" "$kills" "$mid" "$3" "$same" "$(cut -d' ' -f1-3 /proc/loadavg)" "$("$BIN" --version | sed 's/.*kernels \(.*\))/\1/')"
        sed '$!s/$/,/' "$tmp/trials.jsonl"
        printf ']}\n'
    } >"$OUT"
}
