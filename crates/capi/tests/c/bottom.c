/* Collectives with MPI_BOTTOM and datatypes holding absolute addresses (MPI 3.1 §4.1.5):
 * blocking, nonblocking and neighbourhood collectives must accept a NULL (MPI_BOTTOM)
 * buffer when the datatype is derived, and move the data to the absolute addresses. */
#include "check.h"
#include <string.h>

/* A type of `n` ints at the absolute addresses of p[0], p[2], p[4], ... */
static MPI_Datatype every_other(int *p, int n) {
    MPI_Aint disp[16];
    int bl[16];
    for (int i = 0; i < n; i++) {
        CHECK_RC(MPI_Get_address(&p[2 * i], &disp[i]));
        bl[i] = 1;
    }
    MPI_Datatype t;
    CHECK_RC(MPI_Type_create_hindexed(n, bl, disp, MPI_INT, &t));
    CHECK_RC(MPI_Type_commit(&t));
    return t;
}

/* A contiguous derived type over p[0..n) at its absolute address. */
static MPI_Datatype absolute_block(int *p, int n) {
    MPI_Aint disp;
    CHECK_RC(MPI_Get_address(p, &disp));
    MPI_Datatype t;
    CHECK_RC(MPI_Type_create_hindexed(1, &n, &disp, MPI_INT, &t));
    CHECK_RC(MPI_Type_commit(&t));
    return t;
}

