#!/usr/bin/env bash
# The CUDA backend on the H200 (issues 17 and 43, issue 46's GPU line), in ONE device call: speed of every
# acceptance line beside its peers (transformers bf16, llama.cpp's CUDA build), the checks and sanitizers of part 1,
# and a summary table at the end of the output.
#   here    bench/cuda_device.sh --prepare
#           builds with -DTD_CUDA=ON and without MPI into BUILD (default build-cuda-nompi/; nvcc 13 compiles sm_90a
#           here; the binaries link the CUDA runtime statically; SKIP_BUILD=1 packs what BUILD holds) and fills
#           build-cuda-device/ (git-ignored): bin.tar.xz (typedecide, every tests/cuda/test_cuda_* binary, the
#           libraries the device lacks, a manifest), the Qwen3 tokenizer, llama.cpp's source trimmed to llama-bench
#           with the CPU and CUDA backends (bundle_llama_src_cuda; NO_LLAMA=1 leaves it out); VARIANT=1 adds
#           typedecide-variant, built into BUILD-variant with -DTD_CUDA_BATCH_VARIANT=ON (batch-dependent products,
#           for the invariance step). It prints what the call would carry against the device's 64 MiB limit. The
#           fixtures and demo models travel with the tree.
#   device  run(command="bash bench/cuda_device.sh", carry=["build-cuda-device"], timeout_s=590)
# Steps, in this order (STEPS picks and orders nothing else: a step not named is not run; each one still to start
# once BUDGET_S (default 550 s) is spent is skipped and listed; each result is one JSON line in $OUT/cuda.jsonl as
# soon as it is measured, each log under a "== step" line of $OUT/steps.log):
#   (always, in the background from the start) llama.cpp's CUDA build (sm_90, 12 jobs at nice 19) and the F16 GGUF
#              exports of the synthetic models by our exporter, while the GPU steps run
#   timing     `typedecide bench` on synthetic qwen3-0.6b and qwen3.5-0.8b (BF16 safetensors, `typedecide synth`),
#              --device cuda, for each of PRECISIONS (bf16 fp32): prefill 2048, decode batch 1 (128 tokens),
#              decide 144 criteria x 45 tokens x 4 options over a 256-token evidence, one criterion over a
#              prefilled evidence (--cache-head --criteria 1), 16 evidences x 144 criteria in one td_decide_multi
#              call (--evidences 16 --verify: then each evidence decided alone, every result bit for bit the same;
#              MULTI_PRECISIONS, default bf16 only)
#   peer       transformers bf16 (sdpa) on the same checkpoints: the same lines (scripts/cuda_peer.py), and the
#              measured bf16 matrix-product ceiling (torch, 8192^3)
#   invariance what batch invariance costs: prefill, decode and decide (bf16, the first model) with
#              typedecide-variant (the bundle's, from --prepare with VARIANT=1: -DTD_CUDA_BATCH_VARIANT=ON) against
#              the timing step's; skipped with a line when the bundle has no variant
#   run        `typedecide run --device cuda --precision bf16` over a DOCS (10,000) document synthetic corpus made
#              here (bench/corpus_gen.sh: tickets x 12 criteria), at most RUN_CAP_S (100 s): documents/s (a run
#              cut at the cap is stated from the lines it wrote)
#   serve      `typedecide serve --device cuda --precision bf16 --parallel 64`: STREAMS (8 64) concurrent streamed
#              chat completions of STREAM_TOKENS (128) tokens each (bench/serve_streams.py), aggregate tokens/s
#   llama      llama-bench (llama.cpp CUDA, -ngl 99 -fa 1) on our F16 GGUF exports: -p 2048 -n 128, and one
#              criterion as -p 45 -n 0 -d 256; a build still running then moves it after decide46, where it waits
#              for the build while more than 60 s are left, else it is skipped with a line saying so
#   decide46   issue 46's /v1/decide line with --device cuda: bench/decide_clients.sh (node and jq there), else its
#              Python twin bench/decide_clients.py; $OUT/decide-clients-h200.json; the CLI check on DC_CLI_CHECK (4)
#              requests per model (each `decide --device cuda` process loads the model: ~2 s); DC_PRECISION (unset:
#              the default, fp32) is passed to serve and decide as --precision
#   kernels    test_cuda_kernels: every kernel against the CPU scalar references, batch invariance; then every other
#              test_cuda_* of the bundle (and test_cuda_attn_bf16 again with TD_CUDA_TC_ATTN=0)
#   engine     test_cuda_engine: fixture parity (transformers, CPU fp32), GPU exactness, decide vs CPU
#   serial     bench/cuda_serial.sh: decide --serial (graphs with programmatic edges) = --batch, byte for byte, three
#              runs, on each of MODELS (the synthetic ones: the demo models' DeltaNet heads take no kernel by warps) in
#              each of PRECISIONS
#   clients    bench/cuda_clients.sh: decide on Q8_0/Q4_0 GGUFs, evaluate, generate, chat and serve on the GPU vs CPU
#   fixture    scripts/fixture_bf16.py: transformers' own BF16 inference against the fixtures' fp32 references
#   memcheck   compute-sanitizer memcheck on a decide run and a generate run for each of SAN_PRECISIONS (fp32 bf16)
#              (demo-qwen3, demo-qwen35); bench/cuda_iter.sh's sanitize step runs these two steps
#   racecheck  compute-sanitizer racecheck on the decide run (demo-qwen3) for each of SAN_PRECISIONS, and on
#              test_cuda_deltanet's smallest head-dim-128 case (TD_DN_SMALL=1: the recurrence by warps, in registers,
#              the gated norm); each at most RACE_CAP_S (120) s
#   profile    (only when named in STEPS) bench/cuda_profile.sh's per-kernel ncu table on PROFILE_MODELS (default the
#              last model, qwen3.5-0.8b), bf16, in steps.log
# Then bench/cuda_summary.sh writes $OUT/cuda-h200-part2.json and prints the acceptance table (the last lines of the
# output). Logs: $OUT/logs.tar.xz. At most 8 files come back: machine.txt, cuda.jsonl, steps.log,
# cuda-h200-part2.json, decide-clients-h200.json, logs.tar.xz, summary.txt.
# Environment: BUDGET_S, OUT (default ./cuda-out), BUNDLE (build-cuda-device), WORK (scratch), STEPS, MODELS
#   ("qwen3-0.6b qwen3.5-0.8b"), PRECISIONS, MULTI_PRECISIONS, PREFILL (2048), DECODE (128), PREFIX (256),
#   CRITERIA (144), SUFFIX (45), OPTIONS (4), EVIDENCES (16), REPEAT (3), DOCS, RUN_CAP_S, STREAMS, STREAM_TOKENS,
#   LLAMA_JOBS (12), LLAMA_BENCH (a llama-bench to use instead of building one), RUN_MODELS and SERVE_MODELS (the
#   models of the run and serve steps; default the first of MODELS).
#   DEVICE=cpu BIN=build/typedecide: the whole flow on the CPU with the tiny fixtures instead of the synthetic models
#   and small sizes (a dry run of the script where there is no GPU; no llama.cpp build, no sanitizers).
set -uo pipefail
cd "$(dirname "$0")/.."
bash scripts/packed.sh unpack # the weights kept in git as .xz (a checkout that travelled here has only those)
. bench/bundle.sh
BUNDLE=${BUNDLE:-build-cuda-device}

