#!/usr/bin/env bash
# What the products' work split does at 8 and 16 threads on the GPU host's CPU (issue 16: decode at 16 threads read
# 0.84x llama.cpp, and AVX2's x8 decode beat the x16 one there). The split (src/engine/ops.c: rows per item, items
# per thread) never changes a bit of a result, only who computes which rows; bench/split_variants.patch makes its
# constants overridable (TD_SPLIT_ITEMS, TD_SPLIT_DECODE_ROWS, TD_SPLIT_MIN_ROWS, TD_SPLIT_PREFILL_ROWS,
# TD_SPLIT_MIN_PREFILL_ROWS, TD_SPLIT_FIRST_TOKENS) in a scratch worktree build; nothing of it is in the library.
# TD_SPLIT_FIRST_TOKENS=100000 gives the split this script measured (rows cut before tokens; tokens are cut first
# since 2026-12-02's sixth session). The call also runs test_kernels on the real AMX tiles and llama-bench (built
# here, carried) at 8 and 16 threads. One JSON line per measurement in $OUT/final.jsonl.
#   here    bench/split_variants.sh --prepare [LLAMA_BENCH]     fills build-split/ (git-ignored; a llama-bench built
#           here dies of SIGILL on that host: NOTES)
#   device  run(command="bash bench/split_variants.sh", carry=["build-split"], timeout_s=330)
#           (ONLY_PREFILL=1 LIMIT=100: p0 against p4, prefill at 16 and 8 threads; bench/scaling_probe_device.sh's
#           PLAN=split does this with an op profile)
set -uo pipefail
cd "$(dirname "$0")/.."
. bench/bundle.sh
B=build-split
if [ "${1:-}" = "--prepare" ]; then
    set -e
    W=${WORK:-/tmp/td-split}
    bundle_patched "$W" "typedecide_cli test_kernels" bench/split_variants.patch
    rm -rf $B && mkdir -p $B/lib && cp "$W/build/typedecide" "$W/build/tests/test_kernels" $B/
    strip $B/typedecide $B/test_kernels
    bundle_libs $B/typedecide $B/lib
    bundle_llama $B "${2:-}"
    bundle_tokenizer $B
    du -sh $B >&2
    exit 0
fi
export LD_LIBRARY_PATH=$PWD/$B/lib
START=$(date +%s) W=${TMPDIR:-/tmp}/td-split OUT=${OUT:-$PWD/split-out}
LIMIT=${LIMIT:-270}
mkdir -p "$W" "$OUT"
L=$OUT/final.jsonl
: >"$L"
grep -o 'amx[a-z_0-9]*\|avx512[a-z_0-9]*' /proc/cpuinfo | sort -u | tr '\n' ' ' >"$OUT/cpu_flags.txt"
nproc >>"$OUT/cpu_flags.txt"
$B/test_kernels >"$OUT/test_kernels.log" 2>&1
rec test_kernels "{\"rc\": $?, \"amx_lines\": $(grep -c ' amx ' "$OUT/test_kernels.log")}"
bundle_q8_model $B "$W"
M=$W/q8_0.gguf
LB=$B/llama-bench
left() { [ $(($(date +%s) - START)) -lt "$LIMIT" ]; }
# name: environment
DECODE=("d0:" "d1:TD_SPLIT_ITEMS=1" "d2:TD_SPLIT_ITEMS=2" "d3:TD_SPLIT_ITEMS=1 TD_SPLIT_DECODE_ROWS=256"
        "d4:TD_SPLIT_ITEMS=8")
R=TD_SPLIT_FIRST_TOKENS=100000 # rows first, as when this was measured
PREFILL=("p0:$R" "p1:$R TD_SPLIT_ITEMS=2" "p2:$R TD_SPLIT_ITEMS=8" "p3:$R TD_SPLIT_PREFILL_ROWS=128"
         "p4:$R TD_SPLIT_MIN_PREFILL_ROWS=256")
# ONLY_PREFILL=1: the prefill variants alone (p0 and p4 at 16 and 8 threads, alternating), for a short call
if [ -n "${ONLY_PREFILL:-}" ]; then
    for round in 1 2 3; do
        for t in 16 8; do
            for v in "${PREFILL[0]}" "${PREFILL[4]}"; do
                left || break
                rec "prefill_t${t}_${v%%:*}" "$(env ${v#*:} $B/typedecide bench prefill --model "$M" --tokens 512 \
                    --threads $t --repeat 2 2>/dev/null)"
            done
        done
    done
    cat "$L"
    exit 0
fi
for round in 1 2; do
    left || break
    [ -x $LB ] && rec llama_t8_16 "$($LB -m "$M" -t 8,16 -p 512 -n 32 -r 2 -o json 2>>"$OUT/llama.err" | tr '\n' ' ')"
    for t in 16 8; do
        for set in default avx2; do
            for v in "${DECODE[@]}"; do
                left || break
                K=(); [ $set = avx2 ] && K=(TD_KERNELS=avx2)
                rec "decode_t${t}_${set}_${v%%:*}" "$(env ${K[@]+"${K[@]}"} ${v#*:} $B/typedecide bench decode \
                    --model "$M" --tokens 32 --threads $t --repeat 2 2>/dev/null)"
            done
        done
    done
    for v in "${PREFILL[@]}"; do
        left || break
        rec "prefill_t16_${v%%:*}" "$(env ${v#*:} $B/typedecide bench prefill --model "$M" --tokens 512 --threads 16 \
            --repeat 2 2>/dev/null)"
    done
done
cat "$L"
