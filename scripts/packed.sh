#!/usr/bin/env bash
# The large binary files of models/ and fixtures/ (weights: *.safetensors, *.gguf over 256 KB) are kept in git as
# FILE.xz, and FILE itself is ignored (.gitignore): the tracked tree stays under 48 MB, and what travels to the GPU
# machine with it too. Every build unpacks them (CMakeLists.txt runs `packed.sh unpack` before anything else), and
# the scripts that run on the GPU machine call it first.
#   bash scripts/packed.sh unpack        FILE from FILE.xz wherever FILE is missing or older than FILE.xz (a pull
#                                        that changed FILE.xz); quiet when there is nothing to do
#   bash scripts/packed.sh pack FILE...  FILE.xz from FILE (FILE stays), and FILE into .gitignore: for a new or
#                                        regenerated checkpoint or GGUF; then `git add FILE.xz .gitignore`
#   bash scripts/packed.sh check         every such file is packed, and each FILE equals its FILE.xz (exit 1 if not)
# Uses xz, or Python's lzma where xz is missing (the GPU machine).
set -euo pipefail
cd "$(dirname "$0")/.."
LIMIT=262144
say() { printf 'packed: %s\n' "$*" >&2; }

unxz_to() { # unxz_to SRC.xz DEST: DEST written whole beside itself, then renamed
    local tmp
    tmp=$(mktemp "$2.XXXXXX")
    if command -v xz >/dev/null 2>&1; then
        xz -dc "$1" >"$tmp" || { rm -f "$tmp"; say "cannot unpack $1"; return 1; }
    else
        python3 -c 'import lzma, shutil, sys
with lzma.open(sys.argv[1]) as f, open(sys.argv[2], "wb") as o: shutil.copyfileobj(f, o)' "$1" "$tmp" ||
            { rm -f "$tmp"; say "cannot unpack $1 (no xz, and python3's lzma failed)"; return 1; }
    fi
    chmod 644 "$tmp"
    mv -f "$tmp" "$2"
    touch -r "$1" "$2" # as old as its source: unpacked again only when FILE.xz changes
}

packed_list() { find models fixtures -type f -name '*.xz' \( -name '*.safetensors.xz' -o -name '*.gguf.xz' \) | sort; }

case "${1:-unpack}" in
unpack)
    n=0
    while IFS= read -r z; do
        f=${z%.xz}
        if [ ! -f "$f" ] || [ "$z" -nt "$f" ]; then
            unxz_to "$z" "$f"
            n=$((n + 1))
        fi
    done < <(packed_list)
    [ "$n" = 0 ] || say "unpacked $n file(s)"
    ;;
pack)
    shift
    [ $# -gt 0 ] || { say "usage: packed.sh pack FILE..."; exit 2; }
    command -v xz >/dev/null 2>&1 || { say "pack needs xz (apt-get install xz-utils)"; exit 1; }
    for f in "$@"; do
        [ -f "$f" ] || { say "$f: no such file"; exit 1; }
        case "$f" in models/* | fixtures/*) ;; *) say "$f: only files under models/ and fixtures/ are packed"; exit 1 ;; esac
        xz -6 -T1 -c "$f" >"$f.xz.tmp" && mv -f "$f.xz.tmp" "$f.xz"
        touch -r "$f.xz" "$f"
        grep -qxF "/$f" .gitignore || echo "/$f" >>.gitignore
        say "$f.xz: $(stat -c %s "$f") -> $(stat -c %s "$f.xz") bytes"
    done
    ;;
check)
    bad=0
    while IFS= read -r f; do
        [ "$(stat -c %s "$f")" -gt "$LIMIT" ] || continue
        if [ ! -f "$f.xz" ]; then
            say "$f: over 256 KB and not packed (bash scripts/packed.sh pack $f)"
            bad=1
        fi
    done < <(find models fixtures -type f \( -name '*.safetensors' -o -name '*.gguf' \) | sort)
    while IFS= read -r z; do
        f=${z%.xz}
        if [ ! -f "$f" ]; then
            say "$f: not unpacked (bash scripts/packed.sh unpack)"
            bad=1
        elif ! xz -dc "$z" | cmp -s - "$f"; then
            say "$f differs from $z (regenerated? bash scripts/packed.sh pack $f)"
            bad=1
        fi
        grep -qxF "/$f" .gitignore || { say "$f: not in .gitignore"; bad=1; }
    done < <(packed_list)
    exit "$bad"
    ;;
-h | --help | help) sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//' ;;
*) say "unknown command '$1' (unpack, pack FILE..., check)"; exit 2 ;;
esac
