#!/usr/bin/env node
// Reference tokenizer for the parity tests: Hugging Face's Rust `tokenizers` (through @anush008/tokenizers).
//
//   node hf_tokenize.js TOKENIZER_JSON CORPUS_JSONL
//
// For every line {"text": ...} of the corpus it prints one line {"ids": [...], "decoded": "..."}: the ids of
// encode(text) without special-token addition (added tokens in the text are still matched), and decode(ids)
// with skip_special_tokens=false. Output order is input order.
'use strict';
const fs = require('fs');
const { Tokenizer } = require('@anush008/tokenizers');

async function main() {
  const [tokPath, corpusPath] = process.argv.slice(2);
  if (!tokPath || !corpusPath) {
    process.stderr.write('usage: node hf_tokenize.js TOKENIZER_JSON CORPUS_JSONL\n');
    process.exit(2);
  }
  const tok = Tokenizer.fromFile(tokPath);
  const lines = fs.readFileSync(corpusPath, 'utf8').split('\n');
  if (lines[lines.length - 1] === '') lines.pop();
  const out = [];
  for (let i = 0; i < lines.length; i++) {
    let text;
    try {
      text = JSON.parse(lines[i]).text;
    } catch (e) {
      throw new Error(`${corpusPath}:${i + 1}: ${e.message}`);
    }
    if (typeof text !== 'string') throw new Error(`${corpusPath}:${i + 1}: expected a string field "text"`);
    const enc = await tok.encode(text, null, { addSpecialTokens: false });
    const ids = Array.from(enc.getIds());
    const decoded = await tok.decode(ids, false);
    out.push(JSON.stringify({ ids, decoded }));
  }
  process.stdout.write(out.length ? out.join('\n') + '\n' : '');
}

main().catch((e) => {
  process.stderr.write(`hf_tokenize.js: ${e.stack || e}\n`);
  process.exit(1);
});
