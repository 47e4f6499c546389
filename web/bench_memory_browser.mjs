// The memory line of the WebAssembly module (issue 44) in headless Chromium: a GGUF near the wasm32 ceiling
// (synthetic qwen3-1.7b Q8_0, ~1.8 GB) streamed by Typedecide.load() from the static server into the module's
// memory (one copy, the model owns the buffer), then one decision; the module's memory before and after (what the
// load took: ~1x the model), the download's progress events; then a GGUF larger than the ceiling is refused before
// its body is read, with the message. Writes one JSON.
//   node --experimental-websocket web/bench_memory_browser.mjs MODEL.gguf TOO_LARGE.gguf OUT.json
// Both files must lie under the working directory (the static server's root); TOO_LARGE may be sparse (only its
// size is read). TD_WASM_DIST: the module to use (default web/dist).
import { statSync, writeFileSync } from 'node:fs';
import { relative, resolve } from 'node:path';
import { cpus, loadavg } from 'node:os';
import { openPage } from '../tests/wasm/chromium.mjs';

const [model, large, out] = process.argv.slice(2);
const chromium = process.env.TD_CHROMIUM || '/usr/bin/chromium';
const url = (p) => '/' + relative(process.cwd(), resolve(p));
const dist = url(process.env.TD_WASM_DIST || 'web/dist') + '/';
const evidence = 'The parcel arrived with the box crushed and the lamp inside broken into pieces.';
const criterion = { id: 'damaged', question: 'Did the item arrive damaged?', options: [
    { id: 'yes', description: 'Yes' }, { id: 'no', description: 'No' }] };
const la0 = loadavg();
const page = await openPage(chromium);
let res;
try {
    res = await page.js(`(async () => {
        const { Typedecide } = await import('/web/typedecide.mjs');
        const td = await Typedecide.create({ base: new URL(${JSON.stringify(dist)}, location.href), threads: 1 });
        const r = { ua: navigator.userAgent, isolated: self.crossOriginIsolated, memory_before: td.memoryBytes() };
        const marks = [];
        let peak = 0;
        const t0 = performance.now();
        const m = await td.load(${JSON.stringify(url(model))}, { onProgress: (p) => {
            if (!marks.length || p.loaded - marks.at(-1).loaded >= 256 << 20 || p.loaded === p.total)
                marks.push({ ...p, memory: td.memoryBytes(), ms: performance.now() - t0 });
            peak = Math.max(peak, td.memoryBytes());
        } });
        r.load_ms = performance.now() - t0;
        r.memory_after_load = td.memoryBytes();
        r.progress = marks;
        r.info = m.info;
        const t1 = performance.now();
        r.decision = m.decide(${JSON.stringify(evidence)}, [${JSON.stringify(criterion)}])[0];
        r.decide_ms = performance.now() - t1;
        r.memory_after_decide = td.memoryBytes();
        r.js_heap = performance.memory ? { used: performance.memory.usedJSHeapSize,
                                           total: performance.memory.totalJSHeapSize } : null;
        const t2 = performance.now();
        try { await td.load(${JSON.stringify(url(large))}); r.too_large = 'accepted'; }
        catch (e) { r.too_large = e.message; }
        r.too_large_ms = performance.now() - t2;
        m.free();
        return r; })()`);
} finally {
    await page.close();
}
const size = statSync(model).size;
const result = { what: 'a GGUF near the wasm32 ceiling streamed into the module in headless Chromium (one copy), ' +
    'one decision; a larger one refused before download', model, model_bytes: size, too_large: large,
    too_large_bytes: statSync(large).size,
    command: `TD_WASM_DIST=${process.env.TD_WASM_DIST || 'web/dist'} node --experimental-websocket web/bench_memory_browser.mjs ${process.argv.slice(2).join(' ')}`,
    cpu: cpus()[0].model, load_average_before: la0, chromium: res,
    memory_growth_over_model: (res.memory_after_load - res.memory_before) / size, load_average_after: loadavg() };
writeFileSync(out, JSON.stringify(result, null, 1) + '\n');
console.log(JSON.stringify({ model_bytes: size, grew: res.memory_after_load - res.memory_before,
    ratio: result.memory_growth_over_model.toFixed(3), load_ms: res.load_ms.toFixed(0), decide_ms: res.decide_ms.toFixed(0),
    probs: res.decision.probs, too_large: res.too_large }));
