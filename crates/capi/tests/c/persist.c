/* Persistent collectives (MPI 4.0 §6.13): every MPI_*_init, the neighbourhood forms
 * included, started several times with new data before each start (a start reads the
 * buffers as they are then), completed by MPI_Wait, an MPI_Test loop or MPI_Startall +
 * MPI_Waitall; inactive requests (wait returns at once, the handle stays), MPI_Request_free
 * of inactive ones, and bad input with MPI_ERRORS_RETURN (error classes).
 * Prints "persist: all checks passed" on rank 0. */
#include "check.h"
#include <string.h>

#define ROUNDS 3
#define N 4
#define MAXP 8

static int rank, size;
static MPI_Status sts[5];

static int val(int r, int k, int it) { return (r * 37 + k * 11 + it * 101) % 997 - 400; }

static void say(const char *what) {
    if (rank == 0)
        printf("persist: %s: ok\n", what);
}

/* Completes `r` one of three ways, by round. */
static void complete(MPI_Request *r, int it) {
    MPI_Status st;
    if (it % 3 == 1) {
        int flag = 0;
        while (!flag)
            CHECK_RC(MPI_Test(r, &flag, &st));
    } else {
        CHECK_RC(MPI_Wait(r, &st));
    }
    CHECK(*r != MPI_REQUEST_NULL); /* persistent: the handle stays */
}

