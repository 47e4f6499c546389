#!/usr/bin/env bash
# Issue 14's speed lines on a quiet machine, the GPU host's 16-core CPU, in ONE device call (the development VM has
# 2 cores shared with other builds, which makes its timings noisy):
#   - flat turns: `bench chat` (time to first token of a 30-token turn after 200, 1000, 3000 tokens of history,
#     reused vs re-prefilled, same run) on the synthetic qwen3-0.6b and qwen3.5-0.8b, both Q8_0;
#   - continuous batching: `bench serve --clients 8` (8 concurrent greedy streams against one stream);
#   - the peer: llama.cpp's llama-server, built there from node-llama-cpp's source bundle (GGML_NATIVE=ON), on the
#     same GGUF with 8 parallel slots, measured by the same `bench serve --url` clients and prompts.
# All at THREADS threads (default 2, the development machine's core count), the peer with the same.
#   here    bench/scaling_device.sh --prepare     (build-device/: the binary without MPI, libutf8proc,
#                                                  libmicrohttpd, llama.cpp's source, the tokenizer)
#   device  run(command="bash bench/serve_device.sh", carry=["build-device"], timeout_s=560)
# Each result is one JSON line in $OUT/serve.jsonl as soon as it is measured; a step still to start once BUDGET_S
# (default 500 s) is spent is skipped and listed. Environment: THREADS, BUDGET_S, OUT, BUNDLE, WORK, PORT.
set -uo pipefail
cd "$(dirname "$0")/.."
BUNDLE=${BUNDLE:-build-device}
START=$(date +%s)
BUDGET_S=${BUDGET_S:-500}
T=${THREADS:-2}
OUT=${OUT:-$PWD/serve-out}
WORK=${WORK:-${TMPDIR:-/tmp}/td-serve-device}
PORT=${PORT:-18080}
CORES=$(nproc)
mkdir -p "$OUT" "$WORK"
LOG=$OUT/serve.jsonl
: >"$LOG"
BIN=$PWD/$BUNDLE/typedecide
export LD_LIBRARY_PATH=$PWD/$BUNDLE/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
say() { echo "serve [$(($(date +%s) - START)) s]: $*" >&2; }
left() { echo $((BUDGET_S - ($(date +%s) - START))); }
skipped=""
measure() { # STEP MIN_LEFT COMMAND...: one JSON line {"step", "seconds", "load", "command", "result"}
    local step=$1 need=$2
    shift 2
    if [ "$(left)" -lt "$need" ]; then
        skipped="$skipped${skipped:+, }$step"
        say "skip $step ($(left) s left)"
        return
    fi
    say "$step: $*"
    local t0 res ms cmd
    t0=$(date +%s%N)
    res=$(timeout "$(left)" "$@" 2>"$WORK/stderr" | tr '\n' ' ') || { say "failed: $(tail -3 "$WORK/stderr" | tr '\n' ' ')"; res=null; }
    [ -n "$res" ] || res=null
    ms=$((($(date +%s%N) - t0) / 1000000))
    cmd="$*"
    cmd=${cmd//\\/\\\\}
    printf '{"step": "%s", "threads": %s, "seconds": %s, "load": "%s", "command": "%s", "result": %s}\n' "$step" "$T" \
        "$((ms / 1000)).$(printf '%03d' $((ms % 1000)))" "$(cut -d' ' -f1-3 /proc/loadavg)" "${cmd//\"/\\\"}" "$res" >>"$LOG"
}

{
    echo "== lscpu"; lscpu 2>/dev/null
    echo "== manifest"; cat "$BUNDLE/manifest.txt" 2>/dev/null
    echo "== typedecide"; "$BIN" --version
    echo "== ldd"; ldd "$BIN"
} >"$OUT/machine.txt" 2>&1
"$BIN" --version >/dev/null 2>&1 || { say "our binary does not run here: $(ldd "$BIN" | grep 'not found' | tr '\n' ' ')"; exit 1; }
say "$CORES cores, $("$BIN" --version); budget $BUDGET_S s"

# llama-server first, with every core (measurements start after it is built), while the models are made
(
    set -e
    rm -rf "$WORK/src" && mkdir -p "$WORK/src" && tar -C "$WORK/src" -xJf "$BUNDLE/llama-src.tar.xz"
    cmake -S "$WORK/src/llama.cpp" -B "$WORK/build" -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DLLAMA_CURL=OFF \
        -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=ON \
        -DLLAMA_BUILD_APP=OFF -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF
    cmake --build "$WORK/build" --target llama-server -j"$CORES"
) >"$OUT/llama-build.log" 2>&1 &
build_pid=$!
TOK=$WORK/tokenizer.json
[ -s "$TOK" ] || xz -dc "$BUNDLE/tokenizer.json.xz" >"$TOK"
for preset in qwen3-0.6b qwen3.5-0.8b; do
    g=$WORK/$preset-q8_0.gguf
    [ -s "$g" ] && continue
    "$BIN" synth --preset "$preset" --tokenizer "$TOK" --out "$WORK/$preset" >/dev/null 2>&1 &&
        "$BIN" export --model "$WORK/$preset" --quant q8_0 -o "$g" >/dev/null 2>&1 || say "synth/export $preset failed"
    rm -rf "${WORK:?}/$preset"
done
wait "$build_pid" || say "llama-server did not build: $(tail -3 "$OUT/llama-build.log" | tr '\n' ' ')"
LS=$WORK/build/bin/llama-server
say "models ready; llama-server $([ -x "$LS" ] && echo built || echo missing)"

Q3=$WORK/qwen3-0.6b-q8_0.gguf
Q35=$WORK/qwen3.5-0.8b-q8_0.gguf
# continuous batching, ours, then the peer under the same clients
measure serve_ours 60 "$BIN" bench serve --model "$Q3" --clients 8 --tokens 64 --threads "$T"
if [ -x "$LS" ] && [ "$(left)" -ge 90 ]; then
    "$LS" -m "$Q3" --host 127.0.0.1 --port "$PORT" -t "$T" -tb "$T" -np 8 -c 8192 >"$OUT/llama-server.log" 2>&1 &
    ls_pid=$!
    for _ in $(seq 1 120); do
        python3 -c "import urllib.request,sys; sys.exit(0 if urllib.request.urlopen('http://127.0.0.1:$PORT/health', timeout=2).status == 200 else 1)" \
            2>/dev/null && break
        sleep 0.5
    done
    measure serve_llama_server 45 "$BIN" bench serve --model "$Q3" --url "http://127.0.0.1:$PORT" --clients 8 \
        --tokens 64 --name qwen3-0.6b
    kill "$ls_pid" 2>/dev/null
    wait "$ls_pid" 2>/dev/null
else
    skipped="$skipped${skipped:+, }serve_llama_server"
fi
# flat turns
measure chat_qwen3 60 "$BIN" bench chat --model "$Q3" --history 200,1000,3000 --turn 30 --threads "$T" --repeat 3
measure chat_qwen35 60 "$BIN" bench chat --model "$Q35" --history 200,1000,3000 --turn 30 --threads "$T" --repeat 3

python3 - "$LOG" "$OUT/serve.json" "$skipped" "$(($(date +%s) - START))" "$T" <<'PY'
import json, sys
log, out, skipped, secs, threads = sys.argv[1:6]
rows = {r["step"]: r for r in (json.loads(l) for l in open(log) if l.strip())}
res = lambda s: (rows.get(s) or {}).get("result") or {}
summary = {}
o, l = res("serve_ours"), res("serve_llama_server")
if o:
    summary["ours"] = {"one_stream_tokens_per_s": o["single"]["tokens_per_s"],
                       "eight_streams_tokens_per_s": o["concurrent"]["tokens_per_s"], "speedup": o["speedup"],
                       "replies_mismatched": o["replies_mismatched"]}
if l:
    summary["llama_server"] = {"one_stream_tokens_per_s": l["single"]["tokens_per_s"],
                               "eight_streams_tokens_per_s": l["concurrent"]["tokens_per_s"], "speedup": l["speedup"],
                               "replies_mismatched": l["replies_mismatched"]}
if o and l:
    summary["ours_over_llama_server_8_streams"] = round(o["concurrent"]["tokens_per_s"] / l["concurrent"]["tokens_per_s"], 3)
for s in ("chat_qwen3", "chat_qwen35"):
    c = res(s)
    if c:
        summary[s] = {k: c.get(k) for k in ("slope_ms_per_history_token", "reprefill_slope_ms_per_token")}
json.dump({"what": "issue 14's speed lines on the GPU host's CPU, %s threads (bench/serve_device.sh)" % threads,
           "seconds": int(secs), "skipped": skipped, "summary": summary, "runs": list(rows.values())},
          open(out, "w"), indent=1)
print(json.dumps(summary, indent=1))
PY
say "done${skipped:+; skipped: $skipped}"
