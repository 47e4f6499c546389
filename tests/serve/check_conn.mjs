// Connections of `typedecide serve` (Node built-ins only): deadlines, framing, the per-address cap, CORS, HEAD.
// usage: node check_conn.mjs MODE URL TIMEOUT_S
//   MODE "main": a server started with --timeout TIMEOUT_S --cors-origin http://allowed.example,http://two.example
//     - 70 clients (from 127.0.0.10..79) sending their headers one byte every 250 ms while /health is asked every
//       100 ms: every /health answered 200, every slow client gets a 408 JSON error and an end of file within the
//       deadline + 3 s (with a thread per connection, 64 at most, /health went unanswered and no one was cut);
//     - a body that stops short and a body that trickles: 408 within the deadline + 3 s;
//     - framing: two different Content-Length -> 400 + close, Content-Length with chunked -> 400, a non-numeric
//       Content-Length -> 400, Transfer-Encoding gzip -> 501; the same Content-Length twice is accepted;
//     - an idle keep-alive connection is closed after the timeout without a byte;
//     - CORS: the preflight of an allowed origin (204, Allow-Origin/Methods/Headers incl. the asked ones, Max-Age),
//       Access-Control-Allow-Origin on its GET and POST replies, nothing for another origin;
//     - HEAD on /, /health, /v1/models: the GET's status and headers, no body; HEAD on a POST path: 405.
//   MODE "plain": a server started with --max-connections-per-ip 4 and no --cors-origin
//     - the 5th open connection from 127.0.0.1 is closed at once while 127.0.0.2 is served; after one of the four
//       closes, 127.0.0.1 is served again;
//     - OPTIONS: 204 with Allow and no CORS header; a GET with an Origin gets no CORS header.
import net from "node:net";
import { hostPort, now, sleep } from "./util.mjs";

const [mode, url, timeoutArg] = process.argv.slice(2);
const { host, port } = hostPort(url);
const T = Number.parseFloat(timeoutArg ?? "2");
let fails = 0;
const fail = (m) => { console.error(`FAIL: ${m}`); fails++; };
const ok = (m) => console.log(`check_conn: ${m}`);

// A raw connection that records what comes back and when it ends.
function open(localAddress = "127.0.0.1") {
  return new Promise((resolve) => {
    const s = net.connect({ host, port, localAddress });
    const c = { s, data: Buffer.alloc(0), ended: false, endT: null, error: null, connected: false };
    s.on("data", (b) => { c.data = Buffer.concat([c.data, b]); });
    const end = () => { if (!c.ended) { c.ended = true; c.endT = now(); } };
    s.on("end", end);
    s.on("close", end);
    s.on("error", (e) => { c.error = e; end(); });
    s.once("connect", () => { c.connected = true; resolve(c); });
    s.once("error", () => resolve(c));
  });
}
const write = (c, b) => new Promise((r) => { if (c.ended) return r(false); c.s.write(b, (e) => r(!e)); });
async function waitEnd(c, ms) {
  const t = now();
  while (!c.ended && now() - t < ms / 1e3) await sleep(20);
  return c.ended;
}
// Sends a whole request on a fresh connection; waits for the end of the connection (or ms).
async function raw(bytes, { ms = 8000, from } = {}) {
  const c = await open(from);
  await write(c, bytes);
  await waitEnd(c, ms);
  c.s.destroy();
  return c;
}
// The first response in a buffer: { status, headers (lower-case keys), body }, or null.
function parse(buf) {
  const i = buf.indexOf("\r\n\r\n");
  if (i < 0) return null;
  const lines = buf.subarray(0, i).toString("latin1").split("\r\n");
  const m = /^HTTP\/1\.1 (\d+)/.exec(lines[0]);
  if (!m) return null;
  const headers = {};
  for (const l of lines.slice(1)) {
    const k = l.indexOf(":");
    headers[l.slice(0, k).trim().toLowerCase()] = l.slice(k + 1).trim();
  }
  return { status: Number(m[1]), headers, body: buf.subarray(i + 4) };
}
// One request on a fresh connection with Connection: close; the parsed reply (null when none came).
async function req(method, path, { headers = {}, body = null, from, ms = 8000 } = {}) {
  let h = `${method} ${path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n`;
  for (const [k, v] of Object.entries(headers)) h += `${k}: ${v}\r\n`;
  if (body !== null) h += `Content-Length: ${Buffer.byteLength(body)}\r\n`;
  const c = await raw(Buffer.from(h + "\r\n" + (body ?? "")), { ms, from });
  return parse(c.data);
}
const errCode = (r) => { try { return JSON.parse(r.body.toString()).error.code; } catch { return null; } };

