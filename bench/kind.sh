# Sourced by the bench scripts that keep one result file per machine kind: sets `kind` from this CPU's flags and
# vendor. avx2: AVX2 without AVX-512 (the AMD EPYC the CPU work was first tuned on); avx512: an Intel Xeon with
# AVX-512 (the development VM's other kind); avx512-epyc: an AMD EPYC with AVX-512 of Zen 5 or later; avx512-zen4: one
# of Zen 4 (CPU family 25, AVX-512 executed as two 256-bit halves); scalar: neither. The GPU host's
# 16-core Xeon with AMX has its own files (…-xeon16-amx.json), written by the device scripts.
cpu_flags=" $(grep -m1 '^flags' /proc/cpuinfo) "
case "$cpu_flags" in
    *" avx512f "*) kind=avx512 # (an if: a failed grep as the file's last status would stop a `set -e` caller)
        if grep -q -m1 '^vendor_id.*AuthenticAMD' /proc/cpuinfo; then
            kind=avx512-epyc
            if grep -q -m1 '^cpu family[[:space:]]*: 25$' /proc/cpuinfo; then kind=avx512-zen4; fi
        fi ;;
    *" avx2 "*) kind=avx2 ;;
    *) kind=scalar ;;
esac
