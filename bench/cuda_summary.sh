#!/usr/bin/env bash
# Sums up a bench/cuda_device.sh run (the folder the device tool brought back: cuda.jsonl, steps.log, machine.txt) as
# one JSON object: the steps and their exit codes, the checks' printed maxima, and the timing table (ours on the GPU
# in fp32 and bf16 beside transformers in bf16, same call). Usage: bash bench/cuda_summary.sh DIR > FILE.json (jq).
set -euo pipefail
d=${1:?usage: bench/cuda_summary.sh DIR}
# the JSON line a step printed: the first line of its section in steps.log that starts with "{"
out() { awk -v s="== $1 " 'index($0, s) == 1 {on = 1; next} /^== / {on = 0} on && /^\{/ {print; exit}' "$d/steps.log"; }
lines() { awk -v s="== $1 " 'index($0, s) == 1 {on = 1; next} /^== / {on = 0} on' "$d/steps.log" | grep -E "$2" || true; }
ours() { out "bench-$1-$2" | jq -c "{$3}"; }
jq -cn --slurpfile steps "$d/cuda.jsonl" \
    --arg gpu "$(grep -m1 -oE 'NVIDIA H[0-9A-Z]+' "$d/machine.txt")" \
    --arg manifest "$(sed -n '/== manifest/,/== typedecide/p' "$d/machine.txt" | sed '1d;$d')" \
    --argjson pb "$(ours prefill bf16 'tokens_per_s')" --argjson pf "$(ours prefill fp32 'tokens_per_s')" \
    --argjson db "$(ours decode bf16 'tokens_per_s')" --argjson df "$(ours decode fp32 'tokens_per_s')" \
    --argjson cb "$(ours decide bf16 'criteria_per_s, prefix_ms, suffix_ms_per_criterion')" \
    --argjson cf "$(ours decide fp32 'criteria_per_s, prefix_ms, suffix_ms_per_criterion')" \
    --argjson tf "$(out transformers)" \
    --arg kernels "$(lines kernels '^[a-z_, ]+:|max|all checks|failed')" \
    --arg engine "$(lines engine '^(parity|demo models|decide|test_cuda_engine|qwen|models/)')" \
    --arg clients "$(lines clients '^\{"check"|^clients')" \
    --arg fixture "$(lines fixture '^\{')" \
    --arg sanitizers "$(grep -E '^== (memcheck|racecheck)|ERROR SUMMARY|RACECHECK SUMMARY' "$d/steps.log")" '
{what: "the CUDA backend on the H200 (issue 17): bench/cuda_device.sh, summed up by bench/cuda_summary.sh",
 gpu: $gpu, build: $manifest,
 steps: [$steps[] | select(.step) | {step, rc, seconds}],
 timing: {model: "synthetic qwen3-0.6b, BF16 safetensors (typedecide synth)",
   prefill_2048_tokens_per_s: {gpu_fp32: $pf.tokens_per_s, gpu_bf16: $pb.tokens_per_s, transformers_bf16: $tf.prefill.tokens_per_s},
   decode_batch1_tokens_per_s: {gpu_fp32: $df.tokens_per_s, gpu_bf16: $db.tokens_per_s, transformers_bf16: $tf.decode.tokens_per_s},
   decide_144x45_over_256_criteria_per_s: {gpu_fp32: $cf.criteria_per_s, gpu_bf16: $cb.criteria_per_s,
     transformers_bf16: $tf.decide.criteria_per_s},
   ours_decide_detail: {fp32: $cf, bf16: $cb}, transformers: $tf},
 kernels: ($kernels | split("\n")), engine: ($engine | split("\n")), clients: ($clients | split("\n")),
 transformers_bf16_on_fixtures: ($fixture | split("\n") | map(select(length > 0) | fromjson)),
 sanitizers: ($sanitizers | split("\n"))}'
