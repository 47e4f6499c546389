// typedecide's WebAssembly module against wllama (llama.cpp compiled to WebAssembly, npm @wllama/wllama, the versions
// pinned in bench/peers/wllama/package.json: `npm ci --prefix bench/peers/wllama` first) in the same headless
// Chromium, on the same GGUF, at the same thread count, and native typedecide on the same machine beside them.
// wllama 2.4.0 (wllama2: its single-thread build at 1 thread, the low-level API: tokenize, decode, kvRemove,
// getLogits, each call timed in the page) always; wllama 3.13.0 (the newest: llama-server inside, memory64, one
// threaded build; its own timings) with TD_WLLAMA3=1 (it ran at ~1.2 s a token here, prefill as decode).
//   prefill   PREFILL tokens in one pass (wllama2: decode() of PREFILL ids, n_batch 512; wllama 3: a PREFILL-token
//             prompt, max_tokens 1, timings.prompt_ms; ours: Model.bench's prefill pass, random ids)
//   decode    DECODE one-token passes after the prefill (wllama2: DECODE decode() calls of one id; wllama 3: max_tokens DECODE with
//             ignore_eos, timings.predicted_ms; ours: Model.bench's decode passes)
//   criterion one criterion (4 options) over an evidence of about EVIDENCE tokens, wall time in the page:
//             cold: nothing cached (wllama2: kvClear, decode of evidence + question + lettered options +
//             "Answer:", getLogits(4); wllama 3 cache_prompt false; ours: Model.decide, evidence + criterion);
//             warm: the evidence already in the KV cache (wllama2: after another criterion over the same evidence,
//             kvRemove trims the cache to the evidence, then the criterion's own tokens and getLogits; wllama 3:
//             cache_prompt true, llama-server trimming to the common prefix; ours: the marginal time of a
//             criterion, decide with 2 criteria minus decide with 1, the evidence prefilled once)
// Writes one JSON (bench/results/wasm-vs-wllama-*.json): the command, the machine, load averages, every figure.
//   node --experimental-websocket web/bench_wllama.mjs MODEL.gguf OUT.json [PREFILL] [DECODE] [EVIDENCE] [THREADS]
// MODEL must lie under the working directory (the static server's root); TD_BIN names the native tool,
// TD_WASM_DIST (a folder under the working directory) the module to measure (default web/dist).
import { readFileSync, writeFileSync, statSync, existsSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { relative, resolve } from 'node:path';
import { cpus, loadavg, totalmem } from 'node:os';
import { openPage } from '../tests/wasm/chromium.mjs';

const [model, out, nP = '512', nD = '32', nE = '256', nT = '1'] = process.argv.slice(2);
if (!model || !out) {
    console.error('usage: node --experimental-websocket web/bench_wllama.mjs MODEL.gguf OUT.json [PREFILL] [DECODE] [EVIDENCE] [THREADS]');
    process.exit(2);
}
const bin = process.env.TD_BIN || 'build/typedecide';
const chromium = process.env.TD_CHROMIUM || '/usr/bin/chromium';
const peer = 'bench/peers/wllama/node_modules/@wllama/wllama', peer2 = 'bench/peers/wllama/node_modules/wllama2';
if (!existsSync(peer)) {
    console.error(`bench_wllama: ${peer} missing: run npm ci --prefix bench/peers/wllama`);
    process.exit(2);
}
const dist = resolve(process.env.TD_WASM_DIST || 'web/dist');
const url = (p) => '/' + relative(process.cwd(), resolve(p));
const words = 'the customer was charged twice for the same order and asks for a refund of the second payment'.split(' ');
const text = (n) => Array.from({ length: n }, (_, i) => words[i % words.length]).join(' ');
const evidence = text(Number(nE));
const crit = (id, q) => ({ id, question: q, options: [
    { id: 'billing', description: 'Billing or payment problem' }, { id: 'access', description: 'Trouble logging in' },
    { id: 'bug', description: 'Software defect' }, { id: 'feature', description: 'Request for new functionality' }] });
const critA = crit('category', 'Which category does this ticket belong to?');
const critB = crit('team', 'Which team should handle this ticket?');
// wllama gets the same criterion as a plain prompt: the evidence, the question and lettered options, "Answer:"
const prompt = (c) => `${evidence}\n\nQuestion: ${c.question}\n` +
    c.options.map((o, i) => `${'ABCD'[i]}. ${o.description}`).join('\n') + '\nAnswer:';
const threads = Number(nT);

const before = loadavg(); // before the browser starts
const page = await openPage(chromium);
let res;
try {
    page.cdp('Runtime.enable').catch(() => {});
    res = await page.js(`(async () => {
        const out = { ua: navigator.userAgent, isolated: self.crossOriginIsolated };
        const modelUrl = location.origin + ${JSON.stringify(url(model))}; // absolute: wllama fetches in a blob: Worker
        // ---- wllama 2.4.0, low-level API ----
        {
            const { Wllama } = await import(${JSON.stringify(url(peer2) + '/esm/index.js')});
            const w = new Wllama({ 'single-thread/wllama.wasm': location.origin + ${JSON.stringify(url(peer2) + '/esm/single-thread/wllama.wasm')},
                                   'multi-thread/wllama.wasm': location.origin + ${JSON.stringify(url(peer2) + '/esm/multi-thread/wllama.wasm')} },
                                 { suppressNativeLog: true });
            const t0 = performance.now();
            await w.loadModelFromUrl(modelUrl, { n_threads: ${threads}, n_ctx: 2048, n_batch: 512, useCache: false });
            const load_ms = performance.now() - t0;
            const time = async (f) => { const t = performance.now(); const r = await f(); return [performance.now() - t, r]; };
            const ids = (await w.tokenize(${JSON.stringify(text(Number(nP) + 64))})).slice(0, ${nP});
            await w.decode(ids.slice(0, 8), {}); // warm-up
            await w.kvClear();
            const [prefill_ms] = await time(() => w.decode(ids, {}));
            // decode after the prefill, as Model.bench does: each token attends to PREFILL + i positions
            const [decode_ms] = await time(async () => { for (let i = 0; i < ${nD}; i++) await w.decode([ids[i]], {}); });
            const pa = await w.tokenize(${JSON.stringify(prompt(critA))}), pb = await w.tokenize(${JSON.stringify(prompt(critB))});
            let common = 0;
            while (common < pa.length && pa[common] === pb[common]) common++;
            await w.kvClear();
            const [cold_ms, top] = await time(async () => { await w.decode(pa, {}); return w.getLogits(4); });
            await w.kvClear();
            await w.decode(pb, {});
            await w.getLogits(4);
            const [warm_ms] = await time(async () => { await w.kvRemove(common, pb.length - common);
                                                      await w.decode(pa.slice(common), {}); return w.getLogits(4); });
            out.wllama2 = { multithread: w.isMultithread(), threads: ${threads}, load_ms, prefill_tokens: ids.length,
                prefill_ms, prefill_tok_s: ids.length / prefill_ms * 1e3, decode_tokens: ${nD}, decode_ms,
                decode_tok_s: ${nD} / decode_ms * 1e3, criterion_tokens: pa.length, evidence_tokens: common,
                criterion_cold_ms: cold_ms, criterion_warm_ms: warm_ms, top };
            await w.exit();
        }
        // ---- wllama 3.13.0, llama-server inside ----
        if (${process.env.TD_WLLAMA3 === '1'}) {
            const { Wllama } = await import(${JSON.stringify(url(peer) + '/esm/index.js')});
            const w = new Wllama({ default: location.origin + ${JSON.stringify(url(peer) + '/esm/wasm/wllama.wasm')} },
                                 { suppressNativeLog: true });
            const t0 = performance.now();
            await w.loadModelFromUrl(modelUrl, { n_threads: ${threads}, n_ctx: 2048, n_batch: 512, n_ubatch: 512,
                                                 useCache: false });
            const load_ms = performance.now() - t0;
            const comp = async (o) => { const t = performance.now(); const r = await w.createCompletion({
                temperature: 0, ...o }); return { wall_ms: performance.now() - t, timings: r.timings,
                text: r.choices[0].text, logprobs: r.choices[0].logprobs }; };
            await comp({ prompt: 'warm up the engine', max_tokens: 2, cache_prompt: false });
            const prefill = await comp({ prompt: ${JSON.stringify(text(Number(nP)))}, max_tokens: 1, cache_prompt: false });
            const decode = await comp({ prompt: 'Once upon a time', max_tokens: ${nD}, ignore_eos: true, cache_prompt: false });
            const cold = await comp({ prompt: ${JSON.stringify(prompt(critA))}, max_tokens: 1, n_probs: 4, cache_prompt: false });
            await comp({ prompt: ${JSON.stringify(prompt(critB))}, max_tokens: 1, n_probs: 4, cache_prompt: true });
            const warm = await comp({ prompt: ${JSON.stringify(prompt(critA))}, max_tokens: 1, n_probs: 4, cache_prompt: true });
            out.wllama = { multithread: w.isMultithread(), threads: w.getNumThreads(), load_ms,
                prefill_tokens: prefill.timings.prompt_n, prefill_ms: prefill.timings.prompt_ms,
                prefill_tok_s: prefill.timings.prompt_per_second,
                decode_tokens: decode.timings.predicted_n, decode_ms: decode.timings.predicted_ms,
                decode_tok_s: decode.timings.predicted_per_second,
                criterion_cold_ms: cold.wall_ms, criterion_cold_timings: cold.timings,
                criterion_warm_ms: warm.wall_ms, criterion_warm_timings: warm.timings };
            await w.exit();
        }
        // ---- typedecide ----
        {
            const { Typedecide } = await import('/web/typedecide.mjs');
            const td = await Typedecide.create({ base: new URL(${JSON.stringify(url(dist) + '/')}, location.href) });
            const t1 = performance.now();
            await td.addFileFromUrl('/model.gguf', modelUrl);
            const fetch_ms = performance.now() - t1;
            const t2 = performance.now();
            const m = td.loadModel('/model.gguf');
            const load_ms = performance.now() - t2;
            const o = { threads: ${threads} };
            m.bench(4, 2, o); // warm-up: the engine tiers the module's code up while it runs
            const b = m.bench(${nP}, ${nD}, o);
            const ev = ${JSON.stringify(evidence)}, A = ${JSON.stringify(critA)}, B = ${JSON.stringify(critB)};
            m.decide(ev, [A], o); // warm-up
            const time = (f) => { const t = performance.now(); const r = f(); return [performance.now() - t, r]; };
            const [cold_ms, d1] = time(() => m.decide(ev, [A], o));
            const [two_ms] = time(() => m.decide(ev, [B, A], o));
            out.typedecide = { kernels: m.kernels, threads: ${threads}, fetch_ms, load_ms, ...b,
                prefill_tok_s: b.prefill_tokens / b.prefill_ms * 1e3, decode_tok_s: b.decode_tokens / b.decode_ms * 1e3,
                criterion_cold_ms: cold_ms, criterion_two_ms: two_ms, criterion_warm_ms: two_ms - cold_ms,
                probs: d1[0].probs };
            m.free();
        }
        return out; })()`);
} finally {
    await page.close();
}

// native typedecide, the same model and shapes and threads, its default kernel set
function native() {
    const run = (args) => JSON.parse(execFileSync(bin, ['bench', ...args, '--model', model, '--threads', nT, '--repeat', '1'],
                                                  { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }));
    const p = run(['prefill', '--tokens', nP]), d = run(['decode', '--tokens', nD]);
    const c = run(['decide', '--prefix', nE, '--criteria', '1', '--suffix', '45', '--options', '4']);
    return { prefill: p, decode: d, one_criterion: c };
}
const result = { what: 'typedecide (WebAssembly) vs wllama in one headless Chromium, and native typedecide', model,
    model_bytes: statSync(model).size, wasm_bytes: statSync(resolve(dist, 'typedecide.wasm')).size,
    wllama_wasm_bytes: statSync(`${peer}/esm/wasm/wllama.wasm`).size,
    wllama_versions: [peer, peer2].map((p) => JSON.parse(readFileSync(`${p}/package.json`, 'utf8')).version),
    wllama2_wasm_bytes: statSync(`${peer2}/esm/single-thread/wllama.wasm`).size,
    command: `TD_WASM_DIST=${relative(process.cwd(), dist)} node --experimental-websocket web/bench_wllama.mjs ${process.argv.slice(2).join(' ')}`,
    cpu: cpus()[0].model, cores: cpus().length, memory_gb: +(totalmem() / 2 ** 30).toFixed(1),
    load_average_before: before, chromium: res, native: native(), load_average_after: loadavg() };
writeFileSync(out, JSON.stringify(result, null, 1) + '\n');
const brief = (w) => w && { prefill_tok_s: +w.prefill_tok_s.toFixed(2), decode_tok_s: +w.decode_tok_s.toFixed(2),
    criterion_cold_ms: Math.round(w.criterion_cold_ms), criterion_warm_ms: Math.round(w.criterion_warm_ms) };
console.log(JSON.stringify({ wllama2: brief(res.wllama2), wllama3: brief(res.wllama), typedecide: brief(res.typedecide) }));
