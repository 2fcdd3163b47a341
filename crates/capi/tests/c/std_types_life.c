/* A persistent send keeps working after its derived datatype is freed (the request holds
 * a reference, MPI 3.1 §4.1.9), and a contiguous type of INT_MAX elements allocates
 * nothing of its size when created or committed. Needs 2 ranks; rank 0 prints. */
#include "check.h"
#include <limits.h>
#include <sys/resource.h>
#include <sys/time.h>

int main(int argc, char **argv)
{
    int rank, buf[12], i, round;
    MPI_Datatype vec, big, big2;
    MPI_Request req;
    MPI_Count sz;
    MPI_Aint lb, ext;
    CHECK_RC(MPI_Init(&argc, &argv));
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    check_rank_ = rank;

    /* Every other int of 12: 6 ints. */
    CHECK_RC(MPI_Type_vector(6, 1, 2, MPI_INT, &vec));
    CHECK_RC(MPI_Type_commit(&vec));
    if (rank == 0) {
        CHECK_RC(MPI_Send_init(buf, 1, vec, 1, 5, MPI_COMM_WORLD, &req));
    } else {
        CHECK_RC(MPI_Recv_init(buf, 1, vec, 0, 5, MPI_COMM_WORLD, &req));
    }
    CHECK_RC(MPI_Type_free(&vec));
    CHECK(vec == MPI_DATATYPE_NULL);
    for (round = 0; round < 3; round++) {
        for (i = 0; i < 12; i++)
            buf[i] = rank == 0 ? 100 * round + i : -1;
        CHECK_RC(MPI_Start(&req));
        CHECK_RC(MPI_Wait(&req, MPI_STATUS_IGNORE));
        if (rank == 1)
            for (i = 0; i < 12; i++)
                CHECK(buf[i] == (i % 2 == 0 ? 100 * round + i : -1));
    }
    CHECK_RC(MPI_Request_free(&req));
    if (rank == 0)
        printf("persistent send with a freed datatype: 3 rounds\n");

    /* INT_MAX ints (8 GiB): creating, committing, querying and duplicating the type must
     * not allocate its size (the peak resident size grows by less than 64 MiB). */
    {
        struct rusage before, after;
        CHECK(getrusage(RUSAGE_SELF, &before) == 0);
        CHECK_RC(MPI_Type_contiguous(INT_MAX, MPI_INT, &big));
        CHECK_RC(MPI_Type_commit(&big));
        CHECK_RC(MPI_Type_size_x(big, &sz));
        CHECK(sz == (MPI_Count)INT_MAX * 4);
        CHECK_RC(MPI_Type_get_extent(big, &lb, &ext));
        CHECK(lb == 0 && ext == (MPI_Aint)INT_MAX * 4);
        CHECK_RC(MPI_Type_dup(big, &big2));
        CHECK_RC(MPI_Type_free(&big2));
        CHECK_RC(MPI_Type_free(&big));
        CHECK_RC(MPI_Type_contiguous(INT_MAX, MPI_CHAR, &big));
        CHECK_RC(MPI_Type_commit(&big));
        CHECK_RC(MPI_Type_contiguous(2, big, &big2));
        CHECK_RC(MPI_Type_commit(&big2));
        CHECK_RC(MPI_Type_size_x(big2, &sz));
        CHECK(sz == (MPI_Count)INT_MAX * 2);
        CHECK_RC(MPI_Type_free(&big2));
        CHECK_RC(MPI_Type_free(&big));
        CHECK_RC(MPI_Type_size_x(MPI_INT, &sz));
        sz = (MPI_Count)INT_MAX * sz;
        CHECK(getrusage(RUSAGE_SELF, &after) == 0);
        CHECK(after.ru_maxrss - before.ru_maxrss < 64 * 1024);
    }
    if (rank == 0) {
        printf("contiguous INT_MAX ints: size %lld\n", (long long)sz);
        printf("std_types_life: all checks passed\n");
    }
    CHECK_RC(MPI_Finalize());
    return 0;
}
