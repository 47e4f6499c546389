/* MPI for `mpirun -n K typedecide run`: the only place of the project that talks MPI (cli/run_mpi.c, compiled
 * with it when CMake finds an MPI library; without it every call says so). */
#ifndef TD_CLI_RUN_MPI_H
#define TD_CLI_RUN_MPI_H

#include <stdint.h>

/* 1 when an MPI launcher (mpirun, mpiexec, srun, ...) started this process: its variables are in the environment
 * and the launcher is among this process's ancestors (/proc). */
int cli_mpi_launched(void);
/* The name of an MPI launcher variable set in the environment (static), or NULL. */
const char *cli_mpi_env(void);
/* 1 when the tool was built with MPI. */
int cli_mpi_built(void);
/* The MPI library's name and version (static), or "none". */
const char *cli_mpi_version(void);

/* MPI_Init; the rank, the number of ranks and how many of them share this machine. 0 on success, else prints why
 * and returns 1. */
int cli_mpi_init(int *rank, int *size, int *local_size);
/* Every rank calls it once, at the end: waits (sleeping, not spinning) until all ranks arrive, and returns 1 when
 * every rank passed ok = 1. sums[0..n) are added over the ranks into totals, *secs is maxed into *max_secs. */
int cli_mpi_all_ok(int ok, const int64_t *sums, int n, int64_t *totals, double secs, double *max_secs);
void cli_mpi_finalize(void);

#endif
