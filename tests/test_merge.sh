#!/usr/bin/env bash
# merge checks what it joins (issue 47): every shard brings its provenance (one run: the same input, criteria, model
# and settings), together the shards cover every document of the input exactly once, or nothing is written and the
# message names the shards missing and those that stopped early (with the input line after which their documents
# are missing); an errors file given as a shard is refused with a hint; OUT.errors is written fresh (a stale one from
# an earlier merge goes); OUT, OUT.errors and OUT.provenance.json may not be a shard or a shard's errors file; a shard
# named OUT.tmp is safe (temporary files have names of their own). The merge of all shards is one run's files, byte
# for byte, provenance included. Each case is a reproducer of the issue's probe that failed before and passes now.
source "$(dirname "$0")/data_safety_lib.sh"
make_corpus
R="$RUN --input $tmp/docs.jsonl --criteria $tmp/crit.jsonl"
$R --out "$tmp/ref.jsonl" 2>/dev/null || fail "the reference run failed"
for i in 0 1 2; do $R --shard $i/3 --out "$tmp/s$i.jsonl" 2>/dev/null || fail "shard $i/3 failed"; done
sums() { echo "$(sum "$tmp/s0.jsonl") $(sum "$tmp/s1.jsonl") $(sum "$tmp/s2.jsonl") $(sum "$tmp/s0.jsonl.errors") $(sum "$tmp/s1.jsonl.errors")"; }
shards0=$(sums)

# ---- the whole: one run's bytes, provenance included --------------------------------------------------------------
expect 0 '' -- "$BIN" merge --out "$tmp/m.jsonl" "$tmp/s0.jsonl" "$tmp/s1.jsonl" "$tmp/s2.jsonl"
cmp -s "$tmp/m.jsonl" "$tmp/ref.jsonl" && cmp -s "$tmp/m.jsonl.errors" "$tmp/ref.jsonl.errors" || fail "3 shards merged: not one run's files"
cmp -s "$tmp/m.jsonl.provenance.json" "$tmp/ref.jsonl.provenance.json" || fail "3 shards merged: not one run's provenance: $(cat "$tmp/m.jsonl.provenance.json")"
expect 0 '' -- $R --out "$tmp/m.jsonl" --resume # a merged file resumes as one run's
cmp -s "$tmp/m.jsonl" "$tmp/ref.jsonl" || fail "a merged file, resumed: changed"

# ---- a shard missing, a shard that stopped early, shards of another corpus: refused, nothing written ----------------
expect nz 'missing: shard 2/3 (no file given' -- "$BIN" merge --out "$tmp/x.jsonl" "$tmp/s0.jsonl" "$tmp/s1.jsonl"
grep -q 'do not cover the corpus: 8 of its 12 documents' "$tmp/err" || fail "a missing shard: the count is not named: $(cat "$tmp/err")"
[ -e "$tmp/x.jsonl" ] || [ -e "$tmp/x.jsonl.errors" ] && fail "a merge with a shard missing wrote its output"
for x in "" .errors .provenance.json; do cp "$tmp/s1.jsonl$x" "$tmp/t1.jsonl$x"; done
head -1 "$tmp/s1.jsonl" >"$tmp/t1.jsonl" # stopped after its first document (input line 2)
: >"$tmp/t1.jsonl.errors"
expect nz 'has 1 of its 4 documents, none after input line 2 (resume that run)' -- "$BIN" merge --out "$tmp/x.jsonl" "$tmp/s0.jsonl" "$tmp/t1.jsonl" "$tmp/s2.jsonl"
[ -e "$tmp/x.jsonl" ] && fail "a merge with a shard that stopped early wrote its output"
$RUN --input "$tmp/docs2.jsonl" --criteria "$tmp/crit.jsonl" --shard 2/3 --out "$tmp/o2.jsonl" 2>/dev/null
expect nz 'are results of different runs: the second is of another input' -- "$BIN" merge --out "$tmp/x.jsonl" "$tmp/s0.jsonl" "$tmp/s1.jsonl" "$tmp/o2.jsonl"
$RUN --input "$tmp/docs.jsonl" --criteria "$tmp/crit2.jsonl" --shard 2/3 --out "$tmp/c2.jsonl" 2>/dev/null
expect nz 'another criteria file' -- "$BIN" merge --out "$tmp/x.jsonl" "$tmp/s0.jsonl" "$tmp/s1.jsonl" "$tmp/c2.jsonl"
$R --shard 1/2 --out "$tmp/h1.jsonl" 2>/dev/null
expect nz 'input line' -- "$BIN" merge --out "$tmp/x.jsonl" "$tmp/s0.jsonl" "$tmp/h1.jsonl"
[ -e "$tmp/x.jsonl" ] && fail "a merge of shards of different runs wrote its output"

