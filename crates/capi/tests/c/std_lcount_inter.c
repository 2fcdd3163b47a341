/* The large-count `_c` collectives on an intercommunicator (the lower half of
 * MPI_COMM_WORLD against the upper half):
 * - counts above INT_MAX of an empty datatype (a contiguous type of 0 ints: legal, and no
 *   memory is needed) in every blocking, nonblocking and persistent collective that moves
 *   data, the v and w forms with MPI_Count count and MPI_Aint displacement arrays;
 * - small data through those arrays, checked (alltoallv_c, gatherv_c, scatterv_c,
 *   reduce_scatter_c, allreduce_c);
 * - with the argument `big`, only an MPI_Bcast_c of 2^31 + 8 MPI_CHARs across the
 *   intercommunicator (the harness runs it where the memory allows).
 * Needs at least 2 ranks; rank 0 prints. */
#include "check.h"
#include <limits.h>
#include <string.h>

#define HUGE_COUNT (((MPI_Count)1 << 31) + 5)
#define BIG (((MPI_Count)1 << 31) + 8)

static int rank, size, low, lsize, rsize, lrank;
static MPI_Comm inter;

static void say(const char *what) {
    if (rank == 0)
        printf("std_lcount_inter: %s: ok\n", what);
}

/* The root argument of a rooted collective whose root is local rank 0 of the lower half. */
static int root_arg(void) {
    if (!low)
        return 0;
    return lrank == 0 ? MPI_ROOT : MPI_PROC_NULL;
}

/* World rank of remote rank r. */
static int remote_world(int r) { return low ? size / 2 + r : r; }

static unsigned char pattern(MPI_Count i) { return (unsigned char)(i * 7 + (i >> 20)); }

static void big_bcast(void) {
    unsigned char *buf = malloc(BIG);
    CHECK(buf != NULL);
    int root = root_arg();
    MPI_Count i;
    if (root == MPI_ROOT)
        for (i = 0; i < BIG; i++)
            buf[i] = pattern(i);
    else
        memset(buf, 0, BIG);
    CHECK_RC(MPI_Bcast_c(buf, BIG, MPI_CHAR, root, inter));
    if (!low) {
        for (i = 0; i < BIG; i += 4093)
            CHECK(buf[i] == pattern(i));
        for (i = BIG - 4096; i < BIG; i++)
            CHECK(buf[i] == pattern(i));
    }
    free(buf);
    say("MPI_Bcast_c of 2^31+8 MPI_CHARs across an intercommunicator");
}

