#!/usr/bin/env bash
# typedecide run / merge (td_run, td_run_merge) end to end:
#  - exactness: every document's decisions equal, bit for bit, `typedecide decide` on its evidence and criteria
#    (the criteria file's, then the line's own);
#  - bad lines (malformed JSON, not an object, no id, no evidence, bad own criteria, evidence beyond the context,
#    no criteria at all) are recorded with their line numbers in the errors file and skipped; --strict stops at the
#    first one with everything before it kept; repeated ids stop the run before anything is written, naming them;
#  - kill -9 at random points (10 trials, some killed again while resuming): after --resume the results and the
#    errors equal one uninterrupted run's byte for byte (no line twice, none missing); a torn last line and
#    trailing garbage are repaired;
#  - --shard I/N runs merged, mpirun -n 1 and -n 2 (and -n 2 with a rank killed, then resumed) give the same bytes;
#  - the default output differs from --no-timing only by "ms"; --device cuda is refused; existing files need
#    --resume or --force;
#  - memory: 100,000 documents in a peak RSS that the 10,000-document run nearly matches (the only growth is the id
#    table: < 32 bytes per document); under the sanitizers 10,000 documents, RSS not checked (ASan's quarantine).
. "$(dirname "$0")/run_lib.sh" # ROOT, BIN, SAN, tmp, fail, section, crit.jsonl's first two criteria, long, kill_at
MODEL=$ROOT/fixtures/models/qwen3-tiny-tied
TOK=$ROOT/fixtures/tokenizers/qwen3-trunc2048/tokenizer.json
RUN="$BIN run --model $MODEL --threads 1 --quiet --no-timing"

# ---- a corpus: 3 criteria for every document, some with their own, and bad lines among them -------------------
cat >>"$tmp/crit.jsonl" <<'EOF'
{"id": "urgency", "question": "How urgent is it?", "options": [{"id": "1", "description": "Low"}, {"id": "2", "description": "Medium"}, {"id": "3", "description": "High"}, {"id": "4", "description": "Critical"}]}
EOF
N=${SAN:+30}
N=${N:-120}
awk -v n="$N" -v long="$long" 'BEGIN {
    for (i = 1; i <= n; i++) {
        ev = sprintf("Ticket %d: I was billed %d times for plan %c. The app logs me out since v%d.%d.", i, i % 4 + 1, 65 + i % 3, i % 7, i % 5)
        if (i % 11 == 0) printf "{\"id\": \"doc-%d\", \"evidence\": \"%s\", \"criteria\": [{\"id\": \"lang\", \"question\": \"Which language?\", \"options\": [{\"id\": \"en\", \"description\": \"English\"}, {\"id\": \"fr\", \"description\": \"French\"}]}]}\n", i, ev
        else if (i % 17 == 0) printf "{\"id\": %d, \"evidence\": \"%s\", \"meta\": {\"source\": \"mail\"}}\n", i, ev
        else printf "{\"id\": \"doc-%d\", \"evidence\": \"%s\"}\n", i, ev
        if (i == 7) print "{\"id\": \"bad-json\", \"evidence\": "
        if (i == 9) print ""
        if (i == 13) print "[1, 2, 3]"
        if (i == 19) print "{\"evidence\": \"no id here\"}"
        if (i == 23) print "{\"id\": \"no-evidence\"}"
        if (i == 29) print "{\"id\": \"bad-criteria\", \"evidence\": \"x\", \"criteria\": [{\"id\": \"q\", \"options\": []}]}"
        if (i == 27) print "{\"id\": \"number-criteria\", \"evidence\": \"x\", \"criteria\": [1, 2]}"
        if (i == 4) printf "{\"id\": \"too-long\", \"evidence\": \"%s\"}\n", long
        if (i == 3) print "{\"id\": \"dup-criterion\", \"evidence\": \"x\", \"criteria\": [{\"id\": \"refund\", \"question\": \"Again?\", \"options\": [{\"id\": \"a\", \"description\": \"A\"}]}]}"
    }
}' >"$tmp/docs.jsonl"
n_lines=$(grep -c . "$tmp/docs.jsonl")
n_bad=8

section "setup"
# ---- the reference: one uninterrupted run -----------------------------------------------------------------------
$RUN --input "$tmp/docs.jsonl" --criteria "$tmp/crit.jsonl" --out "$tmp/ref.jsonl" 2>"$tmp/err" ||
    fail "reference run: $(cat "$tmp/err")"
