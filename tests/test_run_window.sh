#!/usr/bin/env bash
# typedecide run --docs-per-pass N (td_run_params.docs_per_pass): documents read ahead and decided by one
# td_decide_multi call, their lines written in input order. The files must not depend on N:
#  - N = 1, 3, 16, 64: byte-identical results, errors and provenance (timing off) on a corpus with bad lines in the
#    middle of windows (read-time: malformed JSON, no id, no evidence, bad own criteria; decide-time: evidence
#    beyond the context, more options than letters), repeated evidences (a head kept by td_decide_multi), per-line
#    criteria and a criteria file; on qwen3-tiny and on a Qwen3.5 tiny model (Gated DeltaNet: a head's recurrent
#    state is forked, not only its KV rows); also without a criteria file (per-line criteria only);
#  - --strict: the same first bad line stops the run, the same lines before it are kept;
#  - timing on: "ms" in every line, otherwise the same bytes;
#  - kill -9 mid-run with N = 16, --resume with N = 4 (and killed again): the uninterrupted N = 1 bytes; a finished
#    N = 1 run resumed with N = 16 is unchanged (N is not in the provenance);
#  - --shard I/3 with N = 8 merged = the unsharded N = 1 run; mpirun -n 2 with N = 4 likewise (when MPI is built);
#  - --docs-per-pass 0 and 4097 are usage errors.
. "$(dirname "$0")/run_lib.sh" # ROOT, BIN, SAN, tmp, fail, section, crit.jsonl (refund, topic), long, kill_at
QWEN3=$ROOT/fixtures/models/qwen3-tiny-tied
QWEN35=$ROOT/fixtures/models/qwen35-tiny-text
# same A B: results, errors and provenance files of two runs are the same bytes
same() { cmp -s "$1" "$2" && cmp -s "$1.errors" "$2.errors" && cmp -s "$1.provenance.json" "$2.provenance.json"; }

# D documents; every 5th brings a criterion of its own (every 15th one with 4 options: refused under --letters ABC
# by td_decide, a decide-time bad line inside a window); every 7th repeats an earlier evidence; bad lines read-time
# after documents 5, 12, 17, 33, 34 (two in a row, and a blank line), 50 and decide-time (evidence beyond the context) after 9, 40;
# after 20 a criterion with a 700-byte id and 4 options (under --letters ABC: a refusal whose message is longer than
# td_decide_group.error holds: the runner asks td_decide for the whole message)
D=${SAN:+60}
D=${D:-150}
kid=$(awk 'BEGIN { for (i = 0; i < 700; i++) printf "k" }') # a refusal's message longer than td_decide_group.error
awk -v n="$D" -v long="$long" -v kid="$kid" 'BEGIN {
    for (i = 1; i <= n; i++) {
        j = i % 7 == 0 ? i - 3 : i
        ev = sprintf("Ticket %d: I was billed %d times for plan %c. The app logs me out since v%d.%d.", j, j % 4 + 1, 65 + j % 3, j % 7, j % 5)
        if (i % 15 == 0) printf "{\"id\": \"doc-%d\", \"evidence\": \"%s\", \"criteria\": [{\"id\": \"urgency\", \"question\": \"How urgent is it?\", \"options\": [{\"id\": \"1\", \"description\": \"Low\"}, {\"id\": \"2\", \"description\": \"Medium\"}, {\"id\": \"3\", \"description\": \"High\"}, {\"id\": \"4\", \"description\": \"Critical\"}]}]}\n", i, ev
        else if (i % 5 == 0) printf "{\"id\": \"doc-%d\", \"evidence\": \"%s\", \"criteria\": [{\"id\": \"lang\", \"question\": \"Which language?\", \"options\": [{\"id\": \"en\", \"description\": \"English\"}, {\"id\": \"fr\", \"description\": \"French\"}]}]}\n", i, ev
        else if (i % 13 == 0) printf "{\"id\": %d, \"evidence\": \"%s\"}\n", i, ev
        else printf "{\"id\": \"doc-%d\", \"evidence\": \"%s\"}\n", i, ev
        if (i == 5) print "{\"id\": \"bad-json\", \"evidence\": "
        if (i == 12) print "{\"evidence\": \"no id here\"}"
        if (i == 17) print "{\"id\": \"no-evidence\"}"
        if (i == 33) print "{\"id\": \"bad-criteria\", \"evidence\": \"x\", \"criteria\": [{\"id\": \"q\", \"options\": []}]}"
        if (i == 34) { print "[1, 2, 3]"; print "" }
        if (i == 50) print "{\"id\": \"dup-criterion\", \"evidence\": \"x\", \"criteria\": [{\"id\": \"refund\", \"question\": \"Again?\", \"options\": [{\"id\": \"a\", \"description\": \"A\"}]}]}"
        if (i == 9 || i == 40) printf "{\"id\": \"too-long-%d\", \"evidence\": \"%s\"}\n", i, long
        if (i == 20) printf "{\"id\": \"long-criterion-id\", \"evidence\": \"%s\", \"criteria\": [{\"id\": \"%s\", \"question\": \"How urgent is it?\", \"options\": [{\"id\": \"1\", \"description\": \"Low\"}, {\"id\": \"2\", \"description\": \"Medium\"}, {\"id\": \"3\", \"description\": \"High\"}, {\"id\": \"4\", \"description\": \"Critical\"}]}]}\n", ev, kid
    }
}' >"$tmp/docs.jsonl"
n_docs=$(grep -c . "$tmp/docs.jsonl")
section "setup"

