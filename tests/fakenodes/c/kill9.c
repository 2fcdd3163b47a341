/* The last rank kills itself with SIGKILL after a barrier (as `kill -9` from outside would);
 * the others wait in a second barrier, which must not hang. */
#include <mpi.h>
#include <signal.h>
#include <unistd.h>

int main(int argc, char **argv) {
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == size - 1)
        kill(getpid(), SIGKILL);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
    return 0;
}
