/* The AMX product (src/kernels/cpu/matmul_r16_amx.c) with its tile instructions emulated in C, as
 * td_matmul_r16_amx_emulated: test_kernels runs its tiling and epilogue against the r16 reference on CPUs without
 * AMX (it needs AVX-512 VNNI and BF16, as the r16 sets do). */
#define TD_AMX_EMULATE 1
#include "kernels/cpu/matmul_r16_amx.c"