if [ "${1:-}" = "--prepare" ]; then
    set -e
    BUILD=${BUILD:-build-cuda-nompi}
    if [ -z "${SKIP_BUILD:-}" ]; then
        cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DTD_CUDA=ON -DCMAKE_DISABLE_FIND_PACKAGE_MPI=ON >/dev/null
        # shellcheck disable=SC2046
        cmake --build "$BUILD" --target typedecide_cli $(cd tests/cuda && ls test_cuda_*.c | sed 's/\.c$//') \
            -j"$(nproc)" >/dev/null
    fi
    rm -rf "$BUNDLE" && mkdir -p "$BUNDLE"
    s=$(mktemp -d)
    mkdir -p "$s/bin/lib"
    cp "$BUILD/typedecide" "$s/bin/"
    for t in tests/cuda/test_cuda_*.c; do cp "$BUILD/tests/$(basename "$t" .c)" "$s/bin/"; done
    if [ -n "${VARIANT:-}" ]; then # the same sources with -DTD_CUDA_BATCH_VARIANT=ON: the invariance step's other side
        if [ -z "${SKIP_BUILD:-}" ]; then
            cmake -S . -B "$BUILD-variant" -DCMAKE_BUILD_TYPE=Release -DTD_CUDA=ON -DTD_CUDA_BATCH_VARIANT=ON \
                -DCMAKE_DISABLE_FIND_PACKAGE_MPI=ON >/dev/null
            cmake --build "$BUILD-variant" --target typedecide_cli -j"$(nproc)" >/dev/null
        fi
        cp "$BUILD-variant/typedecide" "$s/bin/typedecide-variant"
    fi
    bundle_libs "$BUILD/typedecide" "$s/bin/lib"
    cat >"$s/bin/manifest.txt" <<EOF
