#!/usr/bin/env python3
"""The kernels of src/kernels/cuda/attention.cu as host C++ for tests/cuda/attn_emu (run.sh): everything before the
host entry points, with the inline-asm helpers (mma, ldmatrix, ldmatrix.trans, the L2 prefetch) removed (shim.h
emulates them) and the dynamic shared memory pointed at the emulator's buffer.
Usage: gen.py SRC OUT [--mutate]   (--mutate: swap two fragment indices of attention_bf16_64_kernel's P operand and
its l tree's stride-4 partner, to show that the comparison catches a wrong layout)."""
import re
import sys

src, out = sys.argv[1], sys.argv[2]
s = open(src).read()
s = s[:s.index('extern "C" void td_cu_attention_test_mode')]
for inc in ('#include <cuda_bf16.h>', '#include <stdlib.h>', '#include <string.h>'):
    s = s.replace(inc, '')
s = s.replace('#include "kernels/cuda/common.cuh"', '#include "shim.h"')
for name in ('prefetch_l2', 'ab_mma', 'ab_ldsm_x4', 'ab_ldsm_x4_t'):
    m = re.search(r'__device__ __forceinline__ void ' + name + r'\(', s)
    if not m:
        sys.exit('gen.py: no definition of %s in %s' % (name, src))
    a = m.start()
    line_end = s.index('\n', a)
    b = line_end + 1 if s[a:line_end].rstrip().endswith('}') else s.index('\n}\n', a) + 3
    s = s[:a] + s[b:]
s = re.sub(r'extern __shared__ (?:__align__\(16\) )?(float|unsigned char) (\w+)\[\];',
           r'\1 *\2 = (\1 *)g_dyn_smem;', s)
if re.search(r'\basm\b', s):
    sys.exit('gen.py: inline asm left in the kernels: extend shim.h and this script')
if '--mutate' in sys.argv:
    pairs = [('const uint32_t af[4] = {pk[2 * kk][0], pk[2 * kk][1], pk[2 * kk + 1][0], pk[2 * kk + 1][1]};',
              'const uint32_t af[4] = {pk[2 * kk][0], pk[2 * kk + 1][0], pk[2 * kk][1], pk[2 * kk + 1][1]};'),
             ('t3[b] += __shfl_xor_sync(0xffffffffu, t3[b], 2);', 't3[b] += __shfl_xor_sync(0xffffffffu, t3[b], 3);')]
    for a, b in pairs:
        if a not in s:
            sys.exit('gen.py --mutate: "%s" not found' % a)
        s = s.replace(a, b)
open(out, 'w').write(s)
