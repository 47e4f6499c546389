#!/usr/bin/env bash
# The demo models on NEW rows worded like their training rows (issue 15): the generator's train split with a seed no
# training run used (15-indist) and no paraphrasing, i.e. new names, numbers, products and combinations in the
# training templates; against the held-out fixture (new templates), this separates "has learned the task" from
# "knows the English of the new wordings". Also the training rows themselves (the first 120 groups of round 2's
# data, seed 15r2-train, paraphrased as in training) and the adapter on new shipment rows. Writes
# bench/results/demo-indist.json (~2 minutes here).
#   bench/demo_indist.sh [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${1:-build}/typedecide
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
G=scripts/train/gen_decisions.py
python3 $G --split train --groups 120 --seed 15-indist --no-paraphrase --out "$T/indist.jsonl"
python3 $G --split train --groups 120 --seed 15r2-train --out "$T/trained.jsonl"
python3 $G --split train --families adapter --groups 60 --seed 15-indist --no-paraphrase --out "$T/indist-ship.jsonl"
ev() { # name fixture model [flags...] -> one JSON member
    local name=$1 fx=$2 m=$3
    shift 3
    "$BIN" evaluate "$T/$fx.jsonl" --model "$m" --threads 2 --quiet --out "$T/r.json" "$@" >/dev/null
    python3 -c "
import json, sys
d = json.load(open('$T/r.json'))
keep = {k: d[k] for k in ('n', 'accuracy', 'mean_family_balanced_accuracy', 'order_unstable', 'order_consistency',
                          'family_balanced_accuracy')}
print(json.dumps({'$name': dict(keep, fixture='$fx', model='$m', flags=' '.join(sys.argv[1:]))}))" "$@"
}
{
    for m in demo-qwen3 demo-qwen35; do
        ev "$m.indist.readout" indist models/$m
        ev "$m.indist.cyclic" indist models/$m --debias cyclic
        ev "$m.trained.readout" trained models/$m
    done
    ev "shipment.indist.base" indist-ship models/demo-qwen3
    ev "shipment.indist.adapter" indist-ship models/demo-qwen3 --adapter models/demo-qwen3-shipment-lora
} >"$T/all.jsonl"
python3 - "$T/all.jsonl" <<'EOF'
import json, sys
out = {"what": "demo models on new rows in training wordings (seed 15-indist, no paraphrasing), on their own "
               "training rows (seed 15r2-train) and the adapter on new shipment rows; typedecide evaluate, 2 threads",
       "command": "bench/demo_indist.sh", "fixtures": {
           "indist": "gen_decisions.py --split train --groups 120 --seed 15-indist --no-paraphrase",
           "trained": "gen_decisions.py --split train --groups 120 --seed 15r2-train",
           "indist-ship": "gen_decisions.py --split train --families adapter --groups 60 --seed 15-indist "
                          "--no-paraphrase"}, "results": {}}
for line in open(sys.argv[1]):
    out["results"].update(json.loads(line))
json.dump(out, open("bench/results/demo-indist.json", "w"), separators=(",", ":"))
for k, v in out["results"].items():
    print("%-28s n %3d  mean family balanced %.3f  order-unstable %s" % (k, v["n"], v["mean_family_balanced_accuracy"],
                                                                      v["order_unstable"]))
EOF
