/* Passes a token around the ring 3 times; each rank adds its rank number.
 * Rank 0 prints "ring total T" where T = 3 * (0 + 1 + ... + N-1). */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv) {
    int rank, size, token = 0, lap;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    for (lap = 0; lap < 3; lap++) {
        if (rank == 0) {
            token += 0;
            MPI_Send(&token, 1, MPI_INT, (rank + 1) % size, 0, MPI_COMM_WORLD);
            MPI_Recv(&token, 1, MPI_INT, size - 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
            MPI_Recv(&token, 1, MPI_INT, rank - 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            token += rank;
            MPI_Send(&token, 1, MPI_INT, (rank + 1) % size, 0, MPI_COMM_WORLD);
        }
    }
    if (rank == 0)
        printf("ring total %d\n", token);
    MPI_Finalize();
    return 0;
}
