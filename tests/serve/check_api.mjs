// Checks the HTTP API of a running `typedecide serve` (started by tests/test_serve.sh): every endpoint, every hostile
// case with its status and message, /v1/decide against `typedecide decide` bit for bit.
// usage: node check_api.mjs URL KEY BIN MODEL WORKDIR
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import net from "node:net";
import { eq, head, hostPort, index, now, pyDumps, pyFloat, pyRepr, pyStr, request, sleep, splitlines, truthy }
  from "./util.mjs";

const [url, KEY, BIN, MODEL] = process.argv.slice(2, 6); // and WORKDIR, unused
const { host: HOST, port: PORT } = hostPort(url);
const ROOT = process.env.TD_ROOT ?? ".";
let fails = 0;

function fail(msg) {
  fails += 1;
  console.error("FAIL: " + msg);
}

// key: undefined = the API key, null = no Authorization header, a string = that key
async function req(method, path, body = null, { key = KEY, headers = {}, raw = null } = {}) {
  const h = { ...headers };
  if (key !== null) h["Authorization"] = "Bearer " + key;
  const data = raw !== null ? raw : body !== null ? Buffer.from(pyDumps(body)) : null;
  const r = await request(HOST, PORT, method, path, { body: data, headers: h, timeout: 120 });
  let j;
  try {
    j = JSON.parse(r.text);
  } catch {
    j = null;
  }
  return [r.status, j, r.text, r];
}

async function expectError(what, status, path, body = null, { param = null, code = null, contains = null, ...kw } = {}) {
  const [st, j, text] = await req(body !== null || (kw.raw ?? null) !== null ? "POST" : "GET", path, body, kw);
  if (st !== status) return fail(`${what}: status ${st}, expected ${status}: ${head(text, 300)}`);
  const e = (j ?? {}).error;
  if (e === null || typeof e !== "object" || Array.isArray(e) ||
      !["message", "type", "param", "code"].every((k) => Object.hasOwn(e, k)))
    return fail(`${what}: not an OpenAI error body: ${head(text, 300)}`);
  if (param !== null && !eq(e.param, param)) fail(`${what}: param ${pyRepr(e.param)}, expected ${pyRepr(param)} (${pyStr(e.message)})`);
  if (code !== null && !eq(e.code, code)) fail(`${what}: code ${pyRepr(e.code)}, expected ${pyRepr(code)}`);
  if (contains && !e.message.includes(contains))
    fail(`${what}: message ${pyRepr(e.message)} does not say ${pyRepr(contains)}`);
}

const run = (args) => execFileSync(BIN, args, { maxBuffer: 1 << 30, stdio: ["inherit", "pipe", "inherit"] }).toString();

// ---- endpoints --------------------------------------------------------------------------------------------------
let st, j, text, r;
[st, j] = await req("GET", "/health", null, { key: null });
if (st !== 200 || j.status !== "ok") fail(`/health without a key: ${st} ${pyStr(j)}`);
[st, j] = await req("GET", "/v1/models");
const name = MODEL.replace(/\/+$/, "").split("/").pop();
if (st !== 200 || j.object !== "list" || j.data[0].id !== name || j.data[0].object !== "model")
  fail(`/v1/models: ${st} ${pyStr(j)}`);
[st, , text, r] = await req("GET", "/", null, { key: null });
if (st !== 200 || !(r.headers["content-type"] ?? "").includes("text/html") || !text.includes("<html") ||
    text.replaceAll("http://www.w3.org", "").includes("http://"))
  fail(`GET /: ${st}, a page without external assets expected`);

const tokCli = JSON.parse(run(["tokenize", "--model", MODEL, "--text", "Answer: A <|im_end|>"]));
[st, j] = await req("POST", "/tokenize", { prompt: "Answer: A <|im_end|>" });
if (st !== 200 || !eq(j.tokens, tokCli) || j.count !== tokCli.length || j.prompt !== "Answer: A <|im_end|>")
  fail(`/tokenize: ${st} ${pyStr(j)}, CLI ${pyStr(tokCli)}`);
[st, j] = await req("POST", "/detokenize", { tokens: tokCli });
if (st !== 200 || j.prompt !== "Answer: A <|im_end|>") fail(`/detokenize: ${st} ${pyStr(j)}`);

