// OpenAI semantics of `typedecide serve` (issue 46, items 1-4), over raw HTTP (Node's fetch), against a running server
// without an API key (started by tests/test_serve_openai.sh):
//  1. a stream ends with a usage chunk (choices: []) only when stream_options.include_usage is true (every other
//     chunk carries a choice, so the quickstart loop's chunk.choices[0].delta never throws);
//  2. without a seed each request draws a fresh one, reported as "seed" (and replaying it gives the same tokens);
//     a given seed is reported as given; n choices (1..16), each choice k equal to the request alone with seed + k,
//     streamed and unstreamed, usage summed over the choices;
//  3. logit_bias forces (+100) and bans (-100) tokens, bad biases are 400s naming the key; response_format other
//     than text, best_of != 1, suffix and unknown members are 400s naming them; GET /v1/models/{id} (404 for another);
//  4. /v1/decide refuses an empty question, a criterion of fewer than two options, repeated option ids (400, param).
// usage: node check_openai.mjs URL MODEL_NAME KEY
const [url, model, key] = process.argv.slice(2);
const auth = { authorization: "Bearer " + key };
let fails = 0, checks = 0;
const fail = (m) => { fails++; console.error("FAIL: check_openai: " + m); };
const ok = (cond, m) => { checks++; if (!cond) fail(m()); };
const show = (x) => String(JSON.stringify(x)).slice(0, 400);
// Runs one part; an exception (a reply without the members read) is a failure of that part, and the next part runs.
async function part(name, fn) {
  try {
    await fn();
  } catch (e) {
    fail(`${name}: ${e?.stack ?? e}`);
  }
}

async function post(path, body) {
  const r = await fetch(url + path, { method: "POST", headers: { "content-type": "application/json", ...auth },
    body: JSON.stringify(body) });
  const text = await r.text();
  let j = null;
  try { j = JSON.parse(text); } catch { /* not JSON */ }
  return [r.status, j, text];
}

// A streamed request: the parsed chunks (the [DONE] line not included) and whether [DONE] came last.
async function sse(path, body) {
  const r = await fetch(url + path, { method: "POST", headers: { "content-type": "application/json", ...auth },
    body: JSON.stringify({ ...body, stream: true }) });
  const text = await r.text();
  const lines = text.split("\n").filter((l) => l.startsWith("data: ")).map((l) => l.slice(6));
  const done = lines.length > 0 && lines[lines.length - 1] === "[DONE]";
  return [r.status, lines.filter((l) => l !== "[DONE]").map((l) => JSON.parse(l)), done];
}

async function expectError(what, status, path, body, param, code = undefined) {
  const [st, j, text] = await post(path, body);
  ok(st === status, () => `${what}: status ${st}, expected ${status}: ${text.slice(0, 300)}`);
  const e = j?.error;
  ok(e && typeof e.message === "string" && "type" in e && "param" in e && "code" in e,
    () => `${what}: not an OpenAI error body: ${text.slice(0, 300)}`);
  if (e) {
    ok(e.param === param, () => `${what}: param ${JSON.stringify(e.param)}, expected ${JSON.stringify(param)} (${e.message})`);
    if (code !== undefined) ok(e.code === code, () => `${what}: code ${JSON.stringify(e.code)}, expected ${code}`);
  }
}

const messages = [{ role: "user", content: "Write one sentence about invoices." }];
const chatBase = { model, messages, max_tokens: 12, chat_template_kwargs: { enable_thinking: false } };

