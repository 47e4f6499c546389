#!/usr/bin/python3
"""Order-consistency fine-tuning of a saved demo-qwen3 (issue 15's order bar), on this VM's CPU or the GPU machine.

The shipped models put the same answer at a different letter for 37% of held-out rows (18% in their own wordings)
when the options are rotated. This continues a saved Qwen3 demo model on NEW training-split rows of the generator
(train.py's rendering, paraphrasing, 15% worked examples), each batch rows beside copies with rotated options, under
train.py's loss (text + 3 x answer letter) plus its consistency_loss (symmetric KL between a row's distribution over
options and its copy's). Tokenised by Hugging Face's `tokenizers` where it is installed (the GPU machine), else by
typedecide's own tokenizer (`typedecide tokenize --jsonl`, byte-identical to Hugging Face's, tests/test_tokenizer*);
trained as qwen3_train.Qwen3Train with torch (bf16 autocast) on --device (cpu: Debian's python3-torch here; cuda),
saved as BF16 safetensors under Hugging Face's names beside the input's config and tokenizer files. Seeded and
deterministic (torch.use_deterministic_algorithms; on CUDA with CUBLAS_WORKSPACE_CONFIG=:4096:8): the same device and
thread count give the same weights.

    /usr/bin/python3 scripts/train/finetune.py --model models/demo-qwen3 --out /tmp/ft [--steps 120]
        [--groups 6000] [--seed 15] [--lr 2e-4] [--step-tokens 12288] [--threads 2] [--bin build/typedecide]
        [--unknowable W] [--consistency W] [--sharpen T] [--device cpu|cuda] [--budget S] [--compile]
        [--adapter-steps N] [--adapter-groups 20000] [--swap-options F]

--unknowable W also trains consistency where the answer cannot be known: a third of each step's tokens are a group's
questions under another group's evidence, with rotated copies, under W x consistency_loss and no other loss. Both
runs of 2026-12-02 on the CPU (then named finetune_cpu.py; NOTES "Demo models",
bench/results/demo-finetune-order-cpu.json) were measured, not shipped. --consistency W weighs the consistency loss
on the answerable rows (default 1); --sharpen T replaces the symmetric KL of every pair by consensus_loss.
--compile trains under torch.compile (one dynamic graph, as train.py; CUDA). --adapter-steps N then trains the
shipment_tracking LoRA adapter on the fine-tuned model (train.lora_adapter, as train.py's adapter stage, on new rows
of that family) and saves it in OUT/shipment-lora (needs peft and CUDA).
"""
import argparse
import json
import os
import random
import struct
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import numpy as np  # noqa: E402
import torch  # noqa: E402

import train  # noqa: E402


class CliTokenizer:
    """tokenizers.Tokenizer's encode_batch, through `typedecide tokenize --jsonl` (one process per batch)."""

    class Enc:
        def __init__(self, ids):
            self.ids = ids

    def __init__(self, bin_, model):
        self.bin, self.model = bin_, model

    def encode_batch(self, texts, add_special_tokens=False):
        assert not add_special_tokens
        inp = "".join(json.dumps({"text": t}, ensure_ascii=False) + "\n" for t in texts)
        out = subprocess.run([self.bin, "tokenize", "--model", self.model, "--jsonl", "-"], input=inp.encode(),
                             capture_output=True, check=True).stdout.decode().splitlines()
        assert len(out) == len(texts), (len(out), len(texts))
        return [self.Enc(json.loads(l)) for l in out]


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        head = json.loads(f.read(n))
        data = f.read()
    out = {}
    for k, v in head.items():
        if k == "__metadata__":
            continue
        assert v["dtype"] in ("BF16", "F32"), (k, v["dtype"])
        b, e = v["data_offsets"]
        t = torch.frombuffer(bytearray(data[b:e]), dtype=torch.bfloat16 if v["dtype"] == "BF16" else torch.float32)
        out[k] = t.reshape(v["shape"]).float()
    return out


