#!/bin/bash
# Runs the whole training on the GPU machine. The device tool sends the checkout /work/main plus the carried,
# git-ignored folder .dev15, which holds copies of this folder's Python files, the corpus
# (corpus.txt.xz, from extract_corpus.py) and the tokenizer template (fixtures/tokenizers/qwen3-trunc2048):
#   scripts/train/stage.sh /work/main/.dev15        (here)
#   bash .dev15/device.sh full                       (there; results in $OUT/*.tgz and $OUT/train.log)
# TRAIN_ARGS passes more flags to train.py (a later round: --round 2 --init-dir DIR --lr 1e-3); BUDGET (seconds) stops
# the model stage at that time after the start and saves what it has.
set -eo pipefail
D=$(cd "$(dirname "$0")" && pwd)
SCALE=${1:-full}
SEED=${2:-15}
export PYTHONUNBUFFERED=1 CUBLAS_WORKSPACE_CONFIG=:4096:8 TOKENIZERS_PARALLELISM=true HF_HUB_OFFLINE=1
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
python3 -c "import torch, transformers, tokenizers, peft; print('torch', torch.__version__, 'transformers', transformers.__version__, 'tokenizers', tokenizers.__version__, 'peft', peft.__version__)"
rm -rf /tmp/w /tmp/o
TOK=()
[ -f "$D/tokenizer-reuse/tokenizer.json" ] && TOK=(--tokenizer-dir "$D/tokenizer-reuse")
python3 "$D/train.py" all --work /tmp/w --out /tmp/o --scale "$SCALE" --seed "$SEED" "${TOK[@]}" ${TRAIN_ARGS:-} \
    --corpus "$D/corpus.txt.xz" --tokenizer-template "$D/tokenizer-template" --model-budget ${BUDGET:-0} 2>&1 | tee "$OUT/train.log"
cp /tmp/w/prep.json /tmp/o/ 2>/dev/null || true
cd /tmp/o
for m in demo-qwen3 demo-qwen35 demo-qwen3-rerun; do [ -d $m ] && tar czf "$OUT/$m.tgz" $m; done
tar czf "$OUT/rest.tgz" --exclude=demo-qwen3 --exclude=demo-qwen35 --exclude=demo-qwen3-rerun .
ls -la "$OUT"
