#!/usr/bin/env bash
# Sums up a bench/cuda_device.sh run (the folder the device tool brought back: cuda.jsonl, steps.log, machine.txt,
# decide-clients-h200.json) as one JSON object (OUT.json: the steps and exit codes, the checks' printed maxima, the
# sanitizers' summaries, and issue 43's table: ours on the GPU in bf16 and fp32 beside transformers bf16 and
# llama.cpp's CUDA build, same call, with each line's target) and prints the acceptance table.
# bench/cuda_device.sh runs it at its end on the GPU host (python3 only: no jq there).
# Usage: bash bench/cuda_summary.sh DIR [OUT.json]
set -euo pipefail
d=${1:?usage: bench/cuda_summary.sh DIR [OUT.json]}
exec python3 "$(dirname "$0")/cuda_summary.py" "$d" ${2:+"$2"}
