// The bounded queue: a server started with --parallel 1 --queue 0 admits one request at a time; concurrent ones get
// 503 with Retry-After and code queue_full, and every admitted one completes. usage: node check_queue.mjs URL
import { hostPort, pyDumps, request } from "./util.mjs";

const { host, port } = hostPort(process.argv[2]);
const crit = Array.from({ length: 300 }, (_, i) => ({ id: `c${i}`, question: `Is item ${i} on the bill?`, options: [
  { id: "y", description: "Yes" }, { id: "n", description: "No" }, { id: "m", description: `Maybe, item ${i} is unclear` }] }));
const results = [];

async function one(k) {
  const r = await request(host, port, "POST", "/v1/decide",
    { body: pyDumps({ evidence: `Bill ${k}: three items, one charged twice.`, criteria: crit }), timeout: 300 });
  results.push([r.status, r.headers["retry-after"] ?? null, r.text]);
}

await Promise.all([0, 1, 2, 3].map(one));
const ok = results.filter((r) => r[0] === 200);
const busy = results.filter((r) => r[0] === 503);
let fails = 0;
if (ok.length + busy.length !== 4 || !ok.length || !busy.length) {
  console.error("FAIL: queue: statuses [" + results.map((r) => r[0]).join(", ") + "]");
  fails += 1;
}
for (const [, ra, text] of busy) {
  const e = JSON.parse(text).error;
  if (ra !== "1" || e.code !== "queue_full") {
    console.error(`FAIL: queue: 503 without Retry-After or code: ${ra === null ? "None" : ra} ${text}`);
    fails += 1;
  }
}
for (const [, , text] of ok) {
  if (JSON.parse(text).decisions.length !== 300) {
    console.error("FAIL: queue: an admitted request lost decisions");
    fails += 1;
  }
}
console.log(`check_queue: 4 concurrent requests, --parallel 1 --queue 0: ${ok.length} answered, ${busy.length} refused with 503`);
process.exit(fails ? 1 : 0);