typedecide commit $(git rev-parse HEAD)$(git diff --quiet HEAD -- src cli include tests || echo " (with uncommitted changes)")
built on $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), $(ldd --version | head -1), $(/usr/local/cuda/bin/nvcc --version | tail -1)
EOF
    cp "$s/bin/manifest.txt" "$BUNDLE/"
    tar -C "$s" -cf - bin | xz -9e -T0 >"$BUNDLE/bin.tar.xz"
    rm -rf "$s"
    bundle_tokenizer "$BUNDLE"
    [ -n "${NO_LLAMA:-}" ] || bundle_llama_src_cuda "$BUNDLE"
    tree=$( (git ls-files -z; git ls-files -z -o --exclude-standard) | xargs -0 stat -c %s 2>/dev/null | awk '{s += $1} END {print s}')
    mine=$(du -sb "$BUNDLE" | cut -f1)
    echo "cuda_device: $BUNDLE $((mine / 1024)) KiB; with the working tree $(((tree + mine) / 1048576)) MiB of the 64 MiB a call carries" >&2
    [ $((tree + mine)) -lt $((64 * 1048576)) ] || echo "cuda_device: OVER the device's 64 MiB: the call would be refused" >&2
    echo "cuda_device: on the device: run(command=\"bash bench/cuda_device.sh\", carry=[\"$BUNDLE\"], timeout_s=590)" >&2
    exit 0
fi

START=$(date +%s)
BUDGET_S=${BUDGET_S:-550}
DEV=${DEVICE:-cuda}
OUT=${OUT:-$PWD/cuda-out}
WORK=${WORK:-${TMPDIR:-/tmp}/td-cuda}
STEPS=${STEPS:-timing peer invariance run serve llama decide46 kernels engine serial clients fixture memcheck racecheck}
MODELS=${MODELS:-qwen3-0.6b qwen3.5-0.8b}
PRECISIONS=${PRECISIONS:-bf16 fp32}
MULTI_PRECISIONS=${MULTI_PRECISIONS:-bf16}
if [ "$DEV" = cuda ]; then
    PREFILL=${PREFILL:-2048} DECODE=${DECODE:-128} PREFIX=${PREFIX:-256} CRITERIA=${CRITERIA:-144} SUFFIX=${SUFFIX:-45}
    EVIDENCES=${EVIDENCES:-16} REPEAT=${REPEAT:-3} DOCS=${DOCS:-10000} RUN_CAP_S=${RUN_CAP_S:-100}
    STREAMS=${STREAMS:-8 64} STREAM_TOKENS=${STREAM_TOKENS:-128}
else # the dry run: tiny models, small sizes
    PREFILL=${PREFILL:-256} DECODE=${DECODE:-16} PREFIX=${PREFIX:-64} CRITERIA=${CRITERIA:-12} SUFFIX=${SUFFIX:-20}
    EVIDENCES=${EVIDENCES:-4} REPEAT=${REPEAT:-2} DOCS=${DOCS:-200} RUN_CAP_S=${RUN_CAP_S:-20}
    STREAMS=${STREAMS:-4 8} STREAM_TOKENS=${STREAM_TOKENS:-16}
