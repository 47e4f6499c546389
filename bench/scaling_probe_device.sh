#!/usr/bin/env bash
# Why prefill scales less on the GPU host's CPU (16-core Xeon with AMX) than llama.cpp's from 1 to 2 threads (1.54x
# against 1.89x) and to 16 (7.0x against 10.1x), in one call: the host's CPU topology (which logical CPUs share a
# core), then prefill 512 (synthetic qwen3-0.6b, Q8_0) of the amx and avx512vnni sets and of llama-bench (built there)
# at 1 thread and at 2 threads unpinned, pinned to two logical CPUs of one core (when the host has such) and to two
# CPUs of different cores; the amx set at 8 and 16 threads. Our binary is built with bench/op_profile.patch: per kind
# of job (each product shape, attention, quantiser, norms) the caller's wall time and the sum of the threads' time
# inside the job's items, so a job that waits on a slow thread (items/wall < threads) is told from one whose items
# themselves got slower (items at 2 threads > items at 1). Nothing of the patch is in the library. NO_LLAMA=1: ours
# alone; LIMIT: seconds after which no measurement starts (420). PLAN=split: instead, the products' work split
# (bench/split_variants.patch, built in too: TD_SPLIT_* knobs) at 16, 8, 4 and 2 threads, llama-bench beside them,
# three rounds: p0 = rows cut to 64 before tokens (the default until this script's call), p4 / p5 = rows kept at
# 256 / 128 and tokens cut instead, "now" = the default since (tokens first; p0, p4, p5 were measured).
# PLAN=crit: why one 45-token criterion costs more a token than prefill in the AVX2 set on this Intel core: the set
# SET (avx2) at 2 threads, prefill 512 and `bench decide --serial` (45 tokens over 256), Q4_0 and Q8_0, three rounds,
# for the profiled build and each of VARIANTS given to --prepare (NAME=CFLAGS separated by ";", e.g. "st64=-DSMALL_T=64"); no llama.
#   here    bench/scaling_probe_device.sh --prepare      fills build-probe/ (git-ignored)
#   device  run(command="OUT=\$OUT bash bench/scaling_probe_device.sh", carry=["build-probe"], timeout_s=500)
#   here    python3 bench/op_profile.py build-probe/typedecide OUT/probe.jsonl   (per-op table, names from nm)
set -uo pipefail
cd "$(dirname "$0")/.."
. bench/bundle.sh
B=build-probe
if [ "${1:-}" = "--prepare" ]; then
    set -e
    W=${WORK:-/tmp/td-probe}
    bundle_patched "$W" typedecide_cli bench/op_profile.patch bench/split_variants.patch
    rm -rf $B && mkdir -p $B/lib && cp "$W/build/typedecide" $B/ # not stripped: the summary names jobs from nm
    IFS=';' read -ra vs <<<"${VARIANTS:-}"
    for v in "${vs[@]}"; do # NAME=CFLAGS;...: the same patched tree built with compile-time knobs, B/typedecide-NAME
        cmake -S "$W" -B "$W/build-${v%%=*}" -DCMAKE_BUILD_TYPE=Release -DCMAKE_DISABLE_FIND_PACKAGE_MPI=ON \
            -DCMAKE_C_FLAGS="${v#*=}" >/dev/null
        cmake --build "$W/build-${v%%=*}" --target typedecide_cli -j"$(nproc)" >/dev/null
        cp "$W/build-${v%%=*}/typedecide" "$B/typedecide-${v%%=*}"
        echo "${v%%=*}: CFLAGS=${v#*=}" >>$B/variants.txt
    done
    bundle_libs $B/typedecide $B/lib
    bundle_llama_src $B
    bundle_tokenizer $B
    du -sh $B >&2
    exit 0
