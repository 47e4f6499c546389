"""Checks the HTTP API of a running `typedecide serve` (started by tests/test_serve.sh): every endpoint, every hostile
case with its status and message, /v1/decide against `typedecide decide` bit for bit.
usage: check_api.py URL KEY BIN MODEL WORKDIR"""
import http.client, json, os, socket, subprocess, sys, threading, time
from urllib.parse import urlparse

url, KEY, BIN, MODEL, WORK = sys.argv[1:6]
u = urlparse(url)
HOST, PORT = u.hostname, u.port
ROOT = os.environ.get("TD_ROOT", ".")
fails = 0


def fail(msg):
    global fails
    fails += 1
    print("FAIL:", msg, file=sys.stderr)


def req(method, path, body=None, key=KEY, headers=None, raw=None):
    c = http.client.HTTPConnection(HOST, PORT, timeout=120)
    h = dict(headers or {})
    if key is not None:
        h["Authorization"] = "Bearer " + key
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    c.request(method, path, body=data, headers=h)
    r = c.getresponse()
    text = r.read().decode()
    c.close()
    try:
        j = json.loads(text)
    except ValueError:
        j = None
    return r.status, j, text, r


def expect_error(what, status, path, body=None, param=None, code=None, contains=None, **kw):
    st, j, text, _ = req("POST" if body is not None or kw.get("raw") is not None else "GET", path, body, **kw)
    if st != status:
        return fail(f"{what}: status {st}, expected {status}: {text[:300]}")
    e = (j or {}).get("error")
    if not isinstance(e, dict) or not all(k in e for k in ("message", "type", "param", "code")):
        return fail(f"{what}: not an OpenAI error body: {text[:300]}")
    if param is not None and e["param"] != param:
        fail(f"{what}: param {e['param']!r}, expected {param!r} ({e['message']})")
    if code is not None and e["code"] != code:
        fail(f"{what}: code {e['code']!r}, expected {code!r}")
    if contains and contains not in e["message"]:
        fail(f"{what}: message {e['message']!r} does not say {contains!r}")


# ---- endpoints --------------------------------------------------------------------------------------------------
st, j, _, _ = req("GET", "/health", key=None)
if st != 200 or j.get("status") != "ok":
    fail(f"/health without a key: {st} {j}")
st, j, _, _ = req("GET", "/v1/models")
name = os.path.basename(MODEL.rstrip("/"))
if st != 200 or j["object"] != "list" or j["data"][0]["id"] != name or j["data"][0]["object"] != "model":
    fail(f"/v1/models: {st} {j}")
st, _, text, r = req("GET", "/", key=None)
if st != 200 or "text/html" not in r.getheader("Content-Type", "") or "<html" not in text or "http://" in text.replace("http://www.w3.org", ""):
    fail(f"GET /: {st}, a page without external assets expected")

tok_cli = json.loads(subprocess.check_output([BIN, "tokenize", "--model", MODEL, "--text", "Answer: A <|im_end|>"]))
st, j, _, _ = req("POST", "/tokenize", {"prompt": "Answer: A <|im_end|>"})
if st != 200 or j["tokens"] != tok_cli or j["count"] != len(tok_cli) or j["prompt"] != "Answer: A <|im_end|>":
    fail(f"/tokenize: {st} {j}, CLI {tok_cli}")
st, j, _, _ = req("POST", "/detokenize", {"tokens": tok_cli})
if st != 200 or j["prompt"] != "Answer: A <|im_end|>":
    fail(f"/detokenize: {st} {j}")

# /v1/decide: the lines of `typedecide decide`, bit for bit (all but the wall time), and the evidence cached
ev = open(f"{ROOT}/models/demo/ticket.txt").read()
crit_text = open(f"{ROOT}/models/demo/criteria.jsonl").read()
crit = [json.loads(l) for l in crit_text.splitlines() if l.strip()]
cli = subprocess.check_output([BIN, "decide", "--json", "--quiet", "--threads", "1", "--model", MODEL, "--evidence",
                               f"{ROOT}/models/demo/ticket.txt", "--criteria", f"{ROOT}/models/demo/criteria.jsonl"]).decode()


