// Batched criteria in the browser: N criteria (default 144: the demo's four criteria with their options rotated,
// ids made unique) over one evidence, decided by the module in headless Chromium in one batched pass, then serially
// (each from the evidence's snapshot) and fresh (each criterion's whole prompt alone, as a runtime without batched
// branches or prefix reuse must), one thread; criteria/s of each and the probabilities' agreement (bits).
//   node --experimental-websocket web/bench_criteria_browser.mjs MODEL_DIR OUT.json [N] [FRESH_N]
// FRESH_N (default 16): criteria timed in fresh mode (it is slow); its rate stands for all N.
import { readFileSync, writeFileSync, readdirSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import { loadavg } from 'node:os';
import { openPage } from '../tests/wasm/chromium.mjs';

const [model, out, nArg = '144', freshArg = '16'] = process.argv.slice(2);
const n = Number(nArg), nFresh = Number(freshArg);
const base = readFileSync('models/demo/criteria.jsonl', 'utf8').split('\n').filter((l) => l.trim()).map((l) => JSON.parse(l));
const criteria = [];
for (let i = 0; criteria.length < n; i++) {
    const c = base[i % base.length], r = Math.floor(i / base.length) % c.options.length;
    criteria.push({ ...c, id: `${c.id}-${i}`, options: [...c.options.slice(r), ...c.options.slice(0, r)] });
}
const evidence = readFileSync('models/demo/ticket.txt', 'utf8');
const files = readdirSync(model).filter((f) => /^(config|generation_config|tokenizer|tokenizer_config)\.json$|\.safetensors$/.test(f))
    .map((f) => '/' + relative(process.cwd(), resolve(join(model, f))));
const page = await openPage(process.env.TD_CHROMIUM || '/usr/bin/chromium');
let res;
try {
    res = await page.js(`(async () => {
        const { Typedecide } = await import('/web/typedecide.mjs');
        const td = await Typedecide.create();
        for (const f of ${JSON.stringify(files)}) await td.addFileFromUrl('/m/' + f.split('/').pop(), f);
        const m = td.loadModel('/m');
        const crit = ${JSON.stringify(criteria)}, ev = ${JSON.stringify(evidence)};
        m.decide(ev, crit.slice(0, 4)); // warm-up
        const time = (mode, cs) => { const t = performance.now(); const d = m.decide(ev, cs, { mode }); return [performance.now() - t, d]; };
        const [batchMs, batch] = time('batch', crit);
        const [serialMs, serial] = time('serial', crit);
        const [freshMs, fresh] = time('fresh', crit.slice(0, ${nFresh}));
        const same = (a, b) => a.every((x, i) => JSON.stringify(x.probs) === JSON.stringify(b[i].probs));
        return { ua: navigator.userAgent, kernels: m.kernels, batch_ms: batchMs, serial_ms: serialMs, fresh_ms: freshMs,
                 serial_same_bits: same(serial, batch), fresh_same_bits: same(fresh, batch.slice(0, ${nFresh})) }; })()`);
} finally {
    await page.close();
}
const r = { what: `${n} criteria over one evidence in headless Chromium: one batched pass vs one at a time`, model,
    command: `node --experimental-websocket web/bench_criteria_browser.mjs ${process.argv.slice(2).join(' ')}`,
    criteria: n, fresh_criteria_timed: nFresh, threads: 1, ...res,
    batch_criteria_per_s: n / res.batch_ms * 1e3, serial_criteria_per_s: n / res.serial_ms * 1e3,
    fresh_criteria_per_s: nFresh / res.fresh_ms * 1e3, load_average: loadavg() };
writeFileSync(out, JSON.stringify(r, null, 1) + '\n');
console.log(JSON.stringify({ batch: r.batch_criteria_per_s.toFixed(1), serial: r.serial_criteria_per_s.toFixed(1),
                             fresh: r.fresh_criteria_per_s.toFixed(1), same: [res.serial_same_bits, res.fresh_same_bits] }));