async function mainChecks() {
  // ---- 70 slow-header clients while /health is asked
  const N = 70;
  const slow = await Promise.all(Array.from({ length: N }, (_, i) => open(`127.0.0.${10 + i}`)));
  const t0 = now();
  const hdr = Buffer.from("GET /health HTTP/1.1\r\nHost: x\r\nUser-Agent: " + "s".repeat(400) + "\r\n\r\n");
  let stopSlow = false;
  const sent = new Array(N).fill(0);
  const slowLoops = slow.map(async (c, i) => {
    while (!stopSlow && !c.ended && sent[i] < hdr.length) {
      await write(c, hdr.subarray(sent[i], sent[i] + 1));
      sent[i]++;
      await sleep(250);
    }
  });
  let healthOk = 0, healthBad = 0, worst = 0;
  while (now() - t0 < T + 4) {
    const t = now();
    const r = await req("GET", "/health", { ms: 10000 });
    worst = Math.max(worst, now() - t);
    if (r && r.status === 200) healthOk++;
    else healthBad++;
    await sleep(100);
  }
  stopSlow = true;
  await Promise.all(slowLoops);
  if (healthBad || healthOk < 5) fail(`/health under ${N} slow clients: ${healthOk} answered, ${healthBad} not`);
  else ok(`/health under ${N} slow-header clients: ${healthOk}/${healthOk} answered (slowest ${(1e3 * worst).toFixed(0)} ms)`);
  let cut = 0, late = 0, no408 = 0;
  for (const c of slow) {
    const r = parse(c.data);
    if (!c.ended) late++;
    else if (c.endT - t0 > T + 3) late++;
    else cut++;
    if (!r || r.status !== 408 || errCode(r) !== "request_timeout" || r.headers.connection !== "close") no408++;
    c.s.destroy();
  }
  if (late || no408) fail(`slow-header clients: ${cut} cut in time, ${late} not, ${no408} without a 408 JSON reply`);
  else ok(`${N} slow-header clients: each got a 408 (request_timeout) and was closed within ${T} s + 3`);

  // ---- a body that stops short, a body that trickles
  let c = await open();
  let t = now();
  await write(c, "POST /tokenize HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"prompt\": ");
  await waitEnd(c, (T + 6) * 1e3);
  let r = parse(c.data);
  if (!r || r.status !== 408 || errCode(r) !== "request_timeout" || !c.ended || c.endT - t > T + 3)
    fail(`a body that stops short: ${c.data.subarray(0, 120).toString()} after ${(now() - t).toFixed(1)} s`);
  else ok(`a body that stops short: 408 after ${(c.endT - t).toFixed(1)} s`);
  c.s.destroy();
  c = await open();
  t = now();
  await write(c, "POST /tokenize HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n");
  while (!c.ended && now() - t < T + 6) {
    await write(c, " ");
    await sleep(250);
  }
  r = parse(c.data);
  if (!r || r.status !== 408 || c.endT - t > T + 3) fail(`a trickling body: ${c.data.subarray(0, 120).toString()}`);
  else ok(`a trickling body: 408 after ${(c.endT - t).toFixed(1)} s`);
  c.s.destroy();
  // a browser reads a 408 only when it carries the CORS header its request was allowed (main mode: --cors-origin)
  for (const [origin, want] of [["http://allowed.example", mode === "main" ? "http://allowed.example" : undefined],
                                ["http://evil.example", undefined]]) {
    c = await open();
    await write(c, `POST /tokenize HTTP/1.1\r\nHost: x\r\nOrigin: ${origin}\r\nContent-Length: 100\r\n\r\n{"prompt": `);
    await waitEnd(c, (T + 6) * 1e3);
    r = parse(c.data);
    if (!r || r.status !== 408 || r.headers["access-control-allow-origin"] !== want)
      fail(`a body that stops short from ${origin}: ${c.data.subarray(0, 300).toString()}`);
    else ok(`a body that stops short from ${origin}: 408 ${want ? "with" : "without"} Access-Control-Allow-Origin`);
    c.s.destroy();
  }

  // ---- framing
  const body = '{"prompt": "hi"}';
  const n = Buffer.byteLength(body);
  // (a non-numeric Content-Length was already refused by libmicrohttpd: kept as a check)
  const chunked = `${n.toString(16)}\r\n${body}\r\n0\r\n\r\n`;
  const framing = [
    ["two different Content-Length", `Content-Length: ${n}\r\nContent-Length: ${n + 1}\r\n`, 400, true, body],
    ["Content-Length with chunked", `Content-Length: ${chunked.length}\r\nTransfer-Encoding: chunked\r\n`, 400, true, chunked],
    ["a non-numeric Content-Length", "Content-Length: 1x6\r\n", 400, true, body],
    ["Transfer-Encoding gzip", "Transfer-Encoding: gzip\r\n", 501, true, body],
    ["the same Content-Length twice", `Content-Length: ${n}\r\nContent-Length: ${n}\r\n`, 200, false, body],
  ];
  for (const [name, h, want, closes, b] of framing) {
    const cc = await raw(Buffer.from(`POST /tokenize HTTP/1.1\r\nHost: x\r\n${h}\r\n${b}`), { ms: 4000 });
    const rr = parse(cc.data);
    if (!rr || rr.status !== want || (closes && !cc.ended))
      fail(`framing, ${name}: want ${want}${closes ? " and a close" : ""}, got ${cc.data.subarray(0, 90).toString()}`);
    else ok(`framing, ${name}: ${want}${closes ? ", connection closed" : ""}`);
  }

  // ---- an idle keep-alive connection: closed after the timeout without a byte
  c = await open();
  await write(c, "GET /health HTTP/1.1\r\nHost: x\r\n\r\n");
  await sleep(300);
  const got = c.data.length;
  t = now();
  await waitEnd(c, (T + 6) * 1e3);
  if (!parse(c.data) || c.data.length !== got || !c.ended || c.endT - t > T + 3)
    fail(`an idle keep-alive connection: ended ${c.ended}, ${c.data.length - got} bytes after the reply`);
  else ok(`an idle keep-alive connection closed after ${(c.endT - t).toFixed(1)} s without a byte`);
  c.s.destroy();

  // ---- CORS with the flag
  const A = "http://allowed.example";
  r = await req("OPTIONS", "/v1/chat/completions", {
    headers: { Origin: A, "Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "content-type, x-stainless-os" },
  });
  const h = r?.headers ?? {};
  if (!r || r.status !== 204 || h["access-control-allow-origin"] !== A || !/POST/.test(h["access-control-allow-methods"] ?? "") ||
      !/Authorization/.test(h["access-control-allow-headers"] ?? "") || !/content-type/i.test(h["access-control-allow-headers"] ?? "") ||
      !/x-stainless-os/.test(h["access-control-allow-headers"] ?? "") || !h["access-control-max-age"])
    fail(`CORS preflight of an allowed origin: ${JSON.stringify(r && { status: r.status, h })}`);
  else ok(`CORS preflight of ${A}: 204, methods '${h["access-control-allow-methods"]}', headers '${h["access-control-allow-headers"]}'`);
  r = await req("OPTIONS", "/v1/chat/completions", { headers: { Origin: "http://two.example" } });
  if (!r || r.status !== 204 || r.headers["access-control-allow-origin"] !== "http://two.example") fail("CORS: the second origin of the list");
  r = await req("OPTIONS", "/v1/chat/completions", { headers: { Origin: "http://evil.example" } });
  if (!r || r.status !== 204 || "access-control-allow-origin" in r.headers) fail(`CORS preflight of another origin: ${JSON.stringify(r?.headers)}`);
  else ok("CORS preflight of another origin: 204 without CORS headers");
  r = await req("GET", "/health", { headers: { Origin: A } });
  const r2 = await req("POST", "/tokenize", { headers: { Origin: A }, body });
  const r3 = await req("GET", "/health", { headers: { Origin: "http://evil.example" } });
  if (r?.headers["access-control-allow-origin"] !== A || r2?.status !== 200 || r2?.headers["access-control-allow-origin"] !== A ||
      "access-control-allow-origin" in (r3?.headers ?? {}))
    fail(`CORS headers on replies: ${JSON.stringify([r?.headers, r2?.headers, r3?.headers])}`);
  else ok("Access-Control-Allow-Origin on GET and POST replies to an allowed origin, none for another");
  r = await req("OPTIONS", "/no/such/path", { headers: { Origin: A } });
  if (!r || r.status !== 404) fail(`OPTIONS on an unknown path: ${r?.status}`);

  // ---- HEAD
  for (const p of ["/", "/health", "/v1/models"]) {
    const g = await req("GET", p);
    const cc = await raw(Buffer.from(`HEAD ${p} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`));
    const hh = parse(cc.data);
    if (!hh || hh.status !== 200 || hh.body.length !== 0 || hh.headers["content-type"] !== g?.headers["content-type"] ||
        hh.headers["content-length"] !== String(g?.body.length))
      fail(`HEAD ${p}: ${cc.data.subarray(0, 200).toString()}`);
    else ok(`HEAD ${p}: 200, ${hh.headers["content-type"]}, Content-Length ${hh.headers["content-length"]}, no body`);
  }
  r = await req("HEAD", "/tokenize");
  if (!r || r.status !== 405) fail(`HEAD on a POST path: ${r?.status}`);
}

async function plainChecks() {
  // ---- the cap per client address (4)
  const four = await Promise.all([0, 1, 2, 3].map(() => open("127.0.0.1")));
  await sleep(300);
  const fifth = await open("127.0.0.1");
  await write(fifth, "GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  await waitEnd(fifth, 3000);
  const other = await req("GET", "/health", { from: "127.0.0.2" });
  if (!fifth.ended || parse(fifth.data) || !other || other.status !== 200)
    fail(`per-address cap: the 5th from 127.0.0.1 ended ${fifth.ended} with ${fifth.data.length} bytes; 127.0.0.2 got ${other?.status}`);
  else ok("per-address cap 4: the 5th connection from 127.0.0.1 closed at once, 127.0.0.2 served");
  fifth.s.destroy();
  four[0].s.destroy();
  await sleep(300);
  const again = await req("GET", "/health", { from: "127.0.0.1" });
  if (!again || again.status !== 200) fail(`per-address cap: 127.0.0.1 not served after one of its connections closed`);
  else ok("per-address cap: 127.0.0.1 served again once one of its four closed");
  for (const c of four) c.s.destroy();
  // ---- no CORS without the flag
  const r = await req("OPTIONS", "/v1/chat/completions", { headers: { Origin: "http://allowed.example" } });
  if (!r || r.status !== 204 || r.headers.allow !== "POST, OPTIONS" || Object.keys(r.headers).some((k) => k.startsWith("access-control")))
    fail(`OPTIONS without --cors-origin: ${JSON.stringify(r && { status: r.status, h: r.headers })}`);
  else ok("OPTIONS without --cors-origin: 204, Allow: POST, OPTIONS, no CORS header");
  const g = await req("GET", "/health", { headers: { Origin: "http://allowed.example" } });
  if (!g || g.status !== 200 || "access-control-allow-origin" in g.headers) fail("a GET with an Origin got CORS headers without the flag");
}

if (mode === "main") await mainChecks();
else await plainChecks();
process.exit(fails ? 1 : 0);