# ---- N = 1, 3, 16, 64: the same bytes, two models, with and without a criteria file, and a decide-time refusal -----
for model in "$QWEN3" "$QWEN35"; do
    name=$(basename "$model")
    for mode in crit own letters; do
        case $mode in
        crit) args=(--criteria "$tmp/crit.jsonl") ;;
        own) args=() ;;                                        # per-line criteria only: the others are bad lines
        letters) args=(--criteria "$tmp/crit.jsonl" --letters ABC) ;; # 4 options refused by td_decide
        esac
        [ -n "$SAN" ] && [ "$name" = qwen35-tiny-text ] && [ "$mode" != crit ] && continue # time under ASan
        ns="1 3 16 64"
        [ "$mode" != crit ] && ns="1 16"
        for n in $ns; do
            out=$tmp/$name.$mode.$n.jsonl
            "$BIN" run --model "$model" --threads 1 --quiet --no-timing --docs-per-pass "$n" "${args[@]}" \
                --input "$tmp/docs.jsonl" --out "$out" 2>"$tmp/err" || fail "$name $mode N=$n: $(cat "$tmp/err")"
            [ "$n" = 1 ] && continue
            same "$tmp/$name.$mode.1.jsonl" "$out" ||
                fail "$name $mode: N=$n differs from N=1: $(diff "$tmp/$name.$mode.1.jsonl" "$out" | head -c 400) $(diff "$tmp/$name.$mode.1.jsonl.errors" "$out.errors" | head -c 400)"
        done
        ref=$tmp/$name.$mode.1.jsonl
        [ "$(($(wc -l <"$ref") + $(wc -l <"$ref.errors")))" -eq "$n_docs" ] || fail "$name $mode: not one line per document"
        case $mode in
        crit) [ "$(wc -l <"$ref.errors")" -eq 8 ] || fail "$name: want 8 bad lines: $(cat "$ref.errors")"
              grep -q 'too-long-9\\": criterion 0: evidence.*exceeds the model' "$ref.errors" ||
                  fail "$name: the evidence beyond the context is not a bad line: $(cat "$ref.errors")" ;;
        own) [ "$(wc -l <"$ref")" -eq $((D / 5 + 2)) ] || fail "$name own: want $((D / 5 + 2)) results" ;; # + dup-criterion, long-criterion-id
        letters) grep -q '"doc-15","error":".*doc-15\\": criterion 2' "$ref.errors" ||
                     fail "$name letters: 4 options under ABC not refused: $(head -c 600 "$ref.errors")"
                 grep -q "long-criterion-id\\\\\": criterion 2 ($kid)" "$ref.errors" ||
                     fail "$name letters: the long refusal is not whole: $(grep long-criterion "$ref.errors" | head -c 900)" ;;
        esac
    done