[ "$(wc -l <"$tmp/ref.jsonl")" -eq $((n_lines - n_bad)) ] || fail "want $((n_lines - n_bad)) results, got $(wc -l <"$tmp/ref.jsonl")"
[ "$(wc -l <"$tmp/ref.jsonl.errors")" -eq "$n_bad" ] || fail "want $n_bad errors: $(cat "$tmp/ref.jsonl.errors")"
for want in 'docs.jsonl:10: column' 'docs.jsonl:18: expected a JSON object' 'docs.jsonl:25: missing \"id\"' \
    'no-evidence\": missing string \"evidence\"' 'bad-criteria\": criteria:1: row \"q\": missing string \"question\"' \
    'too-long\": criterion 0: evidence' 'exceeds the model' 'dup-criterion\": criterion id \"refund\" appears twice' \
    'number-criteria\": criteria:1: column 1: malformed JSON'; do
    grep -qF "$want" "$tmp/ref.jsonl.errors" || fail "errors file lacks '$want': $(cat "$tmp/ref.jsonl.errors")"
done
node -e '
const fs = require("fs");
const out = fs.readFileSync(process.argv[1], "utf8").trim().split("\n").map(JSON.parse);
let prev = 0, bad = 0;
for (const o of out) {
    if (o.line <= prev) { console.log("not in input order at line " + o.line); bad++; }
    prev = o.line;
    const want = (o.id === "doc-11" || o.id === "doc-22") ? 4 : 3;
    if (/^doc-\d+$/.test(o.id) && +o.id.slice(4) % 11 === 0 && o.decisions.length !== 4) { console.log(o.id + ": want 4 decisions"); bad++; }
    if (o.ms !== undefined) { console.log("--no-timing printed ms"); bad++; }
}
process.exit(bad ? 1 : 0);' "$tmp/ref.jsonl" || fail "results not in input order or with the wrong criteria"

section "reference run"
# ---- exactness against `typedecide decide`, document by document ------------------------------------------------
# for a few documents: the evidence to a file, the criteria (global + own) to a file, decide, compare probs
node -e '
const fs = require("fs");
const [docs, crit, dir] = process.argv.slice(1);
const g = fs.readFileSync(crit, "utf8").trim().split("\n");
let k = 0;
for (const l of fs.readFileSync(docs, "utf8").split("\n")) {
    let o; try { o = JSON.parse(l); } catch (e) { continue; }
    if (!o || typeof o.evidence !== "string" || !["doc-1", "doc-11", "17", "doc-40"].includes(String(o.id))) continue;
    fs.writeFileSync(`${dir}/ev.${k}`, o.evidence);
    fs.writeFileSync(`${dir}/crit.${k}`, g.concat((o.criteria || []).map(c => JSON.stringify(c))).join("\n") + "\n");
    fs.writeFileSync(`${dir}/id.${k}`, String(o.id));
    k++;
}' "$tmp/docs.jsonl" "$tmp/crit.jsonl" "$tmp"
for k in 0 1 2 3; do
    [ -f "$tmp/ev.$k" ] || continue
    id=$(cat "$tmp/id.$k")
    "$BIN" decide --model "$MODEL" --evidence "$tmp/ev.$k" --criteria "$tmp/crit.$k" --quiet --threads 1 >"$tmp/dec.$k" 2>"$tmp/err" ||
        fail "decide on $id: $(cat "$tmp/err")"
    node -e '
const fs = require("fs");
const [dec, res, id] = process.argv.slice(1);
const want = fs.readFileSync(dec, "utf8").trim().split("\n").map(JSON.parse).map(o => [o.id, o.answer, o.letter, o.probs, o.suffix_tokens]);
const doc = fs.readFileSync(res, "utf8").trim().split("\n").map(JSON.parse).find(o => o.id === id);
const got = doc ? doc.decisions.map(o => [o.id, o.answer, o.letter, o.probs, o.suffix_tokens]) : null;
if (JSON.stringify(want) !== JSON.stringify(got)) { console.log(JSON.stringify(want) + "\n" + JSON.stringify(got)); process.exit(1); }' \
        "$tmp/dec.$k" "$tmp/ref.jsonl" "$id" || fail "document $id: run's decisions differ from decide's"
done
ls "$tmp"/dec.* >/dev/null 2>&1 || fail "no document compared with decide"

