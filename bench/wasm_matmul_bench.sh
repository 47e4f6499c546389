#!/usr/bin/env bash
# The WebAssembly products' speed under Node (bench/wasm_matmul_bench.c), against a WebAssembly build's core library:
#   bench/wasm_matmul_bench.sh WASM_BUILD_DIR [OLD_COMMIT|-] [ref]
# WASM_BUILD_DIR: a web/build.sh build (TD_WASM_BUILD_DIR); OLD_COMMIT: also time that commit's matmul_wasm128.c in
# the same process (- for none); ref: also time the scalar reference.
set -euo pipefail
cd "$(dirname "$0")/.."
export NODE_PATH=${NODE_PATH:-/usr/share/nodejs}
build=$1 old=${2:-} tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
srcs=(bench/wasm_matmul_bench.c)
flags=()
if [ -n "$old" ] && [ "$old" != - ]; then
    git show "$old:src/kernels/cpu/matmul_wasm128.c" | sed 's/td_matmul_wasm128\b/td_matmul_wasm128_old/' >"$tmp/old.c"
    srcs+=("$tmp/old.c") flags+=(-DTD_BENCH_OLD)
fi
emcc -O2 -msimd128 -std=c11 -D_DEFAULT_SOURCE -ffp-contract=off -Iinclude -Isrc "${flags[@]}" "${srcs[@]}" \
    "$build/libtypedecide_core.a" -sALLOW_MEMORY_GROWTH=1 -sENVIRONMENT=node -sSINGLE_FILE=1 -o "$tmp/bench.js"
node "$tmp/bench.js" "${@:3}"
