#!/usr/bin/env bash
# Where the GPU's time goes, per kernel: Nsight Compute (ncu, which reads the H200's counters on the device machine)
# times every kernel of one decide pass, a few decode steps and a prefill, with the clocks left as they are; the
# kernels' durations are summed per kernel name and printed as a table (share of the workload's kernel time, calls,
# mean microseconds). Kernel time only: the gaps between launches are not in it (compare the table's total with the
# wall time typedecide bench reports for the same workload).
# Usage (on the device, after bench/cuda_device.sh --prepare here):
#   bash bench/cuda_profile.sh BIN MODEL_DIR [OUT_DIR] [PRECISION]
# Environment: NCU (default: ncu on PATH, else /usr/local/cuda/bin/ncu), WORKLOADS (default "decide decode prefill";
# "one": one criterion over a prefilled evidence, the evidence pass and two 45-token suffix passes),
# COUNT (kernels profiled per workload, from the first; default 1500: ncu replays each, ~20-50 ms apiece).
set -uo pipefail
BIN=${1:?usage: bench/cuda_profile.sh BIN MODEL_DIR [OUT_DIR] [PRECISION]}
M=${2:?usage: bench/cuda_profile.sh BIN MODEL_DIR [OUT_DIR] [PRECISION]}
OUT=${3:-${TMPDIR:-/tmp}/td-profile}
PREC=${4:-bf16}
NCU=${NCU:-$(command -v ncu || echo /usr/local/cuda/bin/ncu)}
WORKLOADS=${WORKLOADS:-decide decode prefill}
COUNT=${COUNT:-1500}
mkdir -p "$OUT"
[ -x "$NCU" ] || { echo "cuda_profile: no ncu at $NCU" >&2; exit 77; }

for wl in $WORKLOADS; do
    case $wl in
    decide) args=(bench decide --prefix 256 --criteria 144 --suffix 45 --repeat 1) ;;
    one) args=(bench decide --prefix 256 --criteria 1 --suffix 45 --repeat 2) ;;
    decode) args=(bench decode --tokens 8 --repeat 1) ;;
    prefill) args=(bench prefill --tokens 2048 --repeat 1) ;;
    *) echo "cuda_profile: unknown workload $wl" >&2; exit 2 ;;
    esac
    csv=$OUT/ncu-$wl-$PREC.csv
    timeout 240 "$NCU" --clock-control none --launch-count "$COUNT" --metrics gpu__time_duration.sum --csv --log-file "$OUT/ncu-$wl-$PREC.log" \
        "$BIN" "${args[@]}" --model "$M" --device cuda --precision "$PREC" >"$csv.raw" 2>"$OUT/ncu-$wl-$PREC.err"
    rc=$?
    # ncu writes its CSV into the log file: keep its rows only (the program's JSON line is in .raw)
    grep -E '^"' "$OUT/ncu-$wl-$PREC.log" >"$csv" || true
    rm -f "$OUT/ncu-$wl-$PREC.log"
    echo "== $wl ($PREC): ncu rc $rc, $(($(wc -l <"$csv") - 1)) kernel launches"
    # columns: "ID","Process ID","Process Name","Host Name","Kernel Name",...,"Metric Name","Metric Unit","Metric Value"
    python3 - "$csv" <<'EOF'
import csv, sys, collections
rows = list(csv.DictReader(open(sys.argv[1])))
tot = collections.defaultdict(float); n = collections.Counter()
for r in rows:
    if r.get("Metric Name") != "gpu__time_duration.sum": continue
    v = float(r["Metric Value"].replace(",", ""))
    unit = r.get("Metric Unit", "nsecond")
    ns = v * {"nsecond": 1, "usecond": 1e3, "msecond": 1e6, "second": 1e9}.get(unit, 1)
    name = r["Kernel Name"].split("(")[0]
    tot[name] += ns; n[name] += 1
all_ns = sum(tot.values()) or 1
print(f"  {'kernel':<44} {'share':>6} {'calls':>7} {'mean us':>9} {'total ms':>9}")
for k, v in sorted(tot.items(), key=lambda kv: -kv[1]):
    print(f"  {k[:44]:<44} {100*v/all_ns:5.1f}% {n[k]:7d} {v/n[k]/1e3:9.2f} {v/1e6:9.3f}")
print(f"  {'all kernels':<44} {100.0:5.1f}% {sum(n.values()):7d} {'':>9} {all_ns/1e6:9.3f}")
EOF
done
