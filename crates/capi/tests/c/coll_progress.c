/* Collectives make point-to-point progress: a rank inside MPI_Barrier or MPI_Allreduce
 * keeps driving its pending nonblocking sends, so a peer that receives one of them before
 * entering the same collective completes (MPI-4.1 §3.7.4 progress rule).
 *
 * Rank 1 starts a send (rendezvous sizes and an eager one; an Issend whose request it
 * frees, as mpi4py's pickled issend does), then enters the collective and waits for the
 * sends only afterwards. Rank 0 receives everything first and enters the collective last.
 * A collective that spins without progressing the transports leaves rank 1 unable to
 * answer rank 0's clear-to-send: both ranks then hang (the job is run under a timeout).
 * Two ranks; other ranks only take part in the collectives. */
#include "check.h"
#include <string.h>

static const int sizes[] = {8, 8192, 8193, 65536, 1 << 20};
#define NSIZES ((int)(sizeof sizes / sizeof sizes[0]))

static unsigned char pattern(int i, int k) { return (unsigned char)(i * 7 + k * 13 + 1); }

/* One round: rank 1 sends `n` bytes with `mode` ('i' Isend, 's' Issend + Request_free),
 * then runs collective `coll` ('b' barrier, 'a' allreduce); rank 0 receives first. */
static void round_trip(int rank, int n, char mode, char coll, int k) {
    unsigned char *buf = malloc((size_t)n);
    CHECK(buf != NULL);
    MPI_Request req = MPI_REQUEST_NULL;
    if (rank == 1) {
        for (int i = 0; i < n; i++)
            buf[i] = pattern(i, k);
        if (mode == 'i') {
            CHECK_RC(MPI_Isend(buf, n, MPI_BYTE, 0, k, MPI_COMM_WORLD, &req));
        } else {
            CHECK_RC(MPI_Issend(buf, n, MPI_BYTE, 0, k, MPI_COMM_WORLD, &req));
            CHECK_RC(MPI_Request_free(&req));
        }
    } else if (rank == 0) {
        MPI_Status st;
        memset(buf, 0, (size_t)n);
        CHECK_RC(MPI_Recv(buf, n, MPI_BYTE, 1, k, MPI_COMM_WORLD, &st));
        int got = -1;
        CHECK_RC(MPI_Get_count(&st, MPI_BYTE, &got));
        CHECK(got == n);
        for (int i = 0; i < n; i++)
            CHECK(buf[i] == pattern(i, k));
    }
    if (coll == 'b') {
        CHECK_RC(MPI_Barrier(MPI_COMM_WORLD));
    } else {
        int one = 1, sum = 0;
        CHECK_RC(MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
        int size;
        MPI_Comm_size(MPI_COMM_WORLD, &size);
        CHECK(sum == size);
    }
    if (req != MPI_REQUEST_NULL)
        CHECK_RC(MPI_Wait(&req, MPI_STATUS_IGNORE));
    /* An Issend's freed request: the buffer stays ours only once the message is received;
     * the collective below (rank 0 enters it after its receive) orders that. */
    CHECK_RC(MPI_Barrier(MPI_COMM_WORLD));
    free(buf);
}

int main(int argc, char **argv) {
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    check_rank_ = rank;
    CHECK(size >= 2);
    /* The first barrier sets up the shared-memory collective path, if any. */
    CHECK_RC(MPI_Barrier(MPI_COMM_WORLD));
    int k = 0;
    for (int s = 0; s < NSIZES; s++) {
        const char *modes = "is", *colls = "ba";
        for (int m = 0; m < 2; m++)
            for (int c = 0; c < 2; c++)
                round_trip(rank, sizes[s], modes[m], colls[c], k++);
    }
    if (rank == 0)
        printf("coll_progress: %d rounds passed\n", k);
    MPI_Finalize();
    return 0;
}
