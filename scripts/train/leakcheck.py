#!/usr/bin/env python3
"""How much of the held-out fixtures stands verbatim in training text, with and without paraphrasing (stdlib).

Units of a fixture: its evidence sentences, questions and option descriptions of two words or more. A unit leaks
when it occurs as a substring of any training evidence, question or option. Generates GROUPS training groups of
the base families (seed 15-train) and of the adapter family (seed 15-adapter), once as train.py does and once with
--no-paraphrase, and prints the leaking units of each and the difference.

    python3 scripts/train/leakcheck.py [GROUPS]        (default 20000; from the repository root)
"""
import json
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = ["fixtures/eval/heldout.jsonl", "fixtures/eval/heldout-shipment.jsonl"]


def rows(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(l) for l in f]


def units(rs):
    """(kind, unit) of every evidence sentence, question and option of two words or more."""
    out = set()
    for r in rs:
        for s in re.split(r"(?<=[.!?])\s+|\n+", r["evidence"]):
            out.add(("evidence", s.strip()))
        out.add(("question", r["question"]))
        out.update(("option", o["description"]) for o in r["options"])
    return {(k, u) for k, u in out if len(re.findall(r"[A-Za-z]+", u)) >= 2}


def training_text(groups, paraphrased, tmp):
    texts = set()
    for fam, seed in (("base", "15-train"), ("adapter", "15-adapter")):
        out = os.path.join(tmp, "%s-%d.jsonl" % (fam, paraphrased))
        cmd = [sys.executable, os.path.join(HERE, "gen_decisions.py"), "--split", "train", "--families", fam,
               "--groups", str(groups), "--seed", seed, "--workers", "2", "--out", out]
        subprocess.run(cmd + ([] if paraphrased else ["--no-paraphrase"]), check=True)
        for r in rows(out):
            texts.add(r["evidence"])
            texts.add(r["question"])
            texts.update(o["description"] for o in r["options"])
    return "\x00".join(texts)


def main():
    groups = int(sys.argv[1]) if len(sys.argv) > 1 else 20000
    fixture_units = {(fx,) + u for fx in FIXTURES for u in units(rows(fx))}
    found = {}
    with tempfile.TemporaryDirectory() as tmp:
        for paraphrased in (False, True):
            text = training_text(groups, paraphrased, tmp)
            found[paraphrased] = {u for u in fixture_units if u[2] in text}
            name = "paraphrased" if paraphrased else "plain"
            print("%s training text (%d groups per split): %d of %d fixture units verbatim" % (
                name, groups, len(found[paraphrased]), len(fixture_units)))
            for fx, kind, u in sorted(found[paraphrased]):
                print("  %s %s: %s" % (os.path.basename(fx), kind, u))
    print("added by paraphrasing:", sorted(found[True] - found[False]))
    print("removed by paraphrasing:", sorted(found[False] - found[True]))


if __name__ == "__main__":
    sys.exit(main())
