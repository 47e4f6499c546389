#!/usr/bin/env bash
# Builds the engine as WebAssembly: web/dist/typedecide.wasm and its JS glue web/dist/typedecide.js, from the same C
# sources as the native build (the core only: util, kernels, model, tokenizer, engine, decide, generate; never the
# server, the corpus runner, evaluation or the CLI, which web/CMakeLists.txt does not list).
# Toolchain: Debian 12's emscripten 3.1.6 (apt-get install emscripten). The core's three libraries (PCRE2, utf8proc,
# jansson) are compiled for wasm32 from Debian's own source packages (web/fetch_deps.sh), the versions the native
# build links, and installed into web/build/wasm-deps. Everything lands under web/build/ and web/dist/ (git-ignored).
# Usage: web/build.sh [Release|Debug]   (WASM_JOBS=N for the parallel compile; default: nproc)
#   TD_WASM_BUILD_DIR (default web/build/wasm) and TD_WASM_DIST (default web/dist): where the build and the module go,
#   for building variants side by side (the tests read TD_WASM_DIST and TD_WASM_BUILD_DIR too); the threaded module
#   builds in TD_WASM_BUILD_DIR-mt.
set -euo pipefail
cd "$(dirname "$0")"
export NODE_PATH=${NODE_PATH:-/usr/share/nodejs} # Debian's emscripten finds its node modules (acorn, ...) here
command -v emcmake >/dev/null || { echo "web/build.sh: emscripten not installed (apt-get install emscripten)" >&2; exit 1; }
type=${1:-Release}
jobs=${WASM_JOBS:-$(nproc)}
./fetch_deps.sh
deps=$PWD/build/deps
# Two modules from the same sources (web/typedecide.mjs picks one when it starts):
#   typedecide.{js,wasm}                  one thread: any page (SharedArrayBuffer is not needed)
#   typedecide-mt.{js,wasm,worker.js}     the engine's thread pool on Web Workers over shared memory (-pthread):
#                                         cross-origin isolated pages (COOP/COEP) and Node
# A shared-memory module cannot fall back to one thread where SharedArrayBuffer is missing (its memory is one), so
# the one-thread module stays. Every object of the threaded one, the three libraries' too, is compiled with -pthread
# (atomics + bulk memory: wasm-ld refuses shared memory otherwise): they get their own prefix, build/wasm-deps-mt.
# TD_WASM_VARIANTS: which to build ("st mt", the default; "st" or "mt" alone).
variants=${TD_WASM_VARIANTS:-st mt}
build_dep() { # prefix flags name source-dir cmake-options...
    local prefix=$1 flags=$2 name=$3 src=$4; shift 4
    [ -f "$prefix/.$name-done" ] && return 0
    local dir=build/dep-$name
    [ "$flags" = -O2 ] || dir=build/dep-mt-$name
    emcmake cmake -S "$src" -B "$dir" -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX="$prefix" \
        -DCMAKE_C_FLAGS="$flags" "$@" >/dev/null
    cmake --build "$dir" -j "$jobs" >/dev/null
    cmake --install "$dir" >/dev/null
    touch "$prefix/.$name-done"
}
build_deps() { # prefix flags
    # PCRE2 without JIT (wasm cannot generate machine code at run time): the interpreter matches the same strings.
    build_dep "$1" "$2" pcre2 "$(ls -d "$deps"/pcre2-*/)" -DBUILD_SHARED_LIBS=OFF -DBUILD_STATIC_LIBS=ON \
        -DPCRE2_SUPPORT_JIT=OFF -DPCRE2_SUPPORT_UNICODE=ON -DPCRE2_BUILD_PCRE2GREP=OFF -DPCRE2_BUILD_TESTS=OFF \
        -DPCRE2_SUPPORT_LIBREADLINE=OFF -DPCRE2_SUPPORT_LIBZ=OFF -DPCRE2_SUPPORT_LIBBZ2=OFF
    build_dep "$1" "$2" utf8proc "$(ls -d "$deps"/utf8proc-*/)" -DBUILD_SHARED_LIBS=OFF -DUTF8PROC_ENABLE_TESTING=OFF
    build_dep "$1" "$2" jansson "$(ls -d "$deps"/jansson-*/)" -DJANSSON_BUILD_SHARED_LIBS=OFF -DJANSSON_EXAMPLES=OFF \
        -DJANSSON_BUILD_DOCS=OFF -DJANSSON_WITHOUT_TESTS=ON -DUSE_URANDOM=OFF
}
out=${TD_WASM_BUILD_DIR:-$PWD/build/wasm}
dist=${TD_WASM_DIST:-$PWD/dist}
for v in $variants; do
    case $v in
    st) build_deps "$PWD/build/wasm-deps" -O2
        emcmake cmake -S . -B "$out" -DCMAKE_BUILD_TYPE="$type" -DTD_WASM_DEPS="$PWD/build/wasm-deps" \
            -DTD_WASM_DIST="$dist" -DTD_WASM_THREADS=OFF >/dev/null
        cmake --build "$out" -j "$jobs" ;;
    mt) build_deps "$PWD/build/wasm-deps-mt" "-O2 -pthread"
        emcmake cmake -S . -B "$out-mt" -DCMAKE_BUILD_TYPE="$type" -DTD_WASM_DEPS="$PWD/build/wasm-deps-mt" \
            -DTD_WASM_DIST="$dist" -DTD_WASM_THREADS=ON >/dev/null
        cmake --build "$out-mt" -j "$jobs" ;;
    *) echo "web/build.sh: unknown variant '$v' in TD_WASM_VARIANTS (st, mt)" >&2; exit 2 ;;
    esac
done
