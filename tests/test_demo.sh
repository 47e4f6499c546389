#!/usr/bin/env bash
# The trained demo models (models/): both load and decide the README's example (JSON lines when piped, the table
# with --table); on the held-out fixture demo-qwen3 reproduces the figures recorded by bench/demo_tiers.sh and is
# above chance; the shipment_tracking adapter loads and raises accuracy on its family. The whole held-out fixture
# runs in the release build only (about 35 s); the sanitized build decides and evaluates a few rows.
# The issue's bar (0.85 mean family balanced accuracy held out) is NOT met by these models: the figure is printed
# here and stated in README.md and NOTES.md; this test checks what holds.
set -uo pipefail
ROOT=${TD_ROOT:-$(cd "$(dirname "$0")/.." && pwd)}
BIN=${TD_BIN:-$ROOT/build/typedecide}
cd "$ROOT"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }
num() { node -e "const o = JSON.parse(require('fs').readFileSync(process.argv[1], 'utf8')); console.log($2)" "$1"; }

for m in demo-qwen3 demo-qwen35; do
    "$BIN" decide --model models/$m --evidence models/demo/ticket.txt --criteria models/demo/criteria.jsonl \
        --quiet --threads 2 >"$tmp/$m.jsonl" 2>"$tmp/err" || fail "$m: decide failed: $(cat "$tmp/err")"
    node -e '
const fs = require("fs");
const lines = fs.readFileSync(process.argv[1], "utf8").trim().split("\n").map(l => JSON.parse(l));
if (lines.length !== 4) throw new Error("want 4 decisions, got " + lines.length);
for (const d of lines) {
  const s = d.probs.reduce((a, b) => a + b, 0);
  if (Math.abs(s - 1) > 1e-5 || d.options.length !== d.probs.length) throw new Error("bad decision " + JSON.stringify(d));
}' "$tmp/$m.jsonl" || fail "$m: decisions are not 4 JSON lines with probabilities that sum to 1"
    "$BIN" decide --table --model models/$m --evidence models/demo/ticket.txt --criteria models/demo/criteria.jsonl \
        --quiet --threads 2 >"$tmp/$m.table" || fail "$m: decide --table failed"
    head -1 "$tmp/$m.table" | grep -c "^criterion .*answer .*probability .*ms$" >/dev/null || fail "$m: no table header: $(head -1 "$tmp/$m.table")"
    [ "$(grep -c '\[[#.]\{20\}\]' "$tmp/$m.table")" = 4 ] || fail "$m: want 4 probability bars: $(cat "$tmp/$m.table")"
    "$BIN" decide --json --model models/$m --evidence models/demo/ticket.txt --criteria models/demo/criteria.jsonl \
        --quiet --threads 2 | sed 's/"ms":[0-9.e+-]*//' >"$tmp/$m.json2"
    sed 's/"ms":[0-9.e+-]*//' "$tmp/$m.jsonl" | cmp -s - "$tmp/$m.json2" || fail "$m: --json differs from the piped output"
done
"$BIN" decide --table --json --model models/demo-qwen3 --criteria models/demo/criteria.jsonl >/dev/null 2>&1
[ $? -eq 2 ] || fail "--table with --json must be a usage error"

if [ -n "${TD_SANITIZED:-}" ]; then # a few rows: the engine under the sanitizers, not the figures
    head -12 fixtures/eval/heldout.jsonl >"$tmp/few.jsonl"
    for m in demo-qwen3 demo-qwen35; do
        "$BIN" evaluate "$tmp/few.jsonl" --model models/$m --debias cyclic --quiet --threads 2 --out "$tmp/few.json" \
            >/dev/null || fail "$m: evaluate on 12 held-out rows failed"
    done
    head -6 fixtures/eval/heldout-shipment.jsonl >"$tmp/ship.jsonl"
    "$BIN" evaluate "$tmp/ship.jsonl" --model models/demo-qwen3 --adapter models/demo-qwen3-shipment-lora --quiet \
        --threads 2 >/dev/null || fail "evaluate with the adapter failed"
else
    "$BIN" evaluate fixtures/eval/heldout.jsonl --model models/demo-qwen3 --quiet --threads 2 --out "$tmp/h.json" \
        >/dev/null || fail "demo-qwen3: evaluate on the held-out fixture failed"
    got=$(num "$tmp/h.json" o.mean_family_balanced_accuracy)
    want=$(num bench/results/demo-tiers.json 'o.models["demo-qwen3"].bf16_checkpoint["readout, 0 shots"].mean_family_balanced_accuracy')
    chance=$(num bench/results/demo-tiers.json o.chance.mean_family_balanced_accuracy)
    echo "demo-qwen3 held out: mean family balanced accuracy $got (recorded $want, chance $chance; the issue's bar 0.85: $(node -e "console.log($got >= 0.85 ? 'met' : 'NOT met')"))"
    node -e "process.exit(Math.abs($got - $want) <= 1e-4 ? 0 : 1)" || fail "demo-qwen3: held-out figure $got differs from the recorded $want"
    node -e "process.exit($got > $chance + 0.05 ? 0 : 1)" || fail "demo-qwen3: held-out figure $got is not above chance $chance"
    for a in base lora; do
        extra=()
        [ $a = lora ] && extra=(--adapter models/demo-qwen3-shipment-lora)
        "$BIN" evaluate fixtures/eval/heldout-shipment.jsonl --model models/demo-qwen3 "${extra[@]}" --quiet --threads 2 \
            --out "$tmp/ship-$a.json" >/dev/null || fail "shipment fixture ($a) failed"
    done
    b=$(num "$tmp/ship-base.json" o.mean_family_balanced_accuracy)
    l=$(num "$tmp/ship-lora.json" o.mean_family_balanced_accuracy)
    echo "shipment_tracking: base $b, with the adapter $l"
    node -e "process.exit($l > $b ? 0 : 1)" || fail "the adapter does not raise accuracy on its family ($b -> $l)"
fi
[ $fails -eq 0 ] && echo "test_demo: all passed" && exit 0
exit 1