static void empty_type_huge_counts(void) {
    MPI_Datatype e, *types = malloc(sizeof(MPI_Datatype) * size);
    MPI_Count *counts = malloc(sizeof(MPI_Count) * size);
    MPI_Aint *displs = malloc(sizeof(MPI_Aint) * size);
    MPI_Request r;
    int buf[4] = {0}, rbuf[4] = {0}, root = root_arg();
    CHECK_RC(MPI_Type_contiguous(0, MPI_INT, &e));
    CHECK_RC(MPI_Type_commit(&e));
    for (int i = 0; i < size; i++) {
        counts[i] = HUGE_COUNT;
        displs[i] = 0;
        types[i] = e;
    }
    CHECK_RC(MPI_Bcast_c(buf, HUGE_COUNT, e, root, inter));
    CHECK_RC(MPI_Gather_c(buf, HUGE_COUNT, e, rbuf, HUGE_COUNT, e, root, inter));
    CHECK_RC(MPI_Scatter_c(buf, HUGE_COUNT, e, rbuf, HUGE_COUNT, e, root, inter));
    CHECK_RC(MPI_Gatherv_c(buf, HUGE_COUNT, e, rbuf, counts, displs, e, root, inter));
    CHECK_RC(MPI_Scatterv_c(buf, counts, displs, e, rbuf, HUGE_COUNT, e, root, inter));
    CHECK_RC(MPI_Allgather_c(buf, HUGE_COUNT, e, rbuf, HUGE_COUNT, e, inter));
    CHECK_RC(MPI_Allgatherv_c(buf, HUGE_COUNT, e, rbuf, counts, displs, e, inter));
    CHECK_RC(MPI_Alltoall_c(buf, HUGE_COUNT, e, rbuf, HUGE_COUNT, e, inter));
    CHECK_RC(MPI_Alltoallv_c(buf, counts, displs, e, rbuf, counts, displs, e, inter));
    CHECK_RC(MPI_Alltoallw_c(buf, counts, displs, types, rbuf, counts, displs, types, inter));
    say("blocking _c collectives, counts of 2^31+5 of an empty type");
    CHECK_RC(MPI_Ibcast_c(buf, HUGE_COUNT, e, root, inter, &r));
    CHECK_RC(MPI_Wait(&r, MPI_STATUS_IGNORE));
    CHECK_RC(MPI_Igatherv_c(buf, HUGE_COUNT, e, rbuf, counts, displs, e, root, inter, &r));
    CHECK_RC(MPI_Wait(&r, MPI_STATUS_IGNORE));
    CHECK_RC(MPI_Iallgatherv_c(buf, HUGE_COUNT, e, rbuf, counts, displs, e, inter, &r));
    CHECK_RC(MPI_Wait(&r, MPI_STATUS_IGNORE));
    CHECK_RC(MPI_Ialltoallv_c(buf, counts, displs, e, rbuf, counts, displs, e, inter, &r));
    CHECK_RC(MPI_Wait(&r, MPI_STATUS_IGNORE));
    CHECK_RC(MPI_Ialltoallw_c(buf, counts, displs, types, rbuf, counts, displs, types, inter, &r));
    CHECK_RC(MPI_Wait(&r, MPI_STATUS_IGNORE));
    say("nonblocking _c collectives, counts of 2^31+5 of an empty type");
    for (int it = 0; it < 2; it++) {
        CHECK_RC(MPI_Bcast_init_c(buf, HUGE_COUNT, e, root, inter, MPI_INFO_NULL, &r));
        CHECK_RC(MPI_Start(&r));
        CHECK_RC(MPI_Wait(&r, MPI_STATUS_IGNORE));
        CHECK_RC(MPI_Request_free(&r));
        CHECK_RC(MPI_Alltoallv_init_c(buf, counts, displs, e, rbuf, counts, displs, e, inter,
                                      MPI_INFO_NULL, &r));
        CHECK_RC(MPI_Start(&r));
        CHECK_RC(MPI_Wait(&r, MPI_STATUS_IGNORE));
        CHECK_RC(MPI_Request_free(&r));
    }
    say("persistent _c collectives, counts of 2^31+5 of an empty type");
    CHECK_RC(MPI_Type_free(&e));
    free(types);
    free(counts);
    free(displs);
}

