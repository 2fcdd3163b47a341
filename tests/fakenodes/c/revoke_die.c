/* ULFM: a revoker that dies at once. Rank 0 revokes MPI_COMM_WORLD and kills itself
 * (SIGKILL) right after MPIX_Comm_revoke returns, so some of its notices may never leave
 * it; every other rank waits in a receive from a live rank that never sends, which only
 * the revoke ends: each must still get MPIX_ERR_REVOKED (the members pass a revoke on
 * when they first hear of it), then the survivors shrink the world and sum over it.
 * Each survivor prints "revoke_die: rank R ok". Run with mpirun --with-ft ulfm, 3 ranks
 * or more. */
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <unistd.h>

static int rank;

static void expect_class(int rc, int want, const char *what) {
    int cls = MPI_SUCCESS;
    if (rc != MPI_SUCCESS)
        MPI_Error_class(rc, &cls);
    if (cls != want) {
        char msg[MPI_MAX_ERROR_STRING] = "";
        int len = 0;
        MPI_Error_string(rc, msg, &len);
        printf("revoke_die: rank %d: %s: class %d, expected %d (%s)\n", rank, what, cls, want,
               msg);
        fflush(stdout);
        _exit(1);
    }
}

int main(int argc, char **argv) {
    int size, v = 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size < 3) {
        printf("revoke_die: needs 3 ranks or more\n");
        return 1;
    }
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) {
        MPIX_Comm_revoke(MPI_COMM_WORLD);
        kill(getpid(), SIGKILL);
    }
    /* From the next survivor (ranks 1..size-1 in a ring), which never sends. */
    int from = rank == size - 1 ? 1 : rank + 1;
    expect_class(MPI_Recv(&v, 1, MPI_INT, from, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE),
                 MPIX_ERR_REVOKED, "recv on the communicator the dead rank revoked");
    MPI_Comm s;
    expect_class(MPIX_Comm_shrink(MPI_COMM_WORLD, &s), MPI_SUCCESS, "shrink");
    int n = 0, one = 1, sum = 0;
    MPI_Comm_size(s, &n);
    MPI_Comm_set_errhandler(s, MPI_ERRORS_RETURN);
    expect_class(MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, s), MPI_SUCCESS, "allreduce");
    if (n != size - 1 || sum != size - 1) {
        printf("revoke_die: rank %d: %d survivors, sum %d, expected %d\n", rank, n, sum,
               size - 1);
        return 1;
    }
    MPI_Comm_free(&s);
    printf("revoke_die: rank %d ok\n", rank);
    fflush(stdout);
    MPI_Finalize();
    return 0;
}
