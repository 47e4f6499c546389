#!/usr/bin/env bash
# Exact by default on the GPU host's Intel Xeon (AVX-512 BF16 and AMX, whose default kernel set has bf16 products),
# in ONE device call:
#   here    bench/exact_device.sh --prepare
#           builds without MPI into build-nompi/ and fills build-device/ (git-ignored) as bench/scaling_device.sh
#           --prepare does (typedecide, libraries, llama.cpp's source, tokenizer), plus the parity test binaries
#           (test_kernels, test_fixtures, test_readout_parity, test_engine, test_hybrid).
#   device  run(command="bash bench/exact_device.sh", carry=["build-device"], timeout_s=590)
# Steps (STEPS, default "refs tests peer"):
#   refs   transformers' references made there from the checkpoints as saved: float64 logits for the fixtures that
#          have none yet (scripts/ref_fp64.py --into) and the typed readout (scripts/readout_refs.py) of the BF16
#          fixtures and the demo models, into the working copy (so that the tests below read them) and, as one
#          archive, $OUT/refs.tgz (unpack it at the repository root here)
#   tests  the parity and exactness tests with the machine's DEFAULT kernels, and every set in test_fixtures, each
#          log in $OUT/tests.log
#   peer   bench/peer_device.sh on the BF16 model (and Q8_0 when the budget allows) with PRECISIONS="fp32 bf16":
#          both precisions beside llama.cpp's BF16 GGUF, and every kernel set, in $OUT/peer.json
set -uo pipefail
cd "$(dirname "$0")/.."
bash scripts/packed.sh unpack # the weights kept in git as .xz (a checkout that travelled here has only those)
. bench/bundle.sh
BUNDLE=${BUNDLE:-build-device}
TESTS="test_kernels test_fixtures test_readout_parity test_engine test_hybrid"

if [ "${1:-}" = "--prepare" ]; then
    set -e
    cmake -S . -B build-nompi -DCMAKE_BUILD_TYPE=Release -DCMAKE_DISABLE_FIND_PACKAGE_MPI=ON >/dev/null
    # shellcheck disable=SC2086
    cmake --build build-nompi --target typedecide_cli $TESTS -j"$(nproc)" >/dev/null
    rm -rf "$BUNDLE" && mkdir -p "$BUNDLE/lib" "$BUNDLE/tests"
    cp build-nompi/typedecide "$BUNDLE/"
    for t in $TESTS; do cp "build-nompi/tests/$t" "$BUNDLE/tests/"; done
    strip "$BUNDLE/typedecide" "$BUNDLE"/tests/* # the tree and the bundle travel within 64 MiB
    bundle_libs build-nompi/typedecide "$BUNDLE/lib"
    bundle_llama_src "$BUNDLE"
    bundle_tokenizer "$BUNDLE"
    cat >"$BUNDLE/manifest.txt" <<EOF
typedecide commit $(git rev-parse HEAD)$(git diff --quiet HEAD -- src cli include tests || echo " (with uncommitted changes)")
built on $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), $(ldd --version | head -1)
$(cat "$BUNDLE/llama.txt")
EOF
    du -sh "$BUNDLE" >&2
    echo "exact_device: $BUNDLE ready; on the device: run(command=\"bash bench/exact_device.sh\", carry=[\"$BUNDLE\"], timeout_s=590)" >&2
    exit 0
fi

START=$(date +%s)
OUT=${OUT:-$PWD/exact-out}
STEPS=${STEPS:-refs tests peer}
WORK=${WORK:-${TMPDIR:-/tmp}/td-exact} # logs that come back as one archive (the device returns 8 files at most)
mkdir -p "$OUT" "$WORK/build" "$WORK/peer"
export LD_LIBRARY_PATH=$PWD/$BUNDLE/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export TD_ROOT=$PWD TD_BIN=$PWD/$BUNDLE/typedecide
say() { echo "exact [$(($(date +%s) - START)) s]: $*" >&2; }
has() { case " $STEPS " in *" $1 "*) return 0 ;; esac; return 1; }
say "$(nproc) cores; $("$TD_BIN" --version)"
grep -m1 flags /proc/cpuinfo >"$WORK/flags.txt"

if has peer; then # llama.cpp's two builds and our GGUFs, in the background while the references and tests run
    WORK=${TMPDIR:-/tmp}/td-peer-device BUILD_ONLY=1 QUANTS=${QUANTS:-bf16 q8_0} OUT=$WORK/build \
        bash bench/peer_device.sh >"$WORK/peer-build.log" 2>&1 &
    builder=$!
fi

if has refs; then
    stamp=$(mktemp)
    python3 scripts/ref_fp64.py fixtures/models --into >"$WORK/refs.log" 2>&1 || say "ref_fp64 failed"
    python3 scripts/readout_refs.py fixtures/readout fixtures/models/qwen3-tiny-tied fixtures/models/qwen3-tiny-untied \
        fixtures/models/qwen35-tiny-text fixtures/models/qwen35-tiny-vl models/demo-qwen3 models/demo-qwen35 \
        >>"$WORK/refs.log" 2>&1 || say "readout_refs failed"
    find fixtures/models fixtures/readout -newer "$stamp" -type f | tar -czf "$OUT/refs.tgz" -T -
    say "refs: $(tar -tzf "$OUT/refs.tgz" | wc -l) files ($(tail -1 "$WORK/refs.log"))"
fi

if has tests; then
    for t in $TESTS; do
        echo "== $t" >>"$OUT/tests.log"
        if "$BUNDLE/tests/$t" >>"$OUT/tests.log" 2>&1; then say "$t passed"; else say "$t FAILED"; fi
    done
    grep -E 'transformers|^kernels|FAIL|CHECK' "$OUT/tests.log" | head -80
fi

if has peer; then
    wait "$builder"
    say "peers built: $(tail -1 "$WORK/peer-build.log")"
    OUT=$WORK/peer QUANTS=${QUANTS:-bf16 q8_0} PRECISIONS="fp32 bf16" BUDGET_S=$((560 - ($(date +%s) - START))) \
        bash bench/peer_device.sh >"$WORK/peer.log" 2>&1 || say "peer failed: $(tail -3 "$WORK/peer.log")"
    cp "$WORK/peer/peer.json" "$WORK/peer/peer.jsonl" "$OUT/" 2>/dev/null
    tail -5 "$WORK/peer.log" >&2
    python3 -c "import json; print(json.dumps(json.load(open('$OUT/peer.json'))['table'], indent=1))" 2>/dev/null
fi
tar -C "$WORK" -czf "$OUT/logs.tgz" --exclude='*.gguf' . 2>/dev/null
say done
