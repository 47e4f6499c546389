#!/usr/bin/env bash
# --resume never trusts what it finds (issue 47): a results file carries its provenance (OUT.provenance.json: the
# input's size and hash, the criteria's, the model and settings, the shard), and resume refuses anything else with
# the reason and without changing a byte (a file that is not a results file, results of another corpus, shard,
# criteria file or model, results without a provenance); it drops duplicated lines, lines out of input order, of
# another share or after a missing document, with their counts on stderr, so that the files end up as one
# uninterrupted run's, byte for byte; a second run on the same --out is refused (flock) instead of writing every
# document twice. Each case is a reproducer of the issue's probe that failed before and passes now.
source "$(dirname "$0")/data_safety_lib.sh"
make_corpus
R="$RUN --input $tmp/docs.jsonl --criteria $tmp/crit.jsonl"
$R --out "$tmp/ref.jsonl" 2>/dev/null || fail "the reference run failed"
[ "$(wc -l <"$tmp/ref.jsonl")" -eq 10 ] && [ "$(wc -l <"$tmp/ref.jsonl.errors")" -eq 2 ] || fail "reference: want 10 results and 2 errors"
[ -s "$tmp/ref.jsonl.provenance.json" ] || fail "no provenance record beside the results"
grep -q '"complete":true' "$tmp/ref.jsonl.provenance.json" || fail "a finished run's provenance does not say complete"
grep -q "$tmp" "$tmp/ref.jsonl.provenance.json" && fail "the provenance holds a path of this machine"
ref=$(sum "$tmp/ref.jsonl") referr=$(sum "$tmp/ref.jsonl.errors")
# copy the reference run to NAME (results, errors and provenance, as a user renames them together)
copy_ref() { for x in "" .errors .provenance.json; do cp "$tmp/ref.jsonl$x" "$tmp/$1$x"; done; }

# ---- a file that is not a results file: refused, not truncated -------------------------------------------------------
printf 'my notes, not results\nline two\n' >"$tmp/notes.txt"
n0=$(sum "$tmp/notes.txt")
expect nz 'has no provenance record' -- $R --out "$tmp/notes.txt" --resume
same "$tmp/notes.txt" "$n0" "resume truncated a file that is not a results file"
# results of this very run whose provenance was deleted: refused too (resume cannot tell what they are)
copy_ref np.jsonl && rm "$tmp/np.jsonl.provenance.json"
expect nz 'has no provenance record' -- $R --out "$tmp/np.jsonl" --resume
same "$tmp/np.jsonl" "$ref" "resume changed results without a provenance"
# a provenance that is not one
copy_ref bp.jsonl && echo '{"typedecide_run": 7}' >"$tmp/bp.jsonl.provenance.json"
expect nz 'not a provenance record of typedecide run' -- $R --out "$tmp/bp.jsonl" --resume
same "$tmp/bp.jsonl" "$ref" "resume changed results with a bad provenance"

# ---- results of another corpus, shard, criteria file or model: refused, unchanged --------------------------------------
copy_ref other.jsonl
expect nz 'holds results of another input' -- $RUN --input "$tmp/docs2.jsonl" --criteria "$tmp/crit.jsonl" --out "$tmp/other.jsonl" --resume
expect nz 'holds shard 0/1, this run is shard 1/2' -- $R --shard 1/2 --out "$tmp/other.jsonl" --resume
expect nz 'holds results of another criteria file' -- $RUN --input "$tmp/docs.jsonl" --criteria "$tmp/crit2.jsonl" --out "$tmp/other.jsonl" --resume
expect nz 'holds results of another criteria file (one against none)' -- $RUN --input "$tmp/docs.jsonl" --out "$tmp/other.jsonl" --resume
expect nz 'holds results of another model or other settings' -- $RUN --input "$tmp/docs.jsonl" --criteria "$tmp/crit.jsonl" --model "$ROOT/fixtures/models/qwen3-tiny-untied" --out "$tmp/other.jsonl" --resume
expect nz 'holds results of another model or other settings' -- $R --letters XY --out "$tmp/other.jsonl" --resume
expect nz 'holds results of another model or other settings' -- $R --allowed-mass --out "$tmp/other.jsonl" --resume
same "$tmp/other.jsonl" "$ref" "a refused resume changed the results"
same "$tmp/other.jsonl.errors" "$referr" "a refused resume changed the errors"
# what does not change results may change: threads, batch size, memory, another errors file name, a moved corpus
cp "$tmp/docs.jsonl" "$tmp/moved.jsonl"
expect 0 '' -- $RUN --input "$tmp/moved.jsonl" --criteria "$tmp/crit.jsonl" --out "$tmp/other.jsonl" --resume --threads 2 --batch-size 1 --memory 64
same "$tmp/other.jsonl" "$ref" "a resume with the same provenance changed the results"

