/* MPI_Abort: the last rank aborts with code 7 while the others block in a receive that
 * can never complete; the launcher must end the whole job with a non-zero status. */
#include "check.h"
#include <unistd.h>

int main(int argc, char **argv)
{
    int rank, size, x;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (rank == size - 1) {
        printf("rank %d calling MPI_Abort(7)\n", rank);
        fflush(stdout);
        MPI_Abort(MPI_COMM_WORLD, 7);
        printf("MPI_Abort returned\n");
        return 0;
    }
    MPI_Recv(&x, 1, MPI_INT, size - 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    printf("rank %d: receive completed unexpectedly\n", rank);
    MPI_Finalize();
    return 0;
}
