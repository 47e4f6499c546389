/* The CUDA engine's end-to-end checks (engine_case.c), shared by test_cuda_engine and test_cuda_engine_dnc. Each
 * records its failures through test_util's CHECK and prints what it measured. */
#ifndef TD_TESTS_CUDA_ENGINE_CASE_H
#define TD_TESTS_CUDA_ENGINE_CASE_H

#include "typedecide.h"

#define TOL_FP32 1e-4
#define TOL_BF16 2e-2
#define TOL_BF16_REL 0.1
#define TOL_PROB 0.01

extern const char *const eng_fixtures[]; /* the fixture models (fixtures/models/<name>) */
extern const int eng_n_fixtures;

/* All n positions' logits of one prompt from scratch, copied out ([n, V]); NULL on failure. */
float *eng_prompt_logits(const td_model *m, int device, int bf16, const int32_t *ids, int n);
/* A fixture against transformers (fp32, fp64 where stored), the CPU, and bf16; greedy continuations. */
/* Tokens ids[0 .. n) of sequence seq from position pos0 in passes of `chunk`, the last one wanting its output;
 * 0, or -1 after a failed check. */
int eng_run(td_ctx *ctx, td_batch *b, int32_t seq, int32_t pos0, const int32_t *ids, int n, int chunk);
void eng_parity(const char *name, double *worst32, double *worst16);
/* A trained demo model: 200 positions, GPU fp32 / bf16 against the CPU's fp32. */
void eng_demo_parity(const td_model *m, const char *name, double *worst16);
/* Fork = from scratch = uneven chunks = beside another evidence; a decode step alone = beside 7 others. */
void eng_exactness_engine(const td_model *m, int bf16, const char *name);
/* 200 decode steps through CUDA graphs = plain launches, bit for bit. */
void eng_graphs_replay(const td_model *m, int bf16, const char *name);
/* The decider bit-identical in batches of 144, 7, 1, serial and fresh; its probabilities against the CPU's. */
void eng_exactness_decider(const td_model *m, int bf16, const char *name, double *worst_prob, double tol_cpu);

#endif
