// The load of bench/slow_clients.sh (Node built-ins only): for DURATION seconds, N_SLOW clients send request headers
// one byte a second (each from its own loopback address, 127.0.0.10 and up, as many machines would; a client that
// is cut connects again at once) while N_NORMAL clients loop over /v1/chat/completions (16 greedy tokens),
// /v1/decide (the demo ticket, 4 criteria) and /health, and a prober asks /health ten times a second.
// Prints one JSON object: per kind of request its count, errors and latency percentiles (ms); the slow clients'
// cuts, how many carried a 408, and the seconds from connect to cut (min/median/max).
// usage: node slow_clients.mjs URL DURATION_S N_SLOW N_NORMAL TIMEOUT_S EVIDENCE CRITERIA_JSONL
import fs from "node:fs";
import http from "node:http";
import net from "node:net";

// usage 2: node slow_clients.mjs streams URL N_STREAMS MAX_TOKENS: N concurrent streamed chat replies (those beyond
// the server's --parallel wait for their turn); prints {streams, complete, seconds}.
if (process.argv[2] === "streams") {
  const [, , , surl, nS, maxT] = process.argv;
  const su = new URL(surl);
  const t = performance.now();
  const one = (k) => new Promise((resolve) => {
    const body = Buffer.from(JSON.stringify({ messages: [{ role: "user", content: `Tell me a long story, ${k}.` }],
      max_tokens: Number(maxT), temperature: 0, stream: true, ignore_eos: true }));
    const r = http.request({ host: su.hostname, port: Number(su.port), method: "POST", path: "/v1/chat/completions",
      headers: { "Content-Type": "application/json", "Content-Length": body.length } }, (res) => {
      let text = "";
      res.on("data", (c) => { text += c; });
      res.on("end", () => resolve(text.includes("data: [DONE]")));
    });
    r.on("error", () => resolve(false));
    r.end(body);
  });
  const done = await Promise.all(Array.from({ length: Number(nS) }, (_, k) => one(k)));
  console.log(JSON.stringify({ streams: done.length, complete: done.filter(Boolean).length,
    seconds: +((performance.now() - t) / 1e3).toFixed(2) }));
  process.exit(0);
}
const [url, durS, nSlowS, nNormS, timeoutS, evidencePath, criteriaPath] = process.argv.slice(2);
const u = new URL(url);
const host = u.hostname, port = Number(u.port);
const DUR = Number(durS), N_SLOW = Number(nSlowS), N_NORMAL = Number(nNormS), T = Number(timeoutS);
const evidence = fs.readFileSync(evidencePath, "utf8");
const criteria = fs.readFileSync(criteriaPath, "utf8").split("\n").filter((l) => l.trim()).map((l) => JSON.parse(l));
const now = () => performance.now() / 1e3;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const t0 = now();
const running = () => now() - t0 < DUR;

// ---- slow clients
const cuts = [];      // seconds from connect to the end of the connection
let with408 = 0, without408 = 0, slowConnects = 0;
function slowOnce(addr) {
  return new Promise((resolve) => {
    const start = now();
    let data = "", done = false, timer = null, i = 0;
    const hdr = "GET /health HTTP/1.1\r\nHost: x\r\nUser-Agent: " + "s".repeat(4000) + "\r\n\r\n";
    const s = net.connect({ host, port, localAddress: addr });
    slowConnects++;
    const finish = (counted) => {
      if (done) return;
      done = true;
      clearInterval(timer);
      if (counted) {
        cuts.push(now() - start);
        if (data.startsWith("HTTP/1.1 408")) with408++;
        else without408++;
      }
      s.destroy();
      resolve();
    };
    s.on("data", (b) => { data += b.toString("latin1"); });
    s.on("end", () => finish(true));
    s.on("close", () => finish(true));
    s.on("error", () => finish(true));
    s.on("connect", () => {
      timer = setInterval(() => {
        if (!running()) return finish(false); // the run ended: not a cut
        if (i < hdr.length) s.write(hdr[i++]);
      }, 1000);
    });
  });
}
async function slowClient(k) {
  const addr = `127.0.0.${10 + k}`;
  while (running()) await slowOnce(addr);
}

// ---- normal clients
const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
const lat = { chat: [], decide: [], health: [], probe: [] };
const errors = { chat: 0, decide: 0, health: 0, probe: 0 };
const errSamples = [];
function request(method, path, body, ag) {
  return new Promise((resolve) => {
    const t = now();
    const payload = body ? Buffer.from(JSON.stringify(body)) : null;
    const r = http.request({ host, port, method, path, agent: ag,
      headers: payload ? { "Content-Type": "application/json", "Content-Length": payload.length } : {} }, (res) => {
      const chunks = [];
      res.on("data", (c) => chunks.push(c));
      res.on("end", () => resolve({ status: res.statusCode, ms: 1e3 * (now() - t), text: Buffer.concat(chunks).toString() }));
    });
    r.setTimeout(60000, () => r.destroy(new Error("timeout 60 s")));
    r.on("error", (e) => resolve({ status: 0, ms: 1e3 * (now() - t), text: String(e) }));
    if (payload) r.write(payload);
    r.end();
  });
}
async function call(kind, method, path, body, ag) {
  const r = await request(method, path, body, ag);
  if (r.status === 200) lat[kind].push(r.ms);
  else {
    errors[kind]++;
    if (errSamples.length < 5) errSamples.push(`${kind}: ${r.status} ${r.text.slice(0, 200)}`);
  }
}
async function normalClient(k) {
  const ag = new http.Agent({ keepAlive: true, maxSockets: 1 });
  let i = 0;
  while (running()) {
    await call("chat", "POST", "/v1/chat/completions", { messages: [{ role: "user", content: `Question ${k}.${i}: what happened?` }],
      max_tokens: 16, temperature: 0 }, ag);
    await call("decide", "POST", "/v1/decide", { evidence, criteria }, ag);
    await call("health", "GET", "/health", null, ag);
    i++;
  }
  ag.destroy();
}
async function prober() {
  while (running()) {
    await call("probe", "GET", "/health", null, agent);
    await sleep(100);
  }
}

const pct = (xs, p) => {
  if (!xs.length) return null;
  const s = [...xs].sort((a, b) => a - b);
  return +s[Math.min(s.length - 1, Math.floor(p * s.length))].toFixed(2);
};
const stats = (xs) => ({ n: xs.length, p50_ms: pct(xs, 0.5), p99_ms: pct(xs, 0.99), max_ms: pct(xs, 1) });

await Promise.all([
  ...Array.from({ length: N_SLOW }, (_, k) => slowClient(k)),
  ...Array.from({ length: N_NORMAL }, (_, k) => normalClient(k)),
  prober(),
]);
agent.destroy();
const allHealth = [...lat.health, ...lat.probe];
console.log(JSON.stringify({
  seconds: +(now() - t0).toFixed(1),
  normal: { chat: { ...stats(lat.chat), errors: errors.chat }, decide: { ...stats(lat.decide), errors: errors.decide },
    health: { ...stats(allHealth), errors: errors.health + errors.probe } },
  errors_sample: errSamples,
  slow: { clients: N_SLOW, connects: slowConnects, cut: cuts.length, cut_with_408: with408, cut_without_408: without408,
    cut_after_s: { min: pct(cuts, 0), median: pct(cuts, 0.5), max: pct(cuts, 1) }, deadline_s: T },
}));