// /v1/decide: the lines of `typedecide decide`, bit for bit (all but the wall time), and the evidence cached
const ev = readFileSync(`${ROOT}/models/demo/ticket.txt`, "utf8");
const critText = readFileSync(`${ROOT}/models/demo/criteria.jsonl`, "utf8");
const crit = splitlines(critText).filter((l) => l.trim()).map((l) => JSON.parse(l));
const cli = run(["decide", "--json", "--quiet", "--threads", "1", "--model", MODEL, "--evidence",
  `${ROOT}/models/demo/ticket.txt`, "--criteria", `${ROOT}/models/demo/criteria.jsonl`]);

// the wall time is the one member that differs between runs; it is the last one
const stripMs = (line) => line.slice(0, index(line, ',"ms":')) + "}";

const cliLines = splitlines(cli).map(stripMs);
for (const [attempt, body] of [{ evidence: ev, criteria: crit, model: name }, { evidence: ev, criteria: critText }].entries()) {
  [st, j, text] = await req("POST", "/v1/decide", body);
  if (st !== 200) {
    fail(`/v1/decide #${attempt}: ${st} ${head(text, 300)}`);
    continue;
  }
  // the decisions as the server wrote them, byte for byte: cut the array out of the body text
  const inner = text.slice(index(text, '"decisions":[') + '"decisions":['.length, index(text, '],"prefill_tokens"'));
  const lines = [];
  let depth = 0, start = 0;
  for (let i = 0; i < inner.length; i++) {
    const ch = inner[i];
    depth += "{[".includes(ch) ? 1 : "}]".includes(ch) ? -1 : 0;
    if (depth === 0 && ch === "}") {
      lines.push(inner.slice(start, i + 1));
      start = i + 2;
    }
  }
  if (!eq(lines.map(stripMs), cliLines))
    fail(`/v1/decide #${attempt} differs from typedecide decide:\n${pyRepr(lines)}\n${pyRepr(cliLines)}`);
  if (attempt === 0 && (j.prefill_tokens <= 0 || truthy(j.prefix_cached)))
    fail(`/v1/decide first request: prefill_tokens ${pyStr(j.prefill_tokens)}, prefix_cached ${pyStr(j.prefix_cached)}`);
  if (attempt === 1 && (!eq(j.prefill_tokens, 0) || !truthy(j.prefix_cached)))
    fail(`/v1/decide on the same evidence again: prefill_tokens ${pyStr(j.prefill_tokens)}, prefix_cached ${pyStr(j.prefix_cached)}`);
}
console.log(`check_api: /v1/decide equals typedecide decide (${cliLines.length} criteria); the second request prefilled 0 tokens`);

// ---- hostile input ----------------------------------------------------------------------------------------------
await expectError("no key", 401, "/v1/models", null, { key: null, code: "invalid_api_key", contains: "Missing API key" });
await expectError("wrong key", 401, "/v1/models", null, { key: KEY + "x", code: "invalid_api_key", contains: "Incorrect API key" });
await expectError("no key on /v1/decide", 401, "/v1/decide", { evidence: "x", criteria: crit }, { key: null });
await expectError("unknown path", 404, "/v1/nothing", null, { code: "not_found" });
await expectError("wrong method", 405, "/v1/decide", null, { code: "method_not_allowed" });
await expectError("truncated JSON", 400, "/v1/decide", null, { raw: Buffer.from('{"evidence": "x", "criteria": ['),
  code: "invalid_json", contains: "not valid JSON" });
await expectError("invalid JSON", 400, "/tokenize", null, { raw: Buffer.from("{prompt: 'x'}"), code: "invalid_json" });
await expectError("not an object", 400, "/tokenize", null, { raw: Buffer.from("[1, 2]"), contains: "must be a JSON object" });
await expectError("invalid UTF-8", 400, "/tokenize", null,
  { raw: Buffer.concat([Buffer.from('{"prompt": "'), Buffer.from([0xff, 0xfe]), Buffer.from('"}')]), code: "invalid_json" });
await expectError("evidence of the wrong type", 400, "/v1/decide", { evidence: 5, criteria: crit },
  { param: "evidence", contains: "must be a string" });
