// The official `openai` npm client against `typedecide serve` (started by tests/test_serve.sh): models, a chat
// completion, a streamed chat completion (same text as the plain one at temperature 0), completions with logprobs
// and echo, and the client's error type for a bad request. usage: node openai_client.mjs BASE_URL KEY MODEL
import OpenAI from "openai";

const [baseURL, apiKey, model] = process.argv.slice(2);
const client = new OpenAI({ baseURL: baseURL + "/v1", apiKey, maxRetries: 0, timeout: 120000 });
let fails = 0;
const fail = (m) => { fails++; console.error("FAIL: openai client: " + m); };

const models = await client.models.list();
const ids = [];
for await (const m of models) ids.push(m.id);
if (ids.length !== 1 || ids[0] !== model) fail(`models.list: ${JSON.stringify(ids)}`);

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
  await client.completions.create({ model, prompt: "x", max_tokens: -3 });
  fail("negative max_tokens was accepted");
} catch (e) {
  if (!(e instanceof OpenAI.BadRequestError) || e.param !== "max_tokens") fail(`negative max_tokens: ${e}`);
}
console.log(`openai_client: models, chat (${plain.usage.completion_tokens} tokens), stream (${chunks} chunks, same text), ` +
  `completions with logprobs and echo (${lp.tokens.length} tokens), errors as the client's types`);
process.exit(fails ? 1 : 0);