def write_safetensors_bf16(path, tensors):
    """Hugging Face's layout: names sorted, BF16, {"format": "pt"} metadata."""
    head, blobs, off = {"__metadata__": {"format": "pt"}}, [], 0
    for k in sorted(tensors):
        b = tensors[k].detach().to(torch.bfloat16).contiguous().view(torch.int16).numpy().tobytes()
        head[k] = {"dtype": "BF16", "shape": list(tensors[k].shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(head, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


class HfTokenizer:
    """Hugging Face's tokenizers on the model's tokenizer.json (the GPU machine has the library)."""

    def __init__(self, model):
        import tokenizers
        self.t = tokenizers.Tokenizer.from_file(os.path.join(model, "tokenizer.json"))

    def encode_batch(self, texts, add_special_tokens=False):
        return self.t.encode_batch(texts, add_special_tokens=add_special_tokens)


def make_tokenizer(a):
    try:
        tok = HfTokenizer(a.model)
        print("tokenizer: Hugging Face tokenizers", flush=True)
    except ImportError:
        tok = CliTokenizer(a.bin, a.model)
        print("tokenizer: %s tokenize" % a.bin, flush=True)
    return tok


def consensus_loss(logits, ans_t, letter_ids, rot, n_opt, temp):
    """Cross-entropy of a row's and its rotated copy's distributions over options against their shared consensus,
    softmax(mean of the two log-distributions / temp), held fixed: below temp 1 the consensus is sharper than either,
    so an unsure pair is pushed to one decisive choice by content, whatever its letter (a tie that flips between
    rotations is what makes a row order-unstable; symmetric KL is already ~0 for two near-uniform copies)."""
    lp, lq, valid = train.paired_option_logprobs(logits, ans_t, letter_ids, rot, n_opt)
    target = torch.softmax(((lp + lq) / (2 * temp)).masked_fill(~valid, -1e4), dim=1).detach()
    return (-(target * (lp + lq)).masked_fill(~valid, 0.0).sum(1) / 2).mean()


def pair_loss(a, logits, ans_t, letter_ids, rot, n_opt):
    if a.sharpen > 0:
        return consensus_loss(logits, ans_t, letter_ids, rot, n_opt, a.sharpen)
    return train.consistency_loss(logits, ans_t, letter_ids, rot, n_opt)


EOT = 8166  # <|endoftext|> in the demo models' tokenizer


def seed_number(seed):
    """The digits of --seed ("15" -> 15): torch's and the adapter's seed."""
    return int("".join(c for c in seed if c.isdigit()) or 0)


def generate(work, name, *args):
    """gen_decisions.py ARGS... into work/name.jsonl -> its rows."""
    out = os.path.join(work, name + ".jsonl")
    subprocess.run([sys.executable, os.path.join(HERE, "gen_decisions.py"), *args, "--out", out], check=True)
    return train.read_jsonl(out)


def prepare(a, work, tok):
    generate(work, "ft", "--split", "train", "--groups", str(a.groups), "--seed", "%s-ft-train" % a.seed)
    generate(work, "val", "--split", "test", "--groups", "400", "--seed", "%s-val" % a.seed)
    base = tok.encode_batch(["Answer:"])[0].ids
    letter_ids = [e.ids[len(base)] for e in tok.encode_batch(["Answer: " + c for c in train.LETTERS])]
    rng = random.Random("ft-shots-%s" % a.seed)
    todo = [("ft", 0.15, 1.0), ("val", 0.0, 0.0)]
    if a.unknowable > 0:  # a group's questions under ANOTHER group's evidence: nothing there says the answer
        groups = train.groups_of(train.read_jsonl(os.path.join(work, "ft.jsonl")))
        urng = random.Random("ft-unknowable-%s" % a.seed)
        by_k = {}  # rows by their number of options, for --swap-options
        for g in groups:
            for r in g:
                by_k.setdefault(len(r["options"]), []).append(r)
        with open(os.path.join(work, "unk.jsonl"), "w", encoding="utf-8") as f:
            for gi, g in enumerate(groups):
                other = groups[(gi + urng.randrange(1, len(groups))) % len(groups)][0]["evidence"]
                for r in g[:2]:
                    # --swap-options: the evidence and question kept, another row's options
                    if a.swap_options > 0 and urng.random() < a.swap_options:
                        o = by_k[len(r["options"])][urng.randrange(len(by_k[len(r["options"])]))]["options"]
                        u = dict(r, options=o, answer=o[0]["id"])
                    else:
                        u = dict(r, evidence=other)
                    f.write(json.dumps(u, ensure_ascii=False) + "\n")
        todo.append(("unk", 0.0, 1.0))
    for name, rate, rot in todo:
        rows = train.read_jsonl(os.path.join(work, name + ".jsonl"))
        seqs, pairs = train.pack_rows(tok, rows, rng, rate, EOT, letter_ids, rot, work, name)
        print("%s: %d sequences, %d pairs" % (name, len(seqs), len(pairs)), flush=True)
    return letter_ids


def adapter(a, tok, letter_ids, V):
    """The LoRA adapter of the fine-tuned model in a.out, on new shipment_tracking rows (train.lora_adapter)."""
    with tempfile.TemporaryDirectory() as work:
        for split, seed, groups, name in (("train", "%s-ft-adapter" % a.seed, a.adapter_groups, "adapter"),
                                          ("test", "%s-val-adapter" % a.seed, 200, "val_adapter")):
            rows = generate(work, name, "--split", split, "--families", "adapter", "--groups", str(groups),
                            "--seed", seed, "--workers", str(8 if groups > 10000 else 1))
            train.pack_rows(tok, rows, random.Random("ft-adapter-%s" % a.seed), 0.0, EOT, letter_ids, 0.0, work, name)
        return train.lora_adapter(a.out, work, os.path.join(a.out, "shipment-lora"), a.adapter_steps,
                                  seed_number(a.seed), letter_ids, V)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--steps", type=int, default=120)
    ap.add_argument("--groups", type=int, default=6000)
    ap.add_argument("--seed", default="15")
    ap.add_argument("--lr", type=float, default=2e-4)
    ap.add_argument("--step-tokens", type=int, default=12288)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--bin", default="build/typedecide")
    ap.add_argument("--device", default="cpu", help="cpu (default) or cuda")
    ap.add_argument("--budget", type=float, default=0.0,
                    help="seconds after the start at which training stops and saves what it has (0: none)")
    ap.add_argument("--consistency", type=float, default=1.0,
                    help="weight of the consistency loss on the answerable rows (default 1)")
    ap.add_argument("--sharpen", type=float, default=0.0,
                    help="T > 0: the pair loss is consensus_loss at temperature T instead of symmetric KL")
    ap.add_argument("--unknowable", type=float, default=0.0,
                    help="weight of the consistency loss on rows whose evidence is another group's (a third of each "
                         "step's tokens; no answer or text loss on them); 0: none")
    ap.add_argument("--swap-options", type=float, default=0.0,
                    help="share (0-1) of the unknowable rows that keep their evidence and question but take another "
                         "row's options (unfamiliar options, as held-out wordings are to the model) instead of "
                         "another group's evidence")
    ap.add_argument("--compile", action="store_true", help="train under torch.compile (dynamic shapes)")
    ap.add_argument("--adapter-steps", type=int, default=0,
                    help="then train the shipment_tracking LoRA adapter for N steps into OUT/shipment-lora (0: none)")
    ap.add_argument("--adapter-groups", type=int, default=20000, help="shipment_tracking groups for the adapter")
    a = ap.parse_args()
    torch.manual_seed(seed_number(a.seed))
    torch.set_num_threads(a.threads)
    torch.use_deterministic_algorithms(True)
    tok = make_tokenizer(a)
    dev = a.device
    t0 = time.time()
    with tempfile.TemporaryDirectory() as work:
        letter_ids = prepare(a, work, tok)
        cfg = json.load(open(os.path.join(a.model, "config.json")))
        net = train.Qwen3Net(cfg["vocab_size"], dev, a.compile)
        sd = read_safetensors(os.path.join(a.model, "model.safetensors"))
        missing, unexpected = net.module.load_state_dict(sd, strict=False)  # copied onto the device's parameters
        assert not unexpected and missing == ["lm_head.weight"], (missing, unexpected)
        ft, val = train.Data(work, "ft"), train.Data(work, "val")
        unk = train.Data(work, "unk") if a.unknowable > 0 else None
        meta = json.load(open(os.path.join(work, "val.meta.json")))
        acc0, fam0 = train.quick_eval(net, val, meta, letter_ids, dev)
        print("before: val accuracy %.3f %s (%.0f s)" % (acc0, json.dumps(fam0), time.time() - t0), flush=True)
        params = list(net.module.parameters())
        opt = torch.optim.AdamW(params, lr=a.lr, betas=(0.9, 0.95), weight_decay=0.0, eps=1e-8)
        rng = np.random.default_rng([int(c) for c in a.seed if c.isdigit()] or [0])
        V = cfg["vocab_size"]
        hist = []
        for step in range(a.steps):
            if a.budget and time.time() - t0 > a.budget:
                print("budget of %.0f s spent: stopping after %d steps" % (a.budget, step), flush=True)
                break
            for g in opt.param_groups:
                g["lr"] = a.lr * min(1.0, (step + 1) / 10) * (0.1 + 0.9 * 0.5 * (1 + np.cos(np.pi * step / a.steps)))
            ids, mask, ans, rot, n_opt = ft.batch_pairs(rng, a.step_tokens * 2 // 3 if unk else a.step_tokens)
            logits, ans_t, text, answer = train.batch_losses(net, ids, mask, ans, V, dev)
            cons = pair_loss(a, logits, ans_t, letter_ids, rot, n_opt)
            loss = text + train.ANSWER_WEIGHT * answer + a.consistency * cons
            cons_unk = torch.zeros(())
            if unk:  # the consistency loss alone: nothing else of these rows is trained
                u_ids, u_mask, u_ans, u_rot, u_opt = unk.batch_pairs(rng, a.step_tokens // 3)
                u_logits, u_ans_t, _, _ = train.batch_losses(net, u_ids, u_mask, u_ans, V, dev)
                cons_unk = pair_loss(a, u_logits, u_ans_t, letter_ids, u_rot, u_opt)
                loss = loss + a.unknowable * cons_unk
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            opt.step()
            hist.append([step] + [round(float(x.detach()), 4) for x in (text, answer, cons, cons_unk)])
            if step % 10 == 0 or step == a.steps - 1:
                print("step %d/%d text %.3f answer %.3f consistency %.3f unknowable %.3f (%.0f s)" % (
                    step, a.steps, *hist[-1][1:], time.time() - t0), flush=True)
        acc1, fam1 = train.quick_eval(net, val, meta, letter_ids, dev)
        print("after: val accuracy %.3f %s (%.0f s)" % (acc1, json.dumps(fam1), time.time() - t0), flush=True)
    os.makedirs(a.out, exist_ok=True)
    write_safetensors_bf16(os.path.join(a.out, "model.safetensors"),
                           {k: v.cpu() for k, v in net.module.state_dict().items() if k != "lm_head.weight"})
    for f in ("config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json"):
        with open(os.path.join(a.model, f), "rb") as src, open(os.path.join(a.out, f), "wb") as dst:
            dst.write(src.read())
    json.dump({"from": a.model, "steps": a.steps, "steps_done": len(hist), "groups": a.groups, "seed": a.seed,
               "lr": a.lr,
               "unknowable": a.unknowable, "swap_options": a.swap_options, "consistency": a.consistency,
               "sharpen": a.sharpen, "device": dev,
               "gpu": torch.cuda.get_device_name(0) if dev == "cuda" else None,
               "step_tokens": a.step_tokens, "threads": a.threads, "seconds": time.time() - t0,
               "torch": torch.__version__, "val_before": [acc0, fam0], "val_after": [acc1, fam1],
               "model_sha256": train.sha256_file(os.path.join(a.out, "model.safetensors")), "compile": a.compile,
               "loss_history": hist}, open(os.path.join(a.out, "finetune.json"), "w"), indent=1)
    print("saved %s (%.0f s)" % (a.out, time.time() - t0), flush=True)
    if a.adapter_steps:
        acc0, acc1, secs = adapter(a, tok, letter_ids, cfg["vocab_size"])
        json.dump({"steps": a.adapter_steps, "groups": a.adapter_groups, "seed": a.seed, "train_seconds": secs,
                   "torch_val_accuracy_base": acc0, "torch_val_accuracy_adapter": acc1, "r": 8, "alpha": 16,
                   "adapter_sha256": train.sha256_file(os.path.join(a.out, "shipment-lora",
                                                                    "adapter_model.safetensors"))},
                  open(os.path.join(a.out, "shipment-lora", "adapter.train.json"), "w"), indent=1)
        print("adapter saved (%.0f s)" % (time.time() - t0), flush=True)


if __name__ == "__main__":
    sys.exit(main())