await expectError("criteria of the wrong type", 400, "/v1/decide", { evidence: "x", criteria: 5 }, { param: "criteria" });
await expectError("a criterion without options", 400, "/v1/decide",
  { evidence: "x", criteria: [crit[0], { id: "q", question: "?" }] }, { param: "criteria[1]" });
await expectError("no evidence", 400, "/v1/decide", { criteria: crit }, { param: "evidence" });
await expectError("tokens of the wrong type", 400, "/detokenize", { tokens: "1,2" }, { param: "tokens" });
await expectError("token outside the vocabulary", 400, "/detokenize", { tokens: [1, 10 ** 9] }, { param: "tokens[1]" });
await expectError("negative max_tokens", 400, "/v1/completions", { prompt: "x", max_tokens: -1 },
  { param: "max_tokens", contains: "at least 0" });
await expectError("zero max_tokens on chat", 400, "/v1/chat/completions",
  { messages: [{ role: "user", content: "x" }], max_tokens: 0 }, { param: "max_tokens", contains: "at least 1" });
await expectError("max_tokens of the wrong type", 400, "/v1/chat/completions",
  { messages: [{ role: "user", content: "x" }], max_tokens: "8" }, { param: "max_tokens" });
await expectError("max_tokens above the limit", 400, "/v1/completions", { prompt: "x", max_tokens: 10 ** 6 },
  { param: "max_tokens", contains: "limit" });
await expectError("temperature of the wrong type", 400, "/v1/completions", { prompt: "x", temperature: "hot" },
  { param: "temperature" });
await expectError("a message without a role", 400, "/v1/chat/completions", { messages: [{ content: "x" }] },
  { param: "messages[0].role" });
await expectError("an unknown role", 400, "/v1/chat/completions", { messages: [{ role: "wizard", content: "x" }] },
  { param: "messages[0].role" });
await expectError("unknown model", 404, "/v1/chat/completions",
  { model: "gpt-4", messages: [{ role: "user", content: "x" }] }, { param: "model", code: "model_not_found" });
await expectError("unknown model on decide", 404, "/v1/decide", { model: "nope", evidence: "x", criteria: crit },
  { code: "model_not_found" });
const longEv = "The customer wrote again about the charge. ".repeat(3000); // far beyond the demo model's 2048 positions
await expectError("evidence longer than the context", 400, "/v1/decide", { evidence: longEv, criteria: crit },
  { param: "evidence", code: "context_length_exceeded", contains: "context" });

// a raw connection, as Python's socket.create_connection: allowHalfOpen keeps the writing side open after the
// server's FIN, as a Python socket does, so a write fails only once the peer has reset the connection; errors are
// reported by the calls that meet them (sendall, the reads below)
function connect() {
  return new Promise((resolve, reject) => {
    const s = net.connect({ host: HOST, port: PORT, allowHalfOpen: true });
    s.once("connect", () => {
      s.off("error", reject);
      s.on("error", () => {});
      resolve(s);
    });
    s.once("error", reject);
  });
}

// write and wait until the kernel took it all (Python's sendall): resolves with the error, or null
function sendall(s, data) {
  return new Promise((resolve) => {
    if (s.destroyed || s.writableEnded) return resolve(new Error("the socket is closed"));
    let done = false;
    const finish = (err) => {
      if (done) return;
      done = true;
      s.off("error", finish);
      s.off("close", onClose);
      resolve(err ?? null);
    };
    const onClose = () => finish(new Error("the socket is closed"));
    s.on("error", finish);
    s.on("close", onClose);
    s.write(data, (err) => finish(err));
  });
}

const turn = () => new Promise((r) => setImmediate(r));

