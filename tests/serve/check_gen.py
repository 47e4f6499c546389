"""Generation through a running `typedecide serve` (tests/test_serve.sh starts it without an API key):
 - greedy /v1/completions on token ids equals `typedecide generate --ids` token for token; a chat completion with
   thinking off equals `typedecide generate --chat` text;
 - streaming and non-streaming give the same text (chat and completions);
 - concurrent requests (continuous batching) each equal their single-client reply: the same ids and the same
   log-probabilities (the JSON numbers, 9 significant digits: every bit of a float);
 - echo logprobs equal the log-softmax of `typedecide logits` within 1e-5;
 - chat_template_kwargs.enable_thinking false renders "<think>\\n\\n</think>\\n\\n"; the effective sampler is reported;
 - a prompt longer than the context, or max_tokens past it: 400 context_length_exceeded;
 - a client that disconnects mid-stream frees its slot at once (/health shows nothing generating).
usage: check_gen.py URL BIN MODEL WORKDIR"""
import http.client, json, math, os, socket, struct, subprocess, sys, threading, time
from urllib.parse import urlparse

url, BIN, MODEL, WORK = sys.argv[1:5]
u = urlparse(url)
HOST, PORT = u.hostname, u.port
fails = 0


def fail(msg):
    global fails
    fails += 1
    print("FAIL:", msg, file=sys.stderr)


def post(path, body):
    c = http.client.HTTPConnection(HOST, PORT, timeout=300)
    c.request("POST", path, body=json.dumps(body))
    r = c.getresponse()
    text = r.read().decode()
    c.close()
    return r.status, json.loads(text) if text.startswith("{") else None, text


def sse(path, body):  # the data of every event, parsed, until [DONE]
    c = http.client.HTTPConnection(HOST, PORT, timeout=300)
    c.request("POST", path, body=json.dumps(dict(body, stream=True)))
    r = c.getresponse()
    events, buf = [], r.read().decode()
    for block in buf.split("\n\n"):
        if block.startswith("data: "):
            d = block[6:]
            events.append(d if d == "[DONE]" else json.loads(d))
    return r.status, r.getheader("Content-Type"), events


def gen_cli(args):
    return subprocess.check_output([BIN, "generate", "--model", MODEL, "--threads", "1", "--temperature", "0"] + args, stderr=subprocess.DEVNULL).decode()


tok = lambda text: json.loads(subprocess.check_output([BIN, "tokenize", "--model", MODEL, "--text", text]))
prompts = ["The invoice shows", "Dear support team, my card was charged", "Access to the repository", "Sensor 4 reads",
           "The package arrived damaged and", "Please reset my password"]

# ---- greedy equals typedecide generate ------------------------------------------------------------------------
single = {}
for p in prompts:
    ids = tok(p)
    st, j, text = post("/v1/completions", {"prompt": ids, "max_tokens": 16, "temperature": 0, "logprobs": 0})
    cli = json.loads(gen_cli(["--ids", ",".join(map(str, ids)), "-n", "16"]))
    if st != 200 or j["choices"][0]["token_ids"] != cli:
        fail(f"greedy {p!r}: server {j and j['choices'][0]['token_ids']} != generate {cli} ({text[:200]})")
    single[p] = (j["choices"][0]["token_ids"], j["choices"][0]["logprobs"]["token_logprobs"]) if j else None
    if j and (j["sampler"]["greedy"] is not True or j["sampler"]["temperature"] != 0):
        fail(f"the effective sampler is not reported as greedy: {j['sampler']}")
print(f"check_gen: greedy completions equal typedecide generate token for token ({len(prompts)} prompts)")

msg = "My card was charged twice for the same order."
st, j, text = post("/v1/chat/completions", {"messages": [{"role": "user", "content": msg}], "max_tokens": 20,
                                            "temperature": 0, "chat_template_kwargs": {"enable_thinking": False}})
cli_text = gen_cli(["--chat", "--prompt", msg, "-n", "20"])
cli_text = cli_text[:-1] if cli_text.endswith("\n") else cli_text  # generate ends its output with a newline
if st != 200 or j["choices"][0]["message"]["content"] != cli_text:
    fail(f"chat: server {j and j['choices'][0]['message']['content']!r} != generate --chat {cli_text!r}")
