// typedecide in JavaScript: the C engine compiled to WebAssembly (web/build.sh -> dist/typedecide.js + .wasm),
// wrapped for the browser (page or Worker) and Node. Models and tokenizers are files of the module's virtual file
// system: write their bytes in (addFile; a Hugging Face directory is several files in one folder, a GGUF one file),
// then load by path, as the native library loads from disk.
//
//   import { Typedecide } from './typedecide.mjs';
//   const td = await Typedecide.create();                 // fetches dist/typedecide.{js,wasm} beside this file
//   await td.addFileFromUrl('/m/model.gguf', url);        // or td.addFile(path, ArrayBuffer | Uint8Array)
//   const model = td.loadModel('/m/model.gguf');
//   const decisions = model.decide(evidence, criteria);   // criteria: [{id, question, options: [{id, description}]}]
//   model.free();
//
// A GGUF model loads straight into the module's memory, streamed chunk by chunk (no second copy), with progress:
//   const model = await td.load(urlOrFileOrBlobOrArrayBuffer, { onProgress: ({ loaded, total }) => ... });
// Generation and chat stream their tokens (the library's td_gen: KV reused across turns, Qwen3.5 snapshots):
//   await model.generate({ prompt, maxTokens, temperature, seed, onToken: (t) => ..., signal });
//   const chat = model.chat({ system });  const reply = await chat.send('Hello', { onToken });
//
// Errors are thrown as Error with the library's message (td_last_error). Nothing here computes: every number comes
// from the C library.
//
// Threads: two modules from the same sources (web/build.sh). typedecide-mt.{js,wasm,worker.js} runs the engine's
// thread pool on Web Workers over shared memory; it needs SharedArrayBuffer, which a browser gives only to a
// cross-origin isolated page (COOP same-origin + COEP require-corp headers), and Node always. typedecide.{js,wasm}
// runs one thread anywhere. create() picks the threaded one where it can run and more than one thread is asked for,
// else the other; td.threads is how many threads the engine may use (the default of decide, generate, bench), and
// the results are the same bits with any number of threads (the engine's rule; tests/test_wasm*.sh check it).
const isNode = typeof process === 'object' && process.versions && process.versions.node;

// Whether this context can run the threaded module: shared memory (SharedArrayBuffer; a cross-origin isolated page).
export function canThread() {
    return typeof SharedArrayBuffer === 'function' && (isNode || globalThis.crossOriginIsolated === true);
}

async function defaultThreads() {
    if (isNode) {
        const os = await import('node:os');
        return os.availableParallelism ? os.availableParallelism() : os.cpus().length;
    }
    return globalThis.navigator?.hardwareConcurrency || 1;
}

async function loadFactory(base, name) {
    const glue = new URL(name + '.js', base);
    if (isNode) {
        const { createRequire } = await import('node:module');
        const { fileURLToPath } = await import('node:url');
        return createRequire(import.meta.url)(fileURLToPath(glue));
    }
    // The glue is a classic script (MODULARIZE): evaluated here, it hands back its factory without a global.
    const text = await (await fetch(glue)).text();
    return new Function(`${text}\nreturn createTypedecide;`)();
}

async function loadBytes(url) {
    if (isNode && url.protocol === 'file:') {
        const { readFile } = await import('node:fs/promises');
        return new Uint8Array(await readFile(url));
    }
    const r = await fetch(url);
    if (!r.ok) throw new Error(`${url}: HTTP ${r.status}`);
    return new Uint8Array(await r.arrayBuffer());
}

// The wasm32 ceiling of the module's memory (-sMAXIMUM_MEMORY=4GB) and what load() keeps beyond the weights.
export const MAX_MEMORY = 4 * 1024 ** 3;
const RESERVE = 256 * 1024 ** 2;
const fmtBytes = (n) => n >= 1024 ** 3 ? `${(n / 1024 ** 3).toFixed(2)} GiB (${n} bytes)`
    : `${(n / 1024 ** 2).toFixed(1)} MiB (${n} bytes)`;

