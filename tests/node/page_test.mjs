// The web page of `typedecide serve` in a real browser: headless Chromium (Debian's) driven over the DevTools
// protocol with Node's own WebSocket (tests/wasm/chromium.mjs, the launcher every browser test shares). It loads `/`,
// fills the page's criterion editors with the example evidence and criteria, clicks Decide, and reads the rendered
// answers and probability bars from the DOM: they must equal `typedecide decide`'s lines (given as a file). Then the
// Chat tab: a message is sent and the streamed reply must appear. A screenshot of the decisions is written to SHOT.
// usage: node --experimental-websocket page_test.mjs URL CHROMIUM EVIDENCE CRITERIA_JSONL DECIDE_OUTPUT SHOT
import { readFileSync } from "node:fs";
import { launch } from "../wasm/chromium.mjs";

const [url, chromium, evPath, critPath, cliPath, shot] = process.argv.slice(2);
let fails = 0;
const fail = (m) => { fails++; console.error("FAIL: page: " + m); };

const { js, until, navigate, screenshot, close } = await launch(chromium, { width: 1000, height: 760 });

try {
  await navigate(url);
  await until(`document.readyState === "complete" && document.getElementById("model").textContent.includes("positions")`,
    "the page and /v1/models");
  // the example, typed into the page's own editors (one per criterion)
  const evidence = readFileSync(evPath, "utf8");
  const criteria = readFileSync(critPath, "utf8").split("\n").filter((l) => l.trim()).map((l) => JSON.parse(l));
  await js(`(() => {
    document.getElementById("evidence").value = ${JSON.stringify(evidence)};
    document.getElementById("criteria").innerHTML = "";
    for (const c of ${JSON.stringify(criteria)}) addCriterion(c);
    document.getElementById("run").click();
    return true; })()`);
  await until(`document.body.dataset.decided === "1" || document.body.dataset.decideError`, "the decisions");
  const err = await js(`document.body.dataset.decideError || ""`);
  if (err) throw new Error("the page reports: " + err);
  const shown = await js(`[...document.querySelectorAll("tr.decision")].map((tr) => ({ id: tr.dataset.id,
    answer: tr.dataset.answer, text: tr.querySelector(".answer").textContent,
    options: [...tr.querySelectorAll(".opt")].map((o) => o.dataset.option),
    probs: [...tr.querySelectorAll(".opt")].map((o) => +o.dataset.prob),
    bars: [...tr.querySelectorAll(".opt .fill")].map((f) => parseFloat(f.style.width)) }))`);
  const cli = readFileSync(cliPath, "utf8").split("\n").filter((l) => l.trim()).map((l) => JSON.parse(l));
  if (shown.length !== cli.length) fail(`${shown.length} rendered decisions, decide printed ${cli.length}`);
  for (let i = 0; i < Math.min(shown.length, cli.length); i++) {
    const s = shown[i], c = cli[i];
    if (s.id !== c.id || s.answer !== c.answer || JSON.stringify(s.options) !== JSON.stringify(c.options) ||
        JSON.stringify(s.probs) !== JSON.stringify(c.probs))
      fail(`criterion ${i}: page ${JSON.stringify(s)} != decide ${JSON.stringify(c)}`);
    s.bars.forEach((b, k) => { if (Math.abs(b - 100 * c.probs[k]) > 0.051) fail(`criterion ${c.id}: bar ${k} is ${b}%`); });
  }
  const status = await js(`document.getElementById("dstatus").textContent`);
  await js(`document.getElementById("dstatus").scrollIntoView(); window.scrollBy(0, -60); true`);
  await screenshot(shot);
  console.log(`page_test: ${shown.length} decisions rendered as typedecide decide printed them (${shown.map((s) => s.id + "=" + s.answer).join(", ")}); ${status}`);

  // the chat tab: a streamed reply appears
  await js(`document.getElementById("tab-chat").click(); document.getElementById("maxtok").value = "24";
    document.getElementById("temp").value = "0"; document.getElementById("input").value = "Hello, I was charged twice.";
    document.getElementById("send").click(); true`);
  const chat = await until(`(() => { const e = document.getElementById("cerr"), s = (e && e.textContent) || document.getElementById("cstatus").textContent;
    const t = [...document.querySelectorAll(".msg .txt")].pop().textContent;
    return s.includes("tokens in") || (s && !s.includes("tokens")) ? { s, t } : null; })()`, "the chat reply");
  if (!chat.s.includes("tokens in") || !chat.t.length) fail(`chat: status ${JSON.stringify(chat.s)}, reply ${JSON.stringify(chat.t)}`);
  else console.log(`page_test: chat tab streamed a reply (${chat.s})`);
} catch (e) {
  fail(e.message);
}
await close();
process.exit(fails ? 1 : 0);
