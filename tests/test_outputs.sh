#!/usr/bin/env bash
# Outputs never destroy a user's file (issue 47): every command that writes resolves its paths to file identities and
# refuses an output that is an input or another output (also before either exists: "./o/x" and "o/x"); files are
# written beside their target and renamed into place, so a failed write (a full disk, simulated with ulimit -f)
# leaves the old file whole and no partial one; nothing the command did not create is removed (a device node given
# as -o stays); a model is replaced only with --force; a non-regular output is refused with a clear message.
# Each case is a reproducer of the issue's probe: it failed before (data lost or a file clobbered) and passes now.
source "$(dirname "$0")/data_safety_lib.sh"
make_corpus
GGUF=$ROOT/fixtures/gguf/qwen3-tiny-tied-f32.gguf

# ---- run: --summary, --errors and --out over inputs or each other -------------------------------------------------
$RUN --input "$tmp/docs.jsonl" --criteria "$tmp/crit.jsonl" --out "$tmp/r.jsonl" 2>/dev/null || fail "the reference run failed"
r0=$(sum "$tmp/r.jsonl") d0=$(sum "$tmp/docs.jsonl") c0=$(sum "$tmp/crit.jsonl")
expect nz 'are the same file' -- $RUN --resume --input "$tmp/docs.jsonl" --criteria "$tmp/crit.jsonl" --out "$tmp/r.jsonl" --summary "$tmp/r.jsonl"
same "$tmp/r.jsonl" "$r0" "run --summary over --out replaced the results"
expect nz 'refusing to write over an input of this command' -- $RUN --input "$tmp/docs.jsonl" --criteria "$tmp/crit.jsonl" --out "$tmp/r2.jsonl" --summary "$tmp/docs.jsonl"
same "$tmp/docs.jsonl" "$d0" "run --summary over --input replaced the corpus"
expect nz 'refusing to write over an input of this command' -- $RUN --input "$tmp/docs.jsonl" --criteria "$tmp/crit.jsonl" --out "$tmp/r3.jsonl" --summary "$tmp/crit.jsonl"
same "$tmp/crit.jsonl" "$c0" "run --summary over --criteria replaced the criteria"
mkdir -p "$tmp/o"
pushd "$tmp" >/dev/null
expect nz 'are the same file' -- $RUN --input docs.jsonl --criteria crit.jsonl --out o/x.jsonl --errors ./o/x.jsonl
popd >/dev/null
[ -s "$tmp/o/x.jsonl" ] && fail "--errors ./o/x.jsonl with --out o/x.jsonl: a results file was written"
expect nz 'refusing to write over an input of this command' -- $RUN --input "$tmp/docs.jsonl" --criteria "$tmp/crit.jsonl" --out "$tmp/docs.jsonl"
same "$tmp/docs.jsonl" "$d0" "run --out over --input"
expect nz 'refusing to write over an input of this command' -- $RUN --input "$tmp/docs.jsonl" --criteria "$tmp/crit.jsonl" --out "$tmp/r4.jsonl" --errors "$tmp/crit.jsonl"
same "$tmp/crit.jsonl" "$c0" "run --errors over --criteria"
ln -s "$tmp/docs.jsonl" "$tmp/link.jsonl"
ln "$tmp/docs.jsonl" "$tmp/hard.jsonl"
expect nz 'refusing to write over an input of this command' -- $RUN --input "$tmp/docs.jsonl" --criteria "$tmp/crit.jsonl" --out "$tmp/r5.jsonl" --summary "$tmp/link.jsonl"
expect nz 'refusing to write over an input of this command' -- $RUN --input "$tmp/docs.jsonl" --criteria "$tmp/crit.jsonl" --out "$tmp/hard.jsonl"
same "$tmp/docs.jsonl" "$d0" "run over a symbolic or hard link of its input"
# a summary is written whole, beside itself: a full disk leaves the old one
echo '{"old": "summary"}' >"$tmp/sum.json"
s0=$(sum "$tmp/sum.json")
expect 0 '' -- $RUN --resume --input "$tmp/docs.jsonl" --criteria "$tmp/crit.jsonl" --out "$tmp/r.jsonl" --summary "$tmp/sum.json"
grep -q '"documents"' "$tmp/sum.json" || fail "--summary: not written"
ls -a "$tmp" | grep -q '\.tmp\.' && fail "a temporary file was left behind: $(ls -a "$tmp")"

