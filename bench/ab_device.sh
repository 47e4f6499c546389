#!/usr/bin/env bash
# Builds of typedecide side by side on the GPU host's CPU (16-core Intel Xeon with AMX), llama.cpp built there in
# the same call, at one thread count (default 2), in ONE device call: for a kernel change that only that CPU can
# time. Two halves:
#
#   here    bench/ab_device.sh --prepare [NAME=CFLAGS ...]
#           fills build-ab/ (git-ignored): "base", a release build of the committed HEAD, or of BASE (a commit), in a
#           scratch worktree;
#           "new", the working tree; one more build of the working tree per NAME=CFLAGS (e.g. mint16=-DAMX_MIN_T=16,
#           a compile-time variant); test_kernels of the working tree; the libraries the host lacks; llama.cpp's
#           source (bench/bundle.sh); the tokenizer; bench/membw.c is in the tree and compiled there.
#   device  run(command="OUT=\$OUT bash bench/ab_device.sh", carry=["build-ab"], timeout_s=590)
#           builds llama-bench (GGML_NATIVE=ON) while test_kernels runs on the real tiles and the synthetic
#           qwen3-0.6b is made and exported (Q8_0, Q4_0); then ROUNDS rounds (default 2), each: per quant, llama-bench
#           -p 512 -n 64 and -p 45 -n 0 -d 256, then every build's prefill 512, one criterion (bench decide
#           --serial: a 45-token suffix over a 256-token evidence) and decode 64, the builds in a new order each
#           round; then the read bandwidth of 1, 2, 4, 8, 16 threads streaming 639 MB (membw), the ceiling of a
#           Q8_0 decode. One JSON line per measurement in $OUT/ab.jsonl, with the load average; $OUT/ab.json the
#           medians and ratios. A step still to start once BUDGET_S (default 540 s) is spent is skipped.
# Environment: THREADS (2; a list such as "1 2 4" measures every step at each count, and ab.json's table is then
# keyed by "<T> threads"), STEPS (ours measured: "prefill decide decode" by default; without prefill, llama-bench
# runs -p 0 -n 64, without decide, no -d 256 run), ROUNDS (2), QUANTS ("q8_0 q4_0"), NO_DECODE (builds measured
# without decode: variants of the batch kernels only), BUILDS (the builds measured, default all; "" with SETS measures
# forced sets alone), LLAMA_NATIVE (OFF: llama.cpp built with ggml's portable AVX2 set, the peer of SETS=avx2 where
# no AVX2-only machine is at hand), SETS (kernel sets the "new" build also runs forced, TD_KERNELS, measured as new@SET:
# the default against the others; an entry BUILD@SET forces SET on that build, e.g. base@avx512bf16), BUDGET_S, OUT,
# WORK.
set -uo pipefail
cd "$(dirname "$0")/.."
. bench/bundle.sh
B=build-ab

if [ "${1:-}" = "--prepare" ]; then
    set -e
    shift
    W=${TMPDIR:-/tmp}/td-ab-base
    rm -rf "$W" && git worktree prune && git worktree add -q --detach "$W" "${BASE:-HEAD}"
    trap 'git worktree remove --force "$W"' EXIT
    rm -rf $B && mkdir -p $B/lib
    build() { # SRC BUILD-DIR NAME CFLAGS TARGETS...
        local src=$1 dir=$2 name=$3 flags=$4
        shift 4
        cmake -S "$src" -B "$dir" -DCMAKE_BUILD_TYPE=Release -DCMAKE_DISABLE_FIND_PACKAGE_MPI=ON \
            -DCMAKE_C_FLAGS="$flags" >/dev/null
        cmake --build "$dir" --target "$@" -j"$(nproc)" >/dev/null
        cp "$dir/typedecide" "$B/typedecide-$name" && strip "$B/typedecide-$name"
        echo "$name: $(git -C "$src" rev-parse --short HEAD)${flags:+ CFLAGS=$flags}" >>$B/builds.txt
    }
    build "$W" "$W/build" base "" typedecide_cli
    build . build-nompi new "" typedecide_cli test_kernels
    cp build-nompi/tests/test_kernels $B/ && strip $B/test_kernels
    git diff --quiet HEAD -- src include cli || echo "new: with uncommitted changes" >>$B/builds.txt
    for v in "$@"; do build . "build-ab-${v%%=*}" "${v%%=*}" "${v#*=}" typedecide_cli; done
    bundle_libs $B/typedecide-new $B/lib
    bundle_llama_src $B
    bundle_tokenizer $B
    cat $B/builds.txt >&2
    du -sh $B >&2
    exit 0