fi
OPTIONS=${OPTIONS:-4}
mkdir -p "$OUT" "$WORK/logs"
LOG=$OUT/cuda.jsonl
: >"$LOG"
: >"$OUT/steps.log"
CORES=$(nproc)
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export TD_ROOT=$PWD PYTHONUNBUFFERED=1
say() { echo "cuda [$(($(date +%s) - START)) s]: $*" >&2; }
left() { echo $((BUDGET_S - ($(date +%s) - START))); }
skipped=""
# kill_tree PID: the process and its descendants, by their ids (llama.cpp's build: cmake, make, nvcc)
kill_tree() {
    local c
    for c in $(ps -o pid= --ppid "$1" 2>/dev/null); do kill_tree "$c"; done
    kill "$1" 2>/dev/null
}
# stop_pid PID: SIGTERM, then SIGKILL after 10 s (a server that does not stop must not hold the call)
stop_pid() {
    kill "$1" 2>/dev/null
    for _ in $(seq 1 100); do kill -0 "$1" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$1" 2>/dev/null
    wait "$1" 2>/dev/null
}
want() { case " $STEPS " in *" $1 "*) return 0 ;; esac; return 1; }
jstr() { # "$*" as a JSON string (commands: no control characters)
    local x="$*"
    x=${x//\\/\\\\}
    x=${x//\"/\\\"}
    printf '"%s"' "${x//$'\t'/\\t}"
}
secs_since() { awk -v n=$(($(date +%s%N) - $1)) 'BEGIN {printf "%.3f", n / 1e9}'; }

# the binaries: the bundle's bin.tar.xz unpacked into WORK (or BIN, e.g. the dry run's build/typedecide)
if [ -n "${BIN:-}" ]; then
    B=$(dirname "$(realpath "$BIN")")
    BIN=$(realpath "$BIN")
else
    B=$WORK/bin
    if [ -f "$BUNDLE/bin.tar.xz" ]; then
        rm -rf "$B" && tar -C "$WORK" -xJf "$BUNDLE/bin.tar.xz"
    elif [ -x "$BUNDLE/typedecide" ]; then # a bundle of the older layout
        B=$PWD/$BUNDLE
    fi
    BIN=$B/typedecide
    export LD_LIBRARY_PATH=$B/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi

# step NAME MIN_LEFT MAX_S COMMAND...: a check; its output in steps.log, one JSON line {"step", "rc", "seconds"}
step() {
    local name=$1 need=$2 cap=$3
    shift 3
    if [ "$(left)" -lt "$need" ]; then
        skipped="$skipped${skipped:+, }$name"
        say "skip $name ($(left) s left)"
        return 1
    fi
    local lim t0 rc
    lim=$(left)
    [ "$lim" -gt "$cap" ] && lim=$cap
    say "$name: $*"
    t0=$(date +%s%N)
    timeout "$lim" "$@" >"$WORK/logs/$name.log" 2>&1
    rc=$?
    { echo "== $name (rc $rc): $*"; cat "$WORK/logs/$name.log"; } >>"$OUT/steps.log"
    echo "{\"step\": \"$name\", \"rc\": $rc, \"seconds\": $(secs_since "$t0"), \"command\": $(jstr "$*")}" >>"$LOG"
    say "$name: rc $rc; $(tail -2 "$WORK/logs/$name.log" | tr '\n' ' ' | cut -c1-300)"
    return $rc
}
# measure NAME MODEL PRECISION MIN_LEFT MAX_S COMMAND...: a measurement whose last stdout line starting with "{" is
# its result: {"step", "model", "precision", "rc", "seconds", "command", "result"} (result null when it failed)
measure() {
    local name=$1 model=$2 prec=$3 need=$4 cap=$5
    shift 5
    if [ "$(left)" -lt "$need" ]; then
        skipped="$skipped${skipped:+, }$name/$model/$prec"
        say "skip $name $model $prec ($(left) s left)"
        return 1
    fi
    local lim t0 rc res f=$WORK/logs/$name-$model-$prec
    lim=$(left)
    [ "$lim" -gt "$cap" ] && lim=$cap
    say "$name $model $prec: $*"
    t0=$(date +%s%N)
    timeout "$lim" "$@" >"$f.out" 2>"$f.err"
    rc=$?
    res=$(python3 -c 'import json, sys
t = open(sys.argv[1]).read()
try:  # the whole output one JSON value (llama-bench -o json), else its last line that is one
    print(json.dumps(json.loads(t)))
except ValueError:
    for l in reversed(t.splitlines()):
        try:
            print(json.dumps(json.loads(l)) if l.startswith("{") else 1 / 0)
            break
        except (ValueError, ZeroDivisionError):
            pass
    else:
        print("null")' "$f.out" 2>/dev/null || echo null)
    { echo "== $name $model $prec (rc $rc): $*"; cat "$f.out" "$f.err"; } >>"$OUT/steps.log"
    echo "{\"step\": \"$name\", \"model\": \"$model\", \"precision\": \"$prec\", \"rc\": $rc, \"seconds\": $(secs_since "$t0"), \"load\": \"$(cut -d' ' -f1-3 /proc/loadavg)\", \"command\": $(jstr "$*"), \"result\": $res}" >>"$LOG"
    say "$name $model $prec: rc $rc; $(echo "$res" | cut -c1-240)$([ "$rc" = 0 ] || tail -2 "$f.err" | tr '\n' ' ' | cut -c1-300)"
    return $rc
}

{
    echo "== nvidia-smi"; nvidia-smi 2>&1
    echo "== lscpu"; lscpu 2>/dev/null | head -20
    echo "== manifest"; cat "$B/manifest.txt" 2>/dev/null
    echo "== typedecide"; "$BIN" --version
    echo "== ldd"; ldd "$BIN"
    echo "== tools"; for t in compute-sanitizer nvcc cmake node jq python3; do echo "$t: $(command -v $t || ls /usr/local/cuda/bin/$t 2>/dev/null || echo none)"; done
    echo "== python"; python3 -c 'import torch, transformers; print("torch", torch.__version__, "transformers", transformers.__version__)' 2>&1
} >"$OUT/machine.txt" 2>&1
"$BIN" --version >/dev/null 2>&1 || { say "our binary does not run here: $(ldd "$BIN" | grep 'not found' | tr '\n' ' ')"; exit 1; }
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
say "$CORES cores, $("$BIN" --version | head -1); device $DEV; budget $BUDGET_S s; steps: $STEPS"

# llama.cpp's CUDA build, in the background from the start (our GPU steps run meanwhile)
LLAMA_PID=
LL=${LLAMA_BENCH:-$WORK/llama/build/bin/llama-bench}
if want llama && [ ! -x "$LL" ] && [ "$DEV" = cuda ] && [ -f "$BUNDLE/llama-src.tar.xz" ]; then
    (
        set -e
        rm -rf "$WORK/llama" && mkdir -p "$WORK/llama"
        tar -C "$WORK/llama" -xJf "$BUNDLE/llama-src.tar.xz"
        export PATH=/usr/local/cuda/bin:$PATH
        export CUDACXX=${CUDACXX:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
        cmake -S "$WORK/llama/llama.cpp" -B "$WORK/llama/build" -DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=ON \
            -DCMAKE_CUDA_ARCHITECTURES=90 -DGGML_NATIVE=ON -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF \
            -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_BUILD_TOOLS=ON
        nice -n 19 cmake --build "$WORK/llama/build" --target llama-bench -j"${LLAMA_JOBS:-12}"
    ) >"$WORK/logs/llama-build.log" 2>&1 &
    LLAMA_PID=$!
    say "llama.cpp CUDA build started ($(cat "$BUNDLE/llama.txt" 2>/dev/null | cut -c1-60))"
fi

# the models: synthetic BF16 checkpoints made here (the dry run: the tiny fixtures)
TOK=$WORK/tokenizer.json
declare -A MP
need_models=
for s_ in timing peer invariance run serve llama decide46 profile serial; do want $s_ && need_models=1; done
[ -n "$need_models" ] || MODELS=
for m in $MODELS; do
    if [ "$DEV" != cuda ]; then
        case "$m" in qwen3.5*) MP[$m]=fixtures/models/qwen35-tiny-text ;; *) MP[$m]=fixtures/models/qwen3-tiny-tied ;; esac
        continue
    fi
    MP[$m]=$WORK/$m
    [ -s "$TOK" ] || xz -dc "$BUNDLE/tokenizer.json.xz" >"$TOK"
    [ -f "$BUNDLE/tokenizer_config.json" ] && cp "$BUNDLE/tokenizer_config.json" "$(dirname "$TOK")/"
    if [ ! -s "$WORK/$m/model.safetensors" ]; then
        t0=$(date +%s%N)
        "$BIN" synth --preset "$m" --tokenizer "$TOK" --out "$WORK/$m" --force >"$WORK/logs/synth-$m.log" 2>&1 ||
            say "synth $m failed: $(tail -2 "$WORK/logs/synth-$m.log" | tr '\n' ' ')"
        say "synth $m: $(secs_since "$t0") s"
    fi
done
for m in $MODELS; do # the model's shape, for the summary's arithmetic
    echo "{\"step\": \"model\", \"model\": \"$m\", \"path\": \"${MP[$m]}\", \"config\": $(python3 -c 'import json, sys
c = json.load(open(sys.argv[1] + "/config.json")); t = c.get("text_config", c)
print(json.dumps({k: t.get(k) for k in ("hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
    "num_key_value_heads", "head_dim", "vocab_size", "tie_word_embeddings", "layer_types")}))' "${MP[$m]}" 2>/dev/null || echo null)}" >>"$LOG"
done
# the F16 GGUFs for llama.cpp, in the background (CPU work while the GPU steps run)
EXPORT_PID=
if want llama; then
    (for m in $MODELS; do
        [ -s "$WORK/$m-f16.gguf" ] || "$BIN" export --model "${MP[$m]}" --quant f16 -o "$WORK/$m-f16.gguf" --force
    done) >"$WORK/logs/export.log" 2>&1 &
    EXPORT_PID=$!
fi

DEVP=(--device "$DEV")
HAVE_MULTI=
case "$("$BIN" bench --help 2>/dev/null)" in *--evidences*) HAVE_MULTI=1 ;; esac
DMEM=()
[ -n "$HAVE_MULTI" ] && DMEM=(--memory 16384) # the whole 144-criterion pass in one forward (1024 MB by default)
[ -n "$HAVE_MULTI" ] || say "this typedecide's bench has no --evidences / --cache-head (built before 68e48fb): one criterion from --serial's suffix time, no 16-evidence line"
if want timing; then
    for prec in $PRECISIONS; do
        for m in $MODELS; do
            M=${MP[$m]}
            measure prefill "$m" "$prec" 20 90 "$BIN" bench prefill --model "$M" --tokens "$PREFILL" --repeat "$REPEAT" "${DEVP[@]}" --precision "$prec"
            measure decode "$m" "$prec" 20 90 "$BIN" bench decode --model "$M" --tokens "$DECODE" --repeat "$REPEAT" "${DEVP[@]}" --precision "$prec"
            measure decide "$m" "$prec" 20 120 "$BIN" bench decide --model "$M" --prefix "$PREFIX" --criteria "$CRITERIA" \
                --suffix "$SUFFIX" --options "$OPTIONS" --repeat "$REPEAT" "${DMEM[@]}" "${DEVP[@]}" --precision "$prec"
            if [ -z "$HAVE_MULTI" ]; then # a binary before bench decide --cache-head / --evidences: serial suffixes
                measure one_criterion "$m" "$prec" 15 60 "$BIN" bench decide --model "$M" --prefix "$PREFIX" --criteria 16 \
                    --suffix "$SUFFIX" --options "$OPTIONS" --serial --repeat 3 "${DEVP[@]}" --precision "$prec"
                continue
            fi
            measure one_criterion "$m" "$prec" 15 60 "$BIN" bench decide --model "$M" --prefix "$PREFIX" --criteria 1 \
                --suffix "$SUFFIX" --options "$OPTIONS" --cache-head --repeat 20 "${DEVP[@]}" --precision "$prec"
            case " $MULTI_PRECISIONS " in *" $prec "*)
                measure multi "$m" "$prec" 30 150 "$BIN" bench decide --model "$M" --evidences "$EVIDENCES" --prefix "$PREFIX" \
                    --criteria "$CRITERIA" --suffix "$SUFFIX" --options "$OPTIONS" --repeat 2 --memory 65536 --verify \
                    "${DEVP[@]}" --precision "$prec" ;;
            esac
        done
    done
