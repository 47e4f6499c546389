#!/usr/bin/env bash
# Thread scaling, typedecide against llama.cpp, on a machine with more cores than this one (the GPU host: 16
# cores), in ONE call of at most 8 minutes. Two halves of one script:
#
#   here    bench/scaling_device.sh --prepare
#           fills build-device/ (git-ignored, ~13 MB): a release binary built without MPI (build-nompi/), the libraries
#           the device lacks (libutf8proc, libmicrohttpd; it has glibc 2.39, jansson, PCRE2 and GnuTLS), llama.cpp's
#           source as an xz git archive of node-llama-cpp's bundle (ggml, src, include, common, cmake, vendor, tools,
#           scripts/ui-assets.cmake, an empty app/CMakeLists.txt), the Qwen3 tokenizer, and a manifest. The same
#           bundle serves bench/peer_device.sh and bench/serve_device.sh.
#   device  run(command="bash bench/scaling_device.sh", carry=["build-device"], timeout_s=480)
#           builds llama-bench (Release, GGML_NATIVE=ON) while our binary makes the synthetic qwen3-0.6b and its
#           Q8_0 GGUF, then measures, the two engines alternating at each thread count:
#             prefill 512 tokens and decode 64 tokens at 1, 2, 4, 8, 16 threads (llama-bench -p 512 -n 64);
#             144 criteria of 45 tokens over one 256-token evidence (bench decide --batch) at 2 and 16 threads,
#             then llama-bench -p 45 -n 0 -d 256 (one criterion), then bench decide --serial;
#             and, if time is left, every kernel set this CPU runs at 16 threads (TD_KERNELS).
#           Each result is one JSON line in $OUT/scaling.jsonl as soon as it is measured, with the load average;
#           $OUT/scaling.json sums them up (tokens/s per engine and thread count, speed-ups over 1 thread,
#           ours / llama.cpp) and records the CPU (lscpu, flags), the kernels our binary chose and the pool's jobs
#           per token. A step still to start once BUDGET_S (default 420 s) is spent is skipped and listed, so that
#           whatever was measured comes back inside the call's limit.
#
# Experiments: PATCH=bench/X.patch at --prepare builds the binary from a scratch worktree with that patch applied
# (nothing of it lands in the library); on the device DECODE_ENVS="name:VAR=VALUE ..." measures decode once per
# variant (the binary run with that environment) instead of once, STEPS (default "prefill decode decide kernels")
# leaves steps out, ROUNDS (default 1) repeats the thread-count loop.
#
# Locally (to test the logic at 1-2 threads): THREADS="1 2" DECIDE_THREADS=2 CRITERIA=12 LLAMA_BENCH=<built one>
# OUT=/tmp/scaling bash bench/scaling_device.sh. Environment: THREADS, DECIDE_THREADS, CRITERIA (144), BUDGET_S,
# LLAMA_BENCH (skip the build), OUT, BUNDLE (build-device), WORK (scratch, default ${TMPDIR:-/tmp}/td-scaling).
set -uo pipefail
cd "$(dirname "$0")/.."
. bench/bundle.sh
BUNDLE=${BUNDLE:-build-device}

if [ "${1:-}" = "--prepare" ]; then
    set -e
    # a release build without MPI: the device has no Open MPI, and the tool links it when it is found
    SRC=.
    if [ -n "${PATCH:-}" ]; then
        SRC=${TMPDIR:-/tmp}/td-scaling-patched
        rm -rf "$SRC" && git worktree prune && git worktree add -q --detach "$SRC" HEAD
        trap 'git worktree remove --force "$SRC"' EXIT
        git -C "$SRC" apply "$PWD/$PATCH"
    fi
    cmake -S "$SRC" -B "$SRC/build-nompi" -DCMAKE_BUILD_TYPE=Release -DCMAKE_DISABLE_FIND_PACKAGE_MPI=ON >/dev/null
    cmake --build "$SRC/build-nompi" --target typedecide_cli -j"$(nproc)" >/dev/null
    rm -rf "$BUNDLE" && mkdir -p "$BUNDLE/lib"
    cp "$SRC/build-nompi/typedecide" "$BUNDLE/"
    bundle_libs "$SRC/build-nompi/typedecide" "$BUNDLE/lib"
    bundle_llama_src "$BUNDLE"
    bundle_tokenizer "$BUNDLE"
    cat >"$BUNDLE/manifest.txt" <<EOF
