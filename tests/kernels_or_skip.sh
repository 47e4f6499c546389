#!/usr/bin/env bash
# Runs a test with TD_KERNELS=SET, or skips it (exit 77) on a CPU that cannot run SET: the library refuses a set the
# CPU lacks at model load, so the test would fail for the machine's sake, not the code's.
#   bash tests/kernels_or_skip.sh SET COMMAND [ARGS...]
set -uo pipefail
set_name=$1
shift
flags=$(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null || true)
has() { case " $flags " in *" $1 "*) return 0 ;; esac; return 1; }
case "$set_name" in
avx2) has avx2 && has fma && has f16c || { echo "SKIPPED: this CPU has no AVX2 + FMA + F16C (TD_KERNELS=avx2)"; exit 77; } ;;
avx512vnni) has avx512f && has avx512bw && has avx512vl && has avx512_vnni || { echo "SKIPPED: no AVX-512 VNNI"; exit 77; } ;;
esac
export TD_KERNELS=$set_name
exec "$@"
