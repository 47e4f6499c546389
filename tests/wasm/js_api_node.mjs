// Node side of test_wasm_js.sh: web/typedecide.mjs's API (tests/wasm/js_api_checks.mjs) under Node, plus what only
// Node can set up here: an HTTP server announcing a 5 GB model (refused before its body is read) and one that sends
// no Content-Length (the buffer grows as the bytes come).
//   node js_api_node.mjs OUT.json JOB.json
import { readFileSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { Typedecide } from '../../web/typedecide.mjs';
import { runChecks } from './js_api_checks.mjs';

const [outPath, jobPath] = process.argv.slice(2);
const job = JSON.parse(readFileSync(jobPath, 'utf8'));
const base = pathToFileURL(resolve(process.env.TD_WASM_DIST || 'web/dist') + '/');
const fileUrl = (p) => pathToFileURL(resolve(p)).href;
const td = await Typedecide.create({ base, threads: 1 });
// Node: the GGUF by its path (read in place into the module's memory), the directories' files by file: URLs
const out = await runChecks(td, { ...job, models: job.models.map((m) => ({ ...m, files: m.files.map(fileUrl) })) },
                            async (p) => new Uint8Array(readFileSync(p)));

// HTTP: a server that announces 5e9 bytes, and one that does not say how many
const gguf = readFileSync(job.gguf.url);
let sent = 0;
const server = createServer((req, res) => {
    if (req.url === '/huge.gguf') {
        res.writeHead(200, { 'Content-Length': '5000000000', 'Content-Type': 'application/octet-stream' });
        res.write(gguf.subarray(0, 65536), () => { sent += 65536; }); // then nothing: the body never ends
    } else if (req.url === '/chunked.gguf') {
        res.writeHead(200, { 'Content-Type': 'application/octet-stream' }); // no Content-Length: chunked
        for (let at = 0; at < gguf.length; at += 1 << 20) res.write(gguf.subarray(at, at + (1 << 20)));
        res.end();
    } else res.writeHead(404).end();
});
await new Promise((r) => server.listen(0, '127.0.0.1', r));
const url = `http://127.0.0.1:${server.address().port}`;
const t0 = Date.now();
try {
    await td.load(`${url}/huge.gguf`);
    out.huge = 'accepted';
} catch (e) {
    out.huge = e.message;
}
out.hugeMs = Date.now() - t0;
// memory that cannot grow (what a browser out of memory answers): the allocation refused, said so
const refusing = await Typedecide.create({ base, threads: 1 });
refusing.M._tdw_buffer_new = () => 0;
try { await refusing.load(job.gguf.url); out.noGrowth = 'accepted'; } catch (e) { out.noGrowth = e.message; }
const fresh = await Typedecide.create({ base, threads: 1 });
const before = fresh.memoryBytes();
let last = null;
const m = await fresh.load(`${url}/chunked.gguf`, { onProgress: (p) => { last = p; } });
out.chunked = { greedy: (await m.generate({ prompt: job.prompt, maxTokens: 24, temperature: 0 })).ids, last,
                grew: fresh.memoryBytes() - before };
m.free();
server.closeAllConnections?.();
server.close();
writeFileSync(outPath, JSON.stringify(out, null, 1));
