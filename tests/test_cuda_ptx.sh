#!/usr/bin/env bash
# A pass's data never through the read-only path (common.cuh's td_ld_pass / td_pass_ptr; NOTES "CUDA backend", parts
# 18 and 19). ld.global.nc is only for data unchanged over a kernel's whole life; under programmatic edges a kernel
# runs while the kernels before it still write, so what they write must come by plain loads after the wait (the
# DeltaNet read stale inputs through ld.global.nc on the H100). nvcc compiles the kernels to PTX with the build's
# flags, and per kernel (.entry) the ld.global.nc loads must be:
#   matmul_tc.cu, attention.cu, deltanet_chunk.cu   none (weights come by cp.async or plain loads)
#   rows.cu, matmul.cu                              in the kernels that read weights or only the pass's tables
#                                                   (rmsnorm, add_rows_norm, qk_prep, qk_prep_warp, rope, add_bias,
#                                                   scatter_ints, embed): any; in the others at most 2, integer ones
#                                                   (an index table: cells, rows, tokens), never a float
# deltanet.cu is not checked here (its weights and its pass's data are both floats behind const pointers; its reads
# of the pass's go through td_ld_pass; bench/cuda_serial.sh compares --serial with --batch on the GPU).
# First a probe kernel that reads through a const __restrict__ pointer must be caught, so the check cannot pass
# because nvcc's PTX changed. ~30 s. Skipped (77) without nvcc and in the sanitizer run (the same check twice).
set -euo pipefail
ROOT=${TD_ROOT:-$(cd "$(dirname "$0")/.." && pwd)}
NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
[ -x "$NVCC" ] || { echo "test_cuda_ptx: skipped (no nvcc)"; exit 77; }
[ -z "${TD_SANITIZED:-}" ] || { echo "test_cuda_ptx: skipped (sanitizer run)"; exit 77; }
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT

ptx() { # FILE.cu OUT.ptx
    "$NVCC" -O3 -DNDEBUG -arch=sm_90a --fmad=false -std=c++17 -I"$ROOT/src" -I"$ROOT/include" -ptx "$1" -o "$2"
}
# Per kernel of a PTX file: "name total float", the ld.global.nc loads and those of floats (.f32, .v2.f32, .v4.f32).
nc_loads() {
    awk '/\.entry /{name = $0; sub(/.*\.entry /, "", name); sub(/\(.*/, "", name); n[name] += 0; f[name] += 0}
         /ld\.global\.nc/ && name != "" {n[name]++; if ($1 ~ /\.f32$/) f[name]++}
         END {for (k in n) print k, n[k], f[k]}' "$1"
}
# Prints each kernel of the PTX that breaks RULE (none | tables) and returns 1 if any does.
check() { # PTX RULE
    local bad=0 name total float
    while read -r name total float; do
        case $2 in
        none) [ "$total" -eq 0 ] || { echo "  $name: $total ld.global.nc loads (none allowed)"; bad=1; } ;;
        tables)
            case $name in *rmsnorm_kernel* | *add_rows_norm_kernel* | *qk_prep_kernel* | *qk_prep_warp_kernel* | \
                *rope_kernel* | *add_bias_kernel* | *scatter_ints_kernel* | *embed_kernel*) continue ;; esac
            if [ "$float" -gt 0 ] || [ "$total" -gt 2 ]; then
                echo "  $name: $total ld.global.nc loads, $float of floats (at most 2 integer ones allowed)"
                bad=1
            fi
            ;;
        esac
    done < <(nc_loads "$1")
    return $bad
}

cat >"$W/probe.cu" <<'EOF'
__global__ void glu_probe_kernel(float *g, const float *__restrict__ u, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) g[i] = g[i] * u[i];
}
EOF
ptx "$W/probe.cu" "$W/probe.ptx"
if check "$W/probe.ptx" tables >/dev/null; then
    echo "test_cuda_ptx: FAILED: the probe's read through const __restrict__ was not seen as ld.global.nc"
    exit 1
fi
echo "probe (a float read through const __restrict__): caught"

fail=0
for f in matmul_tc:none attention:none deltanet_chunk:none rows:tables matmul:tables; do
    file=${f%%:*} rule=${f#*:}
    ptx "$ROOT/src/kernels/cuda/$file.cu" "$W/$file.ptx"
    kernels=$(nc_loads "$W/$file.ptx" | wc -l)
    [ "$kernels" -gt 0 ] || { echo "$file.cu: no kernels found in its PTX"; fail=1; continue; }
    if check "$W/$file.ptx" "$rule"; then echo "$file.cu: $kernels kernels, ld.global.nc as allowed ($rule)"
    else echo "$file.cu: pass data through ld.global.nc (above)"; fail=1; fi
done
[ $fail -eq 0 ] && echo "test_cuda_ptx: passed" || echo "test_cuda_ptx: FAILED"
exit $fail