# ---- run --force on a full disk: OUT and its errors and provenance stay as they were ------------------------------
# (hostile probe, bench/hostile: `run --force` emptied OUT when it started, so a full disk lost the old results) A
# forced run writes OUT.partial, ERRORS.partial and OUT.partial.provenance.json, and renames them over the old
# files only when it completes; after a failure --resume continues the partial run into OUT.
for x in "" .errors .provenance.json; do cp "$tmp/r.jsonl$x" "$tmp/fd.jsonl$x"; done
echo "my old results" >"$tmp/fd.jsonl"
f0=$(sum "$tmp/fd.jsonl") fe0=$(sum "$tmp/fd.jsonl.errors") fp0=$(sum "$tmp/fd.jsonl.provenance.json")
expect nz 'write failed' -- "${SMALL_DISK[@]}" 1 $RUN --input "$tmp/docs.jsonl" --criteria "$tmp/crit.jsonl" --out "$tmp/fd.jsonl" --force
grep -qF 'fd.jsonl is unchanged' "$tmp/err" || fail "a failed forced run does not say OUT is unchanged: $(cat "$tmp/err")"
same "$tmp/fd.jsonl" "$f0" "run --force on a full disk: the old results"
same "$tmp/fd.jsonl.errors" "$fe0" "run --force on a full disk: the old errors"
same "$tmp/fd.jsonl.provenance.json" "$fp0" "run --force on a full disk: the old provenance"
expect 0 'continuing the interrupted --force run' -- $RUN --resume --input "$tmp/docs.jsonl" --criteria "$tmp/crit.jsonl" --out "$tmp/fd.jsonl"
same "$tmp/fd.jsonl" "$r0" "run --force on a full disk, then --resume: not the run's results"
ls -a "$tmp" | grep -q 'fd\.jsonl.*partial' && fail "partial files left after the forced run completed: $(ls -a "$tmp")"
# a forced run on a full disk, then --force again with room: it starts the partial run again and completes
echo "my old results" >"$tmp/fd.jsonl"
expect nz 'write failed' -- "${SMALL_DISK[@]}" 1 $RUN --input "$tmp/docs.jsonl" --criteria "$tmp/crit.jsonl" --out "$tmp/fd.jsonl" --force
expect 0 '' -- $RUN --force --input "$tmp/docs.jsonl" --criteria "$tmp/crit.jsonl" --out "$tmp/fd.jsonl"
same "$tmp/fd.jsonl" "$r0" "run --force after a failed one: not the run's results"
# OUT a symbolic link: a forced run replaces the file it names and keeps the link
mkdir -p "$tmp/real" && echo "my old results" >"$tmp/real/fl.jsonl" && ln -s real/fl.jsonl "$tmp/fl.jsonl"
expect 0 '' -- $RUN --force --input "$tmp/docs.jsonl" --criteria "$tmp/crit.jsonl" --out "$tmp/fl.jsonl"
[ -L "$tmp/fl.jsonl" ] || fail "run --force over a symbolic link replaced the link"
same "$tmp/real/fl.jsonl" "$r0" "run --force over a symbolic link: the file it names"

