/* Ring demo for oxmpi: rank 0 sends a token around the ring of all ranks; each rank
 * adds its rank number to it. Rank 0 prints the result, which must equal
 * 0 + 1 + ... + (size - 1).
 *
 *   mpicc ring.c -o ring && mpirun -n 4 ./ring
 */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    int rank, size, token = 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int next = (rank + 1) % size, prev = (rank + size - 1) % size;
    if (size == 1) {
        printf("ring: 1 rank, token 0 (expected 0)\n");
    } else if (rank == 0) {
        MPI_Send(&token, 1, MPI_INT, next, 42, MPI_COMM_WORLD);
        MPI_Recv(&token, 1, MPI_INT, prev, 42, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        printf("ring: %d ranks, token %d (expected %d)\n", size, token, size * (size - 1) / 2);
    } else {
        MPI_Recv(&token, 1, MPI_INT, prev, 42, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        token += rank;
        MPI_Send(&token, 1, MPI_INT, next, 42, MPI_COMM_WORLD);
    }
    MPI_Finalize();
    return 0;
}
