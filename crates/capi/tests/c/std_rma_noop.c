/* MPI_Get_accumulate and MPI_Fetch_and_op with MPI_NO_OP ignore the origin buffer, count
 * and datatype (MPI_DATATYPE_NULL allowed); an accumulate of zero elements is a no-op
 * whatever its datatypes (MPI 3.1 §11.3.4). Needs 2 ranks; rank 0 prints. */
#include "check.h"

int main(int argc, char **argv)
{
    int rank, *base, got = 0, fetched = 0, one = 1;
    long res[2] = {0, 0};
    MPI_Win win;
    CHECK_RC(MPI_Init(&argc, &argv));
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    check_rank_ = rank;
    CHECK_RC(MPI_Win_allocate(2 * sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD,
                              &base, &win));
    base[0] = 100 + rank;
    base[1] = 200 + rank;
    CHECK_RC(MPI_Win_fence(0, win));
    if (rank == 0) {
        CHECK_RC(MPI_Get_accumulate(NULL, 0, MPI_DATATYPE_NULL, &got, 1, MPI_INT, 1, 0, 1,
                                    MPI_INT, MPI_NO_OP, win));
        CHECK_RC(MPI_Fetch_and_op(NULL, &fetched, MPI_INT, 1, 1, MPI_NO_OP, win));
        /* Zero elements: no-op, even with datatypes that could not be combined. */
        CHECK_RC(MPI_Accumulate(&one, 0, MPI_INT, 1, 0, 0, MPI_DOUBLE, MPI_SUM, win));
        CHECK_RC(MPI_Get_accumulate(&one, 0, MPI_INT, res, 0, MPI_LONG, 1, 0, 0, MPI_DOUBLE,
                                    MPI_SUM, win));
        CHECK_RC(MPI_Accumulate(&one, 0, MPI_DATATYPE_NULL, 1, 0, 0, MPI_DATATYPE_NULL,
                                MPI_SUM, win));
    }
    CHECK_RC(MPI_Win_fence(0, win));
    if (rank == 0) {
        CHECK(got == 101 && fetched == 201);
        printf("MPI_NO_OP: get_accumulate %d, fetch_and_op %d\n", got, fetched);
    }
    CHECK(base[0] == 100 + rank && base[1] == 200 + rank);
    CHECK_RC(MPI_Win_free(&win));
    if (rank == 0)
        printf("std_rma_noop: all checks passed\n");
    CHECK_RC(MPI_Finalize());
    return 0;
}
