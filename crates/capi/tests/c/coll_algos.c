/* Collectives through the algorithm layer: sizes on both sides of the algorithm thresholds,
 * every root, MPI_IN_PLACE, a non-commutative user op (rank order must be kept), MINLOC on
 * a padded pair type, a strided derived type, and collectives on split/dup communicators.
 * Every result is checked against a value each rank computes locally. */
#include "check.h"
#include <string.h>

/* 2x2 integer matrices (mod 2^32) under multiplication: associative, not commutative. */
typedef struct { unsigned a, b, c, d; } mat;

static void matmul(void *in, void *inout, int *len, MPI_Datatype *dt) {
    (void)dt;
    mat *x = in, *y = inout;
    for (int i = 0; i < *len; i++) {
        mat r = {x[i].a * y[i].a + x[i].b * y[i].c, x[i].a * y[i].b + x[i].b * y[i].d,
                 x[i].c * y[i].a + x[i].d * y[i].c, x[i].c * y[i].b + x[i].d * y[i].d};
        y[i] = r;
    }
}

static mat elem(int rank, int i) {
    mat m = {(unsigned)(rank + 2), (unsigned)(i % 7 + 1), (unsigned)(rank * 3 + i), 1u};
    return m;
}

static mat mul(mat x, mat y) {
    mat r = {x.a * y.a + x.b * y.c, x.a * y.b + x.b * y.d, x.c * y.a + x.d * y.c,
             x.c * y.b + x.d * y.d};
    return r;
}

static int same(mat x, mat y) { return x.a == y.a && x.b == y.b && x.c == y.c && x.d == y.d; }

