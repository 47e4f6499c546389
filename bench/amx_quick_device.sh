#!/usr/bin/env bash
# A short call on the GPU host's CPU (AMX): the default kernels (amx there) and avx512bf16 at 2 threads on the
# synthetic qwen3-0.6b at Q8_0, prefill 512, one criterion (45 tokens over 256, serial) and decode 64, three rounds
# alternating, with llama-bench beside them when the bundle holds one; one JSON line per measurement in
# $OUT/final.jsonl. For when little device time is left (a call of ~2 minutes); bench/peer_device.sh is the full table.
#   here    bench/amx_quick_device.sh --prepare [LLAMA_BENCH]   fills build-quick/ (git-ignored): the binary built
#           without MPI, the libraries the device lacks (and libgomp for a llama-bench built here), the tokenizer
#   device  run(command="bash bench/amx_quick_device.sh", carry=["build-quick"], timeout_s=230)
# Two calls of 2026-12-02 (bench/results/amx-set-q8_0-call3.json; split-variants-xeon16-amx.json, git history at 55e7245) carried a
# llama-bench built on the development VM with GGML_NATIVE=OFF and the host's AVX-512 / AMX flags: it dies of SIGILL
# there at once (its AMX path; NOTES). Build llama.cpp on the host (bench/peer_device.sh) for a ratio.
set -uo pipefail
cd "$(dirname "$0")/.."
. bench/bundle.sh
B=build-quick
if [ "${1:-}" = "--prepare" ]; then
    set -e
    cmake -S . -B build-nompi -DCMAKE_BUILD_TYPE=Release -DCMAKE_DISABLE_FIND_PACKAGE_MPI=ON >/dev/null
    cmake --build build-nompi --target typedecide_cli -j"$(nproc)" >/dev/null
    rm -rf $B && mkdir -p $B/lib && cp build-nompi/typedecide $B/ && strip $B/typedecide
    bundle_libs $B/typedecide $B/lib
    bundle_llama $B "${2:-}"
    bundle_tokenizer $B
    du -sh $B >&2
    exit 0
fi
export LD_LIBRARY_PATH=$PWD/$B/lib
START=$(date +%s) W=${TMPDIR:-/tmp}/td-quick OUT=${OUT:-$PWD/quick-out}
mkdir -p "$W" "$OUT"
L=$OUT/final.jsonl
: >"$L"
bundle_q8_model $B "$W"
M=$W/q8_0.gguf
LB=$B/llama-bench
for round in 1 2 3; do
    [ $(($(date +%s) - START)) -gt 150 ] && break
    [ -x $LB ] && rec llama_pp512_tg64 "$($LB -m "$M" -t 2 -p 512 -n 64 -r 2 -o json 2>>"$OUT/llama.err" | tr '\n' ' ')"
    rec ours_prefill "$($B/typedecide bench prefill --model "$M" --tokens 512 --threads 2 --repeat 2 2>/dev/null)"
    [ -x $LB ] && rec llama_p45_d256 "$($LB -m "$M" -t 2 -p 45 -n 0 -d 256 -r 3 -o json 2>>"$OUT/llama.err" | tr '\n' ' ')"
    rec ours_decide_serial "$($B/typedecide bench decide --model "$M" --prefix 256 --criteria 8 --suffix 45 --options 4 \
        --serial --threads 2 --repeat 1 2>/dev/null)"
    rec ours_decode "$($B/typedecide bench decode --model "$M" --tokens 64 --threads 2 --repeat 2 2>/dev/null)"
    rec ours_prefill_avx512bf16 "$(TD_KERNELS=avx512bf16 $B/typedecide bench prefill --model "$M" --tokens 512 \
        --threads 2 --repeat 2 2>/dev/null)"
done
cat "$L"
