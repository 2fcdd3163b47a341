/* The application the PMPI counter (pmpi_counter.c) watches: on 2 ranks, 3 sends from rank
 * 0 to rank 1, one sendrecv each, and collectives that the library builds on
 * point-to-point (bcast, allreduce of 1 MiB, barrier); 5 datatype frees each, 3 of them of
 * references that get_contents returned (freed before the library's entry wrapper while
 * no profile counts calls). */
#include "check.h"

int main(int argc, char **argv)
{
    static double big[1 << 17], out[1 << 17];
    int rank, x = 0, y = 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    check_rank_ = rank;
    for (int i = 0; i < 3; i++) {
        if (rank == 0)
            MPI_Send(&i, 1, MPI_INT, 1, i, MPI_COMM_WORLD);
        else
            MPI_Recv(&x, 1, MPI_INT, 0, i, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
    MPI_Sendrecv(&rank, 1, MPI_INT, 1 - rank, 9, &y, 1, MPI_INT, 1 - rank, 9, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
    CHECK(y == 1 - rank);
    MPI_Bcast(&x, 1, MPI_INT, 0, MPI_COMM_WORLD);
    for (int i = 0; i < (1 << 17); i++)
        big[i] = rank + 1;
    MPI_Allreduce(big, out, 1 << 17, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    CHECK(out[7] == 3.0);
    MPI_Allreduce(MPI_IN_PLACE, &x, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Datatype v, c, got[1];
    int ints[4];
    MPI_Aint addrs[1];
    MPI_Type_vector(2, 1, 2, MPI_INT, &v);
    MPI_Type_contiguous(2, v, &c);
    for (int i = 0; i < 3; i++) {
        MPI_Type_get_contents(c, 4, 1, 1, ints, addrs, got);
        CHECK(got[0] == v && ints[0] == 2);
        CHECK(MPI_Type_free(&got[0]) == MPI_SUCCESS && got[0] == MPI_DATATYPE_NULL);
    }
    CHECK(MPI_Type_free(&c) == MPI_SUCCESS && MPI_Type_free(&v) == MPI_SUCCESS);
    MPI_Finalize();
    if (rank == 0)
        printf("pmpi_app: all checks passed\n");
    return 0;
}