// A model's bytes as a stream: {name, total (null: unknown), read(M, ptr, at, size) -> Uint8Array chunk | number of
// bytes written in place at ptr + at | null at the end, close()}.
async function openSource(source, name) {
    const fromReader = (reader, total, label) => ({
        name: name || label, total,
        async read() { const { done, value } = await reader.read(); return done ? null : value; },
        async close() { try { await reader.cancel(); } catch { /* done */ } },
    });
    if (source instanceof ArrayBuffer || ArrayBuffer.isView(source)) {
        const u8 = source instanceof ArrayBuffer ? new Uint8Array(source)
            : new Uint8Array(source.buffer, source.byteOffset, source.byteLength);
        let at = 0;
        const CHUNK = 16 << 20;
        return { name: name || 'model.gguf', total: u8.length, async read() {
            if (at >= u8.length) return null;
            const c = u8.subarray(at, Math.min(at + CHUNK, u8.length));
            at += c.length;
            return c;
        }, async close() {} };
    }
    if (typeof Blob !== 'undefined' && source instanceof Blob)
        return fromReader(source.stream().getReader(), source.size, source.name || 'model.gguf');
    const isUrl = source instanceof URL || /^[a-z][a-z0-9+.-]*:/i.test(source);
    if (isNode && (!isUrl || String(source).startsWith('file:'))) {
        const { open } = await import('node:fs/promises');
        const { fileURLToPath } = await import('node:url');
        const path = isUrl ? fileURLToPath(source) : String(source);
        const fh = await open(path, 'r');
        const total = (await fh.stat()).size;
        const CHUNK = 16 << 20;
        return { name: name || path.split('/').pop(), total, async read(M, ptr, at, size) {
            if (at >= size) return null;
            // straight into the module's memory: no intermediate buffer
            const { bytesRead } = await fh.read(M.HEAPU8, ptr + at, Math.min(CHUNK, size - at), at);
            return bytesRead ? bytesRead : null;
        }, async close() { await fh.close(); } };
    }
    const url = new URL(source, isNode ? undefined : location.href);
    const r = await fetch(url);
    if (!r.ok) throw new Error(`${url}: HTTP ${r.status}`);
    const len = r.headers.get('content-length');
    // a compressed body's Content-Length is not the model's size: then it is unknown
    const total = len !== null && !r.headers.get('content-encoding') ? Number(len) : null;
    return fromReader(r.body.getReader(), total, decodeURIComponent(url.pathname.split('/').pop() || 'model.gguf'));
}

// Lets the event loop run between two steps of a generation (a cancel, a message, a repaint): a macrotask without
// setTimeout's clamping.
const yieldNow = isNode ? () => new Promise((r) => setImmediate(r)) : (() => {
    const ch = new MessageChannel(), queue = [];
    ch.port1.onmessage = () => queue.shift()();
    return () => new Promise((r) => { queue.push(r); ch.port2.postMessage(0); });
})();