fi

if want peer; then
    first=--ceiling
    for m in $MODELS; do
        measure transformers "$m" bf16 40 150 python3 scripts/cuda_peer.py --model "${MP[$m]}" --prefill "$PREFILL" \
            --decode "$DECODE" --criteria "$CRITERIA" --suffix "$SUFFIX" --prefix "$PREFIX" --evidences "$EVIDENCES" \
            --device "$DEV" $first
        first=
    done
fi

if want invariance; then
    V=$B/typedecide-variant
    m=${MODELS%% *}
    if [ ! -x "$V" ]; then
        say "invariance: no typedecide-variant in the bundle (bench/cuda_device.sh --prepare with VARIANT=1)"
        skipped="$skipped${skipped:+, }invariance (no variant binary)"
    else
        M=${MP[$m]}
        measure variant_prefill "$m" bf16 20 90 "$V" bench prefill --model "$M" --tokens "$PREFILL" --repeat "$REPEAT" "${DEVP[@]}" --precision bf16
        measure variant_decode "$m" bf16 20 90 "$V" bench decode --model "$M" --tokens "$DECODE" --repeat "$REPEAT" "${DEVP[@]}" --precision bf16
        measure variant_decide "$m" bf16 20 120 "$V" bench decide --model "$M" --prefix "$PREFIX" --criteria "$CRITERIA" \
            --suffix "$SUFFIX" --options "$OPTIONS" --repeat "$REPEAT" "${DMEM[@]}" "${DEVP[@]}" --precision bf16
    fi
