#!/usr/bin/env bash
# The bf16 attention kernels of src/kernels/cuda/attention.cu run on the CPU (no GPU needed): gen.py turns them into
# host C++, shim.h runs a block as one std::thread per CUDA thread with barriers for __syncthreads and the warp
# collectives, and emulates ldmatrix (.trans too), the shuffles and mma.sync by their PTX fragment layouts (the mma's
# arithmetic an fp32 chain, a function of its own A row, B column and C element as the hardware's is). main.cpp
# compares attention_bf16_64_kernel with attention_bf16_kernel bit for bit (tiles of 1 .. 64 rows, G 1, 2, 8, f32 and
# f16 caches, windows, both span sizes, test modes 1-3) and both with a double reference of cuda.h's bf16 order. It
# checks where every value is routed, not the device's arithmetic, timing or races: test_cuda_attn_bf16 on the GPU
# is the real check.
# Usage: tests/cuda/attn_emu/run.sh [quick | all | selftest]   (all: a few minutes on 2 cores; selftest: a copy with
# the P operand's fragment order and the l tree's partner lane wrong must fail)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
out=${TMPDIR:-/tmp}/td-attn-emu-$$
mkdir -p "$out"
trap 'rm -rf "$out"' EXIT
what=${1:-all}
if [ "$what" = selftest ]; then
    python3 "$here/gen.py" "$root/src/kernels/cuda/attention.cu" "$out/kernels.inc" --mutate
    g++ -std=c++20 -O1 -pthread -w -I"$here" -I"$out" "$here/main.cpp" -o "$out/emu"
    if "$out/emu" quick; then echo "selftest: the wrong fragment order was NOT caught"; exit 1; fi
    echo "selftest: the wrong fragment order was caught"
    exit 0
fi
python3 "$here/gen.py" "$root/src/kernels/cuda/attention.cu" "$out/kernels.inc"
g++ -std=c++20 -O1 -pthread -w -I"$here" -I"$out" "$here/main.cpp" -o "$out/emu"
"$out/emu" "$what"
