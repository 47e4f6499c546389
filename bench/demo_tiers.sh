#!/usr/bin/env bash
# What the quantisation tiers and the pruned head cost the demo models, measured on the held-out fixture
# (fixtures/eval/heldout.jsonl: 260 criteria, 10 families, wordings and values no training row contains).
# For models/demo-qwen3 and models/demo-qwen35, each tier (F32, BF16, Q8_0, Q4_0 GGUF from `typedecide export`,
# and each again with the head pruned to the letters ABCDE) is evaluated once with --debias cyclic; the plain
# readout is the identity rotation of the same run (rotations[0] of every prediction, bit-identical to a run
# without debiasing), scored by `typedecide metrics`. On the BF16 checkpoint itself: readout vs generate at 0 and
# 3 shots, cyclic vs none, the hand-written fixture (fixtures/eval/decisions.jsonl), and the LoRA adapter on its
# family (fixtures/eval/heldout-shipment.jsonl). Writes bench/results/demo-tiers.json (every figure, the exact
# commands, the machine and its CPU flags) and the table between the demo-tiers markers in docs/demo-models.md.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${TD_BIN:-build/typedecide}
T=${THREADS:-2}
FX=${FX:-fixtures/eval/heldout.jsonl}
PEOPLE=${PEOPLE:-fixtures/eval/decisions.jsonl}
SHIP=${SHIP:-fixtures/eval/heldout-shipment.jsonl}
out=${TMPDIR:-/tmp}/td-demo-tiers
mkdir -p "$out" bench/results
[ -n "${SUMMARY_ONLY:-}" ] || : >"$out/commands.txt"
run() {
    echo "demo_tiers: $*" >&2
    echo "$*" >>"$out/commands.txt"
    "$@" >/dev/null
}
plain() { # the identity rotation of a cyclic run's predictions
    node -e '
const fs = require("fs");
for (const l of fs.readFileSync(process.argv[1], "utf8").trim().split("\n")) {
  const r = JSON.parse(l); r.probs = r.rotations[0]; delete r.rotations; console.log(JSON.stringify(r));
}' "$1"
}
# SUMMARY_ONLY=1: only rewrite the JSON and the table in docs/demo-models.md from the last run's files in $out
if [ -z "${SUMMARY_ONLY:-}" ]; then
for m in demo-qwen3 demo-qwen35; do
    for q in f32 bf16 q8_0 q4_0; do
        for p in full pruned; do
            t=$m-$q-$p
            f=$out/$t.gguf
            if [ $p = full ]; then
                run "$BIN" export --model models/$m --quant $q -o "$f" --force
            else
                run "$BIN" export --model models/$m --quant $q --prune-head ABCDE -o "$f" --force
            fi
            run "$BIN" evaluate $FX --model "$f" --debias cyclic --threads "$T" --quiet --out "$out/$t.cyclic.json" \
                --predictions "$out/$t.cyclic.pred.jsonl"
            plain "$out/$t.cyclic.pred.jsonl" >"$out/$t.plain.pred.jsonl"
            "$BIN" metrics --predictions "$out/$t.plain.pred.jsonl" >"$out/$t.plain.json"
            echo "$BIN metrics --predictions $out/$t.plain.pred.jsonl" >>"$out/commands.txt"
            stat -c %s "$f" >"$out/$t.bytes"
            rm -f "$f"
        done
    done
    run "$BIN" evaluate $FX --model models/$m --threads "$T" --quiet --out "$out/$m.readout0.json"
    run "$BIN" evaluate $FX --model models/$m --threads "$T" --quiet --shots 3 --out "$out/$m.readout3.json"
    run "$BIN" evaluate $FX --model models/$m --threads "$T" --quiet --mode generate --out "$out/$m.generate0.json"
    run "$BIN" evaluate $FX --model models/$m --threads "$T" --quiet --mode generate --shots 3 \
        --out "$out/$m.generate3.json"
    run "$BIN" evaluate $FX --model models/$m --threads "$T" --quiet --debias cyclic --out "$out/$m.cyclic0.json"
    run "$BIN" evaluate $PEOPLE --model models/$m --threads "$T" --quiet \
        --out "$out/$m.people.json"
    run "$BIN" evaluate $PEOPLE --model models/$m --threads "$T" --quiet --debias cyclic \
        --out "$out/$m.people-cyclic.json"
done
run "$BIN" evaluate $SHIP --model models/demo-qwen3 --threads "$T" --quiet \
    --out "$out/adapter-base.json"
run "$BIN" evaluate $SHIP --model models/demo-qwen3 \
    --adapter models/demo-qwen3-shipment-lora --threads "$T" --quiet --out "$out/adapter-lora.json"
fi
cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')
flags=$(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -E '^(avx|avx2|fma|f16c|avx512f|avx512bw|avx512vl|avx512_vnni|avx_vnni)$' | tr '\n' ' ')
node - "$out" "$cpu" "$flags" "$(nproc)" "$T" "$FX" "$SHIP" <<'NODE'
const fs = require("fs");
const [dir, cpu, flags, nproc, threads, FX, SHIP] = process.argv.slice(2);
const J = f => JSON.parse(fs.readFileSync(dir + "/" + f, "utf8"));
const r4 = x => x == null ? null : Math.round(x * 1e4) / 1e4;
const pick = (o) => ({mean_family_balanced_accuracy: r4(o.mean_family_balanced_accuracy), accuracy: r4(o.accuracy),
  ece: r4(o.ece), brier: r4(o.brier), order_unstable: o.order_unstable, order_consistency: r4(o.order_consistency),
  family_balanced_accuracy: Object.fromEntries(Object.entries(o.family_balanced_accuracy).map(([k, v]) => [k, r4(v)])),
  seconds: o.cost ? r4(o.cost.wall_seconds) : null, unparsed: o.unparsed});
