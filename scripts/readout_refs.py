#!/usr/bin/env python3
"""transformers' typed readout: the reference for `typedecide decide` on saved checkpoints.

Runs on the GPU machine (torch, transformers 5.17, tokenizers), on its CPU:

    python3 scripts/readout_refs.py OUTDIR MODEL_DIR [MODEL_DIR ...]

For every model directory it renders the readout prompt of DESIGN.md for the evidence fixtures/readout/ticket.txt
(verbatim) and each criterion of fixtures/readout/criteria.jsonl, independently of our code:
  head   = INSTRUCTION + "\\nEvidence:\\n" + evidence
  suffix = "\\nCriterion: " + question + "\\nOptions:" + ("\\n" + letter + ". " + description)... + "\\nAnswer:"
tokenised separately with Hugging Face's tokenizer (tokenizer.json; the head with its special tokens, i.e. the BOS of a
tokenizer that puts one first, the suffixes without) and concatenated. The
letter tokens are probed as DESIGN.md says: the one token that "Answer: X" (else "Answer:X") adds after "Answer:".
The model is loaded from the directory as saved, once in float64 and once in float32 (eager attention), and the
readout is the softmax over the letter logits at the last position. Writes OUTDIR/<name>.json with the letter ids,
the separator, and per criterion its token ids, the float64 and float32 letter logits and probabilities.
"""
import json
import os
import sys

import torch
import transformers
from tokenizers import Tokenizer

INSTRUCTION = ("You are a careful, impartial analyst. Read the evidence below. For each criterion, choose the single "
               "option that the evidence best supports and answer with its letter only.")
LETTERS = "ABCDEFGHIJKLMNOPQRST"


def probe_letters(tok, n):
    base = tok.encode("Answer:", add_special_tokens=False).ids
    for sep in (" ", ""):
        ids = []
        for letter in LETTERS[:n]:
            got = tok.encode("Answer:" + sep + letter, add_special_tokens=False).ids
            if len(got) != len(base) + 1 or got[:len(base)] != base:
                break
            ids.append(got[-1])
        if len(ids) == n and len(set(ids)) == n:
            return sep, ids
    raise SystemExit("the letters are not single tokens after Answer:")


def main():
    out, dirs = sys.argv[1], sys.argv[2:]
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    evidence = open(os.path.join(root, "fixtures/readout/ticket.txt"), encoding="utf-8").read()
    criteria = [json.loads(l) for l in open(os.path.join(root, "fixtures/readout/criteria.jsonl")) if l.strip()]
    os.makedirs(out, exist_ok=True)
    torch.set_num_threads(8)
    for d in dirs:
        name = os.path.basename(os.path.normpath(d))
        tok = Tokenizer.from_file(os.path.join(d, "tokenizer.json"))
        sep, letter_ids = probe_letters(tok, max(len(c["options"]) for c in criteria))
        # the head as Hugging Face encodes a text (its BOS first, where the tokenizer has one: Llama, Gemma); the
        # suffixes without (they continue the head)
        head = tok.encode(INSTRUCTION + "\nEvidence:\n" + evidence, add_special_tokens=True).ids
        arch = json.load(open(os.path.join(d, "config.json")))["architectures"][0]
        models = {dt: getattr(transformers, arch).from_pretrained(d, dtype=dt, attn_implementation="eager").eval()
                  for dt in (torch.float64, torch.float32)}
        rows = []
        for c in criteria:
            suffix = "\nCriterion: " + c["question"] + "\nOptions:"
            for i, o in enumerate(c["options"]):
                suffix += "\n" + LETTERS[i] + ". " + o["description"]
            suffix += "\nAnswer:"
            ids = head + tok.encode(suffix, add_special_tokens=False).ids
            k = letter_ids[:len(c["options"])]
            row = {"id": c["id"], "ids": ids}
            for dt, tag in ((torch.float64, "64"), (torch.float32, "32")):
                with torch.no_grad():
                    last = models[dt](input_ids=torch.tensor([ids])).logits[0, -1].double()
                lg = last[k]
                row["logits" + tag] = lg.tolist()
                row["probs" + tag] = torch.softmax(lg, dim=0).tolist()
            rows.append(row)
            print(f"{name} {c['id']}: {len(ids)} tokens, probs64 {[round(p, 6) for p in row['probs64']]}")
        json.dump({"model": name, "transformers": transformers.__version__, "torch": torch.__version__,
                   "separator": sep, "letter_ids": letter_ids, "head_tokens": len(head), "criteria": rows},
                  open(os.path.join(out, name + ".json"), "w"), indent=1)


if __name__ == "__main__":
    main()
