# Shared by the data-safety tests (test_outputs, test_resume, test_merge, test_inputs): sourced, not run.
# expect CODE NEEDLE -- command...: the exit code ("nz" = a clean failure: not 0, not a crash, not a hang), a
# substring of stderr, no sanitizer report, and a time limit (a hang fails). Standard output goes to $tmp/out.
set -uo pipefail
ROOT=${TD_ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
BIN=${TD_BIN:-$ROOT/build/typedecide}
M=$ROOT/fixtures/models/qwen3-tiny-tied
SAN=${TD_SANITIZED:-}
tmp=$(mktemp -d)
bgpids=()
trap 'for p in "${bgpids[@]}"; do kill -9 "$p" 2>/dev/null; done; rm -rf "$tmp"' EXIT
fails=0
cases=0
LIMIT=${LIMIT:-120}
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }

expect() {
    local code=$1 needle=$2
    shift 3
    local cmd="$*"
    cmd=${cmd:0:200}
    cases=$((cases + 1))
    timeout "$LIMIT" "$@" >"$tmp/out" 2>"$tmp/err"
    local rc=$?
    if [ "$code" = nz ]; then
        { [ "$rc" -ne 0 ] && [ "$rc" -lt 124 ]; } || fail "'$cmd' exited $rc, want a clean failure ($(head -c 400 "$tmp/err"))"
    else
        [ "$rc" -eq "$code" ] || fail "'$cmd' exited $rc, want $code ($(head -c 400 "$tmp/err"))"
    fi
    [ -z "$needle" ] || grep -qF -- "$needle" "$tmp/err" || fail "'$cmd': stderr lacks \"$needle\": $(head -c 400 "$tmp/err")"
    if grep -qE 'runtime error:|AddressSanitizer|LeakSanitizer' "$tmp/err"; then fail "'$cmd': sanitizer report"; fi
}

# sum FILE: a checksum that also tells a missing file
sum() { if [ -e "$1" ]; then sha256sum <"$1" | cut -c1-16; else echo missing; fi; }
same() { [ "$(sum "$1")" = "$2" ] || fail "$3 (${1##*/} changed: $(sum "$1"), was $2)"; }

RUN="$BIN run --model $M --threads 1 --quiet --no-timing"
# a small corpus: 12 documents, one criterion file, two bad lines (8 and 11)
make_corpus() {
    cat >"$tmp/crit.jsonl" <<'EOF'
{"id": "refund", "question": "Does the customer ask for a refund?", "options": [{"id": "yes", "description": "Yes"}, {"id": "no", "description": "No"}]}
{"id": "topic", "question": "What is the main topic?", "options": [{"id": "billing", "description": "Billing"}, {"id": "bug", "description": "A defect"}]}
EOF
    cp "$tmp/crit.jsonl" "$tmp/crit2.jsonl"
    echo '{"id": "urgent", "question": "Urgent?", "options": [{"id": "y", "description": "Yes"}, {"id": "n", "description": "No"}]}' >>"$tmp/crit2.jsonl"
    for i in $(seq 1 12); do
        if [ "$i" = 8 ]; then echo '{"id": "bad-json", "evidence": '
        elif [ "$i" = 11 ]; then echo '{"id": "no-evidence"}'
        else echo "{\"id\": \"d$i\", \"evidence\": \"Ticket $i: I was billed $i times, refund please.\"}"; fi
    done >"$tmp/docs.jsonl"
    sed 's/Ticket/Note/' "$tmp/docs.jsonl" >"$tmp/docs2.jsonl"
}

# a private character device like /dev/full (root only), so that a test can show a device is never removed without
# risking the system's own
private_full() {
    [ "$(id -u)" = 0 ] && mknod "$1" c 1 7 2>/dev/null
}

# "${SMALL_DISK[@]}" KB command...: the command with a file-size limit (a full disk in effect): writes past KB
# kibibytes fail with EFBIG instead of killing it (SIGXFSZ ignored)
SMALL_DISK=(bash -c 'trap "" XFSZ; ulimit -f "$0"; exec "$@"')

finish() {
    [ "$fails" -eq 0 ] && echo "$1: all $cases cases passed"
    exit $((fails > 0))
}