# the default output has "ms" per document and is otherwise the same bytes
$BIN run --model "$MODEL" --threads 1 --quiet --input "$tmp/docs.jsonl" --criteria "$tmp/crit.jsonl" --out "$tmp/timed.jsonl" 2>/dev/null
grep -q '"ms":' "$tmp/timed.jsonl" || fail "default output has no ms"
# (and "check", the hash of the line's bytes, which cover "ms"; "doc_hash", of the input line, is the same)
sed -E 's/,"ms":[0-9.e+-]+,"doc_hash"/,"doc_hash"/; s/,"check":"[0-9a-f]{16}"\}$/}/' "$tmp/timed.jsonl" |
    cmp -s - <(sed -E 's/,"check":"[0-9a-f]{16}"\}$/}/' "$tmp/ref.jsonl") || fail "default output differs beyond ms"
# not a terminal: no progress line, only the summary
$BIN run --model "$MODEL" --threads 1 --no-timing --input "$tmp/docs.jsonl" --criteria "$tmp/crit.jsonl" --out "$tmp/v.jsonl" 2>"$tmp/err"
grep -q $'\r' "$tmp/err" && fail "a progress line on a stderr that is not a terminal"
grep -q "documents decided (.* criteria) in .* s: .* documents/s, .* criteria/s; $n_bad failed" "$tmp/err" ||
    fail "no final summary: $(cat "$tmp/err")"
# 2 threads: the same bytes
$RUN --threads 2 --input "$tmp/docs.jsonl" --criteria "$tmp/crit.jsonl" --out "$tmp/t2.jsonl" 2>/dev/null
cmp -s "$tmp/t2.jsonl" "$tmp/ref.jsonl" || fail "2 threads: different results"

section "exactness"
# ---- refusals -------------------------------------------------------------------------------------------------------
$RUN --input "$tmp/docs.jsonl" --criteria "$tmp/crit.jsonl" --out "$tmp/ref.jsonl" 2>"$tmp/err" && fail "existing output overwritten without --force"
grep -q "exists" "$tmp/err" || fail "no 'exists' message: $(cat "$tmp/err")"
$RUN --device cuda --input "$tmp/docs.jsonl" --criteria "$tmp/crit.jsonl" --out "$tmp/x.jsonl" 2>"$tmp/err" && fail "--device cuda accepted"
grep -q "without the CUDA backend" "$tmp/err" || fail "--device cuda: $(cat "$tmp/err")"
$RUN --shard 2/2 --input "$tmp/docs.jsonl" --out "$tmp/x.jsonl" 2>/dev/null; [ $? -eq 2 ] || fail "--shard 2/2 not a usage error"
# repeated ids: named with their lines, nothing written
{ head -3 "$tmp/docs.jsonl"; sed -n 2p "$tmp/docs.jsonl"; echo '{"id": 17, "evidence": "a"}'; echo '{"id": "17", "evidence": "b"}'; } >"$tmp/dup.jsonl"
$RUN --input "$tmp/dup.jsonl" --criteria "$tmp/crit.jsonl" --out "$tmp/dup.out" 2>"$tmp/err" && fail "repeated ids accepted"
grep -q '"doc-2" on lines 2 and 4' "$tmp/err" && grep -q '"17" on lines 5 and 6' "$tmp/err" ||
    fail "repeated ids not named: $(cat "$tmp/err")"
[ -e "$tmp/dup.out" ] && fail "repeated ids: a results file was written"
# no criteria anywhere: a bad line each
$RUN --input "$tmp/docs.jsonl" --out "$tmp/nocrit.jsonl" 2>/dev/null
grep -q 'has no criteria' "$tmp/nocrit.jsonl.errors" || fail "a document without criteria was not reported"

section "refusals"
# ---- strict: stops at the first bad line, keeps what came before; resuming strict stops there again ----------------
$RUN --strict --input "$tmp/docs.jsonl" --criteria "$tmp/crit.jsonl" --out "$tmp/strict.jsonl" 2>"$tmp/err" && fail "--strict went past a bad line"
grep -q 'docs.jsonl:4: document "dup-criterion"' "$tmp/err" || fail "--strict: $(cat "$tmp/err")"
head -3 "$tmp/ref.jsonl" | cmp -s - "$tmp/strict.jsonl" || fail "--strict: the lines before the bad one are not kept"
[ "$(wc -l <"$tmp/strict.jsonl.errors")" -eq 1 ] || fail "--strict: the bad line is not recorded once"
$RUN --strict --resume --input "$tmp/docs.jsonl" --criteria "$tmp/crit.jsonl" --out "$tmp/strict.jsonl" 2>/dev/null && fail "--strict --resume went past the bad line"
[ "$(wc -l <"$tmp/strict.jsonl.errors")" -eq 1 ] || fail "--strict --resume recorded the bad line twice"
$RUN --resume --input "$tmp/docs.jsonl" --criteria "$tmp/crit.jsonl" --out "$tmp/strict.jsonl" 2>/dev/null || fail "resume after strict failed"
cmp -s "$tmp/strict.jsonl" "$tmp/ref.jsonl" && cmp -s "$tmp/strict.jsonl.errors" "$tmp/ref.jsonl.errors" ||
    fail "strict, then resumed: not the uninterrupted run's files"

