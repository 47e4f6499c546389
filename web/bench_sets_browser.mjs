// Kernel sets against each other in headless Chromium, interleaved: the one-thread module, one GGUF, rounds in
// which each set of TD_BENCH_SETS (default wasm128,wasm128r: SIMD128 and relaxed SIMD) loads the model and runs a
// prefill pass of PREFILL tokens and DECODE one-token passes (tdw_bench, after a warm-up); every figure carries the
// machine's 1-minute load average taken just before its round (the VM is shared: compare sets within a round). The
// per-set medians and the rounds go to one JSON; a criterion's probabilities are checked equal across the sets.
//   node --experimental-websocket web/bench_sets_browser.mjs MODEL.gguf OUT.json [PREFILL=64] [DECODE=16] [ROUNDS=3]
// MODEL and TD_WASM_DIST (default web/dist) must lie under the working directory (the static server's root).
import { writeFileSync, statSync } from 'node:fs';
import { relative, resolve } from 'node:path';
import { cpus, loadavg } from 'node:os';
import { openPage } from '../tests/wasm/chromium.mjs';

const [model, out, nP = '64', nD = '16', nRounds = '3'] = process.argv.slice(2);
const sets = (process.env.TD_BENCH_SETS || 'wasm128,wasm128r').split(',');
const distDir = process.env.TD_WASM_DIST || 'web/dist';
const dist = '/' + relative(process.cwd(), resolve(distDir)) + '/';
const url = '/' + relative(process.cwd(), resolve(model));
const criterion = { id: 'category', question: 'Which category does this ticket belong to?', options: [
    { id: 'billing', description: 'Billing or payment problem' }, { id: 'access', description: 'Trouble logging in' }] };
const page = await openPage(process.env.TD_CHROMIUM || '/usr/bin/chromium');
const rounds = [];
let ua;
try {
    ua = await page.js(`(async () => {
        const { Typedecide } = await import('/web/typedecide.mjs');
        window.td = await Typedecide.create({ base: new URL(${JSON.stringify(dist)}, location.href), threads: 1 });
        await td.addFileFromUrl('/model.gguf', ${JSON.stringify(url)});
        return navigator.userAgent; })()`);
    for (let r = 0; r < Number(nRounds); r++) {
        const load = loadavg()[0];
        const res = await page.js(`(() => {
            const out = {};
            for (const set of ${JSON.stringify(r % 2 ? [...sets].reverse() : sets)}) {
                td.setKernels(set);
                const m = td.loadModel('/model.gguf');
                m.bench(4, 2);
                const b = m.bench(${nP}, ${nD});
                const d = m.decide('the parcel arrived late and damaged', [${JSON.stringify(criterion)}]);
                out[set] = { kernels: m.kernels, prefill_tok_s: b.prefill_tokens / b.prefill_ms * 1e3,
                             decode_tok_s: b.decode_tokens / b.decode_ms * 1e3, probs: d[0].probs };
                m.free();
            }
            return out; })()`);
        rounds.push({ load, ...res });
        process.stderr.write(`round ${r + 1} (load ${load.toFixed(2)}): ${JSON.stringify(res, (k, v) =>
            k === 'probs' ? undefined : typeof v === 'number' ? +v.toFixed(2) : v)}\n`);
    }
} finally {
    await page.close();
}
const med = (xs) => { const s = [...xs].sort((a, b) => a - b); return s[(s.length - 1) >> 1]; };
const summary = Object.fromEntries(sets.map((s) => [s, {
    kernels: rounds[0][s].kernels,
    prefill_tok_s: med(rounds.map((r) => r[s].prefill_tok_s)), decode_tok_s: med(rounds.map((r) => r[s].decode_tok_s)),
    prefill_ratio_to_first: med(rounds.map((r) => r[s].prefill_tok_s / r[sets[0]].prefill_tok_s)),
    decode_ratio_to_first: med(rounds.map((r) => r[s].decode_tok_s / r[sets[0]].decode_tok_s)) }]));
const probs = rounds.flatMap((r) => sets.map((s) => JSON.stringify(r[s].probs)));
writeFileSync(out, JSON.stringify({ what: 'kernel sets of the one-thread WebAssembly module in headless Chromium, ' +
    'interleaved rounds (the order alternates); ratios are per round against ' + sets[0] + ', then the median', ua,
    model, model_bytes: statSync(model).size, cpu: cpus()[0].model, cores: cpus().length,
    command: `TD_BENCH_SETS=${sets.join(',')} TD_WASM_DIST=${distDir} node --experimental-websocket ` +
             `web/bench_sets_browser.mjs ${process.argv.slice(2).join(' ')}`,
    same_probs: probs.every((p) => p === probs[0]), summary, rounds }, null, 1) + '\n');
console.log(JSON.stringify(summary, (k, v) => typeof v === 'number' ? +v.toFixed(3) : v));
