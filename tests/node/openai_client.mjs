// The official `openai` npm client against `typedecide serve` (started by tests/test_serve.sh and
// tests/test_serve_openai.sh): models.list and models.retrieve (NotFoundError for another id), a chat completion, a
// streamed one (same text as the plain one at temperature 0) read by the README's quickstart loop and by its
// unguarded form `chunk.choices[0].delta.content` (neither may throw: no chunk without a choice unless
// stream_options.include_usage asks), completions with logprobs and echo, n = 4 choices, logit_bias (a banned token
// never comes, a forced one is every token), and the client's error types for bad requests.
// usage: node openai_client.mjs BASE_URL KEY MODEL
import OpenAI from "openai";

const [baseURL, apiKey, model] = process.argv.slice(2);
const client = new OpenAI({ baseURL: baseURL + "/v1", apiKey, maxRetries: 0, timeout: 120000 });
let fails = 0;
const fail = (m) => { fails++; console.error("FAIL: openai client: " + m); };

const models = await client.models.list();
const ids = [];
for await (const m of models) ids.push(m.id);
if (ids.length !== 1 || ids[0] !== model) fail(`models.list: ${JSON.stringify(ids)}`);

const got = await client.models.retrieve(model);
if (got.id !== model || got.object !== "model") fail(`models.retrieve: ${JSON.stringify(got)}`);
try {
  await client.models.retrieve("no-such-model");
  fail("models.retrieve of an unknown id succeeded");
} catch (e) {
  if (!(e instanceof OpenAI.NotFoundError) || e.code !== "model_not_found") fail(`models.retrieve of an unknown id: ${e}`);
}

const messages = [{ role: "system", content: "You answer support tickets." }, { role: "user", content: "I was charged twice." }];
const plain = await client.chat.completions.create({ model, messages, max_tokens: 24, temperature: 0,
  chat_template_kwargs: { enable_thinking: false } });
const text = plain.choices[0].message.content;
if (typeof text !== "string" || !text.length || !["stop", "length"].includes(plain.choices[0].finish_reason))
  fail(`chat: ${JSON.stringify(plain)}`);
if (plain.usage.completion_tokens < 1 || plain.usage.prompt_tokens < 10) fail(`chat usage: ${JSON.stringify(plain.usage)}`);

const stream = await client.chat.completions.create({ model, messages, max_tokens: 24, temperature: 0, stream: true,
  stream_options: { include_usage: true }, chat_template_kwargs: { enable_thinking: false } });
let streamed = "", finish = null, usage = null, chunks = 0;
for await (const c of stream) {
  chunks++;
  if (c.usage) usage = c.usage;
  for (const ch of c.choices) {
    if (ch.delta?.content) streamed += ch.delta.content;
    if (ch.finish_reason) finish = ch.finish_reason;
  }
}
if (streamed !== text) fail(`streamed text ${JSON.stringify(streamed)} != plain ${JSON.stringify(text)}`);
if (finish !== plain.choices[0].finish_reason) fail(`stream finish_reason ${finish}`);
if (!usage || usage.completion_tokens !== plain.usage.completion_tokens) fail(`stream usage ${JSON.stringify(usage)}`);

// the quickstart loop, as the client's README shows it (no stream_options): it prints the reply
const quick = await client.chat.completions.create({ model, messages, max_tokens: 24, temperature: 0, stream: true,
  chat_template_kwargs: { enable_thinking: false } });
let quickText = "";
try {
  for await (const chunk of quick) {
    process.stdout.write(chunk.choices[0]?.delta?.content || "");
    quickText += chunk.choices[0]?.delta?.content || "";
  }
  process.stdout.write("\n");
} catch (e) {
  fail(`the quickstart loop threw: ${e}`);
}
if (quickText !== text) fail(`quickstart loop text ${JSON.stringify(quickText)} != plain ${JSON.stringify(text)}`);
// ... and its unguarded form, which throws on a chunk without choices
const bare = await client.chat.completions.create({ model, messages, max_tokens: 24, temperature: 0, stream: true,
  chat_template_kwargs: { enable_thinking: false } });
let bareText = "";
try {
  for await (const chunk of bare) bareText += chunk.choices[0].delta.content || "";
} catch (e) {
  fail(`the unguarded loop (chunk.choices[0].delta.content) threw: ${e}`);
}
if (bareText !== text) fail(`unguarded loop text ${JSON.stringify(bareText)} != plain ${JSON.stringify(text)}`);

