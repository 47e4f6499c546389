// Headless Chromium (Debian's) driven over the DevTools protocol with Node's own WebSocket (no npm package): the one
// launcher of every browser test (the server's page: tests/node/page_test.mjs, page_chat_test.mjs; the WebAssembly
// module: browser_check.mjs, web/bench_*.mjs; the static page: tests/wasm/page_wasm_test.mjs).
//   const b = await launch(chromium, { width: 1000, height: 760 });   a browser on about:blank (onEvent: a
//                                                          function called with every DevTools event)
//   await b.navigate(url);  await b.js('1 + 1');  await b.until('document.body.dataset.done', 'the page');
//   await b.screenshot(path);  await b.close();
//   const page = await openPage(chromium, root);   the same, on a blank page of a static server with COOP/COEP
//                                                  headers (serve_static.mjs) over root; close() stops the server too
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { serveStatic } from './serve_static.mjs';

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

export async function launch(chromium, { width = 1000, height = 760, onEvent = null } = {}) {
    const profile = mkdtempSync(join(tmpdir(), 'td-chromium-'));
    const browser = spawn(chromium, ['--headless=new', '--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage',
        '--no-first-run', '--remote-debugging-port=0', `--user-data-dir=${profile}`, `--window-size=${width},${height}`,
        'about:blank'], { stdio: ['ignore', 'ignore', 'pipe'] });
    const exited = new Promise((r) => browser.once('exit', r)); // listened to from the start: it may exit early
    let stderr = '', ws = null, seq = 0;
    const pending = new Map(), events = [];
    const cdp = (method, params = {}) => new Promise((ok, no) => {
        const id = ++seq;
        pending.set(id, (j) => (j.error ? no(new Error(method + ': ' + j.error.message)) : ok(j.result)));
        ws.send(JSON.stringify({ id, method, params }));
    });
    const close = async () => {
        if (ws) {
            await Promise.race([cdp('Browser.close').catch(() => null), exited, sleep(5000)]); // politely ...
            ws.close();
        }
        await Promise.race([exited, sleep(5000)]);
        if (browser.exitCode === null && browser.signalCode === null) browser.kill('SIGKILL'); // ... or not
        await exited;
        try { rmSync(profile, { recursive: true, force: true, maxRetries: 5 }); } catch { /* a scratch directory */ }
    };
    try {
        const wsUrl = await new Promise((ok, no) => {
            const t = setTimeout(() => no(new Error('chromium did not start: ' + stderr.slice(-500))), 60000);
            browser.stderr.on('data', (d) => {
                stderr += d;
                const m = stderr.match(/DevTools listening on (ws:\/\/[^\s]+)/);
                if (m) { clearTimeout(t); ok(m[1]); }
            });
            browser.once('exit', (code) => no(new Error(`chromium exited (${code}): ` + stderr.slice(-500))));
        });
        const targets = await (await fetch(`http://127.0.0.1:${new URL(wsUrl).port}/json/list`)).json();
        ws = new WebSocket(targets.find((t) => t.type === 'page').webSocketDebuggerUrl);
        await new Promise((r, e) => { ws.onopen = r; ws.onerror = e; });
        ws.onmessage = (m) => {
            const j = JSON.parse(m.data);
            if (j.id && pending.has(j.id)) { pending.get(j.id)(j); pending.delete(j.id); }
            else if (j.method) { events.push(j.method); if (onEvent) onEvent(j); }
        };
        await cdp('Page.enable');
        await cdp('Emulation.setDeviceMetricsOverride', { width, height, deviceScaleFactor: 1, mobile: false });
    } catch (e) {
        await close();
        throw e;
    }
    // an expression evaluated in the page (promises awaited), its value returned
    const js = async (expr) => {
        const r = await cdp('Runtime.evaluate', { expression: expr, awaitPromise: true, returnByValue: true });
        if (r.exceptionDetails) throw new Error('page script: ' + (r.exceptionDetails.exception?.description ||
                                                                   JSON.stringify(r.exceptionDetails)).slice(0, 600));
        return r.result.value;
    };
    // polls expr until it is truthy (its value returned) or ms pass (an error naming what)
    const until = async (expr, what, ms = 120000, every = 50) => {
        for (const t0 = Date.now(); ;) {
            const v = await js(expr);
            if (v) return v;
            if (Date.now() - t0 > ms) throw new Error('timed out waiting for ' + what);
            await sleep(every);
        }
    };
    // loads url and waits for its load event
    const navigate = async (url, ms = 60000) => {
        events.length = 0;
        await cdp('Page.navigate', { url });
        for (const t0 = Date.now(); !events.includes('Page.loadEventFired'); await sleep(20))
            if (Date.now() - t0 > ms) throw new Error(`${url} did not load`);
    };
    const screenshot = async (path, { format = 'png' } = {}) => {
        const r = await cdp('Page.captureScreenshot', { format });
        const bytes = Buffer.from(r.data, 'base64');
        writeFileSync(path, bytes);
        return bytes.length;
    };
    return { js, cdp, until, navigate, screenshot, close, events };
}

export async function openPage(chromium, root = process.cwd(), options = {}) {
    const { server, port } = await serveStatic(root);
    let b;
    try {
        b = await launch(chromium, options);
        await b.navigate(`http://127.0.0.1:${port}/blank.html`);
    } catch (e) {
        if (b) await b.close();
        server.close();
        throw e;
    }
    const close = async () => { await b.close(); server.close(); };
    return { ...b, close, origin: `http://127.0.0.1:${port}` };
}
