# Shared by the runner's tests (test_run, test_run_window): sourced, not run. ROOT, BIN, SAN; a temporary folder
# $tmp removed at exit, with the background run $bgpid (if any) killed; fail and its count; section NAME (the time
# since the last section, in ms, under the test's name); $tmp/crit.jsonl holding the two criteria both corpora ask
# (refund: 2 options, topic: 3); $long, an evidence of 3000 words (beyond the tiny models' context); count_lines;
# and kill_at, one kill -9 of a run mid-way.
set -uo pipefail
ROOT=${TD_ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
BIN=${TD_BIN:-$ROOT/build/typedecide}
tmp=$(mktemp -d)
bgpid=
trap '[ -n "$bgpid" ] && kill -9 $bgpid 2>/dev/null; rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }
SAN=${TD_SANITIZED:-}
run_test=$(basename "$0" .sh)
t_sec=$(date +%s%N)
section() { local t; t=$(date +%s%N); echo "$run_test: $1: $(((t - t_sec) / 1000000)) ms"; t_sec=$t; }

cat >"$tmp/crit.jsonl" <<'EOF'
{"id": "refund", "question": "Does the customer ask for a refund?", "options": [{"id": "yes", "description": "Yes"}, {"id": "no", "description": "No"}]}
{"id": "topic", "question": "What is the main topic?", "options": [{"id": "billing", "description": "Billing or payments"}, {"id": "bug", "description": "A software defect"}, {"id": "account", "description": "Account access"}]}
EOF
long=$(awk 'BEGIN { for (i = 0; i < 3000; i++) printf "word%d ", i }')

# count_lines FILE: its lines, 0 when it does not exist yet
count_lines() { if [ -f "$1" ]; then wc -l <"$1"; else echo 0; fi; }

# kill_at OUT TARGET COMMAND...: starts the command in the background, waits (polling every 5 ms) until OUT holds
# TARGET lines or the command ended, then a random 0-9 ms more (one draw of $RANDOM: call it in the test's own shell,
# not in $(...), so the draws follow the test's seed), and kills it with -9.
kill_at() {
    local out=$1 target=$2
    shift 2
    "$@" 2>/dev/null &
    bgpid=$!
    while kill -0 "$bgpid" 2>/dev/null && [ "$(count_lines "$out")" -lt "$target" ]; do sleep 0.005; done
    sleep "0.00$((RANDOM % 10))"
    kill -9 "$bgpid" 2>/dev/null
    wait "$bgpid" 2>/dev/null
    bgpid=
}