# ---- run --out / --errors that are not regular files ---------------------------------------------------------------
expect nz 'a character device, not a regular file' -- $RUN --input "$tmp/docs.jsonl" --criteria "$tmp/crit.jsonl" --out /dev/null
[ -e /dev/null.errors ] && fail "run --out /dev/null created /dev/null.errors"
expect nz 'a directory, not a regular file' -- $RUN --input "$tmp/docs.jsonl" --criteria "$tmp/crit.jsonl" --out "$tmp/o"
expect 2 'the results go to a file' -- $RUN --input "$tmp/docs.jsonl" --criteria "$tmp/crit.jsonl" --out -

# ---- tokenize --export-json over its own input ------------------------------------------------------------------------
cp "$GGUF" "$tmp/m.gguf"
g0=$(sum "$tmp/m.gguf")
expect nz 'refusing to write over an input of this command' -- "$BIN" tokenize --model "$tmp/m.gguf" --export-json "$tmp/m.gguf"
same "$tmp/m.gguf" "$g0" "tokenize --export-json over its input GGUF"
expect nz 'refusing to write over an input of this command' -- "$BIN" tokenize --tokenizer "$tmp/m.gguf" --export-json "$tmp/m.gguf" --force
same "$tmp/m.gguf" "$g0" "tokenize --export-json --force over its input GGUF"
cp -rL "$M" "$tmp/model"
t0=$(sum "$tmp/model/tokenizer.json") w0=$(sum "$tmp/model/model.safetensors")
expect nz 'refusing to write over a file of the model' -- "$BIN" tokenize --model "$tmp/model" --export-json "$tmp/model/tokenizer.json" --force
expect nz 'refusing to write over a file of the model' -- "$BIN" tokenize --model "$tmp/model" --export-json "$tmp/model/model.safetensors" --force
expect nz 'refusing to write over an input of this command' -- "$BIN" tokenize --tokenizer "$tmp/model/tokenizer.json" --export-json "$tmp/model/./tokenizer.json" --force
same "$tmp/model/tokenizer.json" "$t0" "tokenize --export-json over the model's tokenizer.json"
same "$tmp/model/model.safetensors" "$w0" "tokenize --export-json over the model's weights"
expect 0 '' -- "$BIN" tokenize --model "$tmp/model" --export-json "$tmp/exported.json"
e0=$(sum "$tmp/exported.json")
expect nz 'exists: --force replaces it' -- "$BIN" tokenize --model "$tmp/m.gguf" --export-json "$tmp/exported.json"
same "$tmp/exported.json" "$e0" "tokenize --export-json replaced a file without --force"
# a full disk: the old file stays whole (no truncated tokenizer.json)
expect nz 'cannot write the tokenizer.json' -- "${SMALL_DISK[@]}" 16 "$BIN" tokenize --model "$tmp/m.gguf" --export-json "$tmp/exported.json" --force
same "$tmp/exported.json" "$e0" "tokenize --export-json on a full disk"
expect nz 'cannot write the tokenizer.json' -- "${SMALL_DISK[@]}" 16 "$BIN" tokenize --model "$tmp/m.gguf" --export-json "$tmp/new.json"
[ -e "$tmp/new.json" ] && fail "tokenize --export-json on a full disk left a partial file ($(stat -c %s "$tmp/new.json") bytes)"

# ---- synth over an existing model ---------------------------------------------------------------------------------
TOK=$ROOT/fixtures/tokenizers/qwen3-trunc2048/tokenizer.json
cat >"$tmp/mini.json" <<'EOF'
{"model_type": "qwen3", "vocab_size": 2112, "hidden_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2,
 "num_key_value_heads": 1, "head_dim": 16, "intermediate_size": 32, "max_position_embeddings": 256,
 "rms_norm_eps": 1e-6, "rope_theta": 10000, "tie_word_embeddings": true}
