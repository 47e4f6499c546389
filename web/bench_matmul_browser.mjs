// The relaxed SIMD set's products against the SIMD128 set's in headless Chromium (web/bench_matmul_sets.c, built here
// with emcc against a web/build.sh build's core library): GMAC/s of Q8_0 / Q4_0 at 1, 2, 3, 4, 32 tokens, one thread, the
// sets alternating. Writes one JSON with the load average before and after.
//   node --experimental-websocket web/bench_matmul_browser.mjs WASM_BUILD_DIR OUT.json
// WASM_BUILD_DIR: TD_WASM_BUILD_DIR of web/build.sh (its libtypedecide_core.a), under the working directory.
import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { relative, resolve } from 'node:path';
import { cpus, loadavg } from 'node:os';
import { openPage } from '../tests/wasm/chromium.mjs';

const [build, out] = process.argv.slice(2);
const js = resolve(build, 'bench_matmul_sets.js');
execFileSync('emcc', ['-O2', '-msimd128', '-std=c11', '-D_DEFAULT_SOURCE', '-ffp-contract=off', '-Iinclude', '-Isrc',
    'web/bench_matmul_sets.c', resolve(build, 'libtypedecide_core.a'), '-sALLOW_MEMORY_GROWTH=1', '-sALLOW_TABLE_GROWTH=1',
    '-sENVIRONMENT=web', '-sSINGLE_FILE=1', '-o', js],
    { stdio: 'inherit', env: { ...process.env, NODE_PATH: process.env.NODE_PATH || '/usr/share/nodejs' } });
const load_average_before = loadavg();
const page = await openPage(process.env.TD_CHROMIUM || '/usr/bin/chromium');
let text = '', ua;
try {
    ua = await page.js(`window.tdOut = []; window.Module = { print: (s) => tdOut.push(s), printErr: (s) => tdOut.push(s) };
        const s = document.createElement('script'); s.src = ${JSON.stringify('/' + relative(process.cwd(), js))};
        document.body.appendChild(s); navigator.userAgent`);
    for (const t0 = Date.now(); !/^\{/m.test(text = (await page.js('tdOut.join("\\n")')) || '');
        await new Promise((r) => setTimeout(r, 500)))
        if (Date.now() - t0 > 300000) throw new Error('the bench did not finish in 300 s: ' + text);
} finally {
    await page.close();
}
const res = JSON.parse(text.split('\n').find((l) => l.startsWith('{')));
writeFileSync(out, JSON.stringify({ what: 'Q8_0 / Q4_0 products (3072 x 1024), one thread, headless Chromium: the ' +
    'SIMD128 set (wasm128) against the relaxed SIMD set (wasm128r), best of 25 alternating passes', ua,
    cpu: cpus()[0].model, cores: cpus().length,
    command: `node --experimental-websocket web/bench_matmul_browser.mjs ${process.argv.slice(2).join(' ')}`,
    load_average_before, load_average_after: loadavg(), ...res }, null, 1) + '\n');
console.log(JSON.stringify(res));