def strip_ms(line):  # the wall time is the one member that differs between runs; it is the last one
    return line[: line.index(',"ms":')] + "}"


cli_lines = [strip_ms(l) for l in cli.splitlines()]
for attempt, body in enumerate([{"evidence": ev, "criteria": crit, "model": name}, {"evidence": ev, "criteria": crit_text}]):
    st, j, text, _ = req("POST", "/v1/decide", body)
    if st != 200:
        fail(f"/v1/decide #{attempt}: {st} {text[:300]}")
        continue
    # the decisions as the server wrote them, byte for byte: cut the array out of the body text
    inner = text[text.index('"decisions":[') + len('"decisions":['): text.index('],"prefill_tokens"')]
    lines, depth, start = [], 0, 0
    for i, ch in enumerate(inner):
        depth += ch in "{[" and 1 or ch in "}]" and -1 or 0
        if depth == 0 and ch == "}":
            lines.append(inner[start: i + 1])
            start = i + 2
    if [strip_ms(l) for l in lines] != cli_lines:
        fail(f"/v1/decide #{attempt} differs from typedecide decide:\n{lines}\n{cli_lines}")
    if attempt == 0 and (j["prefill_tokens"] <= 0 or j["prefix_cached"]):
        fail(f"/v1/decide first request: prefill_tokens {j['prefill_tokens']}, prefix_cached {j['prefix_cached']}")
    if attempt == 1 and (j["prefill_tokens"] != 0 or not j["prefix_cached"]):
        fail(f"/v1/decide on the same evidence again: prefill_tokens {j['prefill_tokens']}, prefix_cached {j['prefix_cached']}")
print(f"check_api: /v1/decide equals typedecide decide ({len(cli_lines)} criteria); the second request prefilled 0 tokens")

# ---- hostile input ----------------------------------------------------------------------------------------------
expect_error("no key", 401, "/v1/models", key=None, code="invalid_api_key", contains="Missing API key")
expect_error("wrong key", 401, "/v1/models", key=KEY + "x", code="invalid_api_key", contains="Incorrect API key")
expect_error("no key on /v1/decide", 401, "/v1/decide", {"evidence": "x", "criteria": crit}, key=None)
expect_error("unknown path", 404, "/v1/nothing", code="not_found")
expect_error("wrong method", 405, "/v1/decide", code="method_not_allowed")
expect_error("truncated JSON", 400, "/v1/decide", raw=b'{"evidence": "x", "criteria": [', code="invalid_json",
             contains="not valid JSON")
expect_error("invalid JSON", 400, "/tokenize", raw=b"{prompt: 'x'}", code="invalid_json")
expect_error("not an object", 400, "/tokenize", raw=b"[1, 2]", contains="must be a JSON object")
expect_error("invalid UTF-8", 400, "/tokenize", raw=b'{"prompt": "\xff\xfe"}', code="invalid_json")
expect_error("evidence of the wrong type", 400, "/v1/decide", {"evidence": 5, "criteria": crit}, param="evidence",
             contains="must be a string")
expect_error("criteria of the wrong type", 400, "/v1/decide", {"evidence": "x", "criteria": 5}, param="criteria")
expect_error("a criterion without options", 400, "/v1/decide",
             {"evidence": "x", "criteria": [crit[0], {"id": "q", "question": "?"}]}, param="criteria[1]")
expect_error("no evidence", 400, "/v1/decide", {"criteria": crit}, param="evidence")
expect_error("tokens of the wrong type", 400, "/detokenize", {"tokens": "1,2"}, param="tokens")
expect_error("token outside the vocabulary", 400, "/detokenize", {"tokens": [1, 10 ** 9]}, param="tokens[1]")
expect_error("negative max_tokens", 400, "/v1/completions", {"prompt": "x", "max_tokens": -1}, param="max_tokens",
             contains="at least 0")
expect_error("zero max_tokens on chat", 400, "/v1/chat/completions",
             {"messages": [{"role": "user", "content": "x"}], "max_tokens": 0}, param="max_tokens", contains="at least 1")
expect_error("max_tokens of the wrong type", 400, "/v1/chat/completions",
             {"messages": [{"role": "user", "content": "x"}], "max_tokens": "8"}, param="max_tokens")