static void rooted_and_reductions(MPI_Comm comm) {
    MPI_Info info = MPI_INFO_NULL;
    int root = size - 1;
    int sb[N], rb[N * MAXP];
    MPI_Request r;

    /* Barrier */
    CHECK_RC(MPI_Barrier_init(comm, info, &r));
    for (int it = 0; it < ROUNDS; it++) {
        CHECK_RC(MPI_Start(&r));
        complete(&r, it);
    }
    CHECK_RC(MPI_Request_free(&r));
    CHECK(r == MPI_REQUEST_NULL);
    say("barrier_init");

    /* Bcast from the last rank */
    int bb[N];
    CHECK_RC(MPI_Bcast_init(bb, N, MPI_INT, root, comm, info, &r));
    for (int it = 0; it < ROUNDS; it++) {
        for (int k = 0; k < N; k++)
            bb[k] = rank == root ? val(root, k, it) : -1;
        CHECK_RC(MPI_Start(&r));
        complete(&r, it);
        for (int k = 0; k < N; k++)
            CHECK(bb[k] == val(root, k, it));
    }
    CHECK_RC(MPI_Request_free(&r));
    say("bcast_init");

    /* Reduce to rank 0, Allreduce (and in place), Scan, Exscan */
    MPI_Request rr[5];
    int ab[N], ip[N], sc[N], ex[N];
    CHECK_RC(MPI_Reduce_init(sb, rb, N, MPI_INT, MPI_SUM, 0, comm, info, &rr[0]));
    CHECK_RC(MPI_Allreduce_init(sb, ab, N, MPI_INT, MPI_MAX, comm, info, &rr[1]));
    CHECK_RC(MPI_Allreduce_init(MPI_IN_PLACE, ip, N, MPI_INT, MPI_SUM, comm, info, &rr[2]));
    CHECK_RC(MPI_Scan_init(sb, sc, N, MPI_INT, MPI_SUM, comm, info, &rr[3]));
    CHECK_RC(MPI_Exscan_init(sb, ex, N, MPI_INT, MPI_SUM, comm, info, &rr[4]));
    for (int it = 0; it < ROUNDS; it++) {
        for (int k = 0; k < N; k++) {
            sb[k] = val(rank, k, it);
            ip[k] = val(rank, k, it + 7);
            ex[k] = 12345;
        }
        CHECK_RC(MPI_Startall(5, rr));
        CHECK_RC(MPI_Waitall(5, rr, sts));
        for (int k = 0; k < N; k++) {
            int sum = 0, mx = -100000, ipsum = 0, pre = 0;
            for (int p = 0; p < size; p++) {
                sum += val(p, k, it);
                ipsum += val(p, k, it + 7);
                if (val(p, k, it) > mx)
                    mx = val(p, k, it);
                if (p < rank)
                    pre += val(p, k, it);
            }
            if (rank == 0)
                CHECK(rb[k] == sum);
            CHECK(ab[k] == mx);
            CHECK(ip[k] == ipsum);
            CHECK(sc[k] == pre + val(rank, k, it));
            if (rank > 0)
                CHECK(ex[k] == pre);
        }
    }
    for (int i = 0; i < 5; i++) {
        CHECK(rr[i] != MPI_REQUEST_NULL);
        CHECK_RC(MPI_Request_free(&rr[i]));
    }
    say("reduce_init, allreduce_init, scan_init, exscan_init");

    /* Reduce_scatter_block and Reduce_scatter (rank i gets i+1 items) */
    int rsb_in[N * MAXP], rsb_out[N], rs_in[MAXP * (MAXP + 1) / 2], rs_out[MAXP], counts[MAXP];
    int total = 0;
    for (int p = 0; p < size; p++) {
        counts[p] = p + 1;
        total += p + 1;
    }
    MPI_Request r2[2];
    CHECK_RC(MPI_Reduce_scatter_block_init(rsb_in, rsb_out, N, MPI_INT, MPI_SUM, comm, info, &r2[0]));
    CHECK_RC(MPI_Reduce_scatter_init(rs_in, rs_out, counts, MPI_INT, MPI_SUM, comm, info, &r2[1]));
    for (int it = 0; it < ROUNDS; it++) {
        for (int k = 0; k < N * size; k++)
            rsb_in[k] = val(rank, k, it);
        for (int k = 0; k < total; k++)
            rs_in[k] = val(rank, k, it + 3);
        CHECK_RC(MPI_Startall(2, r2));
        complete(&r2[0], it);
        complete(&r2[1], it);
        int off = rank * (rank + 1) / 2;
        for (int k = 0; k < N; k++) {
            int s = 0;
            for (int p = 0; p < size; p++)
                s += val(p, rank * N + k, it);
            CHECK(rsb_out[k] == s);
        }
        for (int k = 0; k <= rank; k++) {
            int s = 0;
            for (int p = 0; p < size; p++)
                s += val(p, off + k, it + 3);
            CHECK(rs_out[k] == s);
        }
    }
    CHECK_RC(MPI_Request_free(&r2[0]));
    CHECK_RC(MPI_Request_free(&r2[1]));
    say("reduce_scatter_block_init, reduce_scatter_init");

    /* Gather, Gatherv, Scatter, Scatterv at the last rank */
    int displs[MAXP], vcounts[MAXP], gv[N * MAXP], sv[N * MAXP], scat[N], scatv[N];
    for (int p = 0; p < size; p++) {
        vcounts[p] = 1 + p % N;
        displs[p] = p * N;
    }
    MPI_Request g[4];
    CHECK_RC(MPI_Gather_init(sb, N, MPI_INT, rb, N, MPI_INT, root, comm, info, &g[0]));
    CHECK_RC(MPI_Gatherv_init(sb, vcounts[rank], MPI_INT, gv, vcounts, displs, MPI_INT, root,
                              comm, info, &g[1]));
    CHECK_RC(MPI_Scatter_init(sv, N, MPI_INT, scat, N, MPI_INT, root, comm, info, &g[2]));
    CHECK_RC(MPI_Scatterv_init(sv, vcounts, displs, MPI_INT, scatv, vcounts[rank], MPI_INT, root,
                               comm, info, &g[3]));
    for (int it = 0; it < ROUNDS; it++) {
        for (int k = 0; k < N; k++)
            sb[k] = val(rank, k, it);
        for (int k = 0; k < N * size; k++) {
            sv[k] = val(root, k, it + 5);
            gv[k] = rb[k] = -7;
        }
        CHECK_RC(MPI_Startall(4, g));
        for (int i = 0; i < 4; i++)
            complete(&g[i], it);
        for (int k = 0; k < N; k++)
            CHECK(scat[k] == val(root, rank * N + k, it + 5));
        for (int k = 0; k < vcounts[rank]; k++)
            CHECK(scatv[k] == val(root, rank * N + k, it + 5));
        if (rank == root)
            for (int p = 0; p < size; p++)
                for (int k = 0; k < N; k++) {
                    CHECK(rb[p * N + k] == val(p, k, it));
                    CHECK(gv[p * N + k] == (k < vcounts[p] ? val(p, k, it) : -7));
                }
    }
    for (int i = 0; i < 4; i++)
        CHECK_RC(MPI_Request_free(&g[i]));
    say("gather_init, gatherv_init, scatter_init, scatterv_init");

    /* Allgather, Allgatherv, Alltoall, Alltoallv, Alltoallw */
    int ag[N * MAXP], agv[N * MAXP], a2a_in[N * MAXP], a2a[N * MAXP], a2av[N * MAXP],
        a2aw[N * MAXP];
    int wdispl[MAXP];
    MPI_Datatype types[MAXP];
    for (int p = 0; p < size; p++) {
        wdispl[p] = p * N * (int)sizeof(int);
        types[p] = MPI_INT;
    }
    int ncounts[MAXP];
    for (int p = 0; p < size; p++)
        ncounts[p] = N;
    MPI_Request a[5];
    CHECK_RC(MPI_Allgather_init(sb, N, MPI_INT, ag, N, MPI_INT, comm, info, &a[0]));
    CHECK_RC(MPI_Allgatherv_init(sb, vcounts[rank], MPI_INT, agv, vcounts, displs, MPI_INT, comm,
                                 info, &a[1]));
    CHECK_RC(MPI_Alltoall_init(a2a_in, N, MPI_INT, a2a, N, MPI_INT, comm, info, &a[2]));
    CHECK_RC(MPI_Alltoallv_init(a2a_in, ncounts, displs, MPI_INT, a2av, ncounts, displs, MPI_INT,
                                comm, info, &a[3]));
    CHECK_RC(MPI_Alltoallw_init(a2a_in, ncounts, wdispl, types, a2aw, ncounts, wdispl, types, comm,
                                info, &a[4]));
    for (int it = 0; it < ROUNDS; it++) {
        for (int k = 0; k < N; k++)
            sb[k] = val(rank, k, it);
        for (int k = 0; k < N * size; k++) {
            a2a_in[k] = val(rank, k, it + 9);
            agv[k] = -7;
        }
        CHECK_RC(MPI_Startall(5, a));
        CHECK_RC(MPI_Waitall(5, a, sts));
        for (int p = 0; p < size; p++)
            for (int k = 0; k < N; k++) {
                CHECK(ag[p * N + k] == val(p, k, it));
                CHECK(agv[p * N + k] == (k < vcounts[p] ? val(p, k, it) : -7));
                int want = val(p, rank * N + k, it + 9);
                CHECK(a2a[p * N + k] == want);
                CHECK(a2av[p * N + k] == want);
                CHECK(a2aw[p * N + k] == want);
            }
    }
    for (int i = 0; i < 5; i++)
        CHECK_RC(MPI_Request_free(&a[i]));
    say("allgather_init, allgatherv_init, alltoall_init, alltoallv_init, alltoallw_init");
}

