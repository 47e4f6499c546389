#!/usr/bin/env bash
# The weights kept in git as .xz (scripts/packed.sh):
#  1. in this tree, every *.safetensors / *.gguf over 256 KB under models/ and fixtures/ is packed, equals its .xz
#     and is ignored by git; the tracked tree is under 48 MB (what travels to the GPU machine with it);
#  2. in a scratch tree, the script itself: an unpacked large file is refused by check, pack makes it pass, a changed
#     file is caught, unpack restores a deleted one byte for byte (and leaves an up-to-date one alone).
set -uo pipefail
ROOT=${TD_ROOT:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$ROOT"
fails=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }
command -v xz >/dev/null || { echo "test_packed: skipped (xz not installed)"; exit 77; }

bash scripts/packed.sh check || fail "scripts/packed.sh check"
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    bytes=$(git ls-files -z | xargs -0 stat -c %s 2>/dev/null | awk '{s += $1} END {print s + 0}')
    echo "tracked tree: $bytes bytes"
    [ "$bytes" -lt 48000000 ] || fail "the tracked tree is $bytes bytes (48 MB at most: pack large files)"
    while IFS= read -r z; do
        git ls-files --error-unmatch "${z%.xz}" >/dev/null 2>&1 && fail "${z%.xz} is tracked beside its .xz"
    done < <(git ls-files 'models/*.xz' 'fixtures/*.xz')
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/scripts" "$tmp/models/m" "$tmp/fixtures"
cp scripts/packed.sh "$tmp/scripts/"
: >"$tmp/.gitignore"
head -c 300000 /dev/urandom >"$tmp/models/m/model.safetensors"
head -c 1000 /dev/urandom >"$tmp/fixtures/small.gguf"
p() { bash "$tmp/scripts/packed.sh" "$@"; }
p check 2>/dev/null && fail "check passed with a 300 KB checkpoint not packed"
p pack models/m/model.safetensors 2>/dev/null || fail "pack"
(cd "$tmp" && p check) || fail "check after pack"
grep -qx '/models/m/model.safetensors' "$tmp/.gitignore" || fail "pack did not add the file to .gitignore"
cp "$tmp/models/m/model.safetensors" "$tmp/orig"
printf 'x' | dd of="$tmp/models/m/model.safetensors" bs=1 seek=1000 conv=notrunc 2>/dev/null
p check 2>/dev/null && fail "check passed with a file that differs from its .xz"
rm "$tmp/models/m/model.safetensors"
p unpack 2>/dev/null || fail "unpack"
cmp -s "$tmp/orig" "$tmp/models/m/model.safetensors" || fail "unpack did not restore the file byte for byte"
[ -z "$(p unpack 2>&1)" ] || fail "unpack did work on an up-to-date tree"
[ -f "$tmp/fixtures/small.gguf.xz" ] && fail "a small file was packed"
p bogus 2>/dev/null && fail "an unknown command was accepted"

[ "$fails" = 0 ] && echo "test_packed: passed" || { echo "test_packed: $fails FAILED"; exit 1; }
