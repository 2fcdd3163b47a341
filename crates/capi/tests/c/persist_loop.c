/* Persistent collectives planned once at init, started 1000 times each with new buffer
 * contents before every start: the results must follow the data of each round (a start
 * reads the buffers as they are then, whatever the datatype or MPI_IN_PLACE).
 * Covers allreduce (contiguous, in place, and on a strided vector datatype, which is
 * packed at each start), bcast, reduce, allgather (in place), alltoall and a barrier.
 * Prints "persist_loop: all checks passed" on rank 0. */
#include "check.h"
#include <string.h>

#define ROUNDS 1000
#define N 4
#define MAXP 8

static int rank, size;

static int val(int r, int k, int it) { return (r * 37 + k * 11 + it * 101) % 997 - 400; }

/* The sum over ranks of val(., k, it). */
static int sum(int k, int it) {
    int s = 0;
    for (int r = 0; r < size; r++)
        s += val(r, k, it);
    return s;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    check_rank_ = rank;
    CHECK(size <= MAXP);
    MPI_Comm comm = MPI_COMM_WORLD;
    MPI_Info info = MPI_INFO_NULL;
    int root = size - 1;

    int sb[N], rb[N], ip[N], bc[N], red[N], ag[N * MAXP], a2s[N * MAXP], a2r[N * MAXP];
    int strided[2 * N], strided_out[2 * N];
    MPI_Datatype every_other;
    CHECK_RC(MPI_Type_vector(N, 1, 2, MPI_INT, &every_other));
    CHECK_RC(MPI_Type_commit(&every_other));

    enum { ALL, INPLACE, VEC, BCAST, REDUCE, AGATHER, A2A, BARRIER, NREQ };
    MPI_Request r[NREQ];
    CHECK_RC(MPI_Allreduce_init(sb, rb, N, MPI_INT, MPI_SUM, comm, info, &r[ALL]));
    CHECK_RC(MPI_Allreduce_init(MPI_IN_PLACE, ip, N, MPI_INT, MPI_SUM, comm, info, &r[INPLACE]));
    CHECK_RC(MPI_Allreduce_init(strided, strided_out, 1, every_other, MPI_SUM, comm, info,
                                &r[VEC]));
    CHECK_RC(MPI_Bcast_init(bc, N, MPI_INT, root, comm, info, &r[BCAST]));
    CHECK_RC(MPI_Reduce_init(sb, red, N, MPI_INT, MPI_SUM, 0, comm, info, &r[REDUCE]));
    CHECK_RC(MPI_Allgather_init(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, ag, N, MPI_INT, comm, info,
                                &r[AGATHER]));
    CHECK_RC(MPI_Alltoall_init(a2s, N, MPI_INT, a2r, N, MPI_INT, comm, info, &r[A2A]));
    CHECK_RC(MPI_Barrier_init(comm, info, &r[BARRIER]));
    /* The datatype may go: the request holds it. */
    CHECK_RC(MPI_Type_free(&every_other));

    for (int it = 0; it < ROUNDS; it++) {
        for (int k = 0; k < N; k++) {
            sb[k] = val(rank, k, it);
            ip[k] = val(rank, k, it);
            bc[k] = rank == root ? val(root, k, it) : -1;
            strided[2 * k] = val(rank, k, it);
            strided[2 * k + 1] = -7;
            strided_out[2 * k] = 0;
            strided_out[2 * k + 1] = 12345;
            for (int p = 0; p < size; p++) {
                ag[p * N + k] = p == rank ? val(rank, k, it) : -1;
                a2s[p * N + k] = val(rank, k + p, it);
            }
        }
        if (it % 2 == 0) {
            CHECK_RC(MPI_Startall(NREQ, r));
            CHECK_RC(MPI_Waitall(NREQ, r, MPI_STATUSES_IGNORE));
        } else {
            for (int q = 0; q < NREQ; q++) {
                CHECK_RC(MPI_Start(&r[q]));
                CHECK_RC(MPI_Wait(&r[q], MPI_STATUS_IGNORE));
            }
        }
        for (int k = 0; k < N; k++) {
            CHECK(rb[k] == sum(k, it));
            CHECK(ip[k] == sum(k, it));
            CHECK(strided_out[2 * k] == sum(k, it));
            CHECK(strided_out[2 * k + 1] == 12345);
            CHECK(bc[k] == val(root, k, it));
            if (rank == 0)
                CHECK(red[k] == sum(k, it));
            for (int p = 0; p < size; p++) {
                CHECK(ag[p * N + k] == val(p, k, it));
                CHECK(a2r[p * N + k] == val(p, k + rank, it));
            }
        }
    }
    for (int q = 0; q < NREQ; q++) {
        CHECK_RC(MPI_Request_free(&r[q]));
        CHECK(r[q] == MPI_REQUEST_NULL);
    }
    if (rank == 0)
        printf("persist_loop: %d rounds of 8 persistent collectives: ok\n"
               "persist_loop: all checks passed\n",
               ROUNDS);
    MPI_Finalize();
    return 0;
}
