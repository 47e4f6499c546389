#!/usr/bin/env bash
# One quick device call while the CUDA kernels change (issue 43): the kernel and engine checks, the three timings
# on synthetic qwen3-0.6b (and qwen3.5-0.8b) in bf16 and fp32, and a per-kernel profile (bench/cuda_profile.sh),
# a short table last. The full measurement with peers is bench/cuda_device.sh.
#   here    build (cmake -DTD_CUDA=ON, no MPI) and bundle: bash bench/cuda_iter.sh --prepare BUILD_DIR
#   device  run(command="bash bench/cuda_iter.sh", carry=["build-cuda-iter"], timeout_s=...)
# Environment: STEPS (default "kernels engine timing profile"; "sanitize": bench/cuda_device.sh's memcheck and
#   racecheck steps, at most SANITIZE_S (400) s; "detail": ncu's full sections for the kernels named
#   in DETAIL, default "tc_wide attention_bf16_64", DETAIL_COUNT launches each, in a decide pass), MODELS (default "qwen3-0.6b"), OUT, VARIANTS: settings
#   timed again in bf16 after the default's bf16 and fp32 (default "TD_CUDA_TC=old TD_CUDA_TC_ATTN=0
#   TD_CUDA_ATTN_ROWS=16": the products and attention kernels from before the last changes, to see what each bought;
#   "" for none; one variant of several settings joins them with commas, e.g. TD_CUDA_KV_BF16=1,TD_CUDA_ATTN_DB=0;
#   TD_CUDA_DN=old matters for qwen3.5 models only). The kernels step runs every test_cuda_* binary of the
#   bundle except test_cuda_engine (the engine step's).
set -uo pipefail
cd "$(dirname "$0")/.."
bash scripts/packed.sh unpack # the weights kept in git as .xz (a checkout that travelled here has only those)
. bench/bundle.sh
B=${BUNDLE:-build-cuda-iter}
if [ "${1:-}" = "--prepare" ]; then
    set -e
    build=${2:?usage: bench/cuda_iter.sh --prepare BUILD_DIR}
    tests=$(cd tests/cuda && ls test_cuda_*.c | sed 's/\.c$//')
    # shellcheck disable=SC2086
    cmake --build "$build" --target typedecide_cli $tests -j"$(nproc)" >/dev/null
    rm -rf "$B" && mkdir -p "$B/lib"
    cp "$build/typedecide" "$B/"
    for t in $tests; do cp "$build/tests/$t" "$B/"; done
    (cd "$B" && strip typedecide $tests)
    bundle_libs "$build/typedecide" "$B/lib"
    bundle_tokenizer "$B"
    # xz: the working tree that travels is limited to 64 MiB (the tracked tree alone is ~45.5 MB)
    (cd "$B" && tar -cJf bin.tar.xz typedecide $tests lib && rm -rf typedecide $tests lib)
    echo "typedecide commit $(git rev-parse HEAD)$(git diff --quiet HEAD -- src cli include tests || echo ' (with uncommitted changes)')" >"$B/manifest.txt"
    du -sh "$B" >&2
    exit 0
fi
OUT=${OUT:-$PWD/cuda-out}
STEPS=${STEPS:-kernels engine timing profile}
MODELS=${MODELS:-qwen3-0.6b}
mkdir -p "$OUT"
if [ -f "$B/bin.tar.xz" ]; then
    mkdir -p /tmp/td-bin && tar -xJf "$B/bin.tar.xz" -C /tmp/td-bin && cp "$B/manifest.txt" "$B/tokenizer.json.xz" /tmp/td-bin/
    B=/tmp/td-bin
