#!/usr/bin/env bash
# `typedecide metrics` on a hand-made predictions file whose metrics were computed by hand (below), to 1e-9:
# a tie (first shown option wins), a family with one answer class, rows of 2, 3 and 5 options, empty ECE bins and
# confidences exactly on bin edges (0.6 = 9/15 and 0.4 = 6/15 fall in the lower bin), rotations with a tie;
# then a second file for order stability by its definition (rotations against each other, ties, probs apart).
set -uo pipefail
ROOT=${TD_ROOT:-$(cd "$(dirname "$0")/.." && pwd)}
BIN=${TD_BIN:-$ROOT/build/typedecide}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat >"$tmp/p.jsonl" <<'EOF2'
{"id": "r1", "family": "x", "answer": "a", "options": ["a", "b"], "probs": [0.7, 0.3], "rotations": [[0.7, 0.3], [0.6, 0.4]]}
{"id": "r2", "family": "x", "answer": "b", "options": ["a", "b"], "probs": [0.5, 0.5], "rotations": [[0.5, 0.5], [0.4, 0.6]]}
{"id": "r3", "family": "x", "answer": "c", "options": ["a", "b", "c"], "probs": [0.2, 0.2, 0.6], "rotations": [[0.2, 0.2, 0.6], [0.3, 0.3, 0.4], [0.5, 0.1, 0.4]]}
{"id": "r4", "family": "y", "answer": "p", "options": ["p", "q", "r", "s", "t"], "probs": [0.1, 0.4, 0.1, 0.2, 0.2], "rotations": [[0.1, 0.4, 0.1, 0.2, 0.2], [0.1, 0.4, 0.1, 0.2, 0.2], [0.1, 0.4, 0.1, 0.2, 0.2], [0.1, 0.4, 0.1, 0.2, 0.2], [0.1, 0.4, 0.1, 0.2, 0.2]]}
{"id": "r5", "family": "y", "answer": "p", "options": ["q", "p"], "probs": [0.25, 0.75], "rotations": [[0.25, 0.75], [0.5, 0.5]]}
{"id": "r6", "family": "z", "answer": "v", "options": ["m", "n", "o", "u", "v"], "probs": [0.05, 0.05, 0.05, 0.05, 0.8], "rotations": [[0.05, 0.05, 0.05, 0.05, 0.8], [0.1, 0.1, 0.1, 0.1, 0.6], [0.05, 0.05, 0.05, 0.05, 0.8], [0.05, 0.05, 0.05, 0.05, 0.8], [0.05, 0.05, 0.05, 0.05, 0.8]]}
EOF2
"$BIN" metrics --predictions "$tmp/p.jsonl" >"$tmp/m.json" || { echo "FAIL: metrics failed"; exit 1; }
# Hand computation:
#  predictions (argmax, first on ties): r1 a (right), r2 a (tie, wrong), r3 c (right), r4 q (wrong), r5 p (right), r6 v
#  accuracy = 4/6
#  balanced: x = mean(recall a 1, b 0, c 1) = 2/3; y = recall p = 1/2 (one class); z = 1; mean = (2/3 + 1/2 + 1)/3
#  brier: r1 .09+.09=.18, r2 .25+.25=.5, r3 .04+.04+.16=.24, r4 .81+.16+.01+.04+.04=1.06, r5 .0625*2=.125,
#         r6 4*.0025+.04=.05; sum 2.155 / 6
#  ece (15 bins): bin 5 {r4 .4 wrong}, bin 7 {r2 .5 wrong}, bin 8 {r3 .6 right}, bin 10 {r1 .7 right},
#         bin 11 {r5 .75, r6 .8, both right}: (.4 + .5 + .4 + .3 + 2 * .225) / 6 = 2.05 / 6; 10 bins empty
#  rotations: r2 (a then b), r3 (c, c, a) and r5 (p then a tie -> q) change their argmax: 3 unstable, consistency .5
#  recall by answer position: A {r1 right, r4 wrong} .5, B {r2 wrong, r5 right} .5, C {r3} 1, E {r6} 1:
#         mean .75, population std .25 -> rstd 25
node -e '
const m = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
const want = {accuracy: 4 / 6, mean_family_balanced_accuracy: (2 / 3 + 1 / 2 + 1) / 3, brier: 2.155 / 6, ece: 2.05 / 6,
              order_unstable: 3, order_consistency: 0.5, rstd: 25};
const fam = {x: 2 / 3, y: 0.5, z: 1};
let bad = 0;
const near = (k, got, w) => { if (typeof got !== "number" || Math.abs(got - w) > 1e-9) { console.log("FAIL:", k, got, "want", w); bad++; } };
for (const k in want) near(k, m[k], want[k]);
for (const f in fam) near("family_balanced_accuracy." + f, m.family_balanced_accuracy[f], fam[f]);
if (Object.keys(m.family_balanced_accuracy).length !== 3) { console.log("FAIL: families", m.family_balanced_accuracy); bad++; }
const filled = m.ece_bins.map((b, i) => b.n ? i : -1).filter(i => i >= 0);
if (JSON.stringify(filled) !== "[5,7,8,10,11]" || m.ece_bins.length !== 15) { console.log("FAIL: ece bins", JSON.stringify(filled)); bad++; }
const preds = m.per_criterion.map(r => r.prediction).join(",");
if (preds !== "a,a,c,q,p,v") { console.log("FAIL: predictions", preds); bad++; }
const stable = m.per_criterion.map(r => r.stable).join(",");
if (stable !== "true,false,false,true,false,true") { console.log("FAIL: stable", stable); bad++; }
process.exit(bad ? 1 : 0);' "$tmp/m.json" || exit 1

