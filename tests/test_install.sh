#!/usr/bin/env bash
# `cmake --install` into a temporary prefix, then the example consumer (examples/decide.c) built against what was
# installed: with `pkg-config --cflags --libs typedecide` and with CMake's find_package (the shared library, and the
# static one), each linked as asked and deciding the demo ticket exactly as `typedecide decide` does. The installed
# files follow one version: td_version(), the shared library's file name and soname, pkg-config, the CMake package.
set -uo pipefail
ROOT=${TD_ROOT:-$(cd "$(dirname "$0")/.." && pwd)}
BIN=${TD_BIN:-$ROOT/build/typedecide}
BUILD=${TD_BUILD:?TD_BUILD names the build directory}
if [ -n "${TD_SANITIZED:-}" ]; then
    echo "skipped in the sanitizer build: consumers built without the sanitizers cannot load its instrumented library"
    exit 77
fi
cd "$ROOT"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }
P=$tmp/prefix
cmake --install "$BUILD" --prefix "$P" >"$tmp/install.log" 2>&1 || { cat "$tmp/install.log" >&2; echo "FAIL: cmake --install" >&2; exit 1; }

version=$(sed -n 's/^#define TD_VERSION_STRING "\(.*\)"$/\1/p' include/typedecide.h)
major=${version%%.*}
for f in lib/libtypedecide.so.$version lib/libtypedecide.so.$major lib/libtypedecide.so lib/libtypedecide.a \
    include/typedecide.h lib/pkgconfig/typedecide.pc lib/cmake/typedecide/typedecideConfig.cmake \
    lib/cmake/typedecide/typedecideConfigVersion.cmake bin/typedecide; do
    [ -e "$P/$f" ] || fail "not installed: $f"
done
cmp -s include/typedecide.h "$P/include/typedecide.h" || fail "the installed header differs from include/typedecide.h"
soname=$(readelf -d "$P/lib/libtypedecide.so.$version" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
[ "$soname" = "libtypedecide.so.$major" ] || fail "soname '$soname', expected libtypedecide.so.$major"
export PKG_CONFIG_PATH=$P/lib/pkgconfig
[ "$(pkg-config --modversion typedecide)" = "$version" ] || fail "pkg-config version $(pkg-config --modversion typedecide), header $version"

# the reference: the tool's JSON lines without the wall time
"$BIN" decide --json --quiet --model models/demo-qwen3 --evidence models/demo/ticket.txt \
    --criteria models/demo/criteria.jsonl | sed 's/,"ms":[^,}]*}$/}/' >"$tmp/expected" || fail "typedecide decide failed"
[ "$(wc -l <"$tmp/expected")" -eq 4 ] || fail "typedecide decide printed $(wc -l <"$tmp/expected") lines, not 4"
run_consumer() { # NAME EXECUTABLE: decides the ticket, compares, and says which library the executable loads
    "$2" models/demo-qwen3 models/demo/ticket.txt models/demo/criteria.jsonl >"$tmp/$1.out" 2>"$tmp/$1.err" ||
        fail "$1: $(cat "$tmp/$1.err")"
    cmp -s "$tmp/expected" "$tmp/$1.out" || fail "$1: decisions differ from typedecide decide:
$(diff "$tmp/expected" "$tmp/$1.out")"
}

# pkg-config: cc with its flags, an rpath to find the library at run time
CC=${CC:-cc}
libdir=$(pkg-config --variable=libdir typedecide)
# shellcheck disable=SC2046
$CC -std=c11 -Wall -Wextra -Werror examples/decide.c $(pkg-config --cflags --libs typedecide) -Wl,-rpath,"$libdir" \
    -o "$tmp/decide_pc" 2>"$tmp/cc.err" || fail "cc with pkg-config: $(cat "$tmp/cc.err")"
if [ -x "$tmp/decide_pc" ]; then
    readelf -d "$tmp/decide_pc" | grep -c "NEEDED.*\[libtypedecide.so.$major\]" >/dev/null || fail "pkg-config: not linked to libtypedecide.so.$major"
    # (grep -c, not -q, reads all its input: with pipefail, a grep that quits early kills the writer with SIGPIPE)
    loaded=$(LD_TRACE_LOADED_OBJECTS=1 "$tmp/decide_pc" 2>&1)
    grep -c "libtypedecide.so.$major => $P/lib/" <<<"$loaded" >/dev/null ||
        fail "pkg-config: the consumer does not load the installed library ($P/lib): $loaded"
    run_consumer pkg-config "$tmp/decide_pc"
fi

# CMake: find_package(typedecide) from the prefix, the shared and the static library
if cmake -S examples -B "$tmp/cmake" -DCMAKE_PREFIX_PATH="$P" -DCMAKE_BUILD_TYPE=Release >"$tmp/cmake.log" 2>&1 &&
    cmake --build "$tmp/cmake" >>"$tmp/cmake.log" 2>&1; then
    readelf -d "$tmp/cmake/decide" | grep -c "NEEDED.*\[libtypedecide.so.$major\]" >/dev/null || fail "find_package: not linked to libtypedecide.so.$major"
    readelf -d "$tmp/cmake/decide_static" | grep -c "NEEDED.*libtypedecide" >/dev/null && fail "find_package: the static consumer needs the shared library"
    run_consumer find_package "$tmp/cmake/decide"
    run_consumer find_package-static "$tmp/cmake/decide_static"
else
    fail "the CMake consumer (examples/CMakeLists.txt) did not build:
$(tail -n 30 "$tmp/cmake.log")"
fi

# td_version() through the installed shared library equals the header's version and the file's
cat >"$tmp/v.c" <<'C'
#include <stdio.h>
#include <typedecide.h>
int main(void) { return puts(td_version()) < 0; }
C
# shellcheck disable=SC2046
$CC -std=c11 "$tmp/v.c" $(pkg-config --cflags --libs typedecide) -Wl,-rpath,"$libdir" -o "$tmp/v" &&
    [ "$("$tmp/v")" = "$version" ] || fail "td_version() of the installed library is '$("$tmp/v" 2>&1)', expected $version"
if [ "$fails" -gt 0 ]; then exit 1; fi
echo "install: $P holds libtypedecide.so.$version (soname libtypedecide.so.$major), the static library, the header," \
    "pkg-config and CMake files; the consumer built with pkg-config, find_package (shared) and find_package (static)" \
    "decides the demo ticket as typedecide decide does"
