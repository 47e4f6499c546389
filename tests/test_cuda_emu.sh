#!/usr/bin/env bash
# The tensor-core kernels of src/kernels/cuda/matmul_tc.cu and attention.cu on the CPU, without a GPU or the CUDA
# toolkit (tests/cuda/emu/emu.h says what is emulated and what it cannot see): g++ compiles the .cu files themselves
# against tests/cuda/emu's stand-ins for the CUDA headers and for src/kernels/cuda/ptx.cuh, then
#   emu tc all       tc_stream (16 / 8 / 4 / 32 outputs a block) vs tc_skinny, tc_wide and tc_wg (wgmma) vs tc_tile,
#                    bit for bit; tc_split's partials added by the kernels that take them (rows.cu: the residual +
#                    norm, the MLP's gate, q/k preparation) vs those kernels over the folded products
#   emu attn quick   the 64-row vs the 16-row bf16 attention kernel bit for bit, both vs a double reference (hd 64
#                    and 128, G 1, 2, 8, f32 and f16 caches, windows); each on a bf16 twin of its cache (cp.async and
#                    element loads, the 64-row kernel's double buffering) = on the cache itself, and the fp32 kernel
#                    on it = on an f32 cache of its values
#   emu dn           the chunked DeltaNet (deltanet_chunk.cu): outputs and state bit for bit however a sequence is
#                    split into calls (1 + 63 + 64 .., 7 + rest, 70 + rest, one token at a time), within 2e-5 of a
#                    double reference of the recurrence, the double chunk form within 1e-9 of it (dn.cpp)
#   emu dnr          the token-by-token DeltaNet by warps (deltanet_warp_kernel + dn_norm_kernel) vs the register
#                    and the global-state kernels, outputs and state bit for bit; the causal conv (conv_kernel) vs
#                    its expressions run on the host (dnr.cpp)
#   emu selftest     each mutation of the emulated helpers (a wrong ldmatrix or mma fragment index, a cp.async
#                    wait_group one group short, a wrong shuffle partner, the inputs the kernels before write left
#                    poisoned past griddepcontrol.wait), applied to the new kernels only, is caught
# In tc, attn and dnr each block of a new kernel starts with the inputs the kernels before it write (activations, q,
# the KV cache, the DeltaNet's u, b, a, core, z) poisoned until every thread is at its griddepcontrol.wait: a read of
# them before the wait (the GPU's programmatic launches let it run while they are still being written) differs.
# ~60-90 s on the loaded 2-core machine, most of it g++ and the wide cases (three tc_wide forms). Skipped (77) only
# without g++. TD_CUDA_EMU=all runs attention's long case list (tiles of 1 .. 64 rows, reversed groups, both span
# sizes, test modes 1-3: ~10-30 s more).
set -euo pipefail
ROOT=${TD_ROOT:-$(cd "$(dirname "$0")/.." && pwd)}
CXX=${CXX_EMU:-g++}
command -v "$CXX" >/dev/null || { echo "test_cuda_emu: skipped ($CXX not found)"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
emu=$ROOT/tests/cuda/emu
# (the kernels' #pragma unroll, the host-side helpers -DTD_CU_EMU leaves unused, and GCC's note on how it passes
# 128-byte aligned arguments, tc_ws's tensor maps, since GCC 4.6, are not warned about)
flags=(-std=c++20 -O1 -Wall -Wextra -Wno-unknown-pragmas -Wno-unused-function -Wno-unused-variable -Wno-psabi
    -DTD_CU_EMU -I"$emu" -I"$ROOT/src" -I"$ROOT/include")
pids=()
for u in emu tc attn dn dnr; do
    "$CXX" "${flags[@]}" -c "$emu/$u.cpp" -o "$tmp/$u.o" &
    pids+=($!)
done
for p in "${pids[@]}"; do wait "$p" || { echo "FAIL: the emulator does not compile"; exit 1; }; done
"$CXX" "$tmp/emu.o" "$tmp/tc.o" "$tmp/attn.o" "$tmp/dn.o" "$tmp/dnr.o" -o "$tmp/emu"
fails=0
"$tmp/emu" tc all || { echo "FAIL: tc kernels differ"; fails=$((fails + 1)); }
"$tmp/emu" attn "${TD_CUDA_EMU:-quick}" || { echo "FAIL: attention kernels differ"; fails=$((fails + 1)); }
"$tmp/emu" dn || { echo "FAIL: chunked DeltaNet"; fails=$((fails + 1)); }
"$tmp/emu" dnr || { echo "FAIL: DeltaNet by warps"; fails=$((fails + 1)); }
if ! "$tmp/emu" selftest >"$tmp/selftest.log" 2>&1; then
    cat "$tmp/selftest.log"
    echo "FAIL: selftest"
    fails=$((fails + 1))
fi
grep '^selftest' "$tmp/selftest.log"
[ "$fails" = 0 ] && echo "test_cuda_emu: passed" || { echo "test_cuda_emu: $fails FAILED"; exit 1; }
