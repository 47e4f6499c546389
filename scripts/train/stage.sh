#!/bin/bash
# Copies what the GPU run needs into DEST (a git-ignored folder of the checkout the device tool sends).
# The corpus is made first with: python3 scripts/train/extract_corpus.py --out /tmp/corpus.txt.xz, and the
# lexicon with: python3 scripts/train/lexicon.py extract --out /tmp/lexicon.tsv.xz (LEXICON=path overrides)
set -e
DEST=${1:?usage: stage.sh DEST [CORPUS.txt.xz]}
CORPUS=${2:-/tmp/corpus.txt.xz}
R=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$DEST/tokenizer-template"
cp "$R/scripts/train/train.py" "$R/scripts/train/qwen3_train.py" "$R/scripts/train/gen_decisions.py" \
   "$R/scripts/train/paraphrase.py" "$R/scripts/train/lexicon.py" "$R/scripts/train/device.sh" "$DEST/"
cp "$R/fixtures/tokenizers/qwen3-trunc2048/tokenizer.json" "$R/fixtures/tokenizers/qwen3-trunc2048/tokenizer_config.json" \
   "$DEST/tokenizer-template/"
cp "$CORPUS" "$DEST/corpus.txt.xz"
cp "${LEXICON:-/tmp/lexicon.tsv.xz}" "$DEST/lexicon.tsv.xz"
# TOKENIZER=DIR: reuse that directory's tokenizer (train.py --tokenizer-dir) instead of training a new one
if [ -n "${TOKENIZER:-}" ]; then
    mkdir -p "$DEST/tokenizer-reuse"
    cp -L "$TOKENIZER/tokenizer.json" "$TOKENIZER/tokenizer_config.json" "$DEST/tokenizer-reuse/"
fi
du -sh "$DEST"