section "strict"
# ---- torn lines and garbage --------------------------------------------------------------------------------------------
size=$(stat -c %s "$tmp/ref.jsonl")
for cut in $((size / 3)) $((size - 5)) 1; do
    head -c "$cut" "$tmp/ref.jsonl" >"$tmp/torn.jsonl"
    head -c 40 "$tmp/ref.jsonl.errors" >"$tmp/torn.jsonl.errors"
    cp "$tmp/ref.jsonl.provenance.json" "$tmp/torn.jsonl.provenance.json" # the same run's record, renamed with it
    $RUN --resume --input "$tmp/docs.jsonl" --criteria "$tmp/crit.jsonl" --out "$tmp/torn.jsonl" 2>"$tmp/err" || fail "resume of a torn file: $(cat "$tmp/err")"
    grep -q "repaired" "$tmp/err" || fail "torn file at $cut: no repair reported"
    cmp -s "$tmp/torn.jsonl" "$tmp/ref.jsonl" && cmp -s "$tmp/torn.jsonl.errors" "$tmp/ref.jsonl.errors" || fail "torn at byte $cut: not repaired to the reference"
done
{ head -5 "$tmp/ref.jsonl"; printf '\0\0\0\0garbage\n'; sed -n 9p "$tmp/ref.jsonl"; } >"$tmp/torn.jsonl"
cp "$tmp/ref.jsonl.provenance.json" "$tmp/torn.jsonl.provenance.json"
$RUN --resume --input "$tmp/docs.jsonl" --criteria "$tmp/crit.jsonl" --out "$tmp/torn.jsonl" 2>/dev/null
cmp -s "$tmp/torn.jsonl" "$tmp/ref.jsonl" || fail "garbage after line 5: not repaired to the reference"

section "torn lines"
# ---- kill -9 at random points ------------------------------------------------------------------------------------------
# a random point = a random number of lines written (0: before the first, while the model loads; at most the total
# less 5), polled every 5 ms, plus a random 0-9 ms: the kill lands anywhere in the document after it, mid-write
# included
# Each document here asks $extra more criteria (a run of the tiny model: ~8 ms a document instead of ~0.5), so that the
# lines left after a target are tens of ms of work, more than a poll's lag on a loaded machine (ctest -j2); the
# sanitized build is slow enough with fewer.
extra=${SAN:+6}
extra=${extra:-30}
cp "$tmp/crit.jsonl" "$tmp/kcrit.jsonl"
awk -v n="$extra" 'BEGIN { for (i = 1; i <= n; i++)
    printf "{\"id\": \"point-%d\", \"question\": \"Is point %d raised?\", \"options\": [{\"id\": \"y\", \"description\": \"Yes\"}, {\"id\": \"n\", \"description\": \"No\"}]}\n", i, i }' >>"$tmp/kcrit.jsonl"
KRUN="$RUN --input $tmp/docs.jsonl --criteria $tmp/kcrit.jsonl"
$KRUN --out "$tmp/kref.jsonl" 2>"$tmp/err" || fail "the kill trials' reference run: $(cat "$tmp/err")"
RANDOM=18
interrupted=0
made=0
total=$((n_lines - n_bad))
for trial in $(seq 1 10); do
    out=$tmp/kill.$trial.jsonl
    kills=$((1 + trial % 2)) # odd trials are killed once more while resuming
    resume=
    for k in $(seq 1 "$kills"); do
        have=$(count_lines "$out")
        [ "$have" -ge "$total" ] && break # the last kill came after the last line: nothing left to interrupt
        made=$((made + 1))
        # at least 5 lines still to come at the target, so that under load (ctest -j2 beside the decide suite: slow
        # polls) the kill still lands before the end; the ends of files are the torn-lines section's
        span=$((total - have > 5 ? total - have - 5 : 1))
        target=$((have + RANDOM % span))
        kill_at "$out" "$target" $KRUN $resume --out "$out"
        resume=--resume
        lines=$(count_lines "$out")
        [ "$lines" -lt "$total" ] && interrupted=$((interrupted + 1)) # this kill landed mid-run
    done
    $KRUN --resume --out "$out" 2>"$tmp/err" || fail "trial $trial: resume failed: $(cat "$tmp/err")"
    cmp -s "$out" "$tmp/kref.jsonl" || fail "trial $trial (killed after $lines lines): results differ from the uninterrupted run: $(diff "$out" "$tmp/kref.jsonl" | head -c 300)"
    cmp -s "$out.errors" "$tmp/kref.jsonl.errors" || fail "trial $trial: errors differ from the uninterrupted run"
