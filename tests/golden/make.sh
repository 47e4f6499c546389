#!/usr/bin/env bash
# Writes the outputs of decide / evaluate / metrics / export / inspect (and a few more commands) on the fixtures
# into OUT_DIR, for tests/test_golden.sh to compare with the files under tests/golden/ that were written by the
# code before the library refactor (issue 12): the refactor must not change a byte of them.
#
#   bash tests/golden/make.sh BIN OUT_DIR
#
# Runs from the repository root with relative paths (they appear in the outputs). Kernels are pinned per
# subdirectory (TD_KERNELS=avx2: every x86-64 machine this project meets runs it, so the files do not depend on
# the machine; the scalar references once more for decide on two models). Wall-clock figures are the only thing normalised away: "ms",
# "wall_seconds", "rows_per_second" and the table's cost line.
set -euo pipefail
BIN=$(realpath "$1")
OUT=$(realpath -m "$2")
cd "$(dirname "$0")/../.."
mkdir -p "$OUT"
FX=tests/golden/rows.jsonl  # every 4th row of fixtures/eval/decisions.jsonl

# wall-clock fields -> 0, in JSON (compact or indented) and in the evaluate table
untime() {
    sed -E -e 's/"ms": ?[-0-9.eE+]+/"ms":0/g' -e 's/"(wall_seconds|rows_per_second)": ?[-0-9.eE+]+/"\1":0/g' \
        -e 's/^(  cost: .* suffix tokens\/row), [0-9.]+ s, [0-9.infa]+ rows\/s$/\1, T s, R rows\/s/'
}

d=$OUT/scalar
mkdir -p "$d"
for M in fixtures/models/qwen3-tiny-tied fixtures/models/qwen35-tiny-vl; do
    TD_KERNELS=scalar "$BIN" decide --model "$M" --criteria "$FX" --allowed-mass --show-logits --threads 2 --quiet |
        untime >"$d/$(basename "$M").decide.jsonl"
done

for K in avx2; do
    d=$OUT/$K
    mkdir -p "$d"
    export TD_KERNELS=$K
    for M in fixtures/models/qwen3-tiny-tied fixtures/models/qwen35-tiny-vl fixtures/models/qwen35-tiny-text \
             fixtures/gguf/qwen3-tiny-tied-q8_0.gguf; do
        n=$(basename "$M" .gguf)
        "$BIN" decide --model "$M" --criteria "$FX" --allowed-mass --show-logits --threads 2 --quiet \
            --slot-map "$d/$n.slot.json" | untime >"$d/$n.decide.jsonl"
    done
    "$BIN" decide --model fixtures/models/qwen3-tiny-tied --criteria "$FX" --kv f16 --serial --threads 1 --quiet |
        untime >"$d/qwen3-tiny-tied.decide-kvf16.jsonl"
    for M in fixtures/models/qwen3-tiny-tied fixtures/models/qwen35-tiny-vl; do
        n=$(basename "$M")
        E=("$BIN" evaluate "$FX" --model "$M" --threads 2 --quiet)
        "${E[@]}" --out "$d/$n.eval-none.json" --predictions "$d/$n.eval-none.jsonl" | untime >"$d/$n.eval-none.txt"
        "${E[@]}" --debias cyclic --out "$d/$n.eval-cyclic.json" --predictions "$d/$n.eval-cyclic.jsonl" \
            --plot "$d/$n.eval-cyclic.svg" | untime >"$d/$n.eval-cyclic.txt"
        "${E[@]}" --debias prior --prior-fraction 0.1 --seed 3 --out "$d/$n.eval-prior.json" \
            --predictions "$d/$n.eval-prior.jsonl" | untime >"$d/$n.eval-prior.txt"
        "${E[@]}" --shots 2 --seed 7 --out "$d/$n.eval-shots.json" --predictions "$d/$n.eval-shots.jsonl" |
            untime >"$d/$n.eval-shots.txt"
        "${E[@]}" --mode generate --max-tokens 4 --out "$d/$n.eval-generate.json" \
            --predictions "$d/$n.eval-generate.jsonl" | untime >"$d/$n.eval-generate.txt"
        for v in none cyclic prior shots generate; do
            for f in "$d/$n.eval-$v.json" "$d/$n.eval-$v.jsonl"; do untime <"$f" >"$f.t" && mv "$f.t" "$f"; done
            "$BIN" metrics --predictions "$d/$n.eval-$v.jsonl" | untime >"$d/$n.metrics-$v.json"
        done
    done
    "$BIN" logits --model fixtures/models/qwen35-tiny-vl --ids 1,2,3,4,5,6,7,8 --out "$d/logits.f32" 2>/dev/null
    "$BIN" generate --model fixtures/models/qwen3-tiny-tied --prompt "The capital of France is" -n 12 --temperature 0 \
        >"$d/generate.txt" 2>/dev/null
    ( cd "$d" && sha256sum logits.f32 >logits.sha256 && rm logits.f32 )
done
unset TD_KERNELS

# export does not depend on the kernels: one set of files, kept as checksums (plus inspect's description)
d=$OUT/export
mkdir -p "$d"
ex() { # name model quant [more export flags]
    local name=$1 model=$2 quant=$3
    shift 3
    "$BIN" export --model "$model" --quant "$quant" "$@" -o "$d/$name.gguf" 2>/dev/null
    ( cd "$d" && "$BIN" inspect "$name.gguf" --json >"$name.inspect.json" && sha256sum "$name.gguf" >"$name.sha256" &&
      rm "$name.gguf" )
}
ex qwen3-f32 fixtures/models/qwen3-tiny-tied f32
ex qwen3-bf16 fixtures/models/qwen3-tiny-untied bf16
ex qwen3-q8_0 fixtures/models/qwen3-tiny-tied q8_0
ex qwen3-q4_0-embf16 fixtures/models/qwen3-tiny-tied q4_0 --embed-quant f16
ex qwen3-q8_0-abcd fixtures/models/qwen3-tiny-tied q8_0 --prune-head ABCD
mv "$d/slot_map.json" "$d/qwen3-q8_0-abcd.slot_map.json"
ex qwen35vl-f32 fixtures/models/qwen35-tiny-vl f32
ex qwen35text-q8_0 fixtures/models/qwen35-tiny-text q8_0
ex qwen35text-q4_0-ab fixtures/models/qwen35-tiny-text q4_0 --prune-head AB
mv "$d/slot_map.json" "$d/qwen35text-q4_0-ab.slot_map.json"
ex gguf-q8_0-f16 fixtures/gguf/qwen3-tiny-tied-q8_0.gguf f16
"$BIN" inspect fixtures/models/qwen35-tiny-vl >"$d/inspect-qwen35-tiny-vl.txt"
"$BIN" savings --preset qwen3-8b --letters 4 >"$d/savings-qwen3-8b.txt"
"$BIN" savings --model fixtures/models/qwen3-tiny-tied --json >"$d/savings-qwen3-tiny-tied.json"
"$BIN" tokenize --model fixtures/models/qwen3-tiny-tied --text "Answer: A. Évidence — naïve café" >"$d/tokenize.txt"
