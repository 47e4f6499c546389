#!/usr/bin/env bash
# typedecide serve end to end, on loopback ports the server picks itself (--port 0):
#  - tests/serve/check_api.mjs: every endpoint (health without the key, models, the page, tokenize against
#    `typedecide tokenize`, detokenize, /v1/decide against `typedecide decide` bit for bit and its evidence cache),
#    and every hostile case with its status, param and message: missing/wrong API key, unknown path and method,
#    truncated/invalid/non-object JSON, invalid UTF-8, wrong types, negative or too large max_tokens, unknown model,
#    evidence longer than the context, an oversized body (Content-Length and chunked), a client trickling its body
#    (cut at the deadline), a client stalled in its headers (closed at the idle timeout);
#  - tests/node/openai_client.mjs: the official openai npm client (models, chat, stream, completions with logprobs and
#    echo, error types);
#  - tests/serve/check_gen.mjs (demo-qwen3, and demo-qwen35 outside ASan): greedy = `typedecide generate` token for
#    token, streamed = plain text, concurrent replies = single ones, echo logprobs = log-softmax of `typedecide
#    logits` (1e-5), enable_thinking false, prompts past the context, a client leaving mid-stream frees its slot;
#  - tests/node/page_test.mjs: headless Chromium loads the page, fills its editors with the example evidence and
#    criteria, and the rendered answers and bars equal `typedecide decide`; the chat tab streams a reply
#    (bench/results/serve-page.png is a screenshot it took);
#  - tests/serve/check_queue.mjs: the bounded queue (503 + Retry-After) on a server with --parallel 1 --queue 0;
#  - bench serve runs (one stream, then concurrent streams whose replies equal the single ones);
#  - the server stops cleanly on SIGTERM (exit 0, and under ASan no leak report).
# The checks are Node (no Python on the test machine): tests/serve/*.mjs use Node's built-ins only.
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
export TD_ROOT=$ROOT

# start_server LOG ARGS...: starts `typedecide serve --port 0 ARGS` in the background; sets $url (or fails)
start_server() {
    local log=$1
    shift
    "$BIN" serve --model "${MODEL}" --port 0 --threads 1 "$@" 2>"$log" &
    pids+=($!)
    server_pid=$!
    url=$(serve_url "$log" "$server_pid") && return 0
    fail "the server did not start: $(tail -3 "$log")"
    return 1
}

# stop_server: SIGTERM, then the exit status must be 0
stop_server() {
    kill -TERM "$server_pid"
    wait "$server_pid"
    local rc=$?
    [ $rc -eq 0 ] || fail "serve exited $rc after SIGTERM: $(tail -5 "$1")"
}

KEY=sekrit-$$
if start_server "$tmp/a.log" --api-key "$KEY" --timeout 3; then
    SERVE_TIMEOUT=3 node "$ROOT/tests/serve/check_api.mjs" "$url" "$KEY" "$BIN" "$MODEL" "$tmp" || fail "check_api"
    # a real client: the official openai npm package (pinned in tests/node/package-lock.json)
    if [ -d "$ROOT/tests/node/node_modules/openai" ]; then
        node "$ROOT/tests/node/openai_client.mjs" "$url" "$KEY" "$(basename "$MODEL")" || fail "openai client"
    else
        fail "tests/node/node_modules/openai is missing: run scripts/setup.sh"
    fi
    stop_server "$tmp/a.log"
fi
# the web page in a real browser: headless Chromium loads /, decides the example, streams a chat reply
if command -v chromium >/dev/null 2>&1; then
    if start_server "$tmp/p.log" --quiet; then
        "$BIN" decide --json --quiet --threads 1 --model "$MODEL" --evidence "$ROOT/models/demo/ticket.txt" \
            --criteria "$ROOT/models/demo/criteria.jsonl" >"$tmp/decide.jsonl" || fail "decide for the page test"
        node --experimental-websocket --no-warnings "$ROOT/tests/node/page_test.mjs" "$url/" "$(command -v chromium)" \
            "$ROOT/models/demo/ticket.txt" "$ROOT/models/demo/criteria.jsonl" "$tmp/decide.jsonl" "$tmp/page.png" ||
            fail "the page in Chromium"
        stop_server "$tmp/p.log"
    fi
else
    fail "chromium is missing: run scripts/setup.sh (Debian's chromium drives the page test)"
fi
# generation: greedy = typedecide generate, stream = plain, batching invariance, echo logprobs, limits, disconnects;
# on the hybrid Qwen3.5 demo too (DeltaNet snapshots) outside the sanitizer build
models=("$MODEL")
[ -n "${TD_SANITIZED:-}" ] || models+=("$ROOT/models/demo-qwen35")
for m in "${models[@]}"; do
    if MODEL=$m start_server "$tmp/g.log" --quiet --parallel 4; then
        node "$ROOT/tests/serve/check_gen.mjs" "$url" "$BIN" "$m" "$tmp" || fail "check_gen on $(basename "$m")"
        stop_server "$tmp/g.log"
    fi
done
if start_server "$tmp/b.log" --parallel 1 --queue 0 --quiet; then
    node "$ROOT/tests/serve/check_queue.mjs" "$url" || fail "check_queue"
    stop_server "$tmp/b.log"
fi
# bench serve: one stream vs concurrent streams in one run, every concurrent reply equal to its single one
out=$("$BIN" bench serve --model "$MODEL" --clients 3 --tokens 6 --threads 1 2>"$tmp/bench.err") || fail "bench serve: $(tail -3 "$tmp/bench.err")"
printf '%s' "$out" | node -e 'const j = JSON.parse(require("fs").readFileSync(0, "utf8"));
    if (!(j.replies_mismatched === 0 && j.concurrent.tokens === 18 && j.single.tokens === 18)) {
        console.error("AssertionError:", JSON.stringify(j)); process.exit(1); }' ||
    fail "bench serve: $out"
[ "$fails" -eq 0 ] && echo "test_serve: all checks passed"
exit $((fails > 0))
