"""The bounded queue: a server started with --parallel 1 --queue 0 admits one request at a time; concurrent ones get
503 with Retry-After and code queue_full, and every admitted one completes. usage: check_queue.py URL"""
import http.client, json, sys, threading
from urllib.parse import urlparse

u = urlparse(sys.argv[1])
crit = [{"id": f"c{i}", "question": f"Is item {i} on the bill?", "options": [{"id": "y", "description": "Yes"},
        {"id": "n", "description": "No"}, {"id": "m", "description": f"Maybe, item {i} is unclear"}]} for i in range(300)]
results = []


def one(k):
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=300)
    c.request("POST", "/v1/decide", body=json.dumps({"evidence": f"Bill {k}: three items, one charged twice.", "criteria": crit}))
    r = c.getresponse()
    results.append((r.status, r.getheader("Retry-After"), r.read().decode()))


ts = [threading.Thread(target=one, args=(k,)) for k in range(4)]
for t in ts:
    t.start()
for t in ts:
    t.join()
ok = [r for r in results if r[0] == 200]
busy = [r for r in results if r[0] == 503]
fails = 0
if len(ok) + len(busy) != 4 or not ok or not busy:
    print("FAIL: queue: statuses", [r[0] for r in results], file=sys.stderr)
    fails += 1
for st, ra, text in busy:
    e = json.loads(text)["error"]
    if ra != "1" or e["code"] != "queue_full":
        print(f"FAIL: queue: 503 without Retry-After or code: {ra} {text}", file=sys.stderr)
        fails += 1
for st, ra, text in ok:
    if len(json.loads(text)["decisions"]) != 300:
        print("FAIL: queue: an admitted request lost decisions", file=sys.stderr)
        fails += 1
print(f"check_queue: 4 concurrent requests, --parallel 1 --queue 0: {len(ok)} answered, {len(busy)} refused with 503")
sys.exit(1 if fails else 0)
