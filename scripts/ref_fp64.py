#!/usr/bin/env python3
"""Float64 ground truth for the reference fixtures: how far transformers' own fp32 logits are from exact.

Runs on the GPU machine (torch, transformers 5.17, peft), on CPU:

    python3 scripts/ref_fp64.py fixtures/models OUTDIR
    python3 scripts/ref_fp64.py fixtures/models --into

For every fixture directory with a ref.json it loads the SAME saved checkpoint with dtype=float64 (eager attention),
computes the logits of every prompt and writes OUTDIR/<name>/ref64_logits_K.f32 (the float64 logits rounded to
float32, same layout as ref_logits_K.f32). It prints, per prompt, max |fp32 reference - fp64| over all positions,
which is the noise floor of any fp32 implementation on that fixture. With --into, only the fixtures that have no
float64 logits yet get them, in their own directory, and their ref.json gains "logits64_files" and
"fp32_vs_fp64_max_abs" (what test_fixtures reads), as scripts/make_fixtures.py writes them for new fixtures.
"""
import json
import os
import struct
import sys

import torch


def load(d, ref):
    import transformers
    if "base" in ref:
        from peft import PeftModel
        base_dir = os.path.join(os.path.dirname(d), ref["base"])
        base = transformers.Qwen3ForCausalLM.from_pretrained(base_dir, dtype=torch.float64, attn_implementation="eager")
        return PeftModel.from_pretrained(base, d).eval()
    arch = json.load(open(os.path.join(d, "config.json"))).get("architectures", [""])[0]
    cls = getattr(transformers, arch)
    return cls.from_pretrained(d, dtype=torch.float64, attn_implementation="eager").eval()


def main():
    root, out = sys.argv[1], sys.argv[2]
    into = out == "--into"
    torch.set_num_threads(8)
    for name in sorted(os.listdir(root)):
        d = os.path.join(root, name)
        rp = os.path.join(d, "ref.json")
        if not os.path.exists(rp):
            continue
        ref = json.load(open(rp))
        if into and "logits64_files" in ref:
            continue
        try:
            model = load(d, ref)
        except Exception as e:  # keep going: one failure must not cost the others
            print(f"{name}: load failed: {e!r}")
            continue
        dest = d if into else os.path.join(out, name)
        os.makedirs(dest, exist_ok=True)
        V = ref["vocab_size"]
        files, floors = [], []
        for k, prompt in enumerate(ref["prompts"]):
            with torch.no_grad():
                lg = model(input_ids=torch.tensor([prompt])).logits[0].double()
            lg = lg[:, :V]
            files.append(f"ref64_logits_{k}.f32")
            with open(os.path.join(dest, files[-1]), "wb") as f:
                f.write(lg.float().numpy().astype("<f4").tobytes())
            raw = open(os.path.join(d, ref["logits_files"][k]), "rb").read()
            f32 = torch.tensor(struct.unpack("<%df" % (len(raw) // 4), raw), dtype=torch.float64).view(len(prompt), V)
            per_pos = (f32 - lg).abs().max(dim=1).values
            floors.append(per_pos.max().item())
            print(f"{name} prompt {k}: max |fp32 ref - fp64| = {per_pos.max().item():.3e} "
                  f"(position {int(per_pos.argmax())}); first positions {[f'{x:.1e}' for x in per_pos[:6].tolist()]}")
        if into:
            ref["logits64_files"], ref["fp32_vs_fp64_max_abs"] = files, floors
            with open(rp, "w") as f:
                json.dump(ref, f, indent=1)


if __name__ == "__main__":
    main()
