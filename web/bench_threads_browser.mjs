// Threads in the browser: the WebAssembly modules in headless Chromium on a cross-origin isolated page (COOP/COEP),
// one GGUF: the one-thread module (typedecide) with 1 thread, then the threaded module (typedecide-mt: the engine's
// pool on Web Workers over shared memory) with each count of TD_BENCH_THREADS (default 1,2). Per run: prefill
// (N tokens, one pass) and decode (one-token passes) tokens/s, one criterion's ms over about EVIDENCE_TOKENS tokens
// (decide, batch mode; its probabilities, which must not depend on the module or the count), the module's start,
// the model's fetch into the module's file system and its load. The native tool's figures with the same counts and
// the load average before and after (the runs share the machine) are written beside them. Writes one JSON.
//   node --experimental-websocket web/bench_threads_browser.mjs MODEL.gguf OUT.json [PREFILL] [DECODE] [EVIDENCE_TOKENS]
// MODEL must lie under the working directory (the static server's root); TD_BIN names the native tool;
// TD_WASM_DIST the modules' folder (default web/dist; inside the working directory too); TD_BENCH_SET the kernel
// set (default wasm128).
import { writeFileSync, statSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { relative, resolve } from 'node:path';
import { cpus, loadavg } from 'node:os';
import { openPage } from '../tests/wasm/chromium.mjs';

const [model, out, nP = '64', nD = '16', nE = '256'] = process.argv.slice(2);
const bin = process.env.TD_BIN || 'build/typedecide';
const chromium = process.env.TD_CHROMIUM || '/usr/bin/chromium';
const set = process.env.TD_BENCH_SET || 'wasm128';
const counts = (process.env.TD_BENCH_THREADS || '1,2').split(',').map(Number);
const distDir = process.env.TD_WASM_DIST || 'web/dist';
const dist = '/' + relative(process.cwd(), resolve(distDir)) + '/';
const url = '/' + relative(process.cwd(), resolve(model));
const words = 'the customer was charged twice for the same order and asks for a refund of the second payment'.split(' ');
const evidence = Array.from({ length: Number(nE) }, (_, i) => words[i % words.length]).join(' ');
const criterion = { id: 'category', question: 'Which category does this ticket belong to?', options: [
    { id: 'billing', description: 'Billing or payment problem' }, { id: 'access', description: 'Trouble logging in' },
    { id: 'bug', description: 'Software defect' }, { id: 'feature', description: 'Request for new functionality' }] };

// one module on a fresh page: create({threads: max}), then each count of `threads`
const runOne = (max, threads) => `(async () => {
    const { Typedecide } = await import('/web/typedecide.mjs');
    let t = performance.now();
    const td = await Typedecide.create({ base: new URL(${JSON.stringify(dist)}, location.href), threads: ${max} });
    const module_ms = performance.now() - t;
    t = performance.now();
    await td.addFileFromUrl('/model.gguf', ${JSON.stringify(url)});
    const fetch_ms = performance.now() - t;
    td.setKernels(${JSON.stringify(set)});
    t = performance.now();
    const m = td.loadModel('/model.gguf');
    const load_ms = performance.now() - t;
    const out = { isolated: self.crossOriginIsolated, threaded: td.threaded, module_threads: td.threads, module_ms,
                  fetch_ms, load_ms, kernels: m.kernels, runs: {} };
    const crit = ${JSON.stringify(criterion)}, ev = ${JSON.stringify(evidence)};
    for (const n of ${JSON.stringify(threads)}) {
        m.bench(4, 2, { threads: n }); // warm-up: the engine tiers the module's code up while it runs
        const b = m.bench(${nP}, ${nD}, { threads: n });
        m.decide(ev, [crit], { threads: n }); // warm-up
        t = performance.now();
        const d = m.decide(ev, [crit], { threads: n });
        const criterion_ms = performance.now() - t;
        out.runs[n] = { ...b, prefill_tok_s: b.prefill_tokens / b.prefill_ms * 1e3,
                        decode_tok_s: b.decode_tokens / b.decode_ms * 1e3, criterion_ms, probs: d[0].probs };
    }
    m.free();
    return out; })()`;

const load_average_before = loadavg();
const page = await openPage(chromium);
const chromiumRes = {};
try {
    chromiumRes.single = await page.js(runOne(1, [1]));
    // a fresh page: the first module's memory let go
    await page.js('window.tdOld = 1');
    await page.cdp('Page.navigate', { url: page.origin + '/blank.html' });
    for (const t0 = Date.now(); !(await page.js(`!window.tdOld && document.readyState === 'complete'`).catch(() => 0));
        await new Promise((r) => setTimeout(r, 50)))
        if (Date.now() - t0 > 60000) throw new Error('the second page did not load');
    chromiumRes.threaded = await page.js(runOne(Math.max(...counts), counts));
} finally {
    await page.close();
}
const load_average_mid = loadavg();

function native(n) {
    const env = { ...process.env, TD_KERNELS: '' };
    const run = (args) => JSON.parse(execFileSync(bin, ['bench', ...args, '--model', model, '--threads', String(n),
        '--repeat', '1'], { env, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }));
    const p = run(['prefill', '--tokens', nP]), d = run(['decode', '--tokens', nD]);
    const c = run(['decide', '--prefix', nE, '--criteria', '1', '--suffix', '45', '--options', '4']);
    return { threads: n, prefill: p, decode: d, one_criterion: c };
}
const probs = [chromiumRes.single.runs[1].probs, ...counts.map((n) => chromiumRes.threaded.runs[n].probs)];
const result = { what: 'typedecide as WebAssembly in headless Chromium (cross-origin isolated page): the one-thread ' +
    'module against the threaded module (pthreads on Web Workers over shared memory) with ' + counts.join(', ') +
    ' threads; native beside', model, model_bytes: statSync(model).size, kernels: set,
    wasm_bytes: { single: statSync(resolve(distDir, 'typedecide.wasm')).size,
                  threaded: statSync(resolve(distDir, 'typedecide-mt.wasm')).size },
    command: `TD_BENCH_THREADS=${counts.join(',')} node --experimental-websocket web/bench_threads_browser.mjs ` +
             process.argv.slice(2).join(' '),
    cpu: cpus()[0].model, cores: cpus().length, load_average_before, load_average_mid,
    same_probs: probs.every((p) => JSON.stringify(p) === JSON.stringify(probs[0])),
    chromium: chromiumRes, native: counts.map(native), load_average_after: loadavg() };
writeFileSync(out, JSON.stringify(result, null, 1) + '\n');
const fmt = (r) => ({ prefill_tok_s: +r.prefill_tok_s.toFixed(2), decode_tok_s: +r.decode_tok_s.toFixed(2),
                      criterion_ms: Math.round(r.criterion_ms) });
console.log(JSON.stringify({ single: fmt(chromiumRes.single.runs[1]), threaded: Object.fromEntries(counts.map((n) =>
    [n, fmt(chromiumRes.threaded.runs[n])])), same_probs: result.same_probs, load: load_average_before }));
