/* A passive-target lock holder that dies silently, under mpirun --with-ft ulfm on 3 ranks
 * with the window's peers reached by messages (osc pt2pt: other nodes, or --mca osc pt2pt):
 * rank 1 locks rank 0's window exclusively, tells rank 2, waits a moment (so that rank 2's
 * lock request queues behind it) and kills itself without unlocking. Rank 2's
 * MPI_Win_lock must fail with MPIX_ERR_PROC_FAILED once rank 0's progress thread learns of
 * the death, instead of hanging; its next lock is granted, its put and unlock go through,
 * and rank 0 sees the value. Each survivor prints "deadholder: rank R ok". */
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static int rank;

static void expect_class(int rc, int want, const char *what) {
    int cls = MPI_SUCCESS;
    if (rc != MPI_SUCCESS) MPI_Error_class(rc, &cls);
    if (cls != want) {
        char msg[MPI_MAX_ERROR_STRING] = "";
        int len = 0;
        MPI_Error_string(rc, msg, &len);
        printf("deadholder: rank %d: %s: class %d, expected %d (%s)\n", rank, what, cls, want,
               msg);
        fflush(stdout);
        _exit(1);
    }
}

int main(int argc, char **argv) {
    int size, *base, v = 0;
    MPI_Win win;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    if (size != 3) {
        printf("deadholder: needs 3 ranks\n");
        return 1;
    }
    expect_class(MPI_Win_allocate(sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD,
                                  &base, &win),
                 MPI_SUCCESS, "win_allocate");
    MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN);
    *base = 0;
    expect_class(MPI_Barrier(MPI_COMM_WORLD), MPI_SUCCESS, "barrier");
    if (rank == 1) {
        expect_class(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, win), MPI_SUCCESS, "lock");
        expect_class(MPI_Send(&v, 1, MPI_INT, 2, 0, MPI_COMM_WORLD), MPI_SUCCESS, "send");
        sleep(1);
        kill(getpid(), SIGKILL);
    }
    if (rank == 2) {
        expect_class(MPI_Recv(&v, 1, MPI_INT, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE),
                     MPI_SUCCESS, "recv");
        expect_class(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, win), MPIX_ERR_PROC_FAILED,
                     "lock held by the dead rank");
        expect_class(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, win), MPI_SUCCESS, "lock again");
        v = 42;
        expect_class(MPI_Put(&v, 1, MPI_INT, 0, 0, 1, MPI_INT, win), MPI_SUCCESS, "put");
        expect_class(MPI_Win_unlock(0, win), MPI_SUCCESS, "unlock");
        expect_class(MPI_Send(&v, 1, MPI_INT, 0, 1, MPI_COMM_WORLD), MPI_SUCCESS, "send done");
    }
    if (rank == 0) {
        expect_class(MPI_Recv(&v, 1, MPI_INT, 2, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE),
                     MPI_SUCCESS, "recv done");
        expect_class(MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win), MPI_SUCCESS, "lock own window");
        v = *base;
        expect_class(MPI_Win_unlock(0, win), MPI_SUCCESS, "unlock own window");
        if (v != 42) {
            printf("deadholder: rank 0: window holds %d, expected 42\n", v);
            return 1;
        }
    }
    printf("deadholder: rank %d ok\n", rank);
    fflush(stdout);
    /* The window is not freed: that is collective, and a member is dead. */
    MPI_Finalize();
    return 0;
}
