#!/bin/bash
# Order-consistency fine-tunes of the shipped demo-qwen3 on the GPU machine (scripts/train/finetune.py --device cuda),
# in one device call; nothing to carry (the script, the generator and the model are in the tree):
#   run(command="bash scripts/train/finetune_device.sh", timeout_s=600)
# RUNS holds the runs, separated by ';', each a list of finetune.py flags; run N saves $OUT/ftN.tgz (the model with
# its finetune.json) and logs to $OUT/ftN.log. BUDGET (seconds, default 540) is the whole call's: each run is given
# what is left of it, shared evenly among the runs still to come, and saves what it has when its share is spent.
# PARALLEL=1 starts every run at once (each launch-bound process leaves the GPU idle between its kernels), each
# with the whole BUDGET and 16 / runs CPU threads.
set -eo pipefail
cd "$(dirname "$0")/../.."
bash scripts/packed.sh unpack # the weights kept in git as .xz (a checkout that travelled here has only those)
export PYTHONUNBUFFERED=1 CUBLAS_WORKSPACE_CONFIG=:4096:8 TOKENIZERS_PARALLELISM=true HF_HUB_OFFLINE=1
OUT=${OUT:-/tmp/ft-out}
mkdir -p "$OUT"
RUNS=${RUNS:---steps 2000 --unknowable 3}
BUDGET=${BUDGET:-540}
start=$(date +%s)
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
python3 -c "import torch, tokenizers; print('torch', torch.__version__, 'tokenizers', tokenizers.__version__)"
IFS=';' read -ra runs <<<"$RUNS"
one() {  # run index, its budget, CPU threads
    # shellcheck disable=SC2086
    python3 scripts/train/finetune.py --model models/demo-qwen3 --out /tmp/ft$1 --device cuda --threads "$3" \
        --budget "$2" ${runs[$1]} >"$OUT/ft$1.log" 2>&1 || echo "run $1 failed: see ft$1.log"
    grep -v '^step [0-9]*[1-9]0/' "$OUT/ft$1.log" | sed "s/^/[$1] /" || true
    [ -f /tmp/ft$1/model.safetensors ] && tar czf "$OUT/ft$1.tgz" -C /tmp ft$1
}
if [ "${PARALLEL:-0}" = 1 ]; then
    for i in "${!runs[@]}"; do
        echo "== run $i: ${runs[$i]} (budget $BUDGET s, in parallel)"
        one "$i" "$BUDGET" $((16 / ${#runs[@]})) &
    done
    wait
else
    for i in "${!runs[@]}"; do
        left=$((BUDGET - ($(date +%s) - start)))
        share=$((left / (${#runs[@]} - i)))
        echo "== run $i: ${runs[$i]} (budget ${share} s)"
        one "$i" "$share" 8
    done
fi
sha256sum /tmp/ft*/model.safetensors || true
ls -la "$OUT"
