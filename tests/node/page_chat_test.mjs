// The web page's chat past the context, in a real browser: headless Chromium (Debian's) over the DevTools protocol
// with Node's own WebSocket (tests/wasm/chromium.mjs), as page_test.mjs. It types TURNS messages into the Chat tab one
// after the other, at the page's settings (max tokens MAXTOK when given, else the page's default), and requires of
// every turn: a reply appears, no error is shown, and the prompt the page sent fitted the context. Once the conversation outgrows the
// context the page must drop the oldest turns: the log then shows the note, the dropped bubbles are greyed, the
// conversation the page keeps (`history`) is exactly the bubbles not greyed, and every request carried the system
// message typed into the page first, then that conversation. Then two forced failures (a wrong API
// key, refused at /tokenize; a negative temperature, refused by /v1/chat/completions) must leave no trace in the
// history and put the message back in the input box with the error shown; the next send (the restored text) works.
// Screenshots after the first and the last turn go to SHOT_FIRST and SHOT_LAST.
// usage: node --experimental-websocket page_chat_test.mjs URL CHROMIUM KEY TURNS SHOT_FIRST SHOT_LAST [MAXTOK]
import { launch } from "../wasm/chromium.mjs";

const [url, chromium, key, turnsArg, shotFirst, shotLast, maxTok] = process.argv.slice(2);
const turns = +turnsArg;
let fails = 0;
const fail = (m) => { fails++; console.error("FAIL: page chat: " + m); };
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const t00 = Date.now();

const { js, until, navigate, screenshot: shoot, close } = await launch(chromium, { width: 1000, height: 760 });

// Things a support-desk user might say: different lengths, so the drops fall at different turns.
const lines = ["Hello, I was charged twice for my order.", "The order number is 4417-B, placed on Monday.",
  "Can you refund the second charge?", "I also never received the shipping confirmation email.",
  "Is the package going to arrive before Friday? I need it for a birthday.", "Thanks. What about the duplicate charge?",
  "My bank says the payment is still pending.", "Could you send me a written confirmation of the refund?",
  "The delivery address should be 12 Harbour Street, not 21.", "Please cancel the express shipping upgrade."];
const system = "You are the support desk of an online shop. Answer briefly.";
const message = (t) => `${lines[(t - 1) % lines.length]} (turn ${t})`;

// One send, as a user does it: type into the box, click Send, wait until the page is idle again (Stop disabled).
// Works on any version of the page: an error is whatever the page shows instead of "N tokens in".
async function turn(text) {
  await js(`(() => { const i = document.getElementById("input"); if (${JSON.stringify(text)} !== null) i.value = ${JSON.stringify(text)};
    document.getElementById("send").click(); return true; })()`);
  return until(`(() => { if (!document.getElementById("stop").disabled) return null;
    const s = document.getElementById("cstatus").textContent, e = document.getElementById("cerr");
    const err = (e && e.textContent) || (s.includes("tokens in") ? "" : s);
    const bubbles = [...document.querySelectorAll("#log .msg")];
    const last = bubbles.length ? bubbles[bubbles.length - 1].querySelector(".txt").textContent : "";
    return (err || s.includes("tokens in")) ? { s, err, last, input: document.getElementById("input").value } : null; })()`,
  "the reply");
}
// The conversation the page keeps and the bubbles it shows, for the invariants below.
const state = () => js(`({ history: typeof history === "object" && Array.isArray(history) ? history : null,
  sent: typeof sent === "object" && Array.isArray(sent) ? sent : null,
  live: [...document.querySelectorAll("#log .msg:not(.gone)")].map((d) => d.querySelector(".txt").textContent),
  bubbles: document.querySelectorAll("#log .msg").length, notes: [...document.querySelectorAll("#log .note")].length })`);