done
[ "$made" -ge 10 ] && [ "$interrupted" -ge $((made - 3)) ] || fail "only $interrupted of $made kills landed before the end of a run"

section "kill trials"
# ---- shards, merged -----------------------------------------------------------------------------------------------------
for n in 2 3; do
    parts=()
    for i in $(seq 0 $((n - 1))); do
        $RUN --shard "$i/$n" --input "$tmp/docs.jsonl" --criteria "$tmp/crit.jsonl" --out "$tmp/shard$n.$i.jsonl" 2>/dev/null || fail "shard $i/$n failed"
        parts+=("$tmp/shard$n.$i.jsonl")
    done
    "$BIN" merge --out "$tmp/merged$n.jsonl" "${parts[@]}" 2>"$tmp/err" || fail "merge of $n shards: $(cat "$tmp/err")"
    cmp -s "$tmp/merged$n.jsonl" "$tmp/ref.jsonl" && cmp -s "$tmp/merged$n.jsonl.errors" "$tmp/ref.jsonl.errors" ||
        fail "$n shards merged differ from one run"
done
"$BIN" merge --out "$tmp/m.jsonl" "$tmp/shard2.0.jsonl" "$tmp/shard2.0.jsonl" 2>/dev/null && fail "merge accepted one shard twice"

section "shards"
# ---- MPI -----------------------------------------------------------------------------------------------------------------
if ! command -v mpirun >/dev/null; then
    echo "test_run: SKIPPED the MPI part: mpirun is absent (scripts/setup.sh installs openmpi-bin)"
elif ! "$BIN" run --help | grep -c "This build: MPI Open MPI\|This build: MPI [A-Za-z]" >/dev/null; then
    fail "mpirun is here but typedecide was built without MPI (libopenmpi-dev missing at configure time?)"
else
    # root in CI, 2 cores, no network, maybe no ssh: allow root, oversubscribe, launch locally without an rsh agent
    # (plm isolated; mpirun refuses to start when ssh is missing otherwise), shared memory and self transports only
    MPIRUN="mpirun --allow-run-as-root --oversubscribe --mca plm isolated --mca btl self,vader"
    MPIRUN="$MPIRUN --mca btl_vader_single_copy_mechanism none"
    export OMPI_MCA_rmaps_base_oversubscribe=1
    # Open MPI's own allocations are still held at exit: no leak report for them under the sanitizers
    [ -n "$SAN" ] && export ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0
    for k in 1 2; do
        $MPIRUN -n $k $RUN --input "$tmp/docs.jsonl" --criteria "$tmp/crit.jsonl" --out "$tmp/mpi$k.jsonl" >"$tmp/mpi.log" 2>&1 ||
            fail "mpirun -n $k: $(tail -5 "$tmp/mpi.log")"
        cmp -s "$tmp/mpi$k.jsonl" "$tmp/ref.jsonl" && cmp -s "$tmp/mpi$k.jsonl.errors" "$tmp/ref.jsonl.errors" ||
            fail "mpirun -n $k: not the bytes of one run"
        ls "$tmp"/mpi$k.jsonl*part* >/dev/null 2>&1 && fail "mpirun -n $k left its parts"
    done
    # a rank killed: the parts stay, and --resume under mpirun finishes them into the same bytes
    $MPIRUN -n 2 $RUN --input "$tmp/docs.jsonl" --criteria "$tmp/crit.jsonl" --out "$tmp/mpik.jsonl" >/dev/null 2>&1 &
    bgpid=$!
    for _ in $(seq 1 400); do
        [ -s "$tmp/mpik.jsonl.part-1-of-2" ] && break
        sleep 0.01
    done
    for p in $(pgrep -P "$bgpid"); do kill -9 "$p" 2>/dev/null; done
    wait "$bgpid" 2>/dev/null
    bgpid=
    [ -e "$tmp/mpik.jsonl" ] && [ ! -e "$tmp/mpik.jsonl.part-1-of-2" ] && echo "test_run: note: the MPI run finished before the kill"
    $MPIRUN -n 2 $RUN --resume --input "$tmp/docs.jsonl" --criteria "$tmp/crit.jsonl" --out "$tmp/mpik.jsonl" >"$tmp/mpi.log" 2>&1 ||
        fail "mpirun --resume after a killed rank: $(tail -5 "$tmp/mpi.log")"
    cmp -s "$tmp/mpik.jsonl" "$tmp/ref.jsonl" && cmp -s "$tmp/mpik.jsonl.errors" "$tmp/ref.jsonl.errors" ||
        fail "mpirun -n 2, a rank killed, resumed: not the bytes of one run"
    # a finished merged run, resumed under MPI: nothing decided again, the same bytes
    $MPIRUN -n 2 $RUN --resume --input "$tmp/docs.jsonl" --criteria "$tmp/crit.jsonl" --out "$tmp/mpi2.jsonl" >"$tmp/mpi.log" 2>&1 ||
        fail "mpirun --resume of a finished run: $(tail -3 "$tmp/mpi.log")"
    cmp -s "$tmp/mpi2.jsonl" "$tmp/ref.jsonl" || fail "mpirun --resume of a finished run changed it"
    unset ASAN_OPTIONS