static void neighbourhood(void) {
    MPI_Comm cart;
    int dims[1] = {size}, periods[1] = {1};
    CHECK_RC(MPI_Cart_create(MPI_COMM_WORLD, 1, dims, periods, 0, &cart));
    int left, right;
    CHECK_RC(MPI_Cart_shift(cart, 0, 1, &left, &right));
    int one[1], ag[2], agv[2], sb[2], a2a[2], a2av[2], a2aw[2];
    int c1[2] = {1, 1}, d1[2] = {0, 1};
    MPI_Aint wd[2] = {0, sizeof(int)};
    MPI_Datatype t[2] = {MPI_INT, MPI_INT};
    MPI_Request r[5];
    CHECK_RC(MPI_Neighbor_allgather_init(one, 1, MPI_INT, ag, 1, MPI_INT, cart, MPI_INFO_NULL,
                                         &r[0]));
    CHECK_RC(MPI_Neighbor_allgatherv_init(one, 1, MPI_INT, agv, c1, d1, MPI_INT, cart,
                                          MPI_INFO_NULL, &r[1]));
    CHECK_RC(MPI_Neighbor_alltoall_init(sb, 1, MPI_INT, a2a, 1, MPI_INT, cart, MPI_INFO_NULL,
                                        &r[2]));
    CHECK_RC(MPI_Neighbor_alltoallv_init(sb, c1, d1, MPI_INT, a2av, c1, d1, MPI_INT, cart,
                                         MPI_INFO_NULL, &r[3]));
    CHECK_RC(MPI_Neighbor_alltoallw_init(sb, c1, wd, t, a2aw, c1, wd, t, cart, MPI_INFO_NULL,
                                         &r[4]));
    for (int it = 0; it < ROUNDS; it++) {
        one[0] = rank * 10 + it * 100;
        sb[0] = rank * 10 + it * 100;     /* to the left */
        sb[1] = rank * 10 + 1 + it * 100; /* to the right */
        CHECK_RC(MPI_Startall(5, r));
        for (int i = 0; i < 5; i++)
            complete(&r[i], it);
        CHECK(ag[0] == left * 10 + it * 100 && ag[1] == right * 10 + it * 100);
        CHECK(agv[0] == ag[0] && agv[1] == ag[1]);
        /* from the left: what it sent to its right; from the right: to its left */
        CHECK(a2a[0] == left * 10 + 1 + it * 100 && a2a[1] == right * 10 + it * 100);
        CHECK(a2av[0] == a2a[0] && a2av[1] == a2a[1]);
        CHECK(a2aw[0] == a2a[0] && a2aw[1] == a2a[1]);
    }
    for (int i = 0; i < 5; i++)
        CHECK_RC(MPI_Request_free(&r[i]));
    CHECK_RC(MPI_Comm_free(&cart));
    say("neighbor_*_init on a periodic ring");
    /* A new topology on the handle just freed (handles are reused): its neighbours, not
     * those the ring's calls computed and kept. A line: the ends have MPI_PROC_NULL
     * neighbours, whose receive blocks stay as they were. */
    MPI_Comm line;
    periods[0] = 0;
    CHECK_RC(MPI_Cart_create(MPI_COMM_WORLD, 1, dims, periods, 0, &line));
    for (int it = 0; it < 2; it++) {
        sb[0] = rank * 10 + it * 100;
        sb[1] = rank * 10 + 1 + it * 100;
        a2a[0] = a2a[1] = -1;
        if (it == 0)
            CHECK_RC(MPI_Neighbor_alltoall(sb, 1, MPI_INT, a2a, 1, MPI_INT, line));
        else {
            CHECK_RC(MPI_Neighbor_alltoall_init(sb, 1, MPI_INT, a2a, 1, MPI_INT, line,
                                                MPI_INFO_NULL, &r[0]));
            CHECK_RC(MPI_Start(&r[0]));
            CHECK_RC(MPI_Wait(&r[0], MPI_STATUS_IGNORE));
            CHECK_RC(MPI_Request_free(&r[0]));
        }
        CHECK(a2a[0] == (rank > 0 ? (rank - 1) * 10 + 1 + it * 100 : -1));
        CHECK(a2a[1] == (rank < size - 1 ? (rank + 1) * 10 + it * 100 : -1));
    }
    CHECK_RC(MPI_Comm_free(&line));
    say("neighbor_alltoall(_init) on a line made on the freed ring's handle");
}

