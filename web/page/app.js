// typedecide's static page: the editors, the result table and the chat panel. The engine runs in a Web Worker
// (engine.worker.mjs over ../typedecide.mjs), so the page stays responsive while a model loads or decides.
// Query parameters (for tests and packaged copies): ?dist=URL the folder of typedecide.js/.wasm (default ../dist/),
// ?demo=URL a demo model's folder (added to the choice and chosen; the default choices are the repository's
// models/demo-qwen3/ and models/demo-qwen35/).
// State the tests read: body[data-model] "loading" | "ready" | "error", body[data-progress] (progress events of the
// load), body[data-decided] and body[data-chatted] (counts), body[data-streamed] (token messages of the last reply),
// body[data-decide-error], rows tr.decision[data-id][data-answer] with .opt[data-option][data-prob].
const $ = (id) => document.getElementById(id);
const esc = (s) => String(s).replace(/[&<>"]/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' })[c]);
const params = new URLSearchParams(location.search);
const DEMO_FILES = ['config.json', 'generation_config.json', 'tokenizer.json', 'tokenizer_config.json', 'model.safetensors'];
const EXAMPLE_URL = new URL('../../models/demo/', location.href); // the demo's example ticket and criteria
const kB = (n) => n >= 1 << 20 ? (n / (1 << 20)).toFixed(1) + ' MB' : (n / 1024).toFixed(0) + ' kB';

/* ---- the engine in its Worker: call(op, args, {onProgress, onToken}) -> the op's result ---- */
const worker = new Worker(new URL('engine.worker.mjs', import.meta.url), { type: 'module' });
const calls = new Map();
let seq = 0;
worker.onmessage = (e) => {
    const m = e.data, c = calls.get(m.id);
    if (!c) return;
    if (m.progress) return c.onProgress && c.onProgress(m.progress);
    if (m.token !== undefined) return c.onToken && c.onToken(m.token);
    calls.delete(m.id);
    m.error !== undefined ? c.no(new Error(m.error)) : c.ok(m.result);
};
worker.onerror = (e) => {
    const msg = 'the engine failed: ' + (e.message || 'its worker could not start');
    for (const c of calls.values()) c.no(new Error(msg));
    calls.clear();
    $('engine').textContent = msg;
};
function call(op, args = {}, hooks = {}) {
    return new Promise((ok, no) => {
        const id = ++seq;
        calls.set(id, { ok, no, ...hooks });
        worker.postMessage({ id, op, ...args });
    });
}
const ready = call('init', { base: params.get('dist') ? new URL(params.get('dist'), location.href).href : null })
    .then((r) => {
        $('engine').textContent = `engine ${r.version} (WebAssembly, ${r.threads} thread${r.threads > 1 ? 's' : ''}, in a worker)`;
        return r;
    })
    .catch((e) => { $('engine').textContent = ''; $('merr').textContent = 'The engine did not start: ' + e.message; throw e; });

for (const t of ['decide', 'chat']) $('tab-' + t).onclick = () => {
    for (const u of ['decide', 'chat']) { $('tab-' + u).classList.toggle('on', u === t); $(u).classList.toggle('on', u === t); }
};

/* ---- the model: the demo (fetched from this site) or a GGUF file from disk ---- */
let haveModel = false, busy = false;
function setBusy(b) {
    busy = b;
    for (const id of ['demo', 'run', 'send']) $(id).disabled = b || (id !== 'demo' && !haveModel);
    $('file').disabled = $('which').disabled = b;
}
async function loadModel(op, args, label) {
    $('merr').textContent = '';
    $('progress').value = 0;
    $('ptext').textContent = '';
    $('model').textContent = 'loading ' + label + '…';
    document.body.dataset.model = 'loading';
    document.body.dataset.progress = '0';
    setBusy(true);
    haveModel = false;
    resetChat();
    const t0 = performance.now();
    try {
        await ready;
        const r = await call(op, args, { onProgress: (p) => {
            document.body.dataset.progress = String((+document.body.dataset.progress || 0) + 1);
            $('progress').value = p.total ? p.loaded / p.total : 0;
            $('ptext').textContent = `${p.what}: ${kB(p.loaded)}` + (p.total ? ` of ${kB(p.total)}` : '');
        } });
        haveModel = true;
        $('progress').value = 1;
        $('model').textContent = `${label}: ${r.arch}, kernels ${r.kernels}, loaded in ${((performance.now() - t0) / 1000).toFixed(1)} s`;
        document.body.dataset.model = 'ready';
    } catch (e) {
        $('model').textContent = 'no model loaded';
        $('merr').textContent = /^cannot load/i.test(e.message) ? e.message : `Cannot load ${label}: ${e.message}`;
        document.body.dataset.model = 'error';
    } finally {
        setBusy(false);
    }
}
if (params.get('demo')) {
    const o = document.createElement('option');
    o.value = o.textContent = params.get('demo');
    $('which').prepend(o);
    $('which').value = o.value;
}
$('demo').onclick = () => {
    const sel = $('which').selectedOptions[0];
    loadModel('loadDemo', { url: new URL(sel.value, location.href).href, files: DEMO_FILES }, sel.textContent);
};
$('file').onchange = () => {
    const f = $('file').files[0];
    if (f) loadModel('loadFile', { file: f }, f.name);
    $('file').value = ''; // the same file may be picked again
};
// a GGUF dropped anywhere on the page: the same as picking it
document.addEventListener('dragover', (e) => { if (e.dataTransfer.types.includes('Files')) e.preventDefault(); });
document.addEventListener('drop', (e) => {
    const f = e.dataTransfer.files[0];
    if (!f) return;
    e.preventDefault();
    if (!busy) loadModel('loadFile', { file: f }, f.name);
});

/* ---- criteria: a form (question + options, add / remove) and a JSONL box ---- */
let nextId = 1;
function optionRow(list, o) {
    const r = document.createElement('div');
    r.className = 'row opt-edit';
    r.innerHTML = '<input type="text" class="oid" placeholder="id" aria-label="option id"><input type="text" class="odesc" ' +
        'placeholder="Option" aria-label="option description">' +
        '<button class="x del-opt" title="Remove this option">×</button>';
    r.querySelector('.oid').value = o ? o.id : '';
    r.querySelector('.odesc').value = o ? o.description : '';
    r.querySelector('.del-opt').onclick = () => r.remove();
    list.appendChild(r);
    return r;
}
function addCriterion(c) {
    const d = document.createElement('div');
    d.className = 'crit';
    d.innerHTML = '<div class="row"><input type="text" class="cid" placeholder="id" aria-label="criterion id">' +
        '<input type="text" class="q" placeholder="Question" aria-label="question">' +
        '<button class="x del" title="Remove this criterion">×</button></div><div class="opts"></div>' +
        '<button class="sec addopt">+ option</button>';
    d.querySelector('.cid').value = c ? c.id : 'c' + nextId++;
    d.querySelector('.q').value = c ? c.question : '';
    const list = d.querySelector('.opts');
    for (const o of c ? c.options : [{ id: 'yes', description: 'Yes' }, { id: 'no', description: 'No' }]) optionRow(list, o);
    d.querySelector('.del').onclick = () => d.remove();
    d.querySelector('.addopt').onclick = () => optionRow(list, null).querySelector('.oid').focus();
    $('criteria').appendChild(d);
    return d;
}
// The form's criteria ({id, question, options}); an option's id defaults to its description.
function formCriteria() {
    return [...document.querySelectorAll('.crit')].map((d) => ({
        id: d.querySelector('.cid').value.trim(), question: d.querySelector('.q').value,
        options: [...d.querySelectorAll('.opt-edit')].map((r) => {
            const id = r.querySelector('.oid').value.trim(), description = r.querySelector('.odesc').value;
            return { id: id || description.trim(), description: description || id };
        }).filter((o) => o.id),
    }));
}
function parseJsonl(text) {
    return text.split('\n').map((l, i) => [l, i + 1]).filter(([l]) => l.trim()).map(([l, n]) => {
        let c;
        try { c = JSON.parse(l); } catch (e) { throw new Error(`JSONL line ${n}: not JSON (${e.message})`); }
        if (!c || typeof c !== 'object' || !Array.isArray(c.options))
            throw new Error(`JSONL line ${n}: a criterion is {"id", "question", "options": [{"id", "description"}]}`);
        return c;
    });
}
function setCriteria(list) {
    $('criteria').innerHTML = '';
    list.forEach(addCriterion);
}
$('add').onclick = () => addCriterion(null).querySelector('.q').focus();
$('jsonl-toggle').onclick = () => { $('jsonlbox').hidden = !$('jsonlbox').hidden; };
$('jsonl-use').onclick = () => {
    $('derr').textContent = '';
    try {
        setCriteria(parseJsonl($('jsonl').value));
        $('jsonlbox').hidden = true;
    } catch (e) { $('derr').textContent = e.message; }
};
$('jsonl-show').onclick = () => { $('jsonl').value = formCriteria().map((c) => JSON.stringify(c)).join('\n'); };

// The example of the demo model (its ticket and criteria), when the page is served from the repository.
(async () => {
    try {
        const [ev, cr] = await Promise.all(['ticket.txt', 'criteria.jsonl'].map(async (f) => {
            const r = await fetch(new URL(f, EXAMPLE_URL));
            if (!r.ok) throw new Error(f);
            return r.text();
        }));
        if (!$('evidence').value) $('evidence').value = ev.trim();
        if (!document.querySelector('.crit')) setCriteria(parseJsonl(cr));
    } catch {
        if (!document.querySelector('.crit')) addCriterion(null);
    }
    document.body.dataset.example = '1';
})();

// What the page refuses before the engine sees it (the library would answer a one-option question with 1.0).
function criteriaError(criteria) {
    const ids = new Set();
    for (const [i, c] of criteria.entries()) {
        const name = c.id ? `criterion "${c.id}"` : `criterion ${i + 1}`;
        if (!c.id) return `${name} has no id`;
        if (ids.has(c.id)) return `${name} is there twice: ids must differ`;
        ids.add(c.id);
        if (!c.question.trim()) return `${name} has no question`;
        if (c.options.length < 2) return `${name} has ${c.options.length} option${c.options.length === 1 ? '' : 's'}: a decision needs at least two to choose between`;
        const seen = new Set();
        for (const o of c.options) {
            if (seen.has(o.id)) return `${name}: option "${o.id}" is there twice`;
            seen.add(o.id);
        }
    }
    return '';
}

/* ---- decide: one batched pass over the evidence, the table with a bar per option ---- */
async function decide() {
    $('derr').textContent = '';
    delete document.body.dataset.decideError;
    const criteria = formCriteria();
    const bad = criteria.length ? criteriaError(criteria) : 'no criteria: add one';
    if (bad) {
        $('derr').textContent = bad;
        document.body.dataset.decideError = bad;
        return;
    }
    $('dstatus').textContent = `deciding ${criteria.length} criteria…`;
    setBusy(true);
    const t0 = performance.now();
    try {
        const r = await call('decide', { evidence: $('evidence').value, criteria: criteria.map((c) => JSON.stringify(c)).join('\n') });
        const wall = performance.now() - t0, byId = new Map(criteria.map((c) => [String(c.id), c]));
        const tb = $('results').querySelector('tbody');
        tb.innerHTML = '';
        for (const d of r.decisions) {
            const c = byId.get(d.id) || { question: d.id, options: [] };
            const desc = (k) => (c.options[k] || {}).description || d.options[k];
            const rows = d.options.map((o, k) => {
                const p = d.probs[k];
                return `<div class="opt${o === d.answer ? ' best' : ''}" data-option="${esc(o)}" data-prob="${p}">` +
                    `<span>${String.fromCharCode(65 + k)}. ${esc(desc(k))}</span><span class="track"><span class="fill" ` +
                    `style="width:${(100 * p).toFixed(1)}%"></span></span><span>${(100 * p).toFixed(1)}%</span></div>`;
            }).join('');
            // the library's own share of the work when the module reports it; else the batched pass shared evenly
            const ms = typeof d.ms === 'number' ? d.ms : r.ms / r.decisions.length;
            tb.insertAdjacentHTML('beforeend', `<tr class="decision" data-id="${esc(d.id)}" data-answer="${esc(d.answer)}">` +
                `<td>${esc(c.question)}<div class="mute">${esc(d.id)}</div></td><td><div class="answer">${esc(d.letter)}. ` +
                `${esc(desc(d.options.indexOf(d.answer)))}</div>${rows}</td><td class="ms">${ms.toFixed(1)}</td></tr>`);
        }
        tb.insertAdjacentHTML('beforeend', `<tr class="total"><td colspan="2">All ${r.decisions.length} criteria, ` +
            'one batched pass over the evidence</td>' + `<td class="ms">${r.ms.toFixed(1)}</td></tr>`);
        $('results').hidden = false;
        $('dstatus').textContent = `${r.decisions.length} criteria in ${r.ms.toFixed(0)} ms in the engine ` +
            `(${wall.toFixed(0)} ms on the page)` + (r.decisions.some((d) => typeof d.ms === 'number') ? ''
            : '; the ms of a criterion is its even share of the batched pass');
        document.body.dataset.decided = String((+document.body.dataset.decided || 0) + 1);
    } catch (e) {
        $('dstatus').textContent = '';
        $('derr').textContent = e.message;
        document.body.dataset.decideError = e.message;
    } finally {
        setBusy(false);
    }
}
$('run').onclick = decide;

/* ---- chat: the reply streamed token by token; the conversation's KV stays in the engine between turns ---- */
let chatId = 0;
function bubble(role, text) {
    const d = document.createElement('div');
    d.className = 'msg';
    d.dataset.role = role;
    d.innerHTML = `<b>${role === 'user' ? 'you' : 'model'}</b> <span class="txt"></span>`;
    d.querySelector('.txt').textContent = text || '';
    $('log').appendChild(d);
    $('log').scrollTop = 1e9;
    return d;
}
function resetChat() {
    $('log').innerHTML = '';
    $('cstatus').textContent = '';
    $('cerr').textContent = '';
    if (haveModel) call('resetChat').catch(() => null);
}
async function send() {
    const text = $('input').value;
    if (!text.trim() || busy) return;
    $('cerr').textContent = '';
    const maxTokens = parseInt($('maxtok').value, 10), tv = $('temp').value.trim(), temperature = tv === '' ? NaN : Number(tv);
    if (tv !== '' && !(temperature >= 0)) {
        $('cerr').textContent = `temperature ${JSON.stringify(tv)}: a number >= 0 (0: greedy), or empty for the model's`;
        return;
    }
    $('input').value = '';
    bubble('user', text);
    const out = bubble('assistant', '').querySelector('.txt');
    let n = 0;
    document.body.dataset.streamed = '0';
    setBusy(true);
    $('stop').disabled = false;
    $('cstatus').textContent = 'reading the conversation…';
    const t0 = performance.now(), id = ++chatId;
    try {
        const r = await call('chat', { text, system: $('system').value, think: $('think').checked,
                                       maxTokens: maxTokens > 0 ? maxTokens : 0, temperature },
                             { onToken: (t) => {
                                 out.textContent += t;
                                 $('log').scrollTop = 1e9;
                                 $('cstatus').textContent = `${++n} tokens…`;
                                 document.body.dataset.streamed = String(n);
                             } });
        if (id !== chatId) return;
        if (r.dropped) $('log').insertAdjacentHTML('beforeend', `<div class="note">${r.dropped} of the oldest messages ` +
                                                   'left out: the conversation outgrew the context</div>');
        const ms = performance.now() - t0;
        $('cstatus').textContent = `${r.ids ? r.ids.length : n} tokens in ${ms.toFixed(0)} ms (${r.finish}` +
            (r.msFirstToken !== undefined ? `; first token after ${r.msFirstToken.toFixed(0)} ms, ${r.nPrompt} prompt ` +
             `tokens of which ${r.nReused} were already read` : '') + ')';
        document.body.dataset.chatted = String((+document.body.dataset.chatted || 0) + 1);
    } catch (e) {
        out.parentElement.remove();
        $('input').value = text; // the message back in the box, to send again
        $('cerr').textContent = e.message;
        $('cstatus').textContent = '';
    } finally {
        $('stop').disabled = true;
        setBusy(false);
    }
}
$('send').onclick = send;
$('input').onkeydown = (e) => { if (e.key === 'Enter' && !e.shiftKey) { e.preventDefault(); send(); } };
$('stop').onclick = () => call('cancel').catch(() => null);
$('reset').onclick = resetChat;
