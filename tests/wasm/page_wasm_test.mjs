// The static page (web/page/) tried as a new user would, in headless Chromium (tests/wasm/chromium.mjs) on a static
// server with COOP/COEP headers over the repository: clicks are mouse events at the element's place, text is typed
// (Input.insertText into the focused field), a file is picked through the page's file input.
//   1. load the demo model (progress events, the bar filled), type an evidence, a JSONL line that is not JSON refused
//      (naming its line), replace the criteria with a JSONL line typed into the paste box, add a criterion with the form (id, question, three options, one added with "+ option"),
//      Decide: the table's answers and probabilities equal the module's decide() on the same typed input, run
//      separately on the page's main thread (test_wasm_browser ties the module to native); the bars match;
//   2. a criterion left with one option: the library's error is shown, the page still answers and decides again;
//   3. chat: a message typed and sent, tokens arrive one by one (the reply grows while it streams), the reply ends;
//      a second turn reuses the first's KV (prompt tokens already read > 0); Stop cuts a long reply ("cancelled");
//   then the other demo model (demo-qwen35, a hybrid) chosen and loaded: its table = decide() too;
//   4. files from disk: a file that is not a GGUF and a truncated GGUF each show an error saying so; the tiny GGUF
//      then loads and decides (again equal to the module's decide() on it).
// No uncaught error on the page or in its Worker. Writes OUT/page.jsonl (the tables: "# MODEL" sections),
// OUT/evidence.txt and OUT/criteria.jsonl (what was typed) for the script to compare with the native tool, and the
// screenshots SHOT_DECIDE and SHOT_CHAT.
// usage: node --experimental-websocket page_wasm_test.mjs CHROMIUM DIST_URL OUT GGUF BROKEN_GGUF NOT_GGUF SHOT_DECIDE SHOT_CHAT
import { writeFileSync } from 'node:fs';
import { resolve, join } from 'node:path';
import { openPage } from './chromium.mjs';

const [chromium, dist, out, gguf, broken, notGguf, shotDecide, shotChat] = process.argv.slice(2);
let fails = 0;
const fail = (m) => { fails++; console.error('FAIL: page: ' + m); };
const pageErrors = [];
const onEvent = (j) => {
    if (j.method === 'Runtime.exceptionThrown') pageErrors.push(j.params.exceptionDetails.exception?.description ||
                                                                j.params.exceptionDetails.text);
    if (j.method === 'Log.entryAdded' && j.params.entry.level === 'error' && !/favicon/.test(j.params.entry.url || ''))
        pageErrors.push(j.params.entry.text + ' ' + (j.params.entry.url || ''));
};
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

const page = await openPage(chromium, process.cwd(), { width: 1000, height: 760, onEvent });
const { js, cdp, until } = page;
// a user's click: the mouse pressed and released at the middle of the element (scrolled into view first)
async function click(sel) {
    const r = await js(`(() => { const e = ${sel}; if (!e) return null; e.scrollIntoView({ block: 'center' });
        const b = e.getBoundingClientRect(); return { x: b.x + b.width / 2, y: b.y + b.height / 2, off: e.disabled }; })()`);
    if (!r) throw new Error(`nothing to click at ${sel}`);
    if (r.off) throw new Error(`${sel} is disabled`);
    for (const type of ['mousePressed', 'mouseReleased'])
        await cdp('Input.dispatchMouseEvent', { type, x: r.x, y: r.y, button: 'left', clickCount: 1 });
}
// typing into a field: clicked, its text selected, the new text typed over it
async function type(sel, text) {
    await click(sel);
    await js(`(() => { const e = ${sel}; e.select(); return 1; })()`);
    await cdp('Input.insertText', { text });
}
const table = () => js(`[...document.querySelectorAll('tr.decision')].map((tr) => ({ id: tr.dataset.id,
    answer: tr.dataset.answer, options: [...tr.querySelectorAll('.opt')].map((o) => o.dataset.option),
    probs: [...tr.querySelectorAll('.opt')].map((o) => +o.dataset.prob),
    bars: [...tr.querySelectorAll('.opt .fill')].map((f) => parseFloat(f.style.width)),
    ms: +tr.querySelector('.ms').textContent }))`);