fi

if want run; then
    for m in ${RUN_MODELS:-${MODELS%% *}}; do
        corpus=$(bash bench/corpus_gen.sh "$DOCS" "$WORK/corpus")
        rm -f "$WORK/corpus/results.jsonl"* "$WORK/corpus/summary.json"
        if [ "$(left)" -lt 30 ]; then
            skipped="$skipped${skipped:+, }run/$m"
        else
            lim=$(left)
            [ "$lim" -gt "$RUN_CAP_S" ] && lim=$RUN_CAP_S
            say "run $m: $DOCS documents x 12 criteria, at most $lim s"
            t0=$(date +%s%N)
            cmd=("$BIN" run --model "${MP[$m]}" --input "$corpus" --criteria "$WORK/corpus/criteria.jsonl" --out "$WORK/corpus/results.jsonl"
                 --summary "$WORK/corpus/summary.json" --quiet --no-timing "${DEVP[@]}" --precision bf16 --memory 8192 --docs-per-pass "${RUN_DOCS_PER_PASS:-16}")
            timeout "$lim" "${cmd[@]}" 2>"$WORK/logs/run.err"
            rc=$?
            s=$(secs_since "$t0")
            done_n=$(cat "$WORK/corpus/results.jsonl" "$WORK/corpus/results.jsonl.partial" 2>/dev/null | wc -l)
            res=$(python3 - "$WORK/corpus/summary.json" "$rc" "$s" "$done_n" "$DOCS" <<'PY'
import json, sys
path, rc, s, n, docs = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
out = {"documents": docs, "criteria_per_document": 12, "exit": rc, "wall_s": s, "documents_written": n,
       "documents_per_s_wall": n / s if s > 0 else None}
if rc == 0:
    try:
        out["summary"] = json.load(open(path))
        out["documents_per_s"] = out["summary"].get("documents_per_s")
    except Exception as e:  # noqa: BLE001
        out["summary_error"] = str(e)
else:
    out["cut_at_cap"] = rc == 124
    out["documents_per_s"] = out["documents_per_s_wall"]  # the lines written over the wall time, load included
print(json.dumps(out))
PY
            )
            echo "{\"step\": \"run\", \"model\": \"$m\", \"precision\": \"bf16\", \"rc\": $rc, \"seconds\": $s, \"command\": $(jstr "${cmd[*]}"), \"result\": ${res:-null}}" >>"$LOG"
            { echo "== run $m (rc $rc): ${cmd[*]}"; echo "$res"; cat "$WORK/logs/run.err"; } >>"$OUT/steps.log"
            say "run: rc $rc; $(echo "$res" | cut -c1-300)"
        fi
    done
