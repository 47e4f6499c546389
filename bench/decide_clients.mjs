// The client of bench/decide_clients.sh: /v1/decide from CLIENTS clients at once against the same requests sent one
// at a time, on a running `typedecide serve`. Each request: CRITERIA criteria over its own ~200-token evidence.
// Between the phases 16 short filler requests (other evidences) push every timed evidence out of the server's head cache,
// and every timed response must say it prefilled its evidence (prefill_tokens > 0): neither phase is helped by the
// other. Every concurrent response must equal the one-at-a-time one byte for byte (all but "ms"), and the first
// CLI_CHECK of them `typedecide decide --json` alone (with the same extra arguments, e.g. --device cuda).
// usage: node decide_clients.mjs URL BIN MODEL WORK CLIENTS CRITERIA ROUNDS CLI_CHECK [decide args...]
// prints one JSON object.
import { execFileSync } from "node:child_process";
import { writeFileSync } from "node:fs";
import http from "node:http";

const [url, BIN, MODEL, WORK, CLIENTS, CRITERIA, ROUNDS, CLI_CHECK, ...extra] = process.argv.slice(2);
const u = new URL(url);
const nClients = Number(CLIENTS), nCrit = Number(CRITERIA), rounds = Number(ROUNDS), cliCheck = Number(CLI_CHECK);

// on loopback, the clients come from 127.0.0.2 .. 127.0.0.9 in turn: a server's cap of connections per client
// address (if any) does not apply to one machine playing 32 clients
let nextAddr = 0;
const localAddress = () => (u.hostname === "127.0.0.1" ? `127.0.0.${2 + (nextAddr++ % 8)}` : undefined);
function post(path, body) {
  return new Promise((resolve, reject) => {
    const data = Buffer.from(JSON.stringify(body));
    const req = http.request({ host: u.hostname, port: u.port, method: "POST", path, agent: false, localAddress: localAddress(),
      headers: { "Content-Type": "application/json", "Content-Length": data.length } }, (res) => {
      const parts = [];
      res.on("data", (d) => parts.push(d));
      res.on("end", () => resolve({ status: res.statusCode, text: Buffer.concat(parts).toString("utf8") }));
      res.on("error", reject);
    });
    req.setTimeout(3600e3, () => req.destroy(new Error("timed out")));
    req.on("error", reject);
    req.end(data);
  });
}

const stripMs = (line) => line.slice(0, line.indexOf(',"ms":')) + "}";
function decisionLines(text) { // the decisions array cut out of the body, object by object (no strings hold braces)
  const inner = text.slice(text.indexOf('"decisions":[') + 13, text.indexOf('],"prefill_tokens"'));
  const out = [];
  let depth = 0, start = 0;
  for (let i = 0; i < inner.length; i++) {
    depth += "{[".includes(inner[i]) ? 1 : "}]".includes(inner[i]) ? -1 : 0;
    if (depth === 0 && inner[i] === "}") out.push(inner.slice(start, i + 1)), (start = i + 2);
  }
  return out.map(stripMs);
}

// ---- the requests ------------------------------------------------------------------------------------------------
const names = ["Anna", "Bilal", "Chen", "Dara", "Emil", "Fatou", "Goran", "Hana", "Ivo", "Jun", "Kemal", "Lea"];
const products = ["the mobile app", "the web dashboard", "the invoice export", "the billing page", "the API", "the sync client"];
const issues = ["crashes on start", "shows a blank page", "charges twice", "logs me out", "loses my drafts", "is very slow"];
function evidence(i, salt = "") { // a support ticket of about 200 tokens, different for every i
  const n = names[i % names.length], p = products[(i * 5) % products.length], q = issues[(i * 7) % issues.length];
  const s = [
    `Ticket ${1000 + i}${salt}. From ${n}, customer since ${2015 + (i % 9)}, plan ${["Basic", "Team", "Enterprise"][i % 3]}.`,
    `Hello, since the update on ${1 + (i % 28)} March ${p} ${q}. I tried again on two devices and after a restart,`,
    `and it still happens every time I open it. ${i % 2 ? "Two colleagues in my team see the same thing." : "Nobody else in my team is affected as far as I know."}`,
    `${i % 3 === 0 ? "I was also charged " + (19 + i) + " euros twice this month and would like the second payment refunded." : "My invoices look correct, this is not about money."}`,
    `We rely on it for our daily reports, so ${i % 4 === 0 ? "this is urgent: I need it working before the audit tomorrow." : "it would be good to have it fixed this week."}`,
    `${i % 5 === 0 ? "Frankly I am getting annoyed, this is the third time I write to you about it." : "Thank you for your help, I know you are busy."}`,
    `Steps: open ${p}, sign in with my work account (${n.toLowerCase()}@example.com), go to the reports tab, choose last month, press export.`,
    `Expected: the report downloads. Actual: ${q.replace("is ", "it is ")}. Version ${3 + (i % 4)}.${i % 10}.${(i * 3) % 17}, browser and phone both up to date.`,
    `Could you also tell me whether there is a way to schedule the export? Best regards, ${n}.`,
  ];
  return s.join(" ");
}
const critPool = [
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
];
const criteria = Array.from({ length: nCrit }, (_, k) => {
  const [id, question, opts] = critPool[k % critPool.length];
  return { id: k < critPool.length ? id : `${id}${k}`, question, options: opts.map(([i, d]) => ({ id: i, description: d })) };
});
const reqs = Array.from({ length: nClients }, (_, i) => ({ evidence: evidence(i), criteria }));
const tokens = [];
for (const r of reqs.slice(0, 4)) tokens.push(JSON.parse((await post("/tokenize", { prompt: r.evidence })).text).count);

