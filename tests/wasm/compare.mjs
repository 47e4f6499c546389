// Compares two decide outputs made of sections "# MODEL ..." followed by one JSON decision per line (wasm_run.mjs's
// format; test_wasm.sh writes the native tool's the same way): the same models, criteria, option ids and answers,
// and every probability within TOL (0: the same float, bit for bit, as printed with 9 significant digits).
//   node compare.mjs A B TOL    prints the largest difference; exit 1 on any mismatch
import { readFileSync } from 'node:fs';

const [a, b, tolArg] = process.argv.slice(2);
const tol = Number(tolArg);
function sections(path) {
    const out = [];
    for (const line of readFileSync(path, 'utf8').split('\n')) {
        if (!line.trim()) continue;
        if (line.startsWith('# ')) out.push({ model: line.slice(2).split(' ')[0], rows: [] });
        else out.at(-1).rows.push(JSON.parse(line));
    }
    return out;
}
const A = sections(a), B = sections(b);
let worst = 0, rows = 0, bad = 0;
const fail = (what) => { console.error(`compare: ${what}`); bad++; };
if (A.length !== B.length || A.length === 0) fail(`${A.length} models in ${a}, ${B.length} in ${b}`);
for (let s = 0; s < Math.min(A.length, B.length); s++) {
    const x = A[s], y = B[s];
    if (x.model !== y.model) { fail(`model ${x.model} against ${y.model}`); continue; }
    if (x.rows.length !== y.rows.length) { fail(`${x.model}: ${x.rows.length} decisions against ${y.rows.length}`); continue; }
    x.rows.forEach((r, i) => {
        const q = y.rows[i];
        rows++;
        if (r.id !== q.id || r.answer !== q.answer || JSON.stringify(r.options) !== JSON.stringify(q.options) ||
            r.probs.length !== q.probs.length)
            return fail(`${x.model} ${r.id}: ${JSON.stringify(r)} against ${JSON.stringify(q)}`);
        r.probs.forEach((p, k) => {
            const d = Math.abs(p - q.probs[k]);
            worst = Math.max(worst, d);
            if (d > tol) fail(`${x.model} ${r.id} option ${r.options[k]}: ${p} against ${q.probs[k]} (|d| ${d} > ${tol})`);
        });
    });
}
console.log(`compare: ${rows} decisions over ${A.length} models, largest |difference| ${worst}`);
process.exit(bad ? 1 : 0);
