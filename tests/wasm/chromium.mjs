// Headless Chromium (Debian's) driven over the DevTools protocol with Node's own WebSocket, on a page of a static
// server with COOP/COEP headers (serve_static.mjs) over the working directory: what browser_check.mjs and
// web/bench_browser.mjs share.
//   const page = await openPage(chromium);  await page.js('1 + 1');  await page.close();
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { serveStatic } from './serve_static.mjs';

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

export async function openPage(chromium, root = process.cwd()) {
    const { server, port } = await serveStatic(root);
    const profile = mkdtempSync(join(tmpdir(), 'td-chromium-'));
    const browser = spawn(chromium, ['--headless=new', '--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage',
        '--no-first-run', '--remote-debugging-port=0', `--user-data-dir=${profile}`, 'about:blank'],
        { stdio: ['ignore', 'ignore', 'pipe'] });
    const exited = new Promise((r) => browser.once('exit', r));
    let stderr = '', ws = null;
    const close = async () => {
        if (ws) {
            await Promise.race([cdp('Browser.close').catch(() => null), exited, sleep(5000)]);
            ws.close();
        }
        await Promise.race([exited, sleep(5000)]);
        if (browser.exitCode === null && browser.signalCode === null) browser.kill('SIGKILL');
        await exited;
        server.close();
        try { rmSync(profile, { recursive: true, force: true, maxRetries: 5 }); } catch { /* scratch */ }
    };
    let seq = 0;
    const pending = new Map(), events = [];
    const cdp = (method, params = {}) => new Promise((ok, no) => {
        const id = ++seq;
        pending.set(id, (j) => (j.error ? no(new Error(method + ': ' + j.error.message)) : ok(j.result)));
        ws.send(JSON.stringify({ id, method, params }));
    });
    try {
        const wsUrl = await new Promise((ok, no) => {
            const t = setTimeout(() => no(new Error('chromium did not start: ' + stderr.slice(-500))), 60000);
            browser.stderr.on('data', (d) => {
                stderr += d;
                const m = stderr.match(/DevTools listening on (ws:\/\/[^\s]+)/);
                if (m) { clearTimeout(t); ok(m[1]); }
            });
        });
        const targets = await (await fetch(`http://127.0.0.1:${new URL(wsUrl).port}/json/list`)).json();
        ws = new WebSocket(targets.find((t) => t.type === 'page').webSocketDebuggerUrl);
        await new Promise((r, e) => { ws.onopen = r; ws.onerror = e; });
        ws.onmessage = (m) => {
            const j = JSON.parse(m.data);
            if (j.id && pending.has(j.id)) { pending.get(j.id)(j); pending.delete(j.id); }
            else if (j.method) events.push(j.method);
        };
        await cdp('Page.enable');
        await cdp('Page.navigate', { url: `http://127.0.0.1:${port}/blank.html` });
        for (let t0 = Date.now(); !events.includes('Page.loadEventFired'); await sleep(20))
            if (Date.now() - t0 > 60000) throw new Error('the blank page did not load');
    } catch (e) {
        await close();
        throw e;
    }
    const js = async (expr) => {
        const r = await cdp('Runtime.evaluate', { expression: expr, awaitPromise: true, returnByValue: true });
        if (r.exceptionDetails) throw new Error('page script: ' + (r.exceptionDetails.exception?.description ||
                                                                   JSON.stringify(r.exceptionDetails)).slice(0, 600));
        return r.result.value;
    };
    return { js, cdp, close, origin: `http://127.0.0.1:${port}` };
}
