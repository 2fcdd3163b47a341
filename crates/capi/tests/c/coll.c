/* Collectives and communicator creation on any number of ranks: barrier, bcast, reduce
 * (predefined and user ops, in rank order), allreduce in place, gather(v), scatter(v),
 * allgather(v), alltoall(v), scan/exscan, reduce_scatter_block, comm dup (attribute
 * copy), split, create, compare. Output comes from rank 0. */
#include "check.h"
#include <string.h>

/* Non-commutative op on pairs (a, b) representing the affine map x -> a*x + b:
 * composition in rank order detects a wrong reduction order. */
static void compose(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    (void)dt;
    long *x = in, *y = inout;
    for (int i = 0; i < *len; i++) {
        long a = x[2 * i], b = x[2 * i + 1], c = y[2 * i], d = y[2 * i + 1];
        /* (in o inout)(t) = in(inout(t)) */
        y[2 * i] = a * c;
        y[2 * i + 1] = a * d + b;
    }
}

static int copied = 0;
static int copy_fn(MPI_Comm c, int k, void *extra, void *in, void *out, int *flag)
{
    (void)c; (void)k; (void)extra;
    copied++;
    *(void **)out = in;
    *flag = 1;
    return MPI_SUCCESS;
}

int main(int argc, char **argv)
{
    int rank, size, i;
    CHECK_RC(MPI_Init(&argc, &argv));
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    check_rank_ = rank;
    int root = size - 1;

    CHECK_RC(MPI_Barrier(MPI_COMM_WORLD));
    if (rank == 0) printf("barrier: ok\n");

    double pi[3] = {0, 0, 0};
    if (rank == root) { pi[0] = 3.25; pi[1] = -1; pi[2] = 1e10; }
    CHECK_RC(MPI_Bcast(pi, 3, MPI_DOUBLE, root, MPI_COMM_WORLD));
    CHECK(pi[0] == 3.25 && pi[1] == -1 && pi[2] == 1e10);
    if (rank == 0) printf("bcast: ok\n");

    int v[2] = {rank + 1, -rank}, r[2] = {0, 0};
    CHECK_RC(MPI_Reduce(v, r, 2, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD));
    if (rank == 0) CHECK(r[0] == size * (size + 1) / 2 && r[1] == -size * (size - 1) / 2);
    CHECK_RC(MPI_Allreduce(MPI_IN_PLACE, v, 2, MPI_INT, MPI_MAX, MPI_COMM_WORLD));
    CHECK(v[0] == size && v[1] == 0);
    struct { double val; int loc; } mine = {(double)((rank * 7) % size), rank}, best;
    CHECK_RC(MPI_Allreduce(&mine, &best, 1, MPI_DOUBLE_INT, MPI_MAXLOC, MPI_COMM_WORLD));
    CHECK(best.val == (double)(size - 1));
    if (rank == 0) printf("reduce/allreduce (sum, max, maxloc): ok\n");

    {
        MPI_Op op;
        MPI_Datatype pair;
        CHECK_RC(MPI_Type_contiguous(2, MPI_LONG, &pair));
        CHECK_RC(MPI_Type_commit(&pair));
        CHECK_RC(MPI_Op_create(compose, 0, &op));
        long f[2] = {2, rank}, g[2];
        CHECK_RC(MPI_Allreduce(f, g, 1, pair, op, MPI_COMM_WORLD));
        /* f0 o f1 o ... o f(n-1) applied to t: 2^n t + sum_i 2^i * i */
        long b = 0;
        for (i = 0; i < size; i++) b += (1L << i) * i;
        CHECK(g[0] == (1L << size) && g[1] == b);
        int commute;
        CHECK_RC(MPI_Op_commutative(op, &commute));
        CHECK(commute == 0);
        CHECK_RC(MPI_Op_free(&op));
        CHECK_RC(MPI_Type_free(&pair));
    }
    if (rank == 0) printf("user op in rank order: ok\n");

    {
        int *all = malloc(sizeof(int) * 2 * size), mine2[2] = {rank, rank * rank};
        CHECK_RC(MPI_Gather(mine2, 2, MPI_INT, all, 2, MPI_INT, root, MPI_COMM_WORLD));
        if (rank == root)
            for (i = 0; i < size; i++) CHECK(all[2 * i] == i && all[2 * i + 1] == i * i);
        int got[2] = {-1, -1};
        CHECK_RC(MPI_Scatter(all, 2, MPI_INT, got, 2, MPI_INT, root, MPI_COMM_WORLD));
        CHECK(got[0] == rank && got[1] == rank * rank);
        memset(all, 0, sizeof(int) * 2 * size);
        CHECK_RC(MPI_Allgather(mine2, 2, MPI_INT, all, 2, MPI_INT, MPI_COMM_WORLD));
        for (i = 0; i < size; i++) CHECK(all[2 * i] == i && all[2 * i + 1] == i * i);
        free(all);
    }
    {
        /* rank i contributes i+1 ints */
        int *counts = malloc(sizeof(int) * size), *displs = malloc(sizeof(int) * size), tot = 0;
        for (i = 0; i < size; i++) { counts[i] = i + 1; displs[i] = tot; tot += i + 1; }
        int *mine3 = malloc(sizeof(int) * (rank + 1)), *all = malloc(sizeof(int) * tot);
        for (i = 0; i <= rank; i++) mine3[i] = 100 * rank + i;
        CHECK_RC(MPI_Gatherv(mine3, rank + 1, MPI_INT, all, counts, displs, MPI_INT, 0, MPI_COMM_WORLD));
        if (rank == 0)
            for (i = 0; i < size; i++) CHECK(all[displs[i]] == 100 * i && all[displs[i] + i] == 100 * i + i);
        memset(mine3, 0, sizeof(int) * (rank + 1));
        CHECK_RC(MPI_Scatterv(all, counts, displs, MPI_INT, mine3, rank + 1, MPI_INT, 0, MPI_COMM_WORLD));
        CHECK(mine3[rank] == 100 * rank + rank);
        memset(all, 0, sizeof(int) * tot);
        CHECK_RC(MPI_Allgatherv(mine3, rank + 1, MPI_INT, all, counts, displs, MPI_INT, MPI_COMM_WORLD));
        for (i = 0; i < size; i++) CHECK(all[displs[i] + i] == 100 * i + i);
        free(counts); free(displs); free(mine3); free(all);
    }
    if (rank == 0) printf("gather/scatter/allgather (+v): ok\n");

    {
        int *s = malloc(sizeof(int) * size), *t = malloc(sizeof(int) * size);
        for (i = 0; i < size; i++) s[i] = rank * 1000 + i;
        CHECK_RC(MPI_Alltoall(s, 1, MPI_INT, t, 1, MPI_INT, MPI_COMM_WORLD));
        for (i = 0; i < size; i++) CHECK(t[i] == i * 1000 + rank);
        CHECK_RC(MPI_Alltoall(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, t, 1, MPI_INT, MPI_COMM_WORLD));
        for (i = 0; i < size; i++) CHECK(t[i] == rank * 1000 + i);
        free(s); free(t);
    }
    if (rank == 0) printf("alltoall: ok\n");

    {
        int x = rank + 1, pre = -1, ex = -1;
        CHECK_RC(MPI_Scan(&x, &pre, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
        CHECK(pre == (rank + 1) * (rank + 2) / 2);
        CHECK_RC(MPI_Exscan(&x, &ex, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
        if (rank > 0) CHECK(ex == rank * (rank + 1) / 2);
    }
    if (rank == 0) printf("scan/exscan: ok\n");

    {
        int *s = malloc(sizeof(int) * size), got = -1;
        for (i = 0; i < size; i++) s[i] = i + rank;
        CHECK_RC(MPI_Reduce_scatter_block(s, &got, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
        CHECK(got == size * rank + size * (size - 1) / 2);
        free(s);
    }
    if (rank == 0) printf("reduce_scatter_block: ok\n");

    {
        int key, val = 42, *p, flag, res;
        CHECK_RC(MPI_Comm_create_keyval(copy_fn, MPI_COMM_NULL_DELETE_FN, &key, NULL));
        CHECK_RC(MPI_Comm_set_attr(MPI_COMM_WORLD, key, &val));
        MPI_Comm dup;
        CHECK_RC(MPI_Comm_dup(MPI_COMM_WORLD, &dup));
        CHECK(copied == 1);
        CHECK_RC(MPI_Comm_get_attr(dup, key, &p, &flag));
        CHECK(flag == 1 && *p == 42);
        CHECK_RC(MPI_Comm_compare(MPI_COMM_WORLD, dup, &res));
        CHECK(res == MPI_CONGRUENT);
        /* traffic on the dup does not match traffic on world */
        int a = rank, b = -1, c = -1;
        int peer = (rank + 1) % size, from = (rank + size - 1) % size;
        MPI_Request rq[2];
        CHECK_RC(MPI_Irecv(&b, 1, MPI_INT, from, 0, dup, &rq[0]));
        CHECK_RC(MPI_Irecv(&c, 1, MPI_INT, from, 0, MPI_COMM_WORLD, &rq[1]));
        int a2 = a + 500;
        CHECK_RC(MPI_Send(&a2, 1, MPI_INT, peer, 0, MPI_COMM_WORLD));
        CHECK_RC(MPI_Send(&a, 1, MPI_INT, peer, 0, dup));
        CHECK_RC(MPI_Waitall(2, rq, MPI_STATUSES_IGNORE));
        CHECK(b == from && c == from + 500);

        MPI_Comm half;
        CHECK_RC(MPI_Comm_split(dup, rank % 2, -rank, &half));
        int hr, hs;
        MPI_Comm_rank(half, &hr);
        MPI_Comm_size(half, &hs);
        CHECK(hs == (size + 1 - rank % 2) / 2);
        CHECK(hr == hs - 1 - rank / 2); /* key -rank reverses the order */
        int sum = 0;
        CHECK_RC(MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, half));
        int expect = 0;
        for (i = rank % 2; i < size; i += 2) expect += i;
        CHECK(sum == expect);

        MPI_Group wg, g0;
        CHECK_RC(MPI_Comm_group(MPI_COMM_WORLD, &wg));
        int zero = 0;
        CHECK_RC(MPI_Group_incl(wg, 1, &zero, &g0));
        MPI_Comm only0;
        CHECK_RC(MPI_Comm_create(MPI_COMM_WORLD, g0, &only0));
        if (rank == 0) {
            int s1;
            MPI_Comm_size(only0, &s1);
            CHECK(s1 == 1);
            CHECK_RC(MPI_Comm_free(&only0));
        } else {
            CHECK(only0 == MPI_COMM_NULL);
        }
        CHECK_RC(MPI_Group_free(&g0));
        CHECK_RC(MPI_Group_free(&wg));
        CHECK_RC(MPI_Comm_free(&half));
        CHECK_RC(MPI_Comm_free(&dup));
        CHECK(dup == MPI_COMM_NULL);
        CHECK_RC(MPI_Comm_free_keyval(&key));
    }
    if (rank == 0) printf("comm dup/split/create: ok\n");

    CHECK_RC(MPI_Barrier(MPI_COMM_WORLD));
    CHECK_RC(MPI_Finalize());
    if (rank == 0) printf("coll: all checks passed\n");
    return 0;
}
