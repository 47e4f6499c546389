#!/usr/bin/env python3
"""Per-op table of a bench/scaling_probe_device.sh call: python3 bench/op_profile.py BINARY PROBE_JSONL [STEP...]

BINARY is the profiled typedecide the call ran (build-probe/typedecide, not stripped): job functions are named from
its symbols. For each step (default: every step with an op profile) the tokens/s, then per kind of job the wall
seconds of the caller, the threads' seconds inside items and their ratio (threads busy on average), summed over the
step's runs (warm-up pass included)."""
import collections, json, subprocess, sys


def names(binary):
    syms = {}
    for line in subprocess.run(["nm", binary], capture_output=True, text=True, check=True).stdout.splitlines():
        f = line.split()
        if len(f) == 3 and f[1] in "tT":
            syms[int(f[0], 16)] = f[2]
    base = next(a for a, n in syms.items() if n == "td_eng_for")
    return syms, base


def table(ops, syms, base):
    rows = collections.OrderedDict()
    for line in ops:
        _, off, a, b, calls, wall, items = line.split()
        name = syms.get(base + int(off), off)
        if name == "product_chunk":
            name = "product %dx%d (%d, grain %d)" % (int(a) // 100, int(b) // 1000, int(a) % 100, int(b) % 1000)
        r = rows.setdefault(name, [0, 0.0, 0.0])
        r[0] += int(calls)
        r[1] += float(wall)
        r[2] += float(items)
    return rows


def main():
    binary, log = sys.argv[1:3]
    only = set(sys.argv[3:])
    syms, base = names(binary)
    steps = collections.OrderedDict()
    for line in open(log):
        r = json.loads(line)
        res = r.get("result") or {}
        if not res.get("ops") or (only and r["step"] not in only):
            continue
        st = steps.setdefault(r["step"], {"tps": [], "ops": []})
        st["tps"].append((res.get("out") or {}).get("tokens_per_s"))
        st["ops"] += res["ops"]
    for step, st in steps.items():
        rows = table(st["ops"], syms, base)
        wall = sum(r[1] for r in rows.values())
        print("== %s: tokens/s %s, wall in jobs %.3f s, items %.3f s" %
              (step, st["tps"], wall, sum(r[2] for r in rows.values())))
        for n, (c, w, i) in sorted(rows.items(), key=lambda kv: -kv[1][1]):
            if w >= 0.005 * wall:
                print("  %-40s %6d calls %8.3f s wall %8.3f s items %5.2f busy %5.1f%%" %
                      (n, c, w, i, i / w if w else 0, 100 * w / wall))


if __name__ == "__main__":
    main()
