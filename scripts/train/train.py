#!/usr/bin/env python3
"""Train the demo models on the GPU machine: tokenizer, Qwen3 and Qwen3.5 demo models, LoRA adapter.

Needs torch, transformers 5.17, tokenizers, peft, safetensors (all on the GPU machine's image) and the files that
scripts/train/device.sh copies next to it: gen_decisions.py, the pretraining corpus (corpus.txt.xz, made here by
extract_corpus.py) and the tokenizer template (tokenizer.json / tokenizer_config.json of
fixtures/tokenizers/qwen3-trunc2048, whose structure, regex, normalizer and added tokens are Qwen3's).

    python3 train.py all --work /tmp/w --out OUTDIR [--scale smoke|full|lexicon|order] [--seed 15]
                     [--round N --init-dir DIR]

Scales: full made the shipped models; lexicon and order are experiments (NOTES "Demo models"): lexicon adds WordNet
word-meaning decisions, order pairs rows with their rotated copies under a consistency loss (consistency_loss).
scripts/train/smoke_cpu.py runs the model stage on the CPU with random data before a change costs GPU time.

Steps (all seeded; see scripts/train/README.md for what was run and how long it took):
 1. decision data: gen_decisions.py, train split only (base families; the adapter family separately), 14 workers,
    rewritten in part by paraphrase.py; word-meaning decisions from WordNet (lexicon.py rows, family "lexicon");
    30% of rows again with their options rotated;
 2. tokenizer (or --tokenizer-dir: one this script trained before, reused): byte-level BPE (tokenizers' BpeTrainer) on the corpus + rendered training prompts + a line of
    "Answer: X" for every letter A..T (so that " A".." T" are single tokens), vocabulary 8192 with the 26 added
    tokens of Qwen3 (ChatML), Qwen3's Split regex, NFC; written into Qwen3's tokenizer.json structure;
 3. tokenisation: prompts exactly as typedecide renders them (head = instruction + "\\nEvidence:\\n" + evidence, with
    worked examples for some groups; suffix = "\\nCriterion: ...\\nAnswer:"; then " X" and <|endoftext|>); head, suffix
    and letter are tokenised separately and concatenated, as typedecide does;
 4. models, trained at once in separate processes on the one GPU: demo-qwen3, demo-qwen35 and demo-qwen3 again
    with the same seed (the reproducibility check): a pretraining phase on the corpus, then the decision data with
    corpus batches mixed in; loss = mean token cross-entropy of the text + mean cross-entropy of the answer letter;
    bf16 autocast, AdamW, cosine schedule; Qwen3 trains as qwen3_train.Qwen3Train (compiled, deterministic) and is
    saved through Qwen3ForCausalLM; saved with save_pretrained in bf16. --round 2 --init-dir DIR continues from a
    round's saved models on newly generated groups (one device call runs at most 10 minutes);
 5. adapter: PEFT LoRA on demo-qwen3 trained on the shipment_tracking family, which the base models never saw.
"""
import argparse
import hashlib
import json
import lzma
import os
import random
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
INSTRUCTION = ("You are a careful, impartial analyst. Read the evidence below. For each criterion, choose the single "
               "option that the evidence best supports and answer with its letter only.")
LETTERS = "ABCDEFGHIJKLMNOPQRST"
N_BPE = 8166                 # + 26 added tokens = 8192 = the models' vocabulary
QWEN3_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
               r"|\s*[\r\n]+|\s+(?!\S)|\s+")

SCALES = {
    #          groups of decisions, groups of word-meaning decisions (lexicon.py), adapter groups, corpus MB for the
    #          tokenizer, pretrain steps, decision steps,
    #          adapter steps, tokens per step; rot: share of training rows that also appear with their options
    #          cyclically rotated
    "smoke": dict(groups=20000, lex_groups=10000, adapter_groups=4000, tok_mb=8, pre_steps=20, dec_steps=100,
                  dec_steps_qwen35=40, adapter_steps=40, step_tokens=65536, step_tokens_qwen35=65536, val_every=60,
                  rot=0.3, cons=1.0),
    "full": dict(groups=300000, lex_groups=0, adapter_groups=20000, tok_mb=40, pre_steps=150, dec_steps=2400,
                 dec_steps_qwen35=800, adapter_steps=400, step_tokens=65536, step_tokens_qwen35=65536, val_every=500,
                 rot=0.3, cons=0.0),
}
# the WordNet experiment (2026-12-02, NOTES "Demo models"): full + 200,000 lexicon groups + 300 pretraining steps
SCALES["lexicon"] = dict(SCALES["full"], lex_groups=200000, pre_steps=300)
# order consistency (issue 15's order bar): half the rows also rotated, and half the decision batches pair rows with
# their rotated copies under a symmetric-KL loss between the two distributions over options (consistency_loss)
SCALES["order"] = dict(SCALES["full"], rot=0.5, cons=1.0)
QWEN3_CFG = dict(hidden_size=256, num_hidden_layers=6, num_attention_heads=4, num_key_value_heads=2, head_dim=64,
                 intermediate_size=512)
QWEN35_CFG = dict(hidden_size=256, num_hidden_layers=8, num_attention_heads=4, num_key_value_heads=2, head_dim=64,
                  intermediate_size=256, linear_num_key_heads=2, linear_num_value_heads=4, linear_key_head_dim=64,
                  linear_value_head_dim=64, linear_conv_kernel_dim=4)
QWEN3_THETA = 1e6
MAX_POS = 2048
ANSWER_WEIGHT = 3.0          # loss = text cross-entropy + ANSWER_WEIGHT * answer-letter cross-entropy


