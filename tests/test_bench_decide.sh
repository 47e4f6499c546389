#!/usr/bin/env bash
# typedecide bench decide's modes for issue 43's lines, on the tiny fixture and the CPU (bench/cuda_device.sh runs
# them on the GPU): --evidences E (E evidences x C criteria in one td_decide_multi call, new evidences each repeat
# unless --cache-head; --verify: each evidence then decided alone, bit for bit), --cache-head (one criterion's
# latency over a prefilled evidence), --memory; their JSON says what ran (tokens, passes, heads found prefilled), and
# bad values are usage errors. No timing is asserted.
set -uo pipefail
ROOT=${TD_ROOT:-$(cd "$(dirname "$0")/.." && pwd)}
BIN=${TD_BIN:-$ROOT/build/typedecide}
M=$ROOT/fixtures/models/qwen3-tiny-tied
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }

expect() { # CODE NEEDLE -- command...: exit code and a substring of stderr
    local code=$1 needle=$2
    shift 3
    timeout 120 "$@" >"$tmp/out" 2>"$tmp/err"
    local rc=$?
    [ "$rc" -eq "$code" ] || fail "'$*' exited $rc, want $code ($(head -c 300 "$tmp/err"))"
    grep -qF -- "$needle" "$tmp/err" || fail "'$*': stderr lacks \"$needle\": $(head -c 300 "$tmp/err")"
}
# field FILE KEY: a member of the one JSON object FILE holds
field() { python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$1" "$2"; }
# check NAME PYTHON-EXPR: the expression over the object o of $tmp/out must hold
check() {
    python3 - "$tmp/out" "$2" <<'PY' || fail "$1: $(head -c 600 "$tmp/out")"
import json, sys
o = json.load(open(sys.argv[1]))
sys.exit(0 if eval(sys.argv[2]) else 1)
PY
}

"$BIN" bench --help >"$tmp/help" || fail "bench --help exited $?"
for o in "--evidences E" "--cache-head" "--verify" "--memory MB"; do
    grep -q -- "$o" "$tmp/help" || fail "bench --help does not name $o"
done

# 3 evidences x 5 criteria in one call, each repeat on new evidences: 3 heads prefilled per call, none found
run() { timeout 120 "$BIN" bench decide --model "$M" --threads 1 "$@" >"$tmp/out" 2>"$tmp/err" || fail "'$*' exited $?: $(tail -3 "$tmp/err")"; }
run --evidences 3 --prefix 40 --criteria 5 --suffix 30 --options 3 --repeat 2
check "multi: the shape" 'o["mode"] == "multi" and o["evidences"] == 3 and o["criteria"] == 5 and o["options"] == 3'
check "multi: new evidences are prefilled" 'o["prefill_tokens_per_evidence"] >= 40 and o["heads_found_prefilled"] == 0'
check "multi: one pass for the heads, one for the suffixes (and one for shared suffix starts)" \
    'o["forwards_per_call"] == (3 if o["shared_tokens_per_criterion"] > 0 else 2)'
check "multi: the rate is over all criteria" 'abs(o["criteria_per_s"] * o["ms_per_call"] / 1e3 - 15) < 0.01'
check "multi: suffixes of tokens" 'o["suffix_tokens_per_criterion"] >= 10'
check "multi: the host's tokenizing timed apart" 'o["host_tokenize_ms_per_call"] > 0'
# --verify: every criterion of the last call decided again alone (td_decide), bit for bit the same
run --evidences 3 --prefix 40 --criteria 5 --suffix 30 --options 3 --repeat 1 --verify
check "multi --verify: all checked, none differs" 'o["verified_criteria"] == 15 and o["verify_mismatched"] == 0 and o["verify_max_abs_prob_diff"] == 0'
run --evidences 3 --prefix 40 --criteria 5 --suffix 30 --options 3 --repeat 1
check "multi without --verify: nothing checked" 'o["verified_criteria"] == 0'
# with --cache-head the same evidences every repeat: all three found prefilled, no head tokens run
run --evidences 3 --prefix 40 --criteria 5 --suffix 30 --options 3 --repeat 2 --cache-head
check "multi --cache-head: heads kept" 'o["heads_found_prefilled"] == 3 and o["prefill_tokens_per_evidence"] == 0'
check "multi --cache-head: one pass (and one for shared suffix starts)" \
    'o["forwards_per_call"] == (2 if o["shared_tokens_per_criterion"] > 0 else 1) and o["cache_head"] is True'
# a small memory budget splits the criteria over more passes
run --evidences 3 --prefix 40 --criteria 40 --suffix 30 --options 3 --repeat 1 --memory 1
check "multi --memory 1: more passes" 'o["memory_mb"] == 1 and o["forwards_per_call"] > 2'
# one criterion over a prefilled evidence: every timed call finds the head (3 repeats), none is prefilled again
run --prefix 64 --criteria 1 --suffix 20 --repeat 3 --cache-head
check "--cache-head: heads found" 'o["cache_head"] is True and o["heads_found_prefilled"] == 3 and o["prefix_ms"] == 0'
check "--cache-head: one pass per call" 'o["forwards_per_run"] == 1 and o["criteria"] == 1'
run --prefix 64 --criteria 1 --suffix 20 --repeat 3
check "without --cache-head: the head each call" 'o["cache_head"] is False and o["heads_found_prefilled"] == 0 and o["forwards_per_run"] == 2'

expect 2 "--evidences must be in 1..4096" -- "$BIN" bench decide --model "$M" --evidences 0
expect 2 "--evidences must be in 1..4096" -- "$BIN" bench decide --model "$M" --evidences many
expect 2 "does not take --serial" -- "$BIN" bench decide --model "$M" --evidences 2 --serial
expect 2 "--options of at least 2" -- "$BIN" bench decide --model "$M" --evidences 2 --options 1
expect 2 "--memory must be a size in MB" -- "$BIN" bench decide --model "$M" --memory 0
expect 2 "--verify checks --evidences" -- "$BIN" bench decide --model "$M" --verify
expect 2 "are options of bench decide" -- "$BIN" bench prefill --model "$M" --evidences 2
expect 2 "are options of bench decide" -- "$BIN" bench decode --model "$M" --cache-head

[ "$fails" = 0 ] && echo "test_bench_decide: all checks passed"
exit $((fails > 0))
