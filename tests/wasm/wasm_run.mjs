// Runs the WebAssembly module (web/dist/typedecide.js + .wasm) under Node, the same module the browser loads, on
// files of the host (through emscripten's NODEFS), and prints what the native tool
// prints for the same request, so that tests/test_wasm.sh can compare the two:
//   node wasm_run.mjs tokenize TOKENIZER(.json|.gguf) CORPUS.jsonl   one JSON array of ids per line ("text" field)
//   node wasm_run.mjs decide EVIDENCE CRITERIA.jsonl MODE THREADS MODEL...   per model a line "# MODEL kernels=SET"
//                                                    and one JSON line per criterion (MODE: 0 batch, 1 serial, 2 fresh)
//                                                    THREADS may be a list, "1,2,4": then per model and count a
//                                                    section "# MODEL kernels=SET threads=T"
//   node wasm_run.mjs generate MODEL PROMPT N TEMPERATURE SEED [THREADS]   {"prompt_ids", "ids", "text", "finish"}
//   node wasm_run.mjs bench MODEL N_PREFILL N_DECODE THREADS    tdw_bench's JSON (pool_jobs > 0: threads ran)
// TD_WASM_MODULE=mt: the threaded module (typedecide-mt.js, pthreads on worker_threads over shared memory) with
// TD_WASM_WORKERS (default 3) workers started with it; else the one-thread module (typedecide.js).
import { createRequire } from 'node:module';
import { readFileSync } from 'node:fs';
import { resolve, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const dist = process.env.TD_WASM_DIST || resolve(here, '../../web/dist');
const require = createRequire(import.meta.url);
const name = process.env.TD_WASM_MODULE === 'mt' ? 'typedecide-mt' : 'typedecide';
const createTypedecide = require(resolve(dist, name + '.js'));
// wasmBinary given: emscripten 3.1.6's glue would otherwise fetch() a file path, which Node's fetch refuses.
const M = await createTypedecide({ wasmBinary: readFileSync(resolve(dist, name + '.wasm')), print: () => {},
                                   printErr: (s) => process.stderr.write(s + '\n'),
                                   tdWorkers: Number(process.env.TD_WASM_WORKERS || 3) });
if (!!M._tdw_threaded() !== (name === 'typedecide-mt')) {
    process.stderr.write(`wasm_run: ${name}.js says threaded=${M._tdw_threaded()}\n`);
    process.exit(1);
}
function str(ptr) { // a new C string from the module: copied out, then freed
    const s = M.UTF8ToString(ptr);
    M._tdw_free(ptr);
    return s;
}
function cstr(s) { // a JS string into module memory (caller frees)
    const n = M.lengthBytesUTF8(s) + 1, p = M._malloc(n);
    M.stringToUTF8(s, p, n);
    return p;
}
// The working directory (the repository) is mounted at its own path, so that the absolute targets emscripten's
// NODEFS makes of relative symbolic links (fixtures/models/*/tokenizer.json) name the same files inside.
const root = process.cwd();
let at = '';
// (/tmp, /home and /dev exist in emscripten's file system from the start: a checkout under /tmp must not fail)
for (const part of root.split('/').filter(Boolean)) if (!M.FS.analyzePath((at += '/' + part)).exists) M.FS.mkdir(at);
M.FS.mount(M.NODEFS, { root }, root);
// TD_KERNELS of the module's environment (its own: emscripten does not pass Node's): the set models load with
if (process.env.TD_WASM_KERNELS) M._tdw_setenv(cstr('TD_KERNELS'), cstr(process.env.TD_WASM_KERNELS));
// A file elsewhere (a test's temporary directory) is reached by mounting its directory at its own path too.
const host = (p) => {
    const abs = resolve(p), dir = dirname(abs);
    if (abs.startsWith(root + '/') || M.FS.analyzePath(dir).exists) return abs;
    let d = '';
    for (const part of dir.split('/').filter(Boolean))
        if (!M.FS.analyzePath((d += '/' + part)).exists) M.FS.mkdir(d);
    M.FS.mount(M.NODEFS, { root: dir }, dir);
    return abs;
};

function die(what) {
    process.stderr.write(`wasm_run: ${what}: ${M.UTF8ToString(M._tdw_error())}\n`);
    process.exit(1);
}

const [cmd, ...args] = process.argv.slice(2);
if (cmd === 'tokenize') {
    const path = cstr(host(args[0]));
    const tok = M._tdw_tokenizer_load(path);
    M._free(path);
    if (!tok) die(`cannot load ${args[0]}`);
    const out = [];
    for (const line of readFileSync(args[1], 'utf8').split('\n')) {
        if (!line.trim()) continue;
        const text = JSON.parse(line).text, p = cstr(text);
        const ids = M._tdw_tokenize(tok, p, M.lengthBytesUTF8(text), 1);
        M._free(p);
        if (!ids) die(`tokenize failed on ${line.slice(0, 60)}`);
        out.push(str(ids));
    }
    process.stdout.write(out.join('\n') + '\n');
} else if (cmd === 'decide') {
    // decide EVIDENCE CRITERIA MODE THREADS MODEL...: per model a line "# MODEL kernels=SET", then its decisions
    const [evPath, crPath, mode, threads, ...models] = args;
    const ev = cstr(readFileSync(evPath, 'utf8')), cr = cstr(readFileSync(crPath, 'utf8'));
    const counts = threads.split(',').map(Number);
    for (const model of models) {
        const path = cstr(host(model));
        const m = M._tdw_model_load(path);
        M._free(path);
        if (!m) die(`cannot load ${model}`);
        for (const t of counts) {
            const t0 = performance.now();
            const res = M._tdw_decide(m, ev, cr, Number(mode), t, 0);
            const ms = performance.now() - t0;
            if (!res) die(`decide on ${model} failed`);
            process.stdout.write(`# ${model} kernels=${M.UTF8ToString(M._tdw_model_kernels(m))}` +
                                 (counts.length > 1 ? ` threads=${t}` : '') + '\n' + str(res));
            process.stderr.write(`wasm_run: decide ${model} (${t} threads): ${ms.toFixed(1)} ms\n`);
        }
        M._tdw_model_free(m);
    }
    M._free(ev), M._free(cr);
} else if (cmd === 'generate') {
    // generate MODEL PROMPT N TEMPERATURE SEED: {"prompt_ids", "ids", "text", "finish"} (TEMPERATURE -1: the model's)
    const [model, prompt, n, temp, seed, threads = '1'] = args;
    const path = cstr(host(model));
    const m = M._tdw_model_load(path);
    M._free(path);
    if (!m) die(`cannot load ${model}`);
    const p = cstr(prompt);
    const r = M._tdw_generate(m, p, Number(n), Number(temp), Number(seed), 0, Number(threads));
    M._free(p);
    if (!r) die(`generate on ${model} failed`);
    process.stdout.write(str(r) + '\n');
    M._tdw_model_free(m);
} else if (cmd === 'bench') {
    // bench MODEL N_PREFILL N_DECODE THREADS: tdw_bench's JSON
    const [model, np, nd, threads] = args;
    const path = cstr(host(model));
    const m = M._tdw_model_load(path);
    M._free(path);
    if (!m) die(`cannot load ${model}`);
    const r = M._tdw_bench(m, Number(np), Number(nd), Number(threads));
    if (!r) die(`bench on ${model} failed`);
    process.stdout.write(str(r) + '\n');
    M._tdw_model_free(m);
} else {
    process.stderr.write('usage: wasm_run.mjs tokenize TOK CORPUS | decide EVIDENCE CRITERIA MODE THREADS MODEL... | ' +
                         'generate MODEL PROMPT N TEMP SEED [THREADS] | bench MODEL N_PREFILL N_DECODE THREADS\n');
    process.exit(2);
}
// the threaded module's workers (worker_threads) would keep Node running
process.exit(0);
