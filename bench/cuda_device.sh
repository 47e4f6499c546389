#!/usr/bin/env bash
# The CUDA backend on the H200 (issue 17), in ONE device call: checks, sanitizers and a first timing table.
#   here    bench/cuda_device.sh --prepare
#           builds with -DTD_CUDA=ON and without MPI into build-cuda-nompi/ (nvcc 13 compiles sm_90 here; the binaries
#           link the CUDA runtime statically) and fills build-cuda-device/ (git-ignored): typedecide, test_cuda_kernels,
#           test_cuda_engine, the libraries the device lacks (libutf8proc, libmicrohttpd), the Qwen3 tokenizer, a
#           manifest. The fixtures and demo models travel with the working tree.
#   device  run(command="bash bench/cuda_device.sh", carry=["build-cuda-device"], timeout_s=590)
# Steps (each step's output in $OUT/steps.log under a "== step" line, one JSON line per step in $OUT/cuda.jsonl: the
# device tool brings back only a few files; a step still to start once BUDGET_S (default 540 s) is spent is skipped
# and listed):
#   kernels    test_cuda_kernels: every kernel against the CPU scalar references, batch invariance
#   engine     test_cuda_engine: fixture parity (transformers, CPU fp32), GPU exactness, decide vs CPU
#   clients    bench/cuda_clients.sh: decide on Q8_0/Q4_0 GGUFs, evaluate, generate, chat and serve with --device cuda,
#              each against the CPU
#   fixture    scripts/fixture_bf16.py: transformers' own BF16 inference against the fixtures' fp32 references
#   memcheck   compute-sanitizer memcheck on a decide run and a generate run (demo-qwen3, demo-qwen35)
#   racecheck  compute-sanitizer racecheck on the decide run (demo-qwen3)
#   timing     synthetic qwen3-0.6b BF16: bench prefill 2048, decode (batch 1), decide 144 x 45 over 256, GPU fp32 and
#              bf16
#   peer       transformers (bf16, sdpa) on the same checkpoint in the same call (scripts/cuda_peer.py)
# Environment: BUDGET_S, OUT (default ./cuda-out), BUNDLE (build-cuda-device), WORK (scratch), STEPS (default all).
set -uo pipefail
cd "$(dirname "$0")/.."
. bench/bundle.sh
BUNDLE=${BUNDLE:-build-cuda-device}

if [ "${1:-}" = "--prepare" ]; then
    set -e
    cmake -S . -B build-cuda-nompi -DCMAKE_BUILD_TYPE=Release -DTD_CUDA=ON -DCMAKE_DISABLE_FIND_PACKAGE_MPI=ON >/dev/null
    cmake --build build-cuda-nompi --target typedecide_cli test_cuda_kernels test_cuda_engine -j"$(nproc)" >/dev/null
    rm -rf "$BUNDLE" && mkdir -p "$BUNDLE/lib"
    cp build-cuda-nompi/typedecide build-cuda-nompi/tests/test_cuda_kernels build-cuda-nompi/tests/test_cuda_engine "$BUNDLE/"
    bundle_libs build-cuda-nompi/typedecide "$BUNDLE/lib"
    bundle_tokenizer "$BUNDLE"
    cat >"$BUNDLE/manifest.txt" <<EOF
typedecide commit $(git rev-parse HEAD)$(git diff --quiet HEAD -- src cli include tests || echo " (with uncommitted changes)")
built on $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), $(ldd --version | head -1), $(/usr/local/cuda/bin/nvcc --version | tail -1)
EOF
    du -sh "$BUNDLE" >&2
    echo "cuda_device: $BUNDLE ready; on the device: run(command=\"bash bench/cuda_device.sh\", carry=[\"$BUNDLE\"], timeout_s=590)" >&2
    exit 0
fi