// ---- 1. the usage chunk only when asked ---------------------------------------------------------------------------
await part("1 (usage chunk)", async () => {
  for (const [path, base] of [["/v1/chat/completions", chatBase], ["/v1/completions", { model, prompt: "The bill", max_tokens: 8 }]]) {
    let [st, chunks, done] = await sse(path, { ...base, temperature: 0 });
    ok(st === 200 && done && chunks.length >= 2, () => `${path} stream: ${st}, ${chunks.length} chunks, [DONE] ${done}`);
    ok(chunks.every((c) => Array.isArray(c.choices) && c.choices.length === 1 && !("usage" in c)),
      () => `${path} stream without stream_options: a chunk without a choice (or with usage): ` +
        show(chunks.find((c) => !(c.choices?.length === 1) || "usage" in c)));
    ok(chunks.filter((c) => c.choices[0]?.finish_reason).length === 1, () => `${path}: not one finish_reason`);
    [st, chunks, done] = await sse(path, { ...base, temperature: 0, stream_options: { include_usage: false } });
    ok(st === 200 && done && chunks.every((c) => c.choices?.length === 1),
      () => `${path} stream with include_usage false: a chunk without a choice`);
    [st, chunks, done] = await sse(path, { ...base, temperature: 0, stream_options: { include_usage: true } });
    const last = chunks[chunks.length - 1];
    ok(st === 200 && done && last && Array.isArray(last.choices) && last.choices.length === 0 && last.usage &&
      last.usage.completion_tokens >= 1 && last.usage.total_tokens === last.usage.prompt_tokens + last.usage.completion_tokens,
      () => `${path} stream with include_usage: the last chunk is not the usage: ${show(last)}`);
    ok(chunks.slice(0, -1).every((c) => c.choices.length === 1 && c.usage === null),
      () => `${path} stream with include_usage: the other chunks must carry a choice and usage null`);
  }
  console.log("check_openai: streams end with a usage chunk only when stream_options.include_usage asks");
});

// ---- 2. seeds and n choices ----------------------------------------------------------------------------------------
await part("2 (seeds and n)", async () => {
  const cbase = { model, prompt: "The customer wrote that", max_tokens: 16, temperature: 1.5, ignore_eos: true };
  const free = [];
  for (let i = 0; i < 3; i++) {
    const [st, j] = await post("/v1/completions", cbase);
    ok(st === 200 && Number.isSafeInteger(j?.seed) && j.seed >= 0 && j.sampler?.seed === j.seed,
      () => `a request without a seed does not report the seed it used: ${show(j)}`);
    free.push(j);
  }
  ok(new Set(free.map((j) => j.seed)).size === 3, () => `three requests without a seed drew seeds ${free.map((j) => j.seed)}`);
  ok(new Set(free.map((j) => JSON.stringify(j.choices[0].token_ids))).size > 1,
    () => `three requests without a seed at temperature 1.5 gave the same tokens: ${show(free[0].choices[0])}`);
  {
    const [st, j] = await post("/v1/completions", { ...cbase, seed: free[1].seed }); // replay with the reported seed
    ok(st === 200 && j.seed === free[1].seed && JSON.stringify(j.choices[0].token_ids) === JSON.stringify(free[1].choices[0].token_ids),
      () => `replaying the reported seed ${free[1].seed} gave other tokens: ${show(j?.choices)}`);
  }
  const seeded = { ...cbase, seed: 4242 };
  const alone = [];
  for (let k = 0; k < 4; k++) {
    const [st, j] = await post("/v1/completions", { ...seeded, seed: 4242 + k });
    ok(st === 200 && j.seed === 4242 + k, () => `seed ${4242 + k}: ${st} ${show(j)}`);
    alone.push(j?.choices?.[0]);
  }
  {
    const [st, j] = await post("/v1/completions", { ...seeded, n: 4, logprobs: 2 });
    ok(st === 200 && j.choices?.length === 4 && j.seed === 4242, () => `n = 4: ${st} ${show(j)}`);
    const ch = j?.choices ?? [];
    ok(ch.map((c) => c.index).join() === "0,1,2,3", () => `n = 4: indexes ${ch.map((c) => c.index)}`);
    for (let k = 0; k < ch.length; k++)
      ok(alone[k] && JSON.stringify(ch[k].token_ids) === JSON.stringify(alone[k].token_ids) && ch[k].text === alone[k].text &&
        ch[k].finish_reason === "length" && ch[k].logprobs?.tokens?.length === 16,
        () => `n = 4: choice ${k} is not the request alone with seed ${4242 + k}: ${show(ch[k])} vs ${show(alone[k])}`);
    ok(new Set(ch.map((c) => c.text)).size > 1, () => `n = 4 at temperature 1.5: every choice the same text`);
    ok(j?.usage?.completion_tokens === 64 && j.usage.prompt_tokens === free[0].usage.prompt_tokens,
      () => `n = 4: usage ${show(j?.usage)} (want 64 completion tokens, the prompt counted once)`);
    const [st2, chunks, done] = await sse("/v1/completions", { ...seeded, n: 4, stream_options: { include_usage: true } });
    const texts = ["", "", "", ""], fins = [null, null, null, null];
    for (const c of chunks) for (const x of c.choices) { texts[x.index] += x.text; if (x.finish_reason) fins[x.index] = x.finish_reason; }
    ok(st2 === 200 && done && texts.every((t, k) => t === ch[k]?.text) && fins.every((f) => f === "length"),
      () => `n = 4 streamed: texts ${JSON.stringify(texts)} finish ${fins} vs ${JSON.stringify(ch.map((c) => c.text))}`);
    ok(chunks[chunks.length - 1]?.usage?.completion_tokens === 64, () => `n = 4 streamed: usage ${show(chunks[chunks.length - 1])}`);
    const [st3, chat] = await post("/v1/chat/completions", { ...chatBase, n: 3, temperature: 1.2, seed: 9 });
    ok(st3 === 200 && chat.choices?.length === 3 && chat.choices.every((c, k) => c.index === k && typeof c.message?.content === "string"),
      () => `chat n = 3: ${show(chat)}`);
    const [st4, cchunks, cdone] = await sse("/v1/chat/completions", { ...chatBase, n: 3, temperature: 1.2, seed: 9 });
    const ctexts = ["", "", ""];
    for (const c of cchunks) for (const x of c.choices) ctexts[x.index] += x.delta?.content ?? "";
    ok(st4 === 200 && cdone && ctexts.every((t, k) => t === chat?.choices?.[k]?.message?.content),
      () => `chat n = 3 streamed ${JSON.stringify(ctexts)} != plain ${JSON.stringify(chat?.choices?.map((c) => c.message.content))}`);
  }
  await expectError("n = 17", 400, "/v1/completions", { ...cbase, n: 17 }, "n");
  await expectError("n = 0", 400, "/v1/completions", { ...cbase, n: 0 }, "n");
  console.log("check_openai: fresh seeds reported and replayable; n = 4 choices each equal to the request alone with seed + k " +
    "(streamed and plain, chat and completions)");
});

