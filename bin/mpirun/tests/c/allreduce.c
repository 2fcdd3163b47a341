/* Each rank contributes rank+1; every rank prints "rank R sum S". */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv) {
    int rank, size, mine, sum = 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    mine = rank + 1;
    MPI_Allreduce(&mine, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    printf("rank %d sum %d\n", rank, sum);
    MPI_Finalize();
    return 0;
}
