#!/usr/bin/env bash
# /v1/decide batched across clients (issue 46, item 5): tests/serve/check_decide_batch.mjs against `typedecide serve`
# on demo-qwen3, and on the hybrid demo-qwen35 (DeltaNet states forked from kept heads) outside the sanitizer build:
# concurrent requests = `typedecide decide` alone byte for byte, passes shared, a failing request alone in its 400,
# clients leaving while waiting; then the server stops cleanly on SIGTERM (under ASan: no leak report).
set -uo pipefail
ROOT=${TD_ROOT:-$(cd "$(dirname "$0")/.." && pwd)}
. "$ROOT/tests/serve/lib.sh"
BIN=${TD_BIN:-$ROOT/build/typedecide}
tmp=$(mktemp -d)
pid=
trap '[ -n "$pid" ] && kill -9 "$pid" 2>/dev/null; rm -rf "$tmp"' EXIT
export TD_ROOT=$ROOT
rc=0
models=("$ROOT/models/demo-qwen3")
[ -n "${TD_SANITIZED:-}" ] || models+=("$ROOT/models/demo-qwen35")
[ -n "${TD_DECIDE_BATCH_MODEL:-}" ] && models=("$TD_DECIDE_BATCH_MODEL")
for MODEL in "${models[@]}"; do
    "$BIN" serve --model "$MODEL" --port 0 --threads 2 --quiet 2>"$tmp/log" &
    pid=$!
    url=$(serve_url "$tmp/log" "$pid")
    [ -n "$url" ] || { echo "FAIL: the server did not start: $(tail -3 "$tmp/log")" >&2; exit 1; }
    node "$ROOT/tests/serve/check_decide_batch.mjs" "$url" "$BIN" "$MODEL" "$tmp" || rc=1
    kill -TERM "$pid"
    wait "$pid"
    src=$?
    pid=
    if [ $src -ne 0 ]; then
        echo "FAIL: serve exited $src after SIGTERM: $(tail -5 "$tmp/log")" >&2
        rc=1
    fi
done
[ $rc -eq 0 ] && echo "test_decide_batch: ok"
exit $rc