export class Typedecide {
    // base: the folder of the modules (default: dist/ beside this file). threads: the most threads the engine may
    // use (default: the machine's cores, at most 16); 1, or a context without shared memory (canThread() false: a
    // page that is not cross-origin isolated), loads the one-thread module. The threaded module starts threads - 1
    // Web Workers (worker_threads under Node) with the module, before any call.
    static async create({ base = new URL('dist/', import.meta.url), threads } = {}) {
        base = new URL(base);
        threads = Math.max(1, Math.min(16, Math.floor(Number(threads ?? await defaultThreads())) || 1));
        if (!canThread()) threads = 1;
        const name = threads > 1 ? 'typedecide-mt' : 'typedecide';
        const factory = await loadFactory(base, name);
        // wasmBinary given: emscripten 3.1.6's glue would fetch() a file path under Node, which Node's fetch refuses
        const wasmBinary = await loadBytes(new URL(name + '.wasm', base));
        const opts = { wasmBinary, print: () => {}, printErr: () => {} };
        if (threads > 1) {
            opts.tdWorkers = threads - 1; // the pool of pthread Workers (PTHREAD_POOL_SIZE in web/CMakeLists.txt)
            if (!isNode) { // the glue was evaluated from its text: its Workers need its URL, and that of its worker.js
                opts.mainScriptUrlOrBlob = new URL(name + '.js', base).href;
                opts.locateFile = (file) => new URL(file, base).href;
            }
        }
        const M = await factory(opts);
        // under Node the pthread workers (worker_threads) would keep the process alive after its last line
        if (threads > 1 && isNode) for (const w of M.PThread.unusedWorkers.concat(M.PThread.runningWorkers)) w.unref();
        if (threads > 1) { // memory grown by another thread leaves this one's views on the old buffer: M.HEAPU8 checks
            let u8 = M.HEAPU8;
            Object.defineProperty(M, 'HEAPU8', { configurable: true, set: (v) => { u8 = v; },
                get: () => u8.length === M.wasmMemory.buffer.byteLength ? u8 : (u8 = new Uint8Array(M.wasmMemory.buffer)) });
        }
        return new Typedecide(M, threads);
    }

    constructor(M, threads = 1) {
        this.M = M;
        this.threaded = !!M._tdw_threaded(); // typedecide-mt
        this.threads = this.threaded ? threads : 1;
    }

    // TD_KERNELS in the module's environment ("wasm128r" (relaxed SIMD: the default where the engine has it),
    // "wasm128" (SIMD128: the default elsewhere) or "scalar"; all give the same bits): the set models load with next.
    setKernels(name) {
        const [k] = this._cstr('TD_KERNELS'), [v] = this._cstr(name);
        this.M._tdw_setenv(k, v);
        this.M._free(k), this.M._free(v);
    }

    version() { return this.M.UTF8ToString(this.M._tdw_version()); }

    // Writes bytes into the virtual file system at path (its folders are made).
    addFile(path, bytes) {
        const parts = path.split('/').filter(Boolean);
        let at = '';
        for (const p of parts.slice(0, -1)) {
            at += '/' + p;
            if (!this.M.FS.analyzePath(at).exists) this.M.FS.mkdir(at);
        }
        this.M.FS.writeFile(path, bytes instanceof Uint8Array ? bytes : new Uint8Array(bytes));
    }
    async addFileFromUrl(path, url) { this.addFile(path, await loadBytes(new URL(url, isNode ? undefined : location.href))); }

    _error(what) { return new Error(`${what}: ${this.M.UTF8ToString(this.M._tdw_error())}`); }
    _cstr(s) {
        const n = this.M.lengthBytesUTF8(s) + 1, p = this.M._malloc(n);
        this.M.stringToUTF8(s, p, n);
        return [p, n - 1];
    }
    _take(ptr) {
        const s = this.M.UTF8ToString(ptr >>> 0); // >>> 0: an address past 2 GiB arrives negative
        this.M._tdw_free(ptr);
        return s;
    }

    // The module's linear memory now, in bytes (it only grows): what loading a model took.
    memoryBytes() { return this.M._tdw_memory_bytes(); }