// the module's own decide() on the page's main thread (not the page's Worker): files fetched from URLs
async function reference(files, path, evidence, criteria) {
    return js(`(async () => {
        const { Typedecide } = await import('/web/typedecide.mjs');
        const td = await Typedecide.create({ base: new URL(${JSON.stringify(dist)}, location.href) });
        for (const [p, u] of ${JSON.stringify(files)}) await td.addFileFromUrl(p, u);
        const m = td.loadModel(${JSON.stringify(path)});
        const r = m.decide(${JSON.stringify(evidence)}, ${JSON.stringify(criteria)});
        m.free();
        return r; })()`);
}
function same(shown, ref, what) {
    if (shown.length !== ref.length) return fail(`${what}: ${shown.length} rows shown, decide() gave ${ref.length}`);
    shown.forEach((s, i) => {
        const r = ref[i];
        if (s.id !== r.id || s.answer !== r.answer || JSON.stringify(s.options) !== JSON.stringify(r.options) ||
            JSON.stringify(s.probs) !== JSON.stringify(r.probs))
            fail(`${what}, criterion ${i}: shown ${JSON.stringify(s)} != decide() ${JSON.stringify(r)}`);
        s.bars.forEach((b, k) => { if (Math.abs(b - 100 * r.probs[k]) > 0.051) fail(`${what} ${r.id}: bar ${k} is ${b}%`); });
        if (!(s.ms >= 0)) fail(`${what} ${r.id}: no ms shown`);
    });
}
async function decided(n, what) {
    await until(`+document.body.dataset.decided >= ${n} || document.body.dataset.decideError`, what, 180000);
    const err = await js(`document.body.dataset.decideError || ''`);
    if (err) throw new Error(`${what}: the page shows ${err}`);
}
let sections = '';
const section = (name, rows) => {
    sections += `# ${name}\n` + rows.map((r) => JSON.stringify({ id: r.id, answer: r.answer, options: r.options,
                                                                   probs: r.probs })).join('\n') + '\n';
};

const evidence = 'Subject: Cannot sign in\n\nSince this morning the login page says my password is wrong, but I ' +
    'reset it twice. My colleague Tom has the same problem. Please fix this quickly, we are locked out.';
