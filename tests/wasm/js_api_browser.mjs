// Chromium side of test_wasm_js.sh: web/typedecide.mjs's API (tests/wasm/js_api_checks.mjs) on a page of headless
// Chromium (served with COOP/COEP by serve_static.mjs; the GGUF fetched and streamed into the module's memory), then
// the same chat through the Worker (TypedecideWorker: tokens posted as they come, a File loaded in the Worker).
//   node --experimental-websocket js_api_browser.mjs CHROMIUM OUT.json JOB.json
import { readFileSync, writeFileSync } from 'node:fs';
import { relative, resolve } from 'node:path';
import { openPage } from './chromium.mjs';

const [chromium, outPath, jobPath] = process.argv.slice(2);
const job = JSON.parse(readFileSync(jobPath, 'utf8'));
const url = (p) => '/' + relative(process.cwd(), resolve(p)).split('\\').join('/');
const dist = url(process.env.TD_WASM_DIST || 'web/dist') + '/';
const pageJob = { ...job, gguf: { ...job.gguf, url: url(job.gguf.url) },
                  models: job.models.map((m) => ({ ...m, files: m.files.map(url) })) };
const page = await openPage(chromium);
try {
    const res = await page.js(`(async () => {
        const job = ${JSON.stringify(pageJob)};
        const { Typedecide, TypedecideWorker } = await import('/web/typedecide.mjs');
        const { runChecks } = await import('/tests/wasm/js_api_checks.mjs');
        const td = await Typedecide.create({ base: new URL(${JSON.stringify(dist)}, location.href), threads: 1 });
        const out = await runChecks(td, job, async (u) => new Uint8Array(await (await fetch(u)).arrayBuffer()));
        // the Worker: a File (as picked from disk) loaded there, a chat streamed back token by token
        const w = new TypedecideWorker({ base: new URL(${JSON.stringify(dist)}, location.href), threads: 1 });
        const file = new File([await (await fetch(job.gguf.url)).arrayBuffer()], 'picked.gguf');
        let progress = 0;
        const wm = await w.load(file, { onProgress: () => progress++ });
        const chat = wm.chat({ system: job.system, seed: 5, maxTokens: 40 });
        out.worker = { progress, chat: [] };
        for (const t of job.turns) {
            let s = '', n = 0;
            const rep = await chat.send(t, { onToken: (e) => { s += e.text; n++; } });
            out.worker.chat.push({ text: rep.text, streamed: s === rep.text && n > 0, nReused: rep.nReused });
        }
        const ac = new AbortController();
        let k = 0;
        const c = await wm.generate({ prompt: job.prompt, maxTokens: 60, temperature: 0, ignoreEos: true,
                                      signal: ac.signal, onToken: () => { if (++k === 2) ac.abort(); } });
        out.worker.cancel = { finish: c.finish, n: c.ids.length };
        out.isolated = self.crossOriginIsolated;
        w.terminate();
        return out;
    })()`);
    writeFileSync(outPath, JSON.stringify(res, null, 1));
} finally {
    await page.close();
}
