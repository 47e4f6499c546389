"""One model, several threads: the results of one thread, and the GIL released during the long calls."""

import threading
import time

import typedecide as td
from conftest import CRITERIA, HELDOUT


def sample(n):
    with open(HELDOUT, "rb") as f:
        return td.Rows(b"".join(f.readlines()[:n]))  # rows with evidence of their own: one prefill per group


def test_two_threads_decide_as_one(demo):
    rows = sample(64)
    alone = [d.json() for d in demo.decide(None, rows)]
    results, spans, errors = {}, {}, []
    start = threading.Barrier(2)

    def work(k):
        try:
            start.wait()
            t0 = time.monotonic()
            results[k] = [[d.json() for d in demo.decide(None, rows, threads=1)] for _ in range(2)]
            spans[k] = (t0, time.monotonic())
        except Exception as e:  # noqa: BLE001 (reported below)
            errors.append(e)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    for k in range(2):
        assert results[k] == [alone, alone]
    (a0, a1), (b0, b1) = spans[0], spans[1]
    assert a0 < b1 and b0 < a1  # the two threads' calls overlapped in time


def test_long_calls_release_the_gil(demo):
    """While one thread decides, another runs Python code: the library call does not hold the GIL."""
    rows = sample(64)
    done, ticks = threading.Event(), [0]

    def decide():
        demo.decide(None, rows, threads=1)
        done.set()

    t = threading.Thread(target=decide)
    t.start()
    while not done.is_set():
        ticks[0] += 1
        time.sleep(0.001)
    t.join()
    assert ticks[0] >= 20, "the main thread ran %d times during a decide call" % ticks[0]


def test_decider_serialises_its_callers(demo, ticket):
    """A Decider shared by threads: their calls wait for each other (a lock), and each gets the same decisions."""
    d = demo.decider()
    ref = [x.json() for x in d.decide(ticket, CRITERIA)]
    out = []
    ts = [threading.Thread(target=lambda: out.append([x.json() for x in d.decide(ticket, CRITERIA)])) for _ in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert out == [ref] * 4
