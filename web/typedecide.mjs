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
// Errors are thrown as Error with the library's message (td_last_error). Nothing here computes: every number comes
// from the C library. Phase 1: one thread, the scalar kernels, files copied into the module's memory.
const isNode = typeof process === 'object' && process.versions && process.versions.node;

async function loadFactory(base) {
    const glue = new URL('typedecide.js', base);
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

export class Typedecide {
    // base: the folder of typedecide.js and typedecide.wasm (default: dist/ beside this file)
    static async create({ base = new URL('dist/', import.meta.url) } = {}) {
        base = new URL(base);
        const factory = await loadFactory(base);
        // wasmBinary given: emscripten 3.1.6's glue would fetch() a file path under Node, which Node's fetch refuses
        const wasmBinary = await loadBytes(new URL('typedecide.wasm', base));
        const M = await factory({ wasmBinary, print: () => {}, printErr: () => {} });
        return new Typedecide(M);
    }

    constructor(M) { this.M = M; }

    // TD_KERNELS in the module's environment ("wasm128", the default, or "scalar"): the set models load with next.
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
        const s = this.M.UTF8ToString(ptr);
        this.M._tdw_free(ptr);
        return s;
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
    decide(evidence, criteria, { mode = 'batch', threads = 1 } = {}) {
        return this.decideJsonl(evidence, typeof criteria === 'string' ? criteria
            : criteria.map((c) => JSON.stringify(c)).join('\n'), { mode, threads })
            .split('\n').filter((l) => l).map((l) => JSON.parse(l));
    }
    decideJsonl(evidence, criteriaJsonl, { mode = 'batch', threads = 1 } = {}) {
        const M = this.td.M;
        const [ev] = this.td._cstr(evidence), [cr] = this.td._cstr(criteriaJsonl);
        const r = M._tdw_decide(this.h, ev, cr, DecideMode[mode] ?? Number(mode), threads, 0);
        M._free(ev), M._free(cr);
        if (!r) throw this.td._error('decide');
        return this.td._take(r);
    }
    // Continues prompt (added tokens such as <|im_start|> recognised) by up to maxTokens tokens with the model's
    // sampling defaults; temperature (0: greedy) and seed override them. Returns {prompt_ids, ids, text, finish}.
    generate(prompt, { maxTokens = 32, temperature = -1, seed = -1, ignoreEos = false } = {}) {
        const [p] = this.td._cstr(prompt);
        const r = this.td.M._tdw_generate(this.h, p, maxTokens, temperature, seed, ignoreEos ? 1 : 0);
        this.td.M._free(p);
        if (!r) throw this.td._error('generate');
        return JSON.parse(this.td._take(r));
    }
    // The forward pass alone (tdw_bench): nPrefill random ids in one pass, then nDecode one-token passes.
    bench(nPrefill, nDecode, { threads = 1 } = {}) {
        const r = this.td.M._tdw_bench(this.h, nPrefill, nDecode, threads);
        if (!r) throw this.td._error('bench');
        return JSON.parse(this.td._take(r));
    }
    free() { if (this.h) this.td.M._tdw_model_free(this.h); this.h = 0; }
}