fi
export LD_LIBRARY_PATH=$PWD/$B/lib
START=$(date +%s) W=${TMPDIR:-/tmp}/td-probe OUT=${OUT:-$PWD/probe-out}
LIMIT=${LIMIT:-420}
mkdir -p "$W" "$OUT"
L=$OUT/probe.jsonl
: >"$L"
{
    lscpu
    echo "== lscpu -p"; lscpu -p=CPU,CORE,SOCKET,NODE,CACHE
    echo "== siblings"; grep . /sys/devices/system/cpu/cpu*/topology/thread_siblings_list
    echo "== perf"; command -v perf || echo none
} >"$OUT/topology.txt" 2>&1
CORES=$(nproc)
build_pid=
[ -n "${NO_LLAMA:-}" ] || [ "${PLAN:-}" = crit ] || { bundle_llama_build $B "$W" "$CORES" >"$OUT/llama-build.log" 2>&1 & build_pid=$!; }
bundle_q8_model $B "$W"
M=$W/q8_0.gguf
[ -z "$build_pid" ] || wait $build_pid
LB=$W/llama.cpp/build/bin/llama-bench
[ -x "$LB" ] || LB=
# two CPUs of one core (first sibling pair) and two of different cores, from the topology
SIB=$(sed -n 's/^\([0-9]*\)[,-]\([0-9]*\)$/\1,\2/p' /sys/devices/system/cpu/cpu0/topology/thread_siblings_list)
APART=$(lscpu -p=CPU,CORE | grep -v '^#' | awk -F, '!seen[$2]++ {print $1}' | head -2 | paste -sd,)
echo "siblings: ${SIB:-none}, apart: $APART, llama-bench: ${LB:-none}" >>"$OUT/topology.txt"
left() { [ $(($(date +%s) - START)) -lt "$LIMIT" ]; }
# one measurement: NAME PIN THREADS COMMAND... (PIN: a CPU list for taskset, or "-"); our runs keep their op profile
one() {
    local name=$1 pin=$2 t=$3 res prof
    shift 3
    left || return 0
    local pre=()
    [ "$pin" = - ] || pre=(taskset -c "$pin")
    res=$("${pre[@]}" "$@" 2>"$W/err" | tr '\n' ' ')
    prof=$(grep '^op ' "$W/err" | python3 -c 'import json,sys; print(json.dumps([l.strip() for l in sys.stdin]))')
    rec "$name" "{\"pin\": \"$pin\", \"threads\": $t, \"out\": ${res:-null}, \"ops\": $prof}"
}
ours() { # NAME SET PIN THREADS
    one "$1" "$3" "$4" env TD_KERNELS="$2" $B/typedecide bench prefill --model "$M" --tokens 512 --threads "$4" --repeat 2
}
llama() { # NAME PIN THREADS
    [ -n "$LB" ] && one "$1" "$2" "$3" "$LB" -m "$M" -t "$3" -p 512 -n 0 -r 3 -o json
}
if [ "${PLAN:-}" = crit ]; then # the AVX2 set's 45-token criterion against its prefill, per op, Q4_0 and Q8_0
    "$B/typedecide" synth --preset qwen3-0.6b --tokenizer "$W/tok.json" --out "$W/m" --force >/dev/null 2>&1
    "$B/typedecide" export --model "$W/m" --quant q4_0 -o "$W/q4_0.gguf" --force >/dev/null 2>&1
    for round in 1 2 3; do
        for bin in $B/typedecide $B/typedecide-*; do
            n=${bin##*/typedecide}; n=${n#-}
            for q in q4_0 q8_0; do
                one "${n:-now}_${q}_prefill" - 2 env TD_KERNELS=${SET:-avx2} "$bin" bench prefill \
                    --model "$W/$q.gguf" --tokens 512 --threads 2 --repeat 1
                one "${n:-now}_${q}_crit" - 2 env TD_KERNELS=${SET:-avx2} "$bin" bench decide --serial \
                    --model "$W/$q.gguf" --prefix 256 --criteria 4 --suffix 45 --options 4 --threads 2 --repeat 2
            done
        done
    done
    echo "done in $(($(date +%s) - START)) s" >>"$OUT/topology.txt"
    exit 0
fi
if [ "${PLAN:-}" = split ]; then
    R=TD_SPLIT_FIRST_TOKENS=100000 # p0, p4, p5 as measured (rows first); "now": the default
    for round in 1 2 3; do
        for t in 16 8 4 2; do
            for v in "p0:$R" "p4:$R TD_SPLIT_MIN_PREFILL_ROWS=256" "p5:$R TD_SPLIT_MIN_PREFILL_ROWS=128" "now:"; do
                one "ours_t${t}_${v%%:*}" - "$t" env TD_KERNELS=amx ${v#*:} $B/typedecide bench prefill --model "$M" \
                    --tokens 512 --threads "$t" --repeat 2
            done
            llama "llama_t$t" - "$t"
        done
    done
    echo "done in $(($(date +%s) - START)) s" >>"$OUT/topology.txt"
    exit 0
fi
for round in 1 2; do
    for set in amx avx512vnni; do
        ours "ours_${set}_t1" $set - 1
        ours "ours_${set}_t2" $set - 2
        [ -n "$SIB" ] && ours "ours_${set}_t2_siblings" $set "$SIB" 2
        ours "ours_${set}_t2_apart" $set "$APART" 2
    done
    llama llama_t1 - 1
    llama llama_t2 - 2
    [ -n "$SIB" ] && llama llama_t2_siblings "$SIB" 2
    llama llama_t2_apart "$APART" 2
    [ "$round" = 1 ] && for t in 8 16; do ours "ours_amx_t$t" amx - $t; llama "llama_t$t" - $t; done
done
echo "done in $(($(date +%s) - START)) s" >>"$OUT/topology.txt"