def log(*a):
    print("[%s]" % time.strftime("%H:%M:%S"), *a, flush=True)


def sha256_file(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def copy_tokenizer(src_dir, dst_dir):
    """tokenizer.json and tokenizer_config.json of src_dir into dst_dir."""
    os.makedirs(dst_dir, exist_ok=True)
    for f in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copyfile(os.path.join(src_dir, f), os.path.join(dst_dir, f))


def render_suffix(row):
    s = "\nCriterion: " + row["question"] + "\nOptions:"
    for i, o in enumerate(row["options"]):
        s += "\n%s. %s" % (LETTERS[i], o["description"])
    return s + "\nAnswer:"


def render_head(evidence, shots=()):
    h = INSTRUCTION
    for r in shots:
        k = [o["id"] for o in r["options"]].index(r["answer"])
        h += "\nEvidence:\n" + r["evidence"] + render_suffix(r) + " " + LETTERS[k] + "\n"
    return h + "\nEvidence:\n" + evidence


def read_jsonl(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(l) for l in f]


def groups_of(rows):
    out, cur = [], []
    for r in rows:
        if cur and r["evidence"] != cur[0]["evidence"]:
            out.append(cur)
            cur = []
        cur.append(r)
    if cur:
        out.append(cur)
    return out


# ------------------------------------------------------------------------------------------------ tokenizer
def train_tokenizer(work, corpus_text, sample_rows, tmpl_dir, out_dir):
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN3_SPLIT), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    letters = "".join("Answer: %s\n" % c for c in LETTERS) * 3000
    texts = [corpus_text, letters] + [render_head(g[0]["evidence"]) + "".join(render_suffix(r) for r in g)
                                      for g in sample_rows]

    def it():
        for t in texts:
            for i in range(0, len(t), 1 << 20):
                yield t[i:i + (1 << 20)]
    trainer = trainers.BpeTrainer(vocab_size=N_BPE, min_frequency=2, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), special_tokens=[])
    tok.train_from_iterator(it(), trainer=trainer)
    trained = json.loads(tok.to_str())
    vocab = trained["model"]["vocab"]
    assert len(vocab) == N_BPE, len(vocab)
    tj = json.load(open(os.path.join(tmpl_dir, "tokenizer.json"), encoding="utf-8"))
    tc = json.load(open(os.path.join(tmpl_dir, "tokenizer_config.json"), encoding="utf-8"))
    remap = {}
    for k, at in enumerate(tj["added_tokens"]):
        remap[at["id"]] = N_BPE + k
        at["id"] = N_BPE + k
    tj["model"]["vocab"] = dict(sorted(vocab.items(), key=lambda kv: kv[1]))
    merges = trained["model"]["merges"]
    tj["model"]["merges"] = [m if isinstance(m, list) else m.split(" ", 1) for m in merges]
    tc["added_tokens_decoder"] = {str(remap[int(k)]): v for k, v in tc["added_tokens_decoder"].items()}
    tc["model_max_length"] = MAX_POS
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(tj, f, ensure_ascii=False, separators=(",", ":"))
        f.write("\n")
    with open(os.path.join(out_dir, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(tc, f, ensure_ascii=False, indent=2)
        f.write("\n")
    t2 = Tokenizer.from_file(os.path.join(out_dir, "tokenizer.json"))
    base = t2.encode("Answer:", add_special_tokens=False).ids
    for c in LETTERS:
        ids = t2.encode("Answer: " + c, add_special_tokens=False).ids
        assert ids[:len(base)] == base and len(ids) == len(base) + 1, ("letter not one token", c, ids)
    h = sha256_file(os.path.join(out_dir, "tokenizer.json"))
    log("tokenizer: %d tokens, sha256 %s" % (t2.get_vocab_size(), h[:16]))
    return h


# ------------------------------------------------------------------------------------------------ tokenisation
def rotated(row, r):
    """The row with its options cyclically rotated by r places (the answer id moves with its option)."""
    o = row["options"]
    return dict(row, options=o[r:] + o[:r])


def with_rotations(g, rng, rot_rate):
    """The group's rows, then a copy of a share rot_rate of them with the options rotated by 1..K-1 places; a copy
    knows its original (_rot_of: index in the group) and its rotation (_rot)."""
    out = list(g)
    for j, r in enumerate(g):
        if rng.random() < rot_rate:
            k = rng.randrange(1, len(r["options"]))
            out.append(dict(rotated(r, k), _rot_of=j, _rot=k))
    return out


def tokenize_rows(tok, rows, rng, shot_rate, eot, letter_ids, max_len, rot_rate=0.0):
    """-> (list of (ids, answer position) for each row, pairs); some groups get 1-3 worked examples from their family,
    and a share rot_rate of rows is added again with its options rotated (the same question, the answer at another
    letter: what cyclic debiasing asks of the model). pairs: (sequence of a row, sequence of its rotated copy,
    rotation, number of options), for the consistency loss."""
    import numpy as np
    groups = groups_of(rows)
    if rot_rate > 0:
        groups = [with_rotations(g, rng, rot_rate) for g in groups]
    by_fam = {}
    for gi, g in enumerate(groups):
        by_fam.setdefault(g[0]["family"], []).append(gi)
    heads = []
    for gi, g in enumerate(groups):
        shots = []
        if rng.random() < shot_rate:
            cand = by_fam[g[0]["family"]]
            for _ in range(rng.randint(1, 3)):
                o = cand[rng.randrange(len(cand))]
                if o != gi:
                    shots.append(rng.choice(groups[o]))
        heads.append(render_head(g[0]["evidence"], shots))
    head_ids = [e.ids for e in tok.encode_batch(heads, add_special_tokens=False)]
    flat = [r for g in groups for r in g]
    suf_ids = [e.ids for e in tok.encode_batch([render_suffix(r) for r in flat], add_special_tokens=False)]
    seqs, pairs, k = [], [], 0
    for gi, g in enumerate(groups):
        at = {}  # row of the group -> its sequence
        for j, r in enumerate(g):
            a = [o["id"] for o in r["options"]].index(r["answer"])
            ids = head_ids[gi] + suf_ids[k] + [letter_ids[a], eot]
            k += 1
            if len(ids) <= max_len:
                at[j] = len(seqs)
                seqs.append((np.asarray(ids, dtype=np.uint16), len(ids) - 2))
                if "_rot_of" in r and r["_rot_of"] in at:
                    pairs.append((at[r["_rot_of"]], at[j], r["_rot"], len(r["options"])))
    return seqs, pairs


def pack_seqs(seqs, path, pairs=()):
    import numpy as np
    np.save(path + ".pairs.npy", np.array(pairs, dtype=np.int64).reshape(-1, 4))
    lens = np.array([len(s) for s, _ in seqs], dtype=np.int64)
    off = np.concatenate([[0], np.cumsum(lens)])
    np.save(path + ".tok.npy", np.concatenate([s for s, _ in seqs]) if seqs else np.zeros(0, np.uint16))
    np.save(path + ".off.npy", off)
    np.save(path + ".ans.npy", np.array([a for _, a in seqs], dtype=np.int64))


def pack_rows(tok, rows, rng, shot_rate, eot, letter_ids, rot_rate, work, name):
    """tokenize_rows and pack_seqs into work/name.*; a validation set (name val...) also gets name.meta.json, the
    number of options and the family of every row, for quick_eval. -> the sequences and pairs."""
    seqs, pairs = tokenize_rows(tok, rows, rng, shot_rate, eot, letter_ids, 1024, rot_rate)
    pack_seqs(seqs, os.path.join(work, name), pairs)
    if name.startswith("val"):
        json.dump([[len(r["options"]), r["family"]] for r in rows], open(os.path.join(work, name + ".meta.json"), "w"))
    return seqs, pairs


def data_seed(a, name):
    """The generator's seed for one file: round 1 is "15-train"; a later round draws new training groups
    ("15r2-train") and keeps the same validation rows ("15-val")."""
    if a.round > 1 and not name.startswith("val"):
        return "%sr%d-%s" % (a.seed, a.round, name)
    return "%s-%s" % (a.seed, name)


def prepare(a, sc):
    import numpy as np
    from tokenizers import Tokenizer
    work = a.work
    os.makedirs(work, exist_ok=True)
    t0 = time.time()
    gen = os.path.join(HERE, "gen_decisions.py")
    jobs = [("train", "base", sc["groups"], "train.jsonl"), ("train", "adapter", sc["adapter_groups"], "adapter.jsonl"),
            ("test", "base", 400, "val.jsonl"), ("test", "adapter", 200, "val_adapter.jsonl")]
    procs = [subprocess.Popen([sys.executable, gen, "--split", sp, "--families", fam, "--groups", str(n),
                               "--seed", data_seed(a, name.split(".")[0]), "--out", os.path.join(work, name),
                               "--workers", str(14 if n > 10000 else 1)]) for sp, fam, n, name in jobs]
    if sc["lex_groups"]:
        procs.append(subprocess.Popen([sys.executable, os.path.join(HERE, "lexicon.py"), "rows", "--lexicon", a.lexicon,
                                       "--groups", str(sc["lex_groups"]), "--seed", data_seed(a, "lexicon"),
                                       "--out", os.path.join(work, "lexicon.jsonl")]))
    for p in procs:
        assert p.wait() == 0
    rows = read_jsonl(os.path.join(work, "train.jsonl"))
    n_task = len(rows)
    if sc["lex_groups"]:
        rows += read_jsonl(os.path.join(work, "lexicon.jsonl"))
    log("decision rows: %d train + %d lexicon (%.0f s)" % (n_task, len(rows) - n_task, time.time() - t0))
    corpus = lzma.open(a.corpus, "rt", encoding="utf-8").read()
    rng = random.Random("tok-%s" % a.seed)
    sample = groups_of(rows[:min(n_task, 400000)])
    sample = [sample[i] for i in sorted(rng.sample(range(len(sample)), min(60000, len(sample))))]
    tok_dir = os.path.join(work, "tokenizer")
    if a.tokenizer_dir:  # a tokenizer trained by an earlier run of this script, reused as it is
        copy_tokenizer(a.tokenizer_dir, tok_dir)
        h1 = sha256_file(os.path.join(tok_dir, "tokenizer.json"))
        log("tokenizer: reused from %s, sha256 %s" % (a.tokenizer_dir, h1[:16]))
    else:
        h1 = train_tokenizer(work, corpus[:int(sc["tok_mb"] * 1e6)], sample, a.tokenizer_template, tok_dir)
        log("tokenizer trained (%.0f s)" % (time.time() - t0))
    tok = Tokenizer.from_file(os.path.join(tok_dir, "tokenizer.json"))
    eot = tok.token_to_id("<|endoftext|>")
    base = tok.encode("Answer:", add_special_tokens=False).ids
    letter_ids = [tok.encode("Answer: " + c, add_special_tokens=False).ids[len(base)] for c in LETTERS]
    # corpus (+ WordNet's senses as dictionary sentences): documents separated by <|endoftext|>
    docs = [d.strip() for d in corpus.split("\f") if d.strip()]
    if sc["lex_groups"]:  # WordNet's common senses as dictionary sentences, twice (lexicon.prose)
        import lexicon
        docs += lexicon.prose(lexicon.load(a.lexicon)) * 2
    ids = []
    for e in tok.encode_batch(docs, add_special_tokens=False):
        ids.extend(e.ids)
        ids.append(eot)
    np.save(os.path.join(work, "corpus.npy"), np.asarray(ids, dtype=np.uint16))
    log("corpus: %d docs, %d tokens" % (len(docs), len(ids)))
    drng = random.Random("shots-%s" % a.seed)
    for name, src, rate in (("dec", rows, 0.15), ("adapter", os.path.join(work, "adapter.jsonl"), 0.0),
                            ("val", os.path.join(work, "val.jsonl"), 0.0),
                            ("val_adapter", os.path.join(work, "val_adapter.jsonl"), 0.0)):
        rs = src if isinstance(src, list) else read_jsonl(src)
        seqs, _ = pack_rows(tok, rs, drng, rate, eot, letter_ids, sc["rot"] if name == "dec" else 0.0, work, name)
        ntok = sum(len(s) for s, _ in seqs)
        log("%s: %d sequences, %d tokens, longest %d" % (name, len(seqs), ntok, max(len(s) for s, _ in seqs)))
    json.dump({"eot": eot, "letter_ids": letter_ids, "vocab": N_BPE + 26, "tokenizer_sha256": h1,
               "tokenizer_reused_from": a.tokenizer_dir or None, "prep_seconds": time.time() - t0},
              open(os.path.join(work, "prep.json"), "w"))


# ------------------------------------------------------------------------------------------------ models
def build_model(arch, vocab, eot, im_end):
    from transformers import Qwen3Config, Qwen3ForCausalLM, Qwen3_5ForCausalLM, Qwen3_5TextConfig
    common = dict(vocab_size=vocab, max_position_embeddings=MAX_POS, rms_norm_eps=1e-6, tie_word_embeddings=True,
                  hidden_act="silu", attention_bias=False, initializer_range=0.02, bos_token_id=eot,
                  eos_token_id=im_end, pad_token_id=eot)
    if arch == "qwen3":
        cfg = Qwen3Config(**QWEN3_CFG, **common, use_sliding_window=False,
                          rope_parameters={"rope_type": "default", "rope_theta": QWEN3_THETA})
        return Qwen3ForCausalLM(cfg)
    n = QWEN35_CFG["num_hidden_layers"]
    cfg = Qwen3_5TextConfig(**QWEN35_CFG, **common,
                            layer_types=["full_attention" if (i + 1) % 4 == 0 else "linear_attention" for i in range(n)],
                            rope_parameters={"rope_type": "default", "rope_theta": 1e7, "partial_rotary_factor": 0.25,
                                             "mrope_section": [3, 3, 2], "mrope_interleaved": True})
    return Qwen3_5ForCausalLM(cfg)


class Data:
    def __init__(self, work, name):
        import numpy as np
        self.tok = np.load(os.path.join(work, name + ".tok.npy"), mmap_mode="r")
        self.off = np.load(os.path.join(work, name + ".off.npy"))
        self.ans = np.load(os.path.join(work, name + ".ans.npy"))
        self.lens = self.off[1:] - self.off[:-1]
        # buckets of similar length (multiples of 32), so that a batch pads little
        self.buckets = {}
        for i, L in enumerate(self.lens):
            self.buckets.setdefault(int((L + 31) // 32 * 32), []).append(i)
        self.bkeys = sorted(self.buckets)
        self.bw = np.array([len(self.buckets[k]) for k in self.bkeys], dtype=np.float64)
        self.bw /= self.bw.sum()
        # (row, its rotated copy, rotation, options) in buckets of the pair's longer length
        pp = os.path.join(work, name + ".pairs.npy")
        self.pairs = np.load(pp) if os.path.exists(pp) else np.zeros((0, 4), dtype=np.int64)
        self.pbuckets = {}
        for i, (a, b, _, _) in enumerate(self.pairs):
            self.pbuckets.setdefault(int((max(self.lens[a], self.lens[b]) + 31) // 32 * 32), []).append(i)
        self.pkeys = sorted(self.pbuckets)
        self.pw = np.array([len(self.pbuckets[k]) for k in self.pkeys], dtype=np.float64)
        self.pw /= max(1.0, self.pw.sum())

    def __len__(self):
        return len(self.lens)

    def row(self, i):
        return self.tok[self.off[i]:self.off[i + 1]]

    def rows(self, seq_ids, L):
        """The sequences seq_ids padded to L: ids, loss mask (tokens 1..len-1 are predicted), answer positions."""
        import numpy as np
        n = len(seq_ids)
        ids = np.zeros((n, L), dtype=np.int64)
        mask = np.zeros((n, L), dtype=np.float32)
        ans = np.zeros(n, dtype=np.int64)
        for j, r in enumerate(seq_ids):
            s = self.row(r)
            ids[j, :len(s)] = s
            mask[j, :len(s) - 1] = 1.0
            ans[j] = self.ans[r]
        return ids, mask, ans

    def batch(self, rng, step_tokens):
        L = self.bkeys[rng.choice(len(self.bkeys), p=self.bw)]
        idx = self.buckets[L]
        n = max(1, step_tokens // L)
        pick = rng.choice(len(idx), size=n, replace=len(idx) < n)
        return self.rows([idx[p] for p in pick], L)

    def batch_pairs(self, rng, step_tokens):
        """n rows and, in rows n..2n-1, their rotated copies; -> ids, mask, ans, rotations, option counts."""
        L = self.pkeys[rng.choice(len(self.pkeys), p=self.pw)]
        idx = self.pbuckets[L]
        n = max(1, step_tokens // (2 * L))
        pick = self.pairs[[idx[p] for p in rng.choice(len(idx), size=n, replace=len(idx) < n)]]
        ids, mask, ans = self.rows(list(pick[:, 0]) + list(pick[:, 1]), L)
        return ids, mask, ans, pick[:, 2].copy(), pick[:, 3].copy()


def paired_option_logprobs(logits, ans_t, letter_ids, rot, n_opt):
    """A row's log-distribution over its options and its rotated copy's, the copy's letters mapped back to the
    original options (rows 0..n-1 and n..2n-1 of the batch, as Data.batch_pairs gives them): -> lp, lq [n, letters]
    and the mask of the options that exist. A rotation by r puts original option j at letter (j - r) mod K."""
    import torch
    n, dev = len(rot), logits.device
    lid = torch.tensor(letter_ids, device=dev)
    ll = logits[torch.arange(2 * n, device=dev), ans_t - 1][:, lid]           # [2n, letters]
    j = torch.arange(len(letter_ids), device=dev)[None, :]
    K = torch.from_numpy(n_opt).to(dev)[:, None]
    r = torch.from_numpy(rot).to(dev)[:, None]
    valid = j < K
    perm = torch.where(valid, (j - r) % K, j)
    lp = torch.log_softmax(ll[:n].masked_fill(~valid, -1e4), dim=1)           # -1e4, not -inf: no NaN gradients
    lq = torch.log_softmax(ll[n:].gather(1, perm).masked_fill(~valid, -1e4), dim=1)
    return lp, lq, valid


def consistency_loss(logits, ans_t, letter_ids, rot, n_opt):
    """Symmetric KL between a row's distribution over its options and its rotated copy's (paired_option_logprobs)."""
    lp, lq, valid = paired_option_logprobs(logits, ans_t, letter_ids, rot, n_opt)
    kl = (lp.exp() * (lp - lq) + lq.exp() * (lq - lp)).masked_fill(~valid, 0.0).sum(1)
    return kl.mean()


def batch_losses(net, ids, mask, ans, V, dev):
    """One batch through net (bf16 autocast): -> logits at every position but the last (fp32), the answer positions
    on the device (None without answers), the mean text cross-entropy over the mask, and the mean cross-entropy of
    the answer letter (None without answers)."""
    import torch
    import torch.nn.functional as F
    ids_t = torch.from_numpy(ids).to(dev, non_blocking=True)
    mask_t = torch.from_numpy(mask).to(dev, non_blocking=True)
    with torch.autocast(torch.device(dev).type, dtype=torch.bfloat16):
        logits = net.logits(net.hidden(ids_t)[:, :-1]).float()
    ce = F.cross_entropy(logits.reshape(-1, V), ids_t[:, 1:].reshape(-1), reduction="none").view(ids.shape[0], -1)
    text = (ce * mask_t[:, :-1]).sum() / mask_t[:, :-1].sum()
    if ans is None:
        return logits, None, text, None
    ans_t = torch.from_numpy(ans).to(dev)
    return logits, ans_t, text, ce[torch.arange(ids.shape[0], device=dev), ans_t - 1].mean()


def corpus_batch(corpus, rng, step_tokens, L=512):
    import numpy as np
    n = step_tokens // L
    starts = rng.integers(0, len(corpus) - L - 1, size=n)
    ids = np.stack([np.asarray(corpus[s:s + L], dtype=np.int64) for s in starts])
    return ids, np.ones((n, L), dtype=np.float32), None


class HFNet:
    """A model in training or evaluation: hidden(ids) -> final hidden states [B, L, H], logits(h) -> [.., V].
    This one is a transformers causal LM as it is (Qwen3.5, and the adapter stage's models)."""
    compiled = False

    def __init__(self, module):
        self.module = module

    def hidden(self, ids):
        return self.module.model(input_ids=ids, use_cache=False).last_hidden_state

    hidden_eval = hidden

    def logits(self, h):
        return self.module.lm_head(h)

    def load(self, d):
        """Weights from a checkpoint this script saved (a later round continues from it)."""
        import torch
        src = type(self.module).from_pretrained(d, dtype=torch.float32)
        self.module.load_state_dict(src.state_dict())


class Qwen3Net(HFNet):
    """Qwen3 trained as qwen3_train.Qwen3Train (compiled, deterministic); save_model saves it through
    Qwen3ForCausalLM."""

    def __init__(self, V, dev, compile_):
        import torch
        from qwen3_train import Qwen3Train
        super().__init__(Qwen3Train(dict(QWEN3_CFG, vocab_size=V, rms_norm_eps=1e-6, rope_theta=QWEN3_THETA,
                                         initializer_range=0.02)).to(dev))
        # dynamic: one graph for every batch shape (the length buckets change B and L from step to step;
        # compiling per shape spent most of a smoke run recompiling)
        self.compiled = compile_
        self.fwd = torch.compile(self.module, dynamic=True) if compile_ else self.module

    def hidden(self, ids):
        try:
            return self.fwd(ids)
        except Exception as e:  # torch.compile failing on this machine: train eagerly (the same arithmetic)
            if self.fwd is self.module:
                raise
            log("torch.compile failed (%s: %s); training eagerly" % (type(e).__name__, str(e)[:300]))
            self.fwd, self.compiled = self.module, False
            return self.fwd(ids)

    def hidden_eval(self, ids):
        """Uncompiled (evaluation shapes would each compile a graph of their own)."""
        return self.module(ids)

    def load(self, d):
        from safetensors.torch import load_file
        sd = {k: v.float() for k, v in load_file(os.path.join(d, "model.safetensors")).items()}
        missing, unexpected = self.module.load_state_dict(sd, strict=False)
        assert not unexpected and missing == ["lm_head.weight"], (missing, unexpected)


def make_net(arch, V, eot, im_end, dev, compile_):
    if arch == "qwen3":
        return Qwen3Net(V, dev, compile_)
    return HFNet(build_model(arch, V, eot, im_end).to(dev))


def quick_eval(net, data, meta, letter_ids, dev):
    """Readout accuracy on held-out rows (PyTorch; only a training-time check, the reported figures come from
    typedecide on the saved files)."""
    import torch
    net.module.eval()
    hits, fam = 0, {}
    order = sorted(range(len(data)), key=lambda i: data.lens[i])
    with torch.no_grad(), torch.autocast(torch.device(dev).type, dtype=torch.bfloat16):
        for b in range(0, len(order), 256):
            idx = order[b:b + 256]
            L = max(int(data.ans[i]) for i in idx)
            ids = torch.zeros((len(idx), L), dtype=torch.long)
            for j, i in enumerate(idx):
                s = data.row(i)[:data.ans[i]]
                ids[j, :len(s)] = torch.from_numpy(s.astype("int64"))
            h = net.hidden_eval(ids.to(dev))
            for j, i in enumerate(idx):
                k, f = meta[i]
                lg = net.logits(h[j, data.ans[i] - 1]).float()[letter_ids[:k]]
                gold = int(data.row(i)[data.ans[i]])
                ok = int(letter_ids[int(lg.argmax())] == gold)
                hits += ok
                fam.setdefault(f, [0, 0])
                fam[f][0] += ok
                fam[f][1] += 1
    net.module.train()
    return hits / len(data), {f: round(a / n, 3) for f, (a, n) in sorted(fam.items())}


def train_model(a, sc):
    import numpy as np
    import torch
    torch.manual_seed(a.seed * 100 + a.round)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    # Qwen3 (our module, plain matrix products) runs fully deterministic: an op without a deterministic kernel
    # stops the run. transformers' Qwen3.5 only warns (its DeltaNet fallback was not checked op by op).
    torch.use_deterministic_algorithms(True, warn_only=a.arch != "qwen3")
    prep = json.load(open(os.path.join(a.work, "prep.json")))
    eot, letter_ids, V = prep["eot"], prep["letter_ids"], prep["vocab"]
    im_end = eot + 2
    dev = a.device
    net = make_net(a.arch, V, eot, im_end, dev, a.compile)
    params = list(net.module.parameters())
    n_params = sum(p.numel() for p in params)
    log("%s: %d parameters (%.2f M), config %s, compiled %s" % (a.name, n_params, n_params / 1e6, a.arch,
                                                              net.compiled))
    corpus = np.load(os.path.join(a.work, "corpus.npy"), mmap_mode="r")
    dec = Data(a.work, "dec")
    val = Data(a.work, "val")
    meta = json.load(open(os.path.join(a.work, "val.meta.json")))
    rng = np.random.default_rng([a.seed, a.round])
    if a.init_dir:
        net.load(os.path.join(a.init_dir, a.name.replace("-rerun", "")))
        log("%s: round %d starts from %s" % (a.name, a.round, a.init_dir))
    dec_steps = sc["dec_steps_qwen35"] if a.arch == "qwen35" else sc["dec_steps"]
    step_tokens = sc["step_tokens_qwen35"] if a.arch == "qwen35" else sc["step_tokens"]
    pre_steps = sc["pre_steps"] if a.round == 1 else 0
    total = pre_steps + dec_steps
    opt = torch.optim.AdamW(params, lr=a.lr, betas=(0.9, 0.95), weight_decay=0.1, eps=1e-8,
                            **({"fused": True} if dev == "cuda" else {}))  # torch 1.13 (smoke_cpu.py) has no fused
    warm = 100

    def lr_at(s):
        if s < warm:
            return a.lr * (s + 1) / warm
        p = (s - warm) / max(1, total - warm)
        return a.lr * (0.1 + 0.9 * 0.5 * (1 + np.cos(np.pi * p)))
    t0 = time.time()
    hist, tokens, stopped = [], 0, None
    for step in range(total):
        for g in opt.param_groups:
            g["lr"] = lr_at(step)
        if a.deadline and time.time() > a.deadline:
            log("%s: STOPPED at step %d of %d: the run's deadline passed" % (a.name, step, total))
            stopped = step
            break
        use_corpus = step < pre_steps or step % 8 == 7
        # with a consistency weight, half the decision batches are rows beside their rotated copies
        use_pairs = sc["cons"] > 0 and not use_corpus and len(dec.pairs) > 0 and rng.random() < 0.5
        if use_pairs:
            ids, mask, ans, rot, n_opt = dec.batch_pairs(rng, step_tokens)
        else:
            ids, mask, ans = corpus_batch(corpus, rng, step_tokens) if use_corpus else dec.batch(rng, step_tokens)
        tokens += ids.size
        logits, ans_t, text_loss, a_loss = batch_losses(net, ids, mask, ans, V, dev)
        loss = text_loss
        if ans is not None:
            loss = loss + ANSWER_WEIGHT * a_loss
            if use_pairs:
                c_loss = consistency_loss(logits, ans_t, letter_ids, rot, n_opt)
                loss = loss + sc["cons"] * c_loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        if step % 50 == 0 or step == total - 1:
            lv = float(text_loss)
            av = float(a_loss) if ans is not None else float("nan")
            cv = float(c_loss) if use_pairs else float("nan")
            log("%s step %d/%d text %.3f answer %.3f consistency %.3f lr %.2e %.1f s %.2f Mtok/s" % (
                a.name, step, total, lv, av, cv, lr_at(step), time.time() - t0, tokens / (time.time() - t0) / 1e6))
            hist.append([step, lv, av])
        if (step + 1) % sc["val_every"] == 0 or step == total - 1:
            acc, fam = quick_eval(net, val, meta, letter_ids, dev)
            log("%s step %d val accuracy %.3f %s" % (a.name, step + 1, acc, json.dumps(fam)))
    if dev == "cuda":
        torch.cuda.synchronize()
    secs = time.time() - t0
    acc, fam = quick_eval(net, val, meta, letter_ids, dev)
    out = os.path.join(a.out, a.name)
    check = save_model(net, out, a.work, V, eot, im_end, val, dev)
    wsha = sha256_file(os.path.join(out, "model.safetensors"))
    json.dump({"name": a.name, "arch": a.arch, "seed": a.seed, "params": n_params, "steps": total,
               "pre_steps": pre_steps, "dec_steps": dec_steps, "round": a.round, "init": a.init_dir or None, "stopped_at": stopped, "step_tokens": step_tokens,
               "answer_weight": ANSWER_WEIGHT, "compiled": net.compiled,
               "tokens": tokens, "train_seconds": secs, "lr": a.lr, "torch_val_accuracy": acc, "torch_val_family": fam,
               "saved_vs_trained_max_abs_logit_diff": check, "model_sha256": wsha,
               "loss_history": hist, "gpu": torch.cuda.get_device_name(0) if dev == "cuda" else dev,
               "torch": torch.__version__},
              open(os.path.join(a.out, a.name + ".train.json"), "w"), indent=1)
    log("%s done: %.1f s, %d tokens, val accuracy %.3f, weights sha256 %s" % (a.name, secs, tokens, acc, wsha[:16]))


def save_model(net, out, work, V, eot, im_end, val, dev):
    """Saves through transformers in bf16. A Qwen3 trained as Qwen3Train is loaded into Qwen3ForCausalLM first, and
    the two must give the same fp32 logits on held-out rows (-> the largest difference, returned)."""
    import torch
    from transformers import GenerationConfig
    diff = None
    if isinstance(net, Qwen3Net):
        hf = build_model("qwen3", V, eot, im_end).to(dev)
        missing, unexpected = hf.load_state_dict(net.module.state_dict(), strict=False)
        assert not unexpected and not [m for m in missing if m != "lm_head.weight"], (missing, unexpected)
        hf.tie_weights()
        hf.eval()
        net.module.eval()
        with torch.no_grad():
            rows = [torch.from_numpy(val.row(i)[:val.ans[i]].astype("int64")) for i in range(8)]
            diff = 0.0
            for r in rows:
                ids = r[None].to(dev)
                ref = hf(input_ids=ids, use_cache=False).logits.float()
                ours = net.module.head(net.module(ids)).float()
                diff = max(diff, float((ref - ours).abs().max()))
        log("saved Qwen3ForCausalLM vs the trained module, fp32 logits on 8 held-out rows: max |diff| %.2e" % diff)
        assert diff < 1e-3, diff
        model = hf
    else:
        model = net.module
    model.generation_config = GenerationConfig(bos_token_id=eot, eos_token_id=[im_end, eot], pad_token_id=eot,
                                               do_sample=True, temperature=0.6, top_k=20, top_p=0.95)
    model = model.to(torch.bfloat16)
    model.save_pretrained(out)
    copy_tokenizer(os.path.join(work, "tokenizer"), out)
    return diff


def lora_adapter(base_dir, work, out_dir, steps, seed, letter_ids, V):
    """PEFT LoRA (r 8, alpha 16 on every projection) on the saved demo-qwen3 in base_dir, trained on work's
    "adapter" rows (a family the base never saw) for `steps` steps of 16,384 tokens, checked on "val_adapter";
    saved in out_dir with base_model_name_or_path models/demo-qwen3. -> (val accuracy before, after, seconds)."""
    import numpy as np
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import Qwen3ForCausalLM
    torch.manual_seed(seed)
    dev = "cuda"
    base = Qwen3ForCausalLM.from_pretrained(base_dir, dtype=torch.float32).to(dev)
    data = Data(work, "adapter")
    val = Data(work, "val_adapter")
    meta = json.load(open(os.path.join(work, "val_adapter.meta.json")))
    acc0, _ = quick_eval(HFNet(base), val, meta, letter_ids, dev)
    cfg = LoraConfig(r=8, lora_alpha=16, lora_dropout=0.0, bias="none", task_type="CAUSAL_LM",
                     target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"])
    pm = get_peft_model(base, cfg)
    lora_net = HFNet(pm.base_model.model)  # the base model with the LoRA layers in it
    opt = torch.optim.AdamW([p for p in pm.parameters() if p.requires_grad], lr=2e-3, weight_decay=0.0)
    rng = np.random.default_rng(seed)
    t0 = time.time()
    for step in range(steps):
        for g in opt.param_groups:
            g["lr"] = 2e-3 * min(1.0, (step + 1) / 30) * (0.1 + 0.9 * (1 - step / steps))
        _, _, text, answer = batch_losses(lora_net, *data.batch(rng, 16384), V, dev)
        loss = text + answer
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if step % 50 == 0:
            log("adapter step %d loss %.3f" % (step, float(loss.detach())))
    secs = time.time() - t0
    acc1, _ = quick_eval(lora_net, val, meta, letter_ids, dev)
    pm.save_pretrained(out_dir)
    c = json.load(open(os.path.join(out_dir, "adapter_config.json")))
    c["base_model_name_or_path"] = "models/demo-qwen3"
    json.dump(c, open(os.path.join(out_dir, "adapter_config.json"), "w"), indent=2, sort_keys=True)
    log("adapter: %.1f s, torch val accuracy %.3f -> %.3f" % (secs, acc0, acc1))
    return acc0, acc1, secs


def train_adapter(a, sc):
    prep = json.load(open(os.path.join(a.work, "prep.json")))
    steps = sc["adapter_steps"]
    acc0, acc1, secs = lora_adapter(os.path.join(a.out, "demo-qwen3"), a.work,
                                    os.path.join(a.out, "demo-qwen3-shipment-lora"), steps, a.seed,
                                    prep["letter_ids"], prep["vocab"])
    json.dump({"steps": steps, "train_seconds": secs, "torch_val_accuracy_base": acc0, "torch_val_accuracy_adapter": acc1,
               "r": 8, "alpha": 16}, open(os.path.join(a.out, "adapter.train.json"), "w"), indent=1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("stage", choices=["all", "prepare", "model", "adapter"])
    ap.add_argument("--work", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--scale", default="full", choices=sorted(SCALES))
    ap.add_argument("--seed", type=int, default=15)
    ap.add_argument("--corpus", default=os.path.join(HERE, "corpus.txt.xz"))
    ap.add_argument("--lexicon", default=os.path.join(HERE, "lexicon.tsv.xz"), help="lexicon.py extract's output")
    ap.add_argument("--tokenizer-template", default=os.path.join(HERE, "tokenizer-template"))
    ap.add_argument("--round", type=int, default=1, help="2, 3, ...: continue from --init-dir on new training groups")
    ap.add_argument("--init-dir", default="", help="a folder with demo-qwen3 and demo-qwen35 saved by an earlier round")
    ap.add_argument("--tokenizer-dir", default="", help="reuse this directory's tokenizer.json instead of training one")
    ap.add_argument("--no-compile", dest="compile", action="store_false", help="train Qwen3 eagerly")
    ap.add_argument("--device", default="cuda", help="model stage: cuda, or cpu for a smoke test of the loop")
    ap.add_argument("--arch", default="qwen3")
    ap.add_argument("--name", default="demo-qwen3")
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--deadline", type=float, default=0, help="epoch seconds: stop training and save at this time")
    ap.add_argument("--model-budget", type=float, default=0, help="seconds for the model stage (all): sets --deadline")
    a = ap.parse_args()
    sc = SCALES[a.scale]
    os.makedirs(a.out, exist_ok=True)
    if a.stage == "prepare":
        return prepare(a, sc)
    if a.stage == "model":
        return train_model(a, sc)
    if a.stage == "adapter":
        return train_adapter(a, sc)
    t0 = time.time()
    prepare(a, sc)
    t1 = time.time()
    me = [sys.executable, os.path.abspath(__file__), "model", "--work", a.work, "--out", a.out, "--scale", a.scale,
          "--seed", str(a.seed), "--lr", str(a.lr), "--round", str(a.round)] + ([] if a.compile else ["--no-compile"]) + \
        (["--init-dir", a.init_dir] if a.init_dir else [])
    if a.model_budget:
        me += ["--deadline", str(t0 + a.model_budget)]
    runs = [("qwen3", "demo-qwen3"), ("qwen35", "demo-qwen35"), ("qwen3", "demo-qwen3-rerun")]
    procs = [subprocess.Popen(me + ["--arch", arch, "--name", name],
                              stdout=open(os.path.join(a.out, name + ".log"), "w"), stderr=subprocess.STDOUT)
             for arch, name in runs]
    while any(p.poll() is None for p in procs):
        time.sleep(15)
        for _, name in runs:
            with open(os.path.join(a.out, name + ".log")) as f:
                lines = f.read().strip().split("\n")
            log("  %s | %s" % (name, lines[-1][:160] if lines else ""))
    rcs = [p.returncode for p in procs]
    t2 = time.time()
    if rcs[0] == 0:
        train_adapter(a, sc)
    t3 = time.time()
    json.dump({"scale": a.scale, "seed": a.seed, "round": a.round, "init": a.init_dir or None, "lr": a.lr,
               "prepare_seconds": t1 - t0, "models_seconds": t2 - t1,
               "adapter_seconds": t3 - t2, "total_seconds": t3 - t0, "returncodes": rcs,
               "prep": json.load(open(os.path.join(a.work, "prep.json")))},
              open(os.path.join(a.out, "run.json"), "w"), indent=1)
    log("all done in %.0f s (prepare %.0f, models %.0f, adapter %.0f), return codes %s" % (t3 - t0, t1 - t0, t2 - t1, t3 - t2, rcs))


if __name__ == "__main__":
    sys.exit(main())
