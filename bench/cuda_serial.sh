#!/usr/bin/env bash
# decide --serial against --batch on one model, byte for byte (the JSON lines with the logits, without "ms"): passes
# of one criterion run as CUDA graphs with programmatic edges (each kernel may start while the one before it still
# runs), the batch as one longer pass without; every criterion's bits must not depend on that. The serial run three
# times: a kernel that reads its inputs before they are written gives another result now and then.
# Usage: bash bench/cuda_serial.sh BIN MODEL_DIR PRECISION [DEVICE]   (exit 1 when a run differs)
set -uo pipefail
BIN=${1:?usage: bench/cuda_serial.sh BIN MODEL_DIR PRECISION [DEVICE]}
M=${2:?model}
P=${3:?precision}
DEV=${4:-cuda}
cd "$(dirname "$0")/.."
run() {
    "$BIN" decide --device "$DEV" --precision "$P" --model "$M" --evidence models/demo/ticket.txt \
        --criteria models/demo/criteria.jsonl --json --quiet --show-logits "$1" | sed 's/,"ms":[^,}]*//'
}
ref=$(run --batch) || { echo "cuda_serial: decide --batch failed" >&2; exit 2; }
[ -n "$ref" ] || { echo "cuda_serial: decide --batch wrote nothing" >&2; exit 2; }
bad=0
for i in 1 2 3; do
    got=$(run --serial) || { echo "cuda_serial: decide --serial failed" >&2; exit 2; }
    if [ "$got" = "$ref" ]; then echo "serial run $i: = batch ($(echo "$ref" | wc -l) criteria)"
    else echo "serial run $i: DIFFERS from batch"; diff <(echo "$ref") <(echo "$got") | head -6; bad=1; fi
done
exit $bad
