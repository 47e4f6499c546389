/* The MPI side of `typedecide run`: ranks, and one final meeting of all ranks that sleeps while it waits (an
 * MPI_Allreduce would spin a core away from the ranks still deciding on the same machine). */
#define _POSIX_C_SOURCE 200809L
#include "run_mpi.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifdef TD_HAVE_MPI
#include <mpi.h>
#endif

static const char *const mpi_vars[] = {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE", NULL};

const char *cli_mpi_env(void) {
    for (int i = 0; mpi_vars[i]; i++)
        if (getenv(mpi_vars[i])) return mpi_vars[i];
    return NULL;
}

/* The parent process of pid and its command name, from /proc (0 when unknown). */
static int parent_of(int pid, char *comm, size_t n) {
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    FILE *f = fopen(path, "r");
    size_t got = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
    if (f) fclose(f);
    buf[got] = 0;
    char *open = strchr(buf, '('), *close = strrchr(buf, ')'); /* "pid (comm) state ppid ...": comm may hold spaces */
    int ppid = 0;
    if (!open || !close || close < open || sscanf(close + 1, " %*c %d", &ppid) != 1) return 0;
    snprintf(comm, n, "%.*s", (int)(close - open - 1), open + 1);
    return ppid;
}

/* Variables alone are not a launch: a job script or a shell may export them (copied from another job), and a
 * process that calls MPI_Init without a launcher behind it either fails or runs as a one-rank "world" that writes
 * parts instead of the results. A launcher is the parent, or an ancestor when it runs a shell that runs us. */
int cli_mpi_launched(void) {
    if (!cli_mpi_env()) return 0;
    static const char *const launchers[] = {"mpirun", "mpiexec", "orterun", "orted", "prterun", "prted", "prte",
                                            "hydra_pmi_proxy", "mpiexec.hydra", "pmi_proxy", "slurmstepd", "srun",
                                            "mpispawn", "flux-shell", NULL};
    int pid = (int)getpid();
    for (int depth = 0; depth < 16 && pid > 1; depth++) {
        char comm[64] = "";
        int ppid = parent_of(pid, comm, sizeof comm);
        if (depth > 0)
            for (int i = 0; launchers[i]; i++)
                if (strcmp(comm, launchers[i]) == 0) return 1;
        if (ppid <= 0) break;
        pid = ppid;
    }
    return 0;
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