expect_error("max_tokens above the limit", 400, "/v1/completions", {"prompt": "x", "max_tokens": 10 ** 6},
             param="max_tokens", contains="limit")
expect_error("temperature of the wrong type", 400, "/v1/completions", {"prompt": "x", "temperature": "hot"},
             param="temperature")
expect_error("a message without a role", 400, "/v1/chat/completions", {"messages": [{"content": "x"}]},
             param="messages[0].role")
expect_error("an unknown role", 400, "/v1/chat/completions", {"messages": [{"role": "wizard", "content": "x"}]},
             param="messages[0].role")
expect_error("unknown model", 404, "/v1/chat/completions",
             {"model": "gpt-4", "messages": [{"role": "user", "content": "x"}]}, param="model", code="model_not_found")
expect_error("unknown model on decide", 404, "/v1/decide", {"model": "nope", "evidence": "x", "criteria": crit},
             code="model_not_found")
long_ev = "The customer wrote again about the charge. " * 3000  # far beyond the demo model's 2048 positions
expect_error("evidence longer than the context", 400, "/v1/decide", {"evidence": long_ev, "criteria": crit},
             param="evidence", code="context_length_exceeded", contains="context")


def send_raw(head, body_pieces):  # headers, then pieces of body as long as the server reads; the reply
    s = socket.create_connection((HOST, PORT), timeout=30)
    s.sendall(head)
    try:
        for p in body_pieces:
            s.sendall(p)
    except OSError:  # the server answered early and closed
        pass
    data = b""
    try:
        while True:
            d = s.recv(65536)
            if not d:
                break
            data += d
            if b"\r\n\r\n" in data and b'"}}' in data:
                break
    except OSError:
        pass
    return data


# an oversized body announced by Content-Length: refused before it is read
got = send_raw(f"POST /tokenize HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {KEY}\r\nContent-Length: {2 << 20}\r\n\r\n".encode(),
               [b"a" * 65536] * 32)
if not got.startswith(b"HTTP/1.1 413") or b"request_too_large" not in got:
    fail(f"oversized body (Content-Length): {got[:200]!r}")


def chunked_oversize():  # no Content-Length: the limit holds while reading
    piece = b"a" * 65536
    return send_raw(f"POST /tokenize HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {KEY}\r\nTransfer-Encoding: chunked\r\n\r\n".encode(),
                    [b"%x\r\n" % len(piece) + piece + b"\r\n"] * 40 + [b"0\r\n\r\n"])


got = chunked_oversize()
if not got.startswith(b"HTTP/1.1 413"):
    fail(f"chunked oversized body: {got[:100]!r}")

# a slow client: the body trickles in, one byte every 0.3 s; the server cuts it at its deadline (--timeout)
timeout_s = float(os.environ.get("SERVE_TIMEOUT", "3"))
s = socket.create_connection((HOST, PORT), timeout=30)
s.sendall(f"POST /tokenize HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {KEY}\r\nContent-Length: 1000\r\n\r\n".encode())
t0, cut = time.time(), None
try:
    for _ in range(1000):
        s.sendall(b" ")
        time.sleep(0.3)
        if time.time() - t0 > timeout_s + 10:
            break
except OSError:
    cut = time.time() - t0
if cut is None or cut > timeout_s + 3:
    fail(f"a client trickling its body was not cut within {timeout_s} s (+3): {cut}")
else:
    print(f"check_api: a client trickling its body was cut after {cut:.1f} s (deadline {timeout_s:.0f} s)")
# a client that sends half its headers and stalls: closed after the idle timeout
s = socket.create_connection((HOST, PORT), timeout=30)
s.sendall(b"POST /tokenize HTTP/1.1\r\nHost: x\r\n")
t0 = time.time()
try:
    d = s.recv(100)
except OSError:
    d = b""
stall = time.time() - t0
if d or stall > timeout_s + 3:
    fail(f"a stalled client: got {d!r} after {stall:.1f} s")
else:
    print(f"check_api: a client stalled in its headers was closed after {stall:.1f} s")

sys.exit(1 if fails else 0)