fi

section "MPI"
# ---- memory: 100,000 documents (10,000 under the sanitizers) against 10,000 ----------------------------------------------
cat >"$tmp/mini.json" <<'EOF'
{"model_type": "qwen3", "vocab_size": 2112, "hidden_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2,
 "num_key_value_heads": 1, "head_dim": 16, "intermediate_size": 32, "max_position_embeddings": 256,
 "rms_norm_eps": 1e-6, "rope_theta": 10000, "tie_word_embeddings": true}
EOF
"$BIN" synth --config "$tmp/mini.json" --tokenizer "$TOK" --out "$tmp/mini" --seed 3 >/dev/null 2>&1 || fail "synth failed"
echo '{"id": "q", "question": "Spam?", "options": [{"id": "y", "description": "Yes"}, {"id": "n", "description": "No"}]}' >"$tmp/q.jsonl"
big=${SAN:+10000}
big=${big:-100000}
small=$((big / 10))
awk -v n="$big" 'BEGIN { for (i = 0; i < n; i++) printf "{\"id\": \"d%07d\", \"evidence\": \"Ticket %d: billed twice, refund please.\"}\n", i, i }' >"$tmp/big.jsonl"
head -"$small" "$tmp/big.jsonl" >"$tmp/small.jsonl"
for s in small big; do
    "$BIN" run --model "$tmp/mini" --threads 1 --quiet --instruction x --checkpoint 5000 --input "$tmp/$s.jsonl" \
        --criteria "$tmp/q.jsonl" --out "$tmp/$s.out" --summary "$tmp/$s.summary" 2>"$tmp/err" || fail "$s corpus: $(cat "$tmp/err")"
done
[ "$(wc -l <"$tmp/big.out")" -eq "$big" ] || fail "$big documents: $(wc -l <"$tmp/big.out") results"
# (under the sanitizers the run still goes through, but ASan's quarantine keeps freed blocks: RSS says nothing there)
[ -n "$SAN" ] || node -e '
const fs = require("fs");
const [a, b, n, m] = process.argv.slice(1);
const s = JSON.parse(fs.readFileSync(a)), l = JSON.parse(fs.readFileSync(b));
const growth = (l.peak_rss_kb - s.peak_rss_kb) * 1024 / (n - m);
console.log(`test_run: peak RSS ${s.peak_rss_kb} kB at ${m} documents, ${l.peak_rss_kb} kB at ${n} (${growth.toFixed(1)} bytes per extra document), ${l.documents_per_s.toFixed(0)} documents/s`);
process.exit(growth < 32 ? 0 : 1);' "$tmp/small.summary" "$tmp/big.summary" "$big" "$small" || fail "memory grows with the corpus beyond the id table"

section "memory"
[ "$fails" -eq 0 ] && echo "test_run: exact against decide; bad lines recorded; strict; 10 kill -9 trials ($interrupted of $made kills mid-run) resumed to the uninterrupted bytes; torn lines repaired; shards merged and MPI equal one run"
exit $((fails > 0))
