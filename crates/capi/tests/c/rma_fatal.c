/* A window's default error handler is MPI_ERRORS_ARE_FATAL: an RMA call with a bad
 * target rank aborts the job with the error class in the message. */
#include "check.h"

int main(int argc, char **argv) {
    int rank, size, x = 1;
    MPI_Win win;
    int *mem;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    /* Errors on the communicator return: only the window's handler can abort. */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    CHECK_RC(MPI_Win_allocate(sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &mem, &win));
    MPI_Win_fence(0, win);
    if (rank == 0) {
        MPI_Put(&x, 1, MPI_INT, size + 5, 0, 1, MPI_INT, win);
        printf("rma_fatal: still running after a fatal error\n");
    }
    MPI_Win_fence(0, win);
    MPI_Win_free(&win);
    MPI_Finalize();
    return 0;
}