const flush = () => Promise.all(Array.from({ length: 16 }, (_, i) =>
  post("/v1/decide", { evidence: `Filler ticket ${i}.`, criteria: criteria.slice(0, 1) }))); // short: cheap, 16 slots
const check = (r, what) => {
  if (r.status !== 200) throw new Error(`${what}: ${r.status} ${r.text.slice(0, 300)}`);
  const j = JSON.parse(r.text);
  if (!(j.prefill_tokens > 0)) throw new Error(`${what}: its evidence was cached (prefill_tokens ${j.prefill_tokens})`);
  return j;
};
await post("/v1/decide", { evidence: evidence(5000, " (warm-up)"), criteria }); // sizes the decider's context

const t = () => performance.now() / 1e3;
const runs = [];
let seqLines = null, mismatched = 0, maxPass = 0;
for (let round = 0; round < rounds; round++) {
  await flush();
  let t0 = t();
  const seq = [];
  for (let i = 0; i < nClients; i++) seq.push(await post("/v1/decide", reqs[i]));
  const seqS = t() - t0;
  seq.forEach((r, i) => check(r, `one at a time, request ${i}`));
  await flush();
  t0 = t();
  const conc = await Promise.all(reqs.map((r) => post("/v1/decide", r)));
  const concS = t() - t0;
  const passes = conc.map((r, i) => check(r, `concurrent, request ${i}`).pass_requests);
  maxPass = Math.max(maxPass, ...passes);
  const sl = seq.map((r) => decisionLines(r.text)), cl = conc.map((r) => decisionLines(r.text));
  if (!seqLines) seqLines = sl;
  for (let i = 0; i < nClients; i++)
    if (JSON.stringify(cl[i]) !== JSON.stringify(sl[i]) || JSON.stringify(sl[i]) !== JSON.stringify(seqLines[i])) mismatched++;
  const crit = nClients * nCrit;
  runs.push({ round, one_at_a_time_s: +seqS.toFixed(3), concurrent_s: +concS.toFixed(3),
    one_at_a_time_criteria_per_s: +(crit / seqS).toFixed(2), concurrent_criteria_per_s: +(crit / concS).toFixed(2),
    ratio: +(seqS / concS).toFixed(3), mean_pass_requests: +(passes.reduce((a, b) => a + b, 0) / passes.length).toFixed(2) });
}
// `typedecide decide` alone on the first CLI_CHECK requests
let cliMismatched = 0;
for (let i = 0; i < Math.min(cliCheck, nClients); i++) {
  writeFileSync(`${WORK}/ev.txt`, reqs[i].evidence);
  writeFileSync(`${WORK}/crit.jsonl`, criteria.map((c) => JSON.stringify(c)).join("\n") + "\n");
  const out = execFileSync(BIN, ["decide", "--json", "--quiet", "--model", MODEL, "--evidence", `${WORK}/ev.txt`,
    "--criteria", `${WORK}/crit.jsonl`, ...extra], { maxBuffer: 1 << 30 }).toString();
  const lines = out.split("\n").filter((l) => l).map(stripMs);
  if (JSON.stringify(lines) !== JSON.stringify(seqLines[i])) cliMismatched++;
}
const med = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
console.log(JSON.stringify({
  clients: nClients, criteria_per_request: nCrit, evidence_tokens_first4: tokens, rounds,
  one_at_a_time_criteria_per_s: med(runs.map((r) => r.one_at_a_time_criteria_per_s)),
  concurrent_criteria_per_s: med(runs.map((r) => r.concurrent_criteria_per_s)),
  ratio: med(runs.map((r) => r.ratio)), max_pass_requests: maxPass,
  concurrent_vs_one_at_a_time_mismatched: mismatched, cli_checked: Math.min(cliCheck, nClients), cli_mismatched: cliMismatched,
  runs,
}));
if (mismatched || cliMismatched) process.exit(1);
