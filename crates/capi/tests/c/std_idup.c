/* MPI_Comm_idup returns at once and completes later (MPI 3.1 §6.4.2): rank 0 starts an idup
 * and tests it before rank 1 has even called it (a blocking idup deadlocks here);
 * overlapping idups and MPI_Comm_idup_with_info, with other communication in between;
 * attributes are copied. Needs 2 ranks; rank 0 prints. */
#include "check.h"

int main(int argc, char **argv)
{
    int rank, flag, go = 1, sum, res, k, *v;
    MPI_Comm parent, a, b, c, d;
    MPI_Request r[3], rd;
    MPI_Info info;
    CHECK_RC(MPI_Init(&argc, &argv));
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    check_rank_ = rank;
    CHECK_RC(MPI_Comm_dup(MPI_COMM_WORLD, &parent));
    CHECK_RC(MPI_Comm_create_keyval(MPI_COMM_DUP_FN, MPI_COMM_NULL_DELETE_FN, &k, NULL));
    CHECK_RC(MPI_Comm_set_attr(parent, k, &go));

    /* Rank 0 starts and tests before rank 1 starts. */
    if (rank == 0) {
        CHECK_RC(MPI_Comm_idup(parent, &d, &rd));
        CHECK_RC(MPI_Test(&rd, &flag, MPI_STATUS_IGNORE));
        CHECK(!flag);
        CHECK_RC(MPI_Send(&go, 1, MPI_INT, 1, 7, MPI_COMM_WORLD));
    } else {
        CHECK_RC(MPI_Recv(&go, 1, MPI_INT, 0, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        CHECK_RC(MPI_Comm_idup(parent, &d, &rd));
    }
    CHECK_RC(MPI_Wait(&rd, MPI_STATUS_IGNORE));
    CHECK(rd == MPI_REQUEST_NULL);
    CHECK_RC(MPI_Comm_get_attr(d, k, &v, &flag));
    CHECK(flag && v == &go);
    if (rank == 0)
        printf("idup: returned before the other rank called it; attributes copied\n");

    /* Overlapping idups, one with info, and a barrier before they complete. */
    CHECK_RC(MPI_Info_create(&info));
    CHECK_RC(MPI_Info_set(info, "mpi_assert_no_any_tag", "true"));
    CHECK_RC(MPI_Comm_idup(parent, &a, &r[0]));
    CHECK_RC(MPI_Comm_idup(MPI_COMM_WORLD, &b, &r[1]));
    CHECK_RC(MPI_Comm_idup_with_info(parent, info, &c, &r[2]));
    CHECK_RC(MPI_Barrier(parent));
    CHECK_RC(MPI_Waitall(3, r, MPI_STATUSES_IGNORE));
    CHECK_RC(MPI_Info_free(&info));
    CHECK_RC(MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, a));
    CHECK(sum == 1);
    CHECK_RC(MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, b));
    CHECK(sum == 1);
    CHECK_RC(MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, c));
    CHECK(sum == 1);
    CHECK_RC(MPI_Comm_compare(a, parent, &res));
    CHECK(res == MPI_CONGRUENT);
    CHECK_RC(MPI_Comm_compare(a, c, &res));
    CHECK(res == MPI_CONGRUENT);
    if (rank == 0)
        printf("overlapping idups (one with info): 3 communicators\n");
    CHECK_RC(MPI_Comm_free(&a));
    CHECK_RC(MPI_Comm_free(&b));
    CHECK_RC(MPI_Comm_free(&c));
    CHECK_RC(MPI_Comm_free(&d));
    CHECK_RC(MPI_Comm_free(&parent));
    CHECK_RC(MPI_Comm_free_keyval(&k));
    if (rank == 0)
        printf("std_idup: all checks passed\n");
    CHECK_RC(MPI_Finalize());
    return 0;
}
