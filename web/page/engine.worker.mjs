// The page's engine: typedecide's WebAssembly module (../typedecide.mjs) in a Web Worker, so that the page never
// freezes while a model loads or decides. Messages in {id, op, ...}; out {id, result} | {id, error} and, while an op
// runs, {id, progress: {loaded, total, what}} (loading) or {id, token: text} (chat).
//   init {base}                          the module from base (the folder of typedecide.js + .wasm)
//   loadDemo {url, files}                a Hugging Face folder at url (its files fetched) -> model info
//   loadFile {file}                      a GGUF File picked on the page (read here; it never leaves the machine)
//   decide {evidence, criteria}          criteria: JSONL text -> {decisions, ms}
//   chat {text, system, think, maxTokens, temperature}   one turn of the conversation (Model.chat's session, its
//                                        KV reused from turn to turn; a new session when system or think change),
//                                        tokens streamed -> the ChatReply {text, finish, nPrompt, nReused, ...}
//   cancel {}                            stops the turn running now (its reply ends with finish "cancelled")
//   resetChat {}                         a new conversation
// Nothing computes here: every number comes from the C library through typedecide.mjs.
import { Typedecide } from '../typedecide.mjs';

let td = null, model = null, session = null, sessionKey = '';

function post(id, m) { self.postMessage({ id, ...m }); }

// The bytes of a response body read chunk by chunk, with progress as they come (total: Content-Length, or 0).
async function readAll(stream, total, onChunk) {
    const reader = stream.getReader(), chunks = [];
    let loaded = 0;
    for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        chunks.push(value);
        loaded += value.length;
        onChunk(loaded, total);
    }
    const out = new Uint8Array(loaded);
    let at = 0;
    for (const c of chunks) out.set(c, at), at += c.length;
    return out;
}

function info(how) {
    return { arch: model.arch, kernels: model.kernels, how };
}

function freeModel() {
    if (session && session.free) session.free();
    session = null, sessionKey = '';
    if (model) model.free();
    model = null;
}

const ops = {
    async init(m) {
        td = await Typedecide.create(m.base ? { base: new URL(m.base, self.location.href) } : {});
        return { version: td.version(), threads: td.threads || 1 };
    },
    async loadDemo(m) {
        freeModel();
        const base = new URL(m.url, self.location.href);
        // every file's size first, for one progress bar over all of them
        const sizes = await Promise.all(m.files.map(async (f) => {
            const r = await fetch(new URL(f, base), { method: 'HEAD' });
            if (!r.ok) throw new Error(`${new URL(f, base).pathname}: HTTP ${r.status} (the demo model is served ` +
                                       'from the repository: serve its root, not web/page/)');
            return Number(r.headers.get('Content-Length')) || 0;
        }));
        const total = sizes.reduce((a, b) => a + b, 0);
        let before = 0;
        for (const [i, f] of m.files.entries()) {
            const r = await fetch(new URL(f, base));
            if (!r.ok) throw new Error(`${f}: HTTP ${r.status}`);
            const bytes = await readAll(r.body, total, (n) => post(m.id, { progress: { loaded: before + n, total, what: f } }));
            td.addFile(`/demo/${f}`, bytes);
            before += sizes[i] || bytes.length;
        }
        model = td.loadModel('/demo');
        return info('demo');
    },
    async loadFile(m) {
        freeModel();
        const f = m.file;
        const name = f.name.replace(/[^A-Za-z0-9._-]/g, '_') || 'model.gguf';
        const head = new Uint8Array(await f.slice(0, 4).arrayBuffer());
        const magic = String.fromCharCode(...head);
        if (magic !== 'GGUF')
            throw new Error(`${f.name} is not a GGUF file: it starts with ${JSON.stringify(magic)} where a GGUF ` +
                            'starts with "GGUF" (Hugging Face folders: use the demo button or the library)');
        const onProgress = (p) => post(m.id, { progress: { loaded: p.loaded, total: p.total || 0, what: f.name } });
        if (td.load) { // streamed into the module's memory, one copy (typedecide.mjs's load)
            model = await td.load(f, { onProgress, name: f.name });
            return info('file');
        }
        const bytes = await readAll(f.stream(), f.size, (n, t) => onProgress({ loaded: n, total: t }));
        td.addFile(`/local/${name}`, bytes);
        try {
            model = td.loadModel(`/local/${name}`);
        } finally {
            td.M.FS.unlink(`/local/${name}`); // the model holds what it needs: the file's copy is not kept
        }
        return info('file');
    },
    decide(m) {
        if (!model) throw new Error('no model loaded: load the demo model or open a GGUF file first');
        const t0 = performance.now();
        const decisions = model.decide(m.evidence, m.criteria);
        return { decisions, ms: performance.now() - t0 };
    },
    async chat(m) {
        if (!model) throw new Error('no model loaded: load the demo model or open a GGUF file first');
        if (!model.chat) throw new Error('this build of web/typedecide.mjs has no chat (Model.chat)');
        const key = JSON.stringify([m.system || '', !!m.think]);
        if (!session || key !== sessionKey) {
            session = model.chat({ system: m.system || undefined, think: !!m.think });
            sessionKey = key;
        }
        const opts = { onToken: (t) => post(m.id, { token: t.text }) };
        if (m.maxTokens > 0) opts.maxTokens = m.maxTokens;
        if (Number.isFinite(m.temperature)) opts.temperature = m.temperature;
        return strip(await session.send(m.text, opts));
    },
    cancel() {
        if (model && model.cancel) model.cancel();
        return true;
    },
    resetChat() {
        if (session && session.reset) session.reset();
        session = null;
        return true;
    },
};
// what of a reply can be posted (numbers, strings, arrays)
function strip(r) {
    const out = {};
    for (const [k, v] of Object.entries(r)) if (typeof v !== 'function') out[k] = v;
    return out;
}

self.onmessage = async (e) => {
    const m = e.data;
    try {
        if (!ops[m.op]) throw new Error(`unknown op ${m.op}`);
        if (m.op !== 'init' && !td) throw new Error('the engine is not started (init first)');
        post(m.id, { result: await ops[m.op](m) });
    } catch (err) {
        post(m.id, { error: String((err && err.message) || err) });
    }
};