EOF
expect nz 'the directory is not empty' -- "$BIN" synth --config "$tmp/mini.json" --tokenizer "$TOK" --out "$tmp/model" --seed 3
same "$tmp/model/model.safetensors" "$w0" "synth --out over an existing model replaced its weights"
expect 0 '' -- "$BIN" synth --config "$tmp/mini.json" --tokenizer "$TOK" --out "$tmp/syn" --seed 3
expect nz 'refusing to write over an input of this command' -- "$BIN" synth --config "$tmp/mini.json" --tokenizer "$tmp/syn/tokenizer.json" --out "$tmp/syn" --force
expect 0 '' -- "$BIN" synth --config "$tmp/mini.json" --tokenizer "$TOK" --out "$tmp/model" --seed 3 --force
[ "$(sum "$tmp/model/model.safetensors")" = "$(sum "$tmp/syn/model.safetensors")" ] || fail "synth --force did not write the model"
ls -a "$tmp/model" | grep -q '^\.synth' && fail "synth left its temporary directory"
echo x >"$tmp/plain"
expect nz 'exists and is not a directory' -- "$BIN" synth --config "$tmp/mini.json" --out "$tmp/plain"
rm -rf "$tmp/model" && cp -rL "$M" "$tmp/model"

# ---- export: a failed write removes nothing it did not create ------------------------------------------------------
expect 0 '' -- "$BIN" export --model "$M" --quant f32 -o "$tmp/e.gguf"
x0=$(sum "$tmp/e.gguf")
expect nz 'exists: --force replaces it' -- "$BIN" export --model "$M" --quant q8_0 -o "$tmp/e.gguf"
same "$tmp/e.gguf" "$x0" "export replaced a model without --force"
expect nz 'write failed' -- "${SMALL_DISK[@]}" 64 "$BIN" export --model "$M" --quant f32 -o "$tmp/e.gguf" --force
same "$tmp/e.gguf" "$x0" "export: a failed write destroyed the -o file that was there"
expect nz 'write failed' -- "${SMALL_DISK[@]}" 64 "$BIN" export --model "$M" --quant f32 -o "$tmp/e2.gguf"
[ -e "$tmp/e2.gguf" ] && fail "export: a failed write left a partial file"
ls -a "$tmp" | grep -q '\.tmp\.' && fail "export left a temporary file: $(ls -a "$tmp" | grep '\.tmp\.')"
if private_full "$tmp/full"; then # root: a device node given as -o is refused and stays
    expect nz 'a character device, not a regular file' -- "$BIN" export --model "$M" --quant f32 -o "$tmp/full" --force
    [ -c "$tmp/full" ] || fail "export -o DEVICE removed the device node"
fi
expect nz 'a character device, not a regular file' -- "$BIN" export --model "$M" --quant f32 -o /dev/full --force
[ -c /dev/full ] || fail "export -o /dev/full removed /dev/full"
expect nz 'refusing to write over a file of the model' -- "$BIN" export --model "$tmp/model" --quant f32 -o "$tmp/model/model.safetensors" --force
same "$tmp/model/model.safetensors" "$w0" "export over its model's weights"
expect 0 '' -- "$BIN" export --model "$M" --quant f32 --prune-head AB -o "$tmp/p.gguf"
expect nz 'exists: --force replaces it' -- "$BIN" export --model "$M" --quant f32 --prune-head AB -o "$tmp/p2.gguf"
[ -e "$tmp/p2.gguf" ] && fail "export wrote a GGUF although its slot_map.json could not be written"