done
section "N = 1, 3, 16, 64 on two models"

REF=$tmp/qwen3-tiny-tied.crit.1.jsonl
RUN="$BIN run --model $QWEN3 --threads 1 --quiet --no-timing --criteria $tmp/crit.jsonl --input $tmp/docs.jsonl"

# ---- strict: the first bad line (read-time, after 5 documents) stops the run; then a decide-time one ---------------
for n in 1 16; do
    $RUN --strict --docs-per-pass $n --out "$tmp/strict.$n.jsonl" 2>"$tmp/strict.$n.err" && fail "--strict N=$n went past a bad line"
done
same "$tmp/strict.1.jsonl" "$tmp/strict.16.jsonl" && cmp -s "$tmp/strict.1.err" "$tmp/strict.16.err" ||
    fail "--strict: N=16 stops elsewhere than N=1: $(cat "$tmp/strict.1.err" "$tmp/strict.16.err")"
[ "$(wc -l <"$tmp/strict.16.jsonl")" -eq 5 ] || fail "--strict N=16: want the 5 documents before the bad line"
# resumed (not strict) with N = 16 up to the end: the whole run's bytes
$RUN --resume --docs-per-pass 16 --out "$tmp/strict.16.jsonl" 2>/dev/null || fail "resume after strict"
cmp -s "$tmp/strict.16.jsonl" "$REF" && cmp -s "$tmp/strict.16.jsonl.errors" "$REF.errors" ||
    fail "strict, resumed with N=16: not the uninterrupted bytes"
# a decide-time bad line under strict: the documents before it in its window are written, none after
head -12 "$tmp/docs.jsonl" | grep -v bad-json >"$tmp/d2.jsonl"
for n in 1 16; do
    "$BIN" run --model "$QWEN3" --threads 1 --quiet --no-timing --criteria "$tmp/crit.jsonl" --input "$tmp/d2.jsonl" \
        --strict --docs-per-pass $n --out "$tmp/s2.$n.jsonl" 2>"$tmp/s2.$n.err" && fail "--strict N=$n: past too-long-9"
done
same "$tmp/s2.1.jsonl" "$tmp/s2.16.jsonl" && cmp -s "$tmp/s2.1.err" "$tmp/s2.16.err" && grep -q 'too-long-9' "$tmp/s2.16.err" ||
    fail "--strict, decide-time bad line: N=16 differs from N=1: $(cat "$tmp/s2.1.err" "$tmp/s2.16.err")"
[ "$(wc -l <"$tmp/s2.16.jsonl")" -eq 9 ] || fail "--strict N=16: want the 9 documents before too-long-9"
section "strict"

# ---- timing on: "ms" in every line, the rest the same bytes -------------------------------------------------------
"$BIN" run --model "$QWEN3" --threads 1 --quiet --criteria "$tmp/crit.jsonl" --input "$tmp/docs.jsonl" \
    --docs-per-pass 16 --out "$tmp/timed.jsonl" 2>/dev/null || fail "timed run"
[ "$(grep -c '"ms":' "$tmp/timed.jsonl")" -eq "$(wc -l <"$REF")" ] || fail "timing on: a line without ms"
sed -E 's/,"ms":[0-9.e+-]+,"doc_hash"/,"doc_hash"/; s/,"check":"[0-9a-f]{16}"\}$/}/' "$tmp/timed.jsonl" |
    cmp -s - <(sed -E 's/,"check":"[0-9a-f]{16}"\}$/}/' "$REF") || fail "timing on: differs beyond ms"
section "timing"

# ---- N is not in the provenance: a finished N = 1 run resumed with N = 16 is unchanged ------------------------------
cp "$REF" "$tmp/fin.jsonl" && cp "$REF.errors" "$tmp/fin.jsonl.errors" && cp "$REF.provenance.json" "$tmp/fin.jsonl.provenance.json"
$RUN --resume --docs-per-pass 16 --out "$tmp/fin.jsonl" 2>"$tmp/err" || fail "N=1 run resumed with N=16: $(cat "$tmp/err")"
same "$tmp/fin.jsonl" "$REF" || fail "a finished run resumed with another N changed"

