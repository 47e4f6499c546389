#!/usr/bin/env bash
# Byte-identical outputs: decide, evaluate (table, results JSON, predictions, plot), metrics, export (file
# checksums), inspect, savings, tokenize, logits and generate on the fixtures, against tests/golden/expected/,
# written by tests/golden/make.sh with the code as it was before the library refactor of issue 12 (commit
# "tests/golden: outputs before the refactor"). Kernels are pinned (avx2, and scalar for decide), wall-clock
# figures normalised. Release build only: the sanitizer build runs the same code paths in the other tests.
set -uo pipefail
ROOT=${TD_ROOT:-$(cd "$(dirname "$0")/.." && pwd)}
BIN=${TD_BIN:-$ROOT/build/typedecide}
if [ -n "${TD_SANITIZED:-}" ]; then echo "skipped in the sanitizer build"; exit 0; fi
if ! grep -qw avx2 /proc/cpuinfo; then echo "skipped: this CPU has no AVX2 (the files were made with its kernels)"; exit 0; fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
bash "$ROOT/tests/golden/make.sh" "$BIN" "$tmp/out" || { echo "FAIL: tests/golden/make.sh failed" >&2; exit 1; }
if diff -r "$ROOT/tests/golden/expected" "$tmp/out" >"$tmp/diff"; then
    echo "golden: $(find "$tmp/out" -type f | wc -l) files byte-identical"
    exit 0
fi
head -n 60 "$tmp/diff" >&2
echo "FAIL: outputs differ from tests/golden/expected" >&2
exit 1
