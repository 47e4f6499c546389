// A tiny static file server for the WebAssembly tests and the page: GET and HEAD of files under ROOT, with the
// cross-origin isolation headers (COOP same-origin, COEP require-corp) that shared memory and threads need in a
// browser, and application/wasm for .wasm (streaming compilation). Nothing outside ROOT is served. /blank.html is an
// empty page of the origin; /plain.html the same page without COOP/COEP, so not cross-origin isolated (no
// SharedArrayBuffer: what most hosting gives), for the tests of the one-thread fallback.
//   node serve_static.mjs ROOT [PORT]     prints "serving ROOT at http://127.0.0.1:PORT/" and runs until killed
import { createServer } from 'node:http';
import { createReadStream, statSync } from 'node:fs';
import { resolve, extname, sep } from 'node:path';
import { fileURLToPath } from 'node:url';

const TYPES = { '.html': 'text/html; charset=utf-8', '.js': 'text/javascript', '.mjs': 'text/javascript',
                '.wasm': 'application/wasm', '.json': 'application/json', '.jsonl': 'application/json',
                '.txt': 'text/plain; charset=utf-8', '.css': 'text/css', '.png': 'image/png' };

export function serveStatic(root, port = 0) {
    root = resolve(root);
    const server = createServer((req, res) => {
        const headers = { 'Cross-Origin-Opener-Policy': 'same-origin', 'Cross-Origin-Embedder-Policy': 'require-corp',
                          'Cross-Origin-Resource-Policy': 'same-origin', 'Cache-Control': 'no-store' };
        const path = decodeURIComponent(new URL(req.url, 'http://x').pathname);
        const file = resolve(root, '.' + path);
        if (req.method !== 'GET' && req.method !== 'HEAD') { res.writeHead(405, headers); return res.end(); }
        if (path === '/' || path === '/blank.html' || path === '/plain.html') { // an empty page, for tests to script
            const h = path === '/plain.html' ? { 'Cache-Control': 'no-store' } : headers;
            res.writeHead(200, { ...h, 'Content-Type': TYPES['.html'] });
            return res.end('<!doctype html><meta charset="utf-8"><title>typedecide</title>');
        }
        let st = null;
        try { st = file.startsWith(root + sep) ? statSync(file) : null; } catch { st = null; }
        if (!st || !st.isFile()) { res.writeHead(404, headers); return res.end(); }
        res.writeHead(200, { ...headers, 'Content-Type': TYPES[extname(file)] || 'application/octet-stream',
                             'Content-Length': st.size });
        if (req.method === 'HEAD') return res.end();
        createReadStream(file).pipe(res);
    });
    return new Promise((ok) => server.listen(port, '127.0.0.1', () => ok({ server, port: server.address().port })));
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
    const root = process.argv[2] || '.';
    const { port } = await serveStatic(root, Number(process.argv[3] || 0));
    console.log(`serving ${resolve(root)} at http://127.0.0.1:${port}/`);
}
