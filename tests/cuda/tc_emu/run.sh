#!/usr/bin/env bash
# The tensor-core kernels of src/kernels/cuda/matmul_tc.cu run on the CPU (no GPU needed): gen.py turns them into
# host C++, shim.h runs a block as one std::thread per CUDA thread with barriers for __syncthreads / __syncwarp and
# emulates ldmatrix, cp.async and mma.sync by their PTX fragment layouts (the mma's arithmetic replaced by a fixed
# fp32 chain, a function of its own A row, B column and C element as the hardware's is). main.cpp compares the new
# kernels with the old ones bit for bit (tc_stream with 16 / 8 / 4 / 32 outputs a block against tc_skinny, tc_wide
# against tc_tile) on odd shapes, row lists, several products, poisoned padding. It checks where every value is
# routed, not the device's arithmetic, timing or races: test_cuda_matmul_tc on the GPU is the real check.
# Usage: tests/cuda/tc_emu/run.sh [quick | few | many | all | selftest]   (quick: seconds; all: ~10 minutes on 2
# cores; selftest: a copy with two fragment indices swapped and a cp.async wait too few must differ). cp.async is
# emulated as late as PTX allows (a copy lands at the wait_group that requires it), so reading a stage before its
# wait reads stale data, and copies never waited for are counted as failures.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
out=${TMPDIR:-/tmp}/td-tc-emu-$$
mkdir -p "$out"
trap 'rm -rf "$out"' EXIT
what=${1:-quick}
if [ "$what" = selftest ]; then
    python3 "$here/gen.py" "$root/src/kernels/cuda/matmul_tc.cu" "$out/kernels.inc" --mutate
    g++ -std=c++20 -O1 -pthread -w -I"$here" -I"$out" "$here/main.cpp" -o "$out/emu"
    if "$out/emu" quick; then echo "selftest: a wrong fragment layout or a missing wait was NOT caught"; exit 1; fi
    echo "selftest: the wrong fragment layout and the missing wait were caught"
    exit 0
fi
python3 "$here/gen.py" "$root/src/kernels/cuda/matmul_tc.cu" "$out/kernels.inc"
g++ -std=c++20 -O1 -pthread -w -I"$here" -I"$out" "$here/main.cpp" -o "$out/emu"
"$out/emu" "$what"
