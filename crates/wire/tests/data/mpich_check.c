/* MPICH program used by tests/mpich_interop.rs: allreduce, ring, barrier. */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv) {
    int rank, size, sum = 0, token = -1;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (sum != size * (size - 1) / 2) {
        fprintf(stderr, "rank %d: allreduce gave %d\n", rank, sum);
        MPI_Abort(MPI_COMM_WORLD, 3);
    }
    int next = (rank + 1) % size, prev = (rank + size - 1) % size;
    MPI_Sendrecv(&rank, 1, MPI_INT, next, 7, &token, 1, MPI_INT, prev, 7, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
    if (token != prev) {
        fprintf(stderr, "rank %d: ring got %d, want %d\n", rank, token, prev);
        MPI_Abort(MPI_COMM_WORLD, 4);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    printf("mpich_check ok rank %d of %d\n", rank, size);
    MPI_Finalize();
    return 0;
}