fi

START=$(date +%s)
BUDGET_S=${BUDGET_S:-540}
THREAD_LIST=${THREADS:-2}
STEPS=${STEPS:-prefill decide decode}
has() { [[ " $STEPS " == *" $1 "* ]]; }
ROUNDS=${ROUNDS:-2}
QUANTS=${QUANTS:-q8_0 q4_0}
OUT=${OUT:-$PWD/ab-out}
WORK=${WORK:-${TMPDIR:-/tmp}/td-ab}
CORES=$(nproc)
mkdir -p "$OUT" "$WORK"
L=$OUT/ab.jsonl
: >"$L"
export LD_LIBRARY_PATH=$PWD/$B/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
say() { echo "ab [$(($(date +%s) - START)) s]: $*" >&2; }
left() { echo $((BUDGET_S - ($(date +%s) - START))); }
skipped=""
# measure STEP BUILD QUANT MIN_LEFT COMMAND...: one JSON line (the command's JSON output, or null)
measure() {
    local step=$1 build=$2 q=$3 need=$4
    shift 4
    if [ "$(left)" -lt "$need" ]; then
        skipped="$skipped${skipped:+, }$step/$build/$q"
        return
    fi
    local res cmd=${*//\"/\\\"}
    res=$(timeout "$(left)" "$@" 2>>"$WORK/stderr" | tr '\n' ' ') || res=null
    [ -n "$res" ] || res=null
    printf '{"step": "%s", "build": "%s", "quant": "%s", "threads": %d, "s": %d, "load": "%s", "command": "%s", "result": %s}\n' \
        "$step" "$build" "$q" "$T" $(($(date +%s) - START)) "$(cut -d' ' -f1-3 /proc/loadavg)" "$cmd" "$res" >>"$L"
}
BUILDS=${BUILDS-$(cd $B && ls typedecide-* | sed 's/^typedecide-//' | tr '\n' ' ')}
{
    echo "== lscpu"; lscpu 2>/dev/null
    echo "== flags"; grep -m1 flags /proc/cpuinfo
    echo "== builds"; cat $B/builds.txt; echo "measured: ${BUILDS:-none} ${SETS:-}; llama.cpp GGML_NATIVE=${LLAMA_NATIVE:-ON}"
    for b in $BUILDS; do echo "== $b"; $B/typedecide-$b --version; done
} >"$OUT/machine.txt" 2>&1
say "$CORES cores, builds: $BUILDS"

LLAMA=$WORK/llama.cpp/build/bin/llama-bench
if [ ! -x "$LLAMA" ]; then
    bundle_llama_build $B "$WORK" "$CORES" >"$OUT/llama-build.log" 2>&1 &
    build_pid=$!
fi
$B/test_kernels >"$OUT/test_kernels.log" 2>&1
echo "{\"step\": \"test_kernels\", \"rc\": $?, \"amx_lines\": $(grep -c ' amx ' "$OUT/test_kernels.log")}" >>"$L"
cc -O2 -march=native -pthread bench/membw.c -o "$WORK/membw" 2>>"$WORK/stderr"
xz -dc $B/tokenizer.json.xz >"$WORK/tok.json"
[ -f "$WORK/m/model.safetensors" ] || $B/typedecide-new synth --preset qwen3-0.6b --tokenizer "$WORK/tok.json" \
    --out "$WORK/m" >/dev/null 2>&1
for q in $QUANTS; do
    [ -s "$WORK/$q.gguf" ] || $B/typedecide-new export --model "$WORK/m" --quant "$q" -o "$WORK/$q.gguf" >/dev/null 2>&1
done
say "models ready"
[ -n "${build_pid:-}" ] && { wait "$build_pid" || say "llama-bench build failed"; }
[ -x "$LLAMA" ] || LLAMA=
say "llama-bench: ${LLAMA:-none}"

for round in $(seq "$ROUNDS"); do
    order=$BUILDS
    [ $((round % 2)) = 0 ] && order=$(echo "$BUILDS" | tr ' ' '\n' | tac | tr '\n' ' ')
    for T in $THREAD_LIST; do
    for q in $QUANTS; do
        M=$WORK/$q.gguf
        pp=512
        has prefill || pp=0
        [ -n "$LLAMA" ] && measure llama_pp512_tg64 llama.cpp "$q" 30 "$LLAMA" -m "$M" -t "$T" -p $pp -n 64 -r 2 -o json
        [ -n "$LLAMA" ] && has decide &&
            measure llama_p45_d256 llama.cpp "$q" 15 "$LLAMA" -m "$M" -t "$T" -p 45 -n 0 -d 256 -r 3 -o json
        for b in $order $(for s in ${SETS:-}; do case $s in *@*) echo "$s" ;; *) echo "new@$s" ;; esac; done); do
            bin=$B/typedecide-${b%@*} env=()
            [ "$b" = "${b#*@}" ] || env=(TD_KERNELS="${b#*@}")
            has prefill && measure prefill "$b" "$q" 15 env ${env[@]+"${env[@]}"} "$bin" bench prefill --model "$M" \
                --tokens 512 --threads "$T" --repeat 2
            has decide && measure decide_serial "$b" "$q" 15 env ${env[@]+"${env[@]}"} "$bin" bench decide --model "$M" \
                --prefix 256 --criteria 8 --suffix 45 --options 4 --serial --threads "$T" --repeat 1
            has decode && [[ " ${NO_DECODE:-} " != *" $b "* ]] &&
                measure decode "$b" "$q" 12 env ${env[@]+"${env[@]}"} "$bin" bench decode --model "$M" --tokens 64 \
                    --threads "$T" --repeat 2
        done
    done
    done
    say "round $round done"
