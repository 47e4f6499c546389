// The kernel sets' bit-exactness test (kernels_wasm_test.c, built by web/CMakeLists.txt for Node and the web) in
// headless Chromium: there the relaxed SIMD set runs (Chromium ships relaxed SIMD; Node 20's V8, behind its flag,
// computes the relaxed dot otherwise than the spec and the engine does not offer the set there), so this is where
// td_matmul_wasm_relaxed is held to the scalar references. Args: the test's .js (under the working directory, the
// static server's root) and its arguments (--relaxed: its absence fails). Prints the test's output; exit 1 unless
// it says bit-identical.
//   node --experimental-websocket tests/wasm/kernels_browser.mjs web/build/wasm/kernels_wasm_test.js --relaxed
import { relative, resolve } from 'node:path';
import { openPage } from './chromium.mjs';

const [script, ...args] = process.argv.slice(2);
const page = await openPage(process.env.TD_CHROMIUM || '/usr/bin/chromium');
let out = '';
try {
    await page.js(`window.tdOut = []; window.Module = { arguments: ${JSON.stringify(args)},
        print: (s) => tdOut.push(s), printErr: (s) => tdOut.push(s) };
        const s = document.createElement('script'); s.src = ${JSON.stringify('/' + relative(process.cwd(), resolve(script)))};
        s.onerror = () => tdOut.push('kernels_browser: cannot load the script'); document.body.appendChild(s); 1`);
    const t0 = Date.now();
    while (!/kernels_wasm_test: |cannot load|Aborted/.test(out = (await page.js('tdOut.join("\\n")')) || '')) {
        if (Date.now() - t0 > 240000) throw new Error('kernels_wasm_test did not finish in Chromium in 240 s');
        await new Promise((r) => setTimeout(r, 200));
    }
    out += '\n' + (await page.js('navigator.userAgent'));
} finally {
    await page.close();
}
console.log(out);
process.exit(/compared with their references: bit-identical/.test(out) ? 0 : 1);
