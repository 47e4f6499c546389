#!/usr/bin/env bash
# Speed before and after a change of the forward pass, in one run (issue 42: the architecture description must cost
# Qwen3 and Qwen3.5 nothing). Two builds of typedecide, the same synthetic checkpoints, the same thread count; ROUNDS
# rounds, each running every measurement on both builds in a new order (A B, then B A, ...), so that a change of the
# machine's load hits both alike.
#
#   here    bench/arch_ab.sh --prepare [BASE]       (BASE: a commit, default ef352a0, the tree before the description)
#           builds BASE in a scratch worktree and the working tree, both Release without MPI, into build-arch-ab/
#           (git-ignored) with the libraries the GPU host lacks and the real Qwen3 tokenizer (xz).
#   run     bench/arch_ab.sh                        (here, or on the device: carry=["build-arch-ab"])
#           synth qwen3-0.6b and qwen3.5-0.8b (BF16), then per round and model: bench prefill 512, decode 64, decide
#           --serial (one criterion of 45 tokens over a 256-token evidence) with both builds. One JSON line per
#           measurement in $OUT/arch_ab.jsonl; $OUT/arch_ab.json: per model and measurement the median of each build
#           over the rounds, the ratio new/base and the spread (max/min - 1 of each build's own rounds).
# Environment: THREADS (2), ROUNDS (3), OUT (/tmp/arch-ab-out), WORK (scratch), PIN ("taskset -c 0-N" when set).
set -uo pipefail
cd "$(dirname "$0")/.."
B=build-arch-ab

if [ "${1:-}" = "--prepare" ]; then
    set -e
    . bench/bundle.sh
    BASE=${2:-ef352a0}
    W=${TMPDIR:-/tmp}/td-arch-base
    rm -rf "$W" && git worktree prune && git worktree add -q --detach "$W" "$BASE"
    trap 'git worktree remove --force "$W"' EXIT
    rm -rf $B && mkdir -p $B/lib
    for side in base new; do
        src=$PWD
        [ $side = base ] && src=$W
        cmake -S "$src" -B "$B/build-$side" -DCMAKE_BUILD_TYPE=Release -DCMAKE_DISABLE_FIND_PACKAGE_MPI=ON >/dev/null
        cmake --build "$B/build-$side" --target typedecide_cli -j"$(nproc)" >/dev/null
        cp "$B/build-$side/typedecide" "$B/typedecide-$side"
        rm -rf "$B/build-$side"
    done
    strip "$B/typedecide-base" "$B/typedecide-new"
    bundle_libs "$B/typedecide-new" "$B/lib"
    bundle_tokenizer "$B"
    echo "base $(git rev-parse "$BASE"), new $(git rev-parse HEAD)$(git diff --quiet HEAD -- src || echo ' (with uncommitted changes)')" >$B/manifest.txt
    du -sh $B >&2
    exit 0
fi

THREADS=${THREADS:-2}
ROUNDS=${ROUNDS:-3}
OUT=${OUT:-${TMPDIR:-/tmp}/arch-ab-out}
WORK=${WORK:-${TMPDIR:-/tmp}/td-arch-ab}
mkdir -p "$OUT" "$WORK"
export LD_LIBRARY_PATH=$PWD/$B/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
LOG=$OUT/arch_ab.jsonl
: >"$LOG"
NEW=$PWD/$B/typedecide-new
TOK=$WORK/tokenizer.json # the real Qwen3 tokenizer: decide needs the letters
[ -s "$TOK" ] || xz -dc "$B/tokenizer.json.xz" >"$TOK"
for preset in qwen3-0.6b qwen3.5-0.8b; do
    [ -f "$WORK/$preset/tokenizer.json" ] ||
        "$NEW" synth --preset $preset --out "$WORK/$preset" --tokenizer "$TOK" --force >/dev/null 2>&1 ||
        { echo "arch_ab: synth $preset failed" >&2; exit 1; }
done
measure() { # BUILD MODEL WHAT ARGS...
    local build=$1 model=$2 what=$3
    shift 3
    local j
    j=$(${PIN:-} "$PWD/$B/typedecide-$build" bench "$@" --model "$WORK/$model" --threads "$THREADS" --repeat 3 2>/dev/null) ||
        { echo "arch_ab: $build $model $what failed" >&2; return; }
    echo "{\"build\": \"$build\", \"model\": \"$model\", \"what\": \"$what\", \"round\": $round, \"load\": \"$(cut -d' ' -f1 /proc/loadavg)\", \"bench\": $j}" >>"$LOG"
}
for round in $(seq 1 "$ROUNDS"); do
    order="base new"
    [ $((round % 2)) = 0 ] && order="new base"
    for model in qwen3-0.6b qwen3.5-0.8b; do
        for b in $order; do measure $b $model prefill prefill --tokens 512; done
        for b in $order; do measure $b $model decode decode --tokens 64; done
        for b in $order; do measure $b $model decide decide --serial --criteria 16; done
    done
    echo "arch_ab: round $round done" >&2
done
python3 - "$LOG" "$OUT/arch_ab.json" "$THREADS" "$(cat $B/manifest.txt 2>/dev/null)" <<'PY'
import json, statistics, sys, platform
rows = [json.loads(l) for l in open(sys.argv[1])]
def value(r):
    b = r["bench"]
    if r["what"] == "decide":
        return b.get("suffix_ms_per_criterion") or b.get("ms_per_criterion")
    return b.get("tokens_per_s")
out = {"command": "bench/arch_ab.sh", "threads": int(sys.argv[3]), "builds": sys.argv[4],
       "cpu": next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), ""),
       "flags": next((l.split(":", 1)[1].split() for l in open("/proc/cpuinfo") if l.startswith("flags")), []),
       "unit": {"prefill": "tokens/s (median of 3)", "decode": "tokens/s (median of 3)",
                "decide": "ms per criterion suffix over the prefilled evidence (lower is better)"},
       "results": {}}
out["flags"] = [f for f in out["flags"] if f.startswith(("avx", "amx", "fma", "f16c"))]
for model in sorted({r["model"] for r in rows}):
    for what in ("prefill", "decode", "decide"):
        v = {b: [value(r) for r in rows if r["model"] == model and r["what"] == what and r["build"] == b] for b in ("base", "new")}
        v = {b: [x for x in xs if x] for b, xs in v.items()}
        if not v["base"] or not v["new"]:
            continue
        mb, mn = statistics.median(v["base"]), statistics.median(v["new"])
        out["results"][f"{model} {what}"] = {"base": mb, "new": mn, "new/base": round(mn / mb, 4),
            "spread_base": round(max(v["base"]) / min(v["base"]) - 1, 4), "spread_new": round(max(v["new"]) / min(v["new"]) - 1, 4),
            "rounds": {"base": v["base"], "new": v["new"]}}
json.dump(out, open(sys.argv[2], "w"), indent=1)
for k, r in out["results"].items():
    print(f"{k:28s} base {r['base']:9.2f} new {r['new']:9.2f} new/base {r['new/base']:.3f} (spread {r['spread_base']:.3f} / {r['spread_new']:.3f})")
PY