# ---- evaluate, decide, logits: outputs over inputs or each other, and failed writes ------------------------------------
printf '{"id": "a", "family": "f", "evidence": "Refund me.", "question": "Refund?", "options": [{"id": "y", "description": "Yes"}, {"id": "n", "description": "No"}], "answer": "y"}\n' >"$tmp/fx.jsonl"
f0=$(sum "$tmp/fx.jsonl")
expect nz 'are the same file' -- "$BIN" evaluate "$tmp/fx.jsonl" --model "$M" --quiet --out "$tmp/same.json" --predictions "$tmp/./same.json"
expect nz 'are the same file' -- "$BIN" evaluate "$tmp/fx.jsonl" --model "$M" --quiet --plot "$tmp/same.svg" --out "$tmp/same.svg"
expect nz 'refusing to write over an input of this command' -- "$BIN" evaluate "$tmp/fx.jsonl" --model "$M" --quiet --plot "$tmp/fx.jsonl"
same "$tmp/fx.jsonl" "$f0" "evaluate over its fixture"
echo old >"$tmp/pred.jsonl"
p0=$(sum "$tmp/pred.jsonl")
for i in $(seq 1 40); do sed "s/\"a\"/\"a$i\"/" "$tmp/fx.jsonl"; done >"$tmp/fx40.jsonl" # predictions over 4 KiB
expect nz 'write failed' -- "${SMALL_DISK[@]}" 4 "$BIN" evaluate "$tmp/fx40.jsonl" --model "$M" --quiet --predictions "$tmp/pred.jsonl"
same "$tmp/pred.jsonl" "$p0" "evaluate --predictions on a full disk"
expect 0 '' -- "$BIN" evaluate "$tmp/fx.jsonl" --model "$M" --quiet --predictions "$tmp/pred.jsonl" --out "$tmp/res.json" --plot "$tmp/plot.svg"
grep -q '"probs"' "$tmp/pred.jsonl" && [ -s "$tmp/res.json" ] && [ -s "$tmp/plot.svg" ] || fail "evaluate: the outputs were not written"
expect nz 'a directory, not a regular file' -- "$BIN" decide --model "$M" --criteria "$tmp/fx.jsonl" --quiet --slot-map "$tmp/o"
expect nz 'refusing to write over a file of the model' -- "$BIN" logits --model "$tmp/model" --ids 1,2 --out "$tmp/model/config.json"
echo old >"$tmp/l.f32"
l0=$(sum "$tmp/l.f32")
expect nz 'write failed' -- "${SMALL_DISK[@]}" 4 "$BIN" logits --model "$M" --ids 1,2,3,4,5,6 --out "$tmp/l.f32"
same "$tmp/l.f32" "$l0" "logits --out on a full disk"

# a file at OUT.provenance.json that is not a provenance record (nothing at OUT): refused without --force, unchanged;
# a record of an earlier run there is replaced with its results (hostile probe, bench/hostile: it was replaced)
source_crit=$tmp/pcrit.jsonl
echo '{"id": "refund", "question": "Refund?", "options": [{"id": "yes", "description": "Yes"}, {"id": "no", "description": "No"}]}' >"$source_crit"
echo '{"id": "p1", "evidence": "Please refund me."}' >"$tmp/pdocs.jsonl"
echo 'my notes, not a provenance record' >"$tmp/pr.jsonl.provenance.json"
pr0=$(sum "$tmp/pr.jsonl.provenance.json")
expect nz 'pr.jsonl.provenance.json exists and is not a provenance record of typedecide run' -- "$BIN" run --model "$M" --quiet --input "$tmp/pdocs.jsonl" --criteria "$source_crit" --out "$tmp/pr.jsonl"
same "$tmp/pr.jsonl.provenance.json" "$pr0" "run replaced a file at OUT.provenance.json that is not its record"
[ -e "$tmp/pr.jsonl" ] && fail "a refused run left the results file it created"
expect 0 '' -- "$BIN" run --model "$M" --quiet --input "$tmp/pdocs.jsonl" --criteria "$source_crit" --out "$tmp/pr.jsonl" --force
grep -q '"typedecide_run"' "$tmp/pr.jsonl.provenance.json" || fail "run --force: the provenance record was not written"
rm "$tmp/pr.jsonl" "$tmp/pr.jsonl.errors" # an earlier run's record alone: replaced with the new results
expect 0 '' -- "$BIN" run --model "$M" --quiet --input "$tmp/pdocs.jsonl" --criteria "$source_crit" --out "$tmp/pr.jsonl"
[ "$(wc -l <"$tmp/pr.jsonl")" -eq 1 ] || fail "run over an earlier run's record alone: not the results"

finish test_outputs