done
for t in 1 2 4 8 16; do
    [ "$t" -le "$CORES" ] && measure membw membw q8_0 8 "$WORK/membw" --mb 639 --threads "$t" --repeat 5
done

python3 - "$L" "$OUT/ab.json" "$THREAD_LIST" "$skipped" <<'PY' || say "no python3: the log alone"
import json, sys
log, out, thread_list, skipped = sys.argv[1:5]
threads = thread_list.split()
many = len(threads) > 1
rows = [json.loads(l) for l in open(log) if l.strip()]
vals = {}
def add(q, what, build, v):
    vals.setdefault(q, {}).setdefault(what, {}).setdefault(build, []).append(round(v, 3))
for r in rows:
    res = r.get("result")
    if res is None or "step" not in r or r["step"] == "test_kernels":
        continue
    q, s = r["quant"], r["step"]
    if many and s != "membw":
        q = "%d threads %s" % (r["threads"], q)
    if s == "llama_pp512_tg64":
        for x in res:
            add(q, "prefill_512_tokens_per_s" if x["n_gen"] == 0 else "decode_tokens_per_s", "llama.cpp", x["avg_ts"])
    elif s == "llama_p45_d256":
        add(q, "one_criterion_ms", "llama.cpp", res[0]["avg_ns"] / 1e6)
    elif s == "prefill":
        add(q, "prefill_512_tokens_per_s", r["build"], res["tokens_per_s"])
    elif s == "decode":
        add(q, "decode_tokens_per_s", r["build"], res["tokens_per_s"])
    elif s == "decide_serial":
        add(q, "one_criterion_ms", r["build"], res["suffix_ms_per_criterion"])
    elif s == "membw":
        add("membw", "gb_per_s_median", str(res["threads"]), res["median"])
def median(v):
    v = sorted(v)
    return v[len(v) // 2] if len(v) % 2 else round((v[len(v) // 2 - 1] + v[len(v) // 2]) / 2, 3)
table = {}
for q, whats in vals.items():
    for what, builds in whats.items():
        e = table.setdefault(q, {}).setdefault(what, {})
        for b, v in builds.items():
            e[b] = {"median": median(v), "all": v}
        ref = e.get("llama.cpp", {}).get("median")
        if ref:
            for b, x in e.items():
                if b != "llama.cpp":
                    x["over_llama_cpp"] = round(x["median"] / ref, 3)
bw = {t: x["median"] for t, x in table.get("membw", {}).get("gb_per_s_median", {}).items()}
for t in threads:
    key = "%s threads q8_0" % t if many else "q8_0"
    if bw.get(t) and key in table:  # the decode ceiling: the 639 MB of a Q8_0 token at that bandwidth
        table[key]["decode_ceiling_tokens_per_s"] = round(bw[t] * 1e9 / 639446592, 2)
json.dump({"what": "builds of typedecide and llama.cpp (built here, GGML_NATIVE=ON) at %s threads, synthetic qwen3-0.6b; bench/ab_device.sh" % thread_list,
           "threads": [int(t) for t in threads] if many else int(threads[0]), "skipped": skipped, "table": table},
          open(out, "w"), indent=1)
print(json.dumps(table, indent=1))
PY
say "done${skipped:+; skipped: $skipped}"
