// Qwen3.5 chat in headless Chromium (issue 44): the time to the first token of each turn against the length of the
// conversation so far, through Model.chat() (the library's td_gen: the previous turns' KV and DeltaNet state are
// reused from a snapshot at the turn boundary, only the new turn is read). The slope of a least-squares line through
// (history tokens, ms to the first token) is the cost of one more history token (the goal: <= 0.5 ms; a runtime
// that reads the whole history again each turn pays its prefill per token: WebLLM's 5.27 ms). For contrast, the
// same conversation's prompts at a few lengths read from scratch (the cache dropped before each). One thread.
// The machine may be shared: after each turn a fixed reference pass (REF prefill tokens, Model.bench) is timed, and
// the times are also given normalised by it (ms x median(ref) / ref: what a steady machine would have taken).
//   node --experimental-websocket web/bench_chat_ttft_browser.mjs MODEL.gguf OUT.json [TURNS] [REPREFILL_POINTS] [REF]
// MODEL must lie under the working directory; TD_WASM_DIST: the module (default web/dist).
import { statSync, writeFileSync } from 'node:fs';
import { relative, resolve } from 'node:path';
import { cpus, loadavg } from 'node:os';
import { openPage } from '../tests/wasm/chromium.mjs';

const [model, out, turnsArg = '24', pointsArg = '2', refArg = '24'] = process.argv.slice(2);
const chromium = process.env.TD_CHROMIUM || '/usr/bin/chromium';
const url = (p) => '/' + relative(process.cwd(), resolve(p));
const dist = url(process.env.TD_WASM_DIST || 'web/dist') + '/';
const la0 = loadavg();
const page = await openPage(chromium);
let res;
try {
    res = await page.js(`(async () => {
        const { Typedecide } = await import('/web/typedecide.mjs');
        const td = await Typedecide.create({ base: new URL(${JSON.stringify(dist)}, location.href), threads: 1 });
        const m = await td.load(${JSON.stringify(url(model))});
        m.configureGeneration({ nCtx: 4096, maxSequences: 8 });
        const r = { ua: navigator.userAgent, info: m.info, turns: [] };
        const chat = m.chat({ system: 'You are a helpful support agent.', think: false, maxTokens: 4, temperature: 0 });
        const ask = (i) => 'Turn ' + i + ': where is my parcel ' + (1000 + i) + '?';
        const ref = () => m.bench(${Number(refArg)}, 0, { threads: 1 }).prefill_ms;
        ref(); // warm-up
        const prompts = [];
        for (let i = 0; i < ${Number(turnsArg)}; i++) {
            const t0 = performance.now();
            const rep = await chat.send(ask(i));
            r.turns.push({ turn: i, n_prompt: rep.nPrompt, n_reused: rep.nReused, ms_first_token: rep.msFirstToken,
                           ms_prefill: rep.msPrefill, n_generated: rep.ids.length, wall_ms: performance.now() - t0,
                           ref_ms: ref() });
            prompts.push(chat.tokenize(chat.messages.slice(0, -1))); // the ids this turn sent
        }
        // the same prompts read from scratch: the cache dropped first
        r.reprefill = [];
        const pick = ${Number(pointsArg)};
        for (let k = 0; k < pick; k++) {
            const ids = prompts[Math.round((prompts.length - 1) * (k + 1) / pick)];
            m.configureGeneration({ nCtx: 4096, maxSequences: 8 });
            const g = await m.generate({ promptIds: ids, maxTokens: 1, temperature: 0 });
            r.reprefill.push({ n_prompt: g.nPrompt, n_reused: g.nReused, ms_first_token: g.msFirstToken, ref_ms: ref() });
        }
        m.free();
        return r; })()`);
} finally {
    await page.close();
}
const fit = (pts) => { // least squares: ms = a + b * tokens
    const n = pts.length, sx = pts.reduce((s, p) => s + p[0], 0), sy = pts.reduce((s, p) => s + p[1], 0);
    const sxx = pts.reduce((s, p) => s + p[0] * p[0], 0), sxy = pts.reduce((s, p) => s + p[0] * p[1], 0);
    const b = (n * sxy - sx * sy) / (n * sxx - sx * sx);
    return { ms_per_history_token: b, intercept_ms: (sy - b * sx) / n };
};
// turn 0 reads everything (nothing to reuse): the slope is over the turns that follow
const refs = [...res.turns, ...res.reprefill].map((t) => t.ref_ms).sort((a, b) => a - b);
const refMedian = refs[refs.length >> 1];
const norm = (t) => t.ms_first_token * refMedian / t.ref_ms;
const later = res.turns.slice(1).map((t) => [t.n_prompt, t.ms_first_token]);
const laterNorm = res.turns.slice(1).map((t) => [t.n_prompt, norm(t)]);
const result = { what: 'Qwen3.5 chat in headless Chromium: time to first token vs history tokens, KV/state reused ' +
    'across turns (Model.chat), one thread', model, model_bytes: statSync(model).size,
    command: `TD_WASM_DIST=${process.env.TD_WASM_DIST || 'web/dist'} node --experimental-websocket web/bench_chat_ttft_browser.mjs ${process.argv.slice(2).join(' ')}`,
    cpu: cpus()[0].model, load_average_before: la0, goal_ms_per_history_token: 0.5, webllm_ms_per_history_token: 5.27,
    chat_fit: fit(later), chat_fit_normalised: fit(laterNorm), ref_prefill_tokens: Number(refArg), ref_median_ms: refMedian,
    reprefill_fit: res.reprefill.length >= 2 ? fit(res.reprefill.map((p) => [p.n_prompt, p.ms_first_token])) : null,
    reprefill_fit_normalised: res.reprefill.length >= 2 ? fit(res.reprefill.map((p) => [p.n_prompt, norm(p)])) : null,
    chromium: res, load_average_after: loadavg() };
writeFileSync(out, JSON.stringify(result, null, 1) + '\n');
console.log(JSON.stringify({ chat: result.chat_fit, chat_norm: result.chat_fit_normalised, reprefill: result.reprefill_fit,
    reprefill_norm: result.reprefill_fit_normalised,
    turns: res.turns.map((t) => [t.n_prompt, t.n_reused, Math.round(t.ms_first_token)]) }));