# ---- duplicated lines, lines out of order, of another share, after a gap: dropped, counted, then the reference -----
copy_ref dup.jsonl
sed -n 2p "$tmp/ref.jsonl" >>"$tmp/dup.jsonl" # 6 lines for 5 documents, in the probe's words
expect 0 'dropped 1 duplicated line' -- $R --out "$tmp/dup.jsonl" --resume
same "$tmp/dup.jsonl" "$ref" "a duplicated line was kept"
copy_ref dup2.jsonl
{ sed -n 1,3p "$tmp/ref.jsonl"; sed -n 3p "$tmp/ref.jsonl"; sed -n '4,$p' "$tmp/ref.jsonl"; } >"$tmp/dup2.jsonl"
expect 0 'dropped 1 duplicated line' -- $R --out "$tmp/dup2.jsonl" --resume
same "$tmp/dup2.jsonl" "$ref" "a duplicated line in the middle was kept"
copy_ref order.jsonl
{ sed -n 1,3p "$tmp/ref.jsonl"; sed -n 5p "$tmp/ref.jsonl"; sed -n 4p "$tmp/ref.jsonl"; sed -n '6,$p' "$tmp/ref.jsonl"; } >"$tmp/order.jsonl"
expect 0 '1 line out of input order' -- $R --out "$tmp/order.jsonl" --resume
grep -q 'after a missing document (decided again)' "$tmp/err" || fail "lines after the missing document not counted: $(cat "$tmp/err")"
same "$tmp/order.jsonl" "$ref" "lines out of input order were kept out of order"
copy_ref gap.jsonl
sed -i 4d "$tmp/gap.jsonl" # a document missing in the middle: what follows it is decided again, in order
expect 0 'after a missing document (decided again)' -- $R --out "$tmp/gap.jsonl" --resume
same "$tmp/gap.jsonl" "$ref" "a missing document in the middle: not the reference after resume"
copy_ref garbage.jsonl
{ sed -n 1,4p "$tmp/ref.jsonl"; printf '\0\0\0garbage\n'; sed -n '5,$p' "$tmp/ref.jsonl"; } >"$tmp/garbage.jsonl"
expect 0 'repaired: cut' -- $R --out "$tmp/garbage.jsonl" --resume
same "$tmp/garbage.jsonl" "$ref" "garbage in the middle: not the reference after resume"
copy_ref blank.jsonl
{ sed -n 1,4p "$tmp/ref.jsonl"; echo; sed -n '5,$p' "$tmp/ref.jsonl"; } >"$tmp/blank.jsonl"
expect 0 'dropped 1 blank line' -- $R --out "$tmp/blank.jsonl" --resume
same "$tmp/blank.jsonl" "$ref" "a blank line was kept"
# a line of the other shard in shard 0's file
$R --shard 0/2 --out "$tmp/s0.jsonl" 2>/dev/null && $R --shard 1/2 --out "$tmp/s1.jsonl" 2>/dev/null || fail "shard runs failed"
s0=$(sum "$tmp/s0.jsonl")
{ sed -n 1,2p "$tmp/s0.jsonl"; sed -n 1p "$tmp/s1.jsonl"; sed -n '3,$p' "$tmp/s0.jsonl"; } >"$tmp/s0x.jsonl"
mv "$tmp/s0x.jsonl" "$tmp/s0.jsonl"
expect 0 '1 line of no document of this share' -- $R --shard 0/2 --out "$tmp/s0.jsonl" --resume
same "$tmp/s0.jsonl" "$s0" "a line of another shard was kept"
# a line whose "line" is right but whose id is not that input line's document (edited, or from another corpus with
# other ids), and a line whose id holds a NUL (never a results line): dropped, not kept as a decided document
# (hostile probe, bench/hostile: kept before)
copy_ref wid.jsonl
sed -i '3s/"id":"d3"/"id":"zz"/' "$tmp/wid.jsonl"
grep -q '"id":"zz"' "$tmp/wid.jsonl" || fail "test setup: the id was not replaced"
expect 0 '1 line changed since the run wrote it (its check does not match' -- $R --out "$tmp/wid.jsonl" --resume
same "$tmp/wid.jsonl" "$ref" "a line with another document's id was kept"
# every line ends with "doc_hash" (the input line's bytes, hashed) and "check" (the line's own bytes before it)
grep -qE '"doc_hash":"[0-9a-f]{16}","check":"[0-9a-f]{16}"}$' "$tmp/ref.jsonl" || fail "results lines lack doc_hash and check"
[ "$(grep -cE '"doc_hash":"[0-9a-f]{16}","check":"[0-9a-f]{16}"}$' "$tmp/ref.jsonl.errors")" -eq 2 ] || fail "errors lines lack doc_hash and check"
# a line taken from the results of another corpus with the same ids (docs2: the same ids, other evidence): its id
# and line number are right, its decisions are of other evidence; its doc_hash is not the input line's, so it is
# dropped and the document decided again (hostile probe, bench/hostile: kept before, exit 0)
$RUN --input "$tmp/docs2.jsonl" --criteria "$tmp/crit.jsonl" --out "$tmp/o2.jsonl" 2>/dev/null || fail "the run over docs2 failed"
copy_ref foreign.jsonl
{ sed -n 1,3p "$tmp/ref.jsonl"; sed -n 4p "$tmp/o2.jsonl"; sed -n '5,$p' "$tmp/ref.jsonl"; } >"$tmp/foreign.jsonl"
cmp -s "$tmp/foreign.jsonl" "$tmp/ref.jsonl" && fail "test setup: the other corpus's line is the same"
expect 0 '1 line of another document (its id or doc_hash is not its input line' -- $R --out "$tmp/foreign.jsonl" --resume
same "$tmp/foreign.jsonl" "$ref" "a line of another corpus with the right id and line number was kept"
# a decision edited by hand (a probability): the check no longer matches, the document is decided again
copy_ref edited.jsonl
sed -i '2s/"probs":\[0\./"probs":[1./' "$tmp/edited.jsonl"
cmp -s "$tmp/edited.jsonl" "$tmp/ref.jsonl" && fail "test setup: the probability was not edited"
expect 0 '1 line changed since the run wrote it' -- $R --out "$tmp/edited.jsonl" --resume
same "$tmp/edited.jsonl" "$ref" "an edited probability was kept"
copy_ref nul.jsonl
{ sed -n 1,2p "$tmp/ref.jsonl"; printf '{"id":"d\\u00003","line":3,"decisions":[]}\n'; sed -n '4,$p' "$tmp/ref.jsonl"; } >"$tmp/nul.jsonl"
expect 0 '' -- $R --out "$tmp/nul.jsonl" --resume
same "$tmp/nul.jsonl" "$ref" "a line whose id holds a NUL was kept"
# a line edited to end in CRLF is not what the run wrote: cut and decided again, so the file is the run's, byte for byte
copy_ref crlf.jsonl
sed -i '3s/$/\r/' "$tmp/crlf.jsonl"
expect 0 'repaired: cut' -- $R --out "$tmp/crlf.jsonl" --resume
same "$tmp/crlf.jsonl" "$ref" "a CRLF line was kept"
# the errors file too: a duplicated bad line is dropped
copy_ref derr.jsonl
sed -n 1p "$tmp/ref.jsonl.errors" >>"$tmp/derr.jsonl.errors"
expect 0 'derr.jsonl.errors: dropped 1 duplicated line' -- $R --out "$tmp/derr.jsonl" --resume
same "$tmp/derr.jsonl.errors" "$referr" "a duplicated errors line was kept"
# an errors file given by another name: the run is the same (the bad lines are recorded again in it)
copy_ref ren.jsonl
expect 0 '' -- $R --out "$tmp/ren.jsonl" --errors "$tmp/ren.err" --resume
same "$tmp/ren.jsonl" "$ref" "resume with another --errors changed the results"
same "$tmp/ren.err" "$referr" "resume with another --errors: the bad lines are not in it"

