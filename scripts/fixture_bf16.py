#!/usr/bin/env python3
"""What BF16 compute does to the tiny fixtures' logits in transformers itself (issue 17; run on the GPU machine by
bench/cuda_device.sh): each fixture under fixtures/models (the checkpoint as saved; a PEFT adapter merged into its
base) loaded with dtype=bfloat16 on the GPU (sdpa, transformers' usual BF16 inference) and, for comparison, with
dtype=float32 on the GPU; every prompt of its ref.json run once; the largest |logit - reference| against the fixture's
fp32 reference logits (transformers fp32 on CPU, ref_logits_K.f32), and the largest |reference logit|.
Prints one JSON object per fixture and a summary line."""
import json
import os
import sys

import numpy as np
import torch
from transformers import AutoModelForCausalLM


def load(root, name, ref, dtype):
    d = os.path.join(root, name)
    if "base" in ref:  # a PEFT adapter over another fixture
        from peft import PeftModel
        base = AutoModelForCausalLM.from_pretrained(os.path.join(root, ref["base"]), dtype=dtype)
        return PeftModel.from_pretrained(base, d).merge_and_unload()
    return AutoModelForCausalLM.from_pretrained(d, dtype=dtype)


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else "fixtures/models"
    worst = {}
    for name in sorted(os.listdir(root)):
        path = os.path.join(root, name, "ref.json")
        if not os.path.exists(path):
            continue
        ref = json.load(open(path))
        V = ref["vocab_size"]
        row = {"fixture": name}
        for label, dtype in (("bf16", torch.bfloat16), ("fp32", torch.float32)):
            model = load(root, name, ref, dtype).to("cuda").eval()
            mx, top = 0.0, 0.0
            with torch.inference_mode():
                for ids, f in zip(ref["prompts"], ref["logits_files"]):
                    want = np.fromfile(os.path.join(root, name, f), dtype="<f4").reshape(len(ids), V)
                    got = model(torch.tensor([ids], device="cuda")).logits[0, :, :V].float().cpu().numpy()
                    mx = max(mx, float(np.abs(got - want).max()))
                    top = max(top, float(np.abs(want).max()))
            row[label + "_max_abs"] = mx
            row["largest_abs_logit"] = top
            worst[label] = max(worst.get(label, 0.0), mx)
            del model
        print(json.dumps(row))
    print(json.dumps({"summary": "transformers on the GPU vs the fixtures' fp32 references (max |diff|)", **worst}))


if __name__ == "__main__":
    main()
