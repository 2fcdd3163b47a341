/* Partitioned communication where the two sides partition the data differently (MPI 4.0
 * §4.2.1: the message is matched as a whole, its bytes fill the receive partitions in
 * order) and on intercommunicators:
 * - a ring where the sender has 3 partitions of 40 ints and the receiver 4 of 30, then the
 *   other way round (8 of 15 into 2 of 60), over several rounds; each receive partition is
 *   checked as soon as MPI_Parrived reports it;
 * - a non-contiguous receive datatype (a vector) under a different partitioning;
 * - a receive partition arrives when the send partitions holding its bytes are ready, not
 *   before (rank 0 readies half, rank 1 sees the first half and not the second);
 * - an intercommunicator between the two halves of MPI_COMM_WORLD, with different
 *   partition counts, both directions;
 * - a sender with more bytes than the receive buffer: MPI_ERR_TRUNCATE at the receiver,
 *   the sender completes.
 * Rank 0 prints; "std_part: all checks passed" at the end. */
#include "check.h"
#include <string.h>

#define N 120 /* ints per message */
#define ROUNDS 3

static int rank, size;

static int val(int r, int k, int it) { return r * 100000 + k * 10 + it; }

static void say(const char *what) {
    if (rank == 0)
        printf("std_part: %s: ok\n", what);
}

/* Send N ints to `dest` in `ps` partitions and receive N ints from `src` in `pr`
 * partitions on `comm`, ROUNDS times; `me` names the sender's data. */
