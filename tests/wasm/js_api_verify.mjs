// What test_wasm_js.sh checks in a result of js_api_checks.mjs beyond equality with native (done by the script):
// progress events, memory, refusals, streaming, KV reuse, cancel, the full context, the Worker.
//   node js_api_verify.mjs RESULT.json WHERE    exit 1 with every failed check listed
import { readFileSync } from 'node:fs';

const [path, where] = process.argv.slice(2);
const r = JSON.parse(readFileSync(path, 'utf8'));
let bad = 0;
const ok = (cond, what) => { if (!cond) { console.error(`${where}: ${what}`); bad++; } };
const g = r.gguf, MiB = 1 << 20;
ok(g.progress.length >= 1 && g.progress.at(-1).loaded === g.size && g.progress.at(-1).total === g.size,
   `progress events end at the size (${JSON.stringify(g.progress.at(-1))}, size ${g.size})`);
ok(g.progress.every((p, i) => !i || p.loaded > g.progress[i - 1].loaded), 'progress grows');
const grew = g.memAfter - g.memBefore;
// one copy: the module's memory grows by the model and the loader's tables, not twice the model
ok(grew < g.size + 48 * MiB, `memory grew by ${grew} bytes for a ${g.size}-byte model (more than one copy)`);
ok(g.current, 'the loaded model is the current one');
ok(g.info.arch === 'qwen3' && g.info.chat_family === 'qwen3', `info ${JSON.stringify(g.info)}`);
ok(g.arraybuffer.progressEvents >= 1 && g.blob.progressEvents >= 1 && g.blob.name === 'demo.gguf', 'ArrayBuffer/Blob');
ok(/not a GGUF image \(bad magic\)/.test(g.notGguf) && /notGguf\.bin/.test(g.notGguf), `not GGUF: ${g.notGguf}`);
ok(/empty \(0 bytes\)/.test(g.empty), `empty: ${g.empty}`);
if (r.huge !== undefined) {
    ok(/huge\.gguf is 4\.66 GiB \(5000000000 bytes\): too large/.test(r.huge) && /at most 4\.00 GiB/.test(r.huge),
       `5 GB: ${r.huge}`);
    ok(r.hugeMs < 10000, `the 5 GB refusal took ${r.hugeMs} ms`);
    ok(/demo-qwen3-q8_0\.gguf: cannot grow the module's memory to hold 6\.0 MiB \(\d+ bytes\).*refused to grow it/
       .test(r.noGrowth), `memory that cannot grow: ${r.noGrowth}`);
    ok(r.chunked.last.total === null && r.chunked.last.loaded === g.size && r.chunked.greedy.join() === g.greedy.join(),
       `no Content-Length: ${JSON.stringify(r.chunked.last)}`);
}
for (const [name, m] of Object.entries(r.models)) {
    ok(m.streamed, `${name}: the streamed tokens are not the result`);
    // the same prompt again: all but the last token reused (Qwen3.5: from the snapshot before the last turn's
    // <|im_start|>, the DeltaNet state cannot be rolled back to an arbitrary position)
    ok(m.again.same && m.again.nReused >= (name.includes('qwen35') ? m.again.nPrompt - 6 : m.again.nPrompt - 1),
       `${name}: the same prompt again ${JSON.stringify(m.again)}`);
    ok(m.chat.every((t) => t.streamed && t.finish !== 'cancelled'), `${name}: chat streaming`);
    ok(m.chat.slice(1).every((t, i) => t.nReused > 0 && t.nReused > m.chat[i].nReused),
       `${name}: later turns reuse the earlier ones' KV ${JSON.stringify(m.chat.map((t) => [t.nPrompt, t.nReused]))}`);
    ok(m.cancel.finish === 'cancelled' && m.cancel.n === 3, `${name}: AbortSignal cancel ${JSON.stringify(m.cancel)}`);
    ok(m.cancel2.finish === 'cancelled' && m.cancel2.n === 2, `${name}: model.cancel() ${JSON.stringify(m.cancel2)}`);
    ok(m.full.some((t) => t.dropped > 0) && m.full.every((t) => t.system && t.finish !== 'error'),
       `${name}: the full context ${JSON.stringify(m.full)}`);
    ok(/leaves no room for an answer of 12 tokens in the context of 160/.test(m.tooLong), `${name}: too long: ${m.tooLong}`);
    ok(m.afterTooLong === m.full.at(-1).messages, `${name}: the refused message stayed in the conversation`);
}
if (r.worker) {
    ok(r.isolated, 'the page is not cross-origin isolated');
    ok(r.worker.progress >= 1, 'no progress from the Worker');
    ok(r.worker.chat.every((t) => t.streamed) && r.worker.chat.slice(1).every((t) => t.nReused > 0),
       `the Worker's chat ${JSON.stringify(r.worker.chat)}`);
    ok(r.worker.cancel.finish === 'cancelled' && r.worker.cancel.n < 60, `the Worker's cancel ${JSON.stringify(r.worker.cancel)}`);
}
process.exit(bad ? 1 : 0);
