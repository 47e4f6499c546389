#!/usr/bin/env bash
# Builds llama.cpp's llama-bench, the speed peer of bench/peer.sh, from the source bundle that ships inside the
# npm package node-llama-cpp (tests/node/node_modules/node-llama-cpp/llama/gitRelease.bundle), OUTSIDE this
# repository (default ${TMPDIR:-/tmp}/llama.cpp; its code is never copied here). Release build, GGML_NATIVE=ON:
# llama.cpp gets every instruction this CPU has, as its own default build would.
# Usage: scripts/build_llama_bench.sh [DEST]   -> prints the path of llama-bench
set -euo pipefail
cd "$(dirname "$0")/.."
dest=${1:-${TMPDIR:-/tmp}/llama.cpp}
bundle=$PWD/tests/node/node_modules/node-llama-cpp/llama/gitRelease.bundle
bin=$dest/build/bin/llama-bench
if [ ! -x "$bin" ]; then
    [ -f "$bundle" ] || { echo "build_llama_bench: $bundle missing (run scripts/setup.sh first)" >&2; exit 1; }
    [ -d "$dest/.git" ] || git clone -q "$bundle" "$dest"
    cmake -S "$dest" -B "$dest/build" -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DLLAMA_CURL=OFF \
        -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_TOOLS=ON >&2
    cmake --build "$dest/build" --target llama-bench -j"$(nproc)" >&2
fi
echo "$bin"
