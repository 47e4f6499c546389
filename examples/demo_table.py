"""The demo of the README (`make demo`) through the Python package: decides the example support ticket with the
trained demo model and prints the table `typedecide decide --table` prints (the ms column is wall time).

    python3 examples/demo_table.py [MODEL [EVIDENCE [CRITERIA]]]    # defaults: models/demo-qwen3, the demo ticket
"""

import os
import sys

import numpy as np

import typedecide as td

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def fit(s, width):
    """s in at most `width` characters, cut with "..." and with newlines and tabs as spaces."""
    s = s.replace("\n", " ").replace("\t", " ").replace("\r", " ")
    return s if len(s) <= width else s[:width - 3] + "..."


def cell(s, width):
    return fit(s, width).ljust(width + 2)


def main(model, evidence_path, criteria_path):
    m = td.Model(model)
    with open(evidence_path, encoding="utf-8") as f:
        evidence = f.read()
    rows = td.Rows(criteria_path)
    decider = m.decider()
    decisions, letters = decider.decide(evidence, rows), decider.letters
    print(cell("criterion", 40) + cell("answer", 26) + "%-31s %8s" % ("probability", "ms"))
    for row, d in zip(rows, decisions):
        descriptions = [o["description"] for o in row["options"]]
        bar = "#" * int(np.float32(d.probs[d.best]) * np.float32(20) + np.float32(0.5))  # in float, as the tool
        print(cell(row["question"] or row["id"], 40) + cell("%s. %s" % (d.letter, descriptions[d.best]), 26)
              + "[%s] %5.1f%%   %8.1f" % (bar.ljust(20, "."), 100 * d.probs[d.best], d.ms))
        print("    " + "  ".join("%s %s %.2f" % (letter, fit(option, 18), p)
                                 for letter, option, p in zip(letters, d.options, d.probs)))


if __name__ == "__main__":
    args = sys.argv[1:] + [None] * 3
    main(args[0] or os.path.join(ROOT, "models", "demo-qwen3"),
         args[1] or os.path.join(ROOT, "models", "demo", "ticket.txt"),
         args[2] or os.path.join(ROOT, "models", "demo", "criteria.jsonl"))