fi

if want serve; then
    for m in ${SERVE_MODELS:-${MODELS%% *}}; do
        maxs=0
        for n in $STREAMS; do [ "$n" -gt "$maxs" ] && maxs=$n; done
        if [ "$(left)" -lt 40 ]; then
            skipped="$skipped${skipped:+, }serve/$m"
        else
            port=18191
            "$BIN" serve --model "${MP[$m]}" --port $port --parallel "$maxs" --queue $((maxs * 2)) --max-connections-per-ip 0 \
                --memory 16384 --quiet "${DEVP[@]}" --precision bf16 >"$WORK/logs/serve.log" 2>&1 &
            sp=$!
            for _ in $(seq 1 300); do
                curl -sf "http://127.0.0.1:$port/health" >/dev/null 2>&1 && break
                kill -0 $sp 2>/dev/null || break
                sleep 0.2
            done
            for n in $STREAMS; do
                measure "serve_$n" "$m" bf16 20 90 python3 bench/serve_streams.py "http://127.0.0.1:$port" --streams "$n" \
                    --tokens "$STREAM_TOKENS" --rounds 2
            done
            stop_pid $sp
        fi
    done
fi

# llama [wait]: llama-bench once the build is done; without "wait", a build still running defers it (to after
# decide46); with it, waits for the build while more than 60 s are left
llama_deferred=
llama() {
    [ -n "$EXPORT_PID" ] && wait "$EXPORT_PID"
    if [ -n "$LLAMA_PID" ] && kill -0 "$LLAMA_PID" 2>/dev/null && [ -z "${1:-}" ]; then
        say "llama.cpp's build still running ($(grep -o '^\[ *[0-9]*%\]' "$WORK/logs/llama-build.log" | tail -1)): llama after decide46"
        llama_deferred=1
        return
    fi
    if [ -n "$LLAMA_PID" ]; then
        while kill -0 "$LLAMA_PID" 2>/dev/null && [ "$(left)" -gt 60 ]; do sleep 2; done
        if kill -0 "$LLAMA_PID" 2>/dev/null; then
            say "llama.cpp's build is not done with $(left) s left: llama skipped ($(grep -o '^\[ *[0-9]*%\]' "$WORK/logs/llama-build.log" | tail -1))"
            skipped="$skipped${skipped:+, }llama (build not done in time)"
            kill_tree "$LLAMA_PID"
            return
        fi
    fi
    if [ -x "$LL" ]; then
        say "llama-bench ready ($(($(date +%s) - START)) s into the call)"
        for m in $MODELS; do
            g=$WORK/$m-f16.gguf
            [ -s "$g" ] || { say "no F16 GGUF of $m: $(tail -2 "$WORK/logs/export.log" | tr '\n' ' ')"; continue; }
            ngl=(-ngl 99 -fa 1)
            [ "$DEV" = cuda ] || ngl=(-t "$CORES")
            measure llama_pp_tg "$m" f16 30 120 "$LL" -m "$g" "${ngl[@]}" -p "$PREFILL" -n "$DECODE" -r "$REPEAT" -o json
            measure llama_one "$m" f16 20 60 "$LL" -m "$g" "${ngl[@]}" -p "$SUFFIX" -n 0 -d "$PREFIX" -r 5 -o json
        done
    elif [ -z "$LLAMA_PID" ]; then
        say "llama: no llama-bench (DEVICE=$DEV, bundle $([ -f "$BUNDLE/llama-src.tar.xz" ] && echo has || echo lacks) llama-src.tar.xz)"
        skipped="$skipped${skipped:+, }llama (no llama-bench)"
    else
        say "llama.cpp's build failed: $(grep -m3 -i 'error' "$WORK/logs/llama-build.log" | cut -c1-200 | tr '\n' ' ')"
        skipped="$skipped${skipped:+, }llama (build failed)"
    fi
}
want llama && llama

