// typedecide in a Web Worker, so that a page never freezes while the engine loads or computes: the Worker owns one
// Typedecide (typedecide.mjs) and answers messages {id, op, ...} with {id, result} or {id, error}:
//   {op: 'addFileFromUrl', path, url}     fetch a file into the module's file system (inside the Worker)
//   {op: 'addFile', path, bytes}          bytes: an ArrayBuffer (transfer it: no second copy on this side)
//   {op: 'loadModel', path, kernels?}     -> a model handle (a number)
//   {op: 'decide', model, evidence, criteria, mode?, threads?}   -> the decisions
//   {op: 'tokenize', model, text}         -> the ids, by the model's tokenizer
//   {op: 'generate', model, prompt, options?}   -> {prompt_ids, ids, text, finish} (Model.generate)
//   {op: 'freeModel', model}
// The page side: const w = new Worker(new URL('typedecide_worker.mjs', import.meta.url), {type: 'module'}).
import { Typedecide } from './typedecide.mjs';

const ready = Typedecide.create();
const models = new Map();
let next = 1;

const ops = {
    async addFileFromUrl(td, m) { await td.addFileFromUrl(m.path, m.url); return true; },
    addFile(td, m) { td.addFile(m.path, m.bytes); return true; },
    loadModel(td, m) {
        if (m.kernels) td.setKernels(m.kernels);
        const h = next++;
        models.set(h, td.loadModel(m.path));
        return h;
    },
    decide(td, m) { return model(m).decide(m.evidence, m.criteria, { mode: m.mode, threads: m.threads }); },
    tokenize(td, m) { return model(m).tokenizer().tokenize(m.text); },
    generate(td, m) { return model(m).generate(m.prompt, m.options); },
    freeModel(td, m) { model(m).free(); models.delete(m.model); return true; },
};
function model(m) {
    const x = models.get(m.model);
    if (!x) throw new Error(`no model ${m.model} in this worker`);
    return x;
}

self.onmessage = async (e) => {
    const m = e.data;
    try {
        const td = await ready;
        if (!ops[m.op]) throw new Error(`unknown op ${m.op}`);
        self.postMessage({ id: m.id, result: await ops[m.op](td, m) });
    } catch (err) {
        self.postMessage({ id: m.id, error: String(err && err.message || err) });
    }
};
