#!/usr/bin/env bash
# Issue 44: the core library builds and its tests pass where libmicrohttpd and MPI are not installed.
# A second build of this checkout is configured with both hidden: pkg-config sees only PCRE2's, utf8proc's and
# jansson's .pc files (PKG_CONFIG_LIBDIR: a directory holding links to those three; the test first shows that
# pkg-config then cannot find libmicrohttpd) and find_package(MPI) is disabled (CMAKE_DISABLE_FIND_PACKAGE_MPI).
# Checked there:
#  - configuring succeeds and says "server not built: libmicrohttpd not found" and "MPI not found";
#  - the core library (typedecide_core), the tool and three of the core's tests build (-j2, Release), and nothing
#    built names libmicrohttpd or MPI: no MHD_/MPI_ symbol in either library, no such NEEDED entry in the tool;
#    a core test links only libc, libm, PCRE2, utf8proc and jansson (and the C runtime's own);
#  - `cmake --install --component core` installs the core alone: libtypedecide_core.a, the core header typedecide.h
#    (byte for byte include/'s; none of the applications' headers) and typedecide_core.pc, whose libraries are the
#    core's; examples/decide.c builds against that prefix with `pkg-config --static typedecide_core` alone and
#    decides the demo ticket as the tool does;
#  - test_strbuf, test_tokenizer and test_engine pass there; `typedecide decide` on the demo model prints the
#    same decisions, bit for bit, as this build's tool (TD_BIN); `typedecide serve` says it was built without the
#    server, at once (no model is loaded) and with status 1.
# The second build lives in TD_BUILD/core-only and is reused by the next run (from scratch it compiles the whole
# library once: ~1 minute of two cores; an unchanged tree rebuilds nothing). Skipped (77) in the sanitizer run:
# the release run covers it.
set -uo pipefail
ROOT=${TD_ROOT:-$(cd "$(dirname "$0")/.." && pwd)}
BIN=${TD_BIN:-$ROOT/build/typedecide}
BUILD=${TD_BUILD:-$ROOT/build}
[ -n "${TD_SANITIZED:-}" ] && { echo "test_core_only: skipped in the sanitizer run (the release run builds it)"; exit 77; }
fails=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }
CB="$BUILD/core-only"
mkdir -p "$CB/pkgconfig"

# pkg-config with the three .pc files of the core and nothing else
for pc in libpcre2-8 libutf8proc jansson; do
    dir=$(pkg-config --variable=pcfiledir "$pc") || { echo "test_core_only: pkg-config cannot find $pc" >&2; exit 1; }
    ln -sf "$dir/$pc.pc" "$CB/pkgconfig/$pc.pc"
done
export PKG_CONFIG_LIBDIR="$CB/pkgconfig" PKG_CONFIG_PATH=
pkg-config --exists libmicrohttpd && fail "libmicrohttpd is still visible to pkg-config with PKG_CONFIG_LIBDIR=$CB/pkgconfig"
pkg-config --exists libpcre2-8 libutf8proc jansson || fail "the core's own .pc files are not visible"

t0=$(date +%s)
if ! cmake -S "$ROOT" -B "$CB" -DCMAKE_BUILD_TYPE=Release -DCMAKE_DISABLE_FIND_PACKAGE_MPI=ON >"$CB/configure.log" 2>&1; then
    fail "configuring without libmicrohttpd and MPI failed: $(grep -m3 -i error "$CB/configure.log")"
    exit 1
fi
grep -q "server not built: libmicrohttpd not found" "$CB/configure.log" ||
    fail "configure did not say 'server not built: libmicrohttpd not found': $(grep typedecide: "$CB/configure.log")"
grep -q "MPI not found" "$CB/configure.log" || fail "configure did not say MPI was not found"
grep -qi "^MHD_FOUND:.*=1" "$CB/CMakeCache.txt" && fail "CMakeCache.txt: libmicrohttpd found"
t1=$(date +%s)
if ! cmake --build "$CB" -j2 --target typedecide_core typedecide_cli test_strbuf test_tokenizer test_engine \
    >"$CB/build.log" 2>&1; then
    fail "building the core, the tool and the core's tests failed: $(grep -m5 -E 'error|Error' "$CB/build.log")"
    exit 1
fi
t2=$(date +%s)
echo "test_core_only: configured in $((t1 - t0)) s, built in $((t2 - t1)) s"

# nothing built reaches for the server's or MPI's libraries
for lib in "$CB/libtypedecide_core.a" "$CB/libtypedecide.a"; do
    bad=$(nm -u "$lib" 2>/dev/null | grep -E ' (MHD_|MPI_|PMPI_)' | head -3)
    [ -z "$bad" ] || fail "$(basename "$lib") needs $bad"
