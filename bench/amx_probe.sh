#!/usr/bin/env bash
# Where the AMX kernel's time goes, on the GPU host's CPU (the one CPU here with AMX), in one short device call:
# bench/amx_probe.c times src/kernels/cpu/matmul_r16_amx.c as it is in the working tree ("full", checked against the
# reference), as committed at PREV (default HEAD: "prev", also checked), and variants of the working tree's made here
# by text substitution, each taking one part out (their results are wrong by design):
#   noepi      no AVX-512 epilogue (the tile products and the stores of their sums stay)
#   nostore    neither the stores of the sums nor the epilogue (tile loads and products only)
#   zerostart  every block's sums start from a zeroed tile (no tile load of the offset sums)
#   onelevel   Q8_0 with one activation level (half the tile products, no shift-add in the epilogue)
#   nostage    the activations staged once, not per chunk of blocks (reads stale tiles)
# The calls so far, on the kernel as it was then (two slabs sharing the activation tiles, then a block-behind epilogue,
# then one slab in a three-stage pipeline): bench/results/amx-probe-xeon16-amx.json.
#
#   here    bench/amx_probe.sh --prepare      builds build-amx-probe/amx_probe (git-ignored) against build/'s library
#   device  run(command="bash bench/amx_probe.sh", carry=["build-amx-probe"])
#           prints one JSON line per variant and shape: gate/up (3072 x 1024) and down (1024 x 3072) at 256 tokens,
#           and gate/up at 48 tokens (a criterion's suffix), one thread.
set -euo pipefail
cd "$(dirname "$0")/.."
D=build-amx-probe
if [ "${1:-}" = "--prepare" ]; then
    rm -rf $D && mkdir -p $D
    K=src/kernels/cpu/matmul_r16_amx.c
    git show "${PREV:-HEAD}:$K" >$D/prev.c
    python3 - "$K" "$D" <<'EOF'
import sys
src, out = open(sys.argv[1]).read(), sys.argv[2]
def sub(s, old, new):
    assert old in s, old
    return s.replace(old, new)
epi = "        for (int t = 0; t < M; t++) {\n            __m512i P"
v = {"full": src, "prev": open(f"{out}/prev.c").read()}
v["noepi"] = sub(src, epi, epi.replace("t < M", "t < 0"))
v["nostore"] = sub(v["noepi"], "            if ((b - 1) & 1) SUMS(C1B, C2B, 1);\n            else SUMS(C1A, C2A, 0);", "")
v["zerostart"] = sub(src, "        if (last) TILE_LOAD(c, st->noff[b], 64); \\", "        if (0) TILE_LOAD(c, st->noff[b], 64); \\")
v["onelevel"] = src.replace("const int two = type == TD_DTYPE_Q8_0;", "const int two = 0;")
assert v["onelevel"] != src
v["nostage"] = sub(src, "                stage_tokens(&st, xq, two, o, t0, m, c0, kc);",
                   "                if (c0 == 0 && t0 == 0) stage_tokens(&st, xq, two, o, t0, m, c0, kc);")
for name, text in v.items():
    open(f"{out}/amx_{name}.c", "w").write(text)
print(" ".join(v))
EOF
    names="full prev noepi nostore zerostart onelevel nostage"
    flags="-O3 -mavx2 -mfma -mf16c -mavx512f -mavx512bw -mavx512vl -mavx512vnni -mamx-tile -mamx-int8 -ffp-contract=off -Isrc -Iinclude"
    objs=""
    list=""
    for n in $names; do
        gcc $flags -Dtd_matmul_r16_amx=td_matmul_r16_amx_$n -Dtd_matmul_amx=td_matmul_amx_$n -c $D/amx_$n.c -o $D/amx_$n.o
        objs="$objs $D/amx_$n.o"
        list="$list X($n)"
    done
    gcc -O2 -Isrc -Iinclude "-DAMX_PROBE_VARIANTS(X)=$list" bench/amx_probe.c $objs build/libtypedecide.a -ljansson -lm -lpthread \
        -o $D/amx_probe
    echo "built $D/amx_probe: $names" >&2
    exit 0
fi
lscpu | grep -E 'Model name|^CPU\(s\)' >&2
for shape in "--rows 3072 --cols 1024 --tokens 256" "--rows 1024 --cols 3072 --tokens 256" "--rows 3072 --cols 1024 --tokens 48"; do
    $D/amx_probe $shape --reps 7
done