# ---- kill -9 mid-run with N = 16, resumed with N = 4 (odd trials killed again while resuming) ------------------------
RANDOM=43
total=$(wc -l <"$REF")
made=0 interrupted=0
TRIALS=${SAN:+3}
TRIALS=${TRIALS:-6}
for trial in $(seq 1 "$TRIALS"); do
    out=$tmp/kill.$trial.jsonl
    flags="--docs-per-pass 16"
    for k in $(seq 1 $((1 + trial % 2))); do
        have=$(count_lines "$out")
        [ "$have" -ge "$total" ] && break
        made=$((made + 1))
        span=$((total - have > 20 ? total - have - 20 : 1))
        target=$((have + RANDOM % span))
        kill_at "$out" "$target" $RUN $flags --out "$out" # a few ms past the target: inside the next window's work
        [ "$(count_lines "$out")" -lt "$total" ] && interrupted=$((interrupted + 1))
        flags="--resume --docs-per-pass 4"
    done
    $RUN --resume --docs-per-pass 4 --out "$out" 2>"$tmp/err" || fail "trial $trial: resume failed: $(cat "$tmp/err")"
    same "$out" "$REF" || fail "trial $trial: killed at N=16, resumed at N=4: not the uninterrupted bytes: $(diff "$out" "$REF" | head -c 300)"
done
[ "$interrupted" -ge $((made - 2)) ] || fail "only $interrupted of $made kills landed before the end of a run"
section "kill -9 at N=16, resumed at N=4 ($interrupted of $made kills mid-run)"

# ---- shards with N = 8 merged = the unsharded N = 1 run; MPI with N = 4 ----------------------------------------------
parts=()
for i in 0 1 2; do
    $RUN --shard "$i/3" --docs-per-pass 8 --out "$tmp/shard.$i.jsonl" 2>/dev/null || fail "shard $i/3 failed"
    parts+=("$tmp/shard.$i.jsonl")
done
"$BIN" merge --out "$tmp/merged.jsonl" "${parts[@]}" 2>"$tmp/err" || fail "merge: $(cat "$tmp/err")"
same "$tmp/merged.jsonl" "$REF" || fail "3 shards at N=8 merged differ from one N=1 run"
help=$("$BIN" run --help)
if command -v mpirun >/dev/null && grep -q "This build: MPI [A-Za-z]" <<<"$help"; then
    MPIRUN="mpirun --allow-run-as-root --oversubscribe --mca plm isolated --mca btl self,vader"
    MPIRUN="$MPIRUN --mca btl_vader_single_copy_mechanism none"
    [ -n "$SAN" ] && export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
    $MPIRUN -n 2 $RUN --docs-per-pass 4 --out "$tmp/mpi.jsonl" >"$tmp/mpi.log" 2>&1 || fail "mpirun -n 2: $(tail -5 "$tmp/mpi.log")"
    same "$tmp/mpi.jsonl" "$REF" || fail "mpirun -n 2 at N=4 differs from one N=1 run"
else
    echo "test_run_window: SKIPPED the MPI part (no mpirun, or a build without MPI)"
fi
section "shards and MPI"

# ---- refusals ----------------------------------------------------------------------------------------------------------
for bad in 0 4097 x; do
    $RUN --docs-per-pass $bad --out "$tmp/x.jsonl" 2>"$tmp/err"
    [ $? -eq 2 ] && grep -q -- '--docs-per-pass must be in 1..4096' "$tmp/err" || fail "--docs-per-pass $bad: $(cat "$tmp/err")"
done
grep -q -- '--docs-per-pass N' <<<"$help" || fail "--help does not name --docs-per-pass"

[ "$fails" -eq 0 ] && echo "test_run_window: N = 1/3/16/64 the same bytes on qwen3-tiny and qwen3.5-tiny (criteria file, own criteria, decide-time refusals); strict; timing; $made kills at N=16 resumed at N=4; shards at N=8 and MPI at N=4 = one N=1 run"
exit $((fails > 0))