chat_plain = j

# ---- streaming = non-streaming --------------------------------------------------------------------------------
body = {"messages": [{"role": "user", "content": msg}], "max_tokens": 20, "temperature": 0,
        "chat_template_kwargs": {"enable_thinking": False}, "stream_options": {"include_usage": True}}
st, ct, ev = sse("/v1/chat/completions", body)
streamed = "".join(e["choices"][0]["delta"].get("content") or "" for e in ev[:-1] if e["choices"])
finish = [e["choices"][0]["finish_reason"] for e in ev[:-1] if e["choices"] and e["choices"][0]["finish_reason"]]
usage = [e["usage"] for e in ev[:-1] if e.get("usage")]
if st != 200 or "text/event-stream" not in (ct or "") or ev[-1] != "[DONE]":
    fail(f"chat stream: {st} {ct} {ev[-1:]}")
elif streamed != chat_plain["choices"][0]["message"]["content"] or finish != [chat_plain["choices"][0]["finish_reason"]]:
    fail(f"chat stream {streamed!r} ({finish}) != plain {chat_plain['choices'][0]['message']['content']!r}")
elif not usage or usage[0]["completion_tokens"] != chat_plain["usage"]["completion_tokens"]:
    fail(f"chat stream usage {usage}")
st, ct, ev = sse("/v1/completions", {"prompt": prompts[0], "max_tokens": 16, "temperature": 0})
st2, j2, _ = post("/v1/completions", {"prompt": prompts[0], "max_tokens": 16, "temperature": 0})
streamed = "".join(e["choices"][0]["text"] for e in ev[:-1] if e["choices"])
if streamed != j2["choices"][0]["text"]:
    fail(f"completion stream {streamed!r} != plain {j2['choices'][0]['text']!r}")
print(f"check_gen: streamed and plain replies have the same text (chat: {len(streamed)} chars)")

# ---- concurrent requests each equal their single reply --------------------------------------------------------
got = {}


def one(p, k):
    st, j, _ = post("/v1/completions", {"prompt": tok(p), "max_tokens": 16, "temperature": 0, "logprobs": 0})
    got[(p, k)] = (j["choices"][0]["token_ids"], j["choices"][0]["logprobs"]["token_logprobs"]) if st == 200 else st


ts = [threading.Thread(target=one, args=(p, k)) for k in range(2) for p in prompts]
for t in ts:
    t.start()
for t in ts:
    t.join()
bad = [(p, k) for (p, k), v in got.items() if v != single[p]]
if bad:
    fail(f"concurrent replies differ from single ones: {bad}")
print(f"check_gen: {len(ts)} concurrent greedy requests each equal their single-client reply (ids and logprobs, bit for bit)")

# ---- echo logprobs = log-softmax of typedecide logits ---------------------------------------------------------
ids = tok("The customer asked for a refund of the second charge")
st, j, text = post("/v1/completions", {"prompt": ids, "max_tokens": 0, "echo": True, "logprobs": 0})
out = os.path.join(WORK, "logits.f32")
subprocess.check_call([BIN, "logits", "--model", MODEL, "--threads", "1", "--ids", ",".join(map(str, ids)), "--out", out],
                      stderr=subprocess.DEVNULL)
raw = open(out, "rb").read()
V = len(raw) // 4 // len(ids)
worst = 0.0
if st != 200:
    fail(f"echo logprobs: {st} {text[:300]}")
else:
    lps = j["choices"][0]["logprobs"]["token_logprobs"]
    if len(lps) != len(ids) or lps[0] is not None:
        fail(f"echo logprobs: {len(lps)} values for {len(ids)} prompt tokens")
    for i in range(1, len(ids)):
        row = struct.unpack_from(f"<{V}f", raw, 4 * V * (i - 1))
        mx = max(row)
        ref = row[ids[i]] - mx - math.log(sum(math.exp(x - mx) for x in row))
        worst = max(worst, abs(ref - lps[i]))
    if worst > 1e-5:
        fail(f"echo logprobs differ from log-softmax of typedecide logits by {worst}")