// ---- 3. logit_bias, refused parameters, /v1/models/{id} --------------------------------------------------------------
await part("3 (logit_bias, refusals, models/{id})", async () => {
  {
    const greedy = { model, prompt: "The invoice shows", max_tokens: 8, temperature: 0, ignore_eos: true };
    const [, g] = await post("/v1/completions", greedy);
    const first = g.choices[0].token_ids[0];
    const [st, b] = await post("/v1/completions", { ...greedy, logit_bias: { [first]: -100 } });
    ok(st === 200 && b.choices[0].token_ids.length === 8 && !b.choices[0].token_ids.includes(first),
      () => `logit_bias -100 on token ${first} (greedy's first): ${show(b)}`);
    const [st2, f] = await post("/v1/completions", { ...greedy, temperature: 1, logit_bias: { "42": 100 } });
    ok(st2 === 200 && f.choices[0].token_ids.length === 8 && f.choices[0].token_ids.every((t) => t === 42),
      () => `logit_bias +100 on token 42: ${show(f)}`);
    const [st3, fn] = await post("/v1/completions", { ...greedy, temperature: 1, n: 3, logit_bias: { "42": 100 } });
    ok(st3 === 200 && fn.choices.every((c) => c.token_ids.every((t) => t === 42)), () => `logit_bias with n = 3: ${show(fn)}`);
  }
  await expectError("logit_bias key not an id", 400, "/v1/completions", { model, prompt: "x", logit_bias: { abc: 1 } }, "logit_bias");
  await expectError("logit_bias id past the vocabulary", 400, "/v1/completions", { model, prompt: "x", logit_bias: { "99999999": 1 } }, "logit_bias");
  await expectError("logit_bias of 101", 400, "/v1/completions", { model, prompt: "x", logit_bias: { "5": 101 } }, "logit_bias.5");
  await expectError("logit_bias not an object", 400, "/v1/chat/completions", { ...chatBase, logit_bias: [1] }, "logit_bias");
  await expectError("response_format json_object", 400, "/v1/chat/completions", { ...chatBase, response_format: { type: "json_object" } },
    "response_format.type", "unsupported_parameter");
  await expectError("response_format json_schema", 400, "/v1/chat/completions",
    { ...chatBase, response_format: { type: "json_schema", json_schema: { name: "x", schema: {} } } }, "response_format.type");
  {
    const [st] = await post("/v1/chat/completions", { ...chatBase, max_tokens: 2, response_format: { type: "text" } });
    ok(st === 200, () => `response_format text: ${st}`);
    const [st2] = await post("/v1/completions", { model, prompt: "x", max_tokens: 2, best_of: 1 });
    ok(st2 === 200, () => `best_of 1: ${st2}`);
  }
  await expectError("best_of 2", 400, "/v1/completions", { model, prompt: "x", best_of: 2 }, "best_of", "unsupported_parameter");
  await expectError("suffix", 400, "/v1/completions", { model, prompt: "x", suffix: "end" }, "suffix", "unsupported_parameter");
  await expectError("an unknown member", 400, "/v1/chat/completions", { ...chatBase, frobnicate: true }, "frobnicate", "unknown_parameter");
  await expectError("logprobs on chat", 400, "/v1/chat/completions", { ...chatBase, logprobs: true }, "logprobs");
  await expectError("top_logprobs on chat", 400, "/v1/chat/completions", { ...chatBase, top_logprobs: 2 }, "top_logprobs");
  {
    const r = await fetch(url + "/v1/models/" + model, { headers: auth });
    const j = await r.json();
    ok(r.status === 200 && j.id === model && j.object === "model" && typeof j.created === "number" && j.owned_by,
      () => `GET /v1/models/${model}: ${r.status} ${show(j)}`);
    const r2 = await fetch(url + "/v1/models/no-such-model", { headers: auth });
    const e = (await r2.json())?.error;
    ok(r2.status === 404 && e && e.code === "model_not_found" && e.message.includes("no-such-model") && "param" in e && "type" in e,
      () => `GET /v1/models/no-such-model: ${r2.status} ${show(e)}`);
  }
  console.log("check_openai: logit_bias forces and bans tokens; response_format, best_of, suffix, unknown members refused " +
    "by name; GET /v1/models/{id}");
});

