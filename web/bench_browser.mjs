// Speed of the WebAssembly module in headless Chromium against the native tool on the same machine and model:
// prefill (N tokens, one pass) and decode (one-token passes) tokens/s, and one criterion's ms over an evidence of
// about EVIDENCE_TOKENS tokens (decide, batch mode), one thread, the module's sets in TD_BENCH_SETS (default
// wasm128; wasm128,scalar for both). Writes one JSON.
//   node --experimental-websocket web/bench_browser.mjs MODEL.gguf OUT.json [PREFILL] [DECODE] [EVIDENCE_TOKENS]
// MODEL must lie under the working directory (the static server's root); TD_BIN names the native tool; TD_WASM_DIST
// the module's folder (default web/dist; inside the working directory too). wasm128r: the relaxed SIMD set.
import { readFileSync, writeFileSync, statSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { relative, resolve } from 'node:path';
import { cpus, loadavg } from 'node:os';
import { openPage } from '../tests/wasm/chromium.mjs';

const [model, out, nP = '64', nD = '16', nE = '256'] = process.argv.slice(2);
const bin = process.env.TD_BIN || 'build/typedecide';
const chromium = process.env.TD_CHROMIUM || '/usr/bin/chromium';
const sets = (process.env.TD_BENCH_SETS || 'wasm128').split(','); // the module's kernel sets to measure
const url = '/' + relative(process.cwd(), resolve(model));
const distDir = process.env.TD_WASM_DIST || 'web/dist';
const dist = '/' + relative(process.cwd(), resolve(distDir)) + '/';
// evidence: a text of about nE tokens; one criterion with four options
const words = 'the customer was charged twice for the same order and asks for a refund of the second payment'.split(' ');
const evidence = Array.from({ length: Number(nE) }, (_, i) => words[i % words.length]).join(' ');
const criterion = { id: 'category', question: 'Which category does this ticket belong to?', options: [
    { id: 'billing', description: 'Billing or payment problem' }, { id: 'access', description: 'Trouble logging in' },
    { id: 'bug', description: 'Software defect' }, { id: 'feature', description: 'Request for new functionality' }] };

const page = await openPage(chromium);
let res;
try {
    res = await page.js(`(async () => {
        const { Typedecide } = await import('/web/typedecide.mjs');
        const t0 = performance.now();
        const td = await Typedecide.create({ base: new URL(${JSON.stringify(dist)}, location.href), threads: 1 });
        const module_ms = performance.now() - t0;
        const t1 = performance.now();
        await td.addFileFromUrl('/model.gguf', ${JSON.stringify(url)});
        const fetch_ms = performance.now() - t1;
        const out = { ua: navigator.userAgent, isolated: self.crossOriginIsolated, module_ms, fetch_ms, sets: {} };
        for (const set of ${JSON.stringify(sets)}) {
            td.setKernels(set);
            const t2 = performance.now();
            const m = td.loadModel('/model.gguf');
            const load_ms = performance.now() - t2;
            m.bench(4, 2); // warm-up: the engine tiers the module's code up while it runs
            const b = m.bench(${nP}, ${nD});
            const crit = ${JSON.stringify(criterion)};
            m.decide(${JSON.stringify(evidence)}, [crit]); // warm-up
            const t3 = performance.now();
            const d = m.decide(${JSON.stringify(evidence)}, [crit]);
            const criterion_ms = performance.now() - t3;
            out.sets[set] = { kernels: m.kernels, load_ms, ...b, prefill_tok_s: b.prefill_tokens / b.prefill_ms * 1e3,
                              decode_tok_s: b.decode_tokens / b.decode_ms * 1e3, criterion_ms, probs: d[0].probs };
            m.free();
        }
        return out; })()`);
} finally {
    await page.close();
}

// native, the same model and shapes, one thread: the default set and the scalar set
function native(kernels) {
    const env = { ...process.env, TD_KERNELS: kernels };
    const run = (args) => JSON.parse(execFileSync(bin, ['bench', ...args, '--model', model, '--threads', '1', '--repeat', '1'],
                                                  { env, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }));
    const p = run(['prefill', '--tokens', nP]), d = run(['decode', '--tokens', nD]);
    const c = run(['decide', '--prefix', nE, '--criteria', '1', '--suffix', '45', '--options', '4']);
    return { kernels: kernels || 'default', prefill: p, decode: d, one_criterion: c };
}
const cpu = cpus()[0].model;
const result = { what: 'typedecide as WebAssembly in headless Chromium vs native, one thread', model,
    model_bytes: statSync(model).size, wasm_bytes: statSync(resolve(distDir, 'typedecide.wasm')).size,
    command: `TD_BENCH_SETS=${sets.join(',')} node --experimental-websocket web/bench_browser.mjs ${process.argv.slice(2).join(' ')}`,
    cpu, load_average_before: loadavg(), chromium: res, native: [native(''), native('scalar')],
    load_average_after: loadavg() };
writeFileSync(out, JSON.stringify(result, null, 1) + '\n');
console.log(JSON.stringify({ wasm: Object.fromEntries(Object.entries(res.sets).map(([k, v]) => [k,
    { prefill_tok_s: v.prefill_tok_s.toFixed(2), decode_tok_s: v.decode_tok_s.toFixed(2), criterion_ms: v.criterion_ms.toFixed(0) }])) }));
