/* Probes: Probe, Iprobe, Mprobe/Mrecv, Improbe/Imrecv, counts from probe statuses,
 * MPI_PROC_NULL probes. Needs exactly 2 ranks. */
#include "check.h"
#include <string.h>

int main(int argc, char **argv)
{
    int rank, size, i, flag, count;
    MPI_Status st;
    CHECK_RC(MPI_Init(&argc, &argv));
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    check_rank_ = rank;
    CHECK(size == 2);

    if (rank == 1) {
        char text[32] = "hello from rank 1";
        int nums[5] = {1, 2, 3, 4, 5};
        short sh[3] = {7, 8, 9};
        CHECK_RC(MPI_Send(text, (int)strlen(text) + 1, MPI_CHAR, 0, 5, MPI_COMM_WORLD));
        CHECK_RC(MPI_Send(nums, 5, MPI_INT, 0, 6, MPI_COMM_WORLD));
        CHECK_RC(MPI_Send(sh, 3, MPI_SHORT, 0, 7, MPI_COMM_WORLD));
        CHECK_RC(MPI_Send(nums, 2, MPI_INT, 0, 8, MPI_COMM_WORLD));
    } else {
        /* Probe for an unknown-length message, size the buffer, receive it. */
        CHECK_RC(MPI_Probe(1, 5, MPI_COMM_WORLD, &st));
        CHECK(st.MPI_SOURCE == 1 && st.MPI_TAG == 5);
        CHECK_RC(MPI_Get_count(&st, MPI_CHAR, &count));
        CHECK(count == 18);
        char *buf = malloc(count);
        CHECK_RC(MPI_Recv(buf, count, MPI_CHAR, 1, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        CHECK(strcmp(buf, "hello from rank 1") == 0);
        free(buf);
        printf("probe + recv: ok (%d chars)\n", count);

        /* Iprobe until the tag-6 message is there. */
        do {
            CHECK_RC(MPI_Iprobe(MPI_ANY_SOURCE, 6, MPI_COMM_WORLD, &flag, &st));
        } while (!flag);
        CHECK_RC(MPI_Get_count(&st, MPI_INT, &count));
        CHECK(count == 5 && st.MPI_SOURCE == 1);
        /* Mprobe/Mrecv takes exactly that message. */
        MPI_Message msg;
        CHECK_RC(MPI_Mprobe(1, 6, MPI_COMM_WORLD, &msg, &st));
        CHECK(msg != MPI_MESSAGE_NULL);
        int nums[5];
        CHECK_RC(MPI_Mrecv(nums, 5, MPI_INT, &msg, &st));
        CHECK(msg == MPI_MESSAGE_NULL);
        for (i = 0; i < 5; i++) CHECK(nums[i] == i + 1);
        printf("iprobe + mprobe/mrecv: ok\n");

        /* Improbe/Imrecv with ANY_TAG: tags 7 then 8 in order. */
        short sh[3];
        do {
            CHECK_RC(MPI_Improbe(1, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &msg, &st));
        } while (!flag);
        CHECK(st.MPI_TAG == 7);
        CHECK_RC(MPI_Get_count(&st, MPI_SHORT, &count));
        CHECK(count == 3);
        MPI_Request rq;
        CHECK_RC(MPI_Imrecv(sh, 3, MPI_SHORT, &msg, &rq));
        CHECK_RC(MPI_Wait(&rq, &st));
        CHECK(sh[0] == 7 && sh[2] == 9 && st.MPI_TAG == 7);
        int two[2];
        CHECK_RC(MPI_Recv(two, 2, MPI_INT, 1, MPI_ANY_TAG, MPI_COMM_WORLD, &st));
        CHECK(st.MPI_TAG == 8 && two[1] == 2);
        printf("improbe + imrecv: ok\n");

        /* Nothing else with these tags is pending. */
        for (i = 5; i <= 8; i++) {
            CHECK_RC(MPI_Iprobe(MPI_ANY_SOURCE, i, MPI_COMM_WORLD, &flag, &st));
            CHECK(flag == 0);
        }
    }

    /* Probes on MPI_PROC_NULL complete at once. */
    CHECK_RC(MPI_Probe(MPI_PROC_NULL, 0, MPI_COMM_WORLD, &st));
    CHECK(st.MPI_SOURCE == MPI_PROC_NULL && st.MPI_TAG == MPI_ANY_TAG);
    MPI_Message np;
    CHECK_RC(MPI_Mprobe(MPI_PROC_NULL, 0, MPI_COMM_WORLD, &np, &st));
    CHECK(np == MPI_MESSAGE_NO_PROC);
    CHECK_RC(MPI_Mrecv(NULL, 0, MPI_INT, &np, &st));
    CHECK(np == MPI_MESSAGE_NULL && st.MPI_SOURCE == MPI_PROC_NULL);
    if (rank == 0) printf("proc_null probes: ok\n");

    int v = 0;
    CHECK_RC(MPI_Sendrecv(&v, 1, MPI_INT, 1 - rank, 90, &v, 1, MPI_INT, 1 - rank, 90, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    CHECK_RC(MPI_Finalize());
    if (rank == 0) printf("probe: all checks passed\n");
    return 0;
}