typedecide commit $(git rev-parse HEAD)$(git diff --quiet HEAD -- src cli include || echo " (with uncommitted changes)")${PATCH:+ with $PATCH applied}
built on $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), $(ldd --version | head -1)
$(cat "$BUNDLE/llama.txt")
EOF
    du -sh "$BUNDLE" "$BUNDLE"/* >&2
    echo "scaling_device: $BUNDLE ready; on the device: run(command=\"bash bench/scaling_device.sh\", carry=[\"$BUNDLE\"], timeout_s=480)" >&2
    exit 0
fi

START=$(date +%s)
BUDGET_S=${BUDGET_S:-420}
CORES=$(nproc)
THREADS=${THREADS:-1 2 4 8 16}
DECIDE_THREADS=${DECIDE_THREADS:-2 16}
CRITERIA=${CRITERIA:-144}
STEPS=${STEPS:-prefill decode decide kernels}
ROUNDS=${ROUNDS:-1}
DECODE_ENVS=${DECODE_ENVS:-}
OUT=${OUT:-$PWD/scaling-out}
WORK=${WORK:-${TMPDIR:-/tmp}/td-scaling}
mkdir -p "$OUT" "$WORK"
LOG=$OUT/scaling.jsonl
: >"$LOG"
BIN=$PWD/$BUNDLE/typedecide
export LD_LIBRARY_PATH=$PWD/$BUNDLE/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
say() { echo "scaling [$(($(date +%s) - START)) s]: $*" >&2; }
left() { echo $((BUDGET_S - ($(date +%s) - START))); }
skipped=""
# record STEP ENGINE THREADS SECONDS COMMAND RESULT-JSON: one line of the log
record() {
    local cmd=${5//\\/\\\\}
    printf '{"step": "%s", "engine": "%s", "threads": %s, "seconds": %s, "load": "%s", "command": "%s", "result": %s}\n' \
        "$1" "$2" "$3" "$4" "$(cut -d' ' -f1-3 /proc/loadavg)" "${cmd//\"/\\\"}" "${6:-null}" >>"$LOG"
}
# measure STEP ENGINE THREADS MIN_LEFT COMMAND...: runs the command if at least MIN_LEFT seconds of budget remain
# (with a time limit of what is left), records its JSON output; skips it otherwise.
measure() {
    local step=$1 engine=$2 t=$3 need=$4
    shift 4
    if [ "$(left)" -lt "$need" ]; then
        skipped="$skipped${skipped:+, }$step/$engine/$t"
        say "skip $step $engine t=$t ($(left) s left)"
        return
    fi
    say "$step $engine t=$t: $*"
    local t0 res ms
    t0=$(date +%s%N)
    res=$(timeout "$(left)" "$@" 2>"$WORK/stderr" | tr '\n' ' ') || { say "failed: $(tail -2 "$WORK/stderr" | tr '\n' ' ')"; res=null; }
    [ -n "$res" ] || res=null
    ms=$((($(date +%s%N) - t0) / 1000000))
    record "$step" "$engine" "$t" "$((ms / 1000)).$(printf '%03d' $((ms % 1000)))" "$*" "$res"
}

# the machine
{
    echo "== lscpu"; lscpu 2>/dev/null
    echo "== flags"; grep -m1 flags /proc/cpuinfo
    echo "== manifest"; cat "$BUNDLE/manifest.txt" 2>/dev/null
    echo "== typedecide"; "$BIN" --version
} >"$OUT/machine.txt" 2>&1
KERNELS=$("$BIN" --version 2>/dev/null | sed -n 's/.*kernels \([a-z0-9]*\).*/\1/p')
say "$CORES cores, kernels ${KERNELS:-?}; budget $BUDGET_S s"
[ -n "$KERNELS" ] || { say "our binary does not run here: $("$BIN" --version 2>&1 | head -2)"; exit 1; }

# llama-bench, built in the background while our binary makes the model
LLAMA=${LLAMA_BENCH:-}
if [ -z "$LLAMA" ]; then
    LLAMA=$WORK/llama.cpp/build/bin/llama-bench
    if [ ! -x "$LLAMA" ]; then
        bundle_llama_build "$BUNDLE" "$WORK" "$CORES" >"$OUT/llama-build.log" 2>&1 &
        build_pid=$!
    fi
