/* Partitioned point-to-point (MPI 4.0 §4.2): a ring of MPI_Psend_init/MPI_Precv_init,
 * partitions readied out of order with MPI_Pready, _range and _list over several rounds,
 * each received partition checked as soon as MPI_Parrived reports it; a strided datatype;
 * a partition that must travel before the others are ready (else the program would hang);
 * bad input with MPI_ERRORS_RETURN (error classes).
 * Prints "part: all checks passed" on rank 0. */
#include "check.h"
#include <string.h>

#define P 8  /* partitions */
#define C 16 /* items per partition */
#define ROUNDS 3

static int rank, size;

static int val(int r, int i, int it) { return r * 100000 + i * 100 + it; }

static void say(const char *what) {
    if (rank == 0)
        printf("part: %s: ok\n", what);
}

static void ring(void) {
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    static int sbuf[P * C], rbuf[P * C];
    MPI_Request r[2];
    CHECK_RC(MPI_Psend_init(sbuf, P, C, MPI_INT, right, 5, MPI_COMM_WORLD, MPI_INFO_NULL, &r[0]));
    CHECK_RC(MPI_Precv_init(rbuf, P, C, MPI_INT, left, 5, MPI_COMM_WORLD, MPI_INFO_NULL, &r[1]));
    for (int it = 0; it < ROUNDS; it++) {
        for (int k = 0; k < P * C; k++) {
            sbuf[k] = val(rank, k, it);
            rbuf[k] = -1;
        }
        CHECK_RC(MPI_Startall(2, r));
        if (it == 0) {
            for (int i = P - 1; i >= 0; i--)
                CHECK_RC(MPI_Pready(i, r[0]));
        } else if (it == 1) {
            CHECK_RC(MPI_Pready_range(P / 2, P - 1, r[0]));
            CHECK_RC(MPI_Pready_range(0, P / 2 - 1, r[0]));
        } else {
            int list[P];
            for (int i = 0; i < P; i++)
                list[i] = (i * 3) % P;
            CHECK_RC(MPI_Pready_list(P, list, r[0]));
        }
        int seen[P] = {0}, left_to_see = P;
        while (left_to_see > 0)
            for (int i = 0; i < P; i++) {
                int flag = 0;
                if (seen[i])
                    continue;
                CHECK_RC(MPI_Parrived(r[1], i, &flag));
                if (flag) {
                    for (int k = i * C; k < (i + 1) * C; k++)
                        CHECK(rbuf[k] == val(left, k, it));
                    seen[i] = 1;
                    left_to_see--;
                }
            }
        MPI_Status st[2];
        CHECK_RC(MPI_Waitall(2, r, st));
        CHECK(r[0] != MPI_REQUEST_NULL && r[1] != MPI_REQUEST_NULL);
        int n = -1;
        CHECK_RC(MPI_Get_count(&st[1], MPI_INT, &n));
        CHECK(n == P * C && st[1].MPI_SOURCE == left && st[1].MPI_TAG == 5);
        /* Inactive again: Parrived says every partition arrived. */
        int flag = 0;
        CHECK_RC(MPI_Parrived(r[1], 0, &flag));
        CHECK(flag == 1);
    }
    CHECK_RC(MPI_Request_free(&r[0]));
    CHECK_RC(MPI_Request_free(&r[1]));
    CHECK(r[0] == MPI_REQUEST_NULL && r[1] == MPI_REQUEST_NULL);
    say("ring with pready, pready_range, pready_list and parrived");
}

static void strided(void) {
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    MPI_Datatype every_other;
    CHECK_RC(MPI_Type_vector(4, 1, 2, MPI_INT, &every_other));
    CHECK_RC(MPI_Type_commit(&every_other));
    /* 3 partitions of 1 element each; an element spans 7 ints (extent), holds 4. */
    int sbuf[3 * 7], rbuf[3 * 7];
    for (int k = 0; k < 21; k++) {
        sbuf[k] = rank * 1000 + k;
        rbuf[k] = -1;
    }
    MPI_Request s, r;
    CHECK_RC(MPI_Psend_init(sbuf, 3, 1, every_other, right, 9, MPI_COMM_WORLD, MPI_INFO_NULL, &s));
    CHECK_RC(MPI_Precv_init(rbuf, 3, 1, every_other, left, 9, MPI_COMM_WORLD, MPI_INFO_NULL, &r));
    CHECK_RC(MPI_Type_free(&every_other));
    CHECK_RC(MPI_Start(&r));
    CHECK_RC(MPI_Start(&s));
    CHECK_RC(MPI_Pready_range(0, 2, s));
    int flag = 0;
    while (!flag)
        CHECK_RC(MPI_Parrived(r, 1, &flag));
    /* Partition 1 is unpacked as soon as it is seen. */
    for (int j = 0; j < 4; j++)
        CHECK(rbuf[7 + 2 * j] == left * 1000 + 7 + 2 * j);
    CHECK_RC(MPI_Wait(&s, MPI_STATUS_IGNORE));
    CHECK_RC(MPI_Wait(&r, MPI_STATUS_IGNORE));
    for (int k = 0; k < 21; k++) {
        int in_type = (k % 7) % 2 == 0 && (k % 7) < 7;
        CHECK(rbuf[k] == (in_type ? left * 1000 + k : -1));
    }
    CHECK_RC(MPI_Request_free(&s));
    CHECK_RC(MPI_Request_free(&r));
    say("strided datatype partitions");
}

/* Rank 0 readies only partition 0 and waits for rank 1 to confirm it arrived before
 * readying the rest: partitions must go out as they become ready. */
