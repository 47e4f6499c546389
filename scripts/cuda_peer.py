#!/usr/bin/env python3
"""transformers on the GPU, the peer of typedecide's CUDA timing table (issue 17; run by bench/cuda_device.sh on the
GPU machine, beside `typedecide bench --device cuda` in the same call).

On a checkpoint as saved (e.g. `typedecide synth --preset qwen3-0.6b`, BF16), loaded in bf16 with sdpa attention:
  prefill   one forward over N random tokens (batch 1), tokens/s
  decode    a greedy loop of M single-token forwards with the KV cache (batch 1) after a 16-token prompt, tokens/s
  decide    C criteria of S tokens over one P-token evidence: the evidence once, its cache repeated C times, the C
            suffixes in one batched forward with logits only at the last position; criteria/s (prefix included).
            Where the cache cannot be repeated (a hybrid model's), every criterion with its evidence in one batch
  one       one criterion alone over a prefilled P-token evidence: the S-token suffix's forward on the evidence's
            cache (cropped back to the evidence after each; where a cache cannot be cropped, a copy made outside the
            timed part), ms
  decide_evidences  E evidences x C criteria: decide (above) for each evidence in turn, criteria/s over all
  ceiling   (--ceiling) a bf16 8192 x 8192 x 8192 matrix product through torch: TFLOP/s, the measured tensor-core
            ceiling the engines' products are stated against
Median of --repeat runs after one warm-up each. Prints one JSON object. --device cpu tries the script without a
GPU (slow: use small sizes)."""
import argparse
import copy
import json
import statistics
import time

import torch
import transformers
from transformers import AutoModelForCausalLM


def sync():
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def timed(fn, repeat, before=None, warm=True):
    """median, min, max seconds of fn() over repeat runs after a warm-up (unless warm is False: fn's parts already
    ran); before() runs untimed ahead of each"""
    if warm:
        if before:
            before()
        fn()
    sync()
    out = []
    for _ in range(repeat):
        if before:
            before()
            sync()
        t0 = time.perf_counter()
        fn()
        sync()
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
    ap.add_argument("--evidences", type=int, default=16, help="evidences of decide_evidences (0: not measured)")
    ap.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float32"])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--ceiling", action="store_true", help="also measure the bf16 matrix product ceiling")
    a = ap.parse_args()
    dev = torch.device(a.device)
    dtype = getattr(torch, a.dtype)
    model = AutoModelForCausalLM.from_pretrained(a.model, dtype=dtype, attn_implementation="sdpa").to(dev).eval()
    V = model.config.vocab_size
    g = torch.Generator(device="cpu").manual_seed(7)
    ids = lambda b, n: torch.randint(0, V, (b, n), generator=g).to(dev)
    res = {"peer": "transformers", "transformers": transformers.__version__, "torch": torch.__version__,
           "gpu": torch.cuda.get_device_name(0) if a.device == "cuda" else "cpu", "dtype": a.dtype, "attention": "sdpa", "model": a.model,
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

        suffixes = ids(a.criteria, a.suffix)
        how = "evidence once, its cache repeated per criterion (batch_repeat_interleave)"

        def decide_cached(head):
            cache = model(head, use_cache=True, logits_to_keep=1).past_key_values
            cache.batch_repeat_interleave(a.criteria)
            # positions follow from the cache's length (as for one criterion below): no position_ids, which a model
            # with multi-axis RoPE (Qwen3.5) would read otherwise
            return model(suffixes, past_key_values=cache, use_cache=False, logits_to_keep=1).logits

        def decide_full(head):
            full = torch.cat([head.expand(a.criteria, -1), suffixes], dim=1)
            return model(full, use_cache=False, logits_to_keep=1).logits

        decide_one = decide_cached
        head = ids(1, a.prefix)
        try:
            decide_cached(head)
        except Exception as e:  # noqa: BLE001 - a cache without batch_repeat_interleave: every criterion with its evidence
            how = "each criterion with its evidence in one batch of %d x %d (%s)" % (a.criteria, a.prefix + a.suffix, e)
            decide_one = decide_full

        med, lo, hi = timed(lambda: decide_one(head), a.repeat)
        res["decide"] = {"criteria": a.criteria, "suffix": a.suffix, "prefix": a.prefix, "seconds": med,
                         "criteria_per_s": a.criteria / med, "min_s": lo, "max_s": hi, "how": how}

        # one criterion over the prefilled evidence: attention caches are cropped back to the evidence; a model with
        # recurrent layers (Qwen3.5's DeltaNet) gets a copy of the evidence's cache before each, outside the timing
        one = ids(1, a.suffix)
        base = model(head, use_cache=True, logits_to_keep=1).past_key_values
        state = {"cache": base}
        tc = getattr(model.config, "text_config", model.config)
        recurrent = (any("linear" in str(t) for t in (getattr(tc, "layer_types", None) or [])) or
                     getattr(tc, "full_attention_interval", None) is not None or "qwen3_5" in str(tc.model_type))
        before = None
        how1 = "the suffix on the evidence's cache, cropped back to the evidence after each"
        if recurrent or not hasattr(base, "crop"):
            how1 = "the suffix on a copy of the evidence's cache (recurrent layers: no crop), copied outside the timing"

            def before():
                state["cache"] = copy.deepcopy(base)

        def one_criterion():
            c = state["cache"]
            r = model(one, past_key_values=c, use_cache=True, logits_to_keep=1).logits  # positions from the cache
            if before is None:
                c.crop(a.prefix)
            return r

        try:
            med, lo, hi = timed(one_criterion, max(a.repeat, 5), before)
            res["one_criterion"] = {"prefix": a.prefix, "suffix": a.suffix, "ms": 1e3 * med, "min_ms": 1e3 * lo,
                                    "max_ms": 1e3 * hi, "how": how1}
        except Exception as e:  # noqa: BLE001 - reported, the other measurements kept
            res["one_criterion"] = {"error": "%s: %s" % (type(e).__name__, e)}
        del base, state

        if a.evidences > 0:  # E evidences, each decided as above in turn (one evidence's cache at a time)
            heads = [ids(1, a.prefix) for _ in range(a.evidences)]
            try:
                # decide_one is warm from the decide line above: one timed pass over the E evidences
                med, lo, hi = timed(lambda: [decide_one(h) for h in heads], 1, warm=False)
                res["decide_evidences"] = {"evidences": a.evidences, "criteria": a.criteria, "suffix": a.suffix,
                                           "prefix": a.prefix, "seconds": med, "criteria_per_s": a.evidences * a.criteria / med,
                                           "how": how + ", evidence by evidence"}
            except Exception as e:  # noqa: BLE001
                res["decide_evidences"] = {"error": "%s: %s" % (type(e).__name__, e)}

    if a.ceiling and a.device == "cuda":
        n = 8192
        x = torch.randn(n, n, device=dev, dtype=torch.bfloat16)
        y = torch.randn(n, n, device=dev, dtype=torch.bfloat16)
        for _ in range(3):
            x @ y
        sync()
        t0 = time.perf_counter()
        for _ in range(10):
            x @ y
        sync()
        t = (time.perf_counter() - t0) / 10
        res["ceiling"] = {"what": "torch bf16 %d^3 matrix product, mean of 10 after 3 warm-ups" % n,
                          "tflops": 2 * n ** 3 / t / 1e12}
    print(json.dumps(res))


if __name__ == "__main__":
    main()
