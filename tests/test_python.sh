#!/usr/bin/env bash
# The Python package (python/) as a user installs it: the library installed into a temporary prefix
# (cmake --install), the package built by Debian's pip from a copy of the tree, offline (--no-index, no build
# isolation: setup.py uses the installed setuptools), into a directory of its own, then its pytest suite
# (python/tests, Debian's python3-pytest) run against that installed package: decisions, logits, generation,
# tokenizer, evaluation, export and savings equal the tool's bit for bit, errors carry the library's message, two
# threads deciding at once give one thread's results, the structs match the header.
set -uo pipefail
ROOT=${TD_ROOT:-$(cd "$(dirname "$0")/.." && pwd)}
BIN=${TD_BIN:-$ROOT/build/typedecide}
BUILD=${TD_BUILD:?TD_BUILD names the build directory}
PY=${TD_PYTHON:-/usr/bin/python3}
if [ -n "${TD_SANITIZED:-}" ]; then
    echo "skipped in the sanitizer build: Debian's python3 cannot load a library built with ASan (it would need" \
        "libasan preloaded); the release build runs it, and the sanitizer build runs the same calls in C tests"
    exit 77
fi
missing=$("$PY" -c 'import numpy, pytest, setuptools, wheel' 2>&1) ||
    { echo "FAIL: $PY lacks numpy, pytest, setuptools or wheel (scripts/setup.sh installs Debian's python3-* packages): $missing" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$BUILD" --prefix "$tmp/prefix" >"$tmp/install.log" 2>&1 || { cat "$tmp/install.log" >&2; echo "FAIL: cmake --install" >&2; exit 1; }
# a copy: pip writes build/ and *.egg-info beside setup.py; setup.py reads ../include for the version
mkdir -p "$tmp/src" && cp -r "$ROOT/python" "$ROOT/include" "$tmp/src/"
PKG_CONFIG_PATH=$tmp/prefix/lib/pkgconfig "$PY" -m pip install --no-index --no-build-isolation --no-deps \
    --disable-pip-version-check --no-cache-dir --quiet --target "$tmp/site" "$tmp/src/python" >"$tmp/pip.log" 2>&1 ||
    { cat "$tmp/pip.log" >&2; echo "FAIL: pip install ./python" >&2; exit 1; }
cd "$ROOT"
# the installed package, which found the installed library through pkg-config at build time
PYTHONPATH=$tmp/site TD_PREFIX=$tmp/prefix TD_BIN=$BIN TD_ROOT=$ROOT PYTHONDONTWRITEBYTECODE=1 \
    "$PY" -m pytest -q -p no:cacheprovider python/tests