/* The count and displacement arrays may go once the init call returned (mpi4py passes
 * temporary ones). */
static void arrays_freed_after_init(void) {
    int *counts = malloc(sizeof(int) * MAXP), *displs = malloc(sizeof(int) * MAXP);
    int in[MAXP], out[MAXP], rs_in[MAXP * (MAXP + 1) / 2], rs_out[MAXP];
    for (int p = 0; p < size; p++) {
        counts[p] = 1;
        displs[p] = p;
        in[p] = rank * 10 + p;
    }
    MPI_Request r[2];
    CHECK_RC(MPI_Alltoallv_init(in, counts, displs, MPI_INT, out, counts, displs, MPI_INT,
                                MPI_COMM_WORLD, MPI_INFO_NULL, &r[0]));
    for (int p = 0; p < size; p++)
        counts[p] = p + 1;
    CHECK_RC(MPI_Reduce_scatter_init(MPI_IN_PLACE, rs_in, counts, MPI_INT, MPI_SUM,
                                     MPI_COMM_WORLD, MPI_INFO_NULL, &r[1]));
    memset(counts, 0xff, sizeof(int) * MAXP);
    memset(displs, 0xff, sizeof(int) * MAXP);
    free(counts);
    free(displs);
    for (int it = 0; it < 2; it++) {
        int total = size * (size + 1) / 2;
        for (int k = 0; k < total; k++)
            rs_in[k] = k + it;
        CHECK_RC(MPI_Startall(2, r));
        CHECK_RC(MPI_Waitall(2, r, sts));
        for (int p = 0; p < size; p++)
            CHECK(out[p] == p * 10 + rank);
        int off = rank * (rank + 1) / 2;
        for (int k = 0; k <= rank; k++)
            CHECK(rs_in[k] == size * (off + k + it));
        (void)rs_out;
    }
    CHECK_RC(MPI_Request_free(&r[0]));
    CHECK_RC(MPI_Request_free(&r[1]));
    say("count arrays freed after init");
}