// headers, then pieces of body as long as the server reads; the reply. Python sent everything, then read; here the
// reply is read as it comes, because Node closes a socket at once when a write fails (the server answered early,
// closed, and reset the connection) and what the kernel still held for us would be lost: before each piece, a full
// turn of the event loop lets a reply that has arrived be read.
async function sendRaw(headBytes, bodyPieces) {
  const s = await connect();
  const chunks = [];
  let ended = false, complete = false;
  const data = () => Buffer.concat(chunks);
  let wake = null;
  s.on("data", (d) => {
    chunks.push(d);
    const b = data();
    if (b.includes("\r\n\r\n") && b.includes('"}}')) complete = true;
    if (complete && wake) wake();
  });
  s.on("end", () => { ended = true; if (wake) wake(); });
  s.on("error", () => { ended = true; if (wake) wake(); }); // the server answered early and closed
  s.setTimeout(30000, () => { ended = true; s.destroy(); if (wake) wake(); }); // Python's socket timeout of 30 s
  let err = await sendall(s, headBytes);
  for (const p of bodyPieces) {
    await turn(); // to the check phase, then through a poll phase to the next one
    await turn();
    if (err || complete || ended) break;
    err = await sendall(s, p);
  }
  if (!ended && !complete) await new Promise((r) => { wake = r; });
  s.destroy();
  return data();
}

// an oversized body announced by Content-Length: refused before it is read. The server answers and closes while the
// client is still sending, so the client's kernel may take the server's reset before Node reads the 413 and drop it
// (an empty reply; seen once in a loaded ASan run): up to three tries, every reply that arrives must be the 413 and
// at least one must arrive.
let got = Buffer.alloc(0);
for (let attempt = 0; attempt < 3 && got.length === 0; attempt++) {
  got = await sendRaw(Buffer.from(`POST /tokenize HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${KEY}\r\nContent-Length: ${2 << 20}\r\n\r\n`),
    Array(32).fill(Buffer.alloc(65536, "a")));
}
if (!got.subarray(0, 12).equals(Buffer.from("HTTP/1.1 413")) || !got.includes("request_too_large"))
  fail(`oversized body (Content-Length): ${pyRepr(got.subarray(0, 200))}`);

function chunkedOversize() { // no Content-Length: the limit holds while reading
  const piece = Buffer.alloc(65536, "a");
  const chunk = Buffer.concat([Buffer.from(piece.length.toString(16) + "\r\n"), piece, Buffer.from("\r\n")]);
  return sendRaw(Buffer.from(`POST /tokenize HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${KEY}\r\nTransfer-Encoding: chunked\r\n\r\n`),
    [...Array(40).fill(chunk), Buffer.from("0\r\n\r\n")]);
}

got = await chunkedOversize();
if (!got.subarray(0, 12).equals(Buffer.from("HTTP/1.1 413"))) fail(`chunked oversized body: ${pyRepr(got.subarray(0, 100))}`);

// a slow client: the body trickles in, one byte every 0.3 s; the server cuts it at its deadline (--timeout)
const timeoutS = Number.parseFloat(process.env.SERVE_TIMEOUT ?? "3");
let s = await connect();
await sendall(s, `POST /tokenize HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${KEY}\r\nContent-Length: 1000\r\n\r\n`);
let t0 = now(), cut = null;
for (let i = 0; i < 1000; i++) {
  if (await sendall(s, " ")) {
    cut = now() - t0;
    break;
  }
  await sleep(300);
  if (now() - t0 > timeoutS + 10) break;
}
s.destroy();
if (cut === null || cut > timeoutS + 3)
  fail(`a client trickling its body was not cut within ${pyFloat(timeoutS)} s (+3): ${pyFloat(cut)}`);
else console.log(`check_api: a client trickling its body was cut after ${cut.toFixed(1)} s (deadline ${timeoutS.toFixed(0)} s)`);
// a client that sends half its headers and stalls: a 408 and closed at the deadline (tests/serve/check_conn.mjs)
s = await connect();
await sendall(s, "POST /tokenize HTTP/1.1\r\nHost: x\r\n");
t0 = now();
const d = await new Promise((resolve) => { // Python's recv(100): the first bytes, b"" at the end, or an error
  s.once("data", (b) => resolve(b.subarray(0, 100)));
  s.once("end", () => resolve(Buffer.alloc(0)));
  s.once("error", () => resolve(Buffer.alloc(0)));
  s.setTimeout(30000, () => resolve(Buffer.alloc(0)));
});
const stall = now() - t0;
s.destroy();
if (!d.subarray(0, 12).equals(Buffer.from("HTTP/1.1 408")) || stall > timeoutS + 3)
  fail(`a stalled client: got ${pyRepr(d)} after ${stall.toFixed(1)} s`);
else console.log(`check_api: a client stalled in its headers was closed after ${stall.toFixed(1)} s`);

process.exit(fails ? 1 : 0);