// n = 4: four choices, indexes 0..3, each finished; streamed, each index gets its finish_reason
const four = await client.chat.completions.create({ model, messages, max_tokens: 12, temperature: 1, n: 4,
  chat_template_kwargs: { enable_thinking: false } });
if (four.choices.length !== 4 || four.choices.map((c) => c.index).join() !== "0,1,2,3" ||
    !four.choices.every((c) => ["stop", "length"].includes(c.finish_reason) && typeof c.message.content === "string"))
  fail(`n = 4: ${JSON.stringify(four.choices).slice(0, 600)}`);
const fourStream = await client.chat.completions.create({ model, messages, max_tokens: 12, temperature: 1, n: 4,
  stream: true, chat_template_kwargs: { enable_thinking: false } });
const fourFinish = new Map();
for await (const c of fourStream) for (const ch of c.choices) if (ch.finish_reason) fourFinish.set(ch.index, ch.finish_reason);
if ([...fourFinish.keys()].sort().join() !== "0,1,2,3") fail(`n = 4 streamed: finished indexes ${[...fourFinish.keys()]}`);

// logit_bias: greedy's first token banned never comes; a token forced at +100 is every token
const greedy = await client.completions.create({ model, prompt: "The invoice shows", max_tokens: 8, temperature: 0,
  logprobs: 0 });
const firstTok = greedy.choices[0].token_ids?.[0];
const banned = await client.completions.create({ model, prompt: "The invoice shows", max_tokens: 8, temperature: 0,
  logit_bias: { [firstTok]: -100 } });
if (firstTok === undefined || banned.choices[0].token_ids.includes(firstTok))
  fail(`logit_bias -100 on ${firstTok}: ${JSON.stringify(banned.choices[0])}`);
const forced = await client.completions.create({ model, prompt: "The invoice shows", max_tokens: 8, temperature: 1,
  logit_bias: { "42": 100 }, logprobs: 0 });
if (forced.choices[0].token_ids.length !== 8 || !forced.choices[0].token_ids.every((t) => t === 42) ||
    new Set(forced.choices[0].logprobs.tokens).size !== 1)
  fail(`logit_bias +100 on 42: ${JSON.stringify(forced.choices[0]).slice(0, 400)}`);

const comp = await client.completions.create({ model, prompt: "The invoice shows", max_tokens: 6, temperature: 0,
  logprobs: 3, echo: true });
const lp = comp.choices[0].logprobs;
if (!lp || lp.tokens.length !== comp.usage.prompt_tokens + comp.usage.completion_tokens || lp.token_logprobs[0] !== null ||
    lp.token_logprobs.slice(1).some((x) => typeof x !== "number" || x > 0) || !comp.choices[0].text.startsWith("The invoice shows"))
  fail(`completions logprobs/echo: ${JSON.stringify(comp).slice(0, 600)}`);
for (let i = 1; i < lp.tokens.length; i++) {
  const top = lp.top_logprobs[i], best = Math.max(...Object.values(top));
  if (lp.token_logprobs[i] > best + 1e-6) fail(`token ${i}: logprob above its top alternatives`);
}

try {
  await client.chat.completions.create({ model: "no-such-model", messages, max_tokens: 4 });
  fail("an unknown model was accepted");
} catch (e) {
  if (!(e instanceof OpenAI.NotFoundError) || e.code !== "model_not_found") fail(`unknown model: ${e}`);
}
try {
  await client.chat.completions.create({ model, messages, max_tokens: 4, response_format: { type: "json_object" } });
  fail("response_format json_object was accepted");
} catch (e) {
  if (!(e instanceof OpenAI.BadRequestError) || e.param !== "response_format.type") fail(`response_format: ${e}`);
}
try {
  await client.completions.create({ model, prompt: "x", max_tokens: -3 });
  fail("negative max_tokens was accepted");
} catch (e) {
  if (!(e instanceof OpenAI.BadRequestError) || e.param !== "max_tokens") fail(`negative max_tokens: ${e}`);
}
console.log(`openai_client: models.list and retrieve, chat (${plain.usage.completion_tokens} tokens), stream (${chunks} ` +
  `chunks, same text; the quickstart loop and its unguarded form), n = 4, logit_bias, completions with logprobs and ` +
  `echo (${lp.tokens.length} tokens), errors as the client's types`);
process.exit(fails ? 1 : 0);