START=$(date +%s)
BUDGET_S=${BUDGET_S:-540}
OUT=${OUT:-$PWD/cuda-out}
WORK=${WORK:-${TMPDIR:-/tmp}/td-cuda}
STEPS=${STEPS:-kernels engine clients fixture memcheck racecheck timing peer}
mkdir -p "$OUT" "$WORK"
LOG=$OUT/cuda.jsonl
: >"$LOG"
: >"$OUT/steps.log"
B=$PWD/$BUNDLE
BIN=$B/typedecide
export LD_LIBRARY_PATH=$B/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export TD_ROOT=$PWD
say() { echo "cuda [$(($(date +%s) - START)) s]: $*" >&2; }
left() { echo $((BUDGET_S - ($(date +%s) - START))); }
skipped=""
want() { case " $STEPS " in *" $1 "*) return 0 ;; esac; return 1; }
# step NAME MIN_LEFT COMMAND...: runs it with what is left of the budget, its output in $OUT/NAME.log; one JSON line
step() {
    local name=$1 need=$2
    shift 2
    if [ "$(left)" -lt "$need" ]; then
        skipped="$skipped${skipped:+, }$name"
        say "skip $name ($(left) s left)"
        return 1
    fi
    say "$name: $*"
    local t0 rc
    t0=$(date +%s%N)
    timeout "$(left)" "$@" >"$WORK/$name.log" 2>&1
    rc=$?
    { echo "== $name (rc $rc): $*"; cat "$WORK/$name.log"; } >>"$OUT/steps.log"
    printf '{"step": "%s", "rc": %d, "seconds": %s, "command": "%s"}\n' "$name" "$rc" \
        "$(awk -v n=$(($(date +%s%N) - t0)) 'BEGIN {printf "%.3f", n / 1e9}')" "$(echo "$*" | sed 's/"/\\"/g')" >>"$LOG"
    say "$name: rc $rc; $(tail -2 "$WORK/$name.log" | tr '\n' ' ' | cut -c1-300)"
    return $rc
}

{
    echo "== nvidia-smi"; nvidia-smi 2>&1
    echo "== lscpu"; lscpu 2>/dev/null | head -20
    echo "== manifest"; cat "$B/manifest.txt"
    echo "== typedecide"; "$BIN" --version
    echo "== ldd"; ldd "$BIN"
    echo "== compute-sanitizer"; command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer
} >"$OUT/machine.txt" 2>&1
"$BIN" --version >/dev/null 2>&1 || { say "our binary does not run here: $(ldd "$BIN" | grep 'not found' | tr '\n' ' ')"; exit 1; }
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)

want kernels && step kernels 30 "$B/test_cuda_kernels"
want engine && step engine 60 "$B/test_cuda_engine"
want clients && step clients 90 bash bench/cuda_clients.sh "$BIN" "$WORK/clients"
want fixture && step fixture 60 python3 scripts/fixture_bf16.py fixtures/models

DEMO="--evidence models/demo/ticket.txt --criteria models/demo/criteria.jsonl --json --quiet"
if want memcheck; then
    for m in demo-qwen3 demo-qwen35; do
        step "memcheck-decide-$m" 40 "$CS" --tool memcheck --leak-check full --error-exitcode 3 \
            "$BIN" decide --device cuda --model "models/$m" $DEMO
        step "memcheck-generate-$m" 40 "$CS" --tool memcheck --leak-check full --error-exitcode 3 \
            "$BIN" generate --device cuda --model "models/$m" --prompt "The ticket says" -n 24 --temperature 0
    done
fi
want racecheck && step racecheck-decide 60 "$CS" --tool racecheck --error-exitcode 3 \
    "$BIN" decide --device cuda --model models/demo-qwen3 $DEMO

TOK=$WORK/tokenizer.json
S=$WORK/qwen3-0.6b
if (want timing || want peer) && [ "$(left)" -ge 60 ]; then
    [ -s "$TOK" ] || xz -dc "$B/tokenizer.json.xz" >"$TOK"
    [ -s "$S/model.safetensors" ] || "$BIN" synth --preset qwen3-0.6b --tokenizer "$TOK" --out "$S" >/dev/null 2>&1
fi
if want timing && [ "$(left)" -ge 120 ]; then
    for prec in bf16 fp32; do
        step "bench-prefill-$prec" 40 "$BIN" bench prefill --model "$S" --tokens 2048 --repeat 3 --device cuda --precision $prec
        step "bench-decode-$prec" 40 "$BIN" bench decode --model "$S" --tokens 128 --repeat 3 --device cuda --precision $prec
        step "bench-decide-$prec" 40 "$BIN" bench decide --model "$S" --prefix 256 --criteria 144 --suffix 45 --repeat 3 \
            --device cuda --precision $prec
    done
fi
if want peer; then
    step transformers 60 python3 scripts/cuda_peer.py --model "$S" --prefill 2048 --decode 128 --criteria 144 --suffix 45 \
        --prefix 256
fi
say "done${skipped:+; skipped: $skipped}"
echo "{\"skipped\": \"$skipped\", \"seconds\": $(($(date +%s) - START))}" >>"$LOG"
