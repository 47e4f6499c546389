#!/usr/bin/env bash
# Slow clients against `typedecide serve` on loopback (issue 46's acceptance line): 64 clients sending request
# headers one byte a second (each from its own 127.0.0.x address; a client that is cut connects again) plus 8 normal
# clients looping over chat (16 greedy tokens), /v1/decide (the demo ticket) and /health, and a /health prober at
# 10 Hz, for 60 s (bench/slow_clients.mjs). First a 10 s phase with the slow clients alone (the server's CPU time and
# threads while it holds them). Recorded: every normal request answered (errors), latency percentiles (/health p99),
# the slow clients' cuts (408 or not, seconds from connect to cut: the deadline is --timeout), the server's RSS before
# and after, its peak thread count, and CPU seconds per phase. Last, 12 streamed replies at --parallel 4 (8 of them
# waiting for their turn): the CPU of MHD's pool threads and of the work threads beside the engine's.
# Usage: bash bench/slow_clients.sh [OUT.json]   (default bench/results/slow-clients-<kind>.json, kind from bench/kind.sh)
# Environment: BIN (default build/typedecide), MODEL (default models/demo-qwen3), DURATION (60), SLOW (64), NORMAL (8),
# TIMEOUT (the server's --timeout, default 30), THREADS (1), PORT (18470).
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/kind.sh
BIN=${BIN:-$PWD/build/typedecide}
MODEL=${MODEL:-models/demo-qwen3}
OUTF=${1:-bench/results/slow-clients-$kind.json}
DURATION=${DURATION:-60}
SLOW=${SLOW:-64}
NORMAL=${NORMAL:-8}
TIMEOUT=${TIMEOUT:-30}
THREADS=${THREADS:-1}
PORT=${PORT:-18470}
tmp=$(mktemp -d)
"$BIN" serve --model "$MODEL" --port "$PORT" --threads "$THREADS" --timeout "$TIMEOUT" --quiet 2>"$tmp/serve.log" &
srv=$!
trap 'kill "$srv" 2>/dev/null; rm -rf "$tmp"' EXIT
for _ in $(seq 1 300); do
    curl -sf "http://127.0.0.1:$PORT/health" >/dev/null 2>&1 && break
    sleep 0.1
done
rss() { awk '/^VmRSS/ {printf "%.1f", $2 / 1024}' "/proc/$srv/status"; }
threads() { awk '/^Threads/ {print $2}' "/proc/$srv/status"; }
cpu_s() { awk -v hz="$(getconf CLK_TCK)" '{printf "%.2f", ($14 + $15) / hz}' "/proc/$srv/stat"; }
# sample RSS and threads every 0.5 s while a phase runs: the peak of each
sample() { while kill -0 "$srv" 2>/dev/null; do echo "$(rss) $(threads)" >>"$tmp/samples"; sleep 0.5; done; }
rss_before=$(rss)
threads_before=$(threads)
sample &
sampler=$!
url=http://127.0.0.1:$PORT
cpu0=$(cpu_s)
idle=$(node bench/slow_clients.mjs "$url" 10 "$SLOW" 0 "$TIMEOUT" models/demo/ticket.txt models/demo/criteria.jsonl)
cpu1=$(cpu_s)
threads_idle_max=$(awk 'BEGIN {m = 0} $2 > m {m = $2} END {print m}' "$tmp/samples")
: >"$tmp/samples"
load=$(node bench/slow_clients.mjs "$url" "$DURATION" "$SLOW" "$NORMAL" "$TIMEOUT" models/demo/ticket.txt models/demo/criteria.jsonl)
cpu2=$(cpu_s)
kill "$sampler" 2>/dev/null || true
rss_after=$(rss)
rss_max=$(awk 'BEGIN {m = 0} $1 > m {m = $1} END {print m}' "$tmp/samples")
threads_max=$(awk 'BEGIN {m = 0} $2 > m {m = $2} END {print m}' "$tmp/samples")
# streams that wait: 12 streamed replies of 512 tokens at --parallel 4 (8 wait for their turn); CPU seconds per kind of
# thread, sampled from /proc every 0.2 s: MHD's pool (MHD-worker), the work threads (td-work, one per request: the
# endpoint, then the stream's pump, which waits on the job) and the rest (the engine, td-deadlines, main)
cat /proc/"$srv"/task/*/stat >"$tmp/tcpu0"
touch "$tmp/tsampling"
( while [ -e "$tmp/tsampling" ]; do
    cat /proc/"$srv"/task/*/stat >>"$tmp/tcpu" 2>/dev/null || true
    sleep 0.2
done ) &
tsampler=$!
streams=$(node bench/slow_clients.mjs streams "$url" 12 512)
rm -f "$tmp/tsampling"
wait "$tsampler" 2>/dev/null || true
hz=$(getconf CLK_TCK)
stream_cpu=$(awk -v hz="$hz" '{ i = index($0, ") "); split(substr($0, i + 2), f, " ")
        if (NR == FNR) { base[$1] = f[12] + f[13]; next }
        c[$1] = substr($0, index($0, "(") + 1, i - index($0, "(") - 1); u[$1] = f[12] + f[13] - base[$1] }
    END {for (t in u) { k = c[t] == "MHD-worker" ? "pool" : c[t] == "td-work" ? "work" : "resident"; s[k] += u[t] / hz; n[k]++ }
         printf "{\"pool_s\": %.2f, \"work_threads_s\": %.2f, \"work_threads\": %d, \"engine_and_others_s\": %.2f}",
                s["pool"], s["work"], n["work"], s["resident"]}' "$tmp/tcpu0" "$tmp/tcpu")
flags=$(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -E '^(avx2|fma|f16c|avx512f|avx512bw|avx512vl|avx512_vnni|avx512_bf16|amx_tile|amx_bf16|amx_int8)$' | tr '\n' ' ' | sed 's/ $//')
jq -n --arg cmd "bash bench/slow_clients.sh $*" --arg kind "$kind" --arg cpu "$(grep -m1 '^model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')" \
    --arg flags "$flags" --argjson cores "$(nproc)" --arg load "$(cut -d' ' -f1-3 /proc/loadavg)" \
    --arg model "$MODEL" --argjson threads "$THREADS" --argjson timeout "$TIMEOUT" \
    --arg serve "$BIN serve --model $MODEL --port $PORT --threads $THREADS --timeout $TIMEOUT --quiet" \
    --argjson rb "$rss_before" --argjson ra "$rss_after" --argjson rm "$rss_max" \
    --argjson tb "$threads_before" --argjson ti "$threads_idle_max" --argjson tm "$threads_max" \
    --argjson c0 "$cpu0" --argjson c1 "$cpu1" --argjson c2 "$cpu2" \
    --argjson idle "$idle" --argjson main "$load" --argjson streams "$streams" --argjson scpu "$stream_cpu" \
    '{bench: "slow_clients", command: $cmd, server: $serve, machine: $kind, cpu: $cpu, cpu_flags: $flags, cores: $cores,
      load_avg_after: $load, model: $model, threads: $threads, timeout_s: $timeout,
      rss_mb: {before: $rb, after: $ra, max: $rm}, server_threads: {before: $tb, slow_only_max: $ti, load_max: $tm},
      slow_only: ($idle + {server_cpu_s: (($c1 - $c0) * 100 | round / 100)}),
      load: ($main + {server_cpu_s: (($c2 - $c1) * 100 | round / 100)}),
      streams_wait: ($streams + {parallel: 4, tokens_each: 512, cpu: $scpu})}' >"$OUTF"
cat "$OUTF"