static void exchange(MPI_Comm comm, int ps, int pr, int dest, int src, int me, int them) {
    static int sbuf[N], rbuf[N];
    MPI_Request r[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
    int nreq = 0, sreq = -1, rreq = -1;
    if (dest != MPI_PROC_NULL) {
        CHECK_RC(MPI_Psend_init(sbuf, ps, N / ps, MPI_INT, dest, 4, comm, MPI_INFO_NULL, &r[nreq]));
        sreq = nreq++;
    }
    if (src != MPI_PROC_NULL) {
        CHECK_RC(MPI_Precv_init(rbuf, pr, N / pr, MPI_INT, src, 4, comm, MPI_INFO_NULL, &r[nreq]));
        rreq = nreq++;
    }
    for (int it = 0; it < ROUNDS; it++) {
        for (int k = 0; k < N; k++) {
            sbuf[k] = val(me, k, it);
            rbuf[k] = -1;
        }
        CHECK_RC(MPI_Startall(nreq, r));
        if (sreq >= 0) {
            /* Out of order, a different order each round (reversed, rotated). */
            for (int i = 0; i < ps; i++)
                CHECK_RC(MPI_Pready(((it % 2 ? ps - 1 - i : i) + it) % ps, r[sreq]));
        }
        if (rreq >= 0) {
            int seen[N] = {0}, left = pr, per = N / pr;
            while (left > 0)
                for (int j = 0; j < pr; j++) {
                    int flag = 0;
                    if (seen[j])
                        continue;
                    CHECK_RC(MPI_Parrived(r[rreq], j, &flag));
                    if (flag) {
                        for (int k = j * per; k < (j + 1) * per; k++)
                            CHECK(rbuf[k] == val(them, k, it));
                        seen[j] = 1;
                        left--;
                    }
                }
        }
        MPI_Status st[2];
        CHECK_RC(MPI_Waitall(nreq, r, st));
        if (rreq >= 0) {
            int n = -1;
            CHECK_RC(MPI_Get_count(&st[rreq], MPI_INT, &n));
            CHECK(n == N && st[rreq].MPI_SOURCE == src && st[rreq].MPI_TAG == 4);
            for (int k = 0; k < N; k++)
                CHECK(rbuf[k] == val(them, k, it));
        }
    }
    for (int i = 0; i < nreq; i++)
        CHECK_RC(MPI_Request_free(&r[i]));
}

static void ring_mixed(void) {
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    exchange(MPI_COMM_WORLD, 3, 4, right, left, rank, left);
    say("3 send partitions of 40 into 4 receive partitions of 30");
    exchange(MPI_COMM_WORLD, 8, 2, right, left, rank, left);
    say("8 send partitions of 15 into 2 receive partitions of 60");
    exchange(MPI_COMM_WORLD, 1, 120, right, left, rank, left);
    say("1 send partition into 120 receive partitions");
}

/* The receiver's datatype is a vector (3 ints out of 5); 6 send partitions of 2 ints fill
 * 4 receive partitions of 1 vector each. */
static void strided_mixed(void) {
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    MPI_Datatype three_of_five;
    CHECK_RC(MPI_Type_vector(3, 1, 2, MPI_INT, &three_of_five));
    CHECK_RC(MPI_Type_commit(&three_of_five));
    int sbuf[12], rbuf[4 * 5];
    for (int k = 0; k < 12; k++)
        sbuf[k] = rank * 1000 + k;
    for (int k = 0; k < 20; k++)
        rbuf[k] = -1;
    MPI_Request s, r;
    CHECK_RC(MPI_Psend_init(sbuf, 6, 2, MPI_INT, right, 6, MPI_COMM_WORLD, MPI_INFO_NULL, &s));
    CHECK_RC(MPI_Precv_init(rbuf, 4, 1, three_of_five, left, 6, MPI_COMM_WORLD, MPI_INFO_NULL, &r));
    CHECK_RC(MPI_Type_free(&three_of_five));
    CHECK_RC(MPI_Start(&r));
    CHECK_RC(MPI_Start(&s));
    CHECK_RC(MPI_Pready_range(0, 5, s));
    int flag = 0;
    while (!flag)
        CHECK_RC(MPI_Parrived(r, 2, &flag));
    /* Receive partition 2 (items 6, 7, 8 of the stream) is unpacked as soon as seen. */
    for (int j = 0; j < 3; j++)
        CHECK(rbuf[10 + 2 * j] == left * 1000 + 6 + j);
    CHECK_RC(MPI_Wait(&s, MPI_STATUS_IGNORE));
    CHECK_RC(MPI_Wait(&r, MPI_STATUS_IGNORE));
    for (int k = 0; k < 20; k++) {
        int item = k % 5, part = k / 5;
        CHECK(rbuf[k] == (item % 2 == 0 ? left * 1000 + part * 3 + item / 2 : -1));
    }
    CHECK_RC(MPI_Request_free(&s));
    CHECK_RC(MPI_Request_free(&r));
    say("a vector receive datatype under a different partitioning");
}

/* Rank 0 sends 4 partitions of 30 ints, rank 1 receives 2 of 60: after rank 0 readied
 * partitions 0 and 1, receive partition 0 arrives and receive partition 1 does not. */
static void early_mixed(void) {
    if (size < 2)
        return;
    int buf[N];
    MPI_Request r;
    if (rank == 0) {
        for (int k = 0; k < N; k++)
            buf[k] = k;
        CHECK_RC(MPI_Psend_init(buf, 4, 30, MPI_INT, 1, 8, MPI_COMM_WORLD, MPI_INFO_NULL, &r));
        CHECK_RC(MPI_Start(&r));
        CHECK_RC(MPI_Pready_range(0, 1, r));
        int ack = 0;
        CHECK_RC(MPI_Recv(&ack, 1, MPI_INT, 1, 9, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        CHECK(ack == 1);
        CHECK_RC(MPI_Pready(3, r));
        CHECK_RC(MPI_Pready(2, r));
        CHECK_RC(MPI_Wait(&r, MPI_STATUS_IGNORE));
    } else if (rank == 1) {
        CHECK_RC(MPI_Precv_init(buf, 2, 60, MPI_INT, 0, 8, MPI_COMM_WORLD, MPI_INFO_NULL, &r));
        CHECK_RC(MPI_Start(&r));
        int flag = 0;
        while (!flag)
            CHECK_RC(MPI_Parrived(r, 0, &flag));
        for (int k = 0; k < 60; k++)
            CHECK(buf[k] == k);
        CHECK_RC(MPI_Parrived(r, 1, &flag));
        CHECK(flag == 0); /* its send partitions are not ready yet */
        int ack = 1;
        CHECK_RC(MPI_Send(&ack, 1, MPI_INT, 0, 9, MPI_COMM_WORLD));
        CHECK_RC(MPI_Wait(&r, MPI_STATUS_IGNORE));
        for (int k = 0; k < N; k++)
            CHECK(buf[k] == k);
    }
    if (rank < 2)
        CHECK_RC(MPI_Request_free(&r));
    say("a receive partition arrives with the send partitions holding it");
}

/* The lower half of MPI_COMM_WORLD and the upper half joined by an intercommunicator:
 * local rank i sends to and receives from remote rank i (where it exists). */
static void intercomm(void) {
    if (size < 2)
        return;
    int low = rank < size / 2, lsize, rsize, lrank;
    MPI_Comm half, inter;
    CHECK_RC(MPI_Comm_split(MPI_COMM_WORLD, low, rank, &half));
    CHECK_RC(MPI_Intercomm_create(half, 0, MPI_COMM_WORLD, low ? size / 2 : 0, 3, &inter));
    CHECK_RC(MPI_Comm_rank(inter, &lrank));
    CHECK_RC(MPI_Comm_size(inter, &lsize));
    CHECK_RC(MPI_Comm_remote_size(inter, &rsize));
    int peer = lrank < rsize ? lrank : MPI_PROC_NULL;
    int peer_world = low ? size / 2 + lrank : lrank;
    /* The lower half sends in 5 partitions, the upper half in 3; each receives in 6. */
    exchange(inter, low ? 5 : 3, 6, peer, peer, rank, peer_world);
    say("an intercommunicator, 5 and 3 send partitions into 6 receive partitions");
    CHECK_RC(MPI_Comm_free(&inter));
    CHECK_RC(MPI_Comm_free(&half));
}

/* Rank 0 sends 2 partitions of 10 ints to rank 1, which receives 3 partitions of 5. */
static void truncated(void) {
    if (size < 2)
        return;
    int buf[20] = {0};
    MPI_Request r;
    if (rank == 0) {
        CHECK_RC(MPI_Psend_init(buf, 2, 10, MPI_INT, 1, 10, MPI_COMM_WORLD, MPI_INFO_NULL, &r));
        CHECK_RC(MPI_Start(&r));
        CHECK_RC(MPI_Pready_range(0, 1, r));
        CHECK_RC(MPI_Wait(&r, MPI_STATUS_IGNORE));
        CHECK_RC(MPI_Request_free(&r));
    } else if (rank == 1) {
        CHECK_RC(MPI_Precv_init(buf, 3, 5, MPI_INT, 0, 10, MPI_COMM_WORLD, MPI_INFO_NULL, &r));
        CHECK_RC(MPI_Start(&r));
        MPI_Status st;
        CHECK(class_of_rc(MPI_Wait(&r, &st)) == MPI_ERR_TRUNCATE);
        CHECK_RC(MPI_Request_free(&r));
    }
    CHECK_RC(MPI_Barrier(MPI_COMM_WORLD));
    say("more send bytes than the receive holds: MPI_ERR_TRUNCATE");
}

int main(int argc, char **argv) {
    CHECK_RC(MPI_Init(&argc, &argv));
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    check_rank_ = rank;
    ring_mixed();
    strided_mixed();
    early_mixed();
    intercomm();
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    truncated();
    CHECK_RC(MPI_Finalize());
    if (rank == 0)
        printf("std_part: all checks passed\n");
    return 0;
}
