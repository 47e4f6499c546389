#!/usr/bin/env python3
"""N concurrent streamed chat completions against a running OpenAI-compatible server (issue 43's serve line; run by
bench/cuda_device.sh against `typedecide serve --device cuda --parallel N`).

Each of N threads sends one POST /v1/chat/completions with stream=true, stream_options.include_usage, temperature 0,
ignore_eos and max_tokens T (a different short user message each), and reads the server-sent events to the end.
All start together (a barrier); the clock runs from the barrier to the last stream's end. Prints one JSON object:
aggregate completion tokens/s (every stream's usage.completion_tokens over the wall time), per stream tokens/s
(after its first token), time to first token p50 / max, and the streams that failed (with the first error).
Standard library only. Usage: serve_streams.py URL --streams N [--tokens T] [--model NAME] [--rounds R]"""
import argparse
import http.client
import json
import statistics
import sys
import threading
import time
import urllib.parse


def one_stream(host, port, path, body, res, i, barrier):
    barrier.wait()
    t0 = time.perf_counter()
    first = None
    tokens = chunks = 0
    err = None
    try:
        c = http.client.HTTPConnection(host, port, timeout=600)
        c.request("POST", path, body=json.dumps(body), headers={"Content-Type": "application/json"})
        r = c.getresponse()
        if r.status != 200:
            err = "HTTP %d: %s" % (r.status, r.read(300).decode(errors="replace"))
        else:
            while True:
                line = r.readline()
                if not line:
                    break
                line = line.strip()
                if not line.startswith(b"data:"):
                    continue
                data = line[5:].strip()
                if data == b"[DONE]":
                    break
                o = json.loads(data)
                if o.get("choices") and o["choices"][0].get("delta", {}).get("content"):
                    chunks += 1
                    if first is None:
                        first = time.perf_counter()
                if o.get("usage"):
                    tokens = o["usage"].get("completion_tokens", 0)
        c.close()
    except Exception as e:  # noqa: BLE001 - any failure is reported, not raised
        err = "%s: %s" % (type(e).__name__, e)
    t1 = time.perf_counter()
    res[i] = {"t0": t0, "t1": t1, "first": first, "tokens": tokens, "chunks": chunks, "error": err}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("url", help="http://127.0.0.1:PORT")
    ap.add_argument("--streams", type=int, default=8)
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--model", help="the request's model (default: the first of GET /v1/models)")
    ap.add_argument("--rounds", type=int, default=1, help="the N streams R times in a row (the best round reported)")
    a = ap.parse_args()
    u = urllib.parse.urlparse(a.url)
    if not a.model:
        c = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
        c.request("GET", "/v1/models")
        a.model = json.loads(c.getresponse().read())["data"][0]["id"]
        c.close()
    rounds = []
    for rnd in range(a.rounds):
        res = [None] * a.streams
        barrier = threading.Barrier(a.streams + 1)
        th = []
        for i in range(a.streams):
            body = {"model": a.model, "messages": [{"role": "user", "content": "Stream %d, round %d: tell me about item %d." % (i, rnd, i * 7 + 3)}],
                    "max_tokens": a.tokens, "temperature": 0, "ignore_eos": True, "stream": True,
                    "stream_options": {"include_usage": True}}
            t = threading.Thread(target=one_stream, args=(u.hostname, u.port, "/v1/chat/completions", body, res, i, barrier))
            t.start()
            th.append(t)
        barrier.wait()
        start = time.perf_counter()
        for t in th:
            t.join()
        end = max(r["t1"] for r in res)
        ok = [r for r in res if not r["error"]]
        bad = [r for r in res if r["error"]]
        tokens = sum(r["tokens"] for r in ok)
        ttft = sorted(r["first"] - start for r in ok if r["first"] is not None)
        per = [(r["tokens"] - 1) / (r["t1"] - r["first"]) for r in ok if r["first"] is not None and r["tokens"] > 1 and r["t1"] > r["first"]]
        rounds.append({"streams": a.streams, "tokens_per_stream": a.tokens, "completion_tokens": tokens,
                       "seconds": round(end - start, 4), "aggregate_tokens_per_s": round(tokens / (end - start), 2),
                       "per_stream_tokens_per_s_median": round(statistics.median(per), 2) if per else None,
                       "ttft_ms_p50": round(1e3 * statistics.median(ttft), 2) if ttft else None,
                       "ttft_ms_max": round(1e3 * ttft[-1], 2) if ttft else None,
                       "failed": len(bad), "first_error": bad[0]["error"] if bad else None})
    best = max(rounds, key=lambda r: r["aggregate_tokens_per_s"])
    print(json.dumps({"bench": "serve_streams", "url": a.url, "model": a.model, "endpoint": "/v1/chat/completions (stream)",
                      **best, "rounds": rounds}))
    return 0 if best["failed"] == 0 and best["completion_tokens"] > 0 else 1


if __name__ == "__main__":
    sys.exit(main())
