// /v1/decide batched across clients (issue 46, item 5), against a running `typedecide serve` (tests/test_decide_batch.sh):
//  - rounds of concurrent requests with different evidences and criteria (some requests share an evidence, one has
//    criteria with their own evidence, one asks for the logits): every response's decisions equal, byte for byte (all
//    but the wall time), `typedecide decide --json` on the same input alone;
//  - passes really are shared: some response says its pass held more than one request (pass_requests > 1), and
//    /health counts the passes and the requests they held;
//  - a request that fails (evidence longer than the context) sent among them gets its 400 and changes no other;
//  - clients that leave while waiting do not stop the others (their share is dropped).
// usage: node check_decide_batch.mjs URL BIN MODEL WORKDIR
import { execFileSync } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import net from "node:net";
import { head, hostPort, index, pyDumps, request, splitlines } from "./util.mjs";

const [url, BIN, MODEL, WORK] = process.argv.slice(2, 6);
const { host: HOST, port: PORT } = hostPort(url);
const ROOT = process.env.TD_ROOT ?? ".";
let fails = 0;
const fail = (msg) => {
  fails += 1;
  console.error("FAIL: " + msg);
};

async function post(path, body) {
  const r = await request(HOST, PORT, "POST", path, { body: Buffer.from(pyDumps(body)), timeout: 120 });
  let j = null;
  try {
    j = JSON.parse(r.text);
  } catch {}
  return { status: r.status, j, text: r.text };
}

const run = (args) => execFileSync(BIN, args, { maxBuffer: 1 << 30, stdio: ["inherit", "pipe", "inherit"] }).toString();
const stripMs = (line) => line.slice(0, index(line, ',"ms":')) + "}";

// the decisions as the server wrote them, byte for byte: the array cut out of the body text, object by object
function decisionLines(text) {
  const inner = text.slice(index(text, '"decisions":[') + '"decisions":['.length, index(text, '],"prefill_tokens"'));
  const lines = [];
  let depth = 0, start = 0, inStr = false;
  for (let i = 0; i < inner.length; i++) {
    const ch = inner[i];
    if (inStr) {
      if (ch === "\\") i++;
      else if (ch === '"') inStr = false;
      continue;
    }
    if (ch === '"') inStr = true;
    depth += "{[".includes(ch) ? 1 : "}]".includes(ch) ? -1 : 0;
    if (depth === 0 && ch === "}") {
      lines.push(inner.slice(start, i + 1));
      start = i + 2;
    }
  }
  return lines;
}

// ---- the inputs ------------------------------------------------------------------------------------------------
const ticket = readFileSync(`${ROOT}/models/demo/ticket.txt`, "utf8");
const demo = splitlines(readFileSync(`${ROOT}/models/demo/criteria.jsonl`, "utf8")).filter((l) => l.trim()).map((l) => JSON.parse(l));
const extra = [
  { id: "urgent", question: "Is the matter urgent?", options: [{ id: "yes", description: "Yes, it needs an answer today" }, { id: "no", description: "No" }] },
  { id: "tone", question: "What is the customer's tone?", options: [{ id: "calm", description: "Calm" }, { id: "annoyed", description: "Annoyed" }, { id: "angry", description: "Angry" }] },
  { id: "lang", question: "Which language is the message written in?", options: [{ id: "en", description: "English" }, { id: "de", description: "German" }, { id: "fr", description: "French" }, { id: "other", description: "Another language" }] },
  { id: "reply", question: "Does the message need a reply from a person?", options: [{ id: "yes", description: "Yes" }, { id: "no", description: "No" }] },
];
const allCrit = [...demo, ...extra];
const evidences = [
  ticket,
  "Hello, I was charged twice for my subscription this month. Please refund the second payment of 59 euros.",
  "The export button crashes the app on every click since the last update. Three people on my team see it too.",
  "Could you add a dark mode? Our night shift would appreciate it. No rush.",
  "I cannot log in: the password reset mail never arrives. I need access today for the audit.",
  "Grüße! Die Rechnung vom März ist doppelt. Bitte prüfen Sie das.",
];
const N = 12; // with the failing request: 13 connections at once, within the server's 16 per client address
const reqs = [];
for (let i = 0; i < N; i++) { // request i: evidence i % 6 (requests share evidences), criteria rotating, 2 to 8 of them
  const k = 2 + (i % 7);
  const crit = [];
  for (let c = 0; c < k; c++) crit.push({ ...allCrit[(i + 3 * c) % allCrit.length] });
  const seen = new Set(); // ids stay unique within a request
  const cs = crit.filter((c) => !seen.has(c.id) && seen.add(c.id));
  const body = { evidence: evidences[i % evidences.length], criteria: cs };
  if (i === 5) { // criteria with their own evidence: several groups in one request
    cs[0] = { ...cs[0], evidence: evidences[(i + 1) % evidences.length] };
    if (cs.length > 2) cs[2] = { ...cs[2], evidence: evidences[(i + 2) % evidences.length] };
  }
  if (i === 7) body.show_logits = true;
  reqs.push(body);
}
// the reference: `typedecide decide` on each request alone
const refs = reqs.map((b, i) => {
  writeFileSync(`${WORK}/ev${i}.txt`, b.evidence);
  writeFileSync(`${WORK}/crit${i}.jsonl`, b.criteria.map((c) => JSON.stringify(c)).join("\n") + "\n");
  const args = ["decide", "--json", "--quiet", "--threads", "1", "--model", MODEL, "--evidence", `${WORK}/ev${i}.txt`,
    "--criteria", `${WORK}/crit${i}.jsonl`];
  if (b.show_logits) args.push("--show-logits");
  return splitlines(run(args)).map(stripMs);
});
const longEv = "word ".repeat(40000); // beyond the model's context: refused alone

