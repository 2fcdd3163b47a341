/* Ranks loop in barriers for up to 10 minutes: a job for cutting a node's link under.
   Rank 0 prints "spinning" once every rank has entered the first barrier. */
#include <mpi.h>
#include <stdio.h>
#include <time.h>

int main(int argc, char **argv) {
    int rank;
    time_t end = time(NULL) + 600;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    /* Every rank (so every node's daemon) is up before the test is told to act. */
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) {
        printf("spinning\n");
        fflush(stdout);
    }
    while (time(NULL) < end)
        MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
    return 0;
}
