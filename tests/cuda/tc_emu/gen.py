#!/usr/bin/env python3
"""The kernels of src/kernels/cuda/matmul_tc.cu as host C++ for tests/cuda/tc_emu (run.sh): everything before the
dispatch, with the inline-asm helpers (mma, ldmatrix, cp.async, the bf16 pack) removed (shim.h emulates them) and the
dynamic shared memory pointed at the emulator's buffer.
Usage: gen.py SRC OUT [--mutate]   (--mutate: swap two fragment-layout indices of tc_stream and tc_wide and let them
wait for one cp.async group too few, to show that the comparison catches a wrong layout or a missing wait)."""
import re
import sys

src, out = sys.argv[1], sys.argv[2]
s = open(src).read()
s = s[:s.index('/* ---- dispatch')]
for inc in ('#include <cuda_bf16.h>', '#include <stdlib.h>', '#include <string.h>'):
    s = s.replace(inc, '')
s = s.replace('#include "kernels/cuda/common.cuh"', '#include "shim.h"')
for name in ('tc_mma', 'tc_pack', 'tc_ldmatrix_x4', 'tc_cp16', 'tc_cp_commit', 'tc_cp_wait_all', 'tc_cp_wait_one'):
    m = re.search(r'__device__ __forceinline__ (void|uint32_t) ' + name + r'\(', s)
    if not m:
        sys.exit('gen.py: no definition of %s in %s' % (name, src))
    a = m.start()
    line_end = s.index('\n', a)
    b = line_end + 1 if s[a:line_end].rstrip().endswith('}') else s.index('\n}\n', a) + 3
    s = s[:a] + s[b:]
s = s.replace('asm volatile("cp.async.wait_group %0;\\n" ::"n"(TW_AS - 2));', 'tc_cp_wait_n(TW_AS - 2);')
s = s.replace('extern __shared__ __align__(16) unsigned char tc_smem[];', 'unsigned char *tc_smem = g_dyn_smem;')
if re.search(r'\basm\b', s):
    sys.exit('gen.py: inline asm left in the kernels: extend shim.h and this script')
if '--mutate' in sys.argv:
    pairs = [('r8 + (i4 & 1) * 8 : r8 & (R - 1), acol = (i4 >> 1) * 8',
              'r8 + (i4 >> 1) * 8 : r8 & (R - 1), acol = (i4 & 1) * 8'),
             ('np * 16 + r8 + (i8 >> 1) * 8][ks + (i8 & 1) * 8]', 'np * 16 + r8 + (i8 & 1) * 8][ks + (i8 >> 1) * 8]'),
             ('tc_cp_wait_n(TW_AS - 2);', 'tc_cp_wait_n(TW_AS - 1);'),  # a stage read before it lands
             ('            tc_cp_wait_one();', '            tc_cp_wait_n(2);')]
    for a, b in pairs:
        if a not in s:
            sys.exit('gen.py --mutate: "%s" not found' % a)
        s = s.replace(a, b)
open(out, 'w').write(s)
