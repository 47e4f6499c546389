// The memory line under Node (issue 44): the same GGUF near the wasm32 ceiling loaded two ways into a fresh module
// each: Typedecide.load(path) (read in place into one buffer the model owns), and the former way, the file's bytes
// written into emscripten's file system then loaded by path (addFile + loadModel: the bytes held twice, or more);
// the module's memory after each and the process's resident memory (the file system's copy lies outside the
// module's memory, in the JavaScript heap: only the process's total shows it), then one decision. Writes one JSON.
//   node web/bench_memory_node.mjs MODEL.gguf OUT.json [streamed|former]   (default both, in this process;
//   one of them alone gives a clean resident-memory figure)      TD_WASM_DIST: the module (default web/dist)
import { readFileSync, statSync, writeFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { cpus, loadavg } from 'node:os';
import { Typedecide } from './typedecide.mjs';

const [model, out, only] = process.argv.slice(2);
const rss = () => process.memoryUsage().rss;
const base = pathToFileURL(resolve(process.env.TD_WASM_DIST || 'web/dist') + '/');
const size = statSync(model).size;
const evidence = 'The parcel arrived with the box crushed and the lamp inside broken into pieces.';
const criterion = { id: 'damaged', question: 'Did the item arrive damaged?', options: [
    { id: 'yes', description: 'Yes' }, { id: 'no', description: 'No' }] };
const la0 = loadavg();
const res = { rss_start: rss() };
if (only !== 'former') {
    const td = await Typedecide.create({ base, threads: 1 });
    const before = td.memoryBytes(), t0 = performance.now();
    const m = await td.load(model);
    const r = { memory_before: before, memory_after_load: td.memoryBytes(), load_ms: performance.now() - t0,
                rss_after_load: rss() };
    const t1 = performance.now();
    r.decision = m.decide(evidence, [criterion])[0];
    r.decide_ms = performance.now() - t1;
    r.memory_after_decide = td.memoryBytes();
    r.growth_over_model = (r.memory_after_load - before) / size;
    m.free();
    res.load_streamed = r;
}
if (only !== 'streamed') {
    const td = await Typedecide.create({ base, threads: 1 });
    const before = td.memoryBytes(), t0 = performance.now();
    const r = { memory_before: before };
    try {
        td.addFile('/m/model.gguf', new Uint8Array(readFileSync(model)));
        r.memory_after_addfile = td.memoryBytes();
        const m = td.loadModel('/m/model.gguf');
        r.memory_after_load = td.memoryBytes();
        r.rss_after_load = rss();
        r.load_ms = performance.now() - t0;
        r.growth_over_model = (r.memory_after_load - before) / size;
        m.free();
    } catch (e) {
        r.error = String(e.message || e);
        r.memory_at_failure = td.memoryBytes();
    }
    res.former_file_system_path = r;
}
const result = { what: 'a GGUF near the wasm32 ceiling in the module under Node: load() (one copy) against the former ' +
    'file-system path (addFile + loadModel)', model, model_bytes: size,
    command: `TD_WASM_DIST=${process.env.TD_WASM_DIST || 'web/dist'} node web/bench_memory_node.mjs ${process.argv.slice(2).join(' ')}`,
    node: process.version, cpu: cpus()[0].model, load_average_before: la0, ...res, load_average_after: loadavg() };
writeFileSync(out, JSON.stringify(result, null, 1) + '\n');
console.log(JSON.stringify(res, (k, v) => (k === 'decision' ? v.probs : v)));
