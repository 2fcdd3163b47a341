/* Truncation: a message longer than the receive buffer gives MPI_ERR_TRUNCATE (with
 * MPI_ERRORS_RETURN), the buffer holds what fits, and communication continues. Needs 2
 * ranks. */
#include "check.h"
#include <string.h>

int main(int argc, char **argv)
{
    int rank, size, i, rc, cls, len;
    MPI_Status st;
    char text[MPI_MAX_ERROR_STRING];
    CHECK_RC(MPI_Init(&argc, &argv));
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    check_rank_ = rank;
    CHECK(size == 2);
    CHECK_RC(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));

    int big[10];
    for (i = 0; i < 10; i++) big[i] = 100 + i;
    if (rank == 0) {
        CHECK_RC(MPI_Send(big, 10, MPI_INT, 1, 1, MPI_COMM_WORLD));
        CHECK_RC(MPI_Send(big, 10, MPI_INT, 1, 2, MPI_COMM_WORLD));
        CHECK_RC(MPI_Send(big, 3, MPI_INT, 1, 3, MPI_COMM_WORLD));
    } else {
        int small[4] = {0, 0, 0, 0};
        /* blocking receive */
        rc = MPI_Recv(small, 4, MPI_INT, 0, 1, MPI_COMM_WORLD, &st);
        CHECK(rc != MPI_SUCCESS);
        CHECK_RC(MPI_Error_class(rc, &cls));
        CHECK(cls == MPI_ERR_TRUNCATE);
        for (i = 0; i < 4; i++) CHECK(small[i] == 100 + i);
        CHECK_RC(MPI_Error_string(cls, text, &len));
        CHECK(len > 0 && (int)strlen(text) == len);
        printf("recv truncated: %s\n", text);
        /* nonblocking receive: the error comes from MPI_Wait */
        MPI_Request rq;
        int two[2];
        CHECK_RC(MPI_Irecv(two, 2, MPI_INT, 0, 2, MPI_COMM_WORLD, &rq));
        rc = MPI_Wait(&rq, &st);
        CHECK_RC(MPI_Error_class(rc, &cls));
        CHECK(cls == MPI_ERR_TRUNCATE && st.MPI_ERROR == rc);
        CHECK(two[0] == 100 && two[1] == 101);
        printf("wait truncated: ok\n");
        /* the stream is still usable */
        int three[3];
        CHECK_RC(MPI_Recv(three, 3, MPI_INT, 0, 3, MPI_COMM_WORLD, &st));
        CHECK(three[2] == 102);
        printf("after truncation: ok\n");
    }
    /* A gather (scatter) whose root's own send (receive) count differs from its receive
     * (send) count: MPI_ERR_TRUNCATE at the root, which still takes part (the other rank's
     * block arrives, the other rank is not left waiting), and a correct call works after. */
    {
        char s[8], g[8], one[4];
        for (i = 0; i < 8; i++) s[i] = (char)('a' + 8 * rank + i);
        memset(g, 0, sizeof g);
        rc = MPI_Gather(s, rank == 0 ? 3 : 4, MPI_CHAR, g, 4, MPI_CHAR, 0, MPI_COMM_WORLD);
        if (rank == 0) {
            CHECK(rc != MPI_SUCCESS);
            CHECK_RC(MPI_Error_class(rc, &cls));
            CHECK(cls == MPI_ERR_TRUNCATE);
            CHECK(memcmp(g + 4, "ijkl", 4) == 0);
        } else {
            CHECK_RC(rc);
        }
        memset(one, 0, sizeof one);
        rc = MPI_Scatter(s, 4, MPI_CHAR, one, rank == 0 ? 3 : 4, MPI_CHAR, 0, MPI_COMM_WORLD);
        if (rank == 0) {
            CHECK(rc != MPI_SUCCESS);
            CHECK_RC(MPI_Error_class(rc, &cls));
            CHECK(cls == MPI_ERR_TRUNCATE);
        } else {
            CHECK_RC(rc);
            CHECK(memcmp(one, "efgh", 4) == 0);
        }
        CHECK_RC(MPI_Gather(s, 4, MPI_CHAR, g, 4, MPI_CHAR, 0, MPI_COMM_WORLD));
        if (rank == 0) CHECK(memcmp(g, "abcdijkl", 8) == 0);
        CHECK_RC(MPI_Scatter(s, 4, MPI_CHAR, one, 4, MPI_CHAR, 0, MPI_COMM_WORLD));
        CHECK(memcmp(one, rank == 0 ? "abcd" : "efgh", 4) == 0);
        if (rank == 1) printf("rooted own count mismatch: ok\n");
    }
    int v = 0;
    CHECK_RC(MPI_Sendrecv(&v, 1, MPI_INT, 1 - rank, 90, &v, 1, MPI_INT, 1 - rank, 90, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    CHECK_RC(MPI_Finalize());
    if (rank == 1) printf("truncate: all checks passed\n");
    return 0;
}
