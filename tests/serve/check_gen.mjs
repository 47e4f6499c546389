// Generation through a running `typedecide serve` (tests/test_serve.sh starts it without an API key):
//  - greedy /v1/completions on token ids equals `typedecide generate --ids` token for token; a chat completion with
//    thinking off equals `typedecide generate --chat` text;
//  - streaming and non-streaming give the same text (chat and completions);
//  - concurrent requests (continuous batching) each equal their single-client reply: the same ids and the same
//    log-probabilities (the JSON numbers, 9 significant digits: every bit of a float);
//  - echo logprobs equal the log-softmax of `typedecide logits` within 1e-5;
//  - chat_template_kwargs.enable_thinking false renders "<think>\n\n</think>\n\n"; the effective sampler is reported;
//  - a prompt longer than the context, or max_tokens past it: 400 context_length_exceeded;
//  - a client that disconnects mid-stream frees its slot at once (/health shows nothing generating).
// usage: node check_gen.mjs URL BIN MODEL WORKDIR
import { execFileSync, spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import net from "node:net";
import { eq, fmtE, head, hostPort, now, pyDumps, pyFloat, pyLen, pyRepr, pyStr, request, sleep, truthy, tuple }
  from "./util.mjs";

const [url, BIN, MODEL, WORK] = process.argv.slice(2, 6);
const { host: HOST, port: PORT } = hostPort(url);
let fails = 0;

function fail(msg) {
  fails += 1;
  console.error("FAIL: " + msg);
}

async function post(path, body) {
  const r = await request(HOST, PORT, "POST", path, { body: pyDumps(body), timeout: 300 });
  return [r.status, r.text.startsWith("{") ? JSON.parse(r.text) : null, r.text];
}

async function sse(path, body) { // the data of every event, parsed, until [DONE]
  const r = await request(HOST, PORT, "POST", path, { body: pyDumps({ ...body, stream: true }), timeout: 300 });
  const events = [];
  for (const block of r.text.split("\n\n")) {
    if (block.startsWith("data: ")) {
      const d = block.slice(6);
      events.push(d === "[DONE]" ? d : JSON.parse(d));
    }
  }
  return [r.status, r.headers["content-type"] ?? null, events];
}

const genCli = (args) => execFileSync(BIN, ["generate", "--model", MODEL, "--threads", "1", "--temperature", "0", ...args],
  { maxBuffer: 1 << 30, stdio: ["inherit", "pipe", "ignore"] }).toString();

// `typedecide tokenize`, in a child process of its own (the concurrent requests below run theirs side by side)
const tok = (text) => new Promise((resolve, reject) => {
  const child = spawn(BIN, ["tokenize", "--model", MODEL, "--text", text], { stdio: ["inherit", "pipe", "inherit"] });
  const out = [];
  child.stdout.on("data", (d) => out.push(d));
  child.on("error", reject);
  child.on("close", (code, signal) => {
    if (code !== 0) reject(new Error(`${BIN} tokenize exited ${code ?? signal}`));
    else resolve(JSON.parse(Buffer.concat(out).toString()));
  });
});
const getJson = async (path) => JSON.parse((await request(HOST, PORT, "GET", path)).text);
const prompts = ["The invoice shows", "Dear support team, my card was charged", "Access to the repository", "Sensor 4 reads",
  "The package arrived damaged and", "Please reset my password"];

// ---- greedy equals typedecide generate ------------------------------------------------------------------------
const single = new Map();
for (const p of prompts) {
  const ids = await tok(p);
  const [st, j, text] = await post("/v1/completions", { prompt: ids, max_tokens: 16, temperature: 0, logprobs: 0 });
  const cli = JSON.parse(genCli(["--ids", ids.join(","), "-n", "16"]));
  if (st !== 200 || !eq(j.choices[0].token_ids, cli))
    fail(`greedy ${pyRepr(p)}: server ${j ? pyStr(j.choices[0].token_ids) : "None"} != generate ${pyStr(cli)} (${head(text, 200)})`);
  single.set(p, j ? tuple(j.choices[0].token_ids, j.choices[0].logprobs.token_logprobs) : null);
  if (j && (j.sampler.greedy !== true || !eq(j.sampler.temperature, 0)))
    fail(`the effective sampler is not reported as greedy: ${pyStr(j.sampler)}`);
}
console.log(`check_gen: greedy completions equal typedecide generate token for token (${prompts.length} prompts)`);

const msg = "My card was charged twice for the same order.";
let [st, j, text] = await post("/v1/chat/completions", { messages: [{ role: "user", content: msg }], max_tokens: 20,
  temperature: 0, chat_template_kwargs: { enable_thinking: false } });
let cliText = genCli(["--chat", "--prompt", msg, "-n", "20"]);
cliText = cliText.endsWith("\n") ? cliText.slice(0, -1) : cliText; // generate ends its output with a newline
if (st !== 200 || j.choices[0].message.content !== cliText)
  fail(`chat: server ${j ? pyRepr(j.choices[0].message.content) : "None"} != generate --chat ${pyRepr(cliText)}`);
const chatPlain = j;

// ---- streaming = non-streaming --------------------------------------------------------------------------------
let body = { messages: [{ role: "user", content: msg }], max_tokens: 20, temperature: 0,
  chat_template_kwargs: { enable_thinking: false }, stream_options: { include_usage: true } };
let [st1, ct, ev] = await sse("/v1/chat/completions", body);
const evs = ev.slice(0, -1);
let streamed = evs.filter((e) => truthy(e.choices)).map((e) => e.choices[0].delta.content || "").join("");
const finish = evs.filter((e) => truthy(e.choices) && truthy(e.choices[0].finish_reason)).map((e) => e.choices[0].finish_reason);
const usage = evs.filter((e) => truthy(e.usage)).map((e) => e.usage);
if (st1 !== 200 || !(ct ?? "").includes("text/event-stream") || ev.at(-1) !== "[DONE]")
  fail(`chat stream: ${st1} ${pyStr(ct)} ${pyStr(ev.slice(-1))}`);
else if (streamed !== chatPlain.choices[0].message.content || !eq(finish, [chatPlain.choices[0].finish_reason]))
  fail(`chat stream ${pyRepr(streamed)} (${pyStr(finish)}) != plain ${pyRepr(chatPlain.choices[0].message.content)}`);
else if (!truthy(usage) || !eq(usage[0].completion_tokens, chatPlain.usage.completion_tokens))
  fail(`chat stream usage ${pyStr(usage)}`);
[st1, ct, ev] = await sse("/v1/completions", { prompt: prompts[0], max_tokens: 16, temperature: 0 });
const [, j2] = await post("/v1/completions", { prompt: prompts[0], max_tokens: 16, temperature: 0 });
streamed = ev.slice(0, -1).filter((e) => truthy(e.choices)).map((e) => e.choices[0].text).join("");
if (streamed !== j2.choices[0].text) fail(`completion stream ${pyRepr(streamed)} != plain ${pyRepr(j2.choices[0].text)}`);
console.log(`check_gen: streamed and plain replies have the same text (chat: ${pyLen(streamed)} chars)`);

// ---- concurrent requests each equal their single reply --------------------------------------------------------
const got = new Map(); // in the order the replies came, as Python's dict filled by threads

async function one(p, k) {
  const [st, j] = await post("/v1/completions", { prompt: await tok(p), max_tokens: 16, temperature: 0, logprobs: 0 });
  got.set(`${k}\0${p}`, [p, k, st === 200 ? tuple(j.choices[0].token_ids, j.choices[0].logprobs.token_logprobs) : st]);
}

const ts = [];
for (let k = 0; k < 2; k++) for (const p of prompts) ts.push(one(p, k));
for (const t of ts) await t;
const bad = [...got.values()].filter(([p, , v]) => !eq(v, single.get(p))).map(([p, k]) => tuple(p, k));
if (bad.length) fail(`concurrent replies differ from single ones: ${pyRepr(bad)}`);
console.log(`check_gen: ${ts.length} concurrent greedy requests each equal their single-client reply (ids and logprobs, bit for bit)`);

// ---- echo logprobs = log-softmax of typedecide logits ---------------------------------------------------------
let ids = await tok("The customer asked for a refund of the second charge");
[st, j, text] = await post("/v1/completions", { prompt: ids, max_tokens: 0, echo: true, logprobs: 0 });
const out = `${WORK.replace(/\/+$/, "")}/logits.f32`;
execFileSync(BIN, ["logits", "--model", MODEL, "--threads", "1", "--ids", ids.join(","), "--out", out],
  { stdio: ["inherit", "inherit", "ignore"] });
const raw = readFileSync(out);
const V = Math.floor(Math.floor(raw.length / 4) / ids.length);
let worst = 0.0;
if (st !== 200) {
  fail(`echo logprobs: ${st} ${head(text, 300)}`);
} else {
  const lps = j.choices[0].logprobs.token_logprobs;
  if (lps.length !== ids.length || lps[0] !== null) fail(`echo logprobs: ${lps.length} values for ${ids.length} prompt tokens`);
  for (let i = 1; i < ids.length; i++) {
    if (typeof lps[i] !== "number") throw new Error(`echo logprobs: token ${i}: ${pyRepr(lps[i])}, not a number`);
    const row = new Float64Array(V);
    for (let v = 0; v < V; v++) row[v] = raw.readFloatLE(4 * (V * (i - 1) + v));
    let mx = -Infinity;
    for (const x of row) if (x > mx || mx === -Infinity) mx = x;
    let sum = 0;
    for (const x of row) sum += Math.exp(x - mx);
    const ref = row[ids[i]] - mx - Math.log(sum);
    const diff = Math.abs(ref - lps[i]);
    if (diff > worst) worst = diff; // Python's max(worst, diff)
  }
  if (worst > 1e-5) fail(`echo logprobs differ from log-softmax of typedecide logits by ${pyFloat(worst)}`);
}
console.log(`check_gen: echo logprobs = log-softmax of typedecide logits (max |diff| ${fmtE(worst, 2)} over ${ids.length - 1} tokens)`);

// ---- template, limits -----------------------------------------------------------------------------------------
[st, j] = await post("/tokenize", { messages: [{ role: "user", content: "hi" }], chat_template_kwargs: { enable_thinking: false } });
if (st !== 200 || !j.prompt.endsWith("<|im_start|>assistant\n<think>\n\n</think>\n\n"))
  fail(`tokenize messages, thinking off: ${pyStr(j)}`);
[st, j] = await post("/tokenize", { messages: [{ role: "user", content: "hi" }], add_generation_prompt: false });
if (st !== 200 || j.prompt !== "<|im_start|>user\nhi<|im_end|>\n" || !eq(j.count, j.tokens.length))
  fail(`tokenize messages without the generation prompt: ${pyStr(j)}`);
const nCtx = (await getJson("/v1/models")).data[0].max_model_len;
[st, j] = await post("/v1/completions", { prompt: Array(nCtx + 1).fill(5), max_tokens: 1 });
if (st !== 400 || j.error.code !== "context_length_exceeded" || j.error.param !== "prompt")
  fail(`a prompt longer than the context: ${st} ${pyStr(j)}`);
[st, j] = await post("/v1/completions", { prompt: Array(nCtx - 10).fill(5), max_tokens: 100 });
if (st !== 400 || j.error.code !== "context_length_exceeded") fail(`max_tokens past the context: ${st} ${pyStr(j)}`);
[st, j] = await post("/v1/chat/completions", { messages: [{ role: "user", content: "word ".repeat(nCtx + 10) }], max_tokens: 4 });
if (st !== 400 || j.error.param !== "messages" || !j.error.message.includes("context"))
  fail(`chat messages longer than the context: ${st} ${pyStr(j)}`);

// ---- a client that leaves mid-stream frees its slot at once ----------------------------------------------------
// a raw connection that sends one request (Python's socket.create_connection and sendall)
function rawRequest(bodyObj) {
  return new Promise((resolve, reject) => {
    const b = Buffer.from(pyDumps(bodyObj));
    const s = net.connect({ host: HOST, port: PORT, allowHalfOpen: true });
    s.once("error", reject);
    s.once("connect", () => {
      s.off("error", reject);
      s.on("error", () => {});
      s.write(Buffer.concat([Buffer.from(`POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: ${b.length}\r\n\r\n`), b]),
        (err) => (err ? reject(err) : resolve(s)));
    });
  });
}

// polls /health until nothing is generating nor admitted, for at most `limit` s: [seconds, generating]
async function waitFreed(limit) {
  const t0 = now();
  let gen = null;
  while (now() - t0 < limit) {
    const h = await getJson("/health");
    gen = h.generating;
    if (eq(gen, 0) && eq(h.requests_admitted, 0)) break;
    await sleep(20);
  }
  return [now() - t0, gen];
}

let s = await rawRequest({ prompt: "The", max_tokens: 1500, ignore_eos: true, temperature: 0, stream: true });
await new Promise((resolve) => { // read until four events came (or the connection ended)
  let data = "";
  s.on("data", (d) => {
    data += d.toString("latin1");
    if (data.split("data: ").length - 1 >= 4) resolve();
  });
  s.on("end", resolve);
  s.on("close", resolve);
});
s.destroy();
let [freed, gen] = await waitFreed(5);
[st, j] = await post("/v1/completions", { prompt: "The", max_tokens: 1500, ignore_eos: true, temperature: 0 });
const fullS = st === 200 ? j.timings.decode_ms / 1e3 : null;
if (!eq(gen, 0) || fullS === null || freed > fullS / 4)
  fail(`a client that left mid-stream: slot freed after ${freed.toFixed(2)} s (generating ${pyStr(gen)}); the whole reply takes ${pyFloat(fullS)} s`);
else
  console.log(`check_gen: a client that left mid-stream freed its slot after ${(freed * 1e3).toFixed(0)} ms (the whole reply: ${fullS.toFixed(2)} s)`);

// ... and so does a client of a non-streamed request
s = await rawRequest({ prompt: "The", max_tokens: 1500, ignore_eos: true, temperature: 0 });
await sleep(300);
s.destroy();
let freed2;
[freed2, gen] = await waitFreed(10);
if (!eq(gen, 0) || fullS === null || freed2 > fullS / 4)
  fail(`a client of a plain request that left: slot freed after ${freed2.toFixed(2)} s (generating ${pyStr(gen)})`);
else console.log(`check_gen: a client of a plain request that left freed its slot after ${(freed2 * 1e3).toFixed(0)} ms`);

process.exit(fails ? 1 : 0);