try {
  await navigate(url);
  await until(`document.readyState === "complete"`, "the page");
  await js(`localStorage.setItem("typedecide-key", ${JSON.stringify(key)}); location.reload(); true`);
  await sleep(200);
  await until(`document.readyState === "complete" && document.getElementById("model").textContent.includes("positions")`,
    "the page and /v1/models");
  const ctx = +(await js(`document.getElementById("model").textContent.match(/(\\d+) positions/)[1]`));
  await js(`document.getElementById("tab-chat").click(); ${maxTok ? `document.getElementById("maxtok").value = "${maxTok}";` : ""}
    const sys = document.getElementById("system"); if (sys) sys.value = ${JSON.stringify(system)}; true`);
  const maxTokens = +(await js(`document.getElementById("maxtok").value`));
  let firstDrop = 0, prevNotes = 0, maxPrompt = 0, answered = 0;
  for (let t = 1; t <= turns; t++) {
    const r = await turn(message(t));
    if (r.err) { fail(`turn ${t}: the page shows ${JSON.stringify(r.err)}`); break; }
    if (!r.last.trim()) fail(`turn ${t}: the reply is empty (${r.s})`);
    answered++;
    const p = r.s.match(/the prompt was (\d+) of (\d+) positions/);
    if (p) maxPrompt = Math.max(maxPrompt, +p[1]);
    if (p && +p[1] + maxTokens > ctx) fail(`turn ${t}: the prompt was ${p[1]} tokens, + ${maxTokens} > ${ctx}`);
    const st = await state();
    if (!st.history) { fail("the page keeps no `history` array"); break; }
    // the history is exactly the bubbles that are not greyed, in order, and ends with this turn
    const kept = st.history.map((m) => m.content);
    if (JSON.stringify(kept) !== JSON.stringify(st.live)) fail(`turn ${t}: history ${JSON.stringify(kept).slice(0, 200)} != live bubbles ${JSON.stringify(st.live).slice(0, 200)}`);
    if (kept[kept.length - 2] !== message(t)) fail(`turn ${t}: the history does not end with this turn`);
    // what the page sent: the system message first, then exactly the history as it now stands, less the reply
    if (!st.sent || st.sent[0].role !== "system" || st.sent[0].content !== system ||
        JSON.stringify(st.sent.slice(1).map((m) => m.content)) !== JSON.stringify(kept.slice(0, -1)))
      fail(`turn ${t}: the request's messages ${JSON.stringify(st.sent).slice(0, 200)} are not the system message + the history`);
    if (st.notes > prevNotes && !firstDrop) firstDrop = t;
    if (st.bubbles - st.live.length > 0 && st.notes === 0) fail(`turn ${t}: turns were dropped and no note says so`);
    prevNotes = st.notes;
    if (t === 1) await shoot(shotFirst);
  }
  // the last screenshot shows the latest drop: its note, the greyed turns above, the turns the model sees below
  await js(`(() => { const n = [...document.querySelectorAll("#log .note")].pop(), log = document.getElementById("log");
    if (n) log.scrollTop = n.offsetTop - log.offsetTop - 60; return true; })()`);
  await shoot(shotLast);
  const st = await state();
  if (fails === 0 && turns >= 10 && !firstDrop) fail(`${turns} turns and the page never dropped a turn: nothing was tested`);
  console.log(`page_chat_test: ${answered} of ${turns} turns answered (context ${ctx}, max tokens ${maxTokens}, largest prompt ` +
    `${maxPrompt}); the first drop at turn ${firstDrop}, ${st.notes} notes, ${st.history ? st.history.length : "?"} ` +
    `messages kept of ${st.bubbles} shown; ${((Date.now() - t00) / 1000).toFixed(1)} s`);

  // forced failures: nothing enters the history, the text goes back to the box, the error is shown
  const failures = [
    ["a wrong API key", `document.getElementById("key").value = "wrong-key"; true`, `document.getElementById("key").value = ${JSON.stringify(key)}; true`],
    ["a negative temperature", `document.getElementById("temp").value = "-3"; true`, `document.getElementById("temp").value = ""; true`],
  ];
  for (const [what, breakIt, fixIt] of failures) {
    const before = await state(), text = `this turn must fail: ${what}`;
    await js(breakIt);
    const r = await turn(text);
    const after = await state();
    if (!r.err) fail(`${what}: no error shown (${r.s})`);
    if (JSON.stringify(after.history) !== JSON.stringify(before.history)) fail(`${what}: the failed turn entered the history`);
    if (after.bubbles !== before.bubbles) fail(`${what}: the log has ${after.bubbles} bubbles, ${before.bubbles} before`);
    if (r.input !== text) fail(`${what}: the input box holds ${JSON.stringify(r.input)}, not the message`);
    await js(fixIt);
    const again = await turn(null); /* the restored text, sent as it is */
    const last = await state();
    if (again.err || last.history[last.history.length - 2].content !== text)
      fail(`${what}: resending the restored message: ${JSON.stringify(again.err || again.s)}`);
    else console.log(`page_chat_test: ${what}: refused (${JSON.stringify(r.err)}), nothing kept, the text back in the box; resent and answered`);
  }
} catch (e) {
  fail(e.message);
}
await close();
process.exit(fails ? 1 : 0);