    // Loads a GGUF model from a URL (string or URL; in Node also a file path), a File or Blob, or an ArrayBuffer /
    // Uint8Array, streamed into one buffer of the module's memory that the model then owns
    // (td_model_load_buffer): the bytes are never held twice by the module. The size is checked before anything
    // is read (Content-Length, File.size): past what the wasm32 memory can hold the load is refused at once,
    // saying so. onProgress({loaded, total}) after every chunk (total: null when the server does not say).
    // A Hugging Face directory (config.json, *.safetensors, tokenizer.json) goes through addFile + loadModel.
    // The model becomes this object's current one (td.generate, td.chat).
    async load(source, { onProgress = null, name = null, kernels = null } = {}) {
        const src = await openSource(source, name);
        const label = src.name;
        let ptr = 0;
        try {
            if (src.total === 0) throw new Error(`${label}: empty (0 bytes), not a GGUF model`);
            if (src.total !== null) this._checkFits(label, src.total);
            let size = src.total ?? 64 << 20, at = 0;
            ptr = this._alloc(label, size);
            for (;;) {
                const chunk = await src.read(this.M, ptr, at, size);
                if (chunk === null) break;
                if (typeof chunk === 'number') at += chunk; // read in place (Node's file handle)
                else {
                    if (at + chunk.length > size) {
                        if (src.total !== null)
                            throw new Error(`${label}: more bytes than the ${src.total} announced (Content-Length)`);
                        // no size announced: grow (the one case that copies: the old buffer and the new one)
                        let grown = size;
                        while (grown < at + chunk.length) grown *= 2;
                        this._checkFits(label, grown);
                        const p2 = this._alloc(label, grown);
                        this.M.HEAPU8.copyWithin(p2, ptr, ptr + at);
                        this.M._tdw_free(ptr);
                        ptr = p2, size = grown;
                    }
                    this.M.HEAPU8.set(chunk, ptr + at); // HEAPU8 re-read: memory may have grown since
                    at += chunk.length;
                }
                if (onProgress) onProgress({ loaded: at, total: src.total });
            }
            if (src.total !== null && at !== src.total)
                throw new Error(`${label}: the download ended after ${at} of ${src.total} bytes`);
            if (!at) throw new Error(`${label}: empty (0 bytes), not a GGUF model`);
            if (kernels) this.setKernels(kernels);
            const [np] = this._cstr(label);
            const p = ptr;
            ptr = 0; // the library owns it from here, failure included
            const h = this.M._tdw_model_load_buffer(p, at, np);
            this.M._free(np);
            if (!h) throw this._error(`cannot load ${label}`);
            this.model = new Model(this, h);
            return this.model;
        } catch (e) {
            if (ptr) this.M._tdw_free(ptr);
            throw e;
        } finally {
            await src.close();
        }
    }
    // Refuses, before anything is read, a model the module's memory cannot hold: the wasm32 ceiling (4 GiB) less
    // what the module holds now, less a working reserve (KV cache, activations: 256 MiB).
    _checkFits(label, bytes) {
        const now = this.memoryBytes(), room = MAX_MEMORY - now - RESERVE;
        if (bytes > room)
            throw new Error(`${label} is ${fmtBytes(bytes)}: too large for this module's memory. WebAssembly (wasm32) ` +
                `addresses at most ${fmtBytes(MAX_MEMORY)}; the module holds ${fmtBytes(now)} and keeps ` +
                `${fmtBytes(RESERVE)} for the KV cache and activations, which leaves ${fmtBytes(Math.max(room, 0))} ` +
                `for the weights. Use a smaller or more quantised model (e.g. Q4_0)`);
    }
    _alloc(label, bytes) {
        const p = this.M._tdw_buffer_new(bytes) >>> 0;
        if (!p)
            throw new Error(`${label}: cannot grow the module's memory to hold ${fmtBytes(bytes)} (it holds ` +
                `${fmtBytes(this.memoryBytes())} of at most ${fmtBytes(MAX_MEMORY)}): the browser (or Node) ` +
                'refused to grow it');
        return p;
    }
    // The current model's generate and chat (the model last loaded with load()).
    generate(options) { return this._current().generate(options); }
    chat(options) { return this._current().chat(options); }
    _current() {
        if (!this.model || !this.model.h) throw new Error('no model loaded: await td.load(...) first');
        return this.model;
    }

    loadModel(path) {
        const [p] = this._cstr(path);
        const h = this.M._tdw_model_load(p);
        this.M._free(p);
        if (!h) throw this._error(`cannot load ${path}`);
        return new Model(this, h);
    }
    // A tokenizer.json, or a GGUF file's tokenizer.
    loadTokenizer(path) {
        const [p] = this._cstr(path);
        const h = this.M._tdw_tokenizer_load(p);
        this.M._free(p);
        if (!h) throw this._error(`cannot load ${path}`);
        return new Tokenizer(this, h, true);
    }
}

