// typedecide in a Web Worker, so that a page never freezes while the engine loads or computes: the Worker owns one
// Typedecide (typedecide.mjs) and answers messages {id, op, ...} with {id, result} or {id, error}:
//   {op: 'addFileFromUrl', path, url}     fetch a file into the module's file system (inside the Worker)
//   {op: 'addFile', path, bytes}          bytes: an ArrayBuffer (transfer it: no second copy on this side)
//   {op: 'loadModel', path, kernels?}     -> a model handle (a number)
//   {op: 'decide', model, evidence, criteria, mode?, threads?}   -> the decisions
//   {op: 'tokenize', model, text}         -> the ids, by the model's tokenizer
//   {op: 'generate', model, prompt, options?}   -> {prompt_ids, ids, text, finish} (Model.generate)
//   {op: 'freeModel', model}
//   {op: 'load', source, name?, kernels?}  source: a URL, File, Blob or ArrayBuffer (transfer it) streamed into the
//                                         module's memory (Typedecide.load); posts {id, progress: {loaded, total}}
//                                         while it reads; -> a model handle
//   {op: 'stream', model, options}         Model.generate({prompt, maxTokens, temperature, seed, ...}); posts
//                                         {id, token: {token, text, index}} per token; -> the result
//   {op: 'chat', model, options}           -> a session handle (ChatSession: system, think, maxTokens, ...)
//   {op: 'send', session, text, options?}  ChatSession.send; posts {id, token} per token; -> the reply
//   {op: 'reset', session}                 a new conversation
//   {op: 'cancel', model}                  cancels the model's running generation (it resolves "cancelled")
//   {op: 'memory'}                         -> the module's memory in bytes
// The page side: const w = new Worker(new URL('typedecide_worker.mjs', import.meta.url), {type: 'module'}).
import { Typedecide } from './typedecide.mjs';

// ?base=URL: where the module's .js and .wasm are; ?threads=N: Typedecide.create's threads
const q = new URL(self.location.href).searchParams;
const ready = Typedecide.create({ ...(q.get('base') ? { base: q.get('base') } : {}),
                                  ...(q.get('threads') ? { threads: Number(q.get('threads')) } : {}) });
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
    async load(td, m) {
        const h = next++;
        models.set(h, await td.load(m.source, { name: m.name, kernels: m.kernels,
            onProgress: (p) => self.postMessage({ id: m.id, progress: p }) }));
        return h;
    },
    stream(td, m) {
        return model(m).generate({ ...m.options, onToken: (t) => self.postMessage({ id: m.id, token: t }) });
    },
    chat(td, m) {
        const h = next++;
        sessions.set(h, model(m).chat(m.options || {}));
        return h;
    },
    send(td, m) {
        return session(m).send(m.text, { ...m.options, onToken: (t) => self.postMessage({ id: m.id, token: t }) });
    },
    reset(td, m) { session(m).reset(); return true; },
    cancel(td, m) { model(m).cancel(); return true; },
    memory(td) { return td.memoryBytes(); },
};
const sessions = new Map();
function session(m) {
    const x = sessions.get(m.session);
    if (!x) throw new Error(`no chat session ${m.session} in this worker`);
    return x;
}
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
