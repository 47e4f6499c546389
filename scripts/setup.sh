#!/usr/bin/env bash
# Installs what typedecide needs to build and test, from Debian's archive (apt) and npm, and nothing else.
# Idempotent: every step is skipped when its result is already present. Run as root on Debian 12.
set -euo pipefail
cd "$(dirname "$0")/.."

say() { printf 'setup: %s\n' "$*" >&2; }

# Debian packages: build tools (gcc; clang for the fuzz targets), the four libraries the core links (PCRE2,
# utf8proc, jansson, libmicrohttpd) and Open MPI (the tool links it for `mpirun -n K typedecide run`; the suite runs
# it).
need_pkgs=()
for cmd_pkg in cc:gcc make:make cmake:cmake pkg-config:pkg-config git:git clang:clang; do
    command -v "${cmd_pkg%%:*}" >/dev/null 2>&1 || need_pkgs+=("${cmd_pkg#*:}")
done
# libclang-rt-14-dev: libFuzzer and the sanitizer runtimes of clang, for `make fuzz` (part of `make check`)
for pkg in libc6-dev libpcre2-dev libutf8proc-dev libjansson-dev libmicrohttpd-dev libclang-rt-14-dev openmpi-bin \
    libopenmpi-dev; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || need_pkgs+=("$pkg")
done
# The Python package (python/): Debian's python3 builds it with pip, setuptools and wheel (no registry), and its
# suite (test_python) needs numpy and pytest.
for pkg in python3 python3-pip python3-setuptools python3-wheel python3-numpy python3-pytest; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || need_pkgs+=("$pkg")
done
# emscripten (3.1.6, Debian's) builds the WebAssembly module (web/build.sh, `make wasm`, test_wasm); dpkg-dev's
# dpkg-source unpacks the Debian source packages of PCRE2, utf8proc and jansson that it compiles (web/fetch_deps.sh).
command -v emcc >/dev/null 2>&1 || need_pkgs+=(emscripten)
# clang-19 and lld-19 build the relaxed SIMD kernels' module (web/relaxed_module.cmake; emscripten 3.1.6's clang 14
# has no relaxed SIMD); without them the module is built without that set.
command -v clang-19 >/dev/null 2>&1 || need_pkgs+=(clang-19)
command -v wasm-ld-19 >/dev/null 2>&1 || need_pkgs+=(lld-19)
command -v dpkg-source >/dev/null 2>&1 || need_pkgs+=(dpkg-dev)
# xz unpacks the models and fixtures kept in git as .xz (scripts/packed.sh, run by every build).
command -v xz >/dev/null 2>&1 || need_pkgs+=(xz-utils)
# Chromium (headless) loads the server's web page in test_serve.
command -v chromium >/dev/null 2>&1 || need_pkgs+=(chromium)
# Node.js and npm run the test-only references (Hugging Face tokenizers, llama.cpp, the openai client); any Node
# from 20 on will do (the page test uses its WebSocket, --experimental-websocket before 22).
command -v node >/dev/null 2>&1 || need_pkgs+=(nodejs)
command -v npm >/dev/null 2>&1 || need_pkgs+=(npm)
if ((${#need_pkgs[@]})); then
    say "installing from Debian: ${need_pkgs[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${need_pkgs[@]}" >/dev/null
else
    say "Debian packages present"
fi

# npm test references, pinned by tests/node/package-lock.json. Reinstalled only when the lock file changes.
if [ -f tests/node/package-lock.json ]; then
    stamp=tests/node/node_modules/.lock-stamp
    if [ -f "$stamp" ] && cmp -s "$stamp" tests/node/package-lock.json; then
        say "npm packages present"
    else
        say "installing npm test references (tests/node)"
        # --omit=optional: npm would otherwise fetch every platform's llama.cpp build (CUDA, Vulkan, ...);
        # package.json names the linux-x64 CPU builds it needs. --ignore-scripts: nothing downloads or compiles.
        (cd tests/node && npm ci --omit=optional --ignore-scripts --no-audit --no-fund --loglevel=error)
        cp tests/node/package-lock.json "$stamp"
    fi
fi