fi
TOK=$WORK/tokenizer.json
[ -s "$TOK" ] || xz -dc "$BUNDLE/tokenizer.json.xz" >"$TOK" 2>/dev/null ||
    python3 -c 'import lzma,sys; sys.stdout.buffer.write(lzma.open(sys.argv[1]).read())' "$BUNDLE/tokenizer.json.xz" >"$TOK"
MODEL=$WORK/synth-qwen3-0.6b
GGUF=$WORK/qwen3-0.6b-q8_0.gguf
t0=$(date +%s)
[ -f "$MODEL/model.safetensors" ] || "$BIN" synth --preset qwen3-0.6b --tokenizer "$TOK" --out "$MODEL" >/dev/null 2>&1
[ -s "$GGUF" ] || "$BIN" export --model "$MODEL" --quant q8_0 -o "$GGUF" >/dev/null 2>&1
say "model ready in $(($(date +%s) - t0)) s: $(stat -L -c %s "$GGUF" 2>/dev/null) bytes"
[ -s "$GGUF" ] || { say "no GGUF: synth or export failed"; exit 1; }
if [ -n "${build_pid:-}" ]; then
    wait "$build_pid" || say "llama-bench build failed: $(tail -3 "$OUT/llama-build.log" | tr '\n' ' ')"
    say "llama-bench built"
fi
[ -x "$LLAMA" ] || { say "no llama-bench: ours alone"; LLAMA=; }

step_on() { [[ " $STEPS " == *" $1 "* ]]; }
# prefill and decode at each thread count, the engines alternating
for round in $(seq "$ROUNDS"); do
for t in $THREADS; do
    [ "$t" -le "$CORES" ] || { skipped="$skipped${skipped:+, }t=$t (only $CORES cores)"; continue; }
    step_on prefill && measure prefill ours "$t" 20 "$BIN" bench prefill --model "$GGUF" --tokens 512 --threads "$t" --repeat 2
    [ -n "$LLAMA" ] && measure prefill_decode llama.cpp "$t" 30 "$LLAMA" -m "$GGUF" -t "$t" -p 512 -n 64 -r 2 -o json
    step_on decode && [ -z "$DECODE_ENVS" ] &&
        measure decode ours "$t" 15 "$BIN" bench decode --model "$GGUF" --tokens 64 --threads "$t" --repeat 2
    for v in $DECODE_ENVS; do
        measure "decode_${v%%:*}" ours "$t" 15 env "${v#*:}" "$BIN" bench decode --model "$GGUF" --tokens 64 \
            --threads "$t" --repeat 2
    done
done
done
step_on decide || DECIDE_THREADS=
# criteria over one evidence: batched first (the production mode), then llama.cpp's one criterion, then serial
for t in $DECIDE_THREADS; do
    [ "$t" -le "$CORES" ] || continue
    measure decide_batch ours "$t" 40 "$BIN" bench decide --model "$GGUF" --prefix 256 --criteria "$CRITERIA" \
        --suffix 45 --options 4 --batch --threads "$t" --repeat 1
done
for t in $DECIDE_THREADS; do
    [ "$t" -le "$CORES" ] || continue
    [ -n "$LLAMA" ] && measure one_criterion llama.cpp "$t" 15 "$LLAMA" -m "$GGUF" -t "$t" -p 45 -n 0 -d 256 -r 3 -o json
done
for t in $DECIDE_THREADS; do
    [ "$t" -le "$CORES" ] || continue
    measure decide_serial ours "$t" 40 "$BIN" bench decide --model "$GGUF" --prefix 256 --criteria "$CRITERIA" \
        --suffix 45 --options 4 --serial --threads "$t" --repeat 1
done
# the kernel sets side by side at the most threads
tmax=$(for t in $THREADS; do [ "$t" -le "$CORES" ] && echo "$t"; done | tail -1)
KSETS="amx avx512r16 avx512bf16 avx512vnni avx2"
step_on kernels || KSETS=
for k in $KSETS; do
    [ "$k" = "$KERNELS" ] && continue
    TD_KERNELS=$k "$BIN" --version 2>/dev/null | grep -q "kernels $k" || continue
    measure "prefill_kernels_$k" ours "$tmax" 15 env TD_KERNELS=$k "$BIN" bench prefill --model "$GGUF" --tokens 512 \
        --threads "$tmax" --repeat 2
    measure "decode_kernels_$k" ours "$tmax" 10 env TD_KERNELS=$k "$BIN" bench decode --model "$GGUF" --tokens 64 \
        --threads "$tmax" --repeat 2