/* Small data through MPI_Count/MPI_Aint arrays, checked. */
static void small_data(void) {
    int n = size > rsize ? size : rsize;
    int *sbuf = malloc(sizeof(int) * 4 * n), *rbuf = malloc(sizeof(int) * 4 * n);
    MPI_Count *sc = malloc(sizeof(MPI_Count) * n), *rc = malloc(sizeof(MPI_Count) * n);
    MPI_Aint *sd = malloc(sizeof(MPI_Aint) * n), *rd = malloc(sizeof(MPI_Aint) * n);
    /* Alltoallv_c: 2 ints to each remote rank j, received backwards in the buffer. */
    for (int j = 0; j < rsize; j++) {
        sc[j] = rc[j] = 2;
        sd[j] = 2 * j;
        rd[j] = 2 * (rsize - 1 - j);
        sbuf[2 * j] = rank * 100 + j * 10;
        sbuf[2 * j + 1] = rank * 100 + j * 10 + 1;
    }
    CHECK_RC(MPI_Alltoallv_c(sbuf, sc, sd, MPI_INT, rbuf, rc, rd, MPI_INT, inter));
    for (int j = 0; j < rsize; j++) {
        int at = 2 * (rsize - 1 - j);
        CHECK(rbuf[at] == remote_world(j) * 100 + lrank * 10);
        CHECK(rbuf[at + 1] == remote_world(j) * 100 + lrank * 10 + 1);
    }
    /* Gatherv_c / Scatterv_c at local rank 0 of the lower half: 1 int per remote rank,
     * at displacement 3 * j. */
    int root = root_arg();
    for (int j = 0; j < rsize; j++) {
        rc[j] = 1;
        rd[j] = 3 * j;
    }
    for (int k = 0; k < 4 * n; k++)
        rbuf[k] = -1;
    sbuf[0] = rank + 1000;
    CHECK_RC(MPI_Gatherv_c(sbuf, 1, MPI_INT, rbuf, rc, rd, MPI_INT, root, inter));
    if (root == MPI_ROOT)
        for (int j = 0; j < rsize; j++)
            CHECK(rbuf[3 * j] == remote_world(j) + 1000);
    for (int j = 0; j < rsize; j++)
        sbuf[3 * j] = 2000 + j;
    rbuf[0] = -1;
    CHECK_RC(MPI_Scatterv_c(sbuf, rc, rd, MPI_INT, rbuf, 1, MPI_INT, root, inter));
    if (!low)
        CHECK(rbuf[0] == 2000 + lrank);
    /* Reduce_scatter_c: rsize ints per local rank (both groups then reduce vectors of
     * lsize * rsize ints); each gets the sums over the remote group. */
    for (int j = 0; j < lsize; j++)
        sc[j] = rsize;
    for (int k = 0; k < lsize * rsize; k++)
        sbuf[k] = rank + 1;
    int want = 0;
    for (int j = 0; j < rsize; j++)
        want += remote_world(j) + 1;
    for (int pass = 0; pass < 2; pass++) {
        for (int k = 0; k < rsize; k++)
            rbuf[k] = -1;
        if (pass == 0) {
            CHECK_RC(MPI_Reduce_scatter_c(sbuf, rbuf, sc, MPI_INT, MPI_SUM, inter));
        } else {
            MPI_Request r;
            CHECK_RC(MPI_Ireduce_scatter_c(sbuf, rbuf, sc, MPI_INT, MPI_SUM, inter, &r));
            CHECK_RC(MPI_Wait(&r, MPI_STATUS_IGNORE));
        }
        for (int k = 0; k < rsize; k++)
            CHECK(rbuf[k] == want);
    }
    rbuf[0] = -1;
    CHECK_RC(MPI_Allreduce_c(sbuf, rbuf, 1, MPI_INT, MPI_SUM, inter));
    CHECK(rbuf[0] == want);
    say("small data through MPI_Count and MPI_Aint arrays");
    free(sbuf);
    free(rbuf);
    free(sc);
    free(rc);
    free(sd);
    free(rd);
}

int main(int argc, char **argv) {
    MPI_Comm half;
    CHECK_RC(MPI_Init(&argc, &argv));
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    check_rank_ = rank;
    CHECK(size >= 2);
    low = rank < size / 2;
    CHECK_RC(MPI_Comm_split(MPI_COMM_WORLD, low, rank, &half));
    CHECK_RC(MPI_Intercomm_create(half, 0, MPI_COMM_WORLD, low ? size / 2 : 0, 3, &inter));
    CHECK_RC(MPI_Comm_rank(inter, &lrank));
    CHECK_RC(MPI_Comm_size(inter, &lsize));
    CHECK_RC(MPI_Comm_remote_size(inter, &rsize));
    if (argc > 1 && strcmp(argv[1], "big") == 0) {
        big_bcast();
    } else {
        empty_type_huge_counts();
        small_data();
    }
    CHECK_RC(MPI_Comm_free(&inter));
    CHECK_RC(MPI_Comm_free(&half));
    CHECK_RC(MPI_Finalize());
    if (rank == 0)
        printf("std_lcount_inter: all checks passed\n");
    return 0;
}
