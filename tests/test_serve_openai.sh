#!/usr/bin/env bash
# OpenAI semantics of `typedecide serve` (issue 46, items 1-4) on demo-qwen3, on a loopback port the server picks:
#  - tests/serve/check_openai.mjs over raw HTTP: the usage chunk only with stream_options.include_usage, a fresh
#    reported seed per request (replayable), n choices = the request alone with seed + k (streamed and plain),
#    logit_bias, refused parameters (response_format, best_of, suffix, unknown members) named in their 400s,
#    GET /v1/models/{id}, /v1/decide's refusals (empty question, one option, repeated option ids);
#  - tests/node/openai_client.mjs: the official openai npm client (pinned): models.list / models.retrieve, chat plain
#    and streamed (the quickstart loop and its unguarded form), n = 4, logit_bias, completions with echo and logprobs;
#  - the server stops cleanly on SIGTERM (under ASan: no leak report).
set -uo pipefail
ROOT=${TD_ROOT:-$(cd "$(dirname "$0")/.." && pwd)}
. "$ROOT/tests/serve/lib.sh"
BIN=${TD_BIN:-$ROOT/build/typedecide}
MODEL=$ROOT/models/demo-qwen3
tmp=$(mktemp -d)
pid=
trap '[ -n "$pid" ] && kill -9 "$pid" 2>/dev/null; rm -rf "$tmp"' EXIT
rc=0
KEY=sekrit-$$
"$BIN" serve --model "$MODEL" --port 0 --threads 2 --parallel 4 --api-key "$KEY" --quiet 2>"$tmp/log" &
pid=$!
url=$(serve_url "$tmp/log" "$pid")
[ -n "$url" ] || { echo "FAIL: the server did not start: $(tail -3 "$tmp/log")" >&2; exit 1; }
node "$ROOT/tests/serve/check_openai.mjs" "$url" "$(basename "$MODEL")" "$KEY" || { echo "FAIL: check_openai" >&2; rc=1; }
if [ -d "$ROOT/tests/node/node_modules/openai" ]; then
    node "$ROOT/tests/node/openai_client.mjs" "$url" "$KEY" "$(basename "$MODEL")" >"$tmp/client.out" ||
        { echo "FAIL: openai client" >&2; rc=1; }
    tail -1 "$tmp/client.out"
else
    echo "FAIL: tests/node/node_modules/openai is missing: run scripts/setup.sh" >&2
    rc=1
fi
kill -TERM "$pid"
wait "$pid"
src=$?
pid=
if [ $src -ne 0 ]; then
    echo "FAIL: serve exited $src after SIGTERM: $(tail -5 "$tmp/log")" >&2
    rc=1
fi
[ $rc -eq 0 ] && echo "test_serve_openai: all checks passed"
exit $rc
