/* Each rank prints "rank R on HOST": the node it runs on, as MPI sees it. */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv) {
    int rank, len;
    char name[MPI_MAX_PROCESSOR_NAME];
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Get_processor_name(name, &len);
    printf("rank %d on %s\n", rank, name);
    MPI_Finalize();
    return 0;
}
