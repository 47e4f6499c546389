#!/usr/bin/env bash
# Which products' bf16 rounding moves the logits (issue 17's bf16 parity line): the CPU engine (avx2 kernels, fp32)
# with the inputs of chosen classes of products rounded to bf16 (nearest even), against transformers' fp32 logits on
# every fixture, by test_fixtures' own comparison. Rounding every class reproduces the GPU's --precision bf16 figures
# (bench/results/cuda-h200.json). The rounding hook is bench/bf16_products.patch (a global class tag and a rounded copy
# of a product's input, TD_EXP_ROUND = the mask of classes kept in fp32), applied to a scratch worktree; nothing of it
# is in the library. Classes: 1 head, 2 DeltaNet in_proj_a/b, 4 DeltaNet in_proj_qkv/z, 8 DeltaNet out_proj,
# 16 attention q/k/v, 32 attention o, 64 MLP gate/up, 128 MLP down.
#   bench/bf16_products.sh > bench/results/bf16-products.txt      (~1 minute here)
set -euo pipefail
cd "$(dirname "$0")/.."
W=${WORK:-/tmp/td-bf16-products}
# The hook is written against the engine of ba4ccb2 (its block files have been renamed and rewritten since): the
# measurement is of that engine, checked out whole (BASE=REV for another the patch applies to).
rm -rf "$W" && git worktree prune && git worktree add -q --detach "$W" "${BASE:-ba4ccb2}"
trap 'git worktree remove --force "$W"' EXIT
git -C "$W" apply "$PWD/bench/bf16_products.patch"
cmake -S "$W" -B "$W/build" -DCMAKE_BUILD_TYPE=Release -DCMAKE_DISABLE_FIND_PACKAGE_MPI=ON >/dev/null
cmake --build "$W/build" --target test_fixtures -j"$(nproc)" >/dev/null
echo "max |logit - transformers fp32| per fixture (avx2 kernels), products of the classes NOT in the mask rounded to bf16"
for mask in 0 1 3 8 16 32 64 128 4 $((255 - 1)) $((255 - 2)) $((255 - 4)) $((255 - 8)) $((255 - 16)) $((255 - 32)) \
    $((255 - 64)) $((255 - 128)) 255; do
    (cd "$W" && TD_EXP_ROUND=$mask TD_ROOT=$W ./build/tests/test_fixtures 2>&1 || true) |
        grep '(avx2): max |logit - transformers| =' | python3 -c "
import re, sys
d = {}
for l in sys.stdin:
    f = re.search(r'tol: (\S+) prompt', l).group(1)
    d[f] = max(d.get(f, 0), float(re.search(r'= ([0-9.e+-]+) at', l).group(1)))
print('kept fp32 %3d:' % $mask, ' '.join('%s %.4f' % (k, v) for k, v in sorted(d.items())),
      ' max %.4f' % max(d.values()) if d else ' all within 1e-4')"
done