export class Tokenizer {
    constructor(td, h, owned) { this.td = td, this.h = h, this.owned = owned; }
    // Token ids of text, added tokens (<|im_start|>, ...) split out as Hugging Face's tokenizers does.
    tokenize(text, { parseSpecial = true } = {}) {
        const [p, n] = this.td._cstr(text);
        const r = this.td.M._tdw_tokenize(this.h, p, n, parseSpecial ? 1 : 0);
        this.td.M._free(p);
        if (!r) throw this.td._error('tokenize');
        return JSON.parse(this.td._take(r));
    }
    free() { if (this.owned && this.h) this.td.M._tdw_tokenizer_free(this.h); this.h = 0; }
}

export const DecideMode = Object.freeze({ batch: 0, serial: 1, fresh: 2 });

export class Model {
    constructor(td, h) { this.td = td, this.h = h; }
    get arch() { return this.td.M.UTF8ToString(this.td.M._tdw_model_arch(this.h)); }
    get kernels() { return this.td.M.UTF8ToString(this.td.M._tdw_model_kernels(this.h)); }
    tokenizer() {
        const t = this.td.M._tdw_model_tokenizer(this.h);
        if (!t) throw new Error('the model has no tokenizer');
        return new Tokenizer(this.td, t, false);
    }
    // criteria: an array of {id, question, options: [{id, description}]} (a row may carry its own evidence), or
    // the JSONL text of a criteria file. Returns one decision per criterion ({id, answer, letter, options, probs,
    // suffix_tokens}), the objects `typedecide decide` prints.
    decide(evidence, criteria, { mode = 'batch', threads = this.td.threads } = {}) {
        return this.decideJsonl(evidence, typeof criteria === 'string' ? criteria
            : criteria.map((c) => JSON.stringify(c)).join('\n'), { mode, threads })
            .split('\n').filter((l) => l).map((l) => JSON.parse(l));
    }
    decideJsonl(evidence, criteriaJsonl, { mode = 'batch', threads = this.td.threads } = {}) {
        const M = this.td.M;
        const [ev] = this.td._cstr(evidence), [cr] = this.td._cstr(criteriaJsonl);
        const r = M._tdw_decide(this.h, ev, cr, DecideMode[mode] ?? Number(mode), threads, 0);
        M._free(ev), M._free(cr);
        if (!r) throw this.td._error('decide');
        return this.td._take(r);
    }
    // {arch, kernels, n_vocab, n_ctx_train, hybrid, chat_family, can_generate, name}
    get info() { return JSON.parse(this.td._take(this.td.M._tdw_model_info(this.h))); }

    // Streams a continuation of prompt (added tokens such as <|im_start|> recognised; or promptIds), with the
    // model's sampling defaults, temperature (0: greedy) and seed overriding them: onToken({token, text, index})
    // for each token as it comes; signal (an AbortSignal) cancels. Resolves to {ids, text, finish, nPrompt,
    // nReused, msFirstToken, msPrefill, msDecode}: finish "stop", "length" or "cancelled". The prompt's KV stays
    // cached: a later prompt that starts the same reads only the rest.
    // generate(prompt: string, options) is the former one-shot call (synchronous, a fresh context; returns
    // {prompt_ids, ids, text, finish}).
    generate(prompt, options = {}) {
        if (typeof prompt !== 'string') return this._generate(prompt);
        return this._generateOnce(prompt, options);
    }
    async _generate({ prompt, promptIds, maxTokens = 256, temperature = -1, seed = -1, ignoreEos = false,
                      onToken = null, signal = null } = {}) {
        const ids = promptIds ?? this.tokenizer().tokenize(prompt);
        return this._run(ids, { maxTokens, temperature, seed, ignoreEos, onToken, signal });
    }
    // A conversation (ChatSession) over this model's chat template, its KV reused from turn to turn.
    chat(options = {}) { return new ChatSession(this, options); }