int main(int argc, char **argv) {
    int rank, size;
    CHECK_RC(MPI_Init(&argc, &argv));
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    check_rank_ = rank;

    /* Integer sums, sizes 1 .. 20000 ints (ring allreduce above 16 KiB). */
    int sizes[] = {1, 7, 1000, 5000, 20000};
    for (unsigned s = 0; s < sizeof sizes / sizeof *sizes; s++) {
        int n = sizes[s];
        int *a = malloc(n * sizeof(int)), *b = malloc(n * sizeof(int));
        for (int i = 0; i < n; i++) a[i] = rank * 1000 + i;
        CHECK_RC(MPI_Allreduce(a, b, n, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
        for (int i = 0; i < n; i++) CHECK(b[i] == 1000 * size * (size - 1) / 2 + size * i);
        for (int i = 0; i < n; i++) b[i] = rank - i;
        CHECK_RC(MPI_Allreduce(MPI_IN_PLACE, b, n, MPI_INT, MPI_MAX, MPI_COMM_WORLD));
        for (int i = 0; i < n; i++) CHECK(b[i] == size - 1 - i);
        for (int root = 0; root < size; root++) {
            for (int i = 0; i < n; i++) b[i] = rank == root ? i * 3 + root : -1;
            CHECK_RC(MPI_Bcast(b, n, MPI_INT, root, MPI_COMM_WORLD));
            for (int i = 0; i < n; i++) CHECK(b[i] == i * 3 + root);
            for (int i = 0; i < n; i++) b[i] = -7;
            CHECK_RC(MPI_Reduce(a, b, n, MPI_INT, MPI_SUM, root, MPI_COMM_WORLD));
            if (rank == root)
                for (int i = 0; i < n; i++) CHECK(b[i] == 1000 * size * (size - 1) / 2 + size * i);
            memcpy(b, a, n * sizeof(int));
            CHECK_RC(MPI_Reduce(rank == root ? MPI_IN_PLACE : b, b, n, MPI_INT, MPI_MIN, root,
                                MPI_COMM_WORLD));
            if (rank == root)
                for (int i = 0; i < n; i++) CHECK(b[i] == i);
        }
        free(a);
        free(b);
    }
    if (rank == 0) printf("int sums, max, min, bcast at every root: ok\n");

    /* Doubles: a sum of small integers is exact whatever the order. */
    {
        double x[300], y[300];
        for (int i = 0; i < 300; i++) x[i] = rank + i * 0.5;
        CHECK_RC(MPI_Allreduce(x, y, 300, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD));
        for (int i = 0; i < 300; i++) CHECK(y[i] == size * (size - 1) / 2.0 + size * i * 0.5);
    }

    /* Non-commutative user op: the product must be x0 * x1 * ... in rank order. */
    MPI_Datatype mt;
    MPI_Op mop;
    CHECK_RC(MPI_Type_contiguous(4, MPI_UNSIGNED, &mt));
    CHECK_RC(MPI_Type_commit(&mt));
    CHECK_RC(MPI_Op_create(matmul, 0, &mop));
    for (int n = 1; n <= 3000; n *= 12) {
        mat *m = malloc(n * sizeof(mat)), *r = malloc(n * sizeof(mat));
        for (int i = 0; i < n; i++) m[i] = elem(rank, i);
        CHECK_RC(MPI_Allreduce(m, r, n, mt, mop, MPI_COMM_WORLD));
        for (int i = 0; i < n; i++) {
            mat e = elem(0, i);
            for (int k = 1; k < size; k++) e = mul(e, elem(k, i));
            CHECK(same(r[i], e));
        }
        for (int root = 0; root < size; root++) {
            CHECK_RC(MPI_Reduce(m, r, n, mt, mop, root, MPI_COMM_WORLD));
            if (rank == root)
                for (int i = 0; i < n; i++) {
                    mat e = elem(0, i);
                    for (int k = 1; k < size; k++) e = mul(e, elem(k, i));
                    CHECK(same(r[i], e));
                }
        }
        free(m);
        free(r);
    }
    if (rank == 0) printf("non-commutative user op in rank order: ok\n");

    /* MINLOC/MAXLOC on MPI_DOUBLE_INT (12 data bytes in a 16-byte struct). */
    {
        struct { double v; int i; } in[5], out[5];
        for (int k = 0; k < 5; k++) {
            in[k].v = (double)((rank + k) % size);
            in[k].i = rank;
        }
        CHECK_RC(MPI_Allreduce(in, out, 5, MPI_DOUBLE_INT, MPI_MINLOC, MPI_COMM_WORLD));
        for (int k = 0; k < 5; k++) {
            CHECK(out[k].v == 0.0);
            CHECK(out[k].i == (size - k % size) % size);
        }
        CHECK_RC(MPI_Allreduce(in, out, 5, MPI_DOUBLE_INT, MPI_MAXLOC, MPI_COMM_WORLD));
        for (int k = 0; k < 5; k++) CHECK(out[k].v == (double)(size - 1));
    }
    if (rank == 0) printf("minloc/maxloc on double_int: ok\n");

    /* A strided vector type: every other int of 2*n is reduced and broadcast. */
    {
        MPI_Datatype vt;
        CHECK_RC(MPI_Type_vector(50, 1, 2, MPI_INT, &vt));
        CHECK_RC(MPI_Type_commit(&vt));
        int a[100], b[100];
        for (int i = 0; i < 100; i++) {
            a[i] = rank + i;
            b[i] = -1;
        }
        CHECK_RC(MPI_Allreduce(a, b, 1, vt, MPI_SUM, MPI_COMM_WORLD));
        for (int i = 0; i < 100; i++)
            CHECK(b[i] == (i % 2 == 0 ? size * (size - 1) / 2 + size * i : -1));
        for (int i = 0; i < 100; i++) a[i] = rank == size - 1 ? i : -2;
        CHECK_RC(MPI_Bcast(a, 1, vt, size - 1, MPI_COMM_WORLD));
        for (int i = 0; i < 100; i++) CHECK(a[i] == (i % 2 == 0 ? i : (rank == size - 1 ? i : -2)));
        MPI_Type_free(&vt);
    }
    if (rank == 0) printf("strided vector type: ok\n");

    /* Split into halves (reversed order) and dup: collectives on the new communicators do
     * not mix with world's. */
    {
        MPI_Comm half, d;
        CHECK_RC(MPI_Comm_split(MPI_COMM_WORLD, rank % 2, -rank, &half));
        CHECK_RC(MPI_Comm_dup(half, &d));
        int hr, hs, v = rank, sum = 0;
        MPI_Comm_rank(d, &hr);
        MPI_Comm_size(d, &hs);
        CHECK(hs == (size + 1 - rank % 2) / 2);
        CHECK_RC(MPI_Allreduce(&v, &sum, 1, MPI_INT, MPI_SUM, d));
        int want = 0;
        for (int k = rank % 2; k < size; k += 2) want += k;
        CHECK(sum == want);
        int top = rank;
        CHECK_RC(MPI_Bcast(&top, 1, MPI_INT, 0, half));
        /* rank 0 of the reversed half is its highest world rank */
        int hi = rank % 2;
        while (hi + 2 < size) hi += 2;
        CHECK(top == hi);
        CHECK_RC(MPI_Barrier(d));
        MPI_Comm_free(&d);
        MPI_Comm_free(&half);
    }
    CHECK_RC(MPI_Barrier(MPI_COMM_WORLD));
    if (rank == 0) printf("split/dup communicators: ok\n");

    /* MPI_COMM_TYPE_SHARED: every rank of this job runs on this node; the key orders them. */
    {
        MPI_Comm node;
        int nr, ns;
        CHECK_RC(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, size - rank,
                                     MPI_INFO_NULL, &node));
        MPI_Comm_rank(node, &nr);
        MPI_Comm_size(node, &ns);
        CHECK(ns == size && nr == size - 1 - rank);
        MPI_Comm_free(&node);
        CHECK_RC(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_UNDEFINED, 0, MPI_INFO_NULL, &node));
        CHECK(node == MPI_COMM_NULL);
    }
    if (rank == 0) printf("split_type shared: ok\n");

    /* Nonblocking collectives (complete at start here, but used as the standard says). */
    {
        MPI_Request rq[4];
        MPI_Status st[4];
        int v = rank + 1, s1 = 0, b = rank == 0 ? 42 : 0, sc = 0;
        CHECK_RC(MPI_Iallreduce(&v, &s1, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &rq[0]));
        CHECK_RC(MPI_Ibcast(&b, 1, MPI_INT, 0, MPI_COMM_WORLD, &rq[1]));
        CHECK_RC(MPI_Ibarrier(MPI_COMM_WORLD, &rq[2]));
        CHECK_RC(MPI_Iscan(&v, &sc, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &rq[3]));
        CHECK_RC(MPI_Waitall(4, rq, st));
        for (int k = 0; k < 4; k++) CHECK(rq[k] == MPI_REQUEST_NULL);
        CHECK(s1 == size * (size + 1) / 2 && b == 42 && sc == (rank + 1) * (rank + 2) / 2);
        int *all = malloc(size * sizeof(int));
        CHECK_RC(MPI_Iallgather(&rank, 1, MPI_INT, all, 1, MPI_INT, MPI_COMM_WORLD, &rq[0]));
        int flag = 0;
        while (!flag) CHECK_RC(MPI_Test(&rq[0], &flag, MPI_STATUS_IGNORE));
        for (int k = 0; k < size; k++) CHECK(all[k] == k);
        free(all);
    }
    if (rank == 0) printf("nonblocking collectives: ok\n");

    MPI_Op_free(&mop);
    MPI_Type_free(&mt);
    if (rank == 0) printf("coll_algos: all checks passed\n");
    MPI_Finalize();
    return 0;
}