static void bad_input(void) {
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    int x[4] = {0, 0, 0, 0}, y[4];
    MPI_Request r = MPI_REQUEST_NULL;
    CHECK(class_of_rc(MPI_Allreduce_init(x, y, -1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, MPI_INFO_NULL, &r)) ==
          MPI_ERR_COUNT);
    CHECK(class_of_rc(MPI_Allreduce_init(x, y, 1, MPI_INT, MPI_OP_NULL, MPI_COMM_WORLD, MPI_INFO_NULL,
                                 &r)) == MPI_ERR_OP);
    CHECK(class_of_rc(MPI_Allreduce_init(x, y, 1, MPI_DATATYPE_NULL, MPI_SUM, MPI_COMM_WORLD,
                                 MPI_INFO_NULL, &r)) == MPI_ERR_TYPE);
    CHECK(class_of_rc(MPI_Bcast_init(x, 1, MPI_INT, size, MPI_COMM_WORLD, MPI_INFO_NULL, &r)) ==
          MPI_ERR_ROOT);
    CHECK(class_of_rc(MPI_Barrier_init(MPI_COMM_NULL, MPI_INFO_NULL, &r)) == MPI_ERR_COMM);
    CHECK(class_of_rc(MPI_Neighbor_alltoall_init(x, 1, MPI_INT, y, 1, MPI_INT, MPI_COMM_WORLD,
                                         MPI_INFO_NULL, &r)) == MPI_ERR_TOPOLOGY);
    CHECK(r == MPI_REQUEST_NULL);
    /* Starting an active request is an error; the round still completes. */
    CHECK_RC(MPI_Allreduce_init(x, y, 4, MPI_INT, MPI_SUM, MPI_COMM_WORLD, MPI_INFO_NULL, &r));
    MPI_Status st;
    int flag = 0;
    /* Inactive: completes at once with an empty status, the handle stays. */
    CHECK_RC(MPI_Wait(&r, &st));
    CHECK(r != MPI_REQUEST_NULL && st.MPI_SOURCE == MPI_ANY_SOURCE && st.MPI_TAG == MPI_ANY_TAG);
    CHECK_RC(MPI_Test(&r, &flag, MPI_STATUS_IGNORE));
    CHECK(flag == 1 && r != MPI_REQUEST_NULL);
    CHECK_RC(MPI_Start(&r));
    CHECK(class_of_rc(MPI_Start(&r)) == MPI_ERR_REQUEST);
    CHECK_RC(MPI_Wait(&r, MPI_STATUS_IGNORE));
    CHECK_RC(MPI_Request_free(&r));
    CHECK(r == MPI_REQUEST_NULL);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
    say("bad input error classes");
}

int main(int argc, char **argv) {
    CHECK_RC(MPI_Init(&argc, &argv));
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    check_rank_ = rank;
    CHECK(size <= MAXP);
    rooted_and_reductions(MPI_COMM_WORLD);
    /* The same on a duplicate, so that schedules of two communicators interleave. */
    MPI_Comm dup;
    CHECK_RC(MPI_Comm_dup(MPI_COMM_WORLD, &dup));
    rooted_and_reductions(dup);
    CHECK_RC(MPI_Comm_free(&dup));
    neighbourhood();
    arrays_freed_after_init();
    bad_input();
    CHECK_RC(MPI_Finalize());
    if (rank == 0)
        printf("persist: all checks passed\n");
    return 0;
}