    // The generator every generate/chat of this model shares (td_gen: one KV pool of nCtx rows for all cached
    // conversations, maxSequences slots). Changing it drops what is cached.
    configureGeneration({ nCtx = 4096, maxSequences = 8, threads = this.td.threads || 1 } = {}) {
        if (this._g) this.td.M._tdw_gen_free(this._g);
        this._g = 0;
        this._genOpts = { nCtx, maxSequences, threads };
    }
    _gen() {
        if (!this._g) {
            const o = this._genOpts || {};
            const info = this._info || (this._info = this.info);
            const nCtx = o.nCtx ?? Math.min(4096, info.n_ctx_train || 4096);
            this._g = this.td.M._tdw_gen_new(this.h, nCtx, o.maxSequences ?? 8, o.threads ?? (this.td.threads || 1));
            if (!this._g) throw this.td._error('cannot make a generator');
            this.nCtx = this.td.M._tdw_gen_n_ctx(this._g);
        }
        return this._g;
    }
    // One request through the shared generator, one at a time (a second waits for the first).
    _run(ids, opts) {
        const p = (this._queue || Promise.resolve()).then(() => this._runNow(ids, opts));
        this._queue = p.catch(() => {});
        return p;
    }
    async _runNow(ids, { maxTokens, temperature, seed, ignoreEos, onToken, signal }) {
        const M = this.td.M, g = this._gen();
        if (!ids.length) throw new Error('generate: an empty prompt');
        if (ids.length + maxTokens > this.nCtx && ids.length < this.nCtx) maxTokens = this.nCtx - ids.length;
        const p = M._malloc(ids.length * 4) >>> 0;
        new Int32Array(M.HEAPU8.buffer, p, ids.length).set(ids);
        const id = M._tdw_gen_submit(g, p, ids.length, maxTokens, temperature, seed, ignoreEos ? 1 : 0);
        M._free(p);
        if (id < 0) throw this.td._error('generate');
        const out = { ids: [], text: '', finish: '', nPrompt: ids.length, nReused: 0, msFirstToken: 0, msPrefill: 0,
                      msDecode: 0 };
        let cancelled = false;
        const cancel = () => { if (!cancelled) { cancelled = true; M._tdw_gen_cancel(g, id); } };
        if (signal) { if (signal.aborted) cancel(); else signal.addEventListener('abort', cancel, { once: true }); }
        this._cancel = cancel;
        try {
            while (!out.finish) {
                const r = M._tdw_gen_step(g);
                if (!r) throw this.td._error('generate');
                const step = JSON.parse(this.td._take(r));
                for (const e of step.events) {
                    if (e.id !== id) continue;
                    if (e.kind === 'prompt') out.nReused = e.n_reused, out.msPrefill = e.ms_prefill;
                    else if (e.kind === 'token') {
                        out.ids.push(e.token);
                        out.text += e.text;
                        if (onToken) onToken({ token: e.token, text: e.text, index: e.index });
                    } else if (e.kind === 'done') {
                        if (e.text) {
                            out.text += e.text;
                            if (onToken) onToken({ token: -1, text: e.text, index: -1 });
                        }
                        if (e.finish === 'error') throw new Error(`generate: ${e.error}`);
                        out.finish = e.finish, out.msFirstToken = e.ms_first_token, out.msDecode = e.ms_decode;
                    }
                }
                if (step.error) { cancel(); throw new Error(`generate: ${step.error}`); }
                if (!out.finish && !step.active) throw new Error('generate: the request ended without its DONE event');
                if (!out.finish) await yieldNow(); // a cancel (signal, cancel()) can come in here
            }
        } finally {
            if (signal) signal.removeEventListener('abort', cancel);
            this._cancel = null;
        }
        return out;
    }
    // Cancels the generation running now (its promise resolves with finish "cancelled").
    cancel() { if (this._cancel) this._cancel(); }

