#!/usr/bin/env bash
# Candidate demo-qwen3 models side by side (issue 15: how the order fine-tunes in
# bench/results/demo-finetune-order-gpu.json were compared and the shipped one chosen). For each model directory,
# one JSON line: mean family balanced accuracy [readout, cyclic debias], order-unstable rows under cyclic debias and
# ECE [readout, cyclic] on
#   fixture  fixtures/eval/heldout.jsonl (260 rows of the test split)
#   val867   gen_decisions.py --split test --groups 400 --seed 15-val (867 more rows of the test split: the seed of
#            the training-time check, not the fixture; what a candidate is chosen by)
#   indist   gen_decisions.py --split train --groups 120 --seed 15-indist --no-paraphrase (new rows, training wordings)
#   tau      gen_decisions.py --split train --groups 120 --seed 15-tau (training-split rows for choosing a temperature)
#   hand     fixtures/eval/decisions.jsonl (194 rows written by hand)
# and, where DIR/shipment-lora exists (finetune.py --adapter-steps) or ADAPTER is given for the shipped model, the
# shipment_tracking fixture without and with the adapter.
#   bench/demo_compare.sh DIR... (e.g. models/demo-qwen3; ADAPTER=models/demo-qwen3-shipment-lora; SETS="fixture tau")
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${TD_BIN:-build/typedecide}
SETS=${SETS:-fixture val867 indist hand}
[ $# -ge 1 ] || { echo "usage: bench/demo_compare.sh DIR... (model directories)" >&2; exit 2; }
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
G=scripts/train/gen_decisions.py
python3 $G --split test --groups 400 --seed 15-val --out "$T/val867.jsonl"
python3 $G --split train --groups 120 --seed 15-indist --no-paraphrase --out "$T/indist.jsonl"
python3 $G --split train --groups 120 --seed 15-tau --out "$T/tau.jsonl"
cp fixtures/eval/heldout.jsonl "$T/fixture.jsonl"
cp fixtures/eval/decisions.jsonl "$T/hand.jsonl"
ev() { # fixture model [flags...] -> the evaluate report in $T/r.json
    "$BIN" evaluate "$1" --model "$2" --threads 2 --quiet --out "$T/r.json" "${@:3}" >/dev/null
}
field() { node -e 'const r = require(process.argv[1]); const v = r[process.argv[2]];
                   console.log(typeof v === "number" ? +v.toFixed(3) : v)' "$T/r.json" "$1"; }
for m in "$@"; do
    line="{\"model\": \"$m\""
    for s in $SETS; do
        ev "$T/$s.jsonl" "$m"
        a=$(field mean_family_balanced_accuracy) e=$(field ece)
        ev "$T/$s.jsonl" "$m" --debias cyclic
        line="$line, \"$s\": [$a, $(field mean_family_balanced_accuracy)], \"${s}_unstable\": $(field order_unstable)"
        line="$line, \"${s}_ece\": [$e, $(field ece)]"
    done
    ad=${ADAPTER:-$m/shipment-lora}
    if [ -d "$ad" ]; then
        ev fixtures/eval/heldout-shipment.jsonl "$m"
        b=$(field mean_family_balanced_accuracy)
        ev fixtures/eval/heldout-shipment.jsonl "$m" --adapter "$ad"
        line="$line, \"shipment_base_adapter\": [$b, $(field mean_family_balanced_accuracy)]"
    fi
    echo "$line}"
done
