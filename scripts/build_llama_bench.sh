#!/usr/bin/env bash
# Builds llama.cpp's llama-bench, the speed peer of bench/peer.sh, from the source bundle that ships inside the
# npm package node-llama-cpp (tests/node/node_modules/node-llama-cpp/llama/gitRelease.bundle), OUTSIDE this
# repository (default ${TMPDIR:-/tmp}/llama.cpp; its code is never copied here). Release build, GGML_NATIVE=ON:
# llama.cpp gets every instruction this CPU has, as its own default build would. LLAMA_AVX2=1 builds instead with
# GGML_NATIVE=OFF, ggml's portable x86 set (AVX, AVX2, BMI2, FMA, F16C; no AVX-512), into
# ${TMPDIR:-/tmp}/llama.cpp-avx2: the peer of `TD_KERNELS=avx2` when no AVX2-only machine is at hand.
# Usage: [LLAMA_AVX2=1] scripts/build_llama_bench.sh [DEST]   -> prints the path of llama-bench
set -euo pipefail
cd "$(dirname "$0")/.."
native=ON suffix=
[ "${LLAMA_AVX2:-0}" = 1 ] && native=OFF suffix=-avx2
dest=${1:-${TMPDIR:-/tmp}/llama.cpp$suffix}
bundle=$PWD/tests/node/node_modules/node-llama-cpp/llama/gitRelease.bundle
bin=$dest/build/bin/llama-bench
if [ ! -x "$bin" ]; then
    [ -f "$bundle" ] || { echo "build_llama_bench: $bundle missing (run scripts/setup.sh first)" >&2; exit 1; }
    [ -d "$dest/.git" ] || git clone -q "$bundle" "$dest"
    cmake -S "$dest" -B "$dest/build" -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=$native -DLLAMA_CURL=OFF \
        -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_TOOLS=ON >&2
    cmake --build "$dest/build" --target llama-bench -j"$(nproc)" >&2
fi
echo "$bin"
