#!/usr/bin/python3
"""A CPU smoke test of train.py's model stage, so that a change to the training loop is run before it costs GPU time.

Runs here with Debian's python3-torch and python3-numpy (1.13 / 1.24; NOT project dependencies:
`apt-get install -y --no-install-recommends python3-torch python3-numpy`), hence /usr/bin/python3 and not the
PATH's Python. It needs neither tokenizers nor transformers nor a GPU: the data are random token sequences in
train.py's packed format (answer letter before <|endoftext|>, half of them with a "rotated" copy whose answer sits at
the rotated letter), the model is qwen3_train.Qwen3Train uncompiled, and saving through transformers is replaced by
a stub. Checks:
  1. consistency_loss is 0 when a copy's letter logits are its original's rotated, > 0 otherwise, and its gradient
     is finite (the masked letters);
  2. train_model runs corpus, plain and paired decision batches (scale "order", shortened) and its losses are finite.

    /usr/bin/python3 scripts/train/smoke_cpu.py        (~1 minute on 2 cores)
"""
import argparse
import json
import math
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import numpy as np  # noqa: E402
import torch  # noqa: E402

import train  # noqa: E402

V, EOT, N_LET = 8192, 8166, 20
LETTERS = list(range(300, 300 + N_LET))


def check_consistency():
    torch.manual_seed(0)
    n, L = 6, 5
    K = np.array([2, 3, 4, 5, 5, 3], dtype=np.int64)
    rot = np.array([1, 2, 1, 3, 4, 1], dtype=np.int64)
    logits = torch.randn(2 * n, L, V)
    ans = torch.full((2 * n,), L, dtype=torch.long)
    lid = torch.tensor(LETTERS)
    for i in range(n):  # the copy's letter (j - r) mod K holds the original's option j
        for j in range(K[i]):
            logits[n + i, L - 1, lid[(j - rot[i]) % K[i]]] = logits[i, L - 1, lid[j]]
    zero = float(train.consistency_loss(logits, ans, LETTERS, rot, K))
    assert abs(zero) < 1e-5, zero
    logits[n, L - 1, lid[0]] += 3.0
    logits.requires_grad_(True)
    pos = train.consistency_loss(logits, ans, LETTERS, rot, K)
    pos.backward()
    assert float(pos) > 1e-3 and torch.isfinite(logits.grad).all(), (float(pos), logits.grad.abs().max())
    print("consistency_loss: %.2e for rotated copies, %.3f after moving one logit, gradient finite" % (
        zero, float(pos)))


def fake_data(work, rng):
    """train.py's packed files: corpus, 'dec' (with pairs), 'val' (+ meta), prep.json."""
    os.makedirs(work, exist_ok=True)
    np.save(os.path.join(work, "corpus.npy"), rng.integers(0, EOT, size=200000).astype(np.uint16))
    for name, n in (("dec", 400), ("val", 40)):
        seqs, pairs, meta = [], [], []
        for _ in range(n):
            K = int(rng.integers(2, 6))
            a = int(rng.integers(0, K))
            body = rng.integers(0, EOT, size=int(rng.integers(40, 120))).astype(np.uint16)
            seqs.append((np.concatenate([body, [LETTERS[a], EOT]]).astype(np.uint16), len(body)))
            meta.append([K, "fam%d" % (len(seqs) % 3)])
            if name == "dec" and rng.random() < 0.5:
                r = int(rng.integers(1, K))
                seqs.append((np.concatenate([body, [LETTERS[(a - r) % K], EOT]]).astype(np.uint16), len(body)))
                pairs.append((len(seqs) - 2, len(seqs) - 1, r, K))
                meta.append([K, meta[-1][1]])
        train.pack_seqs(seqs, os.path.join(work, name), pairs)
        if name == "val":
            json.dump(meta, open(os.path.join(work, "val.meta.json"), "w"))
    json.dump({"eot": EOT, "letter_ids": LETTERS, "vocab": V}, open(os.path.join(work, "prep.json"), "w"))


def check_training(work, out):
    sc = dict(train.SCALES["order"], pre_steps=2, dec_steps=14, step_tokens=2048, val_every=8)
    a = argparse.Namespace(arch="qwen3", name="smoke-qwen3", seed=15, round=1, init_dir="", lr=2e-3, deadline=0,
                           compile=False, device="cpu", work=work, out=out)
    train.save_model = lambda net, o, *rest: (os.makedirs(o, exist_ok=True),
                                              open(os.path.join(o, "model.safetensors"), "wb").close())[0]
    calls = {"plain": 0, "paired": [], "consistency": []}
    batch, batch_pairs, cons = train.Data.batch, train.Data.batch_pairs, train.consistency_loss

    def count_plain(self, *x):
        calls["plain"] += 1
        return batch(self, *x)

    def count_pairs(self, *x):
        r = batch_pairs(self, *x)
        n = len(r[3])  # rows 0..n-1 and their copies n..2n-1 share everything but the answer letter
        assert r[0].shape[0] == 2 * n and (r[0][:n, :5] == r[0][n:, :5]).all()
        calls["paired"].append(n)
        return r

    def count_cons(*x):
        v = cons(*x)
        calls["consistency"].append(float(v))
        return v
    train.Data.batch, train.Data.batch_pairs, train.consistency_loss = count_plain, count_pairs, count_cons
    torch.set_num_threads(2)
    train.train_model(a, sc)
    rec = json.load(open(os.path.join(out, "smoke-qwen3.train.json")))
    assert all(math.isfinite(t) for _, t, _a in rec["loss_history"]), rec["loss_history"]
    assert calls["plain"] > 0 and calls["paired"] and all(math.isfinite(v) for v in calls["consistency"]), calls
    print("train_model: %d steps, %d tokens; %d plain decision batches, %d paired (%s pairs), consistency %s" % (
        rec["steps"], rec["tokens"], calls["plain"], len(calls["paired"]), calls["paired"],
        " ".join("%.3f" % v for v in calls["consistency"])))


def main():
    check_consistency()
    with tempfile.TemporaryDirectory() as t:
        fake_data(os.path.join(t, "w"), np.random.default_rng(15))
        check_training(os.path.join(t, "w"), os.path.join(t, "o"))
    print("smoke_cpu: all checks passed")


if __name__ == "__main__":
    sys.exit(main())