# ---- a shard line edited, or taken from another corpus's results: refused, nothing written ---------------------------
# (hostile probe, bench/hostile: an id edited in a shard was merged, exit 0) Every line's "check" covers its bytes;
# every line's "doc_hash" (its input line's bytes), summed with its line number over the merge, must give the
# input's sum in the provenance. --resume of the shard drops the line and decides it again; then the merge goes.
for x in "" .errors .provenance.json; do cp "$tmp/s1.jsonl$x" "$tmp/w1.jsonl$x"; done
sed -i '1s/"id":"d2"/"id":"zz"/' "$tmp/w1.jsonl"
grep -q '"id":"zz"' "$tmp/w1.jsonl" || fail "test setup: the id was not edited"
expect nz 'w1.jsonl:1 (input line 2): the line was changed after the run wrote it' -- "$BIN" merge --out "$tmp/x.jsonl" "$tmp/s0.jsonl" "$tmp/w1.jsonl" "$tmp/s2.jsonl"
[ -e "$tmp/x.jsonl" ] && fail "a merge with an edited shard line wrote its output"
expect 0 '1 line changed since the run wrote it' -- $R --shard 1/3 --out "$tmp/w1.jsonl" --resume
expect 0 '' -- "$BIN" merge --out "$tmp/x.jsonl" "$tmp/s0.jsonl" "$tmp/w1.jsonl" "$tmp/s2.jsonl"
cmp -s "$tmp/x.jsonl" "$tmp/ref.jsonl" || fail "the edited shard, resumed, merged: not one run's results"
rm -f "$tmp/x.jsonl" "$tmp/x.jsonl.errors" "$tmp/x.jsonl.provenance.json"
# a line without doc_hash and check (hand-written, or of an older version)
for x in "" .errors .provenance.json; do cp "$tmp/s1.jsonl$x" "$tmp/v1.jsonl$x"; done
sed -i '1s/,"doc_hash":.*$/}/' "$tmp/v1.jsonl"
expect nz 'has no "doc_hash" and "check"' -- "$BIN" merge --out "$tmp/x.jsonl" "$tmp/s0.jsonl" "$tmp/v1.jsonl" "$tmp/s2.jsonl"
# a line of the same shard of another corpus with the same ids (docs2): right id, line number and check
$RUN --input "$tmp/docs2.jsonl" --criteria "$tmp/crit.jsonl" --shard 1/3 --out "$tmp/o1.jsonl" 2>/dev/null
for x in "" .errors .provenance.json; do cp "$tmp/s1.jsonl$x" "$tmp/f1.jsonl$x"; done
{ sed -n 1p "$tmp/s1.jsonl"; sed -n 2p "$tmp/o1.jsonl"; sed -n '3,$p' "$tmp/s1.jsonl"; } >"$tmp/f1.jsonl"
cmp -s "$tmp/f1.jsonl" "$tmp/s1.jsonl" && fail "test setup: the other corpus's line is the same"
expect nz 'a line of a document that is not the input' -- "$BIN" merge --out "$tmp/x.jsonl" "$tmp/s0.jsonl" "$tmp/f1.jsonl" "$tmp/s2.jsonl"
[ -e "$tmp/x.jsonl" ] && fail "a merge with a line of another corpus wrote its output"

# ---- an errors file as a shard, a file without provenance, one shard twice ------------------------------------------
expect nz 'an errors file? give the results files' -- "$BIN" merge --out "$tmp/x.jsonl" "$tmp/s0.jsonl" "$tmp/s1.jsonl.errors" "$tmp/s2.jsonl"
printf '{"id": "x", "line": 1, "decisions": []}\n' >"$tmp/hand.jsonl"
expect nz 'no provenance record' -- "$BIN" merge --out "$tmp/x.jsonl" "$tmp/hand.jsonl"
expect nz 'are the same file' -- "$BIN" merge --out "$tmp/x.jsonl" "$tmp/s0.jsonl" "$tmp/./s0.jsonl" "$tmp/s1.jsonl" "$tmp/s2.jsonl"
for x in "" .errors .provenance.json; do cp "$tmp/s0.jsonl$x" "$tmp/d0.jsonl$x"; done
expect nz 'are both shard 0/3' -- "$BIN" merge --out "$tmp/x.jsonl" "$tmp/s0.jsonl" "$tmp/d0.jsonl" "$tmp/s1.jsonl" "$tmp/s2.jsonl"
[ -e "$tmp/x.jsonl" ] && fail "a refused merge wrote its output"

