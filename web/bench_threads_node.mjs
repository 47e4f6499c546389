// Threads under Node: where a pass's time goes with 1 and 2 threads in the threaded module (typedecide-mt: the
// engine's pool on worker_threads over shared memory), against the native tool at the same moment. Rounds
// interleave every module, thread count and the native tool so that a change of the machine's load hits them alike;
// each figure carries the load average taken just before it and the process's CPU time over its wall time (threads
// that spin show as CPU time without a shorter wall time: cpu_ms, the process's CPU time over a whole tdw_bench call,
// is what a pool costs on a machine whose cores are taken by others). Per round and thread count: one prefill pass of PREFILL
// random tokens, DECODE one-token passes (tdw_bench: the forward pass alone, as `typedecide bench`), and with
// EVIDENCE > 0 one criterion over an EVIDENCE-token evidence (decide, batch mode; its probabilities must not depend
// on the module or the count). Writes one JSON.
//   node web/bench_threads_node.mjs MODEL.gguf OUT.json [PREFILL=64] [DECODE=8] [ROUNDS=4] [EVIDENCE=0]
// TD_BENCH_DISTS: the modules compared, "label=dir,label=dir" (default: "wasm=$TD_WASM_DIST or web/dist");
// TD_BENCH_THREADS (default 1,2); TD_BIN: the native tool (default build/typedecide; "" leaves it out);
// TD_BENCH_SET: the kernel set (default wasm128; native runs its default set).
import { createRequire } from 'node:module';
import { readFileSync, writeFileSync, statSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { resolve, dirname } from 'node:path';
import { cpus, loadavg } from 'node:os';

const [model, out, nP = '64', nD = '8', nRounds = '4', nE = '0'] = process.argv.slice(2);
if (!model || !out) {
    process.stderr.write('usage: node web/bench_threads_node.mjs MODEL.gguf OUT.json [PREFILL] [DECODE] [ROUNDS] ' +
                         '[EVIDENCE]\n');
    process.exit(2);
}
const bin = process.env.TD_BIN ?? 'build/typedecide';
const set = process.env.TD_BENCH_SET || 'wasm128';
const counts = (process.env.TD_BENCH_THREADS || '1,2').split(',').map(Number);
const dists = (process.env.TD_BENCH_DISTS || `wasm=${process.env.TD_WASM_DIST || 'web/dist'}`).split(',').map((s) => {
    const i = s.indexOf('=');
    return { label: s.slice(0, i), dir: resolve(s.slice(i + 1)) };
});
const require = createRequire(import.meta.url);
const words = 'the customer was charged twice for the same order and asks for a refund of the second payment'.split(' ');
const evidence = Array.from({ length: Number(nE) }, (_, i) => words[i % words.length]).join(' ');
const criterion = JSON.stringify({ id: 'category', question: 'Which category does this ticket belong to?', options: [
    { id: 'billing', description: 'Billing or payment problem' }, { id: 'access', description: 'Trouble logging in' },
    { id: 'bug', description: 'Software defect' }, { id: 'feature', description: 'Request for new functionality' }] });

async function open(d) { // the threaded module with enough workers for the largest count, the model loaded once
    const create = require(resolve(d.dir, 'typedecide-mt.js'));
    const M = await create({ wasmBinary: readFileSync(resolve(d.dir, 'typedecide-mt.wasm')), print: () => {},
                             printErr: (s) => process.stderr.write(s + '\n'), tdWorkers: Math.max(...counts) - 1 });
    const cstr = (s) => {
        const n = M.lengthBytesUTF8(s) + 1, p = M._malloc(n);
        M.stringToUTF8(s, p, n);
        return p;
    };
    const take = (p, what) => {
        if (!p) throw new Error(`${d.label}: ${what}: ${M.UTF8ToString(M._tdw_error())}`);
        const s = M.UTF8ToString(p);
        M._tdw_free(p);
        return s;
    };
    const root = dirname(resolve(model));
    let at = '';
    for (const part of root.split('/').filter(Boolean)) if (!M.FS.analyzePath((at += '/' + part)).exists) M.FS.mkdir(at);
    M.FS.mount(M.NODEFS, { root }, root);
    M._tdw_setenv(cstr('TD_KERNELS'), cstr(set));
    const m = M._tdw_model_load(cstr(resolve(model)));
    if (!m) throw new Error(`${d.label}: cannot load ${model}: ${M.UTF8ToString(M._tdw_error())}`);
    const ev = cstr(evidence), cr = cstr(criterion);
    return { ...d, kernels: M.UTF8ToString(M._tdw_model_kernels(m)),
             bench: (p, n, t) => JSON.parse(take(M._tdw_bench(m, p, n, t), 'bench')),
             decide: (t) => JSON.parse(take(M._tdw_decide(m, ev, cr, 0, t, 0), 'decide')) };
}

function timed(f) { // wall and process CPU (every thread of it) in ms, and the load average just before
    const load = loadavg()[0], c0 = process.cpuUsage(), t0 = performance.now();
    const r = f();
    const wall = performance.now() - t0, c = process.cpuUsage(c0);
    return { r, wall_ms: wall, cpu_ms: (c.user + c.system) / 1e3, load };
}

function nativeRun(t) {
    const run = (args) => JSON.parse(execFileSync(bin, ['bench', ...args, '--model', model, '--threads', String(t),
        '--repeat', '1'], { env: { ...process.env, TD_KERNELS: '' }, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }));
    const load = loadavg()[0];
    const p = run(['prefill', '--tokens', nP]), d = run(['decode', '--tokens', nD]);
    return { load, kernels: p.kernels, prefill_ms: Number(nP) / p.tokens_per_s * 1e3,
             decode_ms_per_pass: 1e3 / d.tokens_per_s };
}

const mods = [];
for (const d of dists) mods.push(await open(d));
for (const m of mods) for (const t of counts) m.bench(4, 2, t), nE > 0 && m.decide(t); // warm-up: V8 tiers the code up
const rounds = [];
for (let r = 0; r < Number(nRounds); r++) {
    const round = {};
    for (const m of mods) {
        round[m.label] = {};
        for (const t of counts) {
            const b = timed(() => m.bench(Number(nP), Number(nD), t));
            const row = { load: b.load, prefill_ms: b.r.prefill_ms, decode_ms_per_pass: b.r.decode_ms / b.r.decode_tokens,
                          wall_ms: b.wall_ms, cpu_ms: b.cpu_ms, cpu_per_wall: b.cpu_ms / b.wall_ms,
                          pool_jobs: b.r.pool_jobs };
            if (nE > 0) {
                const c = timed(() => m.decide(t));
                Object.assign(row, { criterion_ms: c.wall_ms, criterion_cpu_per_wall: c.cpu_ms / c.wall_ms,
                                     probs: c.r[0].probs });
            }
            round[m.label][t] = row;
        }
    }
    if (bin) {
        round.native = {};
        for (const t of counts) round.native[t] = nativeRun(t);
    }
    rounds.push(round);
    process.stderr.write(`round ${r + 1}: ${JSON.stringify(round, (k, v) => typeof v === 'number' ?
        +v.toFixed(2) : k === 'probs' ? undefined : v)}\n`);
}
// per label and count: the median and the best over the rounds
const med = (xs) => { const s = [...xs].sort((a, b) => a - b); return s[(s.length - 1) >> 1]; };
const summary = {};
for (const label of Object.keys(rounds[0])) {
    summary[label] = {};
    for (const t of counts) {
        const rs = rounds.map((r) => r[label][t]), s = {};
        for (const k of ['prefill_ms', 'decode_ms_per_pass', 'criterion_ms', 'wall_ms', 'cpu_ms', 'cpu_per_wall'])
            if (rs[0][k] !== undefined) s[k] = { median: med(rs.map((x) => x[k])), best: Math.min(...rs.map((x) => x[k])) };
        summary[label][t] = s;
    }
}
const probs = rounds.flatMap((r) => mods.flatMap((m) => counts.map((t) => JSON.stringify(r[m.label][t].probs))));
const result = { what: 'the threaded WebAssembly module under Node with ' + counts.join(', ') + ' threads, rounds ' +
    'interleaved with the native tool; load = 1-minute load average just before each figure', model,
    model_bytes: statSync(model).size, kernels: set, node: process.version, cpu: cpus()[0].model, cores: cpus().length,
    command: `TD_BENCH_DISTS=${dists.map((d) => d.label + '=' + d.dir).join(',')} TD_BENCH_THREADS=${counts.join(',')} ` +
             `node web/bench_threads_node.mjs ${process.argv.slice(2).join(' ')}`,
    modules: Object.fromEntries(mods.map((m) => [m.label, { dir: m.dir, kernels: m.kernels,
        wasm_bytes: statSync(resolve(m.dir, 'typedecide-mt.wasm')).size }])),
    same_probs: nE > 0 ? probs.every((p) => p === probs[0]) : null, summary, rounds };
writeFileSync(out, JSON.stringify(result, null, 1) + '\n');
console.log(JSON.stringify(summary, (k, v) => typeof v === 'number' ? +v.toFixed(2) : v));
process.exit(0); // the modules' workers would keep Node running
