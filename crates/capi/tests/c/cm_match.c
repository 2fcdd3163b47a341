/* Matching rules as a provider's tagged matching must keep them (pml cm), at 3 ranks:
 * wildcards (any source, any tag) in send order, a receive that names its source not taking
 * another's message, synchronous sends matched by wildcards and by mprobe, probe and mprobe of large
 * messages, cancel of a receive that matched nothing, a message to oneself, and the tag
 * upper bound. */
#include "check.h"
#include <stdlib.h>
#include <string.h>

#define BIG (1 << 20)

int main(int argc, char **argv)
{
    int rank, size, i, flag, count;
    MPI_Status st;
    MPI_Request rq;
    CHECK_RC(MPI_Init(&argc, &argv));
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    check_rank_ = rank;
    CHECK(size == 3);
    CHECK_RC(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    int *big = malloc(BIG * sizeof(int));
    int *got = malloc(BIG * sizeof(int));

    /* 1. Wildcards keep each sender's order; a directed receive takes only its source. */
    if (rank > 0) {
        for (i = 0; i < 20; i++) {
            int v = rank * 100 + i;
            CHECK_RC(MPI_Send(&v, 1, MPI_INT, 0, i % 3, MPI_COMM_WORLD));
        }
    } else {
        int next[3] = {0, 0, 0}, v;
        /* Rank 2's first message, by name, before anything from rank 1. */
        CHECK_RC(MPI_Recv(&v, 1, MPI_INT, 2, MPI_ANY_TAG, MPI_COMM_WORLD, &st));
        CHECK(v == 200 && st.MPI_SOURCE == 2 && st.MPI_TAG == 0);
        next[2] = 1;
        for (i = 0; i < 39; i++) {
            CHECK_RC(MPI_Recv(&v, 1, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st));
            CHECK(st.MPI_SOURCE == 1 || st.MPI_SOURCE == 2);
            CHECK(v == st.MPI_SOURCE * 100 + next[st.MPI_SOURCE]);
            CHECK(st.MPI_TAG == next[st.MPI_SOURCE] % 3);
            next[st.MPI_SOURCE]++;
        }
        CHECK(next[1] == 20 && next[2] == 20);
    }
    CHECK_RC(MPI_Barrier(MPI_COMM_WORLD));

    /* 3. Synchronous sends: matched by a wildcard receive, by mprobe; large ones too. */
    if (rank == 2) {
        int v = 42;
        CHECK_RC(MPI_Ssend(&v, 1, MPI_INT, 0, 11, MPI_COMM_WORLD));
        for (i = 0; i < BIG; i++) big[i] = 3 * i;
        CHECK_RC(MPI_Ssend(big, BIG, MPI_INT, 0, 12, MPI_COMM_WORLD));
        CHECK_RC(MPI_Issend(&v, 1, MPI_INT, 0, 13, MPI_COMM_WORLD, &rq));
        CHECK_RC(MPI_Wait(&rq, &st));
    } else if (rank == 0) {
        int v = 0;
        MPI_Message m;
        CHECK_RC(MPI_Recv(&v, 1, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st));
        CHECK(v == 42 && st.MPI_TAG == 11 && st.MPI_SOURCE == 2);
        CHECK_RC(MPI_Probe(MPI_ANY_SOURCE, 12, MPI_COMM_WORLD, &st));
        MPI_Get_count(&st, MPI_INT, &count);
        CHECK(count == BIG && st.MPI_SOURCE == 2);
        CHECK_RC(MPI_Mprobe(2, 12, MPI_COMM_WORLD, &m, &st));
        MPI_Get_count(&st, MPI_INT, &count);
        CHECK(count == BIG);
        CHECK_RC(MPI_Mrecv(got, BIG, MPI_INT, &m, &st));
        CHECK(got[BIG - 1] == 3 * (BIG - 1) && got[1] == 3);
        flag = 0;
        while (!flag) {
            CHECK_RC(MPI_Improbe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &m, &st));
        }
        CHECK(st.MPI_TAG == 13);
        CHECK_RC(MPI_Mrecv(&v, 1, MPI_INT, &m, &st));
        CHECK(v == 42);
    }
    CHECK_RC(MPI_Barrier(MPI_COMM_WORLD));

    /* 4. Cancel of a receive nothing matches; iprobe finds nothing there. */
    {
        int v = 0;
        CHECK_RC(MPI_Irecv(&v, 1, MPI_INT, MPI_ANY_SOURCE, 999, MPI_COMM_WORLD, &rq));
        CHECK_RC(MPI_Cancel(&rq));
        CHECK_RC(MPI_Wait(&rq, &st));
        MPI_Test_cancelled(&st, &flag);
        CHECK(flag);
        CHECK_RC(MPI_Iprobe(MPI_ANY_SOURCE, 999, MPI_COMM_WORLD, &flag, &st));
        CHECK(!flag);
    }

    /* 5. To oneself, with the largest tag. */
    {
        int *ub, f, v = rank + 7, w = 0;
        CHECK_RC(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &ub, &f));
        CHECK(f && *ub >= 32767);
        CHECK_RC(MPI_Irecv(&w, 1, MPI_INT, rank, *ub, MPI_COMM_WORLD, &rq));
        CHECK_RC(MPI_Send(&v, 1, MPI_INT, rank, *ub, MPI_COMM_WORLD));
        CHECK_RC(MPI_Wait(&rq, &st));
        CHECK(w == rank + 7 && st.MPI_TAG == *ub && st.MPI_SOURCE == rank);
    }

    /* 6. The same tags on a duplicate communicator do not mix with the world's. */
    {
        MPI_Comm d;
        int v = 0;
        CHECK_RC(MPI_Comm_dup(MPI_COMM_WORLD, &d));
        if (rank == 1) {
            v = 1;
            CHECK_RC(MPI_Send(&v, 1, MPI_INT, 0, 5, MPI_COMM_WORLD));
            v = 2;
            CHECK_RC(MPI_Send(&v, 1, MPI_INT, 0, 5, d));
        } else if (rank == 0) {
            CHECK_RC(MPI_Recv(&v, 1, MPI_INT, 1, 5, d, &st));
            CHECK(v == 2);
            CHECK_RC(MPI_Recv(&v, 1, MPI_INT, 1, 5, MPI_COMM_WORLD, &st));
            CHECK(v == 1);
        }
        CHECK_RC(MPI_Comm_free(&d));
    }

    free(big);
    free(got);
    CHECK_RC(MPI_Barrier(MPI_COMM_WORLD));
    if (rank == 0)
        printf("cm_match: all checks passed\n");
    CHECK_RC(MPI_Finalize());
    return 0;
}