// ---- concurrent rounds -----------------------------------------------------------------------------------------
let shared = 0, maxPass = 0;
const ROUNDS = process.env.TD_SANITIZED ? 2 : 4;
for (let round = 0; round < ROUNDS; round++) {
  const order = reqs.map((_, i) => i);
  const bad = post("/v1/decide", { evidence: longEv, criteria: [allCrit[1]] });
  const rs = await Promise.all(order.map((i) => post("/v1/decide", reqs[i])));
  const b = await bad;
  if (b.status !== 400 || b.j?.error?.code !== "context_length_exceeded")
    fail(`round ${round}: the over-long evidence: ${b.status} ${head(b.text, 200)}`);
  rs.forEach((r, i) => {
    if (r.status !== 200) return fail(`round ${round} request ${i}: ${r.status} ${head(r.text, 300)}`);
    const lines = decisionLines(r.text).map(stripMs);
    if (JSON.stringify(lines) !== JSON.stringify(refs[i]))
      fail(`round ${round} request ${i} differs from typedecide decide:\n${lines.join("\n")}\n${refs[i].join("\n")}`);
    if (typeof r.j.pass_requests !== "number") return fail(`request ${i}: no pass_requests in ${head(r.text, 200)}`);
    if (r.j.pass_requests > 1) shared++;
    maxPass = Math.max(maxPass, r.j.pass_requests);
  });
}
if (shared === 0) fail("no response shared its pass with another request (pass_requests > 1 never)");
const h = await request(HOST, PORT, "GET", "/health", { timeout: 30 });
const hj = JSON.parse(h.text);
if (!hj.decide || !(hj.decide.passes > 0) || !(hj.decide.requests > hj.decide.passes) || !(hj.decide.max_requests_per_pass > 1))
  fail(`/health: decide passes not shared: ${head(h.text, 300)}`);

// ---- clients that leave while waiting -----------------------------------------------------------------------------
const big = { evidence: evidences[0], criteria: allCrit };
const leavers = [];
for (let i = 0; i < 8; i++) leavers.push(new Promise((resolve) => {
  const s = net.connect(PORT, HOST, () => {
    const body = Buffer.from(pyDumps({ ...big, evidence: evidences[i % evidences.length] + ` (${i})` }));
    s.write(`POST /v1/decide HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n`);
    s.write(body);
    setTimeout(() => { s.destroy(); resolve(); }, 5);
  });
  s.on("error", () => resolve());
}));
const stay = post("/v1/decide", reqs[0]);
await Promise.all(leavers);
const sr = await stay;
if (sr.status !== 200 || JSON.stringify(decisionLines(sr.text).map(stripMs)) !== JSON.stringify(refs[0]))
  fail(`a request beside clients that left: ${sr.status} ${head(sr.text, 300)}`);
const after = await post("/v1/decide", reqs[1]);
if (after.status !== 200 || JSON.stringify(decisionLines(after.text).map(stripMs)) !== JSON.stringify(refs[1]))
  fail(`a request after clients that left: ${after.status} ${head(after.text, 300)}`);

if (fails) process.exit(1);
console.log(`check_decide_batch: ${N} concurrent requests x ${ROUNDS} rounds equal typedecide decide alone; ${shared} responses ` +
  `shared their pass (at most ${maxPass} requests per pass; /health: ${hj.decide.passes} passes for ${hj.decide.requests} requests)`);