# order_unstable by its definition: a row is unstable iff the argmax option ids of its rotations are not all equal
# (ties within a rotation: first shown option). The rotations are compared with each other, never with the argmax
# of probs, which a file made elsewhere need not make the rotation average. s1 and s5 tell the two apart.
cat >"$tmp/r.jsonl" <<'EOF2'
{"id": "s1", "family": "w", "answer": "a", "options": ["a", "b"], "probs": [0.4, 0.6], "rotations": [[0.7, 0.3], [0.6, 0.4]]}
{"id": "s2", "family": "w", "answer": "a", "options": ["a", "b", "c"], "probs": [0.5, 0.3, 0.2], "rotations": [[0.5, 0.3, 0.2], [0.2, 0.6, 0.2], [0.5, 0.3, 0.2]]}
{"id": "s3", "family": "w", "answer": "c", "options": ["a", "b", "c"], "probs": [0.2, 0.45, 0.35], "rotations": [[0.2, 0.5, 0.3], [0.1, 0.45, 0.45], [0.3, 0.4, 0.3]]}
{"id": "s4", "family": "w", "answer": "c", "options": ["a", "b", "c"], "probs": [0.2, 0.3, 0.5], "rotations": [[0.2, 0.2, 0.6], [0.1, 0.45, 0.45], [0.3, 0.25, 0.45]]}
{"id": "s5", "family": "w", "answer": "b", "options": ["a", "b"], "probs": [0.5, 0.5], "rotations": [[0.4, 0.6], [0.45, 0.55]]}
EOF2
"$BIN" metrics --predictions "$tmp/r.jsonl" >"$tmp/mr.json" || { echo "FAIL: metrics on rotations failed"; exit 1; }
# Hand computation (prediction = argmax of probs; rotation argmaxes in order):
#  s1 probs -> b (wrong), not the rotation average; rotations a, a: stable (comparing with probs' b said unstable)
#  s2 probs -> a (right), agrees with rotation 1; rotations a, b, a: unstable
#  s3 probs -> b (wrong; the average); rotations b, tie b/c -> b (first shown), b: stable
#  s4 probs -> c (right; the average); rotations c, tie b/c -> b (first shown, not c), c: unstable
#  s5 probs tie -> a (wrong), not the average; rotations b, b: stable (comparing with probs' a said unstable)
#  accuracy 2/5; order_unstable 2 (s2, s4); order_consistency 1 - 2/5 = .6
node -e '
const m = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
let bad = 0;
const near = (k, got, w) => { if (typeof got !== "number" || Math.abs(got - w) > 1e-9) { console.log("FAIL:", k, got, "want", w); bad++; } };
near("rotations: accuracy", m.accuracy, 2 / 5);
near("rotations: order_consistency", m.order_consistency, 0.6);
if (m.order_unstable !== 2) { console.log("FAIL: rotations: order_unstable", m.order_unstable, "want 2"); bad++; }
const preds = m.per_criterion.map(r => r.prediction).join(",");
if (preds !== "b,a,b,c,a") { console.log("FAIL: rotations: predictions", preds); bad++; }
const stable = m.per_criterion.map(r => r.stable).join(",");
if (stable !== "true,false,true,false,true") { console.log("FAIL: rotations: stable", stable, "want true,false,true,false,true"); bad++; }
process.exit(bad ? 1 : 0);' "$tmp/mr.json" || exit 1

# without rotations: order metrics are null; with --bins 2 the bins are (0, .5] and (.5, 1]
sed 's/, "rotations": .*}$/}/' "$tmp/p.jsonl" >"$tmp/q.jsonl"
"$BIN" metrics --predictions "$tmp/q.jsonl" --bins 2 >"$tmp/m2.json" || { echo "FAIL: metrics --bins 2 failed"; exit 1; }
# bin 0 {r2 .5 wrong, r4 .4 wrong}: |0 - .45| * 2/6; bin 1 {r1 .7, r3 .6, r5 .75, r6 .8 all right}: |1 - .7125| * 4/6
node -e '
const m = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
let bad = 0;
if (m.order_unstable !== null || m.order_consistency !== null) { console.log("FAIL: order metrics should be null"); bad++; }
const ece = 0.45 * 2 / 6 + 0.2875 * 4 / 6;
if (Math.abs(m.ece - ece) > 1e-9) { console.log("FAIL: ece with 2 bins", m.ece, "want", ece); bad++; }
process.exit(bad ? 1 : 0);' "$tmp/m2.json" || exit 1

# a bad line is named
printf '{"id": "ok", "answer": "a", "options": ["a"], "probs": [1]}\n{"id": "bad", "answer": "z", "options": ["a", "b"], "probs": [0.5, 0.5]}\n' >"$tmp/bad.jsonl"
"$BIN" metrics --predictions "$tmp/bad.jsonl" >/dev/null 2>"$tmp/err" && { echo "FAIL: bad answer accepted"; exit 1; }
grep -q "bad.jsonl:2: row \"bad\": answer \"z\" is not among the options" "$tmp/err" || { echo "FAIL: message: $(cat "$tmp/err")"; exit 1; }
echo "test_metrics: all checks passed"