done
needed=$(readelf -d "$CB/typedecide" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | tr '\n' ' ')
case "$needed" in *microhttpd* | *mpi*) fail "the tool links: $needed" ;; esac
needed=$(readelf -d "$CB/tests/test_engine" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
for so in $needed; do
    case "$so" in libc.so.* | libm.so.* | libpthread.so.* | ld-linux*.so.* | libgcc_s.so.* | libpcre2-8.so.* | \
        libutf8proc.so.* | libjansson.so.*) ;;
    *) fail "test_engine (linked with typedecide_core alone) needs $so: the core links only PCRE2, utf8proc, jansson, threads, libm" ;;
    esac
done

# the core installed alone: its library, its one header, its pkg-config file
CP="$CB/prefix-core"
rm -rf "$CP"
if cmake --install "$CB" --prefix "$CP" --component core >"$CB/install-core.log" 2>&1; then
    got=$(cd "$CP" && find . -type f -o -type l | sed 's|^\./||' | sort | tr '\n' ' ')
    want="include/typedecide.h lib/libtypedecide_core.a lib/pkgconfig/typedecide_core.pc "
    [ "$got" = "$want" ] || fail "cmake --install --component core installed '$got' (want '$want')"
    cmp -s "$ROOT/include/typedecide.h" "$CP/include/typedecide.h" || fail "the installed core header differs from include/typedecide.h"
    libs=$(PKG_CONFIG_LIBDIR="$CB/pkgconfig:$CP/lib/pkgconfig" pkg-config --static --libs typedecide_core 2>&1)
    case "$libs" in *microhttpd* | *mpi* | *-ltypedecide\ * | *-ltypedecide) fail "typedecide_core.pc links more than the core: $libs" ;; esac
    if cc -std=c11 "$ROOT/examples/decide.c" $(PKG_CONFIG_LIBDIR="$CB/pkgconfig:$CP/lib/pkgconfig" pkg-config --static \
        --cflags --libs typedecide_core) -o "$CB/decide-core-example" 2>"$CB/example.err"; then
        (cd "$ROOT" && "$CB/decide-core-example" models/demo-qwen3 models/demo/ticket.txt models/demo/criteria.jsonl) \
            >"$CB/decide.example.jsonl" 2>"$CB/example.run.err" || fail "examples/decide.c on the core failed: $(tail -2 "$CB/example.run.err")"
    else
        fail "examples/decide.c does not build against the installed core: $(head -3 "$CB/example.err")"
    fi
else
    fail "cmake --install --component core failed: $(tail -3 "$CB/install-core.log")"
fi

# the core's tests
for t in test_strbuf test_tokenizer test_engine; do
    (cd "$ROOT" && TD_ROOT="$ROOT" "$CB/tests/$t" >"$CB/$t.log" 2>&1) || fail "$t failed in the core-only build: $(tail -3 "$CB/$t.log")"
done

# decide on the demo model: the same lines as the full build's tool
args=(decide --model "$ROOT/models/demo-qwen3" --evidence "$ROOT/models/demo/ticket.txt"
      --criteria "$ROOT/models/demo/criteria.jsonl" --quiet)
"$CB/typedecide" "${args[@]}" 2>"$CB/decide.err" | sed 's/,"ms":[0-9.]*//' >"$CB/decide.core.jsonl" ||
    fail "decide failed in the core-only build: $(tail -3 "$CB/decide.err")"
"$BIN" "${args[@]}" 2>/dev/null | sed 's/,"ms":[0-9.]*//' >"$CB/decide.full.jsonl"
[ -s "$CB/decide.core.jsonl" ] && cmp -s "$CB/decide.core.jsonl" "$CB/decide.full.jsonl" ||
    fail "decide on the demo model differs from the full build's: $(diff "$CB/decide.core.jsonl" "$CB/decide.full.jsonl" | head -4)"

[ -s "$CB/decide.example.jsonl" ] && { cmp -s "$CB/decide.example.jsonl" "$CB/decide.full.jsonl" ||
    fail "examples/decide.c on the installed core differs from the tool's decide: $(diff "$CB/decide.example.jsonl" "$CB/decide.full.jsonl" | head -4)"; }

# serve: refused with the reason, before any model is loaded (the model named does not even exist)
"$CB/typedecide" serve --model "$CB/no-such-model" --port 0 >/dev/null 2>"$CB/serve.err"
rc=$?
[ $rc = 1 ] || fail "serve in a build without the server: status $rc (want 1)"
grep -q "built without the HTTP server (libmicrohttpd was not found" "$CB/serve.err" ||
    fail "serve did not say it was built without the server: $(head -2 "$CB/serve.err")"
grep -q "no-such-model" "$CB/serve.err" && fail "serve tried to load the model before saying it has no server"
# (its text taken whole first: under pipefail, grep -q leaving at the first line would end the writer with SIGPIPE)
help=$("$CB/typedecide" serve --help) || fail "serve --help: status $?"
grep -q "usage: typedecide serve" <<<"$help" || fail "serve --help no longer prints the usage"

[ "$fails" -eq 0 ] && echo "test_core_only: configured and built without libmicrohttpd and MPI; the core installs alone (its one header) and its example decides; core tests, decide and serve's refusal hold"
exit $((fails > 0))