    // Continues prompt (added tokens such as <|im_start|> recognised) by up to maxTokens tokens with the model's
    // sampling defaults; temperature (0: greedy) and seed override them. Returns {prompt_ids, ids, text, finish}.
    _generateOnce(prompt, { maxTokens = 32, temperature = -1, seed = -1, ignoreEos = false,
        threads = this.td.threads } = {}) {
        const [p] = this.td._cstr(prompt);
        const r = this.td.M._tdw_generate(this.h, p, maxTokens, temperature, seed, ignoreEos ? 1 : 0, threads);
        this.td.M._free(p);
        if (!r) throw this.td._error('generate');
        return JSON.parse(this.td._take(r));
    }
    // The forward pass alone (tdw_bench): nPrefill random ids in one pass, then nDecode one-token passes.
    bench(nPrefill, nDecode, { threads = this.td.threads } = {}) {
        const r = this.td.M._tdw_bench(this.h, nPrefill, nDecode, threads);
        if (!r) throw this.td._error('bench');
        return JSON.parse(this.td._take(r));
    }
    free() {
        if (this._g) this.td.M._tdw_gen_free(this._g);
        this._g = 0;
        if (this.h) this.td.M._tdw_model_free(this.h);
        this.h = 0;
    }
}

// A conversation: the messages so far, rendered with the model's chat template each turn (td_chat_tokenize:
// special tokens only from the template); the generator finds the previous turns' KV cached and reads only the new
// turn (Qwen3.5: from a DeltaNet snapshot at the turn boundary). When the conversation no longer fits the context
// (nCtx) with room for an answer, its oldest turns are dropped (the system message stays), as the server's chat
// page does; the reply says how many messages went (dropped).
export class ChatSession {
    constructor(model, { system = null, think = true, maxTokens = 1024, temperature = -1, seed = -1,
                         minReply = 256 } = {}) {
        this.model = model;
        this.messages = system ? [{ role: 'system', content: system }] : [];
        Object.assign(this, { think, maxTokens, temperature, seed, minReply });
    }
    // Sends a user message; resolves to {text, ids, finish, nPrompt, nReused, msFirstToken, msPrefill, msDecode,
    // dropped}. The answer joins the history (a cancelled one with what it had).
    async send(text, { onToken = null, signal = null, maxTokens = this.maxTokens, temperature = this.temperature,
                       seed = this.seed } = {}) {
        const msgs = [...this.messages, { role: 'user', content: text }];
        let ids, dropped = 0;
        this.model._gen();
        const room = Math.min(maxTokens, this.minReply);
        for (;;) {
            ids = this.tokenize(msgs);
            if (ids.length + room <= this.model.nCtx) break;
            const first = msgs.findIndex((m) => m.role !== 'system');
            // keep at least the new message; drop the oldest turn (a user message and the answer after it)
            if (first < 0 || first === msgs.length - 1)
                throw new Error(`chat: the message (${ids.length} tokens with the system prompt) leaves no room ` +
                    `for an answer of ${room} tokens in the context of ${this.model.nCtx}`);
            let n = 1;
            while (first + n < msgs.length - 1 && msgs[first + n].role !== 'user') n++;
            msgs.splice(first, n);
            dropped += n;
        }
        this.messages = msgs; // the conversation changes only once the message fits
        const r = await this.model._run(ids, { maxTokens, temperature, seed, ignoreEos: false, onToken, signal });
        this.messages.push({ role: 'assistant', content: r.text });
        return { ...r, dropped };
    }
    // The ids of the conversation as the next turn would send them (the template's assistant opening last).
    tokenize(messages = this.messages) {
        const td = this.model.td, [p] = td._cstr(JSON.stringify(messages));
        const r = td.M._tdw_chat_tokenize(this.model.h, p, this.think ? 1 : 0);
        td.M._free(p);
        if (!r) throw td._error('chat');
        return JSON.parse(td._take(r));
    }
    cancel() { this.model.cancel(); }
    // A new conversation (the system message stays); the cached turns are dropped.
    reset() {
        this.messages = this.messages.filter((m) => m.role === 'system');
        if (this.model._g) this.model.td.M._tdw_gen_clear(this.model._g);
    }
}

