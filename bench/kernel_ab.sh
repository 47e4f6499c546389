#!/usr/bin/env bash
# The CPU matmul kernels of a base revision against the working tree's, one thread (bench/kernel_ab.c says what is
# timed): for a change that must keep the kernels' speed (as the tile driver, src/kernels/cpu/tile_driver.h). Both
# sides are compiled here with the flags CMake gives the kernel files; the rest comes from a release build's
# libtypedecide_core.a. Prints one JSON line per kernel and token count (new_over_old > 1: the working tree is
# faster) and writes them to bench/results/kernel-ab-<kind>.json (kind: bench/kind.sh).
#   bench/kernel_ab.sh [BASE [REPS]]     BASE default HEAD, REPS default 60; BUILD (default build) the release build
set -euo pipefail
cd "$(dirname "$0")/.."
BASE=${1:-HEAD} REPS=${2:-60} BUILD=${BUILD:-build}
. bench/kind.sh
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
common="-O3 -g -ffp-contract=off -fno-math-errno -D_DEFAULT_SOURCE -Isrc -Iinclude -mavx2 -mfma -mf16c"
avx512="-mavx512f -mavx512bw -mavx512vl -mavx512vnni"
for f in matmul_avx2 matmul_quant_avx2 matmul_x8_avx2 matmul_x16_avx512 matmul_bf16_avx512; do
    flags="$common"
    case $f in *bf16_avx512) flags="$flags $avx512 -mavx512bf16" ;; *avx512) flags="$flags $avx512" ;; esac
    mkdir -p "$work/old/src/kernels/cpu"
    git show "$BASE:src/kernels/cpu/$f.c" > "$work/old/src/kernels/cpu/$f.c"
    # the base's own headers beside its source (a helper header it includes may differ or be absent here)
    for h in $(git ls-tree --name-only "$BASE" src/kernels/cpu/ | grep '\.h$'); do git show "$BASE:$h" > "$work/old/$h"; done
    cc $flags -I"$work/old/src" -c "$work/old/src/kernels/cpu/$f.c" -o "$work/old_$f.o"
    cc $flags -c "src/kernels/cpu/$f.c" -o "$work/new_$f.o"
done
nm "$work"/old_*.o | awk '$2 == "T" {print $3 " old_" $3}' | sort -u > "$work/names"
for o in "$work"/old_*.o; do objcopy --redefine-syms="$work/names" "$o"; done
cc -O2 -D_DEFAULT_SOURCE -Isrc -Iinclude bench/kernel_ab.c "$work"/old_*.o "$work"/new_*.o "$BUILD/libtypedecide_core.a" \
    -ljansson -lutf8proc -lpcre2-8 -lm -lpthread -o "$work/kernel_ab"
mkdir -p bench/results
out=bench/results/kernel-ab-$kind.json
{ "$work/kernel_ab" "$REPS"; "$work/kernel_ab" "$REPS" 512 256; } | tee "$out.tmp"
{ echo "{\"base\": \"$(git rev-parse --short "$BASE")\", \"tree\": \"$(git rev-parse --short HEAD)$(git diff --quiet -- src/kernels/cpu || echo +changes)\", \"reps\": $REPS, \"command\": \"bench/kernel_ab.sh $BASE $REPS\","
  echo " \"rows\": ["; sed '$!s/$/,/' "$out.tmp"; echo "]}"; } > "$out"
rm -f "$out.tmp"