const typed = [
    { id: 'urgent', question: 'Is the ticket urgent?', options: [{ id: 'yes', description: 'Yes' }, { id: 'no', description: 'No' }] },
    { id: 'kind', question: 'What is the customer reporting?', options: [{ id: 'login', description: 'A login problem' },
        { id: 'billing', description: 'A billing problem' }, { id: 'idea', description: 'An idea for the product' }] },
];
try {
    await cdp('Runtime.enable');
    await cdp('Log.enable');
    await page.navigate(`${page.origin}/web/page/index.html?dist=${encodeURIComponent(dist)}`);
    await until(`document.body.dataset.example`, 'the page and its example');
    console.log('page: ' + await until(`/^engine /.test(document.getElementById('engine').textContent) &&
        document.getElementById('engine').textContent`, 'the engine in its Worker'));

    // 1. the demo model, typed evidence and criteria, the table
    await click(`document.getElementById('demo')`);
    const loaded = await until(`document.body.dataset.model !== 'loading' && document.body.dataset.model`, 'the demo model', 120000);
    if (loaded !== 'ready') throw new Error('the demo model: ' + await js(`document.getElementById('merr').textContent`));
    const prog = await js(`[document.getElementById('progress').value, document.getElementById('ptext').textContent,
                            +document.body.dataset.progress]`);
    if (prog[0] !== 1 || !/ of /.test(prog[1]) || prog[2] < 2)
        fail(`the progress bar after loading (value, text, events): ${JSON.stringify(prog)}`);
    await type(`document.getElementById('evidence')`, evidence);
    await click(`document.getElementById('jsonl-toggle')`);
    // a line that is not JSON: an error naming the line, the form left as it was
    const nBefore = await js(`document.querySelectorAll('.crit').length`);
    await type(`document.getElementById('jsonl')`, JSON.stringify(typed[0]) + '\n{"id": "x", "question": ');
    await click(`document.getElementById('jsonl-use')`);
    const jerr = await js(`document.getElementById('derr').textContent`);
    if (!/line 2/.test(jerr) || await js(`document.querySelectorAll('.crit').length`) !== nBefore)
        fail(`a JSONL line that is not JSON: the page says ${JSON.stringify(jerr)}`);
    await type(`document.getElementById('jsonl')`, JSON.stringify(typed[0]));
    await click(`document.getElementById('jsonl-use')`);
    await click(`document.getElementById('add')`);
    const last = `[...document.querySelectorAll('.crit')].pop()`;
    await type(`${last}.querySelector('.cid')`, typed[1].id);
    await type(`${last}.querySelector('.q')`, typed[1].question);
    await click(`${last}.querySelector('.addopt')`);
    for (const [k, o] of typed[1].options.entries()) {
        await type(`${last}.querySelectorAll('.oid')[${k}]`, o.id);
        await type(`${last}.querySelectorAll('.odesc')[${k}]`, o.description);
    }
    await click(`document.getElementById('run')`);
    await decided(1, 'the decisions on the demo model');
    const shown = await table();
    const demoFiles = ['config.json', 'generation_config.json', 'tokenizer.json', 'tokenizer_config.json', 'model.safetensors']
        .map((f) => [`/ref/demo/${f}`, `/models/demo-qwen3/${f}`]);
    same(shown, await reference(demoFiles, '/ref/demo', evidence, typed), 'demo-qwen3');
    section('models/demo-qwen3', shown);
    writeFileSync(join(out, 'evidence.txt'), evidence);
    writeFileSync(join(out, 'criteria.jsonl'), typed.map((c) => JSON.stringify(c)).join('\n') + '\n');
    await js(`(() => { const b = document.getElementById('results').getBoundingClientRect();
        window.scrollBy(0, b.bottom - innerHeight + 16); return 1; })()`);
    const bytes = await page.screenshot(shotDecide);
    console.log(`page: demo-qwen3 table = decide() on the typed input (${shown.map((s) => s.id + '=' + s.answer).join(', ')}); ` +
                `${await js(`document.getElementById('dstatus').textContent`)}; screenshot ${bytes} bytes`);

    // 2. a criterion with one option: the library's error on the page, and the page still works
    await click(`${last}.querySelectorAll('.del-opt')[2]`);
    await click(`${last}.querySelectorAll('.del-opt')[1]`);
    await click(`document.getElementById('run')`);
    const err = await until(`document.body.dataset.decideError`, 'the error of a criterion with one option');
    if (!/option/i.test(err)) fail(`a criterion with one option: the page says ${JSON.stringify(err)}`);
    else console.log(`page: a criterion with one option shows: ${err}`);
    await click(`${last}.querySelector('.del')`);
    await click(`document.getElementById('run')`);
    await decided(2, 'the decisions after the error');

    // 3. chat: a typed message, a streamed reply
    if (await js(`!!document.getElementById('send')`)) {
        await click(`document.getElementById('tab-chat')`);
        await type(`document.getElementById('maxtok')`, '24');
        await type(`document.getElementById('temp')`, '0');
        await type(`document.getElementById('input')`, 'Hello, I was charged twice for my order.');
        await click(`document.getElementById('send')`);
        const lengths = new Set();
        for (const t0 = Date.now(); ;) {
            const s = await js(`(() => { const b = [...document.querySelectorAll('.msg[data-role=assistant] .txt')].pop();
                return { n: b ? b.textContent.length : -1, done: document.body.dataset.chatted || '',
                         err: document.getElementById('cerr').textContent }; })()`);
            if (s.err) throw new Error('chat: the page shows ' + s.err);
            if (s.n > 0) lengths.add(s.n);
            if (s.done) break;
            if (Date.now() - t0 > 120000) throw new Error('timed out waiting for the chat reply');
            await sleep(15);
        }
        const reply = await js(`[...document.querySelectorAll('.msg[data-role=assistant] .txt')].pop().textContent`);
        const status = await js(`document.getElementById('cstatus').textContent`);
        if (!reply.trim()) fail('chat: an empty reply');
        // streamed: the tokens reached the page one message each before the reply ended (the reply was also seen
        // growing while it came, how often depends on the machine's load: reported, not required)
        const streamed = +await js(`document.body.dataset.streamed`), nTok = +(status.match(/^(\d+) tokens/) || [])[1];
        // (one more message than tokens where held-back text comes at the end: typedecide.d.ts's TokenEvent)
        if (!(streamed >= 2) || Math.abs(streamed - nTok) > 1)
            fail(`chat: ${streamed} token messages for a reply of ${nTok} tokens`);
        console.log(`page: chat streamed a reply of ${reply.length} characters in ${streamed} token messages, seen ` +
                    `growing ${lengths.size} times (${status})`);
        // a second turn reads only what is new: the status names the prompt tokens already read (the KV kept)
        await type(`document.getElementById('input')`, 'Can you refund the second charge?');
        await click(`document.getElementById('send')`);
        await until(`+document.body.dataset.chatted >= 2 || document.getElementById('cerr').textContent`, 'the second reply');
        const status2 = await js(`document.getElementById('cerr').textContent || document.getElementById('cstatus').textContent`);
        const reused = +(status2.match(/of which (\d+) were already read/) || [])[1];
        if (!(reused > 0)) fail(`chat, second turn: ${JSON.stringify(status2)} (no prompt tokens reused)`);
        const bytes = await page.screenshot(shotChat);
        console.log(`page: second turn: ${status2}; screenshot ${bytes} bytes`);
        // Stop: a long reply cut after its first token
        await type(`document.getElementById('maxtok')`, '400');
        await type(`document.getElementById('input')`, 'Please tell me everything about your refund policy.');
        await click(`document.getElementById('send')`);
        await until(`[...document.querySelectorAll('.msg[data-role=assistant] .txt')].pop().textContent.length > 0 ||
                     document.body.dataset.chatted >= 3`, 'the first token of the third reply');
        await click(`document.getElementById('stop')`);
        await until(`+document.body.dataset.chatted >= 3 || document.getElementById('cerr').textContent`, 'the stopped reply');
        const status3 = await js(`document.getElementById('cerr').textContent || document.getElementById('cstatus').textContent`);
        if (!/cancelled/.test(status3)) fail(`chat, Stop: ${JSON.stringify(status3)}`);
        else console.log(`page: Stop: ${status3}`);
    } else fail('the page has no chat panel');

    // the other demo model (Qwen3.5, hybrid): chosen, loaded, its table = decide()
    await click(`document.getElementById('tab-decide')`);
    await js(`(() => { const s = document.getElementById('which'); s.value = s.options[1].value; return 1; })()`);
    await click(`document.getElementById('demo')`);
    const l35 = await until(`document.body.dataset.model !== 'loading' && document.body.dataset.model`, 'demo-qwen35', 120000);
    if (l35 !== 'ready') throw new Error('demo-qwen35: ' + await js(`document.getElementById('merr').textContent`));
    const n35 = +await js(`document.body.dataset.decided`);
    await click(`document.getElementById('run')`);
    await decided(n35 + 1, 'the decisions on demo-qwen35');
    const shown35 = await table();
    same(shown35, await reference(demoFiles.map(([p, u]) => [p.replace('/demo/', '/demo35/'),
        u.replace('demo-qwen3/', 'demo-qwen35/')]), '/ref/demo35', evidence, typed.slice(0, 1)), 'demo-qwen35');
    section('models/demo-qwen35', shown35);
    console.log(`page: ${await js(`document.getElementById('model').textContent`)}; its table = decide()`);

    // 4. files from disk: two bad ones, then the tiny GGUF
    const pick = async (path) => {
        const { result } = await cdp('Runtime.evaluate', { expression: `document.getElementById('file')` });
        await cdp('DOM.setFileInputFiles', { files: [resolve(path)], objectId: result.objectId });
        const s = await until(`document.body.dataset.model !== 'loading' && document.body.dataset.model`, `loading ${path}`, 120000);
        return [s, await js(`document.getElementById('merr').textContent`)];
    };
    // each error must say what is wrong: the page's own check of the magic, the library's for the truncated file
    for (const [bad, says] of [[notGguf, /not a GGUF file/], [broken, /truncated|past the end/]]) {
        const [s, msg] = await pick(bad);
        if (s !== 'error' || !says.test(msg)) fail(`${bad}: the page says ${s}, ${JSON.stringify(msg)} (expected ${says})`);
        else console.log(`page: ${bad} shows: ${msg}`);
    }
    const [s, msg] = await pick(gguf);
    if (s !== 'ready') throw new Error(`${gguf}: ${msg}`);
    const before = +await js(`document.body.dataset.decided`);
    await click(`document.getElementById('run')`);
    await decided(before + 1, `the decisions on ${gguf}`);
    const shownG = await table();
    same(shownG, await reference([['/ref/g.gguf', '/' + gguf]], '/ref/g.gguf', evidence, typed.slice(0, 1)), gguf);
    section(gguf, shownG);
    console.log(`page: ${gguf} picked from disk: ${await js(`document.getElementById('model').textContent`)}; its table = decide()`);
} catch (e) {
    fail(e.message);
}
writeFileSync(join(out, 'page.jsonl'), sections);
if (pageErrors.length) fail('errors on the page: ' + pageErrors.slice(0, 5).join(' | '));
await page.close();
process.exit(fails ? 1 : 0);
