#!/usr/bin/env bash
# The AVX2 x8 kernel (src/kernels/cpu/matmul_x8_avx2.c, with its packing and quantisers) of the working tree against
# PREV's (default HEAD), one thread: bench/x8_probe.c linked with build/'s library ("new") and with a library built
# from PREV in build-x8-probe/ (git-ignored), run in alternation ROUNDS times (default 3) per shape, each run
# checked against td_matmul_x8_ref. Shapes: gate/up (3072 x 1024) and down (1024 x 3072) at 512 tokens (prefill),
# gate/up at 45 tokens (a criterion's suffix) and at 1 token (decode), for TYPES (default "q8_0 q4_0"). Needs an
# AVX2 CPU and `make` done.
#
#   bash bench/x8_probe.sh [--reps N]     (JSON lines on stdout)
set -euo pipefail
cd "$(dirname "$0")/.."
D=build-x8-probe
rm -rf $D && mkdir -p $D
git worktree add -q --detach $D/src "${PREV:-HEAD}"
trap 'git worktree remove --force $D/src' EXIT
cmake -S $D/src -B $D/build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build $D/build --target typedecide -j2 >/dev/null
lib=$(find $D/build -name libtypedecide.a | head -1)
for v in new prev; do
    L=build/libtypedecide.a I=src
    [ $v = prev ] && L=$lib I=$D/src/src
    gcc -O2 -I$I -Iinclude bench/x8_probe.c $L -ljansson -lm -lpthread -o $D/x8_probe_$v
done
for type in ${TYPES:-q8_0 q4_0}; do
    for shape in "--rows 3072 --cols 1024 --tokens 512" "--rows 1024 --cols 3072 --tokens 512" \
        "--rows 3072 --cols 1024 --tokens 45" "--rows 3072 --cols 1024 --tokens 1"; do
        for round in $(seq "${ROUNDS:-3}"); do
            for v in new prev; do $D/x8_probe_$v --type $type $shape --name $v "$@"; done
        done
    done
done
