#!/usr/bin/env bash
# typedecide serve's connections (tests/serve/check_conn.mjs): slow-header and slow-body clients cut with a 408 at
# the deadline while /health keeps answering, conflicting framing refused, an idle keep-alive connection closed,
# the cap per client address, CORS with and without --cors-origin, HEAD on the GET paths; then the server stops
# cleanly on SIGTERM (exit 0; under ASan, no leak report).
set -uo pipefail
ROOT=${TD_ROOT:-$(cd "$(dirname "$0")/.." && pwd)}
. "$ROOT/tests/serve/lib.sh"
BIN=${TD_BIN:-$ROOT/build/typedecide}
MODEL=$ROOT/models/demo-qwen3
tmp=$(mktemp -d)
pids=()
trap 'for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done; rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }

# start_server LOG ARGS...: `typedecide serve --port 0 ARGS` in the background; sets $url
start_server() {
    local log=$1
    shift
    "$BIN" serve --model "$MODEL" --port 0 --threads 1 "$@" 2>"$log" &
    pids+=($!)
    server_pid=$!
    url=$(serve_url "$log" "$server_pid") && return 0
    fail "the server did not start: $(tail -3 "$log")"
    return 1
}
stop_server() {
    kill -TERM "$server_pid"
    wait "$server_pid"
    local rc=$?
    [ $rc -eq 0 ] || fail "serve exited $rc after SIGTERM: $(tail -5 "$1")"
}

if start_server "$tmp/main.log" --timeout 2 --quiet --cors-origin http://allowed.example,http://two.example; then
    node "$ROOT/tests/serve/check_conn.mjs" main "$url" 2 || fail "check_conn main"
    stop_server "$tmp/main.log"
fi
if start_server "$tmp/plain.log" --quiet --max-connections-per-ip 4; then
    node "$ROOT/tests/serve/check_conn.mjs" plain "$url" 30 || fail "check_conn plain"
    stop_server "$tmp/plain.log"
fi
# bad values are refused with a message naming them
for bad in "--cors-origin https://a.example/" "--cors-origin ," "--max-connections-per-ip -1"; do
    # shellcheck disable=SC2086
    if "$BIN" serve --model "$MODEL" --port 0 $bad 2>"$tmp/bad.log" </dev/null; then
        fail "serve $bad was accepted"
    elif ! grep -qi "cors\|per-ip\|origin" "$tmp/bad.log"; then
        fail "serve $bad: the message does not name it: $(cat "$tmp/bad.log")"
    fi
done
[ $fails -eq 0 ] && echo "test_serve_conn: all checks passed"
exit $((fails > 0))