done

# the summary
python3 - "$LOG" "$OUT/scaling.json" "$CORES" "$KERNELS" "$skipped" "$(($(date +%s) - START))" <<'PY' || say "no python3: the log alone"
import json, sys
log, out, cores, kernels, skipped, secs = sys.argv[1:7]
rows = [json.loads(l) for l in open(log) if l.strip()]
table = {}
for r in rows:
    res, t = r["result"], str(r["threads"])
    if res is None:
        continue
    if r["engine"] == "ours" and r["step"] in ("prefill", "decode"):
        e = table.setdefault(r["step"], {}).setdefault(t, {})
        e.setdefault("ours_all", []).append(res["tokens_per_s"])
        e["ours_pool_jobs"] = res.get("pool_jobs_per_pass", res.get("pool_jobs_per_token"))
    elif r["step"].startswith("decode_") and "_kernels_" not in r["step"]:  # DECODE_ENVS variants
        table.setdefault("decode_variants", {}).setdefault(r["step"][7:], {}).setdefault(t, []).append(
            res["tokens_per_s"])
    elif r["step"] == "prefill_decode":
        for x in res:
            step = "prefill" if x["n_gen"] == 0 else "decode"
            table.setdefault(step, {}).setdefault(t, {}).setdefault("llama_cpp_all", []).append(round(x["avg_ts"], 3))
    elif r["step"] == "one_criterion":
        table.setdefault("one_criterion_ms", {}).setdefault(t, {})["llama_cpp_p45_d256"] = round(res[0]["avg_ns"] / 1e6, 3)
    elif r["step"].startswith("decide_"):
        e = table.setdefault(r["step"], {}).setdefault(t, {})
        e.update({k: res[k] for k in ("criteria_per_s", "ms_per_criterion", "suffix_ms_per_criterion", "prefix_ms")})
    elif "_kernels_" in r["step"]:
        table.setdefault("kernel_sets", {}).setdefault(r["step"], {})[t] = res["tokens_per_s"]
def median(v):
    v = sorted(v)
    return v[len(v) // 2] if len(v) % 2 else round((v[len(v) // 2 - 1] + v[len(v) // 2]) / 2, 3)
for step in ("prefill", "decode"):
    for e in table.get(step, {}).values():  # one round: the value; several: the median, every value kept
        for eng in ("ours", "llama_cpp"):
            v = e.pop(eng + "_all", None)
            if v:
                e[eng] = median(v)
                if len(v) > 1:
                    e[eng + "_all"] = v
for name, per_t in table.get("decode_variants", {}).items():
    for t, v in list(per_t.items()):
        llama = table.get("decode", {}).get(t, {}).get("llama_cpp")
        per_t[t] = {"ours": median(v), "ours_all": v}
        if llama:
            per_t[t]["ours_over_llama_cpp"] = round(median(v) / llama, 3)
for step in ("prefill", "decode"):
    rows_ = table.get(step, {})
    for eng in ("ours", "llama_cpp"):
        base = rows_.get("1", {}).get(eng)
        for t, e in rows_.items():
            if base and e.get(eng):
                e[eng + "_speedup_over_1"] = round(e[eng] / base, 2)
    for t, e in rows_.items():
        if e.get("ours") and e.get("llama_cpp"):
            e["ours_over_llama_cpp"] = round(e["ours"] / e["llama_cpp"], 3)
json.dump({"what": "thread scaling, typedecide vs llama.cpp (llama-bench built here, GGML_NATIVE=ON), synthetic qwen3-0.6b Q8_0; bench/scaling_device.sh",
           "cores": int(cores), "typedecide_kernels": kernels, "seconds": int(secs), "skipped": skipped,
           "table": table}, open(out, "w"), indent=1)
print(json.dumps(table, indent=1))
PY
say "done: $OUT/scaling.jsonl, $OUT/scaling.json${skipped:+; skipped: $skipped}"
