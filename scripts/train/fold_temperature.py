#!/usr/bin/python3
"""Folds a softmax temperature into a saved demo-qwen3: the final RMSNorm weight divided by tau, so every logit is
divided by tau, exactly as transformers (and typedecide) compute it from the checkpoint; the argmax of every
readout, hence accuracy and order stability, stays as it was, only the probabilities flatten (tau > 1).

    /usr/bin/python3 scripts/train/fold_temperature.py --model DIR --out DIR --tau T
"""
import argparse
import os
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import finetune  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--tau", type=float, required=True)
    a = ap.parse_args()
    if a.tau <= 0:
        ap.error("--tau must be positive")
    sd = finetune.read_safetensors(os.path.join(a.model, "model.safetensors"))
    sd["model.norm.weight"] = sd["model.norm.weight"] / a.tau
    os.makedirs(a.out, exist_ok=True)
    finetune.write_safetensors_bf16(os.path.join(a.out, "model.safetensors"), sd)
    for f in ("config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(a.model, f), a.out)


if __name__ == "__main__":
    sys.exit(main())
