"""`typedecide bench decide` through the Python package: the same random head and suffixes (the tool's generator,
seed 42), the same decider (batch mode, threads), one warm-up then REPEAT timed calls of Decider.decide_ids. Prints
one JSON object with the tool's keys (ms_per_criterion: median, min, max) and, per call, the wall time of the whole
Python call beside that of the foreign call inside it (td_decide_ids through ctypes, timed around it): their
difference is what the binding adds, measured within one call, so that other processes' load on a shared machine
does not hide it. Run by bench/python_overhead.sh."""

import argparse
import json
import time

import typedecide as td
import typedecide.model as binding

_real = binding.lib
foreign_s = []


class _Timed:
    """The library as the binding sees it, with td_decide_ids timed around the ctypes call."""

    def __getattr__(self, name):
        return getattr(_real, name)

    @staticmethod
    def td_decide_ids(*args):
        t0 = time.perf_counter()
        try:
            return _real.td_decide_ids(*args)
        finally:
            foreign_s.append(time.perf_counter() - t0)


binding.lib = _Timed()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--prefix", type=int, default=256)
    ap.add_argument("--criteria", type=int, default=144)
    ap.add_argument("--suffix", type=int, default=45)
    ap.add_argument("--options", type=int, default=4)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--serial", action="store_true")
    a = ap.parse_args()

    t0 = time.perf_counter()
    m = td.Model(a.model, threads=a.threads)
    load_s = time.perf_counter() - t0
    d = m.decider(mode="serial" if a.serial else "batch")
    n_rand = min(m.n_vocab, 100000)
    s = 42

    def rand():  # the tool's generator (cli/cmd_bench.c): a 64-bit LCG, the high bits
        nonlocal s
        s = (s * 6364136223846793005 + 1) % 2**64
        return (s >> 33) % n_rand

    head = [rand() for _ in range(a.prefix)]
    suffixes = [[rand() for _ in range(a.suffix)] for _ in range(a.criteria)]
    n_options = [a.options] * a.criteria
    d.decide_ids(head, suffixes, n_options)  # warm-up, as the tool's
    secs, lib_ms = [], []
    del foreign_s[:]
    for _ in range(a.repeat):
        before = d.stats()
        t0 = time.perf_counter()
        d.decide_ids(head, suffixes, n_options)
        secs.append(time.perf_counter() - t0)
        after = d.stats()
        lib_ms.append(after["head_ms"] + after["suffix_ms"] - before["head_ms"] - before["suffix_ms"])
    assert len(foreign_s) == a.repeat
    order = sorted(range(a.repeat), key=secs.__getitem__)
    med = order[a.repeat // 2]
    print(json.dumps({"bench": "decide", "through": "python", "mode": "serial" if a.serial else "batch",
                      "model": a.model, "arch": m.arch, "kernels": m.kernels, "prefix": a.prefix,
                      "criteria": a.criteria, "suffix": a.suffix, "options": a.options, "threads": a.threads,
                      "repeat": a.repeat, "load_s": round(load_s, 4),
                      "criteria_per_s": round(a.criteria / secs[med], 3),
                      "ms_per_criterion": round(1e3 * secs[med] / a.criteria, 3),
                      "ms_per_criterion_min": round(1e3 * secs[order[0]] / a.criteria, 3),
                      "ms_per_criterion_max": round(1e3 * secs[order[-1]] / a.criteria, 3),
                      "call_s": [round(x, 4) for x in secs],
                      "foreign_call_s": [round(x, 4) for x in foreign_s],
                      "binding_ms": [round(1e3 * (c - f), 3) for c, f in zip(secs, foreign_s)],
                      "library_timed_s": [round(x / 1e3, 4) for x in lib_ms],
                      "python": td.__version__, "library": td.library_path()}))


if __name__ == "__main__":
    main()