if want decide46; then
    dc=(bash bench/decide_clients.sh)
    command -v node >/dev/null && command -v jq >/dev/null || dc=(python3 bench/decide_clients.py)
    if [ "$DEV" = cuda ]; then
        step decide46 60 200 env BIN="$BIN" WORK="$WORK" TOK="$TOK" CLI_CHECK="${DC_CLI_CHECK:-4}" ROUNDS="${DC_ROUNDS:-3}" "${dc[@]}" \
            "$OUT/decide-clients-h200.json" -- --device cuda ${DC_PRECISION:+--precision "$DC_PRECISION"}
    else
        step decide46 30 200 env BIN="$BIN" WORK="$WORK/dc" MODELS=demo-qwen3 CLIENTS=8 CLI_CHECK=4 "${dc[@]}" \
            "$OUT/decide-clients-h200.json"
    fi
fi

[ -n "$llama_deferred" ] && llama wait

if [ "$DEV" = cuda ]; then
    if want kernels; then
        step kernels 30 120 "$B/test_cuda_kernels"
        for t in "$B"/test_cuda_*; do # the other kernel tests (tensor-core products, bf16 attention, DeltaNet, ...)
            n=$(basename "$t")
            case $n in test_cuda_kernels | test_cuda_engine) continue ;; esac
            step "kernels-${n#test_cuda_}" 20 120 "$t"
        done
        [ -x "$B/test_cuda_attn_bf16" ] && step kernels-attn_bf16-off 20 120 env TD_CUDA_TC_ATTN=0 "$B/test_cuda_attn_bf16"
    fi
    want engine && step engine 60 180 "$B/test_cuda_engine"
    if want serial; then # decide --serial = --batch on the synthetic models (graphs with programmatic edges)
        for m in $MODELS; do
            for p in $PRECISIONS; do step "serial-$m-$p" 20 90 bash bench/cuda_serial.sh "$BIN" "${MP[$m]}" "$p"; done
        done
    fi
fi
want clients && step clients 90 200 env DEVICE="$DEV" bash bench/cuda_clients.sh "$BIN" "$WORK/clients"
want fixture && step fixture 60 120 python3 scripts/fixture_bf16.py fixtures/models
DEMO="--evidence models/demo/ticket.txt --criteria models/demo/criteria.jsonl --json --quiet"
SAN_PRECISIONS=${SAN_PRECISIONS:-fp32 bf16}
if want memcheck && [ "$DEV" = cuda ]; then
    for m in demo-qwen3 demo-qwen35; do
        for p in $SAN_PRECISIONS; do
            step "memcheck-decide-$m-$p" 40 120 "$CS" --tool memcheck --leak-check full --error-exitcode 3 \
                "$BIN" decide --device cuda --precision "$p" --model "models/$m" $DEMO
            step "memcheck-generate-$m-$p" 40 120 "$CS" --tool memcheck --leak-check full --error-exitcode 3 \
                "$BIN" generate --device cuda --precision "$p" --model "models/$m" --prompt "The ticket says" -n 24 \
                --temperature 0
        done
    done
fi
if want racecheck && [ "$DEV" = cuda ]; then
    for p in $SAN_PRECISIONS; do
        step "racecheck-decide-$p" 60 "${RACE_CAP_S:-120}" "$CS" --tool racecheck --error-exitcode 3 \
            "$BIN" decide --device cuda --precision "$p" --model models/demo-qwen3 $DEMO
    done
    # the demo models' DeltaNet heads (64) do not take the recurrence by warps or in registers (head dim 128):
    # test_cuda_deltanet's smallest such case does, every form
    [ -x "$B/test_cuda_deltanet" ] && step racecheck-deltanet 30 "${RACE_CAP_S:-120}" env TD_DN_SMALL=1 "$CS" \
        --tool racecheck --error-exitcode 3 "$B/test_cuda_deltanet"
fi

# profile (not in the default STEPS): bench/cuda_profile.sh's per-kernel table (ncu) on PROFILE_MODELS (default the
# last of MODELS: qwen3.5-0.8b, whose DeltaNet / attention / MLP shares the issue asks for), bf16, into steps.log
if want profile && [ "$DEV" = cuda ]; then
    for m in ${PROFILE_MODELS:-${MODELS##* }}; do
        step "profile-$m" 60 300 bash bench/cuda_profile.sh "$BIN" "${MP[$m]}" "$WORK/profile-$m" bf16
    done
fi

[ -n "$LLAMA_PID" ] && kill_tree "$LLAMA_PID"
say "done${skipped:+; skipped: $skipped}"
echo "{\"step\": \"end\", \"skipped\": $(jstr "$skipped"), \"seconds\": $(($(date +%s) - START)), \"device\": \"$DEV\"}" >>"$LOG"
tar -C "$WORK" -cf - logs 2>/dev/null | xz -6 -T0 >"$OUT/logs.tar.xz"
bash bench/cuda_summary.sh "$OUT" "$OUT/cuda-h200-part2.json" | tee "$OUT/summary.txt"