// ---- 4. /v1/decide refuses what it cannot decide ----------------------------------------------------------------------
await part("4 (decide refusals)", async () => {
  const opts = [{ id: "y", description: "Yes" }, { id: "n", description: "No" }];
  await expectError("decide: an empty question", 400, "/v1/decide",
    { evidence: "x", criteria: [{ id: "a", question: "Paid?", options: opts }, { id: "b", question: "  ", options: opts }] },
    "criteria[1].question");
  await expectError("decide: one option", 400, "/v1/decide",
    { evidence: "x", criteria: [{ id: "a", question: "Paid?", options: [opts[0]] }] }, "criteria[0].options");
  await expectError("decide: repeated option ids", 400, "/v1/decide",
    { evidence: "x", criteria: [{ id: "a", question: "Paid?", options: [opts[0], opts[1], { id: "y", description: "Maybe" }] }] },
    "criteria[0].options[2].id");
  await expectError("decide: an empty question (JSONL criteria)", 400, "/v1/decide",
    { evidence: "x", criteria: JSON.stringify({ id: "a", question: "", options: opts }) + "\n" }, "criteria[0].question");
  await expectError("decide: an unknown member", 400, "/v1/decide",
    { evidence: "x", criteria: [{ id: "a", question: "Paid?", options: opts }], debias: "cyclic" }, "debias");
  console.log("check_openai: /v1/decide refuses an empty question, one option, repeated option ids (400 naming the field)");
});

console.log(`check_openai: ${checks - fails}/${checks} checks passed`);
process.exit(fails ? 1 : 0);