int main(int argc, char **argv) {
    int rank, size;
    CHECK_RC(MPI_Init(&argc, &argv));
    CHECK_RC(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    CHECK_RC(MPI_Comm_size(MPI_COMM_WORLD, &size));
    check_rank_ = rank;
    CHECK(size <= 8);

    /* Bcast from MPI_BOTTOM (strided absolute addresses). */
    {
        int v[8];
        for (int i = 0; i < 8; i++) v[i] = rank == 0 ? 100 + i : -1;
        MPI_Datatype t = every_other(v, 4);
        CHECK_RC(MPI_Bcast(MPI_BOTTOM, 1, t, 0, MPI_COMM_WORLD));
        for (int i = 0; i < 8; i++) CHECK(v[i] == (i % 2 == 0 || rank == 0 ? 100 + i : -1));
        CHECK_RC(MPI_Type_free(&t));
    }
    if (rank == 0) printf("bcast from MPI_BOTTOM: ok\n");

    /* Gather from MPI_BOTTOM into an ordinary buffer, scatter back into MPI_BOTTOM (contiguous
     * derived types at absolute addresses; predefined reduction operations are not defined on
     * derived types, so reductions are not tried). */
    {
        int s[4], all[32], back[4];
        for (int i = 0; i < 4; i++) s[i] = 10 * rank + i;
        MPI_Datatype ts = absolute_block(s, 4), tb = absolute_block(back, 4);
        CHECK_RC(MPI_Gather(MPI_BOTTOM, 1, ts, all, 4, MPI_INT, 0, MPI_COMM_WORLD));
        if (rank == 0)
            for (int r = 0; r < size; r++)
                for (int i = 0; i < 4; i++) CHECK(all[4 * r + i] == 10 * r + i);
        if (rank == 0)
            for (int k = 0; k < 4 * size; k++) all[k] += 1;
        memset(back, 0, sizeof back);
        CHECK_RC(MPI_Scatter(all, 4, MPI_INT, MPI_BOTTOM, 1, tb, 0, MPI_COMM_WORLD));
        for (int i = 0; i < 4; i++) CHECK(back[i] == 10 * rank + i + 1);
        CHECK_RC(MPI_Type_free(&ts));
        CHECK_RC(MPI_Type_free(&tb));
    }
    if (rank == 0) printf("gather and scatter with MPI_BOTTOM: ok\n");

    /* Allreduce in place at MPI_BOTTOM (both buffers of a reduction share the datatype, so
     * only MPI_IN_PLACE can pair with MPI_BOTTOM). A predefined operation on a derived type
     * of one basic type is accepted by oxmpi and refused by MPICH and Open MPI, hence
     * MPI_ERRORS_RETURN and the two possible lines. */
    {
        int r[4], expect[4];
        for (int i = 0; i < 4; i++) r[i] = rank + i;
        for (int i = 0; i < 4; i++) expect[i] = size * (size - 1) / 2 + size * i;
        MPI_Datatype tr = absolute_block(r, 4);
        CHECK_RC(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
        int rc = MPI_Allreduce(MPI_IN_PLACE, MPI_BOTTOM, 1, tr, MPI_SUM, MPI_COMM_WORLD);
        if (rc == MPI_SUCCESS) {
            for (int i = 0; i < 4; i++) CHECK(r[i] == expect[i]);
            if (rank == 0) printf("allreduce in place at MPI_BOTTOM: ok\n");
        } else if (rank == 0) {
            printf("allreduce in place at MPI_BOTTOM: operation refused on a derived type\n");
        }
        CHECK_RC(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));
        CHECK_RC(MPI_Type_free(&tr));
    }

    /* Allgather into MPI_BOTTOM: rank i's int lands at v[2 * i] (one int at the absolute
     * address of v[0], its extent resized to two ints). */
    {
        int v[16], mine = 10 * rank + 1;
        for (int i = 0; i < 16; i++) v[i] = -1;
        MPI_Aint base;
        CHECK_RC(MPI_Get_address(v, &base));
        MPI_Datatype at, atr;
        int bl = 1;
        CHECK_RC(MPI_Type_create_hindexed(1, &bl, &base, MPI_INT, &at));
        CHECK_RC(MPI_Type_create_resized(at, base, 2 * sizeof(int), &atr));
        CHECK_RC(MPI_Type_commit(&atr));
        CHECK_RC(MPI_Allgather(&mine, 1, MPI_INT, MPI_BOTTOM, 1, atr, MPI_COMM_WORLD));
        for (int i = 0; i < size; i++) CHECK(v[2 * i] == 10 * i + 1 && v[2 * i + 1] == -1);
        CHECK_RC(MPI_Type_free(&at));
        CHECK_RC(MPI_Type_free(&atr));
    }
    if (rank == 0) printf("allgather into MPI_BOTTOM: ok\n");

    /* Ibcast and Iallgather with MPI_BOTTOM. */
    {
        int v[8], w = 3 * rank, all[8];
        for (int i = 0; i < 8; i++) v[i] = rank == size - 1 ? 7 * i : -1;
        MPI_Datatype t = every_other(v, 4), tw = absolute_block(&w, 1);
        MPI_Request q[2];
        MPI_Status sts[2];
        CHECK_RC(MPI_Ibcast(MPI_BOTTOM, 1, t, size - 1, MPI_COMM_WORLD, &q[0]));
        CHECK_RC(MPI_Iallgather(MPI_BOTTOM, 1, tw, all, 1, MPI_INT, MPI_COMM_WORLD, &q[1]));
        CHECK_RC(MPI_Waitall(2, q, sts));
        for (int i = 0; i < 8; i += 2) CHECK(v[i] == 7 * i);
        for (int r = 0; r < size; r++) CHECK(all[r] == 3 * r);
        CHECK_RC(MPI_Type_free(&t));
        CHECK_RC(MPI_Type_free(&tw));
    }
    if (rank == 0) printf("ibcast and iallgather with MPI_BOTTOM: ok\n");

    /* Neighbour allgather on a periodic ring, send and receive at MPI_BOTTOM. */
    {
        MPI_Comm ring;
        int dims[1] = {size}, periods[1] = {1};
        CHECK_RC(MPI_Cart_create(MPI_COMM_WORLD, 1, dims, periods, 0, &ring));
        int mine[1] = {rank + 1000}, got[4] = {-1, -1, -1, -1};
        MPI_Datatype ts = absolute_block(mine, 1);
        /* Two neighbour blocks of one int each, at got[0] and got[2]. */
        MPI_Aint g0, g2;
        CHECK_RC(MPI_Get_address(&got[0], &g0));
        CHECK_RC(MPI_Get_address(&got[2], &g2));
        MPI_Datatype blk, blkr;
        int one = 1;
        CHECK_RC(MPI_Type_create_hindexed(1, &one, &g0, MPI_INT, &blk));
        CHECK_RC(MPI_Type_create_resized(blk, g0, g2 - g0, &blkr));
        CHECK_RC(MPI_Type_commit(&blkr));
        CHECK_RC(MPI_Neighbor_allgather(MPI_BOTTOM, 1, ts, MPI_BOTTOM, 1, blkr, ring));
        int left = (rank - 1 + size) % size, right = (rank + 1) % size;
        CHECK(got[0] == left + 1000 && got[2] == right + 1000);
        CHECK(got[1] == -1 && got[3] == -1);
        CHECK_RC(MPI_Type_free(&ts));
        CHECK_RC(MPI_Type_free(&blk));
        CHECK_RC(MPI_Type_free(&blkr));
        CHECK_RC(MPI_Comm_free(&ring));
    }
    if (rank == 0) printf("neighbor_allgather with MPI_BOTTOM: ok\n");

    CHECK_RC(MPI_Finalize());
    if (rank == 0) printf("bottom: all checks passed\n");
    return 0;
}