static void early_partition(void) {
    if (size < 2)
        return;
    int buf[P * C];
    MPI_Request r;
    if (rank == 0) {
        for (int k = 0; k < P * C; k++)
            buf[k] = k;
        CHECK_RC(MPI_Psend_init(buf, P, C, MPI_INT, 1, 11, MPI_COMM_WORLD, MPI_INFO_NULL, &r));
        CHECK_RC(MPI_Start(&r));
        CHECK_RC(MPI_Pready(0, r));
        int ack = 0;
        CHECK_RC(MPI_Recv(&ack, 1, MPI_INT, 1, 12, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        CHECK(ack == 1);
        CHECK_RC(MPI_Pready_range(1, P - 1, r));
        CHECK_RC(MPI_Wait(&r, MPI_STATUS_IGNORE));
    } else if (rank == 1) {
        CHECK_RC(MPI_Precv_init(buf, P, C, MPI_INT, 0, 11, MPI_COMM_WORLD, MPI_INFO_NULL, &r));
        CHECK_RC(MPI_Start(&r));
        int flag = 0;
        while (!flag)
            CHECK_RC(MPI_Parrived(r, 0, &flag));
        for (int k = 0; k < C; k++)
            CHECK(buf[k] == k);
        CHECK_RC(MPI_Parrived(r, P - 1, &flag));
        CHECK(flag == 0); /* not ready at the sender yet */
        int ack = 1;
        CHECK_RC(MPI_Send(&ack, 1, MPI_INT, 0, 12, MPI_COMM_WORLD));
        CHECK_RC(MPI_Wait(&r, MPI_STATUS_IGNORE));
        for (int k = 0; k < P * C; k++)
            CHECK(buf[k] == k);
    }
    if (rank < 2)
        CHECK_RC(MPI_Request_free(&r));
    say("a partition travels before the others are ready");
}

static void bad_input(void) {
    /* The send and the receive of a rank to itself use separate buffers: an active
     * receive into the memory an active send reads would be erroneous (overlap). */
    int buf[P * C] = {0}, rbuf[P * C] = {0};
    MPI_Request s = MPI_REQUEST_NULL, r = MPI_REQUEST_NULL;
    CHECK(class_of_rc(MPI_Psend_init(buf, 0, C, MPI_INT, rank, 3, MPI_COMM_WORLD, MPI_INFO_NULL, &s)) ==
          MPI_ERR_ARG);
    CHECK(class_of_rc(MPI_Psend_init(buf, P, -1, MPI_INT, rank, 3, MPI_COMM_WORLD, MPI_INFO_NULL, &s)) ==
          MPI_ERR_COUNT);
    CHECK(class_of_rc(MPI_Precv_init(buf, P, C, MPI_INT, size, 3, MPI_COMM_WORLD, MPI_INFO_NULL, &r)) ==
          MPI_ERR_RANK);
    CHECK(class_of_rc(MPI_Precv_init(buf, P, C, MPI_INT, MPI_ANY_SOURCE, 3, MPI_COMM_WORLD,
                             MPI_INFO_NULL, &r)) == MPI_ERR_RANK);
    CHECK(class_of_rc(MPI_Psend_init(buf, P, C, MPI_DATATYPE_NULL, rank, 3, MPI_COMM_WORLD,
                             MPI_INFO_NULL, &s)) == MPI_ERR_TYPE);
    CHECK(s == MPI_REQUEST_NULL && r == MPI_REQUEST_NULL);
    CHECK_RC(MPI_Psend_init(buf, P, C, MPI_INT, rank, 3, MPI_COMM_WORLD, MPI_INFO_NULL, &s));
    CHECK_RC(MPI_Precv_init(rbuf, P, C, MPI_INT, rank, 3, MPI_COMM_WORLD, MPI_INFO_NULL, &r));
    CHECK(class_of_rc(MPI_Pready(0, s)) == MPI_ERR_REQUEST); /* inactive */
    CHECK_RC(MPI_Start(&s));
    CHECK_RC(MPI_Start(&r));
    CHECK(class_of_rc(MPI_Start(&s)) == MPI_ERR_REQUEST); /* active */
    CHECK(class_of_rc(MPI_Pready(P, s)) == MPI_ERR_ARG);
    CHECK(class_of_rc(MPI_Pready(-1, s)) == MPI_ERR_ARG);
    CHECK(class_of_rc(MPI_Pready(0, r)) == MPI_ERR_REQUEST); /* a receive */
    int flag;
    CHECK(class_of_rc(MPI_Parrived(r, P, &flag)) == MPI_ERR_ARG);
    CHECK(class_of_rc(MPI_Parrived(s, 0, &flag)) == MPI_ERR_REQUEST); /* a send */
    CHECK(class_of_rc(MPI_Pready(0, MPI_REQUEST_NULL)) == MPI_ERR_REQUEST);
    CHECK_RC(MPI_Pready_range(0, P - 1, s));
    CHECK(class_of_rc(MPI_Pready(2, s)) == MPI_ERR_ARG); /* twice in a round */
    CHECK_RC(MPI_Wait(&s, MPI_STATUS_IGNORE));
    CHECK_RC(MPI_Wait(&r, MPI_STATUS_IGNORE));
    CHECK_RC(MPI_Request_free(&s));
    CHECK_RC(MPI_Request_free(&r));
    say("bad input error classes");
}

int main(int argc, char **argv) {
    CHECK_RC(MPI_Init(&argc, &argv));
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    check_rank_ = rank;
    ring();
    strided();
    early_partition();
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    bad_input();
    CHECK_RC(MPI_Finalize());
    if (rank == 0)
        printf("part: all checks passed\n");
    return 0;
}
