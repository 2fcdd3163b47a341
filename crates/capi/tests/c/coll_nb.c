/* Nonblocking collectives that must progress without blocking at start, checked against
 * a local reference: several outstanding at once (completed by MPI_Waitall or an
 * MPI_Test loop), interleaved with point-to-point traffic that other ranks only send
 * after starting their own collective, on contiguous and strided datatypes.
 * Prints "coll_nb: all checks passed" on rank 0. */
#include "check.h"
#include <string.h>

static unsigned long long rs = 0x9E3779B97F4A7C15ULL;
static unsigned rnd(unsigned n) {
    rs ^= rs << 13;
    rs ^= rs >> 7;
    rs ^= rs << 17;
    return n ? (unsigned)(rs % n) : 0;
}
static int val(int rank, int k, int it, int what) {
    return (rank * 7919 + k * 31 + it * 101 + what * 13) % 1000 - 300;
}

int main(int argc, char **argv) {
    int rank, size;
    CHECK_RC(MPI_Init(&argc, &argv));
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    check_rank_ = rank;
    MPI_Comm comm = MPI_COMM_WORLD;

    /* The classic deadlock of blocking-at-start implementations. */
    if (size >= 2) {
        MPI_Request r = MPI_REQUEST_NULL;
        int x = 42, y = 0;
        if (rank == 0) {
            CHECK_RC(MPI_Ibarrier(comm, &r));
            CHECK_RC(MPI_Send(&x, 1, MPI_INT, 1, 5, comm));
        } else if (rank == 1) {
            CHECK_RC(MPI_Recv(&y, 1, MPI_INT, 0, 5, comm, MPI_STATUS_IGNORE));
            CHECK(y == 42);
            CHECK_RC(MPI_Ibarrier(comm, &r));
        } else {
            CHECK_RC(MPI_Ibarrier(comm, &r));
        }
        CHECK_RC(MPI_Wait(&r, MPI_STATUS_IGNORE));
        CHECK(r == MPI_REQUEST_NULL);
        /* Same with a broadcast whose root only sends after a message from the last rank. */
        int v = rank == 0 ? 7 : -1;
        if (rank == 0) {
            CHECK_RC(MPI_Recv(&y, 1, MPI_INT, size - 1, 6, comm, MPI_STATUS_IGNORE));
            CHECK_RC(MPI_Ibcast(&v, 1, MPI_INT, 0, comm, &r));
        } else {
            CHECK_RC(MPI_Ibcast(&v, 1, MPI_INT, 0, comm, &r));
            if (rank == size - 1) CHECK_RC(MPI_Send(&x, 1, MPI_INT, 0, 6, comm));
        }
        CHECK_RC(MPI_Wait(&r, MPI_STATUS_IGNORE));
        CHECK(v == 7);
        if (rank == 0) printf("ibarrier/ibcast progress while ranks exchange messages: ok\n");
    }

    MPI_Datatype vec; /* 2 ints, stride 2 (a hole between them) */
    CHECK_RC(MPI_Type_vector(2, 1, 2, MPI_INT, &vec));
    CHECK_RC(MPI_Type_commit(&vec));
    MPI_Op ops[] = {MPI_SUM, MPI_MAX, MPI_MIN, MPI_BXOR};

    for (int it = 0; it < 20; it++) {
        int count = it % 3 == 0 ? (int)rnd(4) : it % 3 == 1 ? 1 + (int)rnd(60) : 500 + (int)rnd(5000);
        int root = rnd(size);
        int strided = rnd(2);
        MPI_Datatype t = strided ? vec : MPI_INT;
        int per = strided ? 2 : 1, ext = strided ? 3 : 1;
        int n = count * per;
#define AT(k) (((k) / per) * ext + ((k) % per) * 2)
        MPI_Op op = ops[rnd(4)];
        MPI_Request req[8];
        int nreq = 0;
        /* bcast */
        int *b = calloc(count * ext + 1, sizeof(int));
        if (rank == root) for (int k = 0; k < n; k++) b[AT(k)] = val(root, k, it, 1);
        CHECK_RC(MPI_Ibcast(b, count, t, root, comm, &req[nreq++]));
        /* allreduce (in place on odd iterations) and reduce (MPI_INT only: any op) */
        int *s = calloc(count + 1, sizeof(int)), *ar = calloc(count + 1, sizeof(int)), *rr = calloc(count + 1, sizeof(int));
        for (int k = 0; k < count; k++) s[k] = val(rank, k, it, 2);
        if (it % 2) {
            memcpy(ar, s, count * sizeof(int));
            CHECK_RC(MPI_Iallreduce(MPI_IN_PLACE, ar, count, MPI_INT, op, comm, &req[nreq++]));
        } else {
            CHECK_RC(MPI_Iallreduce(s, ar, count, MPI_INT, op, comm, &req[nreq++]));
        }
        CHECK_RC(MPI_Ireduce(s, rr, count, MPI_INT, MPI_SUM, root, comm, &req[nreq++]));
        /* gather / scatter / allgather / alltoall of blocks of `count` items of t */
        int *g = calloc(count * ext * size + 1, sizeof(int)), *x = calloc(count * ext + 1, sizeof(int));
        for (int k = 0; k < n; k++) x[AT(k)] = val(rank, k, it, 3);
        CHECK_RC(MPI_Igather(x, count, t, g, count, t, root, comm, &req[nreq++]));
        int *src = calloc(count * ext * size + 1, sizeof(int)), *y = calloc(count * ext + 1, sizeof(int));
        if (rank == root) for (int k = 0; k < n * size; k++) src[AT(k)] = val(k / n, k % n, it, 4);
        CHECK_RC(MPI_Iscatter(src, count, t, y, count, t, root, comm, &req[nreq++]));
        int *ag = calloc(count * ext * size + 1, sizeof(int));
        CHECK_RC(MPI_Iallgather(x, count, t, ag, count, t, comm, &req[nreq++]));
        int *a2 = calloc(count * ext * size + 1, sizeof(int)), *z = calloc(count * ext * size + 1, sizeof(int));
        for (int k = 0; k < n * size; k++) a2[AT(k)] = val(rank, k, it, 5);
        CHECK_RC(MPI_Ialltoall(a2, count, t, z, count, t, comm, &req[nreq++]));
        CHECK_RC(MPI_Ibarrier(comm, &req[nreq++]));
        /* point-to-point ring traffic while all of them are in flight */
        int tok = rank, got = -1;
        CHECK_RC(MPI_Sendrecv(&tok, 1, MPI_INT, (rank + 1) % size, 9, &got, 1, MPI_INT,
                              (rank + size - 1) % size, 9, comm, MPI_STATUS_IGNORE));
        CHECK(got == (rank + size - 1) % size);
        if (it % 2) {
            CHECK_RC(MPI_Waitall(nreq, req, MPI_STATUSES_IGNORE));
        } else {
            int flag = 0;
            while (!flag) CHECK_RC(MPI_Testall(nreq, req, &flag, MPI_STATUSES_IGNORE));
        }
        for (int i = 0; i < nreq; i++) CHECK(req[i] == MPI_REQUEST_NULL);
        for (int k = 0; k < n; k++) CHECK(b[AT(k)] == val(root, k, it, 1));
        for (int k = 0; k < count; k++) {
            int e = val(0, k, it, 2), sum = val(0, k, it, 2);
            for (int r = 1; r < size; r++) {
                int v = val(r, k, it, 2);
                sum += v;
                e = op == MPI_SUM ? e + v : op == MPI_MAX ? (v > e ? v : e) : op == MPI_MIN ? (v < e ? v : e) : (e ^ v);
            }
            CHECK(ar[k] == e);
            if (rank == root) CHECK(rr[k] == sum);
        }
        if (rank == root)
            for (int k = 0; k < n * size; k++) CHECK(g[AT(k)] == val(k / n, k % n, it, 3));
        for (int k = 0; k < n; k++) CHECK(y[AT(k)] == val(rank, k, it, 4));
        for (int k = 0; k < n * size; k++) CHECK(ag[AT(k)] == val(k / n, k % n, it, 3));
        for (int k = 0; k < n * size; k++) CHECK(z[AT(k)] == val(k / n, rank * n + k % n, it, 5));
        if (strided) /* the holes stay untouched */
            for (int i = 0; i < count * size; i++) CHECK(ag[i * 3 + 1] == 0 && z[i * 3 + 1] == 0);
        free(b); free(s); free(ar); free(rr); free(g); free(x); free(src); free(y); free(ag); free(a2); free(z);
    }
    CHECK_RC(MPI_Type_free(&vec));
    if (rank == 0) printf("coll_nb: random outstanding nonblocking collectives: ok\ncoll_nb: all checks passed\n");
    MPI_Finalize();
    return 0;
}
