/* MPI_ERRORS_ARE_FATAL (the default): a send to an invalid rank aborts the job with an
 * error message naming the function and the error class. */
#include "check.h"

int main(int argc, char **argv)
{
    int rank, size, x = 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (rank == 0) {
        MPI_Send(&x, 1, MPI_INT, size + 1, 0, MPI_COMM_WORLD);
        printf("MPI_Send returned after a fatal error\n");
    }
    MPI_Finalize();
    return 0;
}