# ---- outputs over the shards -------------------------------------------------------------------------------------------
expect nz 'refusing to write over an input of this command' -- "$BIN" merge --out "$tmp/s0.jsonl.errors" "$tmp/s0.jsonl" "$tmp/s1.jsonl" "$tmp/s2.jsonl"
expect nz 'refusing to write over an input of this command' -- "$BIN" merge --out "$tmp/s1.jsonl" "$tmp/s0.jsonl" "$tmp/s1.jsonl" "$tmp/s2.jsonl"
expect nz 'refusing to write over an input of this command' -- "$BIN" merge --out "$tmp/s9.jsonl" --errors "$tmp/s2.jsonl" "$tmp/s0.jsonl" "$tmp/s1.jsonl" "$tmp/s2.jsonl"
[ "$(sums)" = "$shards0" ] || fail "a refused merge changed a shard"
# the corpus or the criteria file as an output (merge is not given them, but their size and hash are in the shards'
# provenance): refused, unchanged (hostile probe, bench/hostile: `merge --out docs.jsonl` replaced the corpus, exit 0)
dsum=$(sum "$tmp/docs.jsonl") csum=$(sum "$tmp/crit.jsonl")
expect nz 'holds the corpus the shards were run on' -- "$BIN" merge --out "$tmp/docs.jsonl" "$tmp/s0.jsonl" "$tmp/s1.jsonl" "$tmp/s2.jsonl"
expect nz 'holds the criteria file the shards were run with' -- "$BIN" merge --out "$tmp/crit.jsonl" "$tmp/s0.jsonl" "$tmp/s1.jsonl" "$tmp/s2.jsonl"
expect nz 'holds the corpus the shards were run on' -- "$BIN" merge --out "$tmp/z.jsonl" --errors "$tmp/docs.jsonl" "$tmp/s0.jsonl" "$tmp/s1.jsonl" "$tmp/s2.jsonl"
same "$tmp/docs.jsonl" "$dsum" "merge wrote over the corpus"
same "$tmp/crit.jsonl" "$csum" "merge wrote over the criteria file"
# a shard named OUT.tmp (the old merge's temporary name) survives, and the merge goes through
for x in "" .errors .provenance.json; do cp "$tmp/s2.jsonl$x" "$tmp/out.jsonl.tmp$x"; done
t0=$(sum "$tmp/out.jsonl.tmp")
expect 0 '' -- "$BIN" merge --out "$tmp/out.jsonl" "$tmp/s0.jsonl" "$tmp/s1.jsonl" "$tmp/out.jsonl.tmp"
same "$tmp/out.jsonl.tmp" "$t0" "merge clobbered a shard named OUT.tmp"
cmp -s "$tmp/out.jsonl" "$tmp/ref.jsonl" || fail "merge with a shard named OUT.tmp: not one run's results"

# ---- OUT.errors is written fresh -----------------------------------------------------------------------------------------
printf '{"line": 99, "id": "stale", "error": "from an earlier merge"}\n' >"$tmp/f.jsonl.errors"
expect 0 '' -- "$BIN" merge --out "$tmp/f.jsonl" "$tmp/s0.jsonl" "$tmp/s1.jsonl" "$tmp/s2.jsonl"
grep -q stale "$tmp/f.jsonl.errors" && fail "merge left a stale OUT.errors"
cmp -s "$tmp/f.jsonl.errors" "$tmp/ref.jsonl.errors" || fail "merge: OUT.errors is not the run's errors"
# no bad line anywhere: an empty OUT.errors all the same
grep -v 'bad-json\|no-evidence' "$tmp/docs.jsonl" >"$tmp/good.jsonl"
for i in 0 1; do $RUN --input "$tmp/good.jsonl" --criteria "$tmp/crit.jsonl" --shard $i/2 --out "$tmp/g$i.jsonl" 2>/dev/null; done
printf 'stale\n' >"$tmp/g.jsonl.errors"
expect 0 '' -- "$BIN" merge --out "$tmp/g.jsonl" "$tmp/g0.jsonl" "$tmp/g1.jsonl"
[ -e "$tmp/g.jsonl.errors" ] && [ ! -s "$tmp/g.jsonl.errors" ] || fail "merge without bad lines: OUT.errors is not empty and fresh"
# a custom errors name recorded in the provenance is followed
$R --shard 0/2 --out "$tmp/e0.jsonl" --errors "$tmp/e0.bad" 2>/dev/null && $R --shard 1/2 --out "$tmp/e1.jsonl" 2>/dev/null
expect 0 '' -- "$BIN" merge --out "$tmp/e.jsonl" --errors "$tmp/e.bad" "$tmp/e0.jsonl" "$tmp/e1.jsonl"
cmp -s "$tmp/e.bad" "$tmp/ref.jsonl.errors" && cmp -s "$tmp/e.jsonl" "$tmp/ref.jsonl" || fail "merge with errors files named in the provenance"
expect nz 'give each shard once' -- "$BIN" merge --out "$tmp/y.jsonl" "$tmp/s0.jsonl" "$tmp/s0.jsonl"

finish test_merge