# ---- two runs on one --out: the second is refused while the first holds the lock ------------------------------------
big=$tmp/big.jsonl
for i in $(seq 1 400); do echo "{\"id\": \"b$i\", \"evidence\": \"Ticket $i: billed twice, refund please, the app crashes on login since the update.\"}"; done >"$big"
$RUN --input "$big" --criteria "$tmp/crit.jsonl" --out "$tmp/lock.jsonl" 2>"$tmp/first.err" &
first=$!
bgpids+=("$first")
for _ in $(seq 1 600); do [ -s "$tmp/lock.jsonl" ] && break; sleep 0.02; done
if kill -0 "$first" 2>/dev/null; then
    expect nz 'another typedecide run is writing it' -- $RUN --input "$big" --criteria "$tmp/crit.jsonl" --out "$tmp/lock.jsonl" --resume
    expect nz 'another typedecide run is writing it' -- $RUN --input "$big" --criteria "$tmp/crit.jsonl" --out "$tmp/lock.jsonl" --force
    expect nz 'another typedecide run is writing it' -- $RUN --input "$big" --criteria "$tmp/crit.jsonl" --out "$tmp/lock2.jsonl" --errors "$tmp/lock.jsonl.errors"
    [ -e "$tmp/lock2.jsonl" ] && fail "a refused run left the results file it created"