print(f"check_gen: echo logprobs = log-softmax of typedecide logits (max |diff| {worst:.2e} over {len(ids) - 1} tokens)")

# ---- template, limits -----------------------------------------------------------------------------------------
st, j, _ = post("/tokenize", {"messages": [{"role": "user", "content": "hi"}], "chat_template_kwargs": {"enable_thinking": False}})
if st != 200 or not j["prompt"].endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n"):
    fail(f"tokenize messages, thinking off: {j}")
st, j, _ = post("/tokenize", {"messages": [{"role": "user", "content": "hi"}], "add_generation_prompt": False})
if st != 200 or j["prompt"] != "<|im_start|>user\nhi<|im_end|>\n" or j["count"] != len(j["tokens"]):
    fail(f"tokenize messages without the generation prompt: {j}")
c = http.client.HTTPConnection(HOST, PORT)
c.request("GET", "/v1/models")
n_ctx = json.loads(c.getresponse().read())["data"][0]["max_model_len"]
st, j, _ = post("/v1/completions", {"prompt": [5] * (n_ctx + 1), "max_tokens": 1})
if st != 400 or j["error"]["code"] != "context_length_exceeded" or j["error"]["param"] != "prompt":
    fail(f"a prompt longer than the context: {st} {j}")
st, j, _ = post("/v1/completions", {"prompt": [5] * (n_ctx - 10), "max_tokens": 100})
if st != 400 or j["error"]["code"] != "context_length_exceeded":
    fail(f"max_tokens past the context: {st} {j}")
st, j, _ = post("/v1/chat/completions", {"messages": [{"role": "user", "content": "word " * (n_ctx + 10)}], "max_tokens": 4})
if st != 400 or j["error"]["param"] != "messages" or "context" not in j["error"]["message"]:
    fail(f"chat messages longer than the context: {st} {j}")

# ---- a client that leaves mid-stream frees its slot at once ----------------------------------------------------
s = socket.create_connection((HOST, PORT))
body = json.dumps({"prompt": "The", "max_tokens": 1500, "ignore_eos": True, "temperature": 0, "stream": True}).encode()
s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
data = b""
while data.count(b"data: ") < 4:
    data += s.recv(4096)
s.close()
t0, gen = time.time(), None
while time.time() - t0 < 5:
    c = http.client.HTTPConnection(HOST, PORT)
    c.request("GET", "/health")
    h = json.loads(c.getresponse().read())
    gen = h["generating"]
    if gen == 0 and h["requests_admitted"] == 0:
        break
    time.sleep(0.02)
freed = time.time() - t0
st, j, _ = post("/v1/completions", {"prompt": "The", "max_tokens": 1500, "ignore_eos": True, "temperature": 0})
full_s = j["timings"]["decode_ms"] / 1e3 if st == 200 else None
if gen != 0 or full_s is None or freed > full_s / 4:
    fail(f"a client that left mid-stream: slot freed after {freed:.2f} s (generating {gen}); the whole reply takes {full_s} s")
else:
    print(f"check_gen: a client that left mid-stream freed its slot after {freed * 1e3:.0f} ms (the whole reply: {full_s:.2f} s)")

# ... and so does a client of a non-streamed request
s = socket.create_connection((HOST, PORT))
body = json.dumps({"prompt": "The", "max_tokens": 1500, "ignore_eos": True, "temperature": 0}).encode()
s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
time.sleep(0.3)
s.close()
t0, gen = time.time(), None
while time.time() - t0 < 10:
    c = http.client.HTTPConnection(HOST, PORT)
    c.request("GET", "/health")
    h = json.loads(c.getresponse().read())
    gen = h["generating"]
    if gen == 0 and h["requests_admitted"] == 0:
        break
    time.sleep(0.02)
freed2 = time.time() - t0
if gen != 0 or full_s is None or freed2 > full_s / 4:
    fail(f"a client of a plain request that left: slot freed after {freed2:.2f} s (generating {gen})")
else:
    print(f"check_gen: a client of a plain request that left freed its slot after {freed2 * 1e3:.0f} ms")

sys.exit(1 if fails else 0)