// The same API from a page, with the engine in a Web Worker (web/typedecide_worker.mjs) so that the page never
// freezes: every method returns a Promise; onProgress and onToken are called on the page as the Worker posts them;
// an AbortSignal (signal) cancels.
//   const td = new TypedecideWorker();  const model = await td.load(file, { onProgress });
//   const chat = model.chat({ system });  await chat.send('Hello', { onToken: (t) => out.append(t.text) });
export class TypedecideWorker {
    // base: the folder of typedecide.js and .wasm for the Worker (default: dist/ beside typedecide.mjs)
    constructor({ url = new URL('typedecide_worker.mjs', import.meta.url), base = null, threads = null } = {}) {
        url = new URL(url, isNode ? undefined : location.href);
        if (base) url.searchParams.set('base', new URL(base, isNode ? undefined : location.href).href);
        if (threads) url.searchParams.set('threads', String(threads));
        this.worker = new Worker(url, { type: 'module' });
        this.seq = 0;
        this.calls = new Map();
        this.worker.onmessage = (e) => {
            const d = e.data, c = this.calls.get(d.id);
            if (!c) return;
            if (d.progress) c.onProgress?.(d.progress);
            else if (d.token) c.onToken?.(d.token);
            else {
                this.calls.delete(d.id);
                'error' in d ? c.no(new Error(d.error)) : c.ok(d.result);
            }
        };
    }
    call(msg, { onProgress = null, onToken = null } = {}, transfer = []) {
        return new Promise((ok, no) => {
            const id = ++this.seq;
            this.calls.set(id, { ok, no, onProgress, onToken });
            this.worker.postMessage({ ...msg, id }, transfer);
        });
    }
    async load(source, { onProgress = null, name = null, kernels = null } = {}) {
        const h = await this.call({ op: 'load', source, name, kernels }, { onProgress },
                                  source instanceof ArrayBuffer ? [source] : []);
        return new WorkerModel(this, h);
    }
    memoryBytes() { return this.call({ op: 'memory' }); }
    terminate() { this.worker.terminate(); }
}

const plain = ({ onToken, onProgress, signal, ...rest }) => rest; // what can be posted

class WorkerModel {
    constructor(td, h) { this.td = td, this.h = h; }
    _stream(msg, { onToken = null, signal = null } = {}) {
        const cancel = () => this.cancel();
        signal?.addEventListener('abort', cancel, { once: true });
        return this.td.call(msg, { onToken }).finally(() => signal?.removeEventListener('abort', cancel));
    }
    generate(options) { return this._stream({ op: 'stream', model: this.h, options: plain(options) }, options); }
    chat(options = {}) { return new WorkerChat(this, this.td.call({ op: 'chat', model: this.h, options: plain(options) })); }
    decide(evidence, criteria, { mode = 'batch', threads = 1 } = {}) {
        return this.td.call({ op: 'decide', model: this.h, evidence, criteria, mode, threads });
    }
    tokenize(text) { return this.td.call({ op: 'tokenize', model: this.h, text }); }
    cancel() { return this.td.call({ op: 'cancel', model: this.h }); }
    free() { return this.td.call({ op: 'freeModel', model: this.h }); }
}

class WorkerChat {
    constructor(model, handle) { this.model = model, this.handle = handle; }
    async send(text, options = {}) {
        const session = await this.handle;
        return this.model._stream({ op: 'send', session, text, options: plain(options) }, options);
    }
    async reset() { return this.model.td.call({ op: 'reset', session: await this.handle }); }
    cancel() { return this.model.cancel(); }
}
