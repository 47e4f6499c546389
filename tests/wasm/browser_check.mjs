// The WebAssembly module in headless Chromium (Debian's, driven by chromium.mjs): a page of a static server with
// COOP/COEP headers (serve_static.mjs) imports web/typedecide.mjs, which
// fetches the module; the model and tokenizer files are fetched into its virtual file system, then it tokenizes
// and decides. Writes the same outputs as wasm_run.mjs does under Node, for test_wasm.sh to compare with native:
//   node --experimental-websocket browser_check.mjs CHROMIUM OUTDIR CORPUS EVIDENCE CRITERIA \
//        --tok TOKENIZER... --models MODEL...
// OUTDIR/tok-I.ids (one per tokenizer, in order), OUTDIR/decide.jsonl ("# MODEL kernels=SET" sections),
// OUTDIR/worker.jsonl (the first two models' decisions made in a Worker, web/typedecide_worker.mjs),
// OUTDIR/info.json (crossOriginIsolated, the user agent, the ms of each decide).
// Threads (the page loads the threaded module, typedecide-mt, where it is cross-origin isolated):
// OUTDIR/st-SET.jsonl (the one-thread module, SET scalar, wasm128 and wasm128r (relaxed SIMD)), OUTDIR/mt-SET-T.jsonl (the threaded module
// with T = 1, 2, 4 threads), on the same page; then on a page that is not cross-origin isolated (/plain.html),
// OUTDIR/plain-wasm128.jsonl (the module create() picks there, asked for 4 threads); OUTDIR/threads.json (what each
// page and module said: isolated, threaded, threads, a 2-thread forward pass's pool_jobs).
// The module comes from TD_WASM_DIST (default web/dist), which must lie inside the working directory.
import { readFileSync, writeFileSync, readdirSync, statSync } from 'node:fs';
import { join, relative, resolve, basename } from 'node:path';
import { openPage } from './chromium.mjs';

const argv = process.argv.slice(2);
const [chromium, outDir, corpus, evPath, critPath] = argv;
const toks = [], models = [];
let list = null;
for (const a of argv.slice(5)) {
    if (a === '--tok') list = toks;
    else if (a === '--models') list = models;
    else list.push(a);
}
const root = process.cwd();
const url = (p) => '/' + relative(root, resolve(p)).split('\\').join('/');
const dist = url(process.env.TD_WASM_DIST || 'web/dist') + '/';
// a model's files: a GGUF file, or the files of a Hugging Face directory the loader reads
const modelFiles = (m) => statSync(m).isFile() ? [m] : readdirSync(m).filter((f) =>
    /^(config\.json|generation_config\.json|tokenizer\.json|tokenizer_config\.json|.*\.safetensors|model\.safetensors\.index\.json)$/.test(f))
    .map((f) => join(m, f));

