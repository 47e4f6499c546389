// The WebAssembly module in headless Chromium (Debian's, driven by chromium.mjs): a page of a static server with
// COOP/COEP headers (serve_static.mjs) imports web/typedecide.mjs, which
// fetches the module; the model and tokenizer files are fetched into its virtual file system, then it tokenizes
// and decides. Writes the same outputs as wasm_run.mjs does under Node, for test_wasm.sh to compare with native:
//   node --experimental-websocket browser_check.mjs CHROMIUM OUTDIR CORPUS EVIDENCE CRITERIA \
//        --tok TOKENIZER... --models MODEL...
// OUTDIR/tok-I.ids (one per tokenizer, in order), OUTDIR/decide.jsonl ("# MODEL kernels=SET" sections),
// OUTDIR/worker.jsonl (the first two models' decisions made in a Worker, web/typedecide_worker.mjs),
// OUTDIR/info.json (crossOriginIsolated, the user agent, the ms of each decide).
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
        const td = await Typedecide.create();
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
        const worker = new Worker('/web/typedecide_worker.mjs', { type: 'module' });
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
} catch (e) {
    fails++;
    console.error('FAIL: browser_check: ' + e.message);
}
if (page) await page.close();
process.exit(fails ? 1 : 0);
