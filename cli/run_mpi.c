/* The MPI side of `typedecide run`: ranks, and one final meeting of all ranks that sleeps while it waits (an
 * MPI_Allreduce would spin a core away from the ranks still deciding on the same machine). */
#define _POSIX_C_SOURCE 200809L
#include "run_mpi.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#ifdef TD_HAVE_MPI
#include <mpi.h>
#endif

int cli_mpi_launched(void) {
    return getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMIX_RANK") || getenv("PMI_RANK") || getenv("PMI_SIZE");
}

#ifdef TD_HAVE_MPI

int cli_mpi_built(void) { return 1; }

const char *cli_mpi_version(void) {
    static char v[MPI_MAX_LIBRARY_VERSION_STRING];
    int n = 0;
    if (!v[0] && MPI_Get_library_version(v, &n) == MPI_SUCCESS)
        for (int i = 0; v[i]; i++)
            if (v[i] == '\n' || v[i] == ',') v[i] = 0; /* the first line, up to the first comma */
    return v[0] ? v : "MPI";
}

int cli_mpi_init(int *rank, int *size, int *local_size) {
    if (MPI_Init(NULL, NULL) != MPI_SUCCESS) {
        fprintf(stderr, "typedecide run: MPI_Init failed\n");
        return 1;
    }
    MPI_Comm_rank(MPI_COMM_WORLD, rank);
    MPI_Comm_size(MPI_COMM_WORLD, size);
    MPI_Comm local;
    *local_size = 1;
    if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, *rank, MPI_INFO_NULL, &local) == MPI_SUCCESS) {
        MPI_Comm_size(local, local_size);
        MPI_Comm_free(&local);
    }
    return 0;
}

/* Waits for a non-blocking collective, sleeping 5 ms between tests. */
static void wait_sleeping(MPI_Request *req) {
    int done = 0;
    while (MPI_Test(req, &done, MPI_STATUS_IGNORE) == MPI_SUCCESS && !done) {
        struct timespec ts = {0, 5000000};
        nanosleep(&ts, NULL);
    }
}

int cli_mpi_all_ok(int ok, const int64_t *sums, int n, int64_t *totals, double secs, double *max_secs) {
    int all = 0;
    MPI_Request req[3];
    MPI_Iallreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD, &req[0]);
    wait_sleeping(&req[0]);
    MPI_Iallreduce(sums, totals, n, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD, &req[1]);
    wait_sleeping(&req[1]);
    MPI_Iallreduce(&secs, max_secs, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD, &req[2]);
    wait_sleeping(&req[2]);
    return all;
}

void cli_mpi_finalize(void) { MPI_Finalize(); }

#else

int cli_mpi_built(void) { return 0; }
const char *cli_mpi_version(void) { return "none"; }

int cli_mpi_init(int *rank, int *size, int *local_size) {
    *rank = 0, *size = 1, *local_size = 1;
    fprintf(stderr, "typedecide run: started by an MPI launcher, but this typedecide was built without MPI "
                    "(install libopenmpi-dev and rebuild), or run shards with --shard I/N\n");
    return 1;
}

int cli_mpi_all_ok(int ok, const int64_t *sums, int n, int64_t *totals, double secs, double *max_secs) {
    for (int i = 0; i < n; i++) totals[i] = sums[i];
    *max_secs = secs;
    return ok;
}

void cli_mpi_finalize(void) {}

#endif