let fails = 0, page = null;
try {
    page = await openPage(chromium);
    const { js } = page;
    const texts = readFileSync(corpus, 'utf8').split('\n').filter((l) => l.trim()).map((l) => JSON.parse(l).text);
    const job = { toks: toks.map(url), texts, models: models.map((m) => ({ name: m, files: modelFiles(m).map(url),
                  base: basename(m) })), evidence: readFileSync(evPath, 'utf8'), criteria: readFileSync(critPath, 'utf8') };
    const res = await js(`(async () => {
        const job = ${JSON.stringify(job)};
        const { Typedecide } = await import('/web/typedecide.mjs');
        const t0 = performance.now();
        const td = await Typedecide.create({ base: new URL(${JSON.stringify(dist)}, location.href) });
        const out = { isolated: self.crossOriginIsolated, ua: navigator.userAgent, load_ms: performance.now() - t0,
                      toks: [], decide: '', ms: {} };
        for (const [i, t] of job.toks.entries()) {
            const path = '/t' + i + '/' + t.split('/').pop();
            await td.addFileFromUrl(path, t);
            const tok = td.loadTokenizer(path);
            out.toks.push(job.texts.map((x) => JSON.stringify(tok.tokenize(x))).join('\\n') + '\\n');
            tok.free();
        }
        for (const [i, m] of job.models.entries()) {
            const dir = '/m' + i;
            for (const f of m.files) await td.addFileFromUrl(dir + '/' + f.split('/').pop(), f);
            const model = td.loadModel(m.files.length === 1 && m.files[0].endsWith('.gguf')
                                       ? dir + '/' + m.files[0].split('/').pop() : dir);
            const t1 = performance.now();
            const lines = model.decideJsonl(job.evidence, job.criteria);
            out.ms[m.name] = performance.now() - t1;
            out.decide += '# ' + m.name + ' kernels=' + model.kernels + '\\n' + lines;
            model.free();
        }
        // the same decisions from the module in a Worker (web/typedecide_worker.mjs), for the first two models
        const worker = new Worker('/web/typedecide_worker.mjs?base=' +
                                  encodeURIComponent(new URL(${JSON.stringify(dist)}, location.href).href), { type: 'module' });
        let wid = 0;
        const call = (msg) => new Promise((ok, no) => {
            const id = ++wid;
            const h = (e) => {
                if (e.data.id !== id) return;
                worker.removeEventListener('message', h);
                e.data.error ? no(new Error('worker: ' + e.data.error)) : ok(e.data.result);
            };
            worker.addEventListener('message', h);
            worker.postMessage({ ...msg, id });
        });
        out.worker = '';
        for (const [i, m] of job.models.slice(0, 2).entries()) {
            const dir = '/w' + i;
            for (const f of m.files) await call({ op: 'addFileFromUrl', path: dir + '/' + f.split('/').pop(), url: f });
            const h = await call({ op: 'loadModel', path: m.files.length === 1 ? dir + '/' + m.files[0].split('/').pop() : dir });
            const d = await call({ op: 'decide', model: h, evidence: job.evidence, criteria: job.criteria });
            out.worker += '# ' + m.name + '\\n' + d.map((x) => JSON.stringify(x)).join('\\n') + '\\n';
            await call({ op: 'freeModel', model: h });
        }
        worker.terminate();
        return out; })()`);
    res.toks.forEach((t, i) => writeFileSync(join(outDir, `tok-${i}.ids`), t));
    writeFileSync(join(outDir, 'decide.jsonl'), res.decide);
    writeFileSync(join(outDir, 'worker.jsonl'), res.worker);
    writeFileSync(join(outDir, 'info.json'), JSON.stringify({ isolated: res.isolated, ua: res.ua, load_ms: res.load_ms,
                                                              decide_ms: res.ms }, null, 1));
    console.log(`browser_check: ${res.ua.match(/Chrome\/[\d.]+/)?.[0]}, crossOriginIsolated ${res.isolated}, ` +
                `${toks.length} tokenizers, ${models.length} models`);

    // Threads. run(job) in the page: a module made by Typedecide.create(job.create) decides with each kernel set and
    // each thread count of the job, and runs a 2-thread forward pass on the tiny model (pool_jobs: the jobs its
    // pool handed to worker threads).
    const run = `async (job) => {
        const { Typedecide } = await import('/web/typedecide.mjs');
        const td = await Typedecide.create({ ...job.create, base: new URL(job.dist, location.href) });
        const out = { isolated: self.crossOriginIsolated, threaded: td.threaded, threads: td.threads, decide: {} };
        for (const set of job.sets) out.decide[set] = {};
        for (const [i, m] of job.models.entries()) {
            const dir = '/m' + i;
            for (const f of m.files) await td.addFileFromUrl(dir + '/' + f.split('/').pop(), f);
            const gguf = m.files.length === 1 && m.files[0].endsWith('.gguf');
            const path = gguf ? dir + '/' + m.files[0].split('/').pop() : dir;
            for (const set of job.sets) {
                td.setKernels(set);
                const model = td.loadModel(path);
                for (const t of job.threads)
                    out.decide[set][t] = (out.decide[set][t] || '') + '# ' + m.name + ' kernels=' + model.kernels +
                        '\\n' + model.decideJsonl(job.evidence, job.criteria, { threads: t });
                if (m.name === job.tiny) out.bench = model.bench(16, 4, { threads: 2 });
                model.free();
            }
        }
        return out; }`;
    const tjob = (create, sets, threads) => JSON.stringify({ ...job, toks: undefined, texts: undefined, create, sets,
        threads, dist, tiny: models.find((m) => m.endsWith('qwen3-tiny-tied-f32.gguf')) });
    const info = {};
    const keep = (key, r, name) => {
        info[key] = { isolated: r.isolated, threaded: r.threaded, threads: r.threads, bench: r.bench };
        for (const [set, byT] of Object.entries(r.decide))
            for (const [t, text] of Object.entries(byT)) writeFileSync(join(outDir, name(set, t)), text);
    };
    // wasm128r: the relaxed SIMD set (Chromium runs relaxed SIMD), instantiated on each of the threads' Workers
    keep('st', await js(`(${run})(${tjob({ threads: 1 }, ['scalar', 'wasm128', 'wasm128r'], [1])})`),
         (set) => `st-${set}.jsonl`);
    keep('mt', await js(`(${run})(${tjob({ threads: 4 }, ['scalar', 'wasm128', 'wasm128r'], [1, 2, 4])})`),
         (set, t) => `mt-${set}-${t}.jsonl`);
    // a page that is not cross-origin isolated: no SharedArrayBuffer, so the one-thread module, whatever is asked
    await page.cdp('Page.navigate', { url: page.origin + '/plain.html' });
    const loaded = `location.pathname === '/plain.html' && document.readyState === 'complete'`;
    for (const t0 = Date.now(); !(await js(loaded)); await new Promise((r) => setTimeout(r, 50)))
        if (Date.now() - t0 > 60000) throw new Error('/plain.html did not load');
    keep('plain', await js(`(${run})(${tjob({ threads: 4 }, ['wasm128'], [4])})`), (set) => `plain-${set}.jsonl`);
    writeFileSync(join(outDir, 'threads.json'), JSON.stringify(info, null, 1));
    console.log('browser_check: threads: ' + JSON.stringify(info));
} catch (e) {
    fails++;
    console.error('FAIL: browser_check: ' + e.message);
}
if (page) await page.close();
process.exit(fails ? 1 : 0);
