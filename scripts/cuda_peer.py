#!/usr/bin/env python3
"""transformers on the GPU, the peer of typedecide's CUDA timing table (issue 17; run by bench/cuda_device.sh on the
GPU machine, beside `typedecide bench --device cuda` in the same call).

On a checkpoint as saved (e.g. `typedecide synth --preset qwen3-0.6b`, BF16), loaded in bf16 with sdpa attention:
  prefill   one forward over N random tokens (batch 1), tokens/s
  decode    a greedy loop of M single-token forwards with the KV cache (batch 1) after a 16-token prompt, tokens/s
  decide    C criteria of S tokens over one P-token evidence: the evidence once, its cache repeated C times, the C
            suffixes in one batched forward with logits only at the last position; criteria/s (prefix included)
Median of --repeat runs after one warm-up each. Prints one JSON object."""
import argparse
import json
import statistics
import time

import torch
import transformers
from transformers import AutoModelForCausalLM


def timed(fn, repeat):
    fn()  # warm-up
    torch.cuda.synchronize()
    out = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        out.append(time.perf_counter() - t0)
    return statistics.median(out), min(out), max(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True)
    ap.add_argument("--prefill", type=int, default=2048)
    ap.add_argument("--decode", type=int, default=128)
    ap.add_argument("--prefix", type=int, default=256)
    ap.add_argument("--criteria", type=int, default=144)
    ap.add_argument("--suffix", type=int, default=45)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float32"])
    a = ap.parse_args()
    dev = torch.device("cuda")
    dtype = getattr(torch, a.dtype)
    model = AutoModelForCausalLM.from_pretrained(a.model, dtype=dtype, attn_implementation="sdpa").to(dev).eval()
    V = model.config.vocab_size
    g = torch.Generator(device="cpu").manual_seed(7)
    ids = lambda b, n: torch.randint(0, V, (b, n), generator=g).to(dev)
    res = {"peer": "transformers", "transformers": transformers.__version__, "torch": torch.__version__,
           "gpu": torch.cuda.get_device_name(0), "dtype": a.dtype, "attention": "sdpa", "model": a.model,
           "repeat": a.repeat}

    with torch.inference_mode():
        x = ids(1, a.prefill)
        med, lo, hi = timed(lambda: model(x, use_cache=True, logits_to_keep=1), a.repeat)
        res["prefill"] = {"tokens": a.prefill, "seconds": med, "tokens_per_s": a.prefill / med,
                          "min_s": lo, "max_s": hi}

        prompt = ids(1, 16)

        def decode():
            out = model(prompt, use_cache=True, logits_to_keep=1)
            cache, tok = out.past_key_values, out.logits[:, -1:].argmax(-1)
            for _ in range(a.decode):
                out = model(tok, past_key_values=cache, use_cache=True)
                cache, tok = out.past_key_values, out.logits[:, -1:].argmax(-1)
            return tok

        med, lo, hi = timed(decode, a.repeat)
        res["decode"] = {"tokens": a.decode, "prompt": 16, "seconds": med, "tokens_per_s": a.decode / med,
                         "min_s": lo, "max_s": hi, "note": "includes the 16-token prompt's prefill"}

        head, suffixes = ids(1, a.prefix), ids(a.criteria, a.suffix)
        how = "evidence once, its cache repeated per criterion (batch_repeat_interleave)"

        def decide():
            out = model(head, use_cache=True, logits_to_keep=1)
            cache = out.past_key_values
            cache.batch_repeat_interleave(a.criteria)
            pos = torch.arange(a.prefix, a.prefix + a.suffix, device=dev).unsqueeze(0).expand(a.criteria, -1)
            return model(suffixes, past_key_values=cache, position_ids=pos, use_cache=False, logits_to_keep=1).logits

        try:
            decide()
        except Exception as e:  # a cache without batch_repeat_interleave: every criterion with its evidence, batched
            how = "each criterion with its evidence in one batch of %d x %d (%s)" % (a.criteria, a.prefix + a.suffix, e)
            full = torch.cat([head.expand(a.criteria, -1), suffixes], dim=1)

            def decide():
                return model(full, use_cache=False, logits_to_keep=1).logits

        med, lo, hi = timed(decide, a.repeat)
        res["decide"] = {"criteria": a.criteria, "suffix": a.suffix, "prefix": a.prefix, "seconds": med,
                         "criteria_per_s": a.criteria / med, "min_s": lo, "max_s": hi, "how": how}
    print(json.dumps(res))


if __name__ == "__main__":
    main()
