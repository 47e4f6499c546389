#!/usr/bin/env python3
"""Markdown table from probe.py --json files: python3 table.py results.json [more.json ...]"""
import json
import sys

CLASSES = ["PASS", "DATA LOST", "HANG", "SILENT WRONG", "CRASH", "UNCLEAR ERROR", "REFUSED VALID"]
rs = []
for f in sys.argv[1:]:
    rs += json.load(open(f))
areas = []
for r in rs:
    if r["area"] not in areas:
        areas.append(r["area"])
print("| area | cases | " + " | ".join(c.lower() for c in CLASSES) + " |")
print("|---|" + "---|" * (len(CLASSES) + 1))
for a in areas + ["**total**"]:
    sel = [r for r in rs if a == "**total**" or r["area"] == a]
    print("| %s | %d | %s |" % (a, len(sel), " | ".join(str(sum(1 for r in sel if r["cls"] == c)) for c in CLASSES)))
bad = [r for r in rs if r["cls"] != "PASS"]
if bad:
    print("\nNot PASS:\n")
    for r in bad:
        print("- **%s** %s/%s  \n  command: `%s`  \n  happened: %s  \n  expected: %s" % (
            r["cls"], r["area"], r["name"], r["cmd"].replace("`", "'")[:400], r["what"].replace("\n", " ")[:400],
            r["expected"]))