fi
case $B in /*) ;; *) B=$PWD/$B ;; esac
export LD_LIBRARY_PATH=$B/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export TD_ROOT=$PWD
BIN=$B/typedecide
want() { case " $STEPS " in *" $1 "*) return 0 ;; esac; return 1; }
T0=$(date +%s)
say() { echo "[$(($(date +%s) - T0)) s] $*"; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,utilization.gpu --format=csv,noheader
cat "$B/manifest.txt"
if want kernels; then
    for t in "$B"/test_cuda_*; do
        n=$(basename "$t")
        [ "$n" = test_cuda_engine ] && continue
        timeout 300 "$t" >"$OUT/$n.log" 2>&1
        say "$n rc $?"
        grep -E "NOT|FAIL|fail|WRONG|allowed|checks" "$OUT/$n.log" | grep -vE "max (rel diff|[0-9]+ ulp|\|y).*allowed" | tail -30
    done
    if [ -x "$B/test_cuda_attn_bf16" ]; then # the switch: every head dim then gives td_cu_attention's bits
        TD_CUDA_TC_ATTN=0 timeout 300 "$B/test_cuda_attn_bf16" >"$OUT/test_cuda_attn_bf16_off.log" 2>&1
        say "test_cuda_attn_bf16 with TD_CUDA_TC_ATTN=0 rc $?"
        tail -3 "$OUT/test_cuda_attn_bf16_off.log"
    fi
    grep -E "tensor cores|attention" "$OUT/test_cuda_kernels.log" | head -40
fi
if want engine; then
    timeout 300 "$B/test_cuda_engine" >"$OUT/engine.log" 2>&1
    say "engine rc $?"
    grep -E "NOT|FAIL|fail" "$OUT/engine.log" | head -20
    tail -5 "$OUT/engine.log"
fi
# sanitize: bench/cuda_device.sh's memcheck and racecheck steps on this bundle (one list of what they cover)
if want sanitize; then
    OUT=$OUT/sanitize BIN=$BIN STEPS="memcheck racecheck" BUDGET_S=${SANITIZE_S:-400} bash bench/cuda_device.sh \
        >"$OUT/sanitize.log" 2>&1
    say "sanitize rc $? ($(grep -h '^checks:' "$OUT/sanitize.log" | cut -c1-400))"
fi
xz -dc "$B/tokenizer.json.xz" >/tmp/td-tok.json
table=""
for m in $MODELS; do
    S=/tmp/td-$m
    [ -s "$S/model.safetensors" ] || "$BIN" synth --preset "$m" --tokenizer /tmp/td-tok.json --out "$S" >/dev/null 2>&1
    if want timing; then
        runs="default:bf16 default:fp32"
        for v in ${VARIANTS-TD_CUDA_TC=old TD_CUDA_TC_ATTN=0 TD_CUDA_ATTN_ROWS=16}; do runs="$runs $v:bf16"; done
        for r in $runs; do
            env=${r%:*} prec=${r##*:}
            [ "$env" = default ] && env=TD_CUDA_DEFAULTS=1
            # shellcheck disable=SC2086 # a variant's settings, comma-separated, become env's arguments
            E() { env ${env//,/ } timeout 120 "$BIN" "$@" --device cuda --precision "$prec" 2>>"$OUT/timing.err"; }
            p=$(E bench prefill --model "$S" --tokens 2048 --repeat 3)
            d=$(E bench decode --model "$S" --tokens 128 --repeat 3)
            c=$(E bench decide --model "$S" --prefix 256 --criteria 144 --suffix 45 --repeat 3)
            c1=$(E bench decide --model "$S" --prefix 256 --criteria 1 --suffix 45 --repeat 5 --cache-head)
            echo "{\"env\": \"$env\"}" "$p" "$d" "$c" "$c1" >>"$OUT/timing.jsonl"
            row=$(printf '%-13s %-5s %-18s prefill %9s tok/s  decode %7s tok/s  decide %8s crit/s  one criterion %7s ms (suffix %7s)' "$m" "$prec" "${env#TD_CUDA_DEFAULTS=1}" \
                "$(echo "$p" | jq -r '.tokens_per_s // "err"' 2>/dev/null | cut -c1-9)" \
                "$(echo "$d" | jq -r '.tokens_per_s // "err"' 2>/dev/null | cut -c1-7)" \
                "$(echo "$c" | jq -r '.criteria_per_s // "err"' 2>/dev/null | cut -c1-8)" \
                "$(echo "$c1" | jq -r '.ms_per_criterion // "err"' 2>/dev/null | cut -c1-7)" \
                "$(echo "$c1" | jq -r '.suffix_ms_per_criterion // "err"' 2>/dev/null | cut -c1-7)")
            say "$row"
            table="$table$row"$'\n'
        done
    fi
    if want profile; then
        WORKLOADS=${PROFILE:-decide decode prefill} bash bench/cuda_profile.sh "$BIN" "$S" "$OUT/profile-$m" bf16 >"$OUT/profile-$m.txt" 2>&1
        say "profile $m rc $?"
        cat "$OUT/profile-$m.txt" | head -60
    fi
    # detail: Nsight Compute's full set of sections (throughputs, stall reasons, shared-memory bank conflicts,
    # occupancy) for the first launches of each kernel named in DETAIL, in the decide pass (bf16)
    if want detail; then
        NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
        for k in ${DETAIL:-tc_wide attention_bf16_64}; do
            timeout 150 "$NCU" --set full --import-source no --clock-control none -k "regex:$k" -c "${DETAIL_COUNT:-2}" \
                "$BIN" bench decide --model "$S" --prefix 256 --criteria 144 --suffix 45 --repeat 1 --device cuda \
                --precision bf16 >"$OUT/detail-$m-$k.txt" 2>&1
            say "detail $m $k rc $?"
            grep -E "Duration|Compute \(SM\) Throughput|Memory Throughput|Registers Per|Achieved Occupancy|Bank Conflicts|Stall|Issued Warp|Block Limit|Shared Memory Configuration Size|Dynamic Shared" "$OUT/detail-$m-$k.txt" | head -40
        done
    fi
done
tail -3 "$OUT/timing.err" 2>/dev/null
echo "== table"
printf '%s' "$table"
