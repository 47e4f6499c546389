// n choices in one request (td_gen_submit_n: the prompt prefilled once, the choices fork it) against the same
// choices as n concurrent requests of n = 1 (each prefills the prompt: they run together, so no cached prefix
// helps), on a running `typedecide serve`: wall time per round, the median of ROUNDS, and the prefill the server
// reports. Each round's prompts are new (no reuse across rounds).
// usage: node bench/serve_n_choices.mjs URL [N=4] [ROUNDS=5] [MAX_TOKENS=32]
const [url, nS = "4", roundsS = "5", mtS = "32"] = process.argv.slice(2);
const n = +nS, rounds = +roundsS, maxTokens = +mtS;
const words = "the customer wrote that the invoice was charged twice and the refund never arrived ".repeat(40);
const post = (b) => fetch(url + "/v1/completions", { method: "POST", headers: { "content-type": "application/json" },
  body: JSON.stringify(b) }).then((r) => r.json());
const one = [], sep = [], prefillOne = [], prefillSep = [];
let promptTokens = 0;
for (let t = 0; t < rounds; t++) {
  const base = { prompt: `Round ${t} A. ` + words, max_tokens: maxTokens, ignore_eos: true, temperature: 1, seed: 10 };
  let t0 = performance.now();
  const a = await post({ ...base, n });
  one.push(performance.now() - t0);
  promptTokens = a.usage.prompt_tokens;
  prefillOne.push(a.timings.prefill_ms);
  t0 = performance.now();
  const s = await Promise.all([...Array(n).keys()].map((k) => post({ ...base, prompt: `Round ${t} B. ` + words, seed: 10 + k })));
  sep.push(performance.now() - t0);
  prefillSep.push(s.reduce((x, r) => x + r.timings.prefill_ms, 0));
}
const med = (x) => [...x].sort((p, q) => p - q)[Math.floor(x.length / 2)];
console.log(JSON.stringify({ n, rounds, prompt_tokens: promptTokens, max_tokens: maxTokens,
  one_request_ms: +med(one).toFixed(1), separate_requests_ms: +med(sep).toFixed(1),
  one_request_prefill_ms: +med(prefillOne).toFixed(1), separate_prefill_ms_sum: +med(prefillSep).toFixed(1) }));
