#!/usr/bin/env bash
# The web page's chat past the context (tests/node/page_chat_test.mjs in headless Chromium): 30 turns at the page's
# default settings against `typedecide serve --model models/demo-qwen3` (its 2048-position context is outgrown by turn
# 8), every turn answered, the oldest turns dropped with a note, and two failed turns (a wrong API key, a refused
# temperature) kept out of the history with their text back in the input box. Under the sanitizers: a 512-position
# context, max tokens 64 and 12 turns, the same drops in less time. A test of its own (not in test_serve.sh): it
# takes ~40 s. TD_CHAT_MODEL and TD_CHAT_TURNS change the model and the turns (tests/test_serve_chat_qwen35.sh).
# bench/results/serve-chat-turn1.png and serve-chat-turn30.png are screenshots it took (TD_CHAT_SHOTS=DIR keeps them).
set -uo pipefail
ROOT=${TD_ROOT:-$(cd "$(dirname "$0")/.." && pwd)}
. "$ROOT/tests/serve/lib.sh"
BIN=${TD_BIN:-$ROOT/build/typedecide}
MODEL=${TD_CHAT_MODEL:-$ROOT/models/demo-qwen3}
tmp=$(mktemp -d)
server_pid=
trap '[ -n "$server_pid" ] && kill -9 "$server_pid" 2>/dev/null; rm -rf "$tmp"' EXIT
command -v chromium >/dev/null 2>&1 || { echo "FAIL: chromium is missing: run scripts/setup.sh" >&2; exit 1; }
shots=${TD_CHAT_SHOTS:-$tmp}
turns=${TD_CHAT_TURNS:-30} maxtok= args=()
if [ -n "${TD_SANITIZED:-}" ]; then turns=12 maxtok=64 args=(--ctx 512); fi
KEY=chat-$$
fails=0
# run_chat MODEL TURNS SHOT_PREFIX: a server on MODEL, the page driven for TURNS turns, the server stopped (exit 0)
run_chat() {
    local model=$1 n=$2 prefix=$3 url=
    "$BIN" serve --model "$model" --port 0 --threads 1 --quiet --api-key "$KEY" "${args[@]}" 2>"$tmp/s.log" &
    server_pid=$!
    url=$(serve_url "$tmp/s.log" "$server_pid")
    [ -n "$url" ] || { echo "FAIL: the server did not start on $model: $(tail -3 "$tmp/s.log")" >&2; fails=1; return; }
    node --experimental-websocket --no-warnings "$ROOT/tests/node/page_chat_test.mjs" "$url/" "$(command -v chromium)" \
        "$KEY" "$n" "$prefix-turn1.png" "$prefix-turn$n.png" $maxtok || { echo "FAIL: the page's chat on $model" >&2; fails=1; }
    kill -TERM "$server_pid"
    wait "$server_pid"
    local rc=$?
    server_pid=
    [ $rc -eq 0 ] || { echo "FAIL: serve exited $rc after SIGTERM: $(tail -5 "$tmp/s.log")" >&2; fails=1; }
}
run_chat "$MODEL" "$turns" "$shots/serve-chat"
[ "$fails" -eq 0 ] && echo "test_serve_chat: all checks passed"
exit $fails
