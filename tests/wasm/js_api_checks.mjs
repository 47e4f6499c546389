// The JavaScript API of web/typedecide.mjs (load, streamed generate, chat sessions, cancel, a full context), run
// the same way under Node (js_api_node.mjs) and on a page of headless Chromium (js_api_browser.mjs); the results go
// back to tests/test_wasm_js.sh, which compares them with the native tool:
//   runChecks(td, job, bytesOf) -> { gguf: {...}, models: { NAME: {...} } }
// job: { gguf: {url, size}, models: [{name, files: [url...]}] (Hugging Face directories), prompt, system, turns,
//        long, evidence, criteria }; bytesOf(url) -> Uint8Array (for the ArrayBuffer and Blob loads).
export async function runChecks(td, job, bytesOf) {
    const out = { gguf: {}, models: {} };
    // 1. A GGUF streamed into the module's memory, first thing in a fresh module: what memory grew by
    const g = out.gguf;
    g.size = job.gguf.size;
    g.memBefore = td.memoryBytes();
    g.progress = [];
    const gm = await td.load(job.gguf.url, { onProgress: (p) => g.progress.push(p) });
    g.memAfter = td.memoryBytes();
    g.info = gm.info;
    g.promptIds = gm.tokenizer().tokenize(job.prompt);
    g.greedy = (await gm.generate({ prompt: job.prompt, maxTokens: 24, temperature: 0 })).ids;
    g.decide = gm.decideJsonl(job.evidence, job.criteria);
    g.current = td.model === gm;
    gm.free();
    // the same bytes from an ArrayBuffer and from a Blob: the same model
    const bytes = await bytesOf(job.gguf.url);
    for (const [how, src] of [['arraybuffer', bytes.slice().buffer], ['blob', new Blob([bytes])]]) {
        let n = 0;
        const m = await td.load(src, { name: 'demo.gguf', onProgress: () => n++ });
        g[how] = { greedy: (await m.generate({ prompt: job.prompt, maxTokens: 24, temperature: 0 })).ids,
                   progressEvents: n, name: m.info.name };
        m.free();
    }
    // refusals: bytes that are not GGUF, and an empty buffer
    for (const [how, src] of [['notGguf', new TextEncoder().encode('{"model_type": "qwen3"}').buffer],
                              ['empty', new ArrayBuffer(0)]]) {
        try { await td.load(src, { name: how + '.bin' }); g[how] = 'accepted'; } catch (e) { g[how] = e.message; }
    }

    // 2. Streamed generation and chat on the demo models (Hugging Face directories: the file-system path)
    for (const m of job.models) {
        const dir = '/c/' + m.name.replace(/[^A-Za-z0-9]/g, '_');
        for (const f of m.files) await td.addFileFromUrl(dir + '/' + f.split('/').pop(), f);
        const model = td.loadModel(dir);
        model.configureGeneration({ nCtx: 2048 });
        const r = (out.models[m.name] = {});
        r.promptIds = model.tokenizer().tokenize(job.prompt);
        let streamed = '', n = 0;
        const gr = await model.generate({ prompt: job.prompt, maxTokens: 24, temperature: 0,
                                          onToken: (t) => { streamed += t.text; if (t.token >= 0) n++; } });
        r.greedy = gr.ids;
        r.streamed = streamed === gr.text && n === gr.ids.length;
        r.seeded = (await model.generate({ prompt: job.prompt, maxTokens: 24, seed: 7 })).ids;
        const again = await model.generate({ prompt: job.prompt, maxTokens: 24, temperature: 0 });
        r.again = { nReused: again.nReused, nPrompt: again.nPrompt, same: JSON.stringify(again.ids) === JSON.stringify(gr.ids) };
        // a chat of several turns (the model's sampling defaults, seed 5, thinking on as typedecide chat's default)
        const chat = model.chat({ system: job.system, seed: 5, maxTokens: 40 });
        r.chat = [];
        for (const t of job.turns) {
            let s = '';
            const rep = await chat.send(t, { onToken: (e) => { s += e.text; } });
            r.chat.push({ text: rep.text, streamed: s === rep.text, nPrompt: rep.nPrompt, nReused: rep.nReused,
                          finish: rep.finish, dropped: rep.dropped });
        }
        // cancel after the third token
        const ac = new AbortController();
        let k = 0;
        const c = await model.generate({ prompt: job.prompt + ' Then?', maxTokens: 50, temperature: 0, ignoreEos: true,
                                         signal: ac.signal, onToken: () => { if (++k === 3) ac.abort(); } });
        r.cancel = { finish: c.finish, n: c.ids.length };
        // cancel through the model while it runs (the call in flight resolves "cancelled")
        let k2 = 0;
        const c2 = await model.generate({ prompt: job.prompt + ' And?', maxTokens: 50, temperature: 0, ignoreEos: true,
                                          onToken: () => { if (++k2 === 2) model.cancel(); } });
        r.cancel2 = { finish: c2.finish, n: c2.ids.length };
        // a context that fills: the oldest turns go, the conversation goes on
        model.configureGeneration({ nCtx: 160 });
        const small = model.chat({ system: 'Be brief.', maxTokens: 12, minReply: 12, think: false, temperature: 0 });
        r.full = [];
        for (let i = 0; i < 6; i++) {
            const rep = await small.send(`${job.long} (${i})`);
            r.full.push({ dropped: rep.dropped, nPrompt: rep.nPrompt, finish: rep.finish,
                          messages: small.messages.length, system: small.messages[0].role === 'system' });
        }
        try { await small.send(job.long.repeat(12)); r.tooLong = 'accepted'; } catch (e) { r.tooLong = e.message; }
        r.afterTooLong = small.messages.length;
        model.free();
    }
    return out;
}