else
    echo "test_resume: note: the first run ended before the second started (a loaded machine): lock not exercised"
fi
wait "$first" || fail "the first run failed: $(cat "$tmp/first.err")"
$RUN --input "$big" --criteria "$tmp/crit.jsonl" --out "$tmp/lockref.jsonl" 2>/dev/null
cmp -s "$tmp/lock.jsonl" "$tmp/lockref.jsonl" || fail "two runs on one --out: not one run's results ($(wc -l <"$tmp/lock.jsonl") lines)"

# ---- --force never empties OUT: a forced run writes OUT.partial and renames it over OUT when it completes --------
# killed (kill -9) in the middle, OUT is the old file; a plain run is refused (it names the partial run); --resume
# continues the partial run and replaces OUT with one uninterrupted run's bytes (before: OUT emptied at the start)
copy_ref fk.jsonl
old=$(sum "$tmp/fk.jsonl")
$RUN --input "$big" --criteria "$tmp/crit.jsonl" --out "$tmp/fk.jsonl" --force --checkpoint 1 2>/dev/null &
fk=$!
bgpids+=("$fk")
# wait for 3 documents of the new run (in the partial file; the old code wrote them into OUT itself)
new_lines() { cat "$tmp/fk.jsonl" "$tmp/fk.jsonl.partial" 2>/dev/null | grep -c '"id":"b'; }
for _ in $(seq 1 1500); do [ "$(new_lines)" -ge 3 ] && break; sleep 0.02; done
if kill -0 "$fk" 2>/dev/null; then
    kill -9 "$fk" 2>/dev/null
    wait "$fk" 2>/dev/null
    same "$tmp/fk.jsonl" "$old" "a forced run killed in the middle changed OUT"
    [ -s "$tmp/fk.jsonl.partial.provenance.json" ] || fail "a killed forced run left no provenance beside its partial results"
    expect nz 'holds an interrupted `run --force`' -- $RUN --input "$big" --criteria "$tmp/crit.jsonl" --out "$tmp/fk.jsonl"
    same "$tmp/fk.jsonl" "$old" "a refused run changed OUT"
    expect 0 'continuing the interrupted --force run' -- $RUN --input "$big" --criteria "$tmp/crit.jsonl" --out "$tmp/fk.jsonl" --resume
else
    wait "$fk" 2>/dev/null
    echo "test_resume: note: the forced run ended before the kill (a loaded machine)"
fi
cmp -s "$tmp/fk.jsonl" "$tmp/lockref.jsonl" && cmp -s "$tmp/fk.jsonl.provenance.json" "$tmp/lockref.jsonl.provenance.json" ||
    fail "a forced run killed and resumed: not one run's files"
for x in .partial .errors.partial .partial.provenance.json; do [ -e "$tmp/fk.jsonl$x" ] && fail "fk.jsonl$x left after the forced run completed"; done
# a forced run that completed but was stopped before its last rename (the provenance): --resume finishes it
copy_ref fr.jsonl
$R --out "$tmp/fr.jsonl" --force 2>/dev/null
cp "$tmp/fr.jsonl.provenance.json" "$tmp/fr.jsonl.partial.provenance.json"
echo '{"typedecide_run":1,"stale":true}' >"$tmp/fr.jsonl.provenance.json"
expect 0 'the last step of a completed --force run' -- $R --out "$tmp/fr.jsonl" --resume
same "$tmp/fr.jsonl" "$ref" "the finished forced run, resumed"
cmp -s "$tmp/fr.jsonl.provenance.json" "$tmp/ref.jsonl.provenance.json" || fail "the last rename of a forced run was not finished"

# ---- --resume on nothing starts the run; a finished run resumed is unchanged; the provenance says complete ----------
expect 0 '' -- $R --out "$tmp/fresh.jsonl" --resume
same "$tmp/fresh.jsonl" "$ref" "--resume of nothing: not the reference"
expect 0 '' -- $R --out "$tmp/fresh.jsonl" --resume
same "$tmp/fresh.jsonl" "$ref" "resuming a finished run changed it"
cmp -s "$tmp/fresh.jsonl.provenance.json" "$tmp/ref.jsonl.provenance.json" || fail "two runs of one corpus: different provenance records"

finish test_resume
