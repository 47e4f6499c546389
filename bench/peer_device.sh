#!/usr/bin/env bash
# bench/peer.sh's table at 2 threads, on the GPU host's 16-core Intel Xeon (AVX-512 with AMX), in ONE device call:
# typedecide against two builds of llama.cpp on the same GGUF bytes (synthetic qwen3-0.6b at Q8_0, Q4_0, BF16):
#   native   GGML_NATIVE=ON: everything the CPU has, AMX tiles included (ggml-cpu/amx: int8 tile products for
#            Q8_0/Q4_0 batches), as a user building llama.cpp on this machine gets;
#   no-AMX   the same instructions but AMX (AVX2, FMA, F16C, AVX-VNNI, AVX-512 F/VBMI/VNNI/BF16): the instruction set
#            of this project's development VM, which has AVX-512 BF16 but no AMX, on a quiet machine.
# And every kernel set of ours at 2 threads (TD_KERNELS), so that the default is checked against the fastest set.
# The bundle is the one bench/scaling_device.sh --prepare makes (build-device/: binary without MPI, libutf8proc,
# llama.cpp's source, tokenizer).
#   device  run(command="bash bench/peer_device.sh", carry=["build-device"], timeout_s=540)
# Each result is one JSON line in $OUT/peer.jsonl as soon as it is measured (with the load average); $OUT/peer.json
# sums them up. A step still to start once BUDGET_S (default 480 s) is spent is skipped and listed.
# PRECISIONS (default "fp32") adds our figures at other precisions (bf16: --precision bf16, engine "ours-bf16"), for
# the BF16 model only: the precision changes no other weight type's arithmetic on the CPU.
# BUILD_ONLY=1 builds the peers and exports the models into WORK, then stops (a later run finds them there).
# Environment: QUANTS ("q8_0 q4_0 bf16"), PRECISIONS, SETS (our kernel sets besides the default), THREADS (2), CRITERIA (24: the serial per-criterion time does not depend
# on the count), BUDGET_S, OUT, BUNDLE (build-device), WORK.
set -uo pipefail
cd "$(dirname "$0")/.."
BUNDLE=${BUNDLE:-build-device}
START=$(date +%s)
BUDGET_S=${BUDGET_S:-480}
QUANTS=${QUANTS:-q8_0 q4_0 bf16}
PRECISIONS=${PRECISIONS:-fp32}
T=${THREADS:-2}
CRITERIA=${CRITERIA:-24}
OUT=${OUT:-$PWD/peer-out}
WORK=${WORK:-${TMPDIR:-/tmp}/td-peer-device}
CORES=$(nproc)
mkdir -p "$OUT" "$WORK"
LOG=$OUT/peer.jsonl
: >"$LOG"
BIN=$PWD/$BUNDLE/typedecide
export LD_LIBRARY_PATH=$PWD/$BUNDLE/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
say() { echo "peer [$(($(date +%s) - START)) s]: $*" >&2; }
left() { echo $((BUDGET_S - ($(date +%s) - START))); }
skipped=""
record() { # STEP ENGINE QUANT SECONDS COMMAND RESULT-JSON
    local cmd=${5//\\/\\\\}
    printf '{"step": "%s", "engine": "%s", "quant": "%s", "threads": %s, "seconds": %s, "load": "%s", "command": "%s", "result": %s}\n' \
        "$1" "$2" "$3" "$T" "$4" "$(cut -d' ' -f1-3 /proc/loadavg)" "${cmd//\"/\\\"}" "${6:-null}" >>"$LOG"
}
measure() { # STEP ENGINE QUANT MIN_LEFT COMMAND...
    local step=$1 engine=$2 q=$3 need=$4
    shift 4
    if [ "$(left)" -lt "$need" ]; then
        skipped="$skipped${skipped:+, }$step/$engine/$q"
        say "skip $step $engine $q ($(left) s left)"
        return
    fi
    say "$step $engine $q: $*"
    local t0 res ms
    t0=$(date +%s%N)
    res=$(timeout "$(left)" "$@" 2>"$WORK/stderr" | tr '\n' ' ') || { say "failed: $(tail -2 "$WORK/stderr" | tr '\n' ' ')"; res=null; }
    [ -n "$res" ] || res=null
    ms=$((($(date +%s%N) - t0) / 1000000))
    record "$step" "$engine" "$q" "$((ms / 1000)).$(printf '%03d' $((ms % 1000)))" "$*" "$res"
}

{
    echo "== lscpu"; lscpu 2>/dev/null
    echo "== flags"; grep -m1 flags /proc/cpuinfo
    echo "== manifest"; cat "$BUNDLE/manifest.txt" 2>/dev/null
    echo "== typedecide"; "$BIN" --version
} >"$OUT/machine.txt" 2>&1
KERNELS=$("$BIN" --version 2>/dev/null | sed -n 's/.*kernels \([a-z0-9]*\).*/\1/p')
[ -n "$KERNELS" ] || { say "our binary does not run here: $("$BIN" --version 2>&1 | head -2)"; exit 1; }
say "$CORES cores, kernels $KERNELS; budget $BUDGET_S s"

# the two llama.cpp builds, side by side, while our binary makes the models
[ -x "$WORK/build-native/bin/llama-bench" ] && [ -x "$WORK/build-noamx/bin/llama-bench" ] ||
    { rm -rf "$WORK/src" && mkdir -p "$WORK/src" && tar -C "$WORK/src" -xJf "$BUNDLE/llama-src.tar.xz"; }
common="-DCMAKE_BUILD_TYPE=Release -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF \
-DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_BUILD_TOOLS=ON"
noamx="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_BMI2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_AVX_VNNI=ON \
-DGGML_AVX512=ON -DGGML_AVX512_VBMI=ON -DGGML_AVX512_VNNI=ON -DGGML_AVX512_BF16=ON -DGGML_AMX_TILE=OFF \
-DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF"
pids=""
for b in native noamx; do
    [ -x "$WORK/build-$b/bin/llama-bench" ] && continue
    (
        set -e
        flags=$([ $b = native ] && echo "-DGGML_NATIVE=ON" || echo "$noamx")
        # shellcheck disable=SC2086
        cmake -S "$WORK/src/llama.cpp" -B "$WORK/build-$b" $common $flags
        cmake --build "$WORK/build-$b" --target llama-bench -j$((CORES / 2))
    ) >"$OUT/llama-build-$b.log" 2>&1 &
    pids="$pids $!"
done
TOK=$WORK/tokenizer.json
[ -s "$TOK" ] || xz -dc "$BUNDLE/tokenizer.json.xz" >"$TOK"
MODEL=$WORK/synth-qwen3-0.6b
missing=$(for q in $QUANTS; do [ -s "$WORK/$q.gguf" ] || echo "$q"; done)
[ -z "$missing" ] || [ -f "$MODEL/model.safetensors" ] || "$BIN" synth --preset qwen3-0.6b --tokenizer "$TOK" --out "$MODEL" >/dev/null 2>&1
for q in $QUANTS; do
    [ -s "$WORK/$q.gguf" ] || "$BIN" export --model "$MODEL" --quant "$q" -o "$WORK/$q.gguf" >/dev/null 2>&1 ||
        say "export $q failed"
done
rm -rf "$MODEL"
# shellcheck disable=SC2086
wait $pids
for b in native noamx; do
    [ -x "$WORK/build-$b/bin/llama-bench" ] || say "llama-bench $b did not build: $(tail -3 "$OUT/llama-build-$b.log" | tr '\n' ' ')"
    grep -qs "amx/mmq.cpp" "$OUT/llama-build-$b.log" && say "llama.cpp $b: with AMX" || say "llama.cpp $b: no AMX"
done
say "models and peers ready"
[ -z "${BUILD_ONLY:-}" ] || exit 0 # BUILD_ONLY=1: the peers and models only (a caller measures later)

for q in $QUANTS; do
    f=$WORK/$q.gguf
    [ -s "$f" ] || continue
    precs=fp32
    [ "$q" = bf16 ] && precs=$PRECISIONS
    for p in $precs; do
        e=ours
        [ "$p" = fp32 ] || e=ours-$p
        measure prefill "$e" "$q" 15 "$BIN" bench prefill --model "$f" --tokens 512 --threads "$T" --repeat 2 --precision "$p"
    done
    for b in native noamx; do
        L=$WORK/build-$b/bin/llama-bench
        [ -x "$L" ] && measure prefill_decode "llama.cpp-$b" "$q" 30 "$L" -m "$f" -t "$T" -p 512 -n 64 -r 2 -o json
    done
    for p in $precs; do
        e=ours
        [ "$p" = fp32 ] || e=ours-$p
        measure decode "$e" "$q" 15 "$BIN" bench decode --model "$f" --tokens 64 --threads "$T" --repeat 2 --precision "$p"
    done
    for b in native noamx; do
        L=$WORK/build-$b/bin/llama-bench
        [ -x "$L" ] && measure one_criterion "llama.cpp-$b" "$q" 20 "$L" -m "$f" -t "$T" -p 45 -n 0 -d 256 -r 3 -o json
    done
    for p in $precs; do
        e=ours
        [ "$p" = fp32 ] || e=ours-$p
        measure decide_serial "$e" "$q" 20 "$BIN" bench decide --model "$f" --prefix 256 --criteria "$CRITERIA" \
            --suffix 45 --options 4 --serial --threads "$T" --repeat 1 --precision "$p"
    done
done
for q in $QUANTS; do
    f=$WORK/$q.gguf
    for k in ${SETS:-amx avx512r16 avx512bf16 avx512vnni avx2}; do
        [ "$k" = "$KERNELS" ] && continue
        TD_KERNELS=$k "$BIN" --version 2>/dev/null | grep -q "kernels $k" || continue
        measure "prefill_kernels_$k" ours "$q" 10 env TD_KERNELS=$k "$BIN" bench prefill --model "$f" --tokens 512 \
            --threads "$T" --repeat 2
        measure "decode_kernels_$k" ours "$q" 10 env TD_KERNELS=$k "$BIN" bench decode --model "$f" --tokens 64 \
            --threads "$T" --repeat 2
    done
done

python3 - "$LOG" "$OUT/peer.json" "$CORES" "$KERNELS" "$skipped" "$(($(date +%s) - START))" "$T" <<'PY'
import json, sys
log, out, cores, kernels, skipped, secs, threads = sys.argv[1:8]
rows = [json.loads(l) for l in open(log) if l.strip()]
table = {}
r3 = lambda x: round(x, 3)
for r in rows:
    res, q = r["result"], r["quant"]
    if res is None:
        continue
    e = table.setdefault(q, {})
    if r["engine"].startswith("ours") and r["step"] in ("prefill", "decode"):
        e.setdefault(r["step"] + "_tokens_per_s", {})[r["engine"]] = res["tokens_per_s"]
        if r["engine"] == "ours":
            e.setdefault("kernel_sets", {}).setdefault(r["step"], {})[kernels] = res["tokens_per_s"]
    elif r["step"] == "prefill_decode":
        for x in res:
            step = "prefill" if x["n_gen"] == 0 else "decode"
            e.setdefault(step + "_tokens_per_s", {})[r["engine"]] = r3(x["avg_ts"])
    elif r["step"] == "one_criterion":
        e.setdefault("one_criterion_ms", {})[r["engine"] + "_p45_d256"] = r3(res[0]["avg_ns"] / 1e6)
    elif r["step"] == "decide_serial":
        e.setdefault("one_criterion_ms", {})[r["engine"] + "_serial_suffix"] = res["suffix_ms_per_criterion"]
    elif "_kernels_" in r["step"]:
        step, k = r["step"].split("_kernels_")
        e.setdefault("kernel_sets", {}).setdefault(step, {})[k] = res["tokens_per_s"]
for q, e in table.items():
    for step in ("prefill_tokens_per_s", "decode_tokens_per_s"):
        s = e.get(step, {})
        for o in [k for k in s if k.startswith("ours")]:
            for b in ("native", "noamx"):
                if s.get(o) and s.get("llama.cpp-" + b):
                    s[o.replace("-", "_") + "_over_llama_cpp_" + b] = r3(s[o] / s["llama.cpp-" + b])
    c = e.get("one_criterion_ms", {})
    for o in [k for k in c if k.startswith("ours")]:
        for b in ("native", "noamx"):
            if c.get(o) and c.get("llama.cpp-%s_p45_d256" % b):
                c[o.replace("-", "_").replace("_serial_suffix", "") + "_over_llama_cpp_" + b] = \
                    r3(c[o] / c["llama.cpp-%s_p45_d256" % b])
    for step, sets in e.get("kernel_sets", {}).items():
        best = max(sets, key=sets.get)
        sets["fastest"] = best
        if kernels in sets:
            sets["default_over_fastest"] = r3(sets[kernels] / sets[best])
json.dump({"what": "typedecide vs llama.cpp (llama-bench, two builds: native = GGML_NATIVE with AMX; noamx = the same "
                   "instructions without AMX) on the same GGUF files, synthetic qwen3-0.6b, %s threads; one criterion: "
                   "llama.cpp -p 45 -d 256 against our serial suffix time over a prefilled 256-token evidence; "
                   "kernel_sets: every set of ours forced by TD_KERNELS (bench/peer_device.sh)" % threads,
           "cores": int(cores), "typedecide_kernels": kernels, "seconds": int(secs), "skipped": skipped,
           "table": table}, open(out, "w"), indent=1)
print(json.dumps(table, indent=1))
PY
say "done: $OUT/peer.jsonl, $OUT/peer.json${skipped:+; skipped: $skipped}"
