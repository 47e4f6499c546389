#!/usr/bin/env bash
# bench/cuda_device.sh's dry run (DEVICE=cpu: the tiny fixtures instead of the synthetic models, small sizes) through
# its timing, run and serve steps and bench/cuda_summary.sh: the script, the bench modes it calls and the summary
# stay in step where there is no GPU (the device call is too dear to find a renamed field there). Checks that every
# step ran, and that the summary's JSON and table hold the measured lines. No timing is asserted.
set -uo pipefail
ROOT=${TD_ROOT:-$(cd "$(dirname "$0")/.." && pwd)}
BIN=${TD_BIN:-$ROOT/build/typedecide}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }
steps="timing run serve"
"$BIN" serve --help >/dev/null 2>&1 || steps="timing run" # a build without libmicrohttpd: no serve step

models="qwen3-0.6b qwen3.5-0.8b"
[ -n "${TD_SANITIZED:-}" ] && models=qwen3-0.6b # the sanitizer build: one model (each step is a process start)

cd "$ROOT"
# the script starts python3 a few times a step (standard library only): the system's, not a version manager's shim
[ -x /usr/bin/python3 ] && export PATH=/usr/bin:$PATH
DEVICE=cpu BIN="$BIN" OUT="$tmp/out" WORK="$tmp/work" STEPS="$steps" MODELS="$models" \
    PRECISIONS=bf16 PREFILL=64 DECODE=4 PREFIX=32 CRITERIA=6 SUFFIX=20 EVIDENCES=2 REPEAT=1 DOCS=20 STREAMS="2" \
    STREAM_TOKENS=4 BUDGET_S=240 timeout 300 bash bench/cuda_device.sh >"$tmp/stdout" 2>"$tmp/stderr"
rc=$?
[ "$rc" = 0 ] || fail "bench/cuda_device.sh exited $rc: $(tail -5 "$tmp/stderr")"
for f in cuda.jsonl steps.log machine.txt cuda-h200-part2.json summary.txt logs.tar.xz; do
    [ -s "$tmp/out/$f" ] || fail "no $f in OUT"
done
python3 - "$tmp/out" "$steps" "$models" <<'PY' || fail "the summary: $(head -c 1500 "$tmp/out/summary.txt")"
import json, sys
d = sys.argv[1]
rows = [json.loads(l) for l in open(d + "/cuda.jsonl")]
steps = [r for r in rows if "rc" in r]
bad = [(r["step"], r.get("model"), r["rc"]) for r in steps if r["rc"] != 0]
assert not bad, "failed steps: %s" % bad
names = {(r["step"], r.get("model")) for r in steps}
models = sys.argv[3].split()
for m in models:
    for s in ("prefill", "decode", "decide", "one_criterion", "multi"):
        assert (s, m) in names, "no %s step for %s" % (s, m)
serve = "serve" in sys.argv[2]
assert ("run", "qwen3-0.6b") in names and (("serve_2", "qwen3-0.6b") in names or not serve), names
t = json.load(open(d + "/cuda-h200-part2.json"))["table"]
for m in models:
    x = t[m]
    for k in ("prefill_tokens_per_s", "decode_batch1_tokens_per_s", "decide_criteria_per_s", "evidences16_criteria_per_s"):
        assert x[k]["ours_bf16"] > 0, (m, k, x[k])
    assert 0 < x["one_criterion_ms"]["ours_bf16"], x["one_criterion_ms"]
    v = x["evidences16_criteria_per_s"]["ours_bf16_verified_alone"]
    assert v["criteria"] == 12 and v["mismatched"] == 0, v
assert t["qwen3-0.6b"]["run"]["documents_written"] == 20 and t["qwen3-0.6b"]["run_documents_per_s"] > 0, t["qwen3-0.6b"]["run"]
if serve:
    s = t["qwen3-0.6b"]["serve_chat_streams"]["2_streams"]
    assert s["failed"] == 0 and s["completion_tokens"] == 8, s
table = open(d + "/summary.txt").read().splitlines()
assert table[-1].startswith("steps: ") and " 0 failed" in table[-1], table[-1]
assert any(l.startswith("decide 144x45x4") for l in table) and (any(l.startswith("serve 2 streams") for l in table) or not serve)
PY
[ "$fails" = 0 ] && echo "test_cuda_device_dry: all checks passed"
exit $((fails > 0))