const models = {};
const tiers = [];
for (const m of ["demo-qwen3", "demo-qwen35"]) {
  const T = {};
  for (const q of ["f32", "bf16", "q8_0", "q4_0"]) for (const p of ["full", "pruned"]) {
    const t = `${m}-${q}-${p}`, c = J(t + ".cyclic.json"), pl = J(t + ".plain.json");
    T[`${q}${p === "pruned" ? "+prune" : ""}`] = {gguf_bytes: +fs.readFileSync(`${dir}/${t}.bytes`, "utf8"),
      readout: pick(pl), cyclic: pick(c)};
  }
  const modes = {};
  for (const [k, f] of [["readout, 0 shots", "readout0"], ["readout, 3 shots", "readout3"],
                        ["generate, 0 shots", "generate0"], ["generate, 3 shots", "generate3"],
                        ["readout, cyclic debias", "cyclic0"]]) modes[k] = pick(J(`${m}.${f}.json`));
  models[m] = {tiers: T, bf16_checkpoint: modes, hand_written: {readout: pick(J(`${m}.people.json`)),
    cyclic: pick(J(`${m}.people-cyclic.json`))}};
}
// chance: a uniform guess's expected balanced accuracy per family (mean over answer ids of the mean 1/k)
const rows = fs.readFileSync(FX, "utf8").trim().split("\n").map(l => JSON.parse(l));
const fam = {};
for (const r of rows) { ((fam[r.family] ??= {})[r.answer] ??= []).push(1 / r.options.length); }
const chanceFam = Object.fromEntries(Object.entries(fam).map(([f, a]) => [f, r4(Object.values(a).map(v =>
  v.reduce((s, x) => s + x, 0) / v.length).reduce((s, x) => s + x, 0) / Object.keys(a).length)]));
const chance = r4(Object.values(chanceFam).reduce((s, x) => s + x, 0) / Object.keys(chanceFam).length);
const ab = J("adapter-base.json"), al = J("adapter-lora.json");
const res = {fixture: FX, rows: rows.length, families: Object.keys(fam).length,
  chance: {mean_family_balanced_accuracy: chance, family_balanced_accuracy: chanceFam},
  models, adapter: {fixture: SHIP, base: pick(ab), adapter: pick(al),
    gain_mean_family_balanced_accuracy: r4(al.mean_family_balanced_accuracy - ab.mean_family_balanced_accuracy)},
  machine: {cpu, flags: flags.trim().split(" "), nproc: +nproc, threads: +threads},
  commands: fs.readFileSync(dir + "/commands.txt", "utf8").trim().split("\n").map(s => s.replace(dir, "$TMP"))};
fs.writeFileSync("bench/results/demo-tiers.json", JSON.stringify(res, null, 1) + "\n");
// the table in docs/demo-models.md
const f2 = x => x == null ? "n/a" : x.toFixed(3);
let md = "| model | tier | GGUF MB | mean family bal. acc. (readout) | cyclic: mean family bal. acc. | order-unstable rows (cyclic) | order consistency | ECE | Brier | seconds (cyclic run) |\n|---|---|---|---|---|---|---|---|---|---|\n";
const moved = [];
for (const m of Object.keys(models)) {
  const T = models[m].tiers, ref = T["f32"];
  for (const [k, v] of Object.entries(T)) {
    md += `| ${m} | ${k.toUpperCase().replace("+PRUNE", " + pruned head")} | ${(v.gguf_bytes / 1e6).toFixed(1)} | ${f2(v.readout.mean_family_balanced_accuracy)} | ${f2(v.cyclic.mean_family_balanced_accuracy)} | ${v.cyclic.order_unstable} of ${rows.length} | ${f2(v.cyclic.order_consistency)} | ${f2(v.readout.ece)} | ${f2(v.readout.brier)} | ${v.cyclic.seconds.toFixed(1)} |\n`;
    const da = Math.abs(v.readout.mean_family_balanced_accuracy - ref.readout.mean_family_balanced_accuracy);
    const dc = Math.abs(v.cyclic.order_consistency - ref.cyclic.order_consistency);
    if (da > 0.02 || dc > 0.02) moved.push(`${m} ${k.replace("+prune", " + pruned head")} (accuracy ${da > 0.02 ? "moved " + da.toFixed(3) : "within 0.02"}, order consistency ${dc > 0.02 ? "moved " + dc.toFixed(3) : "within 0.02"})`);
  }
}
md += "\nTiers that move mean family balanced accuracy or order consistency by more than 0.02 from F32: " +
  (moved.length ? moved.join("; ") : "none") + ".\n\n";
md += "| model (BF16 checkpoint) | mode | mean family bal. acc. | accuracy | ECE | unparsed | seconds |\n|---|---|---|---|---|---|---|\n";
for (const m of Object.keys(models)) for (const [k, v] of Object.entries(models[m].bf16_checkpoint))
  md += `| ${m} | ${k} | ${f2(v.mean_family_balanced_accuracy)} | ${f2(v.accuracy)} | ${f2(v.ece)} | ${v.unparsed ?? 0} | ${v.seconds.toFixed(1)} |\n`;
md += `\nChance (a uniform guess) on this fixture: ${chance.toFixed(3)} mean family balanced accuracy.\n`;
const rd = fs.readFileSync("docs/demo-models.md", "utf8");
const a = rd.indexOf("<!-- demo-tiers:begin -->"), b = rd.indexOf("<!-- demo-tiers:end -->");
if (a >= 0 && b > a) fs.writeFileSync("docs/demo-models.md", rd.slice(0, a) + "<!-- demo-tiers:begin -->\n" + md + rd.slice(b));
process.stdout.write(md);
NODE
